"""evalgate/traces: OTLP parsing (JSON and protobuf built with the OpenTelemetry project's own classes),
the GenAI / OpenInference summary, the trajectory metric against hand-worked cases, the receiver over
loopback (caps, foreign trace ids, memory released per case) and the workflow metrics' trace fallback."""

from __future__ import annotations

import asyncio
import gzip
import json
import textwrap
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from evalgate.config.options import MetricOptions
from evalgate.metrics.registry import MetricContext
from evalgate.metrics.trajectory import order_problem, subset, trajectory
from evalgate.metrics.workflow import workflow
from evalgate.model import Answer, Case, MetricErrored, Trajectory
from evalgate.report.html import trace_view
from evalgate.safety.redact import register_secret
from evalgate.traces.context import CURRENT, trace_env, trace_headers
from evalgate.traces.receiver import Collector, Receiver
from evalgate.traces.spans import SpanDecodeError, parse_json, parse_protobuf
from evalgate.traces.summary import summarize
from evalgate.traces.traced import TracedTarget

TRACE = "5b8efff798038103d269b633813fc60c"
OTHER = "0af7651916cd43dd8448eb211c80319c"


def attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": str(value)}}


def json_span(span_id: str, name: str, attributes: dict[str, Any], *, parent: str = "", start: int = 1,
              end: int = 2, error: str | None = None, trace_id: str = TRACE) -> dict[str, Any]:
    span: dict[str, Any] = {"traceId": trace_id, "spanId": span_id, "parentSpanId": parent, "name": name,
                            "kind": 1, "startTimeUnixNano": str(start * 1_000_000),
                            "endTimeUnixNano": str(end * 1_000_000),
                            "attributes": [attr(k, v) for k, v in attributes.items()]}
    if error is not None:
        span["status"] = {"code": 2, "message": error}
    return span


def export(*spans: dict[str, Any]) -> dict[str, Any]:
    return {"resourceSpans": [{"resource": {"attributes": [attr("service.name", "agent")]},
                               "scopeSpans": [{"scope": {"name": "t"}, "spans": list(spans)}]}]}


GENAI = export(
    json_span("00000000000000a1", "invoke_agent planner", {"gen_ai.operation.name": "invoke_agent",
                                                            "gen_ai.agent.name": "planner"}, start=1, end=100),
    json_span("00000000000000b1", "chat gpt", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-x",
                                               "gen_ai.provider.name": "openai", "gen_ai.usage.input_tokens": 30,
                                               "gen_ai.usage.output_tokens": 5},
              parent="00000000000000a1", start=2, end=10),
    json_span("00000000000000b2", "execute_tool search", {"gen_ai.operation.name": "execute_tool",
                                                          "gen_ai.tool.name": "search",
                                                          "gen_ai.tool.call.arguments": '{"q": "Paris", "n": 3}'},
              parent="00000000000000a1", start=11, end=20),
    json_span("00000000000000b3", "execute_tool book", {"gen_ai.operation.name": "execute_tool",
                                                        "gen_ai.tool.name": "book"},
              parent="00000000000000a1", start=21, end=30, error="no seats"),
    json_span("00000000000000b4", "chat gpt", {"gen_ai.operation.name": "chat", "gen_ai.system": "openai",
                                               "gen_ai.usage.prompt_tokens": 40, "gen_ai.usage.completion_tokens": 7},
              parent="00000000000000a1", start=31, end=40),
)


def test_genai_summary_reads_agents_tools_arguments_tokens_errors_and_tree() -> None:
    summary = summarize(parse_json(json.dumps(GENAI)))
    assert summary["agents"] == ["planner"]
    assert [t["name"] for t in summary["tools"]] == ["search", "book"]
    assert summary["tools"][0]["arguments"] == {"q": "Paris", "n": 3}
    assert summary["tools"][1]["failed"] and summary["tools"][1]["error"] == "no seats"
    assert summary["tools_from"] == "tool_spans"
    assert summary["tokens"] == {"input": 70, "output": 12, "total": 82}  # 30+40, 5+7 (older spellings too)
    assert [c["provider"] for c in summary["llm_calls"]] == ["openai", "openai"]  # provider.name and system
    assert summary["llm_call_count"] == 2 and summary["tool_calls"] == 2 and summary["steps"] == 4
    assert summary["failed_tools"] == 1 and summary["errors"] == ["book: no seats"]
    assert summary["duration_ms"] == 99.0
    assert [(row["depth"], row["name"], row["kind"]) for row in summary["tree"]] == [
        (0, "planner", "agent"), (1, "chat gpt", "llm"), (1, "search", "tool"), (1, "book", "tool"),
        (1, "chat gpt", "llm")]


def test_openinference_summary_reads_tool_spans_requested_calls_and_token_counts() -> None:
    spans = export(
        json_span("00000000000000c1", "ChatCompletion", {
            "openinference.span.kind": "LLM", "llm.model_name": "m1", "llm.system": "openai",
            "llm.token_count.prompt": 11, "llm.token_count.completion": 7,
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "get_weather",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"city": "Paris"}',
            "llm.output_messages.0.message.tool_calls.1.tool_call.function.name": "get_time"}),
        json_span("00000000000000c2", "ChatCompletion", {"openinference.span.kind": "LLM",
                                                         "llm.token_count.total": 9}, start=3, end=4))
    summary = summarize(parse_json(json.dumps(spans)))
    # no TOOL span: the tools are the calls the model asked for, in order
    assert summary["tools_from"] == "llm_tool_calls"
    assert [(t["name"], t["arguments"]) for t in summary["tools"]] == [("get_weather", {"city": "Paris"}),
                                                                        ("get_time", None)]
    assert summary["tokens"] == {"input": 11, "output": 7, "total": 27}  # 11 + 7 + a total-only 9
    tool_span = export(json_span("00000000000000c3", "lookup", {"openinference.span.kind": "TOOL",
                                                               "tool.name": "lookup", "input.value": '{"id": 7}'}))
    summary = summarize(parse_json(json.dumps(tool_span)))
    assert summary["tools"][0]["name"] == "lookup" and summary["tools"][0]["arguments"] == {"id": 7}


def test_agents_sdk_workflow_and_handoff_spans_are_neither_agents_nor_tools() -> None:
    # the shapes openinference-instrumentation-openai-agents 2.6.0 writes (tests/traces/test_agents_sdk.py runs it)
    oi = "openinference.span.kind"
    spans = export(
        json_span("00000000000000d1", "flight desk", {oi: "AGENT"}, start=1, end=100),
        json_span("00000000000000d2", "triage", {oi: "AGENT", "agent.name": "triage"}, parent="00000000000000d1",
                  start=2, end=50),
        json_span("00000000000000d3", "search", {oi: "TOOL", "tool.name": "search"}, parent="00000000000000d2",
                  start=3, end=4),
        json_span("00000000000000d4", "handoff to booking", {oi: "TOOL", "input.value": "triage"},
                  parent="00000000000000d2", start=5, end=6),
        json_span("00000000000000d5", "booking", {oi: "AGENT", "agent.name": "booking"}, parent="00000000000000d1",
                  start=51, end=99),
        json_span("00000000000000d6", "handoff to x", {oi: "TOOL", "tool.name": "handoff to x"},
                  parent="00000000000000d5", start=52, end=53))
    summary = summarize(parse_json(json.dumps(spans)))
    assert summary["agents"] == ["triage", "booking"]
    assert [t["name"] for t in summary["tools"]] == ["search", "handoff to x"]  # a named tool stays a tool
    assert summary["tool_calls"] == 2 and summary["steps"] == 2
    assert [(row["depth"], row["name"], row["kind"]) for row in summary["tree"]] == [
        (0, "flight desk", "workflow"), (1, "triage", "agent"), (2, "search", "tool"),
        (2, "handoff to booking", "handoff"), (1, "booking", "agent"), (2, "handoff to x", "tool")]
    tree = trace_view(summary)["tree"].splitlines()  # the HTML report's span tree
    assert tree[0].startswith("flight desk  [workflow]") and tree[3].startswith("    handoff to booking  [handoff]")
    # an unnamed agent span with no named agent below it is an agent (named after its span), in both vocabularies
    alone = export(json_span("00000000000000e1", "planner", {oi: "AGENT"}),
                   json_span("00000000000000e2", "invoke_agent", {"gen_ai.operation.name": "invoke_agent"},
                             start=3, end=4),
                   json_span("00000000000000e3", "worker", {"gen_ai.operation.name": "invoke_agent",
                                                            "gen_ai.agent.name": "worker"},
                             parent="00000000000000e2", start=5, end=6))
    assert summarize(parse_json(json.dumps(alone)))["agents"] == ["planner", "worker"]
    # parent ids in a cycle (hostile input) end the walk
    cycle = export(json_span("00000000000000f1", "a", {oi: "AGENT"}, parent="00000000000000f2"),
                   json_span("00000000000000f2", "b", {oi: "AGENT", "agent.name": "b"}, parent="00000000000000f1"))
    assert summarize(parse_json(json.dumps(cycle)))["agents"] == ["b"]


def test_protobuf_and_json_give_the_same_spans() -> None:
    request = ExportTraceServiceRequest()
    block = request.resource_spans.add()
    kv = block.resource.attributes.add()
    kv.key, kv.value.string_value = "service.name", "agent"
    span = block.scope_spans.add().spans.add()
    span.trace_id, span.span_id = bytes.fromhex(TRACE), bytes.fromhex("00000000000000b2")
    span.parent_span_id = bytes.fromhex("00000000000000a1")
    span.name, span.kind = "execute_tool search", 1
    span.start_time_unix_nano, span.end_time_unix_nano = 11_000_000, 20_000_000
    for key, value in (("gen_ai.operation.name", "execute_tool"), ("gen_ai.tool.name", "search")):
        item = span.attributes.add()
        item.key, item.value.string_value = key, value
    item = span.attributes.add()
    item.key, item.value.int_value = "gen_ai.usage.input_tokens", 3
    item = span.attributes.add()
    item.key, item.value.string_value = "http.method", "POST"  # not read: skipped while decoding
    event = span.events.add()
    event.name = "exception"
    ev = event.attributes.add()
    ev.key, ev.value.string_value = "exception.message", "boom"
    span.status.code = 2
    (decoded,) = parse_protobuf(request.SerializeToString())
    assert (decoded.trace_id, decoded.span_id, decoded.parent_id) == (TRACE, "00000000000000b2", "00000000000000a1")
    assert decoded.attributes == {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
                                  "gen_ai.usage.input_tokens": 3}
    assert decoded.failed and decoded.exception == "boom" and decoded.service == "agent"
    assert decoded.duration_ms == 9.0
    with pytest.raises(SpanDecodeError):
        parse_protobuf(b"\xff\xff\xff")
    with pytest.raises(SpanDecodeError):
        parse_json(b'{"nothing": 1}')


def test_span_text_is_redacted_and_cut() -> None:
    secret = "sk-live-Zq81KmPw3xTbN0vY"
    register_secret(secret)
    spans = export(json_span("00000000000000d1", "execute_tool t", {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t",
        "gen_ai.tool.call.arguments": json.dumps({"token": "x" * 10, "note": f"key {secret}", "big": "y" * 5000})}))
    summary = summarize(parse_json(json.dumps(spans)))
    arguments = summary["tools"][0]["arguments"]
    assert secret not in json.dumps(summary)
    assert arguments["token"] == "***"  # a secret-looking key is masked whole
    assert len(arguments["big"]) <= 501
    huge = summarize(parse_json(json.dumps(export(json_span("00000000000000d2", "execute_tool t", {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t",
        "gen_ai.tool.call.arguments": json.dumps({f"k{i}": "v" * 400 for i in range(40)})})))))
    cut = huge["tools"][0]["arguments"]
    assert isinstance(cut, str) and len(cut) <= 2_001  # over 2,000 characters of JSON: kept as cut text


@pytest.mark.parametrize(("expected", "actual", "order", "problem"), [
    (["a", "b"], ["a", "x", "b"], "subsequence", None),
    (["a", "b"], ["b", "a"], "subsequence", "b not called after a"),
    (["a", "b"], ["a"], "subsequence", "b not called"),
    (["A", "b"], ["a", "b"], "exact", None),
    (["a", "b"], ["a", "x", "b"], "exact", "call 2 is x, expected b"),
    (["a"], ["a", "a"], "exact", "unexpected call 2: a"),
    (["b", "a"], ["a", "b"], "any", None),
    (["a", "c"], ["a", "b"], "any", "c not called"),
])
def test_tool_order(expected: list[str], actual: list[str], order: str, problem: str | None) -> None:
    assert order_problem(expected, actual, order) == problem


def test_subset_match() -> None:
    assert subset({"a": 1, "b": {"c": "x"}}, {"a": 1.0, "b": {"c": "x", "d": 2}, "e": 3})
    assert not subset({"a": 1}, {"a": "1"})
    assert not subset({"a": True}, {"a": 1})
    assert subset({"l": [1, {"k": 2}]}, {"l": [1, {"k": 2, "z": 0}]})
    assert not subset({"l": [1]}, {"l": [1, 2]})


def _score(case: Case, answer: Answer) -> Any:
    return trajectory(case, answer, MetricContext(options=MetricOptions()))


def test_trajectory_metric_on_a_trace() -> None:
    trace = summarize(parse_json(json.dumps(GENAI)))
    answer = Answer(output="done", trace=trace)
    good = Case(id="c", input="q", trajectory=Trajectory(
        tools=["search", "book"], arguments=[{"tool": "search", "match": {"q": "Paris"}, "regex": {"n": "^[0-9]$"}}],
        max_steps=4, max_llm_calls=2, max_tokens=82))
    score = _score(good, answer)
    assert score.value == 1.0 and score.details["source"] == "trace"
    bad = Case(id="c", input="q", trajectory=Trajectory(tools=["book", "search"], max_tokens=81,
                                                        no_failed_tools=True))
    score = _score(bad, answer)
    assert score.value == 0.0
    assert score.reason == ("search not called after book: expected book → search (subsequence), "
                            "got search → book")
    problems = [r["problem"] for r in score.details["results"] if not r["passed"]]
    assert problems == ["search not called after book", "82 tokens, more than 81", "failed tool spans: book"]
    args = Case(id="c", input="q", trajectory=Trajectory(arguments=[{"tool": "search", "match": {"q": "Rome"}}]))
    assert "not matched" in _score(args, answer).reason


def test_trajectory_without_spans_errors_never_a_pass() -> None:
    case = Case(id="c", input="q", trajectory=Trajectory(tools=["a"], max_steps=3))
    with pytest.raises(MetricErrored, match="no span was received"):
        _score(case, Answer(output="x", trace=summarize([])))
    only_tools = Case(id="c", input="q", trajectory=Trajectory(tools=["a"]))
    with pytest.raises(MetricErrored, match="not evidence while traces are on"):  # traces on: claims are no evidence
        _score(only_tools, Answer(output="x", tools_used=["a"], trace=summarize([])))
    with pytest.raises(MetricErrored, match="the case has no trace"):
        _score(case, Answer(output="x", tools_used=["a"]))
    # traces off: tools alone can be read from the answer's own list
    score = _score(only_tools, Answer(output="x", tools_used=["a"]))
    assert score.value == 1.0 and score.details["source"] == "answer"


def test_workflow_reads_the_trace_when_the_answer_lists_nothing() -> None:
    trace = summarize(parse_json(json.dumps(GENAI)))
    case = Case(id="c", input="q", agents_should_include=["planner"], tools_should_include=["search"],
                tools_should_exclude=["delete"])
    ctx = MetricContext(options=MetricOptions())
    score = workflow(case, Answer(output="x", trace=trace), ctx)
    assert score.details["agents"]["source"] == "trace" and score.details["tools"]["unexpected"] == ["book"]
    listed = workflow(case, Answer(output="x", tools_used=["search"], agents_called=["planner"], trace=trace),
                      MetricContext(options=MetricOptions()))
    assert listed.value == 1.0 and "source" not in listed.details["tools"]  # the seed's exact shape


class _EchoTarget:
    """A target that records the traceparent it was given and exports spans for it over OTLP/JSON."""

    kind = "echo"

    def __init__(self, endpoint: str, tools: list[str]) -> None:
        self.endpoint, self.tools, self.headers = endpoint, tools, []

    async def answer(self, case: Case) -> Answer:
        header = trace_headers()
        self.headers.append(header)
        _, trace_id, parent, _ = header["traceparent"].split("-")
        spans = [json_span(f"{i + 2:016x}", f"execute_tool {t}", {"gen_ai.operation.name": "execute_tool",
                                                                  "gen_ai.tool.name": t},
                           parent=f"{1:016x}", trace_id=trace_id, start=i + 2, end=i + 3)
                 for i, t in enumerate(self.tools)]
        spans.append(json_span(f"{1:016x}", "invoke_agent", {"gen_ai.operation.name": "invoke_agent",
                                                             "gen_ai.agent.name": "a"},
                               parent=parent, trace_id=trace_id, start=1, end=50))
        async with httpx.AsyncClient() as client:
            # children first, the top-level span in a later batch (as a batching exporter sends them)
            for batch in (spans[:-1], spans[-1:]):
                await client.post(f"{self.endpoint}/v1/traces", json=export(*batch))
                await asyncio.sleep(0.01)
        return Answer(output="ok")

    async def aclose(self) -> None:
        return None

    def describe(self) -> dict[str, object]:
        return {"kind": self.kind}


def test_receiver_tags_spans_with_their_case_and_forgets_them() -> None:
    async def scenario() -> None:
        collector = Collector(max_spans_per_case=3)
        receiver = Receiver(collector, port=0, max_request_bytes=4096)
        await receiver.start()
        try:
            inner = _EchoTarget(receiver.endpoint, ["search", "book"])
            target = TracedTarget(inner, collector, grace=5.0)
            first, second = await asyncio.gather(target.answer(Case(id="1", input="a")),
                                                 target.answer(Case(id="2", input="b")))
            assert first.trace is not None and second.trace is not None
            assert [t["name"] for t in first.trace["tools"]] == ["search", "book"]
            assert first.trace["spans"] == 3 and second.trace["spans"] == 3
            assert inner.headers[0] != inner.headers[1]  # a fresh trace id per case
            assert collector.open_traces == 0  # released once attached: memory flat in cases
            async with httpx.AsyncClient() as client:
                url = f"{receiver.endpoint}/v1/traces"
                foreign = await client.post(url, json=export(json_span("00000000000000e1", "x", {}, trace_id=OTHER)))
                assert foreign.status_code == 200 and foreign.json() == {}
                assert (await client.post(url, content=b"{", headers={"content-type": "application/json"})
                        ).status_code == 400
                assert (await client.post(url, content=b"x", headers={"content-type": "text/plain"})).status_code == 415
                big = json.dumps(export(*[json_span(f"{i:016x}", "s" * 100, {}) for i in range(1, 60)])).encode()
                assert (await client.post(url, content=big, headers={"content-type": "application/json"})
                        ).status_code == 413
                bomb = gzip.compress(b" " * 100_000)  # small on the wire, over the cap once inflated
                response = await client.post(url, content=bomb, headers={"content-type": "application/json",
                                                                         "content-encoding": "gzip"})
                assert response.status_code == 413
                proto = await client.post(url, content=ExportTraceServiceRequest().SerializeToString(),
                                          headers={"content-type": "application/x-protobuf"})
                assert proto.status_code == 200 and proto.headers["content-type"] == "application/x-protobuf"
            assert collector.stats.ignored_spans == 1 and collector.stats.rejected_requests == 4
        finally:
            await receiver.stop()

    asyncio.run(scenario())


def test_span_cap_per_case_and_grace_bound() -> None:
    async def scenario() -> None:
        collector = Collector(max_spans_per_case=1)
        receiver = Receiver(collector, port=0)
        await receiver.start()
        try:
            target = TracedTarget(_EchoTarget(receiver.endpoint, ["a", "b"]), collector, grace=0.3)
            answer = await target.answer(Case(id="1", input="a"))
            assert answer.trace is not None
            assert answer.trace["spans"] == 1 and answer.trace["dropped_spans"] == 2
        finally:
            await receiver.stop()

    asyncio.run(scenario())


def test_trace_env_and_busy_port() -> None:
    assert trace_headers() == {} and trace_env() == {}  # traces off: nothing is sent
    collector = Collector(spool=Path("/tmp"))
    token = CURRENT.set(collector.open_case())
    try:
        env = trace_env()
        assert env["TRACEPARENT"].startswith("00-") and env["TRACEPARENT"].endswith("-01")
        assert env["EVALGATE_TRACE_FILE"].endswith(".json")
    finally:
        CURRENT.reset(token)

    async def scenario() -> None:
        first = Receiver(Collector(), port=0)
        await first.start()
        try:
            from evalgate.errors import UserError

            with pytest.raises(UserError, match="traces_port"):
                await Receiver(Collector(), port=first.port).start()
        finally:
            await first.stop()

    asyncio.run(scenario())


def test_recorded_case_reads_its_trace_file(tmp_path: Path) -> None:
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "c1.json").write_text(json.dumps(GENAI))
    dataset = tmp_path / "cases.yaml"
    dataset.write_text("")

    class Recorded:
        kind = "recorded"

        async def answer(self, case: Case) -> Answer:
            return Answer(output=case.output)

    target = TracedTarget(Recorded(), None, grace=0)
    case = Case(id="c1", output="x", trace_file="traces/c1.json", source_file=str(dataset))
    answer = asyncio.run(target.answer(case))
    assert answer.trace is not None and answer.trace["source"] == "file"
    assert [t["name"] for t in answer.trace["tools"]] == ["search", "book"]
    escape = Case(id="c2", output="x", trace_file="../../etc/passwd", source_file=str(dataset))
    assert "inside the dataset's directory" in (asyncio.run(target.answer(escape)).error or "")


COMMAND_AGENT = r'''
import json, os, sys
case = json.load(sys.stdin)
_, trace_id, parent, _ = os.environ["TRACEPARENT"].split("-")
tools = ["lookup", "answer"] if "good" in case["id"] else ["answer"]
def span(i, name, attributes, parent_id):
    return {"traceId": trace_id, "spanId": f"{i:016x}", "parentSpanId": parent_id, "name": name,
            "startTimeUnixNano": str(i), "endTimeUnixNano": str(i + 1),
            "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attributes.items()]}
spans = [span(1, "invoke_agent", {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "cli"}, parent)]
spans += [span(i + 2, t, {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": t}, f"{1:016x}")
          for i, t in enumerate(tools)]
with open(os.environ["EVALGATE_TRACE_FILE"], "w") as out:
    json.dump({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}, out)
print(json.dumps({"output": "done"}))
'''


def test_command_target_spans_from_its_trace_file_through_the_cli(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "agent.py").write_text(COMMAND_AGENT)
    (tmp_path / "cases.yaml").write_text(
        "cases:\n"
        "  - {id: good, input: q, trajectory: {tools: [lookup, answer], order: exact}}\n"
        "  - {id: bad, input: q, trajectory: {tools: [lookup, answer], order: exact}}\n")
    run = subprocess.run(
        [sys.executable, "-m", "evalgate", "run", "-d", "cases.yaml", "--target", "command", "--target-command",
         json.dumps([sys.executable, "agent.py"]), "--traces", "--traces-port", "0", "--progress", "none",
         "--output-dir", "out"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    document = json.loads((tmp_path / "out" / "results.json").read_text())
    by_id = {r["id"]: r for r in document["results"]}
    assert by_id["good"]["status"] == "passed"
    assert by_id["good"]["answer"]["trace"]["agents"] == ["cli"]
    assert by_id["bad"]["metrics"]["trajectory"]["details"]["reason"] == (
        "call 1 is answer, expected lookup: expected lookup → answer (exact), got answer")
    traces = document["metadata"]["traces"]
    assert traces["requests"] == 0 and traces["spans"] == 5  # nothing over HTTP: 3 + 2 spans from the files


def test_prompts_are_not_buffered_and_a_raising_target_releases_its_traces() -> None:
    (span,) = parse_json(json.dumps(export(json_span("00000000000000f1", "ChatCompletion", {
        "openinference.span.kind": "LLM", "input.value": "the whole prompt", "llm.input_messages.0.message.content": "p",
        "gen_ai.system_instructions": "be nice", "gen_ai.system": "openai", "http.url": "http://x"}))))
    assert span.attributes == {"openinference.span.kind": "LLM", "gen_ai.system": "openai"}

    class Raising:
        kind = "raising"

        async def answer(self, case: Case) -> Answer:
            trace_headers()
            raise RuntimeError("bug")

    collector = Collector()
    target = TracedTarget(Raising(), collector, grace=0.1)
    with pytest.raises(RuntimeError):
        asyncio.run(target.answer(Case(id="1", input="a")))
    assert collector.open_traces == 0


def test_demo_agent_exports_spans_to_the_callers_receiver(tmp_path: Path) -> None:
    """The demo agent (the Action's services: example) with ``{peer}`` in its endpoint: its spans reach the
    receiver of the run that called it, and the trajectories of examples/otel-agent/service-cases.yaml pass."""
    import os
    import socket
    import subprocess
    import sys

    from evalgate.demo.agent import agent_server

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        traces_port = sock.getsockname()[1]
    cases = Path(__file__).resolve().parents[2] / "examples" / "otel-agent" / "service-cases.yaml"
    previous = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://{{peer}}:{traces_port}"
    try:
        with agent_server() as agent:
            run = subprocess.run(
                [sys.executable, "-m", "evalgate", "run", "-d", str(cases), "--target", "http", "--target-url",
                 f"{agent.base_url}/api/agent/chat", "--traces", "--traces-host", "0.0.0.0", "--traces-port",
                 str(traces_port), "--progress", "none", "--output-dir", "out"],
                cwd=tmp_path, capture_output=True, text=True, timeout=120)
    finally:
        if previous is None:
            os.environ.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
        else:
            os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = previous
    assert run.returncode == 0, run.stdout + run.stderr
    document = json.loads((tmp_path / "out" / "results.json").read_text())
    waiver = next(r for r in document["results"] if r["id"] == "waiver-steals")
    assert waiver["answer"]["trace"]["agents"] == ["supervisor", "optimizer"]
    assert [row["name"] for row in waiver["answer"]["trace"]["tree"]] == [
        "supervisor", "chat demo-model", "optimizer", "get_free_agents"]
    assert document["metadata"]["traces"]["spans"] == 8  # 4 + 4


def test_tool_calling_judge_sees_the_traced_tools() -> None:
    from evalgate.metrics.judged import with_trace_workflow

    trace = summarize(parse_json(json.dumps(GENAI)))
    answer, source = with_trace_workflow(Answer(output="x", trace=trace))
    assert answer.tools_used == ["search", "book"] and answer.agents_called == ["planner"]
    assert source == {"tools_source": "trace", "agents_source": "trace"}
    listed, source = with_trace_workflow(Answer(output="x", tools_used=["own"], trace=trace))
    assert listed.tools_used == ["own"] and source == {"tools_source": "answer", "agents_source": "trace"}


@pytest.mark.parametrize(("trajectory", "message"), [
    ("{arguments: [{tool: t, regex: {q: '(('}}]}", "invalid regex for 'q'"),
    ("{order: sideways, tools: [a]}", "order"),
    ("{}", "give tools, arguments"),
    ("{tools: [a], max_steps: -1}", "max_steps"),
])
def test_a_bad_trajectory_is_one_line_naming_the_file(tmp_path: Path, trajectory: str, message: str) -> None:
    import subprocess
    import sys

    (tmp_path / "cases.yaml").write_text(f"cases:\n  - id: c\n    input: q\n    trajectory: {trajectory}\n")
    run = subprocess.run([sys.executable, "-m", "evalgate", "validate", "-d", "cases.yaml"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "cases.yaml:" in run.stderr and message in run.stderr and "Traceback" not in run.stderr


def test_each_call_of_a_case_is_its_own_trace_and_turn() -> None:
    collector = Collector()
    scope = collector.open_case()
    token = CURRENT.set(scope)
    try:
        first, second = trace_headers()["traceparent"], trace_headers()["traceparent"]
    finally:
        CURRENT.reset(token)
    (_, trace_a, parent_a, _), (_, trace_b, parent_b, _) = first.split("-"), second.split("-")
    assert trace_a != trace_b and collector.open_traces == 2
    collector.add(parse_json(json.dumps(export(
        json_span("00000000000000a1", "t1", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "one"},
                  parent=parent_a, trace_id=trace_a, start=1, end=2),
        json_span("00000000000000b1", "t2", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "two"},
                  parent=parent_b, trace_id=trace_b, start=3, end=4)))))
    assert collector.ready(scope)
    spans, dropped = collector.release(scope)
    summary = summarize(spans, turns=scope.turns, dropped=dropped)
    assert [(t["name"], t["turn"]) for t in summary["tools"]] == [("one", 0), ("two", 1)]
    assert summary["traces"] == 2 and collector.open_traces == 0


def test_the_docs_trajectory_example_validates(tmp_path: Path) -> None:
    import re
    import subprocess
    import sys

    text = (Path(__file__).resolve().parents[2] / "docs" / "traces.md").read_text()
    blocks = [b for b in re.findall(r"```yaml\n(.*?)```", text, flags=re.S) if "trajectory:" in b]
    assert blocks
    import textwrap

    (tmp_path / "cases.yaml").write_text(textwrap.dedent(blocks[0]))
    run = subprocess.run([sys.executable, "-m", "evalgate", "validate", "-d", "cases.yaml"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr


def test_a_run_whose_receiver_got_nothing_warns(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "cases.yaml").write_text("cases:\n  - {id: c, input: q, trajectory: {tools: [a]}}\n")
    (tmp_path / "agent.py").write_text("import json, sys; json.load(sys.stdin); print(json.dumps({'output': 'x'}))\n")
    run = subprocess.run(
        [sys.executable, "-m", "evalgate", "run", "-d", "cases.yaml", "--target", "command", "--target-command",
         json.dumps([sys.executable, "agent.py"]), "--traces", "--traces-port", "0", "--progress", "none",
         "--output-dir", "out"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**__import__("os").environ, "EVALGATE_TRACES_GRACE_SECONDS": "0.2"})
    assert run.returncode == 1, run.stdout + run.stderr  # the trajectory errored: no spans
    assert "traces: no span arrived at http://127.0.0.1:" in run.stderr
    document = json.loads((tmp_path / "out" / "results.json").read_text())
    assert "no span was exported" in document["results"][0]["metrics"]["trajectory"]["reason"]


def _sdk_trace_file(path: Path, turns: list[list[str]]) -> None:
    """An OTLP/JSON file written from OpenTelemetry's own SDK: one root ``invoke_agent`` span (one trace)
    per turn with an ``execute_tool`` child per tool, encoded by the OTLP exporter's encoder and the
    protobuf JSON mapping (base64 ids, as such tools write them)."""
    from google.protobuf import json_format
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("recorded-agent")
    for tools in turns:
        with tracer.start_as_current_span("invoke_agent helper", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper"}):
            for tool in tools:
                with tracer.start_as_current_span(f"execute_tool {tool}", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                        "gen_ai.tool.call.arguments": json.dumps({"turn": len(tools)})}):
                    pass
    provider.shutdown()
    path.write_text(json_format.MessageToJson(encode_spans(exporter.get_finished_spans())))


def test_conversation_turns_and_the_whole_conversation_read_trace_files(tmp_path: Path) -> None:
    """A recorded conversation: a case-level ``trace_file`` (one trace per turn) gives each turn its trace
    and the whole conversation all of them; a turn's own ``trace_file`` overrides its share; trajectory
    expectations work per turn and on the whole, through the CLI, with and without the live receiver."""
    from evalgate.cli.main import main as cli_main

    (tmp_path / "traces").mkdir()
    _sdk_trace_file(tmp_path / "traces" / "talk.json", [["search"], ["search", "book"], ["pay"]])
    _sdk_trace_file(tmp_path / "traces" / "own.json", [["refund"]])
    (tmp_path / "cases.yaml").write_text(textwrap.dedent("""\
        - id: talk
          trace_file: traces/talk.json
          trajectory: {tools: [search, search, book, pay], order: exact, max_tool_calls: 4}
          turns:
            - {user: find, output: found, trajectory: {tools: [search], order: exact}}
            - {user: book it, output: booked, trajectory: {tools: [search, book], order: exact}}
            - {user: pay, output: paid, trajectory: {tools: [pay], order: exact}}
        - id: wrong-turn
          trace_file: traces/talk.json
          turns:
            - {user: find, output: found}
            - {user: book it, output: booked, trajectory: {tools: [book, search], order: exact}}
        - id: own-file
          trace_file: traces/talk.json
          turns:
            - {user: find, output: found, trace_file: traces/own.json, trajectory: {tools: [refund]}}
            - {user: book it, output: booked, trajectory: {tools: [search, book], order: exact}}
        - id: missing
          trace_file: traces/none.json
          turns:
            - {user: find, output: found}
        """))
    for extra, out in (((), "plain"), (("--traces", "--traces-port", "0"), "live")):
        code = cli_main(["run", "--dataset", str(tmp_path / "cases.yaml"), "--target", "recorded", "--progress",
                         "none", "--output-dir", str(tmp_path / out), *extra])
        assert code == 1
        results = {r["id"]: r for r in json.loads((tmp_path / out / "results.json").read_text())["results"]}
        talk = results["talk"]
        assert talk["status"] == "passed", talk
        assert talk["metrics"]["trajectory"]["value"] == 1.0
        assert [t["name"] for t in talk["answer"]["trace"]["tools"]] == ["search", "search", "book", "pay"]
        assert [t["turn"] for t in talk["answer"]["trace"]["tools"]] == [0, 1, 1, 2]
        turns = talk["conversation"]["turns"]
        assert [turn["metrics"]["trajectory"]["value"] for turn in turns] == [1.0, 1.0, 1.0]
        wrong = results["wrong-turn"]
        assert wrong["status"] == "failed" and wrong["conversation"]["failed_turn"] == 2
        assert "expected book → search (exact), got search → book" in (
            wrong["conversation"]["turns"][1]["metrics"]["trajectory"]["details"]["reason"])
        own = results["own-file"]
        assert own["status"] == "passed", own
        assert own["conversation"]["turns"][0]["metrics"]["trajectory"]["value"] == 1.0
        missing = results["missing"]
        assert missing["status"] == "errored" and "trace_file 'traces/none.json'" in missing["error"]


def test_live_traces_reach_each_turn_of_a_conversation(tmp_path: Path) -> None:
    """The receiver path, per turn: each turn's call carries its own traceparent, so the command agent's spans
    of turn k are turn k's trajectory, and the whole conversation's trajectory reads every turn's in order."""
    import subprocess
    import sys

    (tmp_path / "agent.py").write_text(COMMAND_AGENT)
    (tmp_path / "cases.yaml").write_text(textwrap.dedent("""\
        - id: good-talk
          trajectory: {tools: [lookup, answer, lookup, answer], order: exact}
          turns:
            - {user: one, trajectory: {tools: [lookup, answer], order: exact}}
            - {user: two, trajectory: {tools: [lookup], max_tool_calls: 2}}
        """))
    run = subprocess.run(
        [sys.executable, "-m", "evalgate", "run", "-d", "cases.yaml", "--target", "command", "--target-command",
         json.dumps([sys.executable, "agent.py"]), "--traces", "--traces-port", "0", "--progress", "none",
         "--output-dir", "out"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    (result,) = json.loads((tmp_path / "out" / "results.json").read_text())["results"]
    assert [t["turn"] for t in result["answer"]["trace"]["tools"]] == [0, 0, 1, 1]
    assert result["answer"]["trace"]["source"] == "otlp"
    assert [t["metrics"]["trajectory"]["value"] for t in result["conversation"]["turns"]] == [1.0, 1.0]
