"""``repeat: adaptive`` in a run: round 1 through the engine as usual, then re-trial rounds of the cases
``verdict.adaptive.Plan`` asks for, within ``adaptive_budget``. Every trial is recorded (spool, SQLite) with
its repeat index; the aggregate gets one result per case: cases that may be re-tried are held (with their
``Case``) until the rounds end, then collapsed (a critical case by its SPRT, ``Plan.case_status``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from evalgate.config.budget import Budget
from evalgate.model import CaseResult, CaseStatus
from evalgate.verdict.adaptive import Plan, near_threshold
from evalgate.verdict.repeats import collapse_repeats

if TYPE_CHECKING:
    from evalgate.model import Case


class AdaptiveSink:
    """Feeds the plan; forwards a case's result at once unless it may be re-tried (critical, flipped
    against the base, flaky on the base), which it holds with its ``Case`` until ``finish``."""

    def __init__(self, downstream: Any, plan: Plan, base: Mapping[str, list[bool]], rule: Any,
                 tolerances: Mapping[str, Any] | None = None) -> None:
        self.downstream = downstream
        self.tolerances = dict(tolerances or {})
        self.plan = plan
        self.base = base
        self.rule = rule
        self.held: dict[str, list[CaseResult]] = {}
        self.cases: dict[str, Case] = {}
        self._in_flight: dict[str, Case] = {}
        self.known_flaky: list[str] = []

    def feed(self, cases: Iterable[Case]) -> Iterator[Case]:
        """The cases, each remembered until its first result arrives."""
        for case in cases:
            self._in_flight[case.id] = case
            yield case

    def add(self, result: CaseResult) -> None:
        case_id = result.id
        if result.status is CaseStatus.skipped:
            self._in_flight.pop(case_id, None)
            self.downstream.add(result)
            return
        base = self.base.get(case_id, [])
        critical = result.risk_level == "critical"
        self.plan.add(case_id, critical, result.status is CaseStatus.passed, base)
        if case_id in self.held:
            self.held[case_id].append(result)
            return
        case = self._in_flight.pop(case_id, None)
        flipped = bool(base) and base[0] != (result.status is CaseStatus.passed)
        if near_threshold(result.metrics, self.tolerances):
            self.plan.near.add(case_id)
        if case is not None and (critical or flipped or case_id in self.plan.flaky_history or case_id in self.plan.near):
            self.held[case_id] = [result]
            self.cases[case_id] = case
        else:
            self.downstream.add(result)

    def finish(self) -> None:
        """Forward every held case: collapsed over its trials; a critical case's status from its SPRT."""
        for case_id, results in self.held.items():
            collapsed = collapse_repeats(results, self.rule) if len(results) > 1 else results[0]
            if results[0].risk_level == "critical" and case_id in self.plan.cases:
                status, reason = self.plan.case_status(case_id)
                if status == "known flaky":
                    self.known_flaky.append(case_id)
                    status = "failed"
                errored = status == "failed" and all(r.status is CaseStatus.errored for r in results)
                final = CaseStatus.passed if status == "passed" else CaseStatus.errored if errored else CaseStatus.failed
                collapsed = collapsed.model_copy(update={
                    "status": final, "passed": final is CaseStatus.passed,
                    "reasons": [] if final is CaseStatus.passed else [reason, *collapsed.reasons[:3]]})
            self.downstream.add(collapsed)
        self.held.clear()


async def run_rounds(engine: Any, sink: AdaptiveSink, budget: Budget, spent: Any) -> None:
    """Re-trial rounds until the plan wants nothing or the budget is spent; ``spent()`` is the run's spend
    in dollars so far (for a dollar budget)."""
    plan = sink.plan
    plan.after_round()
    start = spent()
    while not engine.stop.is_set() and not engine.draining:
        if budget.dollars is not None and spent() - start >= budget.dollars:
            plan.budget_spent = bool(plan.wanted())
            return
        room = None if budget.trials is None else budget.trials - plan.retrials
        wanted = [i for i in plan.next_round(room) if i in sink.cases]
        if not wanted:
            return
        items: Sequence[tuple[Case, int]] = [(sink.cases[i], len(plan.cases[i].head)) for i in wanted]
        await engine.run((), items=items)
        plan.after_round()
