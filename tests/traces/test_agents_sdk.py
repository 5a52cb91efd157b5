"""Trajectories from an agent built with the OpenAI Agents SDK (``openai-agents``) and traced by
``openinference-instrumentation-openai-agents``: two agents (``triage`` with the function tool
``search_flights`` and a handoff to ``booking``, which has ``book_flight``), served over HTTP
(tests/fixtures/otel_agents_sdk_agent.py), their model the scripted loopback server
(tests/servers/tool_model.py) through Chat Completions, spans exported OTLP/HTTP protobuf to the receiver of
an ``evalgate run`` (the CLI). What the real instrumentation emits, and what evalgate must make of it, is
in docs/traces.md ("The OpenAI Agents SDK")."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.servers.tool_model import ToolModelServer
from tests.support.ports import free_port
from tests.support.traced_agent import run_against_agent, traced_env

REPO = Path(__file__).resolve().parents[2]
AGENT = REPO / "tests" / "fixtures" / "otel_agents_sdk_agent.py"
PLAN = [("search_flights", {"origin": "LON", "destination": "PAR"}), ("transfer_to_booking", {}),
        ("book_flight", {"flight": "BA117"})]
CASES = """
cases:
  - id: book
    input: Book a flight from London to Paris
    agents_should_include: [triage, booking]
    tools_should_include: [search_flights, book_flight]
    trajectory:
      tools: [search_flights, book_flight]
      order: exact
      arguments:
        - {tool: search_flights, match: {origin: LON}, regex: {destination: "^PA"}}
        - {tool: book_flight, match: {flight: BA117}}
      max_tool_calls: 2
      max_llm_calls: 4
      max_tokens: 112
      no_failed_tools: true
  - id: backwards
    input: Book a flight from London to Paris
    trajectory:
      tools: [book_flight, search_flights]
      order: exact
"""


def test_an_agents_sdk_agent_is_read_from_its_openinference_spans(tmp_path: Path) -> None:
    traces_port = free_port()
    env = traced_env(os.environ, traces_port)
    env.pop("OPENAI_API_KEY", None)
    (tmp_path / "cases.yaml").write_text(CASES)
    port_file = tmp_path / "port"
    with ToolModelServer(PLAN) as model:
        run = run_against_agent([str(AGENT), model.base_url, str(port_file)], port_file, tmp_path, env, traces_port)
    # the SDK's own exporter (traces to OpenAI's platform) was replaced: OpenInference's is the only processor
    assert json.loads(Path(f"{port_file}.processors").read_text()) == ["OpenInferenceTracingProcessor"]
    assert run.returncode == 1, run.stdout + run.stderr  # the second case's order is wrong, the first passes
    results = {r["id"]: r for r in json.loads((tmp_path / "out" / "results.json").read_text())["results"]}
    for result in results.values():  # both calls ran the same plan, each under its own trace id
        trace = result["answer"]["trace"]
        assert trace["agents"] == ["triage", "booking"]  # not the workflow span around them
        assert trace["tools_from"] == "tool_spans"
        assert [(t["name"], t["arguments"]) for t in trace["tools"]] == [
            ("search_flights", {"origin": "LON", "destination": "PAR"}), ("book_flight", {"flight": "BA117"})]
        assert trace["tool_calls"] == 2 and trace["failed_tools"] == 0
        assert trace["llm_call_count"] == 4  # search, hand off, book, answer
        assert trace["steps"] == 6
        assert trace["tokens"] == {"input": 80, "output": 32, "total": 112}
        assert {(c["model"], c["provider"]) for c in trace["llm_calls"]} == {("tool-model-1", "openai")}
        kinds = {(row["name"], row["kind"]) for row in trace["tree"]}
        assert ("handoff to booking", "handoff") in kinds and ("flight desk", "workflow") in kinds
        assert trace["tree"][0]["depth"] == 0 and trace["tree"][0]["name"] == "flight desk"
    book = results["book"]["metrics"]
    assert book["trajectory"]["status"] == "passed" and book["workflow"]["status"] == "passed"
    assert book["workflow"]["details"]["agents"]["source"] == "trace"
    backwards = results["backwards"]["metrics"]["trajectory"]
    assert backwards["status"] == "failed"
    assert backwards["details"]["reason"] == ("call 1 is search_flights, expected book_flight: expected book_flight → "
                                              "search_flights (exact), got search_flights → book_flight")
