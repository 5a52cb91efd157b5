"""``verdict.reasons.gate_reasons``: the gate reasons that come from outside the cases (shards, calibration, the
baseline comparison, the gate policy), assembled in verdict/ for ``runner.finish`` (a run), ``runner.api``
(``evalgate compare``) and ``runner.merge`` (a merged run) — checked against hand-written reasons."""

from __future__ import annotations

from typing import Any

from evalgate.verdict.compare import compare_runs
from evalgate.verdict.reasons import ShardEnd, gate_reasons

DILUTED = ("hit_rate on the 10 case(s) the base run had: average 0.700 misses threshold min 0.8 (the 20 new "
           "case(s) do not count towards it)")


def record(case_id: str, value: float) -> dict[str, Any]:
    return {"id": case_id, "source": "cases.yaml:1", "risk_level": "medium",
            "status": "passed" if value >= 0.8 else "failed", "passed": value >= 0.8, "repeat": 0,
            "expectation": "e", "metrics": {"hit_rate": {"value": value}}}


def diluted_comparison() -> dict[str, Any]:
    """7 of the base run's 10 cases pass (0.7 < 0.8) while 20 new perfect cases lift the average to 0.9."""
    values = [1.0] * 7 + [0.0] * 3
    base = {"results": [record(f"c{i}", 1.0) for i in range(10)], "thresholds": {"hit_rate": {"min": 0.8}}}
    head = {"results": [record(f"c{i}", v) for i, v in enumerate(values)]
            + [record(f"easy{i}", 1.0) for i in range(20)], "thresholds": {"hit_rate": {"min": 0.8}}}
    return compare_runs(base, head)


def test_nothing_to_add() -> None:
    assert gate_reasons() == []
    assert gate_reasons(shards=[ShardEnd("a.json", "completed"), ShardEnd("b.json", "merged")]) == []


def test_every_source_in_order() -> None:
    comparison = diluted_comparison()
    reasons = gate_reasons(
        missing_shards=["2/3", "3/3"],
        shards=[ShardEnd("s1.json", "cancelled", budget_exceeded=True), ShardEnd("s2.json", "completed")],
        calibration=["faithfulness: calibration failed"], comparison=comparison, fail_on_regression=True,
        policy=["gate policy loosened"])
    assert reasons == [
        "shard(s) 2/3, 3/3 missing: the merged results are partial",
        "s1.json: run cancelled before every case finished",
        "s1.json: max_cost reached: the shard stopped before exceeding the budget",
        "faithfulness: calibration failed",
        DILUTED,  # the regression test rejected nothing here: only the diluted threshold
        "gate policy loosened",
    ]


def test_diluted_thresholds_fail_a_run_but_compare_lists_regressions_only() -> None:
    comparison = diluted_comparison()
    assert gate_reasons(comparison=comparison) == [DILUTED]  # a run's gate, with or without fail_on_regression
    assert gate_reasons(comparison=comparison, fail_on_regression=True, diluted=False) == []  # evalgate compare
    assert gate_reasons(comparison=None, fail_on_regression=True) == []  # no comparison was made
