"""Trajectories from real instrumentation, not our fakes: an agent on the official ``openai`` SDK with
tool calls, instrumented once with opentelemetry-instrumentation-openai-v2 (GenAI conventions, message
content captured so the requested tool calls are recorded) and once with openinference-instrumentation-openai,
exporting OTLP/HTTP protobuf with opentelemetry-sdk + opentelemetry-exporter-otlp-proto-http to the
receiver of an ``evalgate run`` (the CLI, as a user runs it). The model is a scripted loopback server
(tests/servers/tool_model.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.servers.tool_model import ToolModelServer
from tests.support.ports import free_port
from tests.support.traced_agent import run_against_agent, traced_env

REPO = Path(__file__).resolve().parents[2]
AGENT = REPO / "tests" / "fixtures" / "otel_openai_agent.py"
PLAN = [("search_flights", {"origin": "LON", "destination": "PAR"}), ("book_flight", {"flight": "BA117"})]
CASES = """
cases:
  - id: book
    input: Book a flight from London to Paris
    tools_should_include: [search_flights, book_flight]
    trajectory:
      tools: [search_flights, book_flight]
      order: exact
      arguments:
        - {tool: book_flight, match: {flight: BA117}}
        - {tool: search_flights, regex: {destination: "^PA"}}
      max_llm_calls: 3
      max_tokens: 84
"""


@pytest.mark.parametrize("flavour", ["genai", "openinference"])
def test_real_instrumentation_feeds_the_trajectory(flavour: str, tmp_path: Path) -> None:
    traces_port = free_port()
    env = {**traced_env(os.environ, traces_port), "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
           "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"}
    (tmp_path / "cases.yaml").write_text(CASES)
    with ToolModelServer(PLAN) as model:
        port_file = tmp_path / "port"
        run = run_against_agent([str(AGENT), flavour, model.base_url, str(port_file)], port_file, tmp_path, env,
                                traces_port)
    assert run.returncode == 0, run.stdout + run.stderr
    (result,) = json.loads((tmp_path / "out" / "results.json").read_text())["results"]
    trace = result["answer"]["trace"]
    assert trace["tools_from"] == "llm_tool_calls"
    assert [t["name"] for t in trace["tools"]] == ["search_flights", "book_flight"]
    assert trace["tools"][1]["arguments"] == {"flight": "BA117"}
    assert trace["llm_call_count"] == 3  # two tool-call replies and the final answer
    assert trace["tokens"] == {"input": 60, "output": 24, "total": 84}
    provider = "openai"
    assert {call["provider"] for call in trace["llm_calls"]} == {provider}
    assert {call["model"] for call in trace["llm_calls"]} == {"tool-model-1"}
    assert result["metrics"]["trajectory"]["status"] == "passed"
    assert result["metrics"]["workflow"]["details"]["tools"]["source"] == "trace"
