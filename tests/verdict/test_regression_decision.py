"""The regression decision (issue #21): exact tests against scipy/statsmodels, Holm by hand, tolerances,
critical cases under noise, missing evidence, intervals, and the simulation harness at a tiny size."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint

from evalgate.config.settings import Settings
from evalgate.errors import UserError
from evalgate.verdict import stats
from evalgate.verdict.compare import compare_runs, comparison_gate_reasons
from evalgate.verdict.tolerance import DEFAULT_TOLERANCES, Tolerance, parse_tolerance, resolve_tolerances

# ── exact tests against independent libraries ───────────────────────────────────────────────────


@pytest.mark.parametrize(("b", "c"), [(4, 0), (7, 1), (9, 2), (11, 3), (0, 5), (3, 3), (30, 12), (120, 95),
                                      (1500, 1400), (2100, 1900)])
def test_one_sided_mcnemar_matches_scipy_binomtest(b: int, c: int) -> None:
    expected = sps.binomtest(b, b + c, 0.5, alternative="greater").pvalue if b + c else 1.0
    assert stats.mcnemar_one_sided(b, c) == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize(("b", "c"), [(4, 0), (7, 1), (9, 2), (11, 3), (0, 5), (3, 3), (30, 12), (120, 95)])
def test_mid_p_mcnemar_is_the_exact_p_minus_half_the_point_probability(b: int, c: int) -> None:
    n = b + c
    expected = sps.binomtest(b, n, 0.5, alternative="greater").pvalue - 0.5 * sps.binom.pmf(b, n, 0.5)
    assert stats.mcnemar_mid_p(b, c) == pytest.approx(expected, rel=1e-10)


def test_mid_p_mcnemar_by_hand() -> None:
    assert stats.mcnemar_mid_p(4, 0) == 1 / 32  # exact 1/16 − ½·1/16
    assert stats.mcnemar_mid_p(7, 1) == 5 / 256  # exact 9/256 − ½·8/256
    assert stats.mcnemar_mid_p(0, 0) == 1.0 and stats.mcnemar_mid_p(0, 2) == 7 / 8  # 1 − ½·¼
    with pytest.raises(ValueError):
        stats.mcnemar_mid_p(-1, 2)


@pytest.mark.parametrize(("b", "c"), [(4, 0), (7, 1), (9, 2), (11, 3), (25, 10)])
def test_two_sided_mcnemar_matches_statsmodels(b: int, c: int) -> None:
    table = [[50, b], [c, 50]]
    assert stats.mcnemar_exact(b, c) == pytest.approx(sm_mcnemar(table, exact=True).pvalue, rel=1e-12)


def test_sign_flip_test_enumerates_exactly_like_scipy_permutation_test() -> None:
    rng = np.random.default_rng(3)
    for _ in range(5):
        d = rng.normal(0.3, 1.0, size=9)
        ours, how = stats.sign_flip_p(d)
        ref = sps.permutation_test((d,), np.sum, permutation_type="samples", alternative="greater",
                                   n_resamples=10**6).pvalue
        assert how == "exact" and ours == pytest.approx(ref, rel=1e-9)
    # on ±1 differences it is the one-sided exact McNemar test
    flips = [-1.0] * 3 + [1.0] * 9 + [0.0] * 50
    assert stats.sign_flip_p(flips)[0] == pytest.approx(stats.mcnemar_one_sided(9, 3))


def test_monte_carlo_sign_flip_is_close_to_the_exact_value() -> None:
    d = np.linspace(-1, 1.4, 40)
    p, how = stats.sign_flip_p(d, resamples=20000, seed=1)
    z = d.sum() / math.sqrt(np.sum(d * d))
    assert how == "Monte Carlo R=20000" and p == pytest.approx(1 - sps.norm.cdf(z), abs=0.01)


def test_stratified_exchange_test_is_fisher_on_one_stratum_and_convolves_by_hand() -> None:
    # one case, 5 base runs all passing, 5 head runs 1 passing: Fisher's exact test, one-sided
    expected = sps.fisher_exact([[5, 0], [1, 4]], alternative="greater").pvalue
    assert stats.stratified_exchange_p([(5, 5, 1, 5)]) == pytest.approx(expected, rel=1e-12)
    # two single-run flips: S = 2 of a Binomial(2, ½) → ¼; with one concordant stratum unchanged
    assert stats.stratified_exchange_p([(1, 1, 0, 1), (1, 1, 0, 1), (1, 1, 1, 1)]) == pytest.approx(0.25)
    # brute force over every arrangement of two 3-run strata
    strata = [(3, 3, 0, 3), (2, 3, 1, 3)]
    total = hits = 0
    for arrangement in itertools.product(*(itertools.combinations(range(6), x + y) for x, _, y, _ in strata)):
        total += 1
        hits += sum(sum(1 for i in chosen if i < 3) for chosen in arrangement) >= 5
    assert stats.stratified_exchange_p(strata) == pytest.approx(hits / total)


def test_holm_by_hand_and_against_statsmodels() -> None:
    # p sorted 0.005, 0.01, 0.03, 0.04 (m = 4): 4·0.005 = 0.02, 3·0.01 = 0.03, 2·0.03 = 0.06, 1·0.04 → 0.06
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm([0.5, 0.001]) == pytest.approx([0.5, 0.002])
    assert stats.holm([]) == []
    rng = np.random.default_rng(7)
    for _ in range(20):
        p = list(rng.uniform(0, 0.2, size=int(rng.integers(1, 14))))
        assert stats.holm(p) == pytest.approx(list(multipletests(p, method="holm")[1]))


def test_wilson_interval_against_statsmodels_and_the_twenty_of_twenty_case() -> None:
    estimate, low, high = stats.wilson_interval(20, 20)  # type: ignore[misc]
    assert (estimate, round(low, 3), high) == (1.0, 0.839, 1.0)
    for k, n in ((0, 10), (3, 12), (95, 100), (180, 200)):
        ref = proportion_confint(k, n, alpha=0.05, method="wilson")
        assert stats.wilson_interval(k, n)[1:] == pytest.approx(ref, abs=1e-12)  # type: ignore[index]
    assert stats.wilson_interval(0, 0) is None


def test_bca_interval_agrees_with_scipy_within_monte_carlo_error() -> None:
    x = np.random.default_rng(11).exponential(size=40)
    ours = stats.bca_mean_ci(x, resamples=20000, seed=2)
    ref = sps.bootstrap((x,), np.mean, method="BCa", n_resamples=20000, random_state=2).confidence_interval
    assert ours is not None
    assert ours[1] == pytest.approx(ref.low, rel=0.03) and ours[2] == pytest.approx(ref.high, rel=0.03)
    means = stats._bootstrap_means(np.asarray(x), 20000, 2, stats.EXACT_WORK_LIMIT)
    assert means is not None
    percentile_high = float(np.quantile(means, 0.975))
    assert ours[2] > percentile_high  # BCa moves the percentile interval toward the long tail


# ── the comparison's decisions ───────────────────────────────────────────────────────────────────


def _doc(rows: list[dict[str, Any]], table: dict[str, Any], run_id: str) -> dict[str, Any]:
    return {"run_id": run_id, "timestamp": "2026-11-26T00:00:00Z", "metrics": table, "results": rows}


def _row(i: int, passed: bool, values: dict[str, float], *, risk: str = "medium", repeat: int = 0) -> dict[str, Any]:
    return {"id": f"c{i}", "index": i, "repeat": repeat, "risk_level": risk, "source": f"s.yaml:{i + 1}",
            "status": "passed" if passed else "failed", "passed": passed,
            "metrics": {name: {"value": v} for name, v in values.items()}}


HIT = {"hit_rate": {"direction": "higher", "threshold": {"min": 0.8}}}


def test_four_pass_to_fail_flips_of_two_hundred_are_not_significant() -> None:
    base = [_row(i, True, {"hit_rate": 1.0}) for i in range(200)]
    head = [_row(i, i >= 4, {"hit_rate": 0.0 if i < 4 else 1.0}) for i in range(200)]
    result = compare_runs(_doc(base, HIT, "b"), _doc(head, HIT, "h"), resamples=2000)
    hit = result["metrics"]["hit_rate"]
    assert hit["test"] == "exact McNemar (one-sided)" and hit["p_value"] == pytest.approx(1 / 16)
    assert not hit["regression"] and hit["verdict"] == "inconclusive" and hit["detectable"] > 0
    assert result["pass_rate"]["p_value"] == pytest.approx(1 / 16) and result["regression"] is False
    assert comparison_gate_reasons(result, fail_on_regression=True) == []
    # and the family holds both tests: the p printed is the one decided on
    assert [(t["name"], t["p_value"], t["rejected"]) for t in result["family"]["tests"]] == [
        ("hit_rate", 1 / 16, False), ("pass_rate", 1 / 16, False)]


def test_twelve_cases_cannot_detect_a_three_case_drop_and_say_so() -> None:
    base = [_row(i, True, {"hit_rate": 1.0}) for i in range(12)]
    head = [_row(i, i >= 3, {"hit_rate": 0.0 if i < 3 else 1.0}) for i in range(12)]
    result = compare_runs(_doc(base, HIT, "b"), _doc(head, HIT, "h"), resamples=2000)
    assert result["metrics"]["hit_rate"]["verdict"] == "inconclusive"
    assert "hit_rate fell 0.250 (p=0.12), n=12 too small to detect a change below" in result["summary"]


LATENCY = {"latency_ms": {"direction": "lower", "threshold": {"max": 1500}}}


def test_a_five_millisecond_latency_rise_is_no_regression() -> None:
    rng = np.random.default_rng(5)
    base_ms = rng.uniform(1.0, 3.0, size=12)
    base = [_row(i, True, {"latency_ms": float(v)}) for i, v in enumerate(base_ms)]
    head = [_row(i, True, {"latency_ms": float(v + 5.0 + rng.uniform(0, 1))}) for i, v in enumerate(base_ms)]
    result = compare_runs(_doc(base, LATENCY, "b"), _doc(head, LATENCY, "h"), resamples=2000, tolerances={})
    latency = result["metrics"]["latency_ms"]
    assert latency["tolerance"] == 50.0 and latency["tolerance_rule"] == {"abs": 50.0, "rel": 0.1}
    assert not latency["regression"] and latency["verdict"] == "no meaningful change"
    assert result["regression"] is False
    # without the tolerance the same rise is a significant regression
    strict = compare_runs(_doc(base, LATENCY, "b"), _doc(head, LATENCY, "h"), resamples=2000,
                          tolerances={"latency_ms": None})
    assert strict["metrics"]["latency_ms"]["regression"] and strict["regression"] is True
    # a big slow-down beyond both floors still fails: 2 s → 2.5 s
    slow = [_row(i, True, {"latency_ms": 2000.0 + 10 * i}) for i in range(12)]
    slower = [_row(i, True, {"latency_ms": 2500.0 + 10 * i + (i % 3)}) for i in range(12)]
    flagged = compare_runs(_doc(slow, LATENCY, "b"), _doc(slower, LATENCY, "h"), resamples=2000, tolerances={})
    assert flagged["metrics"]["latency_ms"]["verdict"] == "regression"


def test_tolerance_comes_from_the_head_run_settings() -> None:
    base = [_row(i, True, {"mention_f1": 0.9}) for i in range(30)]
    head = [_row(i, True, {"mention_f1": 0.88}) for i in range(30)]
    table = {"mention_f1": {"direction": "higher", "threshold": {"min": 0.5}}}
    head_doc = _doc(head, table, "h") | {"metadata": {"config": {"regression_tolerance": {"mention_f1": 0.05}}}}
    result = compare_runs(_doc(base, table, "b"), head_doc, resamples=2000)
    assert result["metrics"]["mention_f1"]["verdict"] == "no meaningful change" and not result["regression"]
    assert compare_runs(_doc(base, table, "b"), _doc(head, table, "h"), resamples=2000)["regression"] is True


def test_tolerance_parsing() -> None:
    assert parse_tolerance("x", 3) == Tolerance(absolute=3.0)
    assert parse_tolerance("x", {"rel": 0.2}).amount(50.0) == pytest.approx(10.0)
    assert Tolerance(absolute=50.0, relative=0.1).amount(2000.0) == pytest.approx(200.0)
    assert "latency_ms" not in resolve_tolerances({"latency_ms": 0})
    assert resolve_tolerances(None) == DEFAULT_TOLERANCES
    for bad in (True, -1, {"abs": 1, "pct": 2}, "5ms", {"rel": float("nan")}):
        with pytest.raises(UserError):
            parse_tolerance("latency_ms", bad)


def _repeated(i: int, outcomes: list[bool], risk: str = "critical") -> list[dict[str, Any]]:
    return [_row(i, ok, {}, risk=risk, repeat=r) for r, ok in enumerate(outcomes)]


def test_critical_cases_with_repeats_reliable_regression_versus_flaky_on_base() -> None:
    filler_base = [r for i in range(2, 40) for r in _repeated(i, [True] * 5, "medium")]
    base = _repeated(0, [True] * 5) + _repeated(1, [True, False, True, False, True]) + filler_base
    head = _repeated(0, [False] * 5) + _repeated(1, [False] * 5) + filler_base
    result = compare_runs(_doc(base, {}, "b"), _doc(head, {}, "h"), resamples=1000)
    critical = result["critical"]
    assert [e["id"] for e in critical["regressions"]] == ["c0"]
    assert [e["id"] for e in critical["flaky_on_base"]] == ["c1"]
    assert critical["repeats"] == 5 and critical["p_value"] < 0.01 and critical["regression"] is True
    [reason] = [r for r in comparison_gate_reasons(result, fail_on_regression=True) if r.startswith("critical")]
    assert "1 that passed every base run now fail: c0 (s.yaml:1)" in reason and "Holm–Bonferroni-adjusted" in reason
    # a critical case that was flaky on the base and fails on head is never the regression on its own
    only_flaky = compare_runs(_doc(_repeated(1, [True, False, True, False, True]) + filler_base, {}, "b"),
                              _doc(_repeated(1, [False] * 5) + filler_base, {}, "h"), resamples=1000)
    assert only_flaky["critical"]["regressions"] == [] and only_flaky["critical"]["regression"] is False
    # pass^k: a critical case passing 4 of 5 repeats fails (majority would pass it)
    four_of_five = compare_runs(_doc(_repeated(0, [True] * 5), {}, "b"),
                                _doc(_repeated(0, [True, True, False, True, True]), {}, "h"), resamples=1000)
    assert four_of_five["pass_rate"]["head"] == 0.0


def test_unchanged_runs_with_many_metrics_are_one_family() -> None:
    rng = np.random.default_rng(1)
    names = [f"m{j}" for j in range(6)]
    table = {name: {"direction": "higher", "threshold": {"min": 0.0}} for name in names}

    def run(run_id: str) -> dict[str, Any]:
        return _doc([_row(i, bool(rng.random() < 0.8), {n: float(rng.random()) for n in names})
                     for i in range(50)], table, run_id)

    result = compare_runs(run("b"), run("h"), resamples=500)
    family = result["family"]
    assert family["size"] == 7 and family["procedure"] == "weighted Holm–Bonferroni (pass rate weight 2/3)"
    # the pass rate (last) carries 2/3 of the weight, the six gated metrics (1/3)/6 each
    weights = [t["weight"] for t in family["tests"]]
    assert weights == pytest.approx([1 / 18] * 6 + [2 / 3]) and [t["kind"] for t in family["tests"]][-1] == "pass_rate"
    ps = [t["p_value"] for t in family["tests"]]
    assert [t["p_adjusted"] for t in family["tests"]] == pytest.approx(stats.weighted_holm(ps, weights))


def _closed_weighted_bonferroni(p: list[float], w: list[float], alpha: float) -> list[bool]:
    """Reference: the closed test of weighted Bonferroni tests, by brute force over every intersection."""
    m = len(p)
    rejected = []
    for i in range(m):
        subsets = (s for r in range(1, m + 1) for s in itertools.combinations(range(m), r) if i in s)
        rejected.append(all(any(p[j] <= alpha * w[j] / sum(w[k] for k in s) for j in s) for s in subsets))
    return rejected


def test_weighted_holm_by_hand_and_as_the_closed_weighted_bonferroni_test() -> None:
    # q = p/w: 0.0375, 0.05 → step 1 (total weight 1): 0.03/0.8 = 0.0375; step 2 (0.2 left): 0.01 → max 0.0375
    assert stats.weighted_holm([0.03, 0.01], [0.8, 0.2]) == pytest.approx([0.0375, 0.0375])
    # q = 0.08, 0.016, 0.8 → 0.004/0.25 = 0.016; 0.04·0.75/0.5 = 0.06; 0.2·0.25/0.25 = 0.2
    assert stats.weighted_holm([0.04, 0.004, 0.2], [0.5, 0.25, 0.25]) == pytest.approx([0.06, 0.016, 0.2])
    assert stats.weighted_holm([0.5, 0.001], [3.0, 3.0]) == pytest.approx(stats.holm([0.5, 0.001]))
    assert stats.weighted_holm([], []) == []
    rng = np.random.default_rng(9)
    for trial in range(200):
        m = int(rng.integers(1, 7))
        p = list(rng.uniform(0, 0.1, size=m) ** 2 * 10)
        w = list(rng.uniform(0.05, 1.0, size=m))
        alpha = float(rng.choice([0.01, 0.05, 0.1]))
        adjusted = stats.weighted_holm(p, w)
        assert [a <= alpha for a in adjusted] == _closed_weighted_bonferroni(p, w, alpha)
        equal = list(rng.uniform(0, 0.2, size=m))
        if trial < 20:  # statsmodels' multipletests runs gc.collect() on every call (≈60 ms in a full session)
            assert stats.weighted_holm(equal, [1.0] * m) == pytest.approx(list(multipletests(equal, method="holm")[1]))
    for bad in ([0.0, 1.0], [-1.0, 1.0], [float("nan"), 1.0], [1.0]):
        with pytest.raises(ValueError):
            stats.weighted_holm([0.01, 0.02], bad)


def test_the_pass_rate_carries_most_of_alpha_and_four_flips_never_suffice() -> None:
    """5 pass→fail flips and 0 fixes (exact one-sided p = 1/32) with an unchanged gated 0/1 metric: at weight
    2/3 the pass rate is tested at α·2/3 = 0.033 first and rejected (adjusted p = 3/64 = 0.047); with plain
    Holm (weight ½ of 2) it is not (1/16). 4 flips (p = 1/16 > α) are never significant, whatever the weight."""
    def runs(flips: int) -> tuple[dict[str, Any], dict[str, Any]]:
        base = [_row(i, True, {"hit_rate": float(i % 2)}) for i in range(200)]
        head = [_row(i, i >= flips, {"hit_rate": float(i % 2)}) for i in range(200)]
        return _doc(base, HIT, "b"), _doc(head, HIT, "h")

    five = compare_runs(*runs(5), resamples=500)
    rate = five["pass_rate"]
    assert rate["p_value"] == pytest.approx(1 / 32) and rate["p_adjusted"] == pytest.approx(3 / 64)
    assert rate["regression"] and five["regression"] is True
    [reason] = comparison_gate_reasons(five, fail_on_regression=True)
    assert reason.endswith("exact McNemar (one-sided) p=0.031, weighted Holm–Bonferroni-adjusted p=0.047 "
                           "≤ α=0.05 over 2 tests)")
    plain = compare_runs(*runs(5), resamples=500, pass_rate_weight=0.5)
    assert plain["family"]["procedure"] == "Holm–Bonferroni" and plain["pass_rate"]["p_adjusted"] == pytest.approx(1 / 16)
    assert plain["regression"] is False
    for weight in (0.5, 2 / 3, 0.99):
        four = compare_runs(*runs(4), resamples=500, pass_rate_weight=weight)
        assert four["pass_rate"]["p_value"] == pytest.approx(1 / 16) and four["regression"] is False
    with pytest.raises(ValueError, match="pass_rate_weight"):
        compare_runs(*runs(4), pass_rate_weight=1.0)


# ── missing evidence, end to end ─────────────────────────────────────────────────────────────────


def _run(tmp_path: Path, cases: str, answers: list[dict[str, Any]], **settings: Any) -> dict[str, Any]:
    from evalgate.runner.run import execute

    (tmp_path / "cases.yaml").write_text(textwrap.dedent(cases))
    (tmp_path / "answers.json").write_text(json.dumps(answers))
    config = Settings(dataset=[str(tmp_path / "cases.yaml")], outputs_file=str(tmp_path / "answers.json"),
                      output_dir=str(tmp_path / "out"), **settings)
    outcome = asyncio.run(execute(config, {}, cwd=tmp_path, install_signal_handlers=False))
    return json.loads(outcome.results_path.read_text())


SOURCED = """\
    cases:
""" + "".join(f"""\
      - id: q{i}
        input: Who wrote item {i}?
        expected_sources: [doc{i}]
""" for i in range(20))


def test_answers_without_sources_error_their_cases_and_fail_the_run_with_the_cause(tmp_path: Path) -> None:
    document = _run(tmp_path, SOURCED, [{"id": f"q{i}", "output": "someone"} for i in range(20)])
    assert document["summary"]["total_errored"] == 20 and not document["gate"]["passed"]
    first = document["gate"]["reasons"][0]
    assert first.startswith("hit_rate: 0 of 20 answers had what it needs (target returned no sources) — check "
                            "target_response_map")
    record = document["results"][0]
    assert record["status"] == "errored" and any("hit_rate has no value" in r for r in record["reasons"])


def test_one_answer_without_sources_errors_only_its_case_unless_optional(tmp_path: Path) -> None:
    answers = [{"id": f"q{i}", "output": "x", "sources": [f"doc{i}"]} for i in range(20)]
    del answers[3]["sources"]
    document = _run(tmp_path, SOURCED, answers)
    assert document["summary"]["total_errored"] == 1 and document["gate"]["reasons"] == [
        "1 case(s) errored (allowed: 0)"]
    optional = SOURCED.replace("    cases:\n", "    suite:\n      optional_metrics: [hit_rate, mrr]\n    cases:\n")
    (tmp_path / "optional").mkdir()
    relaxed = _run(tmp_path / "optional", optional, answers)
    assert relaxed["summary"]["total_errored"] == 0 and relaxed["gate"]["passed"]


def test_unknown_optional_metric_is_a_user_error(tmp_path: Path) -> None:
    cases = SOURCED.replace("    cases:\n", "    suite:\n      optional_metrics: [hit_rat]\n    cases:\n")
    with pytest.raises(UserError, match="optional_metrics: unknown metric 'hit_rat'"):
        _run(tmp_path, cases, [])


# ── the simulation harness, tiny, through the real code ─────────────────────────────────────────


def test_simulation_harness_runs_through_the_real_comparison(tmp_path: Path) -> None:
    from bench import stats as bench_stats

    null = [bench_stats.Cell(n=30, gated=2, critical=3, critical_kind="flaky", repeats=2, model="sparse")]
    power = [bench_stats.Cell(n=60, gated=1, drop=0.5)]
    results = bench_stats.simulate(4, 200, 1, null=null, power=power, alternatives=3, pairwise=2, progress=False)
    assert [row["replications"] for row in results["null"] + results["power"]] == [4, 4]
    assert results["power"][0]["rate"] >= 0.75  # a 50-point drop is found
    # the candidate rules: recomputed from the family's p-values, the chosen one agrees with compare_runs
    assert len(results["alternatives"]) == len(bench_stats.alternative_cells())
    assert all(row["replications"] == 3 and row["mismatches"] == 0 for row in results["alternatives"])
    text = bench_stats.render(results)
    assert "| 30 | 2 | 3 flaky | 2 | sparse |" in text and "A/B power" in text
    assert "| cell | Holm, exact (as merged) | Holm, mid-p | weighted Holm 2/3, exact (chosen) |" in text
    # pairwise judging: the one family's flag is compare_runs' own; the other rules are replays of its p-values
    assert len(results["pairwise"]) == len(bench_stats.pairwise_cells())
    assert all(row["replications"] == 2 and set(row["rates"]) == {"one family", "one family, pairwise own slot",
                                                                   "two families (before)", "without pairwise"}
               for row in results["pairwise"])
    assert "**Pairwise judging**" in text and "| A/A | 200 | 3 (1) | 0 | 1 | iid | random |" in text
    assert "aa pairwise max" in text
    page = tmp_path / "page.md"
    page.write_text(f"intro\n{bench_stats.BEGIN}\nold\n{bench_stats.END}\noutro\n")
    assert bench_stats.write_tables(text, [page, tmp_path / "missing.md"]) == [page]
    assert page.read_text() == f"intro\n{bench_stats.BEGIN}\n{text}\n{bench_stats.END}\noutro\n"


def test_exact_rates_of_the_candidate_rules_match_a_scipy_enumeration() -> None:
    from bench import stats as bench_stats

    n, p, drop = 40, 0.8, 0.1
    rows = {row["name"]: row["rates"] for row in bench_stats.exact_rates(n=n, p=p, drop=drop)}
    q = 1.0 / (2.5 * 3.5)  # E[l(1 − l)], l ~ Beta(2, ½)

    def share_above(worse: float, better: float, level: float, mid: bool) -> float:
        total = 0.0
        for b in range(n + 1):
            for c in range(n + 1 - b):
                weight = sps.multinomial.pmf([b, c, n - b - c], n, [worse, better, 1 - worse - better])
                if b + c == 0:
                    pv = 1.0
                else:
                    pv = sps.binomtest(b, b + c, 0.5, alternative="greater").pvalue
                    pv -= 0.5 * sps.binom.pmf(b, b + c, 0.5) if mid else 0.0
                total += weight * (pv > level)
        return total

    for name, worse, better in (("A/A", 0.16, 0.16), ("A/B: pass rate −10 points", p * (1 - p + drop),
                                                        (1 - p) * (p - drop))):
        for label, w, mid in (("Holm, exact (as merged)", 0.5, False), ("weighted Holm 2/3, mid-p", 2 / 3, True)):
            expected = 1 - share_above(worse, better, w * 0.05, mid) * share_above(q, q, (1 - w) * 0.05, mid)
            assert rows[name][label] == pytest.approx(expected, abs=1e-9)


def test_mid_p_conditional_sizes_against_scipy() -> None:
    from bench import stats as bench_stats

    def size(n: int) -> float:
        b = np.arange(n + 1)
        mid = sps.binom.sf(b, n, 0.5) + 0.5 * sps.binom.pmf(b, n, 0.5)
        return float(sps.binom.pmf(b[mid <= 0.05], n, 0.5).sum())

    result = bench_stats.mid_p_sizes(largest=40)
    sizes = [size(n) for n in range(1, 41)]
    assert result["exceeding"] == sum(s > 0.05 for s in sizes)
    assert result["worst_size"] == pytest.approx(max(sizes)) and result["worst_n"] == 12
    assert size(4) == pytest.approx(1 / 16)  # (4, 0): mid-p 1/32 ≤ 0.05, so 4 of 4 one way is rejected


def test_committed_simulation_results_meet_the_targets() -> None:
    results = json.loads((Path(__file__).resolve().parents[2] / "bench" / "results" / "stats.json").read_text())
    assert all(target["met"] for target in results["targets"].values()), results["targets"]
    assert {row["cell"]["n"] for row in results["null"]} == {50, 200, 1000}
    # one run, n = 200, a 10-point drop: at least the 63 % of before #21, measured on 1,500 replications
    kept = results["targets"]["power_n200_1_run_kept"]
    assert kept["rate"] >= 0.63 and kept["mc_se"] < 0.015
    # the chosen rule is the one compare_runs applies, and every A/A row of the candidates stays ≤ 5 % + 2 s.e.
    alternatives = results["alternatives"]
    assert all(row["mismatches"] == 0 for row in alternatives)
    chosen = "weighted Holm 2/3, exact (chosen)"
    for row in alternatives:
        if row["name"].startswith("A/A"):
            assert row["rates"][chosen] <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / row["replications"])


def test_flaky_cases_carry_a_wilson_interval_of_their_pass_probability() -> None:
    from evalgate.verdict.repeats import RepeatSink
    from tests.support.repeats import Counting, F, P, result

    sink = RepeatSink(Counting(), repeat=5)
    for r, status in enumerate([P, P, P, P, F]):
        sink.add(result("c", r, status, risk="critical"))
    [entry] = sink.report()["flaky"]
    expected = stats.wilson_interval(4, 5)
    assert expected is not None and entry["status"] == "failed"  # critical: pass^5
    assert entry["pass_fraction_ci"] == {"low": round(expected[1], 6), "high": round(expected[2], 6),
                                         "method": "Wilson"}


def test_sign_flip_test_switches_to_its_normal_limit_for_huge_samples() -> None:
    d = np.random.default_rng(4).normal(0.01, 1.0, size=20000)
    approx, how = stats.sign_flip_p(d)
    assert how == "normal approximation"
    resampled, _ = stats.sign_flip_p(d, resamples=4000, exact_work_limit=10**9)
    assert approx == pytest.approx(resampled, abs=0.02)


def test_regression_tolerance_setting_is_checked_before_the_run(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="regression_tolerance: unknown metric 'latency'"):
        _run(tmp_path, SOURCED, [], regression_tolerance={"latency": 50})
    with pytest.raises(UserError, match=r"latency_ms.rel must be a finite number ≥ 0"):
        _run(tmp_path, SOURCED, [], regression_tolerance={"latency_ms": {"rel": -1}})
    settings = Settings(regression_tolerance='{"latency_ms": {"abs": 100}}')  # EVALGATE_REGRESSION_TOLERANCE is JSON
    assert settings.regression_tolerance == {"latency_ms": {"abs": 100}}


def test_a_gated_metric_without_any_value_fails_the_run_unless_it_only_lacks_an_absent_judge() -> None:
    from evalgate.model import CaseResult, CaseStatus, MetricResult, MetricStatus, Threshold
    from evalgate.verdict.aggregate import RunAggregate
    from evalgate.verdict.gate import GatePolicy, missing_evidence_reasons, run_verdict

    threshold = Threshold(op="min", value=0.8)
    thresholds = {"hit_rate": threshold, "composite": threshold}

    def fill(aggregate: RunAggregate) -> RunAggregate:
        for i in range(3):
            aggregate.add(CaseResult(id=f"c{i}", status=CaseStatus.errored, passed=False, metrics={
                "hit_rate": MetricResult(status=MetricStatus.unavailable, reason="target returned no sources",
                                         threshold=threshold),
                "composite": MetricResult(status=MetricStatus.unavailable, reason="needs response_quality",
                                          threshold=threshold)}))
        return aggregate

    assert missing_evidence_reasons(fill(RunAggregate(unjudged={"composite"})), thresholds) == [
        "hit_rate: 0 of 3 answers had what it needs (target returned no sources) — check target_response_map "
        "(or the target's reply)"]
    verdict = run_verdict(fill(RunAggregate()), thresholds, GatePolicy(max_errored=5))
    assert not verdict.passed and verdict.reasons[0].startswith("composite: 0 of 3 answers")
    assert verdict.reasons[1].startswith("hit_rate: 0 of 3 answers")


def test_every_report_leads_with_new_failures_then_significant_metrics_then_the_rest() -> None:
    from rich.console import Console

    from evalgate.report.console import render_comparison as console_comparison
    from evalgate.report.html import render_html
    from evalgate.report.markdown import render_comparison as markdown_comparison
    from tests.support.reports import BASE_VALUES, document, render, results_doc

    base = document("base", BASE_VALUES, risks={4: "critical"})
    head = document("head", [v - 0.05 for v in BASE_VALUES], risks={4: "critical"}, failed={4, 9})
    for doc in (base, head):  # a metric that does not move: "everything else"
        for r in doc["results"]:
            r["metrics"]["other"] = {"value": 0.5}
    comparison = compare_runs(base, head, resamples=1000)
    console = Console(record=True, width=200)
    console_comparison(comparison, console)
    text = console.export_text()
    assert text.index("New failures (2, 1 critical)") < text.index("Significant metric changes") \
        < text.index("Other metrics — no change: other")
    standalone = markdown_comparison(comparison)
    assert standalone.index("**New failures: 2**") < standalone.index("| Metric |") < standalone.index("Other metrics —")
    full = results_doc(comparison=True) | {"comparison": comparison}
    comment = render(full)
    assert comment.index("| Regressed case |") < comment.index("Other metrics —") < comment.index("<sub>Pass rate")
    html = render_html(full)
    assert html.index("New failures (2)") < html.index("Significant metric changes") < html.index("Other metrics —")
