"""Boundaries of the pure core that mutation testing showed unguarded (issue #14): each value here is
computed by hand from the rule in the module docstring, exactly at the edge where ``<`` and ``<=`` (or
``break`` and ``continue``) part ways."""

from __future__ import annotations

from typing import Any

import pytest

from evalgate.errors import EXIT_GATE_FAILED, EXIT_PASS
from evalgate.metrics.mentions import f1
from evalgate.metrics.registry import all_metrics
from evalgate.model import CaseResult, CaseStatus, MetricStatus, Threshold
from evalgate.verdict.aggregate import RunAggregate
from evalgate.verdict.gate import GatePolicy, judge_metric, resolve_thresholds, run_verdict


def case(case_id: str, status: CaseStatus) -> CaseResult:
    return CaseResult(id=case_id, status=status, passed=status is CaseStatus.passed, risk_level="medium",
                      source=f"d.yaml:{len(case_id)}")


def aggregate_of(passed: int, failed: int) -> RunAggregate:
    aggregate = RunAggregate()
    for index in range(passed):
        aggregate.add(case(f"p{index}", CaseStatus.passed))
    for index in range(failed):
        aggregate.add(case(f"f{index}", CaseStatus.failed))
    return aggregate


def test_f1_at_equal_precision_and_recall_is_their_common_value() -> None:
    # 2·P·R / (P + R) with P = R = x is x; P + R = 1 here, the edge of the "P + R > 0" guard
    assert f1(0.5, 0.5) == 0.5
    assert f1(0.25, 0.25) == 0.25
    assert f1(1.0, 1.0) == 1.0
    assert f1(0.0, 0.0) == 0.0
    assert f1(1.0, 0.5) == pytest.approx(2 * 1.0 * 0.5 / 1.5)


def test_pass_rate_exactly_at_the_minimum_passes() -> None:
    aggregate = aggregate_of(passed=4, failed=1)  # 4 / 5 = 0.8
    assert aggregate.pass_rate == 0.8
    at_minimum = run_verdict(aggregate, {}, GatePolicy(min_pass_rate=0.8))
    assert at_minimum.passed and at_minimum.reasons == []
    above = run_verdict(aggregate, {}, GatePolicy(min_pass_rate=0.81))
    assert above.reasons == ["pass rate 80.0% is below min-pass-rate 81.0%"]


def test_a_passing_run_exits_0_and_a_failing_one_1() -> None:
    passing = run_verdict(aggregate_of(passed=2, failed=0), {}, GatePolicy())
    assert (passing.passed, passing.exit_code, passing.as_dict()) == (
        True, EXIT_PASS, {"passed": True, "exit_code": 0, "reasons": []})
    assert EXIT_PASS == 0
    failing = run_verdict(aggregate_of(passed=1, failed=1), {}, GatePolicy(min_pass_rate=1.0))
    assert (failing.passed, failing.exit_code) == (False, EXIT_GATE_FAILED) and EXIT_GATE_FAILED == 1


def test_an_unthresholded_metric_passes_whatever_its_value() -> None:
    for value in (0.0, 0.5, 1.0, 4000.0):
        result = judge_metric(value, None, {})
        assert (result.passed, result.status, result.reason, result.threshold) == (
            True, MetricStatus.passed, None, None)
    aggregate = RunAggregate()
    aggregate.add(CaseResult(id="a", status=CaseStatus.passed, passed=True, metrics={"m": judge_metric(0.0, None, {})}))
    verdict = run_verdict(aggregate, {}, GatePolicy())
    assert verdict.passed and verdict.metric_passed == {"m": None}


def test_a_metric_exactly_at_its_threshold_passes_in_both_directions() -> None:
    at_min = judge_metric(0.9, Threshold(op="min", value=0.9), {})
    at_max = judge_metric(0.05, Threshold(op="max", value=0.05), {})
    assert at_min.passed and at_min.status is MetricStatus.passed
    assert at_max.passed and at_max.status is MetricStatus.passed
    below = judge_metric(0.5, Threshold(op="min", value=0.9), {})
    assert not below.passed and below.reason == "0.500 misses threshold ≥ 0.9"


def test_a_null_threshold_in_a_multi_key_layer_removes_only_that_threshold() -> None:
    metrics = all_metrics()
    layer = {"hit_rate": None, "mention_f1": 0.5, "mention_precision": None, "num_tokens": 4000}
    thresholds = resolve_thresholds(metrics, [(layer, "EVALGATE_METRIC_THRESHOLDS")])
    assert "hit_rate" not in thresholds and "mention_precision" not in thresholds
    assert thresholds["mention_f1"] == Threshold(op="min", value=0.5)  # a key after a null is still read
    assert thresholds["num_tokens"] == Threshold(op="max", value=4000.0)
    assert thresholds["false_is_mine_rate"] == Threshold(op="max", value=0.0)  # untouched default kept


# --- what mutation testing found unguarded (bench/mutation/SURVIVORS.md) ---------------------------------


def test_judge_metric_builds_the_same_result_on_its_fast_and_its_validated_path() -> None:
    """The fast path (exact types) and pydantic's validation must agree; values of other types are
    validated: an int becomes a float, a non-text details key is refused."""
    from pydantic import ValidationError

    fast = judge_metric(2.0, Threshold(op="max", value=3.0), {"k": 1})
    validated = judge_metric(2, Threshold(op="max", value=3.0), {"k": 1})  # an int: validated
    assert validated == fast and type(validated.value) is float and validated.passed
    assert validated.model_dump_json() == fast.model_dump_json()
    with pytest.raises(ValidationError):
        judge_metric(0.5, None, {1: "not a text key"})  # type: ignore[dict-item]


def test_metric_tallies_count_every_status_and_keep_the_extremes() -> None:
    from evalgate.model import MetricResult

    t = Threshold(op="min", value=0.5)
    aggregate = RunAggregate()
    statuses = [judge_metric(0.25, t, {}), judge_metric(0.75, t, {}), judge_metric(0.5, t, {}),
                MetricResult(status=MetricStatus.skipped, reason="no judge configured"),
                MetricResult(status=MetricStatus.unavailable, reason="judge down"),
                MetricResult(status=MetricStatus.unavailable, reason="judge down"),
                MetricResult(status=MetricStatus.errored, reason="boom")]
    for index, metric in enumerate(statuses):
        aggregate.add(CaseResult(id=f"c{index}", status=CaseStatus.passed, passed=True, metrics={"m": metric}))
    tally = aggregate.metrics["m"]
    assert (tally.count, tally.total, tally.minimum, tally.maximum) == (3, 1.5, 0.25, 0.75)
    assert (tally.failed, tally.skipped, tally.unavailable, tally.errored) == (1, 1, 2, 1)
    assert tally.average == 0.5
    assert tally.reasons == {"no judge configured": 1, "judge down": 2, "boom": 1}
    assert aggregate.not_run_metrics() == {"m": 3}


def test_breakdown_groups_count_errored_and_skipped_cases() -> None:
    aggregate = RunAggregate()
    for index, status in enumerate((CaseStatus.passed, CaseStatus.errored, CaseStatus.skipped, CaseStatus.errored)):
        aggregate.add(CaseResult(id=f"c{index}", status=status, passed=status is CaseStatus.passed, category="crm"))
    group = aggregate.breakdowns_dict()["category"]["crm"]
    assert (group["total"], group["passed"], group["failed"], group["errored"], group["skipped"]) == (4, 1, 0, 2, 1)
    assert group["pass_rate"] == pytest.approx(1 / 3)  # passed / (passed + failed + errored)
    assert (aggregate.total_errored, aggregate.total_skipped, aggregate.pass_rate) == (2, 1, pytest.approx(1 / 3))


def test_metric_tallies_keep_at_most_20_distinct_reasons_and_no_empty_one() -> None:
    from evalgate.model import MetricResult

    aggregate = RunAggregate()
    for index in range(25):
        metric = MetricResult(status=MetricStatus.unavailable, reason=f"reason {index}" if index else None)
        aggregate.add(CaseResult(id=f"c{index}", status=CaseStatus.passed, passed=True, metrics={"m": metric}))
    reasons = aggregate.metrics["m"].reasons
    assert len(reasons) == 20 and None not in reasons and set(reasons) == {f"reason {i}" for i in range(1, 21)}
    assert aggregate.metrics["m"].unavailable == 25


def test_run_totals_of_tokens_latency_cost_and_skipped_cases() -> None:
    aggregate = RunAggregate()
    rows = [(CaseStatus.passed, 100, 20.0, 0.25), (CaseStatus.failed, None, None, None),
            (CaseStatus.skipped, 50, 40.0, 0.5), (CaseStatus.passed, 30, None, 0.0)]
    for index, (status, tokens, latency, cost) in enumerate(rows):
        aggregate.add(CaseResult(id=f"c{index}", status=status, passed=status is CaseStatus.passed,
                                 num_tokens=tokens, latency_ms=latency, cost_usd=cost))
    assert (aggregate.total_test_cases, aggregate.total_passed, aggregate.total_failed, aggregate.total_skipped) == (
        4, 2, 1, 1)
    assert (aggregate.tokens_total, aggregate.tokens_cases) == (180, 3)
    assert (aggregate.latency_total, aggregate.latency_cases) == (60.0, 2)
    assert aggregate.cost_usd == 0.75
    assert aggregate.pass_rate == pytest.approx(2 / 3) and aggregate.weighted_pass_rate == pytest.approx(2 / 3)


def test_breakdown_rates_and_averages_are_rounded_to_six_decimals() -> None:
    aggregate = RunAggregate()
    for index, (status, value) in enumerate(((CaseStatus.passed, 1.0), (CaseStatus.failed, 0.0),
                                             (CaseStatus.failed, 0.0))):
        aggregate.add(CaseResult(id=f"c{index}", status=status, passed=status is CaseStatus.passed, suite="s",
                                 metrics={"m": judge_metric(value, None, {})}))
    group = aggregate.breakdowns_dict()["suite"]["s"]
    assert group["pass_rate"] == 0.333333 and group["average_scores"] == {"m": 0.333333}


def test_an_empty_run_has_zero_rates_and_critical_failures_are_listed_up_to_the_cap() -> None:
    from evalgate.verdict.aggregate import MAX_CRITICAL_LISTED

    empty = RunAggregate()
    assert (empty.pass_rate, empty.weighted_pass_rate) == (0.0, 0.0)
    aggregate = RunAggregate()
    for index in range(MAX_CRITICAL_LISTED + 1):
        aggregate.add(CaseResult(id=f"k{index}", status=CaseStatus.failed, passed=False, risk_level="critical",
                                 reasons=["r1", "r2", "r3", "r4", "r5", "r6", "r7"], source="d.yaml:1"))
    assert aggregate.critical_failure_count == MAX_CRITICAL_LISTED + 1
    assert len(aggregate.critical_failures) == MAX_CRITICAL_LISTED
    first = aggregate.critical_failures[0]
    assert (first["reasons"], first["more_reasons"]) == (["r1", "r2", "r3", "r4", "r5"], 2)  # the rest counted
    verdict = run_verdict(aggregate, {}, GatePolicy())
    assert verdict.reasons[0] == "critical case k0 failed (d.yaml:1): r1; r2; r3; r4; r5 (+2 more)"


def test_a_critical_cases_reason_names_every_failing_metric_rules_first_latency_last() -> None:
    from evalgate.model import Threshold
    from evalgate.verdict.gate import case_verdict

    def failed(value: float, limit: float, details: dict | None = None, op: str = "min") -> Any:
        return judge_metric(value, Threshold(op=op, value=limit), details or {})

    rules = failed(0.5, 1.0, {"checks": [{"label": "no-leaked-password", "passed": False, "reason": "found 'hunter2'"},
                                         {"label": "contains:P1", "passed": True, "reason": None}]})
    status, reasons = case_verdict({"latency_ms": failed(2400.0, 1500.0, op="max"), "relevancy": failed(0.2, 0.7),
                                    "rules": rules}, error=None, strict=False)
    assert status is CaseStatus.failed
    assert [r.split(":")[0] for r in reasons] == ["rules", "relevancy", "latency_ms"]
    assert reasons[0] == "rules: no-leaked-password: found 'hunter2'"


def test_an_unknown_risk_level_weighs_as_medium() -> None:
    aggregate = RunAggregate()
    aggregate.add(CaseResult(id="u", status=CaseStatus.passed, passed=True, risk_level="unrated"))
    aggregate.add(CaseResult(id="l", status=CaseStatus.failed, passed=False, risk_level="low"))
    assert aggregate.weighted_pass_rate == pytest.approx(1.0 / (1.0 + 0.5))  # weights: unknown 1, low 0.5


def test_a_metric_that_did_not_run_never_counts_toward_averages_even_carrying_a_value() -> None:
    """Only passed/failed metrics are valued: an ``unavailable`` result that (against the model's rule)
    carries a value is counted as unavailable, not averaged, in the tally and in the breakdowns alike."""
    from evalgate.model import MetricResult

    aggregate = RunAggregate()
    stray = MetricResult(status=MetricStatus.unavailable, value=0.9, reason="judge down")
    valued = judge_metric(0.2, None, {})
    aggregate.add(CaseResult(id="a", status=CaseStatus.errored, passed=False, category="crm", metrics={"m": stray}))
    aggregate.add(CaseResult(id="b", status=CaseStatus.passed, passed=True, category="crm", metrics={"m": valued}))
    tally = aggregate.metrics["m"]
    assert (tally.count, tally.total, tally.unavailable, tally.maximum) == (1, 0.2, 1, 0.2)
    assert aggregate.breakdowns_dict()["category"]["crm"]["average_scores"] == {"m": 0.2}


def test_breakdowns_leave_out_cases_without_a_value_for_the_dimension() -> None:
    """A missing (None) or empty suite/category makes no "None" or "" group."""
    aggregate = RunAggregate()
    aggregate.add(CaseResult(id="a", status=CaseStatus.passed, passed=True, suite="", category=None,
                             difficulty="hard"))
    breakdowns = aggregate.breakdowns_dict()
    assert breakdowns["suite"] == {} and breakdowns["category"] == {}
    assert breakdowns["difficulty"]["hard"]["total"] == 1


def test_judge_metric_validates_a_details_mapping_that_is_not_a_dict() -> None:
    """Only a plain dict takes the fast path; any other mapping is validated into a dict (results are
    written as JSON, which a mappingproxy would not survive)."""
    import json
    from types import MappingProxyType

    result = judge_metric(0.5, None, MappingProxyType({"k": 1}))  # type: ignore[arg-type]
    assert type(result.details) is dict and result.details == {"k": 1}
    assert json.loads(result.model_dump_json())["details"] == {"k": 1}


def test_metrics_not_run_count_skipped_and_unavailable_alike() -> None:
    """One skipped and one unavailable result: the metric did not run on 2 cases (a sum, so equal
    counts do not cancel out)."""
    from evalgate.model import MetricResult

    aggregate = RunAggregate()
    for index, status in enumerate((MetricStatus.skipped, MetricStatus.unavailable)):
        metric = MetricResult(status=status, reason="no judge")
        aggregate.add(CaseResult(id=f"c{index}", status=CaseStatus.passed, passed=True, metrics={"m": metric}))
    assert aggregate.not_run_metrics() == {"m": 2}


# ── judge evidence at its edges (issue #11's rules, hand-computed) ───────────────────────────────


def _judged_aggregate(tally: object, *, errored_cases: int = 0) -> RunAggregate:
    aggregate = RunAggregate(judged={"rel"}, gated_judged={"rel"})
    aggregate.judge = {"rel": tally}  # type: ignore[dict-item]
    aggregate.judge_errored_cases = errored_cases
    return aggregate


def test_judge_reason_needs_fewer_than_half_the_verdicts_scored() -> None:
    """Minority rule: 2·(missing − budget) > verdicts − budget. 2 of 4 missing is exactly half (no reason,
    with the errored cases allowed); 3 of 4 is a minority; with 2 of 5 left unasked by the budget, 2 more
    missing of the 3 asked is a minority too (2·2 > 3)."""
    from evalgate.verdict.aggregate import JudgeTally
    from evalgate.verdict.gate import judge_reason

    assert judge_reason(_judged_aggregate(JudgeTally(4, 2, 0, "down", "down")), max_errored=10) is None
    assert judge_reason(_judged_aggregate(JudgeTally(4, 3, 0, "down", "down")), max_errored=10) == (
        "judge unavailable: 3 of 4 verdicts of gated judged metrics could not be scored (rel 3 of 4; first: down)"
        " — see results.json")
    budget = judge_reason(_judged_aggregate(JudgeTally(5, 4, 2, "budget", "down")), max_errored=10)
    assert budget is not None and "2 of 3 verdicts" in budget
    assert JudgeTally(5, 4, 2).scored == 1 and JudgeTally(5, 4, 2).judge_missing == 2


def test_the_judge_reason_comes_first_among_the_gate_reasons() -> None:
    from evalgate.model import MetricResult
    from evalgate.verdict.aggregate import JudgeTally

    aggregate = _judged_aggregate(JudgeTally(4, 3, 0, "down", "down"))
    aggregate.add(CaseResult(id="a", status=CaseStatus.failed, passed=False,
                             metrics={"acc": MetricResult(status=MetricStatus.failed, value=0.1)}))
    verdict = run_verdict(aggregate, {"acc": Threshold(op="min", value=0.5)}, GatePolicy(max_errored=10))
    assert verdict.reasons[0].startswith("judge unavailable: 3 of 4") and verdict.reasons[1].startswith("acc average")


def test_collapsed_verdict_counts_default_to_zero() -> None:
    """A collapsed repeat result carries its counts in details.judge_verdicts; absent keys count 0."""
    from evalgate.model import MetricResult
    from evalgate.verdict.aggregate import JudgeTally, judge_verdicts

    def collapsed(counts: dict[str, object]) -> MetricResult:
        return MetricResult(status=MetricStatus.passed, value=0.5, details={"judge_verdicts": counts})

    assert judge_verdicts(collapsed({})) == JudgeTally(0, 0, 0, None, None)
    assert judge_verdicts(collapsed({"of": 3, "missing": 2, "budget": 1, "first": "x", "first_judge": "y"})) == (
        JudgeTally(3, 2, 1, "x", "y"))


def test_an_errored_case_counts_for_the_judge_when_the_missing_verdict_was_gated_by_set_or_by_case() -> None:
    """A missing verdict errors a case "for the judge" when its metric is gated run-wide (gated_judged) or
    on this case (its result has a threshold); an ungated judged metric missing its verdict does not."""
    from evalgate.model import MetricResult

    def errored_case(name: str, threshold: Threshold | None) -> CaseResult:
        metric = MetricResult(status=MetricStatus.unavailable, threshold=threshold, reason="judge down")
        return CaseResult(id=name, status=CaseStatus.errored, passed=False, metrics={name: metric})

    for name, threshold, counted in (("gated", None, 1), ("by_case", Threshold(op="min", value=0.5), 1),
                                     ("ungated", None, 0)):
        aggregate = RunAggregate(judged={"gated", "by_case", "ungated"}, gated_judged={"gated"})
        aggregate.add(errored_case(name, threshold))
        assert aggregate.judge_errored_cases == counted, name


def test_judged_metrics_read_by_a_gated_metric_are_gated(monkeypatch: pytest.MonkeyPatch) -> None:
    """judge_metric_sets: ``rq`` has no threshold but the gated ``comp`` reads it, so a missing ``rq``
    verdict matters; ``aside`` is judged, ungated and read by nothing."""
    from evalgate.metrics import registry
    from evalgate.verdict.gate import judge_metric_sets

    monkeypatch.setattr(registry, "REGISTRY", {})
    fn = lambda case, answer, ctx: 0.0  # noqa: E731
    registry.metric("rq", family="t", kind="judged")(fn)
    registry.metric("aside", family="t", kind="judged")(fn)
    registry.metric("comp", family="t", depends_on=("rq",))(fn)
    thresholds = {"comp": Threshold(op="min", value=0.5)}
    assert judge_metric_sets(registry.REGISTRY, thresholds, judging=True) == (
        frozenset({"rq", "aside"}), frozenset({"rq"}))
    assert judge_metric_sets(registry.REGISTRY, thresholds, judging=False) == (frozenset(), frozenset())
