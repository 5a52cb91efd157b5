"""Latency percentiles in flat memory, with numpy's default definition (``method="linear"``).

The q-quantile of n values x₍₀₎ ≤ … ≤ x₍ₙ₋₁₎ is x₍ₖ₎ + (h − k)·(x₍ₖ₊₁₎ − x₍ₖ₎) with h = q·(n − 1), k = ⌊h⌋:
one value is its own p50 and p95, two values' p50 is their midpoint.

Up to ``EXACT_LIMIT`` values are kept as they are and the quantile is exact. Past that, a log-bucketed
histogram with relative accuracy ``alpha`` (the DDSketch construction) stands in: a positive value v falls
in bucket i = ⌈log_γ v⌉ with γ = (1 + α)/(1 − α), whose estimate 2·γ^i/(γ + 1) is within α of every value in
it (relative); values ≤ ``MIN_VALUE`` share one zero bucket (estimate 0). The order statistics x₍ₖ₎ and
x₍ₖ₊₁₎ are then their buckets' estimates (each within α), interpolated as above and clamped to the smallest
and largest value seen. Memory: at most ``EXACT_LIMIT`` floats, then one counter per occupied bucket,
≈ ln(max/min)/(2α) buckets (≈ 700 from 1 ms to 10⁶ ms at α = 1 %), whatever the number of values.
"""

from __future__ import annotations

import math

DEFAULT_ALPHA = 0.01
MIN_VALUE = 1e-9
EXACT_LIMIT = 10_000
"""Values kept exactly (80 KB at most); the sketch alone answers for larger runs."""


class QuantileSketch:
    """Add values; ask quantiles (None before any value)."""

    def __init__(self, alpha: float = DEFAULT_ALPHA, exact_limit: int = EXACT_LIMIT) -> None:
        if not 0 < alpha < 1:
            raise ValueError("alpha must be in (0, 1)")
        self.alpha = alpha
        self.gamma = (1 + alpha) / (1 - alpha)
        self._log_gamma = math.log(self.gamma)
        self.buckets: dict[int, int] = {}
        self.zeros = 0
        self.count = 0
        self.low = math.inf
        self.high = -math.inf
        self.exact_limit = exact_limit
        self.values: list[float] | None = []
        """Every value while there are at most ``exact_limit``, then None."""

    def add(self, value: float) -> None:
        if not math.isfinite(value) or value < 0:
            return
        self.count += 1
        self.low, self.high = min(self.low, value), max(self.high, value)
        if self.values is not None:
            if len(self.values) < self.exact_limit:
                self.values.append(value)
            else:
                self.values = None
        if value <= MIN_VALUE:
            self.zeros += 1
            return
        index = math.ceil(math.log(value) / self._log_gamma)
        self.buckets[index] = self.buckets.get(index, 0) + 1

    def quantile(self, q: float) -> float | None:
        """The q-quantile (0 ≤ q ≤ 1), numpy's linear definition: exact up to ``exact_limit`` values, else within
        ``alpha`` relative of it."""
        if self.count == 0:
            return None
        h = min(max(q, 0.0), 1.0) * (self.count - 1)
        k = math.floor(h)
        if self.values is not None:
            ordered = sorted(self.values)
            below, above = ordered[k], ordered[min(k + 1, self.count - 1)]
        else:
            below, above = self._order_statistic(k), self._order_statistic(min(k + 1, self.count - 1))
        value = below + (h - k) * (above - below)
        return min(max(value, self.low), self.high)

    def _order_statistic(self, rank: int) -> float:
        """The estimate of the ``rank``-th smallest value (0-based) from the buckets."""
        if rank < self.zeros:
            return 0.0
        seen = self.zeros
        for index in sorted(self.buckets):
            seen += self.buckets[index]
            if seen > rank:
                return 2 * self.gamma**index / (self.gamma + 1)
        return 2 * self.gamma ** max(self.buckets) / (self.gamma + 1)  # unreachable: counts add up
