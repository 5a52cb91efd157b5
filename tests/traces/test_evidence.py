"""Evidence from traces that can be trusted, through ``evalgate run`` against a real loopback agent that
exports with the OpenTelemetry SDK (tests/fixtures/otel_evidence_agent.py):

* a retried target call carries a fresh trace id on every attempt: the failed attempt's spans are
  counted (``failed_attempt_spans``) and never scored;
* a ``trajectory:`` case with traces on and no span is errored, never passed from the answer's own
  ``tools_used``, and its reason says which of three causes it was: no export at all; spans without this
  case's trace id (with their count); spans later than the grace time (with the grace time);
* with traces off the answer's ``tools_used`` is checked, and the details say so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.ports import free_port
from tests.support.traced_agent import run_against_agent, traced_env

REPO = Path(__file__).resolve().parents[2]
AGENT = REPO / "tests" / "fixtures" / "otel_evidence_agent.py"
CASES = """
cases:
  - id: paris
    input: Paris tomorrow
    trajectory: {tools: [get_forecast], order: exact}
  - id: rome
    input: Rome tomorrow
    trajectory: {tools: [get_forecast], order: exact}
"""


def _run(mode: str, tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]],
                                                         dict[str, Any]]:
    traces_port = free_port()
    (tmp_path / "cases.yaml").write_text(CASES)
    environment = {**traced_env(os.environ, traces_port), "EVALGATE_CONCURRENCY": "1", **env}
    port_file = tmp_path / "port"
    run = run_against_agent([str(AGENT), mode, str(port_file)], port_file, tmp_path, environment, traces_port)
    document = json.loads((tmp_path / "out" / "results.json").read_text())
    return run, document["results"], document["metadata"]


def test_a_failed_attempts_spans_are_counted_and_never_scored(tmp_path: Path) -> None:
    run, results, metadata = _run("retry", tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    for result in results:
        trace = result["answer"]["trace"]
        assert [tool["name"] for tool in trace["tools"]] == ["get_forecast"], trace
        assert trace["traces"] == 1 and trace["failed_attempts"] == 1
        assert trace["failed_attempt_spans"] == 2  # the failed attempt's request and get_weather spans
        assert result["metrics"]["trajectory"]["status"] == "passed"
    assert metadata["traces"]["failed_attempt_spans"] == 4
    assert "4 span(s) of failed target-call attempts" in run.stderr


def test_no_export_errors_the_trajectory_instead_of_trusting_the_answer(tmp_path: Path) -> None:
    run, results, _ = _run("silent", tmp_path, EVALGATE_TRACES_GRACE_SECONDS="0.2")
    assert run.returncode == 1, run.stdout + run.stderr
    for result in results:
        assert result["answer"]["tools_used"] == ["get_forecast"]  # the claim that used to pass
        entry = result["metrics"]["trajectory"]
        assert entry["status"] == "errored", entry
        assert "no span was exported" in entry["reason"] and "nothing was exported to it" in entry["reason"]
        assert "tools_used is not evidence" in entry["reason"]
        assert result["answer"]["trace"]["missing"]["cause"] == "no_export"
    assert "no span arrived at http://127.0.0.1:" in run.stderr


def test_spans_without_the_cases_trace_id_are_named_with_their_count(tmp_path: Path) -> None:
    run, results, metadata = _run("untraced", tmp_path, EVALGATE_TRACES_GRACE_SECONDS="0.2")
    assert run.returncode == 1, run.stdout + run.stderr
    first, second = results
    for result, count in ((first, 2), (second, 4)):
        entry = result["metrics"]["trajectory"]
        assert entry["status"] == "errored", entry
        assert f"{count} span(s) arrived without a trace id evalgate sent" in entry["reason"], entry
        assert "traceparent" in entry["reason"]
        assert result["answer"]["trace"]["missing"]["cause"] == "untraced"
    assert metadata["traces"]["ignored_spans"] == 4 and metadata["traces"]["late_spans"] == 0
    assert "4 span(s) carried a trace id evalgate never sent" in run.stderr


def test_late_spans_are_named_with_the_grace_time(tmp_path: Path) -> None:
    run, results, metadata = _run("late", tmp_path, EVALGATE_TRACES_GRACE_SECONDS="0")
    assert run.returncode == 1, run.stdout + run.stderr
    first, second = results
    assert first["answer"]["trace"]["missing"]["cause"] == "no_export"  # nothing had arrived yet
    entry = second["metrics"]["trajectory"]
    assert entry["status"] == "errored", entry
    assert second["answer"]["trace"]["missing"]["cause"] == "late"
    assert "within traces_grace_seconds=0" in entry["reason"]
    assert "2 span(s) of earlier cases arrived after their case was scored" in entry["reason"], entry
    assert metadata["traces"]["late_spans"] == 2
    assert "2 span(s) arrived after their case's grace time (traces_grace_seconds=0)" in run.stderr


def test_with_traces_off_the_answers_tools_are_checked_and_said_so(tmp_path: Path) -> None:
    (tmp_path / "cases.yaml").write_text("""
cases:
  - id: paris
    input: Paris tomorrow
    output: forecast
    tools_used: [get_forecast]
    trajectory: {tools: [get_forecast], order: exact}
""")
    run = subprocess.run([sys.executable, "-m", "evalgate", "run", "--dataset", "cases.yaml", "--progress", "none",
                          "--output-dir", "out"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env={**os.environ})
    assert run.returncode == 0, run.stdout + run.stderr
    (result,) = json.loads((tmp_path / "out" / "results.json").read_text())["results"]
    details = result["metrics"]["trajectory"]["details"]
    assert details["source"] == "answer" and "traces are off" in details["note"]


def test_a_model_target_sends_a_fresh_trace_id_on_each_attempt(tmp_path: Path) -> None:
    """The model (openai) target retries through the same executor: its second attempt carries another trace id."""
    from tests.servers.openai_server import OpenAIServer, Rule

    (tmp_path / "cases.yaml").write_text("cases:\n  - {id: a, input: Say hi}\n")
    with OpenAIServer([Rule(status=500, times=1), Rule(reply="hi")], api_key="sk-test-model-target") as server:
        done = subprocess.run(
            [sys.executable, "-m", "evalgate", "run", "-d", "cases.yaml", "--target", "openai", "--target-url",
             server.base_url + "/v1", "--target-model", "gpt-4o-mini", "--traces", "--traces-port", "0",
             "--progress", "none", "-o", "out"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
            env={**os.environ, "OPENAI_API_KEY": "sk-test-model-target", "EVALGATE_TRACES_GRACE_SECONDS": "0"})
        sent = [record.headers.get("traceparent") for record in server.requests()
                if record.path.endswith("/chat/completions")]
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(sent) == 2 and all(sent), sent
    assert sent[0].split("-")[1] != sent[1].split("-")[1]  # a fresh trace id for the retry
    (result,) = json.loads((tmp_path / "out" / "results.json").read_text())["results"]
    assert result["answer"]["trace"]["failed_attempts"] == 1
