"""Pairwise judging inside the one regression family (verdict.compare): the judge's sign tests are members of the
weighted Holm family with the gated metrics, the pass rate and the critical cases — each sharing its metric's
weight — decided by hand-computed weighted Holm, and against statsmodels where the weights are equal."""

from __future__ import annotations

from typing import Any

import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from evalgate.verdict import stats
from evalgate.verdict.compare import compare_runs, comparison_gate_reasons, family_weights
from evalgate.verdict.pairwise import summarize


def _doc(statuses: list[bool], values: dict[str, list[float]], run_id: str) -> dict[str, Any]:
    rows = [{"id": f"c{i}", "index": i, "repeat": 0, "source": f"s.yaml:{i + 1}", "risk_level": "medium",
             "status": "passed" if ok else "failed", "passed": ok,
             "metrics": {name: {"value": column[i]} for name, column in values.items()}}
            for i, ok in enumerate(statuses)]
    table = {name: {"direction": "higher", "threshold": {"min": 0.5}} for name in values}
    return {"run_id": run_id, "timestamp": "2026-11-26T00:00:00Z", "metrics": table, "results": rows}


def test_a_metric_and_its_pairwise_test_split_the_metrics_slot() -> None:
    """Slots: pass rate 2/3; metrics a, b share 1/3 → 1/6 each; a's absolute and pairwise tests 1/12 each."""
    weights = family_weights(["metric", "metric", "pairwise", "pass_rate"], 2 / 3, ["a", "b", "a", "pass_rate"])
    assert weights == pytest.approx([1 / 12, 1 / 6, 1 / 12, 2 / 3])
    assert sum(weights) == pytest.approx(1.0)
    # a pairwise test whose metric has no comparison row takes a whole metric slot; critical cases their own
    assert family_weights(["pairwise", "critical", "pass_rate"], 2 / 3, ["c", "critical cases", "pass_rate"]) == \
        pytest.approx([1 / 6, 1 / 6, 2 / 3])
    assert family_weights(["metric", "pass_rate"], 2 / 3) == pytest.approx([1 / 3, 2 / 3])  # unchanged without names


def _runs() -> tuple[dict[str, Any], dict[str, Any]]:
    """40 cases. Head: c0–c7 fail (pass rate: 8 pass→fail, 0 fixes), metric a 1 → 0 on c0–c5 (6 worse, 0 better),
    metric b unchanged."""
    n = 40
    base = _doc([True] * n, {"a": [1.0] * n, "b": [1.0] * n}, "base")
    head = _doc([i >= 8 for i in range(n)], {"a": [0.0 if i < 6 else 1.0 for i in range(n)], "b": [1.0] * n}, "head")
    return base, head


def test_weighted_holm_decisions_mixing_pairwise_and_metric_tests_by_hand() -> None:
    """Raw one-sided p: pass rate (8, 0) 1/256; a (6, 0) 1/64; pairwise a, 7 losses 0 wins, 1/128; b 1.
    Weights 2/3, 1/12, 1/12, 1/6; ordered by p/w: pass rate 0.00586, pairwise 0.0938, a 0.1875, b 6.
    Step 1 (W = 1):   pass rate 1/256 · 1 / (2/3)     = 0.005859375
    Step 2 (W = 1/3): pairwise  1/128 · (1/3) / (1/12) = 0.03125
    Step 3 (W = 1/4): a         1/64 · (1/4) / (1/12)  = 0.046875
    Step 4 (W = 1/6): b         1 → 1.
    At α = 0.05 the pass rate, the pairwise test and a are regressions; at α = 0.04 a is not."""
    base, head = _runs()
    table = summarize([("a", "base")] * 7 + [("a", "tie")] * 2)
    comparison = compare_runs(base, head, alpha=0.05, tolerances={}, pairwise=table, pairwise_gated=["a"])
    tests = {(t["kind"], t["name"]): t for t in comparison["family"]["tests"]}
    assert set(tests) == {("metric", "a"), ("metric", "b"), ("pairwise", "a"), ("pass_rate", "pass_rate")}
    expected = {("pass_rate", "pass_rate"): (1 / 256, 2 / 3, 0.005859375), ("pairwise", "a"): (1 / 128, 1 / 12, 0.03125),
                ("metric", "a"): (1 / 64, 1 / 12, 0.046875), ("metric", "b"): (1.0, 1 / 6, 1.0)}
    for key, (p, weight, adjusted) in expected.items():
        assert tests[key]["p_value"] == pytest.approx(p, rel=1e-12), key
        assert tests[key]["weight"] == pytest.approx(weight, rel=1e-12), key
        assert tests[key]["p_adjusted"] == pytest.approx(adjusted, rel=1e-12), key
    assert [k for k, t in tests.items() if t["rejected"]] == [("metric", "a"), ("pairwise", "a"),
                                                                ("pass_rate", "pass_rate")]
    row = comparison["pairwise"]["a"]
    assert (row["wins"], row["losses"], row["ties"], row["regression"]) == (0, 7, 2, True)
    assert row["p_value"] == sps.binomtest(7, 7, 0.5, alternative="greater").pvalue
    assert comparison["regression"] is True and comparison["family"]["size"] == 4
    reasons = comparison_gate_reasons(comparison, True)
    assert ("a: the judge preferred the base branch's answer 7 time(s) and this change's 0 time(s) (2 tie(s); exact "
            "sign test (one-sided) p=0.0078, weighted Holm–Bonferroni-adjusted p=0.031 ≤ α=0.05 over 4 tests)") in reasons
    assert len(reasons) == 3
    assert comparison["summary"].endswith(" The judge preferred the base branch's answers, a significant regression at "
                                          "α=0.05: a (7 worse, 0 better, 2 tie(s); sign test p=0.0078, adjusted "
                                          "p=0.031).")

    stricter = compare_runs(base, head, alpha=0.04, tolerances={}, pairwise=table, pairwise_gated=["a"])
    rejected = sorted((t["kind"], t["name"]) for t in stricter["family"]["tests"] if t["rejected"])
    assert rejected == [("pairwise", "a"), ("pass_rate", "pass_rate")]


def test_ungated_pairwise_rows_are_not_in_the_family_and_the_old_split_would_have_lied() -> None:
    """A pairwise table of a metric that may not gate (uncalibrated) adds no member. Without the pairwise test,
    a's slot is whole (1/6): its adjusted p at step 2 (W = 1/3) is 1/64 · (1/3)/(1/6) = 1/32."""
    base, head = _runs()
    table = summarize([("a", "base")] * 7)
    alone = compare_runs(base, head, alpha=0.05, tolerances={}, pairwise=table, pairwise_gated=[])
    assert alone["pairwise"] == {} and alone["family"]["size"] == 3
    metric_a = next(t for t in alone["family"]["tests"] if t["name"] == "a")
    assert metric_a["weight"] == pytest.approx(1 / 6) and metric_a["p_adjusted"] == pytest.approx(1 / 32)


def test_equal_weights_are_plain_holm_as_in_statsmodels() -> None:
    """No pass rate (no statuses) and both metrics judged pairwise: four members of weight 1/4 each — plain Holm."""
    n = 30
    base = _doc([True] * n, {"a": [1.0] * n, "b": [1.0] * n}, "base")
    head = _doc([True] * n, {"a": [0.0 if i < 5 else 1.0 for i in range(n)],
                             "b": [0.0 if i < 3 else 1.0 for i in range(n)]}, "head")
    for doc in (base, head):
        for row in doc["results"]:
            row["status"], row["passed"] = "skipped", False  # every case skipped: no pass-rate member
    table = summarize([("a", "base")] * 9 + [("a", "head")] + [("b", "base")] * 4 + [("b", "head")] * 2)
    comparison = compare_runs(base, head, alpha=0.05, tolerances={}, pairwise=table, pairwise_gated=["a", "b"])
    tests = comparison["family"]["tests"]
    assert [t["kind"] for t in tests] == ["metric", "metric", "pairwise", "pairwise"]
    assert all(t["weight"] == pytest.approx(0.25) for t in tests)
    raw = [t["p_value"] for t in tests]
    assert raw == pytest.approx([1 / 32, 1 / 8, 11 / 1024, 22 / 64], rel=1e-12)
    reject, adjusted, _, _ = multipletests(raw, alpha=0.05, method="holm")
    assert [t["p_adjusted"] for t in tests] == pytest.approx(list(adjusted), rel=1e-12)
    assert [t["rejected"] for t in tests] == list(reject)
    assert stats.holm(raw) == pytest.approx(list(adjusted), rel=1e-12)


def test_the_simulated_judges_are_position_fair_and_the_old_rule_is_replayed() -> None:
    """bench.stats' judges: under A/A (identical answers) the random judge's combined preferences split evenly
    between head and base; the content judge prefers the answer with the higher value in both orders."""
    import numpy as np

    from bench import stats as bench_stats

    cell = bench_stats.Cell(n=400, gated=1, pairwise=1)
    doc = _doc([True] * 400, {"m00": [1.0] * 400}, "x")
    for row in doc["results"]:
        row["repeat"] = 0
    prefs = bench_stats.simulated_preferences(cell, doc, doc, ["m00"], np.random.default_rng(5))
    counts = {k: sum(1 for _, p in prefs if p == k) for k in ("head", "base", "tie")}
    assert sum(counts.values()) == 400 and abs(counts["head"] - counts["base"]) < 40  # 0.16 each: 64 ± 11
    better = _doc([True] * 400, {"m00": [1.0] * 200 + [0.0] * 200}, "h")
    worse = _doc([True] * 400, {"m00": [0.0] * 200 + [1.0] * 200}, "b")
    content = bench_stats.Cell(n=400, gated=1, pairwise=1, judge="content")
    prefs = bench_stats.simulated_preferences(content, worse, better, ["m00"], np.random.default_rng(6))
    assert [p for _, p in prefs[:200]] == ["head"] * 200 and [p for _, p in prefs[200:]] == ["base"] * 200
    base, head = _runs()
    comparison = compare_runs(base, head, alpha=0.05, tolerances={},
                              pairwise=summarize([("a", "base")] * 7 + [("a", "tie")] * 2), pairwise_gated=["a"])
    flags = bench_stats.pairwise_flags(comparison)
    assert flags["one family"] is True and flags["without pairwise"] is True
