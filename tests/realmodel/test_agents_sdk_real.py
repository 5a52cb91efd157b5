"""A real model behind an instrumented agent (issue #27): the OpenAI Agents SDK agent of
tests/fixtures/otel_agents_sdk_agent.py (``triage`` with ``search_flights`` and a handoff to ``booking``,
traced by openinference-instrumentation-openai-agents) on SmolLM2-135M behind llama.cpp's server with
``--chat_format chatml-function-calling``, under ``evalgate run`` with the trace receiver and a trajectory
expectation. The tiny model may or may not call the tool with the right arguments; the test asserts that
the gate tells the truth about whatever it did: the trajectory passes exactly when the trace shows
``search_flights`` called with a Paris destination, a failure names the tool, and the exit status agrees.
What the model did is in FINDINGS.md (f)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import LlamaServer, Run, free_port, run_evalgate, server_from_env

AGENT = Path(__file__).resolve().parents[1] / "fixtures" / "otel_agents_sdk_agent.py"
DATASET = """\
- id: real-search
  input: Find me flights from London to Paris.
  trajectory:
    tools: [search_flights]
    arguments:
      - {tool: search_flights, regex: {destination: "(?i)^(par|cdg|ory)"}}
"""


@pytest.fixture(scope="module")
def tool_server() -> Iterator[str]:
    """llama.cpp's server with the chat format that turns ``tools`` into a grammar-constrained choice."""
    wanted = os.environ.get("EVALGATE_REALMODEL", "").strip()
    if wanted == "0":
        pytest.skip("real-model tests disabled by EVALGATE_REALMODEL=0")
    found = server_from_env()
    if isinstance(found, str):
        if wanted == "1":
            pytest.fail(f"EVALGATE_REALMODEL=1 but {found}", pytrace=False)
        pytest.skip(found)
    server = LlamaServer(*found, threads=int(os.environ.get("EVALGATE_REALMODEL_THREADS") or 1), n_ctx=4096,
                         chat_format="chatml-function-calling")
    try:
        yield server.start()
    finally:
        server.stop()


def describe(run: Run) -> str:
    case = ((run.results or {}).get("results") or [{}])[0]
    trace = (case.get("answer") or {}).get("trace") or {}
    return (f"exit {run.returncode} after {run.seconds:.0f}s; output {case.get('output')!r}\n"
            f"tools {json.dumps(trace.get('tools'))}\nagents {trace.get('agents')} llm calls "
            f"{trace.get('llm_call_count')} tokens {trace.get('tokens')}\n"
            f"trajectory {json.dumps((case.get('metrics') or {}).get('trajectory'))}\n{run.stdout[-1500:]}{run.stderr[-1500:]}")


@pytest.mark.realmodel
@pytest.mark.timeout(120)
def test_the_gate_tells_the_truth_about_a_real_models_tool_calls(tool_server: str, tmp_path: Path) -> None:
    (tmp_path / "cases.yaml").write_text(DATASET)
    traces_port = free_port()
    port_file = tmp_path / "port"
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{traces_port}"}
    env.pop("OPENAI_API_KEY", None)
    agent = subprocess.Popen([sys.executable, str(AGENT), tool_server.removesuffix("/v1"), str(port_file),
                              "smollm2-135m", "llama"], env=env)
    try:
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text()) and time.monotonic() < deadline:
            assert agent.poll() is None, "the agent exited"
            time.sleep(0.1)
        run = run_evalgate(["-d", "cases.yaml", "--target", "http", "--target-url",
                            f"http://127.0.0.1:{port_file.read_text()}/chat", "--concurrency", "1",
                            "--api-retries", "0"],
                           workdir=tmp_path, judge_url=None, timeout=100,
                           extra_env={"EVALGATE_TRACES": "true", "EVALGATE_TRACES_PORT": str(traces_port)})
    finally:
        agent.terminate()
        agent.wait(timeout=30)
    print(describe(run))  # what the model did: FINDINGS.md (f) (pytest -s)
    assert run.results is not None and run.returncode in (0, 1), describe(run)
    assert run.results["gate"]["exit_code"] == run.returncode, describe(run)
    case = run.results["results"][0]
    trace = case["answer"]["trace"]
    # the spans came: the real model's calls with the token counts llama.cpp reported
    assert trace["spans"] > 0 and trace["llm_call_count"] >= 1 and trace["tokens"]["total"] > 0, describe(run)
    assert trace["agents"][:1] == ["triage"], describe(run)
    searched = [tool for tool in trace["tools"] if tool["name"] == "search_flights"]
    right = any(isinstance(tool["arguments"], dict)
                and re.search(r"(?i)^(par|cdg|ory)", str(tool["arguments"].get("destination", "")))
                for tool in searched)
    trajectory = case["metrics"]["trajectory"]
    assert trajectory["status"] == ("passed" if right else "failed"), describe(run)
    assert run.returncode == (0 if right else 1), describe(run)
    if not right:
        assert "search_flights" in trajectory["details"]["reason"], describe(run)
