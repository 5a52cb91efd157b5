"""Hand-checked tests for evalgate.verdict.stats: McNemar, the bootstrap behind the BCa interval, repeat summaries."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evalgate.verdict import stats
from evalgate.verdict.stats import (
    bca_mean_ci,
    mcnemar_exact,
    repeat_verdict,
    summarise_repeats,
)

# ── McNemar ──────────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("b", "c", "expected"),
    [
        (0, 0, 1.0),
        (0, 5, 2 / 32),  # 2·C(5,0)/2^5
        (5, 0, 2 / 32),
        (1, 5, 2 * (1 + 6) / 64),  # 2·(C(6,0)+C(6,1))/2^6
        (2, 8, 2 * (1 + 10 + 45) / 1024),
        (3, 3, 1.0),
        (4, 5, 1.0),  # 2k + 1 = n: the lower tail is exactly half the mass
        (2, 0, 0.5),
    ],
)
def test_mcnemar_hand_computed(b: int, c: int, expected: float) -> None:
    assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-15)


def test_mcnemar_matches_scipy_binomtest_on_grid() -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    for b in range(61):
        for c in range(max(b, 1), 61):  # b ≤ c; the swapped pair must give the same p
            expected = scipy_stats.binomtest(b, b + c, 0.5).pvalue
            assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-12, abs=0.0), (b, c)
            assert mcnemar_exact(c, b) == mcnemar_exact(b, c)


@pytest.mark.parametrize(
    ("b", "c"),
    [
        (900, 1100),  # n = 2000: last exact-integer size
        (900, 1101),  # n = 2001: first saddle-point size
        (1000, 1200),
        (5000, 5400),
        (40000, 40500),
        (100000, 99000),
        (1_000_000, 1_003_000),
        (2000, 2600),  # p ≈ 9e-19: accuracy holds far into the tail
    ],
)
def test_mcnemar_matches_scipy_for_large_n(b: int, c: int) -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    expected = scipy_stats.binomtest(min(b, c), b + c, 0.5).pvalue
    assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-10, abs=0.0)


def test_mcnemar_at_ten_million_pairs_and_underflow_to_zero() -> None:
    assert 0.0 < mcnemar_exact(5_000_000, 5_010_000) < 0.01
    assert mcnemar_exact(0, 5000) == 0.0  # 2/2^5000 is below the smallest double


@pytest.mark.parametrize(("b", "c"), [(-1, 3), (2.0, 3), (True, 3)])
def test_mcnemar_rejects_non_counts(b: object, c: object) -> None:
    with pytest.raises(ValueError):
        mcnemar_exact(b, c)  # type: ignore[arg-type]


# ── bootstrap ────────────────────────────────────────────────────────────────────────────────


def _noisy_pairs(n: int, shift: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.5, 1.0, size=n)
    return base, base + shift + rng.normal(0.0, 0.1, size=n)


def test_bca_interval_of_paired_differences_is_reproducible_under_a_fixed_seed() -> None:
    base, head = _noisy_pairs(50, -0.02, seed=1)
    first = bca_mean_ci(head - base, resamples=2000, seed=7)
    second = bca_mean_ci(list(head - base), resamples=2000, seed=7)
    other = bca_mean_ci(head - base, resamples=2000, seed=8)
    assert first == second
    assert first != other
    assert first is not None and first[0] == pytest.approx(float(np.mean(head - base)))
    assert first[1] < first[0] < first[2]


def test_bca_coverage_is_near_nominal() -> None:
    """400 trials of n=40 normal differences with true mean 0.3: a 95% interval covers it ~95%."""
    rng = np.random.default_rng(2026)
    true_delta, covered, trials = 0.3, 0, 400
    for trial in range(trials):
        interval = bca_mean_ci(rng.normal(true_delta, 1.0, size=40), resamples=2000, seed=trial)
        assert interval is not None
        covered += interval[1] <= true_delta <= interval[2]
    assert 0.90 <= covered / trials <= 0.98


def test_bootstrap_means_of_two_values_have_known_distribution() -> None:
    """Resample means of [0, 1] are 0, ½, 1 with probabilities ¼, ½, ¼."""
    means = stats._bootstrap_means(np.array([0.0, 1.0]), 4000, 3, stats.EXACT_WORK_LIMIT)
    assert means is not None and set(np.unique(means)) == {0.0, 0.5, 1.0}
    assert float(np.mean(means == 0.5)) == pytest.approx(0.5, abs=0.03)


def test_bootstrap_means_of_binary_values_match_the_binomial_quantiles() -> None:
    """For 0/1 data with p̂ = k/n the resample mean is Binomial(n, p̂)/n (multinomial path, exact)."""
    scipy_stats = pytest.importorskip("scipy.stats")
    means = stats._bootstrap_means(np.array([1.0] * 100 + [0.0] * 300), 20000, 11, stats.EXACT_WORK_LIMIT)
    assert means is not None
    low, high = np.quantile(means, [0.025, 0.975])
    assert abs(low - scipy_stats.binom.ppf(0.025, 400, 0.25) / 400) <= 1 / 400
    assert abs(high - scipy_stats.binom.ppf(0.975, 400, 0.25) / 400) <= 1 / 400


@pytest.mark.parametrize("sampler", ["gather", "multinomial"])
def test_resampling_paths_have_the_bootstrap_moments(sampler: str) -> None:
    """Resample means have mean x̄ and standard deviation σ̂/√n (σ̂ with denominator n)."""
    rng = np.random.default_rng(5)
    x = rng.exponential(1.0, size=300) if sampler == "gather" else rng.integers(0, 4, size=300) / 3
    generator = np.random.default_rng(9)
    if sampler == "gather":
        means = stats._gather_means(x, 20000, generator)
    else:
        values, counts = np.unique(x, return_counts=True)
        means = stats._multinomial_means(values, counts, 20000, generator)
    se = x.std() / math.sqrt(x.size)
    assert means.mean() == pytest.approx(x.mean(), abs=4 * se / math.sqrt(20000))
    assert means.std() == pytest.approx(se, rel=0.03)


def test_large_samples_use_cornish_fisher_close_to_exact_resampling() -> None:
    rng = np.random.default_rng(17)
    x = rng.exponential(1.0, size=8000)  # skewness 2: the skew term matters
    assert stats._bootstrap_means(x, stats.DEFAULT_RESAMPLES, 1, stats.EXACT_WORK_LIMIT) is None  # over the limit
    low, high = stats._cornish_fisher_interval(x, 0.025)
    means = stats._bootstrap_means(x, stats.DEFAULT_RESAMPLES, 1, 10**12)
    assert means is not None
    exact_low, exact_high = np.quantile(means, [0.025, 0.975])
    se = x.std() / math.sqrt(x.size)
    assert abs(low - exact_low) < 0.12 * se and abs(high - exact_high) < 0.12 * se
    assert high - x.mean() > x.mean() - low  # right-skewed data: a longer upper arm
    approximated = bca_mean_ci(x, seed=1)
    assert approximated is not None and approximated[1:] == (low, high)


def test_hundred_thousand_pairs() -> None:
    rng = np.random.default_rng(23)
    continuous = rng.normal(size=100_000)
    binary_base = (rng.random(100_000) < 0.8).astype(float)
    binary_head = (rng.random(100_000) < 0.79).astype(float)
    wide = bca_mean_ci(rng.normal(0.01, 1.0, size=100_000) + continuous - continuous)
    flips = bca_mean_ci(binary_head - binary_base)
    assert wide is not None and wide[1] < wide[0] < wide[2]
    assert flips is not None and flips[1] < flips[0] < flips[2]


def test_degenerate_samples() -> None:
    assert bca_mean_ci([]) is None
    assert bca_mean_ci([0.2]) == pytest.approx((0.2, 0.2, 0.2))
    collapsed = bca_mean_ci([0.05, 0.05, 0.05])
    assert collapsed is not None and collapsed[1] == collapsed[2] == collapsed[0]
    assert bca_mean_ci([0.4] * 7) == (0.4, 0.4, 0.4)


@pytest.mark.parametrize(
    ("values", "kwargs"),
    [
        ([1.0, math.nan], {}),
        ([1.0, math.inf], {}),
        ([[1.0], [2.0]], {}),
        ([1.0, 3.0], {"confidence": 1.0}),
        ([1.0, 3.0], {"resamples": 0}),
    ],
)
def test_bootstrap_rejects_bad_input(values: list[float], kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        bca_mean_ci(values, **kwargs)  # type: ignore[arg-type]


# ── repeats ──────────────────────────────────────────────────────────────────────────────────


def test_summarise_repeats_statistics() -> None:
    summary = summarise_repeats([0.8, None, 0.6], [True, False, True])
    assert summary.repeats == 3 and summary.values == 2
    assert summary.mean == pytest.approx(0.7)
    assert summary.stdev == pytest.approx(math.sqrt(0.02))  # ((0.1)² + (0.1)²) / (2 − 1)
    assert (summary.min, summary.max) == (0.6, 0.8)
    assert summary.pass_fraction == pytest.approx(2 / 3)
    assert summary.flaky and summary.passed and summary.rule == "majority"
    assert summary.to_dict()["pass_fraction"] == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    ("outcomes", "majority", "all_", "any_"),
    [
        ([True, True, True], True, True, True),
        ([True, True, False], True, False, True),
        ([True, False], False, False, True),  # tie → fail under majority
        ([True, False, False], False, False, True),
        ([False, False], False, False, False),
        ([True], True, True, True),
    ],
)
def test_repeat_rules(outcomes: list[bool], majority: bool, all_: bool, any_: bool) -> None:
    assert repeat_verdict(outcomes, "majority") is majority
    assert repeat_verdict(outcomes, "all") is all_
    assert repeat_verdict(outcomes, "any") is any_
    summary = summarise_repeats([None] * len(outcomes), outcomes, rule="all")
    assert summary.passed is all_
    assert summary.flaky is (len(set(outcomes)) > 1)


def test_summarise_repeats_without_values_and_stable_outcomes() -> None:
    summary = summarise_repeats([None, None], [False, False])
    assert summary.mean is None and summary.stdev is None and summary.min is None
    assert not summary.flaky and not summary.passed and summary.pass_fraction == 0.0
    single = summarise_repeats([0.9], [True])
    assert single.mean == 0.9 and single.stdev is None and not single.flaky


def test_summarise_repeats_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        summarise_repeats([0.1], [True, False])
    with pytest.raises(ValueError):
        summarise_repeats([], [])
    with pytest.raises(ValueError):
        repeat_verdict([True], "most")  # type: ignore[arg-type]


@pytest.mark.parametrize(("b", "c"), [(800, 1250), (900, 1350), (818, 1183), (2100, 1400), (700, 1400)])
def test_mcnemar_large_n_with_lopsided_discordant_pairs(b: int, c: int) -> None:
    """Above the exact-sum limit with k = min(b, c) ≤ 0.41·n: the deviance's direct form (|k − n/2| ≥
    0.1·(k + n/2)) against scipy, with p well above the underflow (found unguarded by mutation testing)."""
    scipy_stats = pytest.importorskip("scipy.stats")
    expected = scipy_stats.binomtest(min(b, c), b + c, 0.5).pvalue
    assert b + c > 2000
    assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-10, abs=0.0)


def test_no_repeats_never_pass_and_interval_arguments_are_checked_at_their_edges() -> None:
    from evalgate.verdict.stats import bca_mean_ci, repeat_verdict

    for rule in ("majority", "all", "any"):
        assert repeat_verdict([], rule) is False  # type: ignore[arg-type]
    for confidence in (0.0, 1.0):
        with pytest.raises(ValueError, match="confidence"):
            bca_mean_ci([0.0, 1.0], confidence=confidence)
    with pytest.raises(ValueError, match="resamples"):
        bca_mean_ci([0.0, 1.0], resamples=0)
    mean, low, high = bca_mean_ci([0.0, 1.0], resamples=1)  # type: ignore[misc]  # one resample is allowed
    assert mean == 0.5 and 0.0 <= low <= high <= 1.0
