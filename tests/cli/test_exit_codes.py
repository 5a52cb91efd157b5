"""One exit-status rule for every outcome, and results.json's ``gate.exit_code`` always equal to it:
0 passed, 1 gate failed (errored cases and a target answering with errors included; a crash too),
2 configuration error or an endpoint that cannot be reached before any case runs (one line, no
results), 130 interrupted (tests/runner/test_cancel.py). The Action step and its ``exit-code`` output follow it."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from evalgate.cli.action import run_action
from evalgate.cli.main import main as cli_main
from tests.servers.agent_server import AgentServer, Fault
from tests.servers.openai_server import OpenAIServer

REPO = Path(__file__).resolve().parents[2]
CHAT = "/api/agent/chat"


def dataset(tmp_path: Path, count: int = 3, **extra: str) -> Path:
    path = tmp_path / "cases.json"
    path.write_text(json.dumps([{"id": f"c{i}", "input": f"question {i}", "expected_keywords": ["answer"], **extra}
                                for i in range(count)]))
    return path


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def results(out: Path) -> dict:
    return json.loads((out / "results.json").read_text())


def test_a_target_answering_500_to_every_call_fails_the_gate_with_exit_1(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with AgentServer({"question": "the answer"}, faults=[Fault(status=500)]) as agent:
        done = subprocess.run(
            [sys.executable, "-m", "evalgate", "run", "-d", str(dataset(tmp_path)), "--target", "http",
             "--target-url", agent.base_url + CHAT, "--api-retries", "1", "--output-dir", str(out),
             "--progress", "none"], cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
        calls = agent.stats()["paths"][CHAT]
    assert done.returncode == 1, done.stderr
    assert calls == {"500": 6}  # 3 cases × 2 attempts: reached, answered with errors
    document = results(out)
    assert document["status"] == "completed"
    assert document["gate"]["exit_code"] == 1 and document["gate"]["passed"] is False
    assert "3 case(s) errored (allowed: 0)" in document["gate"]["reasons"]
    assert all(r["status"] == "errored" and "HTTP 500" in r["error"] for r in document["results"])
    assert "never answered" not in done.stderr


def test_errored_cases_within_max_errored_pass_with_exit_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    with AgentServer({"question": "the answer"}, faults=[Fault(status=500, contains="question 1")]) as agent:
        code = cli_main(["run", "-d", str(dataset(tmp_path)), "--target", "http", "--target-url",
                         agent.base_url + CHAT, "--api-retries", "0", "--max-errored", "1", "-o", str(out),
                         "--progress", "none"])
    assert code == 0 == results(out)["gate"]["exit_code"]
    assert results(out)["summary"]["total_errored"] == 1


def test_an_unreachable_target_is_exit_2_with_one_line_and_no_results(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    url = f"http://127.0.0.1:{closed_port()}{CHAT}"
    code = cli_main(["run", "-d", str(dataset(tmp_path)), "--target", "http", "--target-url", url,
                     "-o", str(out), "--progress", "none"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"evalgate: error: target_url: cannot reach the target at {url}: connection refused")
    assert not (out / "results.json").exists() and not (out / "results.db").exists()


def test_an_unreachable_judge_is_exit_2_before_any_case(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCAL_JUDGE_API_KEY", "sk-local")
    out = tmp_path / "out"
    judge_url = f"http://127.0.0.1:{closed_port()}/v1"
    with AgentServer({"question": "the answer"}) as agent:
        code = cli_main(["run", "-d", str(dataset(tmp_path, passing_criteria="answers")), "--target", "http",
                         "--target-url", agent.base_url + CHAT, "--judge-provider", "local", "--judge-base-url",
                         judge_url, "-o", str(out), "--progress", "none"])
        served = agent.stats()["total"]
    err = capsys.readouterr().err
    assert code == 2 and served == 0
    assert f"judge_base_url: cannot reach the judge (local) at {judge_url}: connection refused" in err
    assert err.count("\n") == 1


def test_a_reachable_judge_answering_errors_is_not_a_configuration_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """HTTP errors mean the endpoint was reached: the run goes ahead (what the gate then says about
    unscored judged metrics is the judge's business), and the exit status is results.json's."""
    from tests.servers.openai_server import Rule

    monkeypatch.setenv("LOCAL_JUDGE_API_KEY", "sk-local")
    out = tmp_path / "out"
    with AgentServer({"question": "the answer"}) as agent, OpenAIServer(script=[Rule(status=503)]) as judge:
        code = cli_main(["run", "-d", str(dataset(tmp_path, passing_criteria="answers")), "--target", "http",
                         "--target-url", agent.base_url + CHAT, "--judge-provider", "local", "--judge-base-url",
                         judge.base_url + "/v1", "--api-retries", "0", "-o", str(out), "--progress", "none"])
    assert code in (0, 1) and code == results(out)["gate"]["exit_code"]
    assert results(out)["status"] == "completed"


def test_a_crash_is_exit_1_and_results_say_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    def broken(self: object, case: object, repeat: int = 0) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr("evalgate.runner.engine.Engine.evaluate", broken)
    out = tmp_path / "out"
    code = cli_main(["run", "-d", str(REPO / "datasets" / "brand-mentions"), "-o", str(out), "--progress", "none"])
    assert code == 1 == results(out)["gate"]["exit_code"]
    assert results(out)["status"] == "crashed"
    assert "internal error: RuntimeError: a bug" in capsys.readouterr().err


def test_a_reporter_failure_after_the_results_keeps_the_verdicts_exit_status(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("reporter bug")

    monkeypatch.setattr("evalgate.report.console.render_report", broken)
    out = tmp_path / "out"
    code = cli_main(["run", "-d", str(REPO / "datasets" / "brand-mentions"), "-o", str(out), "--progress", "none"])
    assert code == 0 == results(out)["gate"]["exit_code"]
    assert "while printing the report" in capsys.readouterr().err


def action_env(tmp_path: Path, **inputs: str) -> dict[str, str]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = {"GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(workspace), "GITHUB_EVENT_NAME": "push",
           "GITHUB_OUTPUT": str(tmp_path / "output.txt"), "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
           "GITHUB_REPOSITORY": "octo/demo", "INPUT_UPLOAD-ARTIFACTS": "false", "INPUT_COMMENT": "never",
           "INPUT_PROGRESS": "none"}
    env.update({f"INPUT_{name.upper().replace('_', '-')}": value for name, value in inputs.items()})
    return env


def step_output(tmp_path: Path, name: str) -> str:
    lines = (tmp_path / "output.txt").read_text().splitlines()
    for index, line in enumerate(lines):
        if line == f"{name}=" or line.startswith(f"{name}="):
            return line.split("=", 1)[1]
        if line.startswith(f"{name}<<"):
            return lines[index + 1]
    raise AssertionError(f"no output {name}")


def test_the_action_step_follows_the_same_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with AgentServer({"question": "the answer"}, faults=[Fault(status=500)]) as agent:
        env = action_env(tmp_path, target="http", target_url=agent.base_url + CHAT, api_retries="0",
                         baseline="none")
        env["INPUT_DATASET"] = str(dataset(Path(env["GITHUB_WORKSPACE"])))  # the Action reads inside its workspace
        code = run_action(env, emit=lambda line: None)
    assert code == 1 and step_output(tmp_path, "exit-code") == "1"
    assert results(Path(env["GITHUB_WORKSPACE"]) / "evalgate-results")["gate"]["exit_code"] == 1

    unreachable = tmp_path / "unreachable"
    unreachable.mkdir()
    env = action_env(unreachable, target="http", target_url=f"http://127.0.0.1:{closed_port()}{CHAT}",
                     baseline="none")
    env["INPUT_DATASET"] = str(dataset(Path(env["GITHUB_WORKSPACE"])))
    lines: list[str] = []
    code = run_action(env, emit=lines.append)
    assert code == 2 and step_output(unreachable, "exit-code") == "2"
    assert any(line.startswith("::error") and "cannot reach the target" in line for line in lines)
