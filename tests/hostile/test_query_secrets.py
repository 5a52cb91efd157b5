"""Issue #22, item 4: a secret in a URL's query (``target_url: …/chat?api_key=…``) reaches no output.

The agent needs the key in its query and gets it; it echoes the URL it was called with in its answers
and in an error body, and one more run finds the target unreachable (evalgate's own error message then
names the URL). Every output is searched: stdout, stderr, results.json, the SQLite files, the reports,
and in the Action the log lines (``::error`` included), the step outputs, the job summary and the PR
comment."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from evalgate.cli.action import run_action
from evalgate.safety import redact as redact_module
from evalgate.safety.redact import is_secret_header, redact
from tests.hostile.helpers import run_cli, write_cases
from tests.hostile.servers import Loopback, Out, Seen

QUERY_KEY = "qk_Lp4Xw9Rz2Nm7Tb3Vc8Hy"
SIGNATURE = "sg_Vb8Mn3Qw7Rt2Zx9Lp4Kd"
X_AUTH = "xa_Rt5Yw8Pl2Kj6Hg3Fd9Sa"
APIM_KEY = "ap_Mn7Bv4Cx1Zq8Wl3Er6Ty"
FORMS = (QUERY_KEY, SIGNATURE, QUERY_KEY[:12], SIGNATURE[:12], X_AUTH, APIM_KEY)


def agent(seen: Seen) -> Out:
    message = seen.json().get("message", "")
    if message == "fail":
        return Out(f"upstream refused {seen.path}", status=500)
    headers = f"{seen.headers.get('x-auth')} {seen.headers.get('ocp-apim-subscription-key')}"
    return Out({"response": f"The answer (called as {seen.path} with {headers})", "sources": [seen.path]})


def github(seen: Seen) -> Out:
    if seen.method == "GET":
        return Out([])
    return Out({"id": 1, "html_url": "https://github.invalid/o/r/pull/7#issuecomment-1"}, status=201)


CASES = [{"id": "echo", "input": "question", "expected_keywords": ["answer"]},
         {"id": "fail", "input": "fail", "expected_keywords": ["answer"]}]


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redact_module, "_registered", set())


def url(base: str) -> str:
    return f"{base}/chat?api_key={QUERY_KEY}&region=eu&X-Amz-Signature={SIGNATURE}"


def files_under(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()}


def leaks(outputs: dict[str, bytes]) -> list[str]:
    return [f"{form} in {where}" for where, data in outputs.items() for form in FORMS if form.encode() in data]


def test_the_redaction_rule() -> None:
    text = "GET https://h/x?api_key=abc123&apikey=zz9&token=t0k&sig=s1&signature=s2&password=p&secret=q&page=2&key=k"
    assert redact(text) == ("GET https://h/x?api_key=***&apikey=***&token=***&sig=***&signature=***&password=***"
                            "&secret=***&page=2&key=***")
    assert all(is_secret_header(name) for name in ("X-Auth", "Ocp-Apim-Subscription-Key", "Cookie", "X-Goog-Api-Key"))
    assert not any(is_secret_header(name) for name in ("Content-Type", "Accept", "X-Request-Id"))


def test_a_query_key_reaches_no_output_of_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Literal ``X-Auth`` and ``Ocp-Apim-Subscription-Key`` header values too: the CLI's header rule is
    the Action's."""
    monkeypatch.setenv("EVALGATE_TARGET_HEADERS", json.dumps({"X-Auth": X_AUTH, "Ocp-Apim-Subscription-Key": APIM_KEY}))
    dataset = write_cases(tmp_path / "cases.json", CASES)
    out = tmp_path / "out"
    with Loopback(agent) as server:
        ran = run_cli(["run", "--dataset", str(dataset), "--target", "http", "--target-url", url(server.url),
                       "--api-retries", "0"], out)
        paths = {seen.path for seen in server.seen}
        sent = {seen.headers.get("x-auth") for seen in server.seen}
    assert ran.code == 1, ran.err
    assert all(QUERY_KEY in path for path in paths) and sent == {X_AUTH}  # the agent got its credentials
    reports = tmp_path / "reports"
    reports.mkdir()
    for fmt in ("html", "markdown"):
        assert run_cli(["report", str(out / "results.json"), "--format", fmt, "--output",
                        str(reports / f"r.{fmt}")]).code == 0
    outputs = {"stdout": ran.out.encode(), "stderr": ran.err.encode(), **files_under(out), **files_under(reports)}
    assert "api_key=***" in ran.results()["results"][0]["output"]
    assert leaks(outputs) == []


def test_a_query_key_reaches_no_output_of_the_action(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workspace, temp = tmp_path / "ws", tmp_path / "temp"
    commands = temp / "_runner_file_commands"
    commands.mkdir(parents=True)
    write_cases(workspace / "evals" / "cases.json", CASES)
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 7, "base": {"ref": "main"}, "head": {"ref": "x"}},
                                 "number": 7}))
    with socket.socket() as closed:  # a port nobody listens on
        closed.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{closed.getsockname()[1]}"
    lines: list[str] = []
    comments: list[bytes] = []
    with Loopback(agent) as server, Loopback(github) as api:
        for target in (server.url, dead):
            for name in ("set_output_1", "step_summary_1"):
                (commands / name).write_text("")
            env = {"GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(workspace), "RUNNER_TEMP": str(temp),
                   "GITHUB_OUTPUT": str(commands / "set_output_1"), "GITHUB_STEP_SUMMARY": str(commands / "step_summary_1"),
                   "GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": str(event), "GITHUB_REPOSITORY": "o/r",
                   "GITHUB_API_URL": api.url, "GITHUB_SERVER_URL": "https://github.invalid", "GITHUB_RUN_ID": "1",
                   "INPUT_GITHUB-TOKEN": "ghs_" + "T0kenValue9" * 3, "INPUT_DATASET": "evals",
                   "INPUT_UPLOAD-ARTIFACTS": "false", "INPUT_COMMENT": "always", "INPUT_BASELINE": "none",
                   "INPUT_PROGRESS": "plain", "INPUT_TARGET": "http", "INPUT_TARGET-URL": url(target),
                   "INPUT_API-RETRIES": "0"}
            code = run_action(env, emit=lines.append)
            assert code == (1 if target == server.url else 2), lines
            comments += [seen.body for seen in api.seen if seen.method in ("POST", "PATCH")]
            files = files_under(temp)
            assert "X-Amz-Signature=***" in files["_runner_file_commands/set_output_1"].decode() or target == dead
    captured = capsys.readouterr()
    assert comments and any(line.startswith("::error") and "127.0.0.1" in line for line in lines)
    shown = "\n".join(line for line in lines if not line.startswith("::add-mask::"))
    outputs = {"log lines": shown.encode(), "stdout": captured.out.encode(), "stderr": captured.err.encode(),
               "PR comment": b"\n".join(comments), **files_under(temp), **files_under(workspace / "evalgate-results")}
    assert leaks(outputs) == []


def test_a_crash_log_goes_to_the_output_directory_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #22: the traceback of a crash is written into the run's output directory (never a shared
    /tmp file), and a URL's query key in the exception is redacted there and on stderr."""
    from evalgate.runner import run as run_module

    def crash(*args: object, **kwargs: object) -> None:
        raise RuntimeError(f"bug while calling https://agent.invalid/chat?api_key={QUERY_KEY}")

    monkeypatch.setattr(run_module, "prepare", crash)
    dataset = write_cases(tmp_path / "cases.json", CASES)
    ran = run_cli(["run", "--dataset", str(dataset)], tmp_path / "out")
    assert ran.code == 1
    log = tmp_path / "out" / "evalgate-crash.log"
    assert f"traceback in {log}" in ran.err
    text = log.read_text()
    assert "RuntimeError" in text and "api_key=***" in text
    assert leaks({"stderr": ran.err.encode(), "log": text.encode()}) == []
