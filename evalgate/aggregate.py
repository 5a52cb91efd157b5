"""Streaming aggregation of case results: constant memory per metric and per breakdown group.

* ``pass_rate`` = passed / (passed + failed + errored); skipped cases are left out.
* ``weighted_pass_rate`` = Σ w(risk)·passed / Σ w(risk) over the same cases, with weights
  critical 4, high 2, medium 1, low 0.5 (``RISK_WEIGHTS``).
* metric averages are arithmetic means over the cases where the metric produced a value.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from evalgate.dataset.models import RISK_WEIGHTS
from evalgate.records import CaseResult, CaseStatus, MetricStatus

BREAKDOWN_DIMENSIONS = ("suite", "category", "difficulty", "risk_level", "evolution_type", "tag")
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
    reasons: dict[str, int] = field(default_factory=dict)

    def add(self, status: MetricStatus, value: float | None, reason: str | None) -> None:
        if value is not None and status in (MetricStatus.passed, MetricStatus.failed):
            self.total += value
            self.count += 1
            self.minimum = min(self.minimum, value)
            self.maximum = max(self.maximum, value)
            if status is MetricStatus.failed:
                self.failed += 1
            return
        if status is MetricStatus.skipped:
            self.skipped += 1
        elif status is MetricStatus.unavailable:
            self.unavailable += 1
        elif status is MetricStatus.errored:
            self.errored += 1
        if reason and len(self.reasons) < 20:
            self.reasons[reason] = self.reasons.get(reason, 0) + 1

    @property
    def average(self) -> float | None:
        return self.total / self.count if self.count else None


@dataclass
class GroupTally:
    """Totals for one breakdown group (e.g. category = "crm")."""

    total: int = 0
    passed: int = 0
    failed: int = 0
    errored: int = 0
    skipped: int = 0
    metric_sums: dict[str, list[float]] = field(default_factory=dict)

    def add(self, result: CaseResult) -> None:
        self.total += 1
        if result.status is CaseStatus.passed:
            self.passed += 1
        elif result.status is CaseStatus.failed:
            self.failed += 1
        elif result.status is CaseStatus.errored:
            self.errored += 1
        else:
            self.skipped += 1
        for name, metric in result.metrics.items():
            if metric.value is not None and metric.status in (MetricStatus.passed, MetricStatus.failed):
                sums = self.metric_sums.setdefault(name, [0.0, 0])
                sums[0] += metric.value
                sums[1] += 1

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
    """Everything the summary, gate and reports need, updated one case at a time."""

    def __init__(self) -> None:
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
        self.cost_usd = 0.0

    def add(self, result: CaseResult) -> None:
        self.total_test_cases += 1
        status = result.status
        if status is CaseStatus.skipped:
            self.total_skipped += 1
        else:
            weight = RISK_WEIGHTS.get(result.risk_level, 1.0)
            self.weight_total += weight
            if status is CaseStatus.passed:
                self.total_passed += 1
                self.weight_passed += weight
            elif status is CaseStatus.failed:
                self.total_failed += 1
            else:
                self.total_errored += 1
        if result.risk_level == "critical" and status in (CaseStatus.failed, CaseStatus.errored):
            self.critical_failure_count += 1
            if len(self.critical_failures) < MAX_CRITICAL_LISTED:
                self.critical_failures.append(
                    {"id": result.id, "status": status.value, "source": result.source, "reasons": result.reasons[:3]}
                )
        for name, metric in result.metrics.items():
            self.metrics[name].add(metric.status, metric.value, metric.reason)
        for dimension in BREAKDOWN_DIMENSIONS:
            for key in self._keys(result, dimension):
                self.breakdowns[dimension][key].add(result)
        if result.num_tokens is not None:
            self.tokens_total += result.num_tokens
            self.tokens_cases += 1
        if result.latency_ms is not None:
            self.latency_total += result.latency_ms
            self.latency_cases += 1
        if result.cost_usd:
            self.cost_usd += result.cost_usd

    @staticmethod
    def _keys(result: CaseResult, dimension: str) -> list[str]:
        if dimension == "tag":
            return list(result.tags)
        value = getattr(result, dimension)
        return [str(value)] if value not in (None, "") else []

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
