"""``adaptive_budget``: how many re-trials ``repeat: adaptive`` may add (``verdict.adaptive``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from evalgate.errors import UserError


@dataclass(frozen=True, slots=True)
class Budget:
    """Re-trials allowed: ``trials`` (None: no cap in trials) and ``dollars`` (None: no cap in spend)."""

    trials: int | None
    dollars: float | None
    text: str


def parse_budget(text: str, cases: int) -> Budget:
    """``120`` trials, ``50%`` of ``cases`` (rounded up), or ``$2.50`` of spend."""
    raw = str(text).strip()
    try:
        if raw.startswith("$"):
            dollars = float(raw[1:])
            if not math.isfinite(dollars) or dollars < 0:
                raise ValueError
            return Budget(None, dollars, raw)
        if raw.endswith("%"):
            share = float(raw[:-1])
            if not math.isfinite(share) or share < 0:
                raise ValueError
            return Budget(math.ceil(share / 100.0 * cases), None, raw)
        trials = int(raw)
        if trials < 0:
            raise ValueError
        return Budget(trials, None, raw)
    except ValueError:
        raise UserError(f"expected a number of trials (120), a share of the cases (50%) or dollars ($2.50), "
                        f"got {text!r}", where="adaptive_budget") from None
