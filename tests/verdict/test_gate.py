"""The gate's pure functions against hand-computed verdicts."""

from __future__ import annotations

import pytest

from evalgate.errors import UserError
from evalgate.metrics.registry import all_metrics
from evalgate.model import CaseResult, CaseStatus, MetricResult, MetricStatus, Threshold
from evalgate.verdict.aggregate import RunAggregate
from evalgate.verdict.gate import (
    GatePolicy,
    case_verdict,
    judge_metric,
    parse_threshold,
    resolve_thresholds,
    run_verdict,
)


def result(case_id: str, status: CaseStatus, risk: str = "medium", metrics: dict | None = None, **extra) -> CaseResult:
    return CaseResult(id=case_id, status=status, passed=status is CaseStatus.passed, risk_level=risk,
                      metrics=metrics or {}, source=f"d.yaml:{len(case_id)}", **extra)


def value(v: float, threshold: Threshold | None = None) -> MetricResult:
    return judge_metric(v, threshold, {})


def test_threshold_forms_and_direction() -> None:
    assert parse_threshold("m", 0.9, "higher", "x") == Threshold(op="min", value=0.9)
    assert parse_threshold("m", 0.0, "lower", "x") == Threshold(op="max", value=0.0)
    assert parse_threshold("m", {"max": 4000}, "higher", "x") == Threshold(op="max", value=4000)
    assert Threshold(op="min", value=0.9).admits(0.9) and not Threshold(op="min", value=0.9).admits(0.8999)
    assert Threshold(op="max", value=0.0).admits(0.0) and not Threshold(op="max", value=0.0).admits(0.01)
    for bad in (True, {"min": 1, "max": 2}, {"avg": 1}, float("nan"), "high"):
        with pytest.raises(UserError):
            parse_threshold("m", bad, "higher", "EVALGATE_METRIC_THRESHOLDS")


def test_resolve_thresholds_defaults_layers_and_unknown_names() -> None:
    metrics = all_metrics()
    thresholds = resolve_thresholds(metrics, [({"mention_f1": 0.5}, "cfg"), ({"hit_rate": None}, "env")])
    assert thresholds["mention_f1"] == Threshold(op="min", value=0.5)
    assert "hit_rate" not in thresholds
    assert thresholds["mention_precision"] == Threshold(op="min", value=0.90)
    assert thresholds["false_is_mine_rate"] == Threshold(op="max", value=0.0)
    with pytest.raises(UserError, match="did you mean 'mention_f1'"):
        resolve_thresholds(metrics, [({"mention_f2": 0.5}, "EVALGATE_METRIC_THRESHOLDS")])


def test_case_verdict_statuses() -> None:
    t = Threshold(op="min", value=0.5)
    assert case_verdict({"a": value(0.6, t)}, error=None, strict=False) == (CaseStatus.passed, [])
    status, reasons = case_verdict({"a": value(0.4, t)}, error=None, strict=False)
    assert status is CaseStatus.failed and "misses threshold" in reasons[0]
    skipped = MetricResult(status=MetricStatus.skipped, reason="no judge configured")
    assert case_verdict({"j": skipped}, error=None, strict=False)[0] is CaseStatus.passed
    assert case_verdict({"j": skipped}, error=None, strict=True)[0] is CaseStatus.failed
    errored = MetricResult(status=MetricStatus.errored, reason="boom")
    assert case_verdict({"a": value(0.6, t), "b": errored}, error=None, strict=False)[0] is CaseStatus.errored
    assert case_verdict({}, error="timeout", strict=False) == (CaseStatus.errored, ["timeout"])


def test_weighted_pass_rate_and_critical_gating() -> None:
    aggregate = RunAggregate()
    aggregate.add(result("c1", CaseStatus.failed, "critical", reasons=["safety: 0.2 misses threshold ≥ 0.8"]))
    aggregate.add(result("h1", CaseStatus.passed, "high"))
    aggregate.add(result("m1", CaseStatus.passed, "medium"))
    aggregate.add(result("l1", CaseStatus.passed, "low"))
    # weights critical 4, high 2, medium 1, low 0.5 → (2 + 1 + 0.5) / 7.5
    assert aggregate.pass_rate == pytest.approx(0.75)
    assert aggregate.weighted_pass_rate == pytest.approx(3.5 / 7.5)
    verdict = run_verdict(aggregate, {}, GatePolicy())
    assert not verdict.passed and verdict.exit_code == 1
    assert verdict.reasons == ["critical case c1 failed (d.yaml:2): safety: 0.2 misses threshold ≥ 0.8"]
    assert run_verdict(aggregate, {}, GatePolicy(fail_on_critical=False)).passed
    assert not run_verdict(aggregate, {}, GatePolicy(fail_on_critical=False, min_pass_rate=0.8)).passed


def test_suite_average_thresholds_every_reason_listed() -> None:
    t = Threshold(op="min", value=0.9)
    aggregate = RunAggregate()
    aggregate.add(result("a", CaseStatus.passed, metrics={"p": value(1.0, t), "q": value(0.2)}))
    aggregate.add(result("b", CaseStatus.failed, metrics={"p": value(0.7, t), "q": value(0.4)}))
    aggregate.add(result("c", CaseStatus.errored, error="HTTP 500"))
    verdict = run_verdict(aggregate, {"p": t, "q": Threshold(op="max", value=0.25)}, GatePolicy())
    assert verdict.metric_passed == {"p": False, "q": False}
    assert verdict.reasons == [
        "p average 0.850 misses threshold ≥ 0.9",
        "q average 0.300 misses threshold ≤ 0.25",
        "1 case(s) errored (allowed: 0)",
    ]
    assert not verdict.thresholds_passed
    assert run_verdict(aggregate, {}, GatePolicy(max_errored=1)).passed


def test_strict_mode_fails_on_not_run_metrics() -> None:
    aggregate = RunAggregate()
    aggregate.add(result("a", CaseStatus.passed, metrics={"judge_score": MetricResult(status=MetricStatus.skipped)}))
    assert run_verdict(aggregate, {}, GatePolicy()).passed
    strict = run_verdict(aggregate, {}, GatePolicy(strict=True))
    assert strict.reasons == ["strict mode: metrics skipped or unavailable: judge_score (1)"]


def test_empty_run_fails() -> None:
    assert run_verdict(RunAggregate(), {}, GatePolicy()).reasons == ["no case was evaluated"]


def test_breakdowns_by_dimension() -> None:
    aggregate = RunAggregate()
    aggregate.add(result("a", CaseStatus.passed, category="crm", tags=["x", "y"], metrics={"m": value(1.0)}))
    aggregate.add(result("b", CaseStatus.failed, category="crm", tags=["x"], metrics={"m": value(0.0)}))
    aggregate.add(result("c", CaseStatus.passed, category="erp"))
    breakdowns = aggregate.breakdowns_dict()
    assert breakdowns["category"]["crm"] == {"total": 2, "passed": 1, "failed": 1, "errored": 0, "skipped": 0,
                                             "pass_rate": 0.5, "average_scores": {"m": 0.5}}
    assert breakdowns["tag"]["x"]["total"] == 2 and breakdowns["tag"]["y"]["total"] == 1
    assert breakdowns["risk_level"]["medium"]["total"] == 3
