"""evalgate.verdict.stats against independent references: McNemar p-values summed in exact Python
integers on both sides of the exact/saddle-point switch, the Cornish–Fisher interval from hand-derived
moments, and the exact-resampling work limit at its edge."""

from __future__ import annotations

import math
import statistics

import pytest

from evalgate.verdict.stats import bca_mean_ci, mcnemar_exact


def exact_p(k: int, n: int) -> float:
    """2·Σ_{i≤k} C(n, i)/2^n in integers, correctly rounded by int/int division.

    The terms C(n, i) go down from C(n, k) by exact integer steps; the sum stops once the i terms
    left (each ≤ the last one) are below 2^-80 of it."""
    term = math.comb(n, k)
    tail = 0
    i = k
    while True:
        tail += term
        if i == 0 or (term * i) << 80 < tail:
            break
        term = term * i // (n - i + 1)
        i -= 1
    return min(1.0, 2 * tail / 2**n)


@pytest.mark.parametrize("n", [1999, 2000])
def test_mcnemar_up_to_the_exact_limit_is_correctly_rounded(n: int) -> None:
    """n ≤ 2000 is summed in integers: the same double as the exact fraction, not merely close."""
    for k in (1, 2, 10, 200, 500, 700, 900, 950, 990, (n - 1) // 2 - 2, (n - 1) // 2 - 1):
        assert mcnemar_exact(k, n - k) == exact_p(k, n), (k, n)
        assert mcnemar_exact(n - k, k) == exact_p(k, n), (k, n)


@pytest.mark.parametrize("n", [2001, 2002, 2003, 2600, 5001, 12345, 40000])
def test_mcnemar_above_the_exact_limit_near_the_middle(n: int) -> None:
    """k within 0.1·n of n/2 (the deviance's series form): relative error below 2e-13."""
    middle = (n - 1) // 2
    for k in (middle - 1, middle - 2, middle - 3, middle - 10, middle - 30, middle - 100, int(0.42 * n)):
        expected = exact_p(k, n)
        assert expected > 1e-300
        assert mcnemar_exact(k, n - k) == pytest.approx(expected, rel=2e-13, abs=0.0), (k, n)


@pytest.mark.parametrize("n", [2001, 2002, 2500, 3001, 5000, 12345])
def test_mcnemar_above_the_exact_limit_in_the_far_tail(n: int) -> None:
    """k more than 0.1·n below n/2 (the deviance's direct form) down to p ≈ 1e-300: the error is the
    rounding of ln p (|ln p| up to ~690), below 3e-12 relative."""
    candidates = {int(f * n) for f in (0.1, 0.11, 0.13, 0.15, 0.2, 0.25, 0.3)}
    candidates |= {int(0.409 * n) - j * (n // 80) for j in range(12)}  # 0.409·n: the direct form's edge
    ks = sorted(k for k in candidates if exact_p(k, n) > 1e-300)
    assert len(ks) >= 6
    for k in ks:
        assert mcnemar_exact(n - k, k) == pytest.approx(exact_p(k, n), rel=3e-12, abs=0.0), (k, n)


def test_mcnemar_balanced_pairs_are_exactly_one_above_the_exact_limit() -> None:
    """2k + 1 ≥ n gives p = 1 exactly, not a saddle-point value a few ulps under 1."""
    for b in (1000, 1001, 1004, 1007, 5000, 123_456):
        assert mcnemar_exact(b, b + 1) == 1.0
        assert mcnemar_exact(b + 1, b) == 1.0
        assert mcnemar_exact(b, b) == 1.0
    assert mcnemar_exact(999, 1002) < 1.0


@pytest.mark.parametrize("n", [2, 3, 5, 20, 1000, 1074, 1075, 1076, 2001, 5000, 10**9])
def test_mcnemar_with_no_pair_on_one_side(n: int) -> None:
    """k = 0: p = 2·C(n, 0)/2^n = 2^(1−n), subnormal from n = 1023 and 0.0 from n = 1076."""
    expected = 2 / 2**n if n < 10_000 else 0.0
    assert expected == math.ldexp(1.0, 1 - n)
    assert mcnemar_exact(0, n) == expected
    assert mcnemar_exact(n, 0) == expected


def test_mcnemar_far_tail_of_a_huge_sample_underflows_to_zero() -> None:
    """k = 1 and k = 250 of n = 10^9 take the saddle-point path (k ≥ 1) and underflow to 0.0
    (p = 2(1 + n)/2^n for k = 1)."""
    assert mcnemar_exact(1, 10**9) == 0.0
    assert mcnemar_exact(10**9, 250) == 0.0


# ── bootstrap ────────────────────────────────────────────────────────────────────────────────


def test_cornish_fisher_interval_from_hand_derived_moments() -> None:
    """x = (0, 0, 0, 1): x̄ = 1/4, plug-in σ̂ = √3/4, skewness γ̂ = 2/√3, n = 4. The 95% interval's ends
    are x̄ + σ̂/√n·(z + γ̂·(z² − 1)/(6√n)) at z = ∓1.959964; the mirrored data mirror the interval."""
    z = statistics.NormalDist().inv_cdf(0.975)
    se, skew = math.sqrt(3) / 8, 2 / math.sqrt(3)

    def end(zp: float) -> float:
        return 0.25 + se * (zp + skew * (zp * zp - 1.0) / 12.0)

    low, high = end(-z), end(z)
    assert (low, high) == pytest.approx((-0.1151476, 0.7335426), abs=1e-6)  # worked by hand
    interval = bca_mean_ci([0.0, 0.0, 0.0, 1.0], exact_work_limit=0)
    assert interval == pytest.approx((0.25, low, high), rel=1e-12)
    mirrored = bca_mean_ci([1.0, 1.0, 1.0, 0.0], exact_work_limit=0)
    assert mirrored == pytest.approx((0.75, 1.0 - high, 1.0 - low), rel=1e-12)


def test_exact_resampling_up_to_the_work_limit_inclusive() -> None:
    """400 values of two kinds, 1000 resamples: index draws cost 400·1000 = 400 000, multinomial cells
    12·2·1000 = 24 000. The cheaper way decides: a limit of exactly 24 000 still resamples (the same
    interval as the default limit), 23 999 switches to the Cornish–Fisher expansion."""
    x = [0.0] * 300 + [1.0] * 100
    resampled = bca_mean_ci(x, resamples=1000, seed=4)
    approximated = bca_mean_ci(x, resamples=1000, seed=4, exact_work_limit=0)
    assert resampled is not None and approximated is not None and resampled != approximated
    assert bca_mean_ci(x, resamples=1000, seed=4, exact_work_limit=24_000) == resampled
    assert bca_mean_ci(x, resamples=1000, seed=4, exact_work_limit=23_999) == approximated


def test_a_single_index_resample_is_a_real_resample_mean() -> None:
    """Three distinct values, one resample (index draws: 3 ≤ 12·3): the interval collapses onto one
    resample's mean (10a + 20b + 40c)/3 with a + b + c = 3."""
    means = {(10 * a + 20 * b + 40 * (3 - a - b)) / 3 for a in range(4) for b in range(4 - a)}
    for seed in range(5):
        interval = bca_mean_ci([10.0, 20.0, 40.0], resamples=1, seed=seed)
        assert interval is not None
        mean, low, high = interval
        assert mean == pytest.approx(70 / 3) and low == high
        assert any(low == pytest.approx(m, rel=1e-12) for m in means), low
