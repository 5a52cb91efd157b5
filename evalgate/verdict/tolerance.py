"""Practical significance: the smallest change of a metric that counts as a regression.

``regression_tolerance`` (evalgate.yaml, per metric) is a number (an absolute amount in the metric's
unit) or ``{abs: a, rel: r}``; ``null`` or ``0`` removes the tolerance. The tolerance applied to one
comparison is

    tolerance = max(a, r·|base mean|)

so a change must exceed both floors to count: with the default for ``latency_ms`` ({abs: 50, rel: 0.10})
1.65 → 7.27 ms is no regression (5.6 ms < 50 ms), and neither is 2.0 → 2.1 s (100 ms < 10 % of 2 s).
Metrics without a default (every 0/1 and score metric) have none: any significant worsening counts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evalgate.errors import UserError


@dataclass(frozen=True, slots=True)
class Tolerance:
    """``abs`` in the metric's unit and ``rel`` as a fraction of the base mean (both ≥ 0)."""

    absolute: float = 0.0
    relative: float = 0.0

    def amount(self, base_mean: float) -> float:
        """max(abs, rel·|base mean|)."""
        return max(self.absolute, self.relative * abs(base_mean))

    def to_dict(self) -> dict[str, float]:
        return {"abs": self.absolute, "rel": self.relative}

    def __bool__(self) -> bool:
        return self.absolute > 0.0 or self.relative > 0.0


DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    "latency_ms": Tolerance(absolute=50.0, relative=0.10),
    "num_tokens": Tolerance(absolute=20.0, relative=0.05),
    "cost_usd": Tolerance(absolute=0.001, relative=0.10),
}
"""Defaults by metric name: noisy measurements whose small moves are never worth failing a PR for."""


def parse_tolerance(name: str, raw: Any, where: str = "regression_tolerance") -> Tolerance:
    """One ``regression_tolerance`` entry: a number (absolute), ``{abs, rel}`` or None/0 (none)."""
    if raw is None:
        return Tolerance()
    if isinstance(raw, bool):
        raise UserError(f"{name}: must be a number or {{abs: x, rel: y}}, got {raw!r}", where=where)
    if isinstance(raw, int | float):
        return Tolerance(absolute=_non_negative(name, "abs", raw, where))
    if isinstance(raw, Mapping):
        unknown = set(raw) - {"abs", "rel"}
        if unknown or not raw:
            raise UserError(f"{name}: expected {{abs: x, rel: y}}, got keys {sorted(map(str, raw))}", where=where)
        return Tolerance(absolute=_non_negative(name, "abs", raw.get("abs", 0.0), where),
                         relative=_non_negative(name, "rel", raw.get("rel", 0.0), where))
    raise UserError(f"{name}: must be a number or {{abs: x, rel: y}}, got {raw!r}", where=where)


def _non_negative(name: str, key: str, value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise UserError(f"{name}.{key} must be a finite number ≥ 0, got {value!r}", where=where)
    return float(value)


def resolve_tolerances(configured: Mapping[str, Any] | None) -> dict[str, Tolerance]:
    """The defaults overridden by ``configured`` (a ``regression_tolerance`` mapping)."""
    resolved = dict(DEFAULT_TOLERANCES)
    for name, raw in (configured or {}).items():
        resolved[str(name)] = parse_tolerance(str(name), raw)
    return {name: tolerance for name, tolerance in resolved.items() if tolerance}
