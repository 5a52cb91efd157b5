"""examples/otel-agent/run.sh as CI runs it: exit 0 as shipped; with BREAK=order the agent books before it
searches and the run exits 1 naming the tool, with the expected and actual sequences on one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evalgate.report.html import render_html
from evalgate.report.markdown import render_comment

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "otel-agent" / "run.sh"


@pytest.mark.parametrize(("breakage", "status"), [("", 0), ("order", 1)])
def test_otel_agent_example(breakage: str, status: int, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHON": sys.executable, "BREAK": breakage, "RESULTS_DIR": str(tmp_path)}
    run = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=180, env=env)
    output = run.stdout + run.stderr
    assert run.returncode == status, output
    if breakage:
        line = ("book_flight not called after search_flights: expected search_flights → book_flight "
                "(subsequence), got book_flight → search_flights")
        assert line in output
        document = json.loads((tmp_path / "results.json").read_text())
        comment = render_comment(document, run_url=None, artifact_url=None, tag="t")
        escaped = line.replace("_", "\\_")  # markdown-escaped in the comment
        assert any(escaped in row for row in comment.splitlines())  # expected vs actual, on one line
        html = render_html(document)
        # the span tree: the agent span with its tools and LLM calls indented below it
        assert "<pre class=\"trace\">travel-agent  [agent]" in html
        assert "\n  book_flight  [tool]" in html and "\n  chat scripted-planner-1  [LLM]" in html
    else:
        assert "receiving OpenTelemetry traces" in output


def test_a_conversations_turns_are_traced_one_by_one(tmp_path: Path) -> None:
    """A conversation case against the example agent: each turn's call carries its own traceparent, each turn's
    tools are checked on its own trace, and the conversation's trajectory on all of them in order."""
    import socket

    here = SCRIPT.parent
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        traces_port = sock.getsockname()[1]
    (tmp_path / "cases.yaml").write_text(
        "cases:\n"
        "  - id: trip\n"
        "    turns:\n"
        "      - {user: Book me a flight from London to Paris, tools_should_include: [search_flights, book_flight]}\n"
        "      - {user: What is the weather in Paris?, tools_should_include: [get_weather]}\n"
        "    trajectory: {tools: [search_flights, book_flight, get_weather], order: exact, max_llm_calls: 4}\n")
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{traces_port}"}
    port_file = tmp_path / "port"
    agent = subprocess.Popen([sys.executable, str(here / "agent.py"), "--port", "0", "--port-file", str(port_file)],
                             env=env)
    try:
        for _ in range(300):
            if port_file.exists() and port_file.read_text():
                break
            import time

            time.sleep(0.1)
        run = subprocess.run(
            [sys.executable, "-m", "evalgate", "run", "-d", "cases.yaml", "--target", "http", "--target-url",
             f"http://127.0.0.1:{port_file.read_text()}/chat", "--traces", "--traces-port", str(traces_port),
             "--progress", "none", "--output-dir", "out"], cwd=tmp_path, capture_output=True, text=True,
            timeout=120, env=env)
    finally:
        agent.terminate()
        agent.wait(timeout=30)
    assert run.returncode == 0, run.stdout + run.stderr
    (case,) = json.loads((tmp_path / "out" / "results.json").read_text())["results"]
    trace = case["answer"]["trace"]
    assert trace["traces"] == 2
    assert [(t["name"], t["turn"]) for t in trace["tools"]] == [
        ("search_flights", 0), ("book_flight", 0), ("get_weather", 1)]
    assert case["metrics"]["trajectory"]["status"] == "passed"
