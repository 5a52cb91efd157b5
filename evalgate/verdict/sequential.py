"""Sequential decisions for ``repeat: adaptive`` (docs/trustworthy-verdicts.md, "repeat: adaptive").

**The pass-rate comparison, a two-look group-sequential test.** Look 1 is the comparison of every case's
first head trial with the base's first run (exact one-sided McNemar, p₁). Look 2 re-runs on the head side
only the cases chosen from look-1 data (``uncertain``: flipped against the base, a failed critical case, a
case flaky on the base) and compares each re-trial with the base runs *not used at look 1* (the baseline
artifact's repeats 1, 2, …): fresh on both sides, so under H0 ("no case changed") they are exchangeable
whatever chose the cases, and the exact stratified exchange test gives a valid p₂ given look 1. The stages
are combined by the inverse-normal rule with pre-set weights,

    zₖ = Φ⁻¹(1 − pₖ),   Z₁ = z₁,   Z₂ = √t₁·z₁ + √(1 − t₁)·z₂        (t₁ = ``Design.fractions[0]``),

so (Z₁, Z₂) is bivariate normal with correlation √t₁ under H0 (exact p-values are super-uniform: the
level only drops). Rejection bounds c₁, c₂ spend α by the Lan–DeMets O'Brien–Fleming-type function
α(t) = 2 − 2Φ(z_{1−α/2}/√t) (or Pocock-type α·ln(1 + (e − 1)t)): P(Z₁ ≥ c₁) = α(t₁) and
P(Z₁ < c₁, Z₂ ≥ c₂) = α − α(t₁), computed by numerical integration (``exit_probabilities``). Futility
(Z₁ ≤ ``Design.futility_z``) is non-binding: stopping there only removes rejections.

The member's p-value for the weighted Holm family is the **sequential p-value** p = inf{a : some observed
Zₖ ≥ cₖ(a)} (``sequential_p``): the design at level a rejects exactly when p ≤ a, so p is valid at every
level the Holm steps use, and the family-wise error stays ≤ α across every look.

**Critical cases, a one-sided SPRT per case** (``critical_sprt``): H0 p ≥ p₀ (the requirement,
``critical_pass_probability``) against H1 p = p₁ = 0.5. The likelihood ratio Λ = (p₁/p₀)^passes ·
((1 − p₁)/(1 − p₀))^failures is a supermartingale under every p ≥ p₀, so by Ville's inequality a case is
blocked wrongly with probability ≤ 1/A when blocking at Λ ≥ A = m/α (m critical cases: Bonferroni, ≤ α
over all of them, whatever the number of trials). It is cleared at Λ ≤ B = β/(1 − α/m) (β = 0.05), or left
undecided after ``CRITICAL_MAX_TRIALS`` trials (or when the budget ends the re-trials); an undecided case fails
when the evidence leans below the requirement (ln Λ > 0), so one failed trial with no re-trial still fails.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist
from typing import Any, Literal

Spending = Literal["obrien-fleming", "pocock"]
_NORMAL = NormalDist()
_P_FLOOR = 1e-15
_ERFC: Any = None
CRITICAL_BROKEN = 0.5
"""The pass probability of a broken critical case the SPRT is built to catch (H1)."""
CRITICAL_BETA = 0.05
"""The SPRT's nominal miss rate at ``CRITICAL_BROKEN``."""
CRITICAL_MAX_TRIALS = 40
"""Trials after which a critical case still undecided stops (listed as inconclusive)."""


@dataclass(frozen=True, slots=True)
class Design:
    """The adaptive comparison's pre-set design: information fractions of the looks, the spending
    function and the non-binding futility bound on Z₁."""

    fractions: tuple[float, ...] = (0.6, 1.0)
    spending: Spending = "obrien-fleming"
    futility_z: float = -0.3

    def to_dict(self) -> dict[str, object]:
        return {"looks": len(self.fractions), "fractions": list(self.fractions), "spending": self.spending,
                "futility_z": self.futility_z, "combination": "inverse normal"}


DESIGN = Design()


def spent(t: float, alpha: float, spending: Spending = "obrien-fleming") -> float:
    """α spent by information fraction t ∈ (0, 1]: O'Brien–Fleming-type 2 − 2Φ(z_{1−α/2}/√t) or
    Pocock-type α·ln(1 + (e − 1)t) (Lan & DeMets 1983)."""
    if not 0.0 < t <= 1.0:
        raise ValueError(f"information fraction must be in (0, 1], got {t}")
    if spending == "pocock":
        return alpha * math.log(1.0 + (math.e - 1.0) * t)
    return 2.0 - 2.0 * _NORMAL.cdf(_NORMAL.inv_cdf(1.0 - alpha / 2.0) / math.sqrt(t))


def _grid(upper: float, scale: float, step: float = 0.01) -> list[float]:
    low = -8.0 * scale
    count = max(2, int((upper - low) / (step * scale)) + 1)
    h = (upper - low) / (count - 1)
    return [low + i * h for i in range(count)]


def exit_probabilities(bounds: Sequence[float], fractions: Sequence[float]) -> list[float]:
    """Under H0, P(first crossing at look k) for z-bounds ``bounds`` at ``fractions`` (Brownian motion
    S(t), Zₖ = S(tₖ)/√tₖ): look 1 exactly, later looks by trapezoidal integration of S's density over the
    continuation region (Armitage–McPherson–Rowe recursion; grid step 0.01·√Δt, error < 1e-6)."""
    import numpy as np  # lazy: numpy (~0.1 s) only for bootstrap and exact statistics

    global _ERFC
    if _ERFC is None:
        _ERFC = np.frompyfunc(math.erfc, 1, 1)
    if len(bounds) != len(fractions):
        raise ValueError("need one bound per look")
    out = [1.0 - _NORMAL.cdf(bounds[0])]
    t0 = fractions[0]
    x = np.array(_grid(bounds[0] * math.sqrt(t0), math.sqrt(t0)))
    dens = np.exp(-x * x / (2 * t0)) / math.sqrt(2 * math.pi * t0)
    for k in range(1, len(bounds)):
        d = fractions[k] - fractions[k - 1]
        if d <= 0:
            raise ValueError("information fractions must increase")
        edge = bounds[k] * math.sqrt(fractions[k])
        weights = np.full(x.size, x[1] - x[0])
        weights[0] = weights[-1] = (x[1] - x[0]) / 2
        tail = 0.5 * _ERFC((edge - x) / math.sqrt(2.0 * d)).astype(float)
        out.append(float(np.sum(weights * dens * tail)))
        if k < len(bounds) - 1:
            y = np.array(_grid(edge, math.sqrt(fractions[k])))
            kernel = np.exp(-((y[:, None] - x[None, :]) ** 2) / (2 * d)) / math.sqrt(2 * math.pi * d)
            dens = kernel @ (weights * dens)
            x = y
    return out


@lru_cache(maxsize=4096)
def boundaries(alpha: float, fractions: tuple[float, ...] = DESIGN.fractions,
               spending: Spending = "obrien-fleming") -> tuple[float, ...]:
    """The one-sided z rejection bounds c₁ … c_K: look k spends α(tₖ) − α(tₖ₋₁) (``spent``)."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be between 0 and 1, got {alpha}")
    bounds: list[float] = []
    previous = 0.0
    for k, t in enumerate(fractions):
        target = spent(t, alpha, spending) - previous
        if k == 0:
            bounds.append(_NORMAL.inv_cdf(1.0 - target))
        else:
            low, high = -4.0, 12.0
            for _ in range(60):
                mid = (low + high) / 2
                if exit_probabilities([*bounds, mid], fractions[: k + 1])[-1] > target:
                    low = mid
                else:
                    high = mid
            bounds.append((low + high) / 2)
        previous = spent(t, alpha, spending)
    return tuple(bounds)


def z_of(p: float) -> float:
    """Φ⁻¹(1 − p), with p kept in [1e-15, 1 − 1e-15] (still super-uniform)."""
    return _NORMAL.inv_cdf(1.0 - min(max(p, _P_FLOOR), 1.0 - _P_FLOOR))


def combined(stage_p: Sequence[float], fractions: Sequence[float] = DESIGN.fractions) -> list[float]:
    """Z₁ … Z_k of the observed stages (inverse normal, weights √(tⱼ − tⱼ₋₁))."""
    total, out, previous = 0.0, [], 0.0
    for p, t in zip(stage_p, fractions, strict=False):
        total += math.sqrt(t - previous) * z_of(p)
        out.append(total / math.sqrt(t))
        previous = t
    return out


def sequential_p(stage_p: Sequence[float], design: Design = DESIGN) -> float:
    """inf{a : some observed Zₖ ≥ cₖ(a)}: the smallest level at which the design rejects (module doc).
    For look k, cₖ(a) ≤ z exactly when P(no crossing before k, Zₖ ≥ z) ≤ α(tₖ) − α(tₖ₋₁) at level a (the
    earlier bounds taken at level a), which is found by bisection on a."""
    zs = combined(stage_p, design.fractions)
    best = 1.0
    for k, z in enumerate(zs):
        if k == 0:
            tail = 1.0 - _NORMAL.cdf(z)
            low, high = 1e-15, 1.0 - 1e-9
            for _ in range(80):  # spent(t₁, a) is increasing in a
                mid = (low + high) / 2
                if spent(design.fractions[0], mid, design.spending) >= tail:
                    high = mid
                else:
                    low = mid
            best = min(best, high)
            continue
        fractions = design.fractions[: k + 1]

        def excess(a: float, z: float = z, k: int = k, fractions: tuple[float, ...] = fractions) -> float:
            earlier = boundaries(a, design.fractions[:k], design.spending)
            budget = spent(fractions[k], a, design.spending) - spent(fractions[k - 1], a, design.spending)
            return exit_probabilities([*earlier, z], fractions)[-1] - budget

        low, high = 1e-12, best
        if high <= low or excess(high) > 0:
            continue
        for _ in range(40):
            mid = math.sqrt(low * high)
            if excess(mid) <= 0:
                high = mid
            else:
                low = mid
            if high - low < 1e-7 * high:
                break
        best = min(best, high)
    return min(1.0, best)


LookDecision = Literal["regression", "no regression", "continue"]


def look(stage_p: Sequence[float], alpha: float, design: Design = DESIGN) -> LookDecision:
    """The design's decision after the observed stages at level ``alpha``: ``regression`` when some Zₖ
    reached its bound, ``no regression`` after futility at look 1 or the last look, else ``continue``."""
    zs = combined(stage_p, design.fractions)
    bounds = boundaries(alpha, design.fractions, design.spending)
    if any(z >= c for z, c in zip(zs, bounds, strict=False)):
        return "regression"
    if len(zs) == 1 and zs[0] <= design.futility_z:
        return "no regression"
    if len(zs) >= len(design.fractions):
        return "no regression"
    return "continue"


# ── critical cases ────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class CriticalEvidence:
    """One critical case's SPRT after its trials."""

    passes: int
    trials: int
    decision: Literal["blocked", "cleared", "undecided"]
    log_ratio: float
    upper: float
    lower: float

    def to_dict(self) -> dict[str, object]:
        return {"passes": self.passes, "trials": self.trials, "decision": self.decision,
                "log_likelihood_ratio": round(self.log_ratio, 6), "block_at": round(self.upper, 6),
                "clear_at": round(self.lower, 6)}


def critical_bounds(alpha_case: float, beta: float = CRITICAL_BETA) -> tuple[float, float]:
    """ln A = ln(1/α_case) (Ville: P(block | p ≥ p₀) ≤ α_case), ln B = ln(β/(1 − α_case))."""
    return math.log(1.0 / alpha_case), math.log(beta / (1.0 - alpha_case))


def critical_sprt(outcomes: Sequence[bool], requirement: float, alpha_case: float,
                  broken: float = CRITICAL_BROKEN, max_trials: int = CRITICAL_MAX_TRIALS) -> CriticalEvidence:
    """Walk the SPRT over a critical case's trial outcomes in order (True = passed); it stops at the first
    bound crossed, later trials are ignored."""
    if not broken < requirement < 1.0:
        raise ValueError(f"the requirement must be between {broken} and 1, got {requirement}")
    upper, lower = critical_bounds(alpha_case)
    step_pass = math.log(broken / requirement)
    step_fail = math.log((1.0 - broken) / (1.0 - requirement))
    llr, passes, trials = 0.0, 0, 0
    for passed in outcomes:
        trials += 1
        passes += bool(passed)
        llr += step_pass if passed else step_fail
        if llr >= upper:
            return CriticalEvidence(passes, trials, "blocked", llr, upper, lower)
        if llr <= lower:
            return CriticalEvidence(passes, trials, "cleared", llr, upper, lower)
        if trials >= max_trials:
            break
    return CriticalEvidence(passes, trials, "undecided", llr, upper, lower)


def critical_operating(p: float, requirement: float, alpha_case: float, broken: float = CRITICAL_BROKEN,
                       max_trials: int = CRITICAL_MAX_TRIALS) -> dict[str, float]:
    """Exact P(blocked), P(cleared), P(undecided), E[trials] and P(fails) — blocked, or undecided after
    ``max_trials`` with ln Λ > 0 (``Plan.case_status``) — of ``critical_sprt`` when every trial passes with
    probability p (dynamic programming over (trials, passes))."""
    upper, lower = critical_bounds(alpha_case)
    step_pass = math.log(broken / requirement)
    step_fail = math.log((1.0 - broken) / (1.0 - requirement))
    states = {0: 1.0}  # passes → probability, among walks still undecided after n − 1 trials
    out = {"blocked": 0.0, "cleared": 0.0, "undecided": 0.0, "trials": 0.0}
    for n in range(1, max_trials + 1):
        following: dict[int, float] = {}
        for passes, weight in states.items():
            out["trials"] += weight
            for passed, chance in ((True, p), (False, 1.0 - p)):
                if chance == 0.0:
                    continue
                now = passes + passed
                llr = now * step_pass + (n - now) * step_fail
                if llr >= upper:
                    out["blocked"] += weight * chance
                elif llr <= lower:
                    out["cleared"] += weight * chance
                else:
                    following[now] = following.get(now, 0.0) + weight * chance
        states = following
    out["undecided"] = sum(states.values())
    n = max_trials
    out["fails"] = out["blocked"] + sum(weight for passes, weight in states.items()
                                        if passes * step_pass + (n - passes) * step_fail > 0)
    return out
