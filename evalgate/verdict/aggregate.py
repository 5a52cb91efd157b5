"""Streaming aggregation of case results: constant memory per metric and per breakdown group.

* ``pass_rate`` = passed / (passed + failed + errored); skipped cases are left out.
* ``weighted_pass_rate`` = Σ w(risk)·passed / Σ w(risk) over the same cases, with weights
  critical 4, high 2, medium 1, low 0.5 (``RISK_WEIGHTS``).
* metric averages are arithmetic means over the cases where the metric produced a value.
* judge verdicts (with a judge configured, for the metrics that use it): per metric, the verdicts asked for
  (the metric ran, i.e. was not skipped; every repeat counts) and how many the judge did not give
  (``unavailable``/``errored``, or valued only by the heuristic fallback: ``details.judge_unavailable``),
  with the first reason; and the errored cases that miss a verdict of a gated judged metric.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from evalgate.model import RISK_WEIGHTS, CaseResult, CaseStatus, MetricResult, MetricStatus
from evalgate.verdict.quantiles import QuantileSketch

BREAKDOWN_DIMENSIONS = ("suite", "category", "difficulty", "risk_level", "evolution_type", "tag")
CRITICAL_REASONS = 5
"""Reasons of a critical failure named in the gate's reason (the rest counted: "+N more")."""
MAX_CRITICAL_LISTED = 200


@dataclass
class MetricTally:
    """Running totals for one metric: mean = total / count."""

    total: float = 0.0
    count: int = 0
    minimum: float = float("inf")
    maximum: float = float("-inf")
    failed: int = 0
    skipped: int = 0
    unavailable: int = 0
    errored: int = 0
    gated: int = 0
    """Results that carried a threshold (the metric gated that case: a run or a case-level ``assert:`` one)."""
    skipped_no_judge: int = 0
    """Of ``skipped``: skipped only because the run has no judge (``metrics.registry.NO_JUDGE_REASON``)."""
    reasons: dict[str, int] = field(default_factory=dict)
    first_reason: dict[str, str] = field(default_factory=dict)
    """The first reason seen per status that gave no value (``skipped``, ``unavailable``, ``errored``)."""

    def add(self, status: MetricStatus, value: float | None, reason: str | None) -> None:
        if value is not None and status in _VALUED:
            self.total += value
            self.count += 1
            if value < self.minimum:  # min()/max() without the calls: same results, NaN included
                self.minimum = value
            if value > self.maximum:
                self.maximum = value
            if status is _METRIC_FAILED:
                self.failed += 1
            return
        if status is MetricStatus.skipped:
            self.skipped += 1
            if reason and (NO_JUDGE_TEXT in reason or reason.startswith(NOT_JUDGED)):
                self.skipped_no_judge += 1
        elif status is MetricStatus.unavailable:
            self.unavailable += 1
        elif status is MetricStatus.errored:
            self.errored += 1
        if reason:
            if len(self.reasons) < 20:
                self.reasons[reason] = self.reasons.get(reason, 0) + 1
            self.first_reason.setdefault(_STATUS_TEXT[status], reason)

    @property
    def average(self) -> float | None:
        return self.total / self.count if self.count else None


@dataclass
class JudgeTally:
    """Judge verdicts of one metric: asked for, not given (``missing``), of those the ones ``max_cost`` left
    unasked (``budget``), the first reason one was missing and the first that was not the budget."""

    verdicts: int = 0
    missing: int = 0
    budget: int = 0
    first: str | None = None
    first_judge: str | None = None

    def add(self, other: JudgeTally) -> None:
        self.verdicts += other.verdicts
        self.missing += other.missing
        self.budget += other.budget
        self.first = self.first or other.first
        self.first_judge = self.first_judge or other.first_judge

    @property
    def scored(self) -> int:
        return self.verdicts - self.missing

    @property
    def judge_missing(self) -> int:
        """Missing for the judge's sake (unreachable, unreadable, refused), not the budget's."""
        return self.missing - self.budget

    def as_dict(self) -> dict[str, Any]:
        return {"of": self.verdicts, "missing": self.missing, "budget": self.budget, "first": self.first,
                "first_judge": self.first_judge}


def judge_verdicts(result: MetricResult) -> JudgeTally:
    """The judge verdicts one metric result of a judge-scored metric stands for: a collapsed result of several
    repeats carries them in ``details.judge_verdicts``; a single result is one verdict unless skipped, missing
    when it is unavailable or errored or valued by the heuristic fallback (``details.judge_unavailable``), and
    then ``budget`` when ``details.judge_failure`` says max_cost left it unasked."""
    details = result.details
    counted = details.get("judge_verdicts") if details else None
    if isinstance(counted, dict):
        return JudgeTally(int(counted.get("of") or 0), int(counted.get("missing") or 0),
                          int(counted.get("budget") or 0), counted.get("first"), counted.get("first_judge"))
    status = result.status
    if status is MetricStatus.skipped:
        return JudgeTally()
    if status is MetricStatus.unavailable or status is MetricStatus.errored:
        reason = result.reason
    else:
        fallback = details.get("judge_unavailable") if details else None
        if not fallback:
            return JudgeTally(1)
        reason = str(fallback)
    if details and details.get("judge_failure") == "budget":
        return JudgeTally(1, 1, 1, reason, None)
    return JudgeTally(1, 1, 0, reason, reason)


_VALUED = (MetricStatus.passed, MetricStatus.failed, MetricStatus.advisory)
NOT_JUDGED = "not judged"
"""The start of the reason of a judged metric (or case) the run could not judge: its judge provider's key was
absent and ``judge_missing`` said skip (``runner.missing``); read from results, like ``NO_JUDGE_TEXT``."""
NO_JUDGE_TEXT = "no judge configured"
"""In the reason of a metric skipped because the run has no judge (``metrics.registry.NO_JUDGE_REASON``, and
``combined_score``'s "needs judge_score (no judge configured)"); read from results, so merged shards agree."""
_STATUS_TEXT = {status: status.value for status in MetricStatus}
_METRIC_FAILED = MetricStatus.failed
_PASSED, _FAILED, _ERRORED, _SKIPPED = CaseStatus.passed, CaseStatus.failed, CaseStatus.errored, CaseStatus.skipped


@dataclass
class GroupTally:
    """Totals for one breakdown group (e.g. category = "crm")."""

    total: int = 0
    passed: int = 0
    failed: int = 0
    errored: int = 0
    skipped: int = 0
    metric_sums: dict[str, list[float]] = field(default_factory=dict)

    def add_valued(self, status: CaseStatus, valued: list[tuple[str, float]]) -> None:
        """Count one case from its status and its metrics that produced a value, as ``(name, value)``."""
        self.total += 1
        if status is _PASSED:
            self.passed += 1
        elif status is _FAILED:
            self.failed += 1
        elif status is _ERRORED:
            self.errored += 1
        else:
            self.skipped += 1
        sums = self.metric_sums
        for name, value in valued:
            pair = sums.get(name)
            if pair is None:
                pair = sums[name] = [0.0, 0]
            pair[0] += value
            pair[1] += 1

    def as_dict(self) -> dict[str, Any]:
        decided = self.passed + self.failed + self.errored
        return {
            "total": self.total,
            "passed": self.passed,
            "failed": self.failed,
            "errored": self.errored,
            "skipped": self.skipped,
            "pass_rate": round(self.passed / decided, 6) if decided else None,
            "average_scores": {k: round(s / n, 6) for k, (s, n) in sorted(self.metric_sums.items()) if n},
        }


class RunAggregate:
    """Everything the summary, gate and reports need, updated one case at a time.

    ``judged``: the metrics scored by the judge, counted in ``judge`` (empty without a judge);
    ``gated_judged``: those among them the gate depends on (``verdict.gate.judge_metric_sets``)."""

    def __init__(self, judged: Collection[str] = (), gated_judged: Collection[str] = (),
                 unjudged: Collection[str] = ()) -> None:
        self.judged = frozenset(judged)
        self.gated_judged = frozenset(gated_judged)
        self.unjudged = frozenset(unjudged)
        """Metrics that need a judge the run does not have (no value is then no missing evidence)."""
        self.judge: dict[str, JudgeTally] = {}
        self.judge_errored_cases = 0
        """Errored cases missing a verdict of a gated judged metric for the judge's sake (not the budget's)."""
        self.total_test_cases = 0
        self.total_passed = 0
        self.total_failed = 0
        self.total_errored = 0
        self.total_skipped = 0
        self.weight_passed = 0.0
        self.weight_total = 0.0
        self.metrics: dict[str, MetricTally] = defaultdict(MetricTally)
        self.breakdowns: dict[str, dict[str, GroupTally]] = {d: defaultdict(GroupTally) for d in BREAKDOWN_DIMENSIONS}
        self.critical_failures: list[dict[str, Any]] = []
        self.critical_failure_count = 0
        self.tokens_total = 0
        self.tokens_cases = 0
        self.latency_total = 0.0
        self.latency_cases = 0
        self.latency = QuantileSketch()
        """Latency percentiles (p50, p95) in flat memory (``verdict.quantiles``)."""
        self.cost_usd = 0.0

    def add(self, result: CaseResult) -> None:
        self.total_test_cases += 1
        status = result.status
        risk_level = result.risk_level
        if status is _SKIPPED:
            self.total_skipped += 1
        else:
            weight = RISK_WEIGHTS.get(risk_level, 1.0)
            self.weight_total += weight
            if status is _PASSED:
                self.total_passed += 1
                self.weight_passed += weight
            elif status is _FAILED:
                self.total_failed += 1
            else:
                self.total_errored += 1
        if risk_level == "critical" and (status is _FAILED or status is _ERRORED):
            self.critical_failure_count += 1
            if len(self.critical_failures) < MAX_CRITICAL_LISTED:
                self.critical_failures.append(
                    {"id": result.id, "status": status.value, "source": result.source,
                     "reasons": result.reasons[:CRITICAL_REASONS],
                     "more_reasons": max(0, len(result.reasons) - CRITICAL_REASONS)}
                )
        tallies = self.metrics
        valued: list[tuple[str, float]] = []
        for name, metric in result.metrics.items():
            value, metric_status = metric.value, metric.status
            tally = tallies[name]
            tally.add(metric_status, value, metric.reason)
            if metric.threshold is not None:
                tally.gated += 1
            if value is not None and metric_status in _VALUED:
                valued.append((name, value))
        breakdowns = self.breakdowns
        for dimension, key in (("suite", result.suite), ("category", result.category),
                               ("difficulty", result.difficulty), ("risk_level", risk_level),
                               ("evolution_type", result.evolution_type)):
            if key is not None and key != "":
                breakdowns[dimension][str(key)].add_valued(status, valued)
        for tag in result.tags:
            breakdowns["tag"][tag].add_valued(status, valued)
        if result.num_tokens is not None:
            self.tokens_total += result.num_tokens
            self.tokens_cases += 1
        if result.latency_ms is not None:
            self.latency_total += result.latency_ms
            self.latency_cases += 1
            self.latency.add(result.latency_ms)
        if result.cost_usd:
            self.cost_usd += result.cost_usd
        if self.judged:
            self._add_judge(result)

    def _add_judge(self, result: CaseResult) -> None:
        missed_gated = False
        for name, metric in result.metrics.items():
            if name in self.judged:
                counted = judge_verdicts(metric)
                if counted.verdicts:
                    tally = self.judge.get(name)
                    if tally is None:
                        tally = self.judge[name] = JudgeTally()
                    tally.add(counted)
                    missed_gated = missed_gated or (counted.judge_missing > 0 and (
                        name in self.gated_judged or metric.threshold is not None))
        if missed_gated and result.status is _ERRORED:
            self.judge_errored_cases += 1

    def judge_totals(self) -> JudgeTally:
        """Σ over the judge-scored metrics (the first reason of the first metric, by name, that missed one)."""
        total = JudgeTally()
        for _name, tally in sorted(self.judge.items()):
            total.add(tally)
        return total

    @property
    def pass_rate(self) -> float:
        decided = self.total_passed + self.total_failed + self.total_errored
        return self.total_passed / decided if decided else 0.0

    @property
    def weighted_pass_rate(self) -> float:
        return self.weight_passed / self.weight_total if self.weight_total else 0.0

    def averages(self) -> dict[str, float | None]:
        return {name: tally.average for name, tally in sorted(self.metrics.items())}

    def not_run_metrics(self) -> dict[str, int]:
        return {
            name: tally.skipped + tally.unavailable
            for name, tally in self.metrics.items()
            if tally.skipped + tally.unavailable
        }

    def breakdowns_dict(self) -> dict[str, dict[str, Any]]:
        return {
            dimension: {key: group.as_dict() for key, group in sorted(groups.items())}
            for dimension, groups in self.breakdowns.items()
        }
