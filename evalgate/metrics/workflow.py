"""Workflow validation: did the system call the agents and tools the scenario expects?

Each side (agents, tools) is checked against the case's ``*_should_include`` / ``*_should_exclude``
lists and reported in the workflow-validation dialect's shape::

    {"pass", "included", "excluded", "missing", "unexpected"}

Names compare ignoring case and surrounding spaces; reported names keep the case's spelling (the
called name's spelling for ``unexpected``). The names come from the answer (``agents_called`` /
``tools_used``) or, when the answer does not list them, from the case's OpenTelemetry trace (agent and
tool spans, ``traces.summary``); a side read from the trace says so with ``"source": "trace"`` (a side
read from the answer keeps the seed's exact shape).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from evalgate.errors import UserError
from evalgate.metrics.registry import MetricContext, MetricUnavailable, Score, metric
from evalgate.metrics.trajectory import trace_names

if TYPE_CHECKING:
    from evalgate.model import Answer, Case

FAMILY = "workflow"
Side = Literal["agents", "tools"]
_MEMO_KEY = "workflow.sides"


def _key(name: str) -> str:
    return name.strip().casefold()


def _unique(names: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    kept: list[str] = []
    for name in names:
        if name.strip() and _key(name) not in seen:
            seen.add(_key(name))
            kept.append(name.strip())
    return kept


def check_side(
    called: Sequence[str],
    include: Sequence[str] | None,
    exclude: Sequence[str] | None,
    always_expected: Sequence[str] = (),
) -> dict[str, Any]:
    """Compare what was ``called`` with the expectations of one side.

    included = include ∩ called; missing = include − called; excluded = exclude − called;
    unexpected = called ∩ exclude, plus — when an include list is declared (even an empty one) —
    every call outside include ∪ always_expected (the seed's "called but NOT expected"; an
    exclude-only side forbids just the listed names). pass = missing and unexpected are empty.
    """
    called_names = _unique(called)
    called_keys = {_key(n) for n in called_names}
    wanted = _unique(include or [])
    banned = _unique(exclude or [])
    banned_keys = {_key(n) for n in banned}
    allowed = {_key(n) for n in [*wanted, *always_expected]}
    missing = [n for n in wanted if _key(n) not in called_keys]
    unexpected = [n for n in called_names if _key(n) in banned_keys or (include is not None and _key(n) not in allowed)]
    return {
        "pass": not missing and not unexpected,
        "included": [n for n in wanted if _key(n) in called_keys],
        "excluded": [n for n in banned if _key(n) not in called_keys],
        "missing": missing,
        "unexpected": unexpected,
    }


def _expectations(case: Case, side: Side) -> tuple[list[str] | None, list[str] | None]:
    if side == "agents":
        return case.agents_should_include, case.agents_should_exclude
    return case.tools_should_include, case.tools_should_exclude


def _declares(case: Case, side: Side) -> bool:
    include, exclude = _expectations(case, side)
    return include is not None or exclude is not None


def _reject_contradiction(case: Case, side: Side) -> None:
    include, exclude = _expectations(case, side)
    both = sorted({_key(n) for n in include or []} & {_key(n) for n in exclude or []})
    if both:
        raise UserError(
            f"case {case.id!r}: {', '.join(both)} listed in both {side}_should_include and {side}_should_exclude",
            where=case.location,
        )


def _evaluate(case: Case, answer: Answer, ctx: MetricContext, side: Side) -> dict[str, Any]:
    """One side's result; a side without expectations passes; raises MetricUnavailable when the
    side has expectations but the target reported nothing for it (None, not an empty list)."""
    if not _declares(case, side):
        return check_side([], None, None)
    _reject_contradiction(case, side)
    called = answer.agents_called if side == "agents" else answer.tools_used
    source = "answer"
    if called is None:  # the answer does not list them: the agent's trace may (traces.summary)
        called = trace_names(answer, side)
        source = "trace"
    if called is None:
        field = "agents_called" if side == "agents" else "tools_used"
        raise MetricUnavailable(f"the case expects {side} but the target reported no {field} "
                                "and no trace recorded them")
    include, exclude = _expectations(case, side)
    always = ctx.options.always_expected_agents if side == "agents" else []
    result = check_side(called, include, exclude, always)
    return result if source == "answer" else {**result, "source": source}


def side_result(case: Case, answer: Answer, ctx: MetricContext, side: Side) -> dict[str, Any]:
    """Memoised ``_evaluate`` so workflow, workflow_agents and workflow_tools share one computation."""
    memo: dict[Side, dict[str, Any] | MetricUnavailable] = ctx.memo.setdefault(_MEMO_KEY, {})
    if side not in memo:
        try:
            memo[side] = _evaluate(case, answer, ctx, side)
        except MetricUnavailable as exc:
            memo[side] = exc
    result = memo[side]
    if isinstance(result, MetricUnavailable):
        raise MetricUnavailable(str(result), dict(result.details))
    return result


def _any_expectation(case: Case) -> bool:
    return _declares(case, "agents") or _declares(case, "tools")


def _side_score(side: Side, case: Case, answer: Answer, ctx: MetricContext) -> Score:
    result = side_result(case, answer, ctx, side)
    return Score(1.0 if result["pass"] else 0.0, result)


@metric("workflow", family=FAMILY, threshold=1.0, applies=_any_expectation)
def workflow(case: Case, answer: Answer, ctx: MetricContext) -> Score:
    """1.0 when both the agents and the tools sides pass, else 0.0.

    A side passes when no expected name is missing and nothing unexpected was called: names in
    *_should_exclude, and — when *_should_include is declared — any other name except the
    always-expected agents (options ``always_expected_agents``, default ``orchestrator``).
    """
    agents = side_result(case, answer, ctx, "agents")
    tools = side_result(case, answer, ctx, "tools")
    passed = bool(agents["pass"] and tools["pass"])
    return Score(1.0 if passed else 0.0, {"pass": passed, "agents": agents, "tools": tools})


@metric("workflow_agents", family=FAMILY, threshold=1.0, applies=lambda case: _declares(case, "agents"))
def workflow_agents(case: Case, answer: Answer, ctx: MetricContext) -> Score:
    """1.0 when the agents side of the workflow check passes (see ``workflow``), else 0.0; threshold 1.0
    (the side is binary: its status agrees with its details' ``pass``)."""
    return _side_score("agents", case, answer, ctx)


@metric("workflow_tools", family=FAMILY, threshold=1.0, applies=lambda case: _declares(case, "tools"))
def workflow_tools(case: Case, answer: Answer, ctx: MetricContext) -> Score:
    """1.0 when the tools side of the workflow check passes (see ``workflow``), else 0.0; threshold 1.0
    (the side is binary: its status agrees with its details' ``pass``)."""
    return _side_score("tools", case, answer, ctx)
