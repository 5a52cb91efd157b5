"""Statistics behind trustworthy verdicts: exact McNemar tests (two- and one-sided), the paired sign-flip
permutation test, the exact stratified exchange test, Holm–Bonferroni adjustment (plain and weighted),
Wilson intervals for proportions, BCa bootstrap intervals for means, and repeat (flakiness) summaries. Pure
functions; NumPy does the resampling. Decisions are made by tests (``verdict.compare``), never by an
interval excluding 0.

The bootstrap behind ``bca_mean_ci`` (``_bootstrap_means``): draw ``resamples`` samples of size n with
replacement and take each resample's mean. Resampling is exact (multinomial counts over distinct values, or
index draws) while the work stays under ``exact_work_limit`` element draws (default 2**26, under a second).
Beyond that — e.g. 100k cases with continuous values — the bootstrap distribution of the mean is replaced by
its Cornish–Fisher expansion: it has mean x̄, standard deviation σ̂/√n (σ̂² the plug-in variance) and
skewness γ̂/√n, so its p-quantile is x̄ + σ̂/√n·(z_p + γ̂·(z_p² − 1)/(6√n)). With 10 000 resamples
that happens above ~6 700 values; there the expansion's O(1/n) error is far below the Monte Carlo
error of the resampled quantile itself (≈ 0.027·σ̂/√n at 95%).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import numpy as np

DEFAULT_SEED = 20261122
DEFAULT_RESAMPLES = 10_000
DEFAULT_CONFIDENCE = 0.95
EXACT_WORK_LIMIT = 1 << 26
"""Largest number of element draws done by exact resampling before the Cornish–Fisher expansion."""
_MULTINOMIAL_CELL_COST = 12
"""One multinomial cell (a binomial draw) costs about as much as 12 index draws + gathers (measured)."""
_CHUNK_ELEMENTS = 1 << 22
_EXACT_MCNEMAR_N = 2000
"""Up to this many discordant pairs McNemar is summed in exact integers."""

RepeatRule = Literal["majority", "all", "any"]
REPEAT_RULES: tuple[RepeatRule, ...] = ("majority", "all", "any")
Interval = tuple[float, float, float]
"""``(estimate, low, high)``."""


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for discordant pairs b (pass→fail) and c (fail→pass).

    p = min(1, 2·Σ_{i=0..k} C(n, i) / 2^n) with n = b + c, k = min(b, c); p = 1 when 2k + 1 ≥ n (the
    lower tail then holds half the mass or more; n = 0 included), p = 2^(1−n) when k = 0. Up to
    n = 2000 the sum is done in exact integers (the result is correctly rounded); above, C(n, k)/2^n
    comes from Loader's saddle-point formula and the terms below k are added as ratios
    C(n, i−1)/C(n, i) = i/(n−i+1) until one no longer changes the sum. Measured
    against exact integer sums the relative error stays below ~2e-12 (most of it the rounding of
    ln p, |ln p| up to 745). p below the smallest double (~5e-324) underflows to 0.0.
    """
    for name, value in (("b", b), ("c", c)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    n = b + c
    k = min(b, c)
    if 2 * k + 1 >= n:
        return 1.0
    if k == 0:
        return 2.0 ** (1 - n)
    if n <= _EXACT_MCNEMAR_N:  # from here on 2k + 2 ≤ n: the lower tail is under half the mass, p < 1
        tail = sum(math.comb(n, i) for i in range(k + 1))
        return (tail << 1) / (1 << n)
    return 2.0 * math.exp(_log_binomial_half_pmf(k, n)) * _lower_tail_ratio_sum(k, n)


def _lower_tail_ratio_sum(k: int, n: int) -> float:
    """Σ_{i=0..k} C(n, i)/C(n, k) for 1 ≤ k < n/2, adding the terms from i = k down.

    Each term is the one before times i/(n−i+1) < 1, so once a term no longer changes the sum no
    later (smaller) term would: stopping there gives the same double as adding all k + 1 terms."""
    total = term = 1.0
    for i in range(k, 0, -1):
        term *= i / (n - i + 1)
        updated = total + term
        if updated == total:
            break
        total = updated
    return total


def _log_binomial_half_pmf(k: int, n: int) -> float:
    """ln(C(n, k)/2^n) for 1 ≤ k < n by Loader (2000): ½·ln(n/(2π·k·(n−k))) + δ(n) − δ(k) − δ(n−k)
    − D(k, n/2) − D(n−k, n/2), with δ the Stirling error and D the deviance term."""
    half = n / 2.0
    return (
        0.5 * math.log(n / (2.0 * math.pi * k * (n - k)))
        + _stirling_error(n)
        - _stirling_error(k)
        - _stirling_error(n - k)
        - _deviance(k, half)
        - _deviance(n - k, half)
    )


def _stirling_error(x: int) -> float:
    """δ(x) = ln(x!) − (x + ½)·ln x + x − ½·ln(2π) ≈ 1/(12x) − 1/(360x³), with error < 1/(1260x⁵).

    Only the saddle-point path (n > 2000) calls it, and there p is 0.0 (below 5e-324) unless
    k ≥ 198: for x ≥ 198 the error is < 3e-15, far below the rounding of ln p. (For small x the
    series is off, e.g. by 3e-4 at x = 1, which moves an underflowed p by nothing.)"""
    return (1.0 / 12.0 - 1.0 / (360.0 * x * x)) / x


def _deviance(x: float, mean: float) -> float:
    """D(x, m) = x·ln(x/m) + m − x, summed as a series in v = (x−m)/(x+m) when x is near m, where the
    direct form would cancel: D = (x−m)·v + 2x·Σ_{j≥1} v^(2j+1)/(2j+1). (Far from m, with nothing to
    cancel, the series is slow as |v| → 1: 2.6·10^7 terms for x = 10^6, m = 5·10^14.)"""
    if abs(x - mean) >= 0.1 * (x + mean):
        return x * math.log(x / mean) + mean - x
    v = (x - mean) / (x + mean)
    total = (x - mean) * v
    power = 2.0 * x * v
    j = 1
    while True:
        power *= v * v
        updated = total + power / (2 * j + 1)
        if updated == total:
            return total
        total = updated
        j += 1


def _finite_array(values: Sequence[float], name: str) -> np.ndarray:
    import numpy as np  # lazy: numpy (~0.1 s) only for bootstrap and exact statistics
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"{name} must be a flat sequence of numbers")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name} must contain only finite numbers")
    return x


def _check_bootstrap(confidence: float, resamples: int) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")


def _bootstrap_means(x: np.ndarray, resamples: int, seed: int, work_limit: int) -> np.ndarray | None:
    """``resamples`` bootstrap means of ``x`` (multinomial over distinct values or gathered, whichever is
    cheaper, seeded); None when both exceed ``work_limit`` (the caller's Cornish–Fisher expansion stands in).
    Their (1∓confidence)/2 quantiles are the percentile interval that ``bca_mean_ci`` corrects."""
    import numpy as np  # lazy: numpy (~0.1 s) only for bootstrap and exact statistics
    values, counts = np.unique(x, return_counts=True)
    gather_work = x.size * resamples
    multinomial_work = _MULTINOMIAL_CELL_COST * values.size * resamples
    if min(gather_work, multinomial_work) > work_limit:
        return None
    rng = np.random.default_rng(seed)
    if multinomial_work < gather_work:
        return _multinomial_means(values, counts, resamples, rng)
    return _gather_means(x, resamples, rng)


def _multinomial_means(
    values: np.ndarray, counts: np.ndarray, resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """Resample means via counts ~ Multinomial(n, counts/n) over the distinct values (exact)."""
    n = int(counts.sum())
    draws = rng.multinomial(n, counts / n, size=resamples)
    return (draws @ values) / n


def _gather_means(x: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Resample means via n uniform index draws per resample, in chunks of ~4M elements."""
    import numpy as np  # lazy: numpy (~0.1 s) only for bootstrap and exact statistics
    n = x.size
    per_chunk = max(1, _CHUNK_ELEMENTS // n)
    means = np.empty(resamples, dtype=np.float64)
    for start in range(0, resamples, per_chunk):
        stop = min(resamples, start + per_chunk)
        idx = rng.integers(0, n, size=(stop - start, n))
        means[start:stop] = x[idx].mean(axis=1)
    return means


def _cornish_fisher_interval(x: np.ndarray, tail: float) -> tuple[float, float]:
    """Quantiles of the bootstrap mean's distribution from its first three moments (module doc)."""
    import numpy as np  # lazy: numpy (~0.1 s) only for bootstrap and exact statistics
    n = x.size
    mean = float(x.mean())
    centred = x - mean
    sd = math.sqrt(float(np.mean(centred**2)))
    skew = float(np.mean(centred**3)) / sd**3
    se = sd / math.sqrt(n)
    normal = statistics.NormalDist()

    def quantile(p: float) -> float:
        z = normal.inv_cdf(p)
        return mean + se * (z + skew * (z * z - 1.0) / (6.0 * math.sqrt(n)))

    return quantile(tail), quantile(1.0 - tail)


@dataclass(frozen=True, slots=True)
class RepeatSummary:
    """One case run ``repeats`` times: its score spread and pass/fail stability.

    ``mean``/``min``/``max`` are over repeats with a value (None when none has one); ``stdev`` is the
    sample standard deviation (n−1 denominator), None with fewer than 2 values. ``pass_fraction`` =
    passing repeats / repeats. ``flaky`` = the repeats disagree on pass/fail. ``passed`` is the
    verdict under ``rule`` (see ``repeat_verdict``).
    """

    repeats: int
    values: int
    mean: float | None
    stdev: float | None
    min: float | None
    max: float | None
    pass_fraction: float
    flaky: bool
    passed: bool
    rule: RepeatRule

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def repeat_verdict(passed_by_repeat: Sequence[bool], rule: RepeatRule = "majority") -> bool:
    """Verdict for a repeated case: ``majority`` passes when passes > repeats/2 (a tie fails: a case
    that fails half its runs is not reliably passing); ``all`` needs every repeat to pass; ``any``
    needs one. No repeats → False."""
    if rule not in REPEAT_RULES:
        raise ValueError(f"repeat rule must be one of {', '.join(REPEAT_RULES)}, got {rule!r}")
    passes = sum(1 for p in passed_by_repeat if p)
    total = len(passed_by_repeat)
    if total == 0:
        return False
    if rule == "all":
        return passes == total
    if rule == "any":
        return passes > 0
    return 2 * passes > total


def summarise_repeats(
    values_by_repeat: Sequence[float | None],
    passed_by_repeat: Sequence[bool],
    rule: RepeatRule = "majority",
) -> RepeatSummary:
    """Summarise one case's repeats (both sequences indexed by repeat; ``None`` = no value)."""
    if len(values_by_repeat) != len(passed_by_repeat):
        raise ValueError(
            f"values_by_repeat and passed_by_repeat differ in length: "
            f"{len(values_by_repeat)} vs {len(passed_by_repeat)}"
        )
    if not passed_by_repeat:
        raise ValueError("summarise_repeats needs at least one repeat")
    values = [float(v) for v in values_by_repeat if v is not None]
    passes = sum(1 for p in passed_by_repeat if p)
    repeats = len(passed_by_repeat)
    return RepeatSummary(
        repeats=repeats,
        values=len(values),
        mean=math.fsum(values) / len(values) if values else None,
        stdev=statistics.stdev(values) if len(values) >= 2 else None,
        min=min(values) if values else None,
        max=max(values) if values else None,
        pass_fraction=passes / repeats,
        flaky=0 < passes < repeats,
        passed=repeat_verdict(passed_by_repeat, rule),
        rule=rule,
    )


# ── one regression decision: one-sided exact tests, Holm, Wilson, BCa ───────────────────────────

_EXACT_SIGN_FLIP_LIMIT = 16
"""Up to this many nonzero differences the sign-flip permutation test enumerates all 2^m sign vectors."""
_SIGN_FLIP_CHUNK = 1 << 21


def mcnemar_one_sided(b: int, c: int) -> float:
    """One-sided exact McNemar p-value for "pass→fail flips (b) outnumber fail→pass flips (c)".

    Under H0 (flips in either direction equally likely) b ~ Binomial(n = b + c, ½) given n, so
    p = P(X ≥ b) = Σ_{i=0..c} C(n, i)/2^n. Exact integers up to n = 2000; above, half the two-sided
    p-value of :func:`mcnemar_exact` in the tail (2c + 1 < n) and 1 − P(X ≤ b − 1) otherwise. n = 0 → 1.
    """
    for name, value in (("b", b), ("c", c)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    n = b + c
    if n == 0 or b == 0:
        return 1.0
    if n <= _EXACT_MCNEMAR_N:
        tail = sum(math.comb(n, i) for i in range(c + 1))
        return tail / (1 << n)
    if 2 * c + 1 < n:
        return 0.5 * mcnemar_exact(b, c)
    return min(1.0, 1.0 - mcnemar_one_sided(c + 1, b - 1) if 2 * (b - 1) + 1 < n else 0.5)


def mcnemar_mid_p(b: int, c: int) -> float:
    """One-sided mid-p McNemar value for "b pass→fail flips outnumber c fail→pass flips": with
    X ~ Binomial(n = b + c, ½), mid-p = P(X > b) + ½·P(X = b) = exact p − ½·C(n, b)/2^n; n = 0 → 1.

    Not used by the decision (its size can exceed α: docs/trustworthy-verdicts.md); ``bench.stats`` compares
    it with the exact test. (4, 0): exact 1/16, mid-p 1/32. Exact integers (n up to a few thousand)."""
    for name, value in (("b", b), ("c", c)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    n = b + c
    if n == 0:
        return 1.0
    upper = sum(math.comb(n, i) for i in range(b + 1, n + 1))
    return (2 * upper + math.comb(n, b)) / (1 << (n + 1))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values, in the input order.

    With p₍₁₎ ≤ … ≤ p₍ₘ₎ sorted: p̃₍ᵢ₎ = max_{j ≤ i} min(1, (m − j + 1)·p₍ⱼ₎). Rejecting every
    hypothesis with p̃ ≤ α keeps the family-wise error rate (probability of one or more false
    rejections) at most α under any dependence between the tests.
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * float(p_values[i])))
        adjusted[i] = running
    return adjusted


def weighted_holm(p_values: Sequence[float], weights: Sequence[float]) -> list[float]:
    """Weighted Holm (Holm 1979) adjusted p-values, in the input order; ``weights`` are positive (any scale).

    Hypotheses are ordered by qᵢ = pᵢ/wᵢ; at step j the not-yet-rejected ones have total weight Wⱼ and
    H₍ⱼ₎ is rejected at level α when p₍ⱼ₎ ≤ α·w₍ⱼ₎/Wⱼ. Adjusted: p̃₍ⱼ₎ = max_{i ≤ j} min(1, p₍ᵢ₎·Wᵢ/w₍ᵢ₎), so
    p̃ ≤ α is that rejection. It is the closed test of weighted Bonferroni tests, so the family-wise
    error rate stays ≤ α under any dependence, for any weights. Equal weights give :func:`holm`.
    """
    m = len(p_values)
    if len(weights) != m:
        raise ValueError(f"need one weight per p-value: {len(weights)} weights for {m} p-values")
    w = [float(x) for x in weights]
    if any(not math.isfinite(x) or x <= 0.0 for x in w):
        raise ValueError(f"weights must be positive finite numbers, got {list(weights)}")
    order = sorted(range(m), key=lambda i: (float(p_values[i]) / w[i], i))
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        remaining = math.fsum(w[j] for j in order[rank:])
        running = max(running, min(1.0, float(p_values[i]) * remaining / w[i]))
        adjusted[i] = running
    return adjusted


def wilson_interval(successes: int, n: int, *, confidence: float = DEFAULT_CONFIDENCE) -> Interval | None:
    """Proportion k/n with its Wilson score interval; None when n = 0.

    With z = Φ⁻¹((1 + confidence)/2) and p̂ = k/n: centre (p̂ + z²/2n)/(1 + z²/n), half-width
    z/(1 + z²/n)·√(p̂(1 − p̂)/n + z²/4n²). 20 of 20 at 95 % → [0.839, 1].
    """
    if n < 0 or not 0 <= successes <= max(n, 0):
        raise ValueError(f"need 0 ≤ successes ≤ n, got {successes} of {n}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    if n == 0:
        return None
    z = statistics.NormalDist().inv_cdf((1.0 + confidence) / 2.0)
    p = successes / n
    denominator = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1.0 - p) / n + z * z / (4 * n * n))
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return p, low, high


def bca_mean_ci(
    values: Sequence[float],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
    exact_work_limit: int = EXACT_WORK_LIMIT,
) -> Interval | None:
    """Mean of ``values`` with its bias-corrected and accelerated (BCa) bootstrap interval.

    From the bootstrap means θ*: bias correction z₀ = Φ⁻¹((#{θ* < θ̂} + ½·#{θ* = θ̂})/B); acceleration
    (jackknife, closed form for the mean) a = Σuᵢ³ / (6·(Σuᵢ²)^{3/2}) with uᵢ = xᵢ − x̄; the interval is the
    θ* quantiles Φ(z₀ + (z₀ + z_q)/(1 − a·(z₀ + z_q))) for q = (1 ∓ confidence)/2. Above the exact-work
    limit the percentile interval's Cornish–Fisher expansion stands in (module doc); it is second-order
    accurate like BCa. None without values; all values equal → the collapsed interval.
    """
    import numpy as np  # lazy: numpy (~0.1 s) only for bootstrap and exact statistics
    x = _finite_array(values, "values")
    _check_bootstrap(confidence, resamples)
    if x.size == 0:
        return None
    if x.min() == x.max():  # the value itself (x.mean() of seven 0.4s is 0.39999999999999997)
        value = float(x[0])
        return value, value, value
    mean = float(x.mean())
    tail = (1.0 - confidence) / 2.0
    means = _bootstrap_means(x, resamples, seed, exact_work_limit)
    if means is None:
        low, high = _cornish_fisher_interval(x, tail)
        return mean, low, high
    normal = statistics.NormalDist()
    scale = max(abs(mean), float(np.abs(x).max())) * 1e-12
    below = float(np.count_nonzero(means < mean - scale))
    equal = float(np.count_nonzero(np.abs(means - mean) <= scale))
    share = min(max((below + 0.5 * equal) / resamples, 0.5 / resamples), 1.0 - 0.5 / resamples)
    z0 = normal.inv_cdf(share)
    u = x - mean
    denominator = 6.0 * float(np.sum(u * u)) ** 1.5
    acceleration = float(np.sum(u**3)) / denominator if denominator > 0 else 0.0

    def level(q: float) -> float:
        zq = normal.inv_cdf(q)
        shifted = z0 + (z0 + zq) / (1.0 - acceleration * (z0 + zq))
        return min(max(normal.cdf(shifted), 0.0), 1.0)

    low, high = np.quantile(means, [level(tail), level(1.0 - tail)])
    return mean, float(low), float(high)


def sign_flip_p(
    differences: Sequence[float], *, shift: float = 0.0, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
    exact_work_limit: int = EXACT_WORK_LIMIT,
) -> tuple[float, str]:
    """One-sided paired permutation (sign-flip) p-value for H0: mean(d) ≤ ``shift`` against mean(d) > shift.

    With eᵢ = dᵢ − shift and T = Σeᵢ: p = P(Σ sᵢ·|eᵢ| ≥ T) over independent random signs sᵢ = ±1 (the pairs'
    two runs are exchangeable under H0). Exact over all 2^m sign vectors when m ≤ 16 nonzero eᵢ; else
    Monte Carlo with a fixed seed, p = (1 + #{T* ≥ T})/(1 + R), which keeps the test's level exact; when
    m·R exceeds ``exact_work_limit`` (m ≳ 6,700 at R = 10,000) the permutation distribution's normal limit,
    p = 1 − Φ(T/√Σeᵢ²) (T* is symmetric with variance Σeᵢ²; the error is O(1/m)).
    Returns (p, "exact" | "Monte Carlo R=…" | "normal approximation"). On ±1 differences with shift 0 it is the one-sided exact
    McNemar test.
    """
    import numpy as np  # lazy: numpy (~0.1 s) only for bootstrap and exact statistics
    e = _finite_array(differences, "differences") - float(shift)
    scale = float(np.abs(e).max()) if e.size else 0.0
    e = e[np.abs(e) > scale * 1e-12]
    if e.size == 0:
        return 1.0, "exact"
    observed = float(e.sum())
    slack = 1e-9 * float(np.abs(e).sum())
    magnitudes = np.abs(e)
    if e.size <= _EXACT_SIGN_FLIP_LIMIT:
        m = e.size
        codes = np.arange(1 << m, dtype=np.int64)
        signs = ((codes[:, None] >> np.arange(m)) & 1) * 2 - 1
        totals = signs @ magnitudes
        return float(np.count_nonzero(totals >= observed - slack)) / (1 << m), "exact"
    if e.size * resamples > exact_work_limit:
        z = observed / math.sqrt(float(np.sum(e * e)))
        return 1.0 - statistics.NormalDist().cdf(z), "normal approximation"
    rng = np.random.default_rng(seed)
    hits = 0
    per_chunk = max(1, _SIGN_FLIP_CHUNK // e.size)
    for start in range(0, resamples, per_chunk):
        rows = min(per_chunk, resamples - start)
        flips = rng.integers(0, 2, size=(rows, e.size), dtype=np.int8).astype(np.float64) * 2.0 - 1.0
        hits += int(np.count_nonzero(flips @ magnitudes >= observed - slack))
    return (1.0 + hits) / (1.0 + resamples), f"Monte Carlo R={resamples}"


def stratified_exchange_p(strata: Sequence[tuple[int, int, int, int]]) -> float:
    """One-sided exact conditional p-value that base runs pass more often than head runs, pooled over strata.

    Each stratum (a case) is (base passes x, base runs k_b, head passes y, head runs k_h). Under H0 the
    k_b + k_h runs of a case are exchangeable, so given t = x + y passes, x is hypergeometric
    (population k_b + k_h, t successes, k_b draws). The statistic S = Σx; p = P(S ≥ s_obs) from the exact
    convolution of the strata's hypergeometric distributions. One run on each side is McNemar's test
    (a stratum with one flip contributes x ∈ {0, 1}, ½ each): a single flip gives p = ½.
    """
    distribution = [1.0]
    observed = 0
    for x, kb, y, kh in strata:
        if not (0 <= x <= kb and 0 <= y <= kh):
            raise ValueError(f"bad stratum {(x, kb, y, kh)}")
        t, population = x + y, kb + kh
        observed += x
        low, high = max(0, t - kh), min(t, kb)
        total = math.comb(population, t)
        pmf = [math.comb(kb, i) * math.comb(kh, t - i) / total for i in range(low, high + 1)]
        shifted = [0.0] * (len(distribution) + high)
        for s, ps in enumerate(distribution):
            if ps:
                for j, pj in enumerate(pmf):
                    shifted[s + low + j] += ps * pj
        distribution = shifted
    return min(1.0, math.fsum(distribution[observed:]))


def detectable_change(differences: Sequence[float], *, alpha: float, power: float = 0.8) -> float | None:
    """Smallest mean change a one-sided level-α test on these n pairs detects with ``power`` (normal
    approximation): (z_{1−α} + z_power)·s/√n with s the differences' sample standard deviation (n − 1
    denominator). None with fewer than 2 pairs or no spread."""
    n = len(differences)
    if n < 2:
        return None
    spread = statistics.stdev(differences)
    if spread == 0.0:
        return None
    normal = statistics.NormalDist()
    return (normal.inv_cdf(1.0 - alpha) + normal.inv_cdf(power)) * spread / math.sqrt(n)
