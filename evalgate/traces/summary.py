"""What a case's spans say: agents invoked, tools executed (with their arguments), LLM calls (model,
provider, tokens), errors, durations and the span tree, read from both attribute vocabularies.

OpenTelemetry GenAI semantic conventions: ``gen_ai.operation.name`` = ``invoke_agent`` (an agent,
``gen_ai.agent.name``), ``execute_tool`` (a tool, ``gen_ai.tool.name``, ``gen_ai.tool.call.arguments``),
``chat`` / ``text_completion`` / ``generate_content`` (an LLM call: ``gen_ai.request.model``,
``gen_ai.response.model``, ``gen_ai.provider.name`` or the older ``gen_ai.system``,
``gen_ai.usage.input_tokens`` / ``output_tokens`` or the older ``prompt_tokens`` / ``completion_tokens``;
tool calls the model asked for in ``gen_ai.output.messages`` when content capture is on).
OpenInference: ``openinference.span.kind`` = ``AGENT`` / ``TOOL`` (``tool.name``, arguments in
``input.value``) / ``LLM`` (``llm.model_name``, ``llm.provider`` or ``llm.system``,
``llm.token_count.prompt`` / ``completion`` / ``total``, requested tool calls in
``llm.output_messages.N.message.tool_calls.M.tool_call.function.name`` / ``arguments``).

Tools are the executed tool spans; a trace without any has its tools read from the tool calls the model
requested (``tools_from``: ``tool_spans`` or ``llm_tool_calls``). Every text taken from a span (names,
arguments, error messages) is redacted with ``safety.redact`` and cut to ``TEXT_CHARS`` characters: span
text is as untrusted as an answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from evalgate.safety.redact import MASK, looks_secret, redact
from evalgate.traces.spans import Span

TEXT_CHARS = 500
"""Characters kept of each text read from a span (argument values, names, error messages)."""
ARGUMENT_CHARS = 2_000
"""Largest JSON text of one call's arguments kept as a value; longer ones are kept as cut text."""
MAX_TREE_ROWS = 200
MAX_ERRORS = 20
MAX_ITEMS = 200
"""Agents, tools and LLM calls listed per case (the counts stay exact)."""
LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "completion"})
HANDOFF_PREFIX = "handoff to "
_AGENT_NAMES = ("gen_ai.agent.name", "agent.name")
_OI_TOOL_CALL = re.compile(r"llm\.output_messages\.(\d+)\.message\.tool_calls\.(\d+)\.tool_call\.function\.(name|arguments)")


def _text(value: Any) -> str:
    text = redact(str(value))
    return text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS] + "…"


def _clean(value: Any, depth: int = 0) -> Any:
    """A JSON value redacted and bounded in one pass (as ``safety.redact.redact_mapping`` then a cut):
    strings redacted and cut to ``TEXT_CHARS``, values under secret-looking keys masked, at most 50 items a
    level and 8 levels."""
    kind = type(value)
    if kind is str:
        text = redact(value)
        return text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS] + "…"
    if kind is dict or kind is list or isinstance(value, Mapping | list | tuple):
        if depth >= 8:
            return "…"
        if kind is dict or isinstance(value, Mapping):
            return {str(k)[:TEXT_CHARS]: (MASK if looks_secret(str(k)) and v not in (None, "", False)
                                          else _clean(v, depth + 1))
                    for k, v in list(value.items())[:50]}
        return [_clean(v, depth + 1) for v in list(value)[:50]]
    return value


def arguments_of(value: Any) -> Any:
    """Tool arguments as recorded (a JSON text or a mapping) → a redacted, size-bounded JSON value (strings
    cut to ``TEXT_CHARS``, 50 items and 8 levels); text that is not JSON, or arguments whose JSON exceeds
    ``ARGUMENT_CHARS``, stay (cut) text."""
    if value is None:
        return None
    short = False
    if isinstance(value, str):
        if len(value) > 20 * ARGUMENT_CHARS:
            return _text(value)
        short = len(value) <= ARGUMENT_CHARS // 2  # its JSON stays within ARGUMENT_CHARS: no need to measure
        try:
            value = json.loads(value)
        except (json.JSONDecodeError, RecursionError):
            return _text(value)
    kept = _clean(value)
    if short:
        return kept
    text = json.dumps(kept, ensure_ascii=False)
    return kept if len(text) <= ARGUMENT_CHARS else text[:ARGUMENT_CHARS] + "…"


def kind_of(span: Span) -> str:
    """``agent``, ``tool``, ``handoff``, ``llm`` or ``other``, from either vocabulary.

    ``handoff``: an OpenInference TOOL span without ``tool.name`` named ``handoff to <agent>`` — how
    openinference-instrumentation-openai-agents records the Agents SDK's handoffs (a transfer between
    agents, not a tool the agent executed; the agents it joins are in the agent spans)."""
    attributes = span.attributes
    operation = attributes.get("gen_ai.operation.name")
    openinference = str(attributes.get("openinference.span.kind") or "").upper()
    if operation == "invoke_agent" or openinference == "AGENT":
        return "agent"
    if operation == "execute_tool" or openinference == "TOOL":
        if (openinference == "TOOL" and span.name.startswith(HANDOFF_PREFIX)
                and _first(attributes, "tool.name", "gen_ai.tool.name") is None):
            return "handoff"
        return "tool"
    if operation in LLM_OPERATIONS or openinference == "LLM":
        return "llm"
    return "other"


def _first(attributes: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        value = attributes.get(name)
        if value not in (None, ""):
            return value
    return None


def _tokens(value: Any) -> int | None:
    kind = type(value)
    if kind is not int and kind is not float:
        return None  # bools, texts, missing
    return int(value) if value >= 0 else None


def span_label(span: Span, kind: str) -> str:
    """The name evalgate reports for a span: the agent's or tool's name, the model, else the span name."""
    attributes = span.attributes
    if kind == "agent":
        return str(_first(attributes, *_AGENT_NAMES) or span.name)
    if kind == "tool":
        return str(_first(attributes, "gen_ai.tool.name", "tool.name") or span.name)
    return span.name


def requested_tool_calls(span: Span) -> list[tuple[str, Any]]:
    """(name, arguments) of the tool calls an LLM span's reply asked for, in order."""
    attributes = span.attributes
    found: dict[tuple[int, int], dict[str, Any]] = {}
    for key, value in attributes.items():
        match = _OI_TOOL_CALL.fullmatch(key) if key.startswith("llm.output_messages.") else None
        if match:
            found.setdefault((int(match.group(1)), int(match.group(2))), {})[match.group(3)] = value
    calls = [(str(part["name"]), part.get("arguments")) for _, part in sorted(found.items()) if part.get("name")]
    if calls:
        return calls
    messages = attributes.get("gen_ai.output.messages")
    if isinstance(messages, str):
        try:
            messages = json.loads(messages)
        except (json.JSONDecodeError, RecursionError):
            messages = None
    for message in messages if isinstance(messages, list) else []:
        for part in (message.get("parts") or []) if isinstance(message, Mapping) else []:
            if isinstance(part, Mapping) and part.get("type") == "tool_call" and part.get("name"):
                calls.append((str(part["name"]), part.get("arguments")))
    return calls


def summarize(spans: Sequence[Span], *, turns: Mapping[str, int] | None = None, source: str = "otlp",
              dropped: int = 0) -> dict[str, Any]:
    """The case's trace summary (a JSON-able mapping stored as ``answer.trace`` in results.json).

    ``turns``: trace id → the target call it belongs to (0 for a one-call case); ``dropped``: spans not
    kept (over the per-case cap). Items are ordered by start time; ``tokens`` sums the LLM calls'
    input and output tokens (total = input + output, or OpenInference's ``llm.token_count.total`` when
    only that is recorded); ``steps`` = tool executions + LLM calls."""
    ordered = sorted(spans, key=lambda s: (s.start_ns, s.end_ns))
    turn_of = dict(turns or {})
    seen_texts: dict[str, str] = {}

    def text_of(value: Any) -> str:
        """``_text`` memoised for this trace (span names, models and providers repeat)."""
        key = str(value)
        cleaned = seen_texts.get(key)
        if cleaned is None:
            cleaned = seen_texts[key] = _text(key)
        return cleaned

    agents: list[str] = []
    tools: list[dict[str, Any]] = []
    requested: list[dict[str, Any]] = []
    llm_calls: list[dict[str, Any]] = []
    errors: list[str] = []
    input_tokens = output_tokens = total_only = 0
    counts = {"agents": 0, "tools": 0, "llm_calls": 0, "failed_tools": 0}
    kinds = workflow_kinds(ordered, {span.span_id: kind_of(span) for span in ordered})
    labels: dict[str, str] = {}
    for span in ordered:
        kind = kinds[span.span_id]
        label = labels[span.span_id] = text_of(span_label(span, kind))
        attributes = span.attributes
        turn = turn_of.get(span.trace_id, 0)
        if (span.failed or span.exception) and len(errors) < MAX_ERRORS:
            why = span.status_message or span.exception or "status ERROR"
            errors.append(_text(f"{span_label(span, kind)}: {why}"))
        if kind == "agent":
            counts["agents"] += 1
            if len(agents) < MAX_ITEMS:
                agents.append(label)
        elif kind == "tool":
            counts["tools"] += 1
            counts["failed_tools"] += span.failed
            if len(tools) < MAX_ITEMS:
                raw = _first(attributes, "gen_ai.tool.call.arguments", "tool.arguments", "input.value")
                tools.append({"name": label, "arguments": arguments_of(raw),
                              "failed": span.failed,
                              "error": _text(span.status_message or span.exception or "") if span.failed else None,
                              "duration_ms": round(span.duration_ms, 3), "turn": turn})
        elif kind == "llm":
            counts["llm_calls"] += 1
            prompt = _tokens(_first(attributes, "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens",
                                    "llm.token_count.prompt"))
            completion = _tokens(_first(attributes, "gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens",
                                        "llm.token_count.completion"))
            total = _tokens(attributes.get("llm.token_count.total"))
            input_tokens += prompt or 0
            output_tokens += completion or 0
            if prompt is None and completion is None and total is not None:
                total_only += total
            for name, arguments in requested_tool_calls(span):
                if len(requested) < MAX_ITEMS:
                    requested.append({"name": text_of(name), "arguments": arguments_of(arguments), "failed": False,
                                      "error": None, "duration_ms": None, "turn": turn})
            if len(llm_calls) < MAX_ITEMS:
                model = _first(attributes, "gen_ai.response.model", "gen_ai.request.model", "llm.model_name")
                provider = _first(attributes, "gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system")
                llm_calls.append({"model": text_of(model) if model is not None else None,
                                  "provider": text_of(provider) if provider is not None else None,
                                  "input_tokens": prompt, "output_tokens": completion,
                                  "duration_ms": round(span.duration_ms, 3), "failed": span.failed, "turn": turn})
    tools_from = "tool_spans" if counts["tools"] else ("llm_tool_calls" if requested else None)
    if not counts["tools"]:
        tools = requested
    start = min((s.start_ns for s in ordered if s.start_ns), default=0)
    end = max((s.end_ns for s in ordered if s.end_ns), default=0)
    return {
        "source": source,
        "traces": len({s.trace_id for s in ordered}),
        "spans": len(ordered),
        "dropped_spans": dropped,
        "agents": agents,
        "tools": tools,
        "tools_from": tools_from,
        "tool_calls": counts["tools"] if counts["tools"] else len(requested),
        "failed_tools": counts["failed_tools"],
        "llm_calls": llm_calls,
        "llm_call_count": counts["llm_calls"],
        "steps": (counts["tools"] if counts["tools"] else len(requested)) + counts["llm_calls"],
        "tokens": {"input": input_tokens, "output": output_tokens, "total": input_tokens + output_tokens + total_only},
        "errors": errors,
        "duration_ms": round((end - start) / 1e6, 3) if end > start else 0.0,
        "tree": tree_rows(ordered, kinds, turn_of, labels),
    }


def workflow_kinds(spans: Sequence[Span], kinds: dict[str, str]) -> dict[str, str]:
    """``kinds`` (span id → kind) with each agent span that has no agent name (``gen_ai.agent.name`` /
    ``agent.name``) but a named agent span below it re-kinded ``workflow``: the run around the agents,
    not one of them — openinference-instrumentation-openai-agents' root span, an AGENT span named after the
    Agents SDK's ``workflow_name`` ("Agent workflow" by default), above the ``triage`` / ``booking`` agents.
    An unnamed agent span with no named agent below it stays an agent (named after its span)."""
    unnamed = {span.span_id for span in spans
               if kinds.get(span.span_id) == "agent" and _first(span.attributes, *_AGENT_NAMES) is None}
    if not unnamed:
        return kinds
    parent_of = {span.span_id: span.parent_id for span in spans}
    walked: set[str] = set()  # each span is walked through once: O(spans), and a cycle of hostile ids ends
    for span in spans:
        if kinds.get(span.span_id) != "agent" or span.span_id in unnamed:
            continue
        parent = parent_of.get(span.span_id)
        while parent and parent not in walked:
            walked.add(parent)
            if parent in unnamed:
                kinds[parent] = "workflow"
            parent = parent_of.get(parent)
    return kinds


def tree_rows(spans: Iterable[Span], kinds: Mapping[str, str], turns: Mapping[str, int],
              labels: Mapping[str, str]) -> list[dict[str, Any]]:
    """The span tree, depth first in start order: one row per span (depth, label, kind, ms, failed, turn),
    at most ``MAX_TREE_ROWS`` rows. A span whose parent is not among the spans is a root."""
    spans = list(spans)
    known = {s.span_id for s in spans}
    children: dict[str, list[Span]] = {}
    roots: list[Span] = []
    for span in spans:  # already in start order
        parent = span.parent_id
        if parent and parent in known and parent != span.span_id:
            children.setdefault(parent, []).append(span)
        else:
            roots.append(span)
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    stack: list[tuple[Span, int]] = [(root, 0) for root in reversed(roots)]
    while stack and len(rows) < MAX_TREE_ROWS:
        span, depth = stack.pop()
        span_id = span.span_id
        if span_id in seen:
            continue
        seen.add(span_id)
        kind = kinds.get(span_id, "other")
        rows.append({"depth": depth, "name": labels.get(span_id) or _text(span_label(span, kind)), "kind": kind,
                     "ms": round(span.duration_ms, 3), "failed": span.status == 2, "turn": turns.get(span.trace_id, 0)})
        below = children.get(span_id)
        if below:
            for child in reversed(below):
                stack.append((child, depth + 1))
    return rows


def tool_names(trace: Mapping[str, Any] | None) -> list[str] | None:
    """The tool names of a trace summary in order (None without a trace or when it recorded no spans)."""
    if not trace or not trace.get("spans"):
        return None
    return [str(tool["name"]) for tool in trace.get("tools") or []]


def agent_names(trace: Mapping[str, Any] | None) -> list[str] | None:
    """The agent names of a trace summary in order (None without a trace or when it recorded no spans)."""
    if not trace or not trace.get("spans"):
        return None
    return [str(name) for name in trace.get("agents") or []]


def merge_traces(traces: Sequence[Mapping[str, Any] | None]) -> dict[str, Any] | None:
    """One summary for several calls' summaries (a conversation's turns, in order): lists joined (within
    their caps), counts, tokens and durations added; None when no call had a trace."""
    given = [t for t in traces if t]
    if not given:
        return None
    if len(given) == 1:
        return dict(given[0])

    def joined(name: str, cap: int) -> list[Any]:
        return [item for t in given for item in t.get(name) or []][:cap]

    def added(name: str) -> Any:
        return sum(t.get(name) or 0 for t in given)

    sources = {t.get("tools_from") for t in given} - {None}
    return {
        "source": given[0].get("source", "otlp"), "traces": added("traces"), "spans": added("spans"),
        "dropped_spans": added("dropped_spans"), "agents": joined("agents", MAX_ITEMS),
        "tools": joined("tools", MAX_ITEMS),
        "tools_from": "tool_spans" if "tool_spans" in sources else ("llm_tool_calls" if sources else None),
        "tool_calls": added("tool_calls"), "failed_tools": added("failed_tools"),
        "llm_calls": joined("llm_calls", MAX_ITEMS), "llm_call_count": added("llm_call_count"),
        "steps": added("steps"),
        "tokens": {key: sum((t.get("tokens") or {}).get(key, 0) for t in given) for key in ("input", "output", "total")},
        "errors": joined("errors", MAX_ERRORS), "duration_ms": round(added("duration_ms"), 3),
        "tree": joined("tree", MAX_TREE_ROWS),
    }
