"""Item 2 of issue #12: nine forms of a secret, planted where a run meets them, appear in no output.

The forms: a provider key from the environment and a 25-character piece of it (a provider error cut at
300 characters), a target header value substituted from ``${AGENT_TOKEN}``, a literal ``Cookie`` header,
the password of ``target_url``'s ``user:password@`` (percent-encoded in the URL), the base64 ``Basic``
form of those credentials, the password of ``judge_base_url``, a secret-named ``eval_context`` value
(``session_token``) and an unrelated secret-named variable of the environment (``BILLING_SERVICE_TOKEN``).

A loopback agent echoes every one of them in its answers, its list fields and its error bodies, and a
loopback judge quotes its credentials in its verdicts and the key in a provider error; the run's every
output is then searched byte for byte: stdout, stderr, results.json, the SQLite files, the judge cache,
the seed-shaped documents, the HTML and Markdown reports, and in the Action the step outputs, the job
summary, the log lines (annotations included) and the PR comment."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli.action import run_action
from evalgate.safety import redact as redact_module
from tests.hostile.helpers import run_cli, write_cases
from tests.hostile.servers import Loopback, Out, Seen, chat_completion

KEY = "sk-hostile-Zq8rT2vLx9Pw4Kd7Nm3Bc6Hy1Fj5Gs0"
AGENT_TOKEN = "agt_9fK2pQ7xL4mN8vR3tW6yB1cD"
COOKIE = "sid=Ck7Lw2Qx9Vb4Nz8Rt3Ym6Pa1"
AGENT_USER, AGENT_PASSWORD = "agentbot", "p@Ss-9vXq2Lr7Tk4"
BASIC = base64.b64encode(f"{AGENT_USER}:{AGENT_PASSWORD}".encode()).decode()
JUDGE_USER, JUDGE_PASSWORD = "judgeuser", "Jd-4mQ8wE2rT6yU0"
SESSION_TOKEN = "sess-7Hk2Lp9Qw4Xz8Nc3Vb6"
BILLING = "bst_Qm4Wx8Rz2Lk6Tp9Vn3Ja5"
FORMS = {
    "provider key": KEY,
    "25 characters of the provider key": KEY[:25],
    "header value from ${AGENT_TOKEN}": AGENT_TOKEN,
    "Cookie header": COOKIE,
    "target_url password": AGENT_PASSWORD,
    "Basic form of target_url credentials": BASIC,
    "judge_base_url password": JUDGE_PASSWORD,
    "eval_context session_token": SESSION_TOKEN,
    "secret-named environment variable": BILLING,
}
ALSO_ABSENT = ["p%40Ss-9vXq2Lr7Tk4", BASIC.rstrip("="), base64.b64encode(f"{JUDGE_USER}:{JUDGE_PASSWORD}".encode()).decode(),
               KEY[:20], f"{AGENT_USER}:{AGENT_PASSWORD}"]


def agent(seen: Seen) -> Out:
    """Echo every credential it was sent and every secret it knows, in text, lists and errors."""
    message = seen.json().get("message", "")
    authorization = seen.headers.get("authorization", "")
    decoded = base64.b64decode(authorization.removeprefix("Basic ")).decode() if authorization else ""
    echoed = (f"auth={authorization} decoded={decoded} key={seen.headers.get('x-api-key')} "
              f"cookie={seen.headers.get('cookie')} context={seen.json().get('session_token')} env={KEY} {BILLING}")
    if message == "agent error":  # the excerpt of an error body is cut at 300 characters: 20 of the key stay
        return Out("e" * 280 + KEY + " " + echoed, status=500)
    return Out({"response": f"The answer. {echoed}", "sources": [KEY, BILLING, authorization],
                "tools_used": [SESSION_TOKEN], "agent_id": BILLING})


def judge(seen: Seen) -> Out:
    """A chat-completions judge that quotes its credentials, and a provider error quoting the key."""
    prompt = json.dumps(seen.json())
    authorization = seen.headers.get("authorization", "")
    if "judge error" in prompt:  # a provider's error message, cut by evalgate at 300 characters
        return Out({"error": {"message": "Incorrect API key provided: " + "x" * 247 + KEY}}, status=401)
    decoded = base64.b64decode(authorization.removeprefix("Basic ")).decode() if authorization.startswith("Basic") \
        else ""
    verdict = {"reasoning": f"I was called with {authorization} ({decoded}); the answer quoted {KEY}.", "score": 0.9}
    return Out(chat_completion(json.dumps(verdict)))


def cases() -> list[dict[str, Any]]:
    judged = {"passing_criteria": ["answers the question"], "metrics": ["relevancy"]}
    return [{"id": "echo-1", "input": "question one", **judged},
            {"id": "echo-2", "input": "question two", "expected_keywords": ["answer"], **judged},
            {"id": "agent-err", "input": "agent error", **judged},
            {"id": "judge-err", "input": "judge error", **judged}]


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """The environment of a run that meets every form; also the directory's evalgate.yaml."""
    monkeypatch.setenv("LOCAL_JUDGE_API_KEY", KEY)
    monkeypatch.setenv("AGENT_TOKEN", AGENT_TOKEN)
    monkeypatch.setenv("BILLING_SERVICE_TOKEN", BILLING)
    monkeypatch.setattr(redact_module, "_registered", set())  # nothing known from an earlier test
    return {"LOCAL_JUDGE_API_KEY": KEY, "AGENT_TOKEN": AGENT_TOKEN, "BILLING_SERVICE_TOKEN": BILLING}


def config(path: Path, agent_url: str, judge_url: str) -> Path:
    agent_with_credentials = agent_url.replace("://", f"://{AGENT_USER}:p%40Ss-9vXq2Lr7Tk4@") + "/chat"
    judge_with_credentials = judge_url.replace("://", f"://{JUDGE_USER}:{JUDGE_PASSWORD}@") + "/v1"
    path.write_text(json.dumps({
        "target": "http", "target_url": agent_with_credentials,
        "target_headers": {"X-Api-Key": "${AGENT_TOKEN}", "Cookie": COOKIE},
        "eval_context": {"session_token": SESSION_TOKEN, "language": "en"},
        "judge_provider": "local", "judge_base_url": judge_with_credentials, "judge_model": "m",
        "api_retries": 0, "compat": ["seed000", "seed001", "seed004"],
    }))
    return path


def leaks(texts: dict[str, bytes]) -> list[str]:
    found = []
    for where, data in texts.items():
        for form, value in [*FORMS.items(), *((f"also {v}", v) for v in ALSO_ABSENT)]:
            if value.encode() in data:
                found.append(f"{form} in {where}")
    return found


def files_under(directory: Path) -> dict[str, bytes]:
    return {str(path.relative_to(directory)): path.read_bytes() for path in directory.rglob("*") if path.is_file()}


def test_nine_secret_forms_reach_no_output_of_the_cli(tmp_path: Path, planted: dict[str, str]) -> None:
    dataset = write_cases(tmp_path / "cases.json", cases())
    out = tmp_path / "out"
    with Loopback(agent) as agent_server, Loopback(judge) as judge_server:
        settings_file = config(tmp_path / "evalgate.yaml", agent_server.url, judge_server.url)
        ran = run_cli(["run", "--config", str(settings_file), "--dataset", str(dataset)], out)
        agent_auth = {seen.headers.get("authorization") for seen in agent_server.seen}
        judge_auth = {seen.headers.get("authorization") for seen in judge_server.seen}
    assert ran.code in (0, 1), ran.err
    # the URLs' credentials went out as one Authorization header, never in the URL nor beside a bearer key
    assert agent_auth == {f"Basic {BASIC}"}
    assert judge_auth == {"Basic " + base64.b64encode(f"{JUDGE_USER}:{JUDGE_PASSWORD}".encode()).decode()}
    records = ran.cases()
    assert "The answer" in records["echo-1"]["output"] and "***" in records["echo-1"]["output"]
    assert records["agent-err"]["status"] == "errored" and "HTTP 500" in records["agent-err"]["error"]
    assert "judge call failed" in json.dumps(records["judge-err"]["metrics"])
    reports = tmp_path / "reports"
    reports.mkdir()
    for fmt in ("html", "markdown"):
        report = run_cli(["report", str(out / "results.json"), "--format", fmt, "--output",
                          str(reports / f"report.{fmt}")])
        assert report.code == 0, report.err
    outputs = {"stdout": ran.out.encode(), "stderr": ran.err.encode(), **files_under(out), **files_under(reports)}
    assert {"results.json", "results.db", "judge-cache.db", "evaluation.json", "seed001-summary.json",
            "seed004-results.json"} <= set(outputs)
    assert leaks(outputs) == [], leaks(outputs)
    metadata = json.dumps(ran.results()["metadata"])
    assert "agentbot" not in metadata and "judgeuser" not in metadata  # URLs are stored without userinfo


def github(seen: Seen) -> Out:
    """Just enough of the GitHub API for a PR comment: no earlier comment, the new one accepted."""
    if seen.method == "GET":
        return Out([])
    return Out({"id": 1, "html_url": "https://github.invalid/o/r/pull/7#issuecomment-1"}, status=201)


def test_nine_secret_forms_reach_no_output_of_the_action(tmp_path: Path, planted: dict[str, str],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    workspace, temp = tmp_path / "ws", tmp_path / "runner-temp"
    (temp / "_runner_file_commands").mkdir(parents=True)
    write_cases(workspace / "evals" / "cases.json", cases())
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 7, "base": {"ref": "main"}, "head": {"ref": "x"}},
                                 "number": 7}))
    lines: list[str] = []
    with Loopback(agent) as agent_server, Loopback(judge) as judge_server, Loopback(github) as api:
        config(workspace / "evalgate.yaml", agent_server.url, judge_server.url)
        env = {**planted, "GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(workspace), "RUNNER_TEMP": str(temp),
               "GITHUB_OUTPUT": str(temp / "_runner_file_commands" / "set_output_1"),
               "GITHUB_STEP_SUMMARY": str(temp / "_runner_file_commands" / "step_summary_1"),
               "GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": str(event), "GITHUB_REPOSITORY": "o/r",
               "GITHUB_API_URL": api.url, "GITHUB_SERVER_URL": "https://github.invalid", "GITHUB_RUN_ID": "1",
               "INPUT_GITHUB-TOKEN": "ghs_" + "T0kenValue9" * 3, "INPUT_DATASET": "evals",
               "INPUT_UPLOAD-ARTIFACTS": "false", "INPUT_COMMENT": "always", "INPUT_BASELINE": "none",
               "INPUT_PROGRESS": "plain"}
        code = run_action(env, emit=lines.append)
        comments = [seen.body for seen in api.seen if seen.method in ("POST", "PATCH")]
    captured = capsys.readouterr()
    assert code in (0, 1), lines
    assert comments, "the PR comment was posted"
    masks = [line for line in lines if line.startswith("::add-mask::")]  # read by the runner, never shown
    assert {f"::add-mask::{value}" for value in (KEY, AGENT_TOKEN, COOKIE, AGENT_PASSWORD, BASIC, JUDGE_PASSWORD,
                                                 SESSION_TOKEN, BILLING)} <= set(masks)
    shown = [line for line in lines if not line.startswith("::add-mask::")]
    outputs = {"log lines": "\n".join(shown).encode(), "stdout": captured.out.encode(),
               "stderr": captured.err.encode(), "PR comment": b"\n".join(comments),
               **files_under(temp), **files_under(workspace / "evalgate-results")}
    assert any(name.endswith("step_summary_1") for name in outputs) and any("set_output" in n for n in outputs)
    assert leaks(outputs) == [], leaks(outputs)
