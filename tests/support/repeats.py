"""Case records of repeated cases, written by hand for the repeat sink and the verdict's statistics: a
case's result on one repeat, its metric values, and a sink downstream that records what it is given."""

from __future__ import annotations

from typing import Any

from evalgate.model import CaseResult, CaseStatus, MetricResult, MetricStatus, Threshold

P, F, E, S = CaseStatus.passed, CaseStatus.failed, CaseStatus.errored, CaseStatus.skipped


MIN_09 = Threshold(op="min", value=0.9)


def metric(value: float | None, status: MetricStatus | None = None, **details: Any) -> MetricResult:
    if status is None:
        status = MetricStatus.passed if value is not None and value >= 0.9 else MetricStatus.failed
    return MetricResult(value=value, threshold=MIN_09, passed=status is MetricStatus.passed if value is not None else None,
                        status=status, reason=None if status is MetricStatus.passed else f"{status.value} here",
                        details=details)


def result(case_id: str, repeat: int, status: CaseStatus, *, index: int = 0, risk: str = "medium",
           metrics: dict[str, MetricResult] | None = None, tokens: int | None = None,
           latency: float | None = None, cost: float | None = None) -> CaseResult:
    return CaseResult(id=case_id, index=index, risk_level=risk, source=f"cases.yaml:{index + 3}", status=status,
                      passed=status is P, repeat=repeat, metrics=metrics or {},
                      reasons=[] if status is P else [f"{case_id} r{repeat} {status.value}"],
                      error="target failed: boom" if status is E else None,
                      num_tokens=tokens, latency_ms=latency, cost_usd=cost)


class Counting:
    """Downstream sink that records what it is given."""

    def __init__(self) -> None:
        self.results: list[CaseResult] = []

    def add(self, item: CaseResult) -> None:
        self.results.append(item)
