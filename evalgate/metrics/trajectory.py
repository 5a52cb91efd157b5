"""Trajectory expectations read from the agent's trace (a case's ``trajectory:``; docs/traces.md).

``trajectory`` is 1.0 when every declared check passes, else 0.0 (threshold 1.0); its details list each
check (``results``) and its ``reason`` line states the first failure, e.g. ``tools (subsequence): expected search → book,
got book → search``. Checks:

* ``tools`` + ``order``: ``subsequence`` — the expected names appear in this order, others may come
  between (greedy left-to-right match); ``exact`` — the calls are exactly these, in this order; ``any`` —
  each expected name was called. Names compare stripped and case-folded.
* ``arguments``: for each entry, some call of its tool has every ``match`` key with an equal value
  (mappings compare as subsets, recursively; 1 equals 1.0) and every ``regex`` key with a value the
  pattern finds (strings as they are, other values as compact JSON).
* ``max_steps`` (tool calls + LLM calls), ``max_tool_calls``, ``max_llm_calls``, ``max_tokens`` (LLM input +
  output tokens): value ≤ limit.
* ``no_failed_tools``: no tool span ended with status ERROR.

Evidence: the case's trace (``Answer.trace``). With traces on (the case has a trace summary, live or
from a ``trace_file``) and no span, the case is errored — never passed from the answer's own
``tools_used`` — with the reason the receiver gives (no export at all; spans without this case's trace id,
with their count; spans later than ``traces_grace_seconds``). Only with traces off can ``tools`` (and
``max_tool_calls``) be checked from the answer's ``tools_used``, and the details say so
(``source: answer``, ``note``); any other check errors the case (missing evidence never passes, in strict
mode or not).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from evalgate.metrics.registry import MetricContext, Score, metric
from evalgate.model import MetricErrored
from evalgate.traces.summary import agent_names, tool_names

if TYPE_CHECKING:
    from evalgate.model import Answer, Case, ToolArguments, Trajectory

FAMILY = "trajectory"
SEQUENCE_ITEMS = 12
"""Tool names shown in a reason line (the rest as "… (+n)")."""


def _key(name: str) -> str:
    return name.strip().casefold()


def sequence_text(names: Sequence[str]) -> str:
    """``a → b → c`` (at most ``SEQUENCE_ITEMS`` names), or ``(none)``."""
    if not names:
        return "(none)"
    shown = " → ".join(names[:SEQUENCE_ITEMS])
    return shown + (f" … (+{len(names) - SEQUENCE_ITEMS})" if len(names) > SEQUENCE_ITEMS else "")


def order_problem(expected: Sequence[str], actual: Sequence[str], order: str) -> str | None:
    """None when ``actual`` satisfies ``expected`` under ``order``; else what is wrong, naming the tool."""
    got = [_key(name) for name in actual]
    if order == "any":
        missing = [name for name in expected if _key(name) not in set(got)]
        return f"{', '.join(missing)} not called" if missing else None
    if order == "exact":
        for position, name in enumerate(expected):
            if position >= len(got):
                return f"{name} not called (call {position + 1})"
            if got[position] != _key(name):
                return f"call {position + 1} is {actual[position]}, expected {name}"
        if len(got) > len(expected):
            return f"unexpected call {len(expected) + 1}: {actual[len(expected)]}"
        return None
    position = 0
    previous: str | None = None
    for name in expected:
        while position < len(got) and got[position] != _key(name):
            position += 1
        if position >= len(got):
            if _key(name) in got:
                return f"{name} not called after {previous}" if previous else f"{name} out of order"
            return f"{name} not called"
        previous = name
        position += 1
    return None


def subset(expected: Any, actual: Any) -> bool:
    """True when ``expected`` is contained in ``actual``: mappings key by key (recursively), lists item by
    item with equal length, numbers by value (``1 == 1.0``, bools only equal bools), else ``==``."""
    if isinstance(expected, Mapping):
        return isinstance(actual, Mapping) and all(k in actual and subset(v, actual[k]) for k, v in expected.items())
    if isinstance(expected, list):
        return (isinstance(actual, list) and len(actual) == len(expected)
                and all(subset(e, a) for e, a in zip(expected, actual, strict=True)))
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    return bool(expected == actual)


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def arguments_problem(entry: ToolArguments, calls: Sequence[Mapping[str, Any]]) -> str | None:
    """None when some call of ``entry.tool`` has matching arguments; else why not."""
    mine = [call for call in calls if _key(str(call.get("name", ""))) == _key(entry.tool)]
    if not mine:
        return f"{entry.tool} not called"
    recorded: list[Mapping[str, Any]] = [call["arguments"] for call in mine if isinstance(call.get("arguments"), Mapping)]
    if not recorded:
        if any(isinstance(call.get("arguments"), str) for call in mine):
            return f"arguments of {entry.tool} recorded as text, not a JSON object (or over 2,000 characters)"
        return f"arguments of {entry.tool} not recorded in the trace"
    for arguments in recorded:
        if entry.match and not subset(entry.match, arguments):
            continue
        if entry.regex and not all(key in arguments and re.search(pattern, _as_text(arguments[key]))
                                   for key, pattern in entry.regex.items()):
            continue
        return None
    wanted = {**(entry.match or {}), **{k: f"/{p}/" for k, p in (entry.regex or {}).items()}}
    got = _as_text(recorded[0])
    return f"{entry.tool} arguments {_as_text(wanted)} not matched (got {got[:200]})"


def _trace(answer: Answer) -> Mapping[str, Any] | None:
    trace = answer.trace
    return trace if trace and trace.get("spans") else None


def _needs_trace(expect: Trajectory) -> bool:
    return bool(expect.arguments or expect.no_failed_tools or expect.max_steps is not None
                or expect.max_llm_calls is not None or expect.max_tokens is not None)


def evaluate(expect: Trajectory, answer: Answer) -> dict[str, Any]:
    """Every declared check of ``expect`` on ``answer``'s trace (see the module docstring); raises
    ``MetricErrored`` when the evidence is missing (the case is then errored, never passed)."""
    trace = _trace(answer)
    note = None
    if trace is None:
        if answer.trace is not None:  # traces on, no span: the answer's own claims are not evidence
            missing = answer.trace.get("missing") if isinstance(answer.trace.get("missing"), Mapping) else None
            why = str(missing["reason"]) if missing and missing.get("reason") else "no span was received for this case"
            raise MetricErrored(f"trajectory: {why} (the answer's own tools_used is not evidence while traces "
                                "are on; docs/traces.md)")
        if answer.tools_used is None or _needs_trace(expect) or expect.tools is None:
            raise MetricErrored("trajectory: the case has no trace (is the agent exporting OpenTelemetry spans to "
                                "the run's receiver, traces: true? see docs/traces.md)")
        calls: list[Mapping[str, Any]] = [{"name": name} for name in answer.tools_used]
        source = "answer"
        note = "traces are off: the tools checked are the answer's own tools_used, not spans"
    else:
        calls = list(trace.get("tools") or [])
        source = "trace"
    actual = [str(call.get("name", "")) for call in calls]
    checks: list[dict[str, Any]] = []

    def check(name: str, problem: str | None) -> None:
        checks.append({"check": name, "passed": problem is None, "problem": problem})

    if expect.tools is not None:
        check(f"tools ({expect.order})", order_problem(expect.tools, actual, expect.order))
    for entry in expect.arguments or []:
        check(f"arguments of {entry.tool}", arguments_problem(entry, calls))
    if trace is not None:
        limits = (("max_steps", "steps", trace.get("steps", 0)),
                  ("max_tool_calls", "tool calls", trace.get("tool_calls", 0)),
                  ("max_llm_calls", "LLM calls", trace.get("llm_call_count", 0)),
                  ("max_tokens", "tokens", (trace.get("tokens") or {}).get("total", 0)))
        for setting, what, value in limits:
            limit = getattr(expect, setting)
            if limit is not None:
                check(setting, None if value <= limit else f"{value:,} {what}, more than {limit:,}")
        if expect.no_failed_tools:
            failed = [str(call.get("name")) for call in calls if call.get("failed")]
            check("no_failed_tools", f"failed tool spans: {', '.join(failed)}" if failed else None)
    elif expect.max_tool_calls is not None:
        check("max_tool_calls", None if len(actual) <= expect.max_tool_calls
              else f"{len(actual):,} tool calls, more than {expect.max_tool_calls:,}")
    return {"pass": all(c["passed"] for c in checks), "source": source,
            "tools_from": trace.get("tools_from") if trace is not None else "answer",
            "expected_tools": list(expect.tools) if expect.tools is not None else None, "order": expect.order,
            "actual_tools": actual, "results": checks, **({"note": note} if note else {})}


def reason_of(result: Mapping[str, Any]) -> str | None:
    """One line for a failed trajectory: the first failed check; a tools check shows expected vs actual."""
    for entry in result["results"]:
        if entry["passed"]:
            continue
        if entry["check"].startswith("tools") and result.get("expected_tools") is not None:
            return (f"{entry['problem']}: expected {sequence_text(result['expected_tools'])} ({result['order']}), "
                    f"got {sequence_text(result['actual_tools'])}")
        return f"{entry['check']}: {entry['problem']}"
    return None


@metric("trajectory", family=FAMILY, threshold=1.0, applies=lambda case: case.trajectory is not None)
def trajectory(case: Case, answer: Answer, ctx: MetricContext) -> Score:
    """1.0 when every check of the case's ``trajectory:`` passes on its trace, else 0.0: tools in order
    (subsequence / exact / any), tool arguments (subset, regex), max steps / tool calls / LLM calls /
    tokens, no failed tool spans."""
    assert case.trajectory is not None
    result = evaluate(case.trajectory, answer)
    reason = reason_of(result)
    if reason is not None:
        result["reason"] = reason  # the reports' one-line explanation
    return Score(1.0 if result["pass"] else 0.0, result, reason)


def trace_names(answer: Answer, side: str) -> list[str] | None:
    """The agents (``side`` = agents) or tools the trace recorded, in order; None without spans."""
    return agent_names(answer.trace) if side == "agents" else tool_names(answer.trace)
