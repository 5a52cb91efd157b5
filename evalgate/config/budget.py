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


AUTO_SHARE = 0.5
AUTO_CRITICAL_TRIALS = 39
"""``auto``: re-trials for 50 % of the cases plus, per critical case, the SPRT's longest walk (40 trials, its first
included: ``verdict.sequential.CRITICAL_MAX_TRIALS`` − 1)."""


def parse_budget(text: str, cases: int, critical: int = 0) -> Budget:
    """``auto`` (50 % of ``cases`` + 39 per ``critical`` case), ``120`` trials, ``50%`` of ``cases`` (rounded up),
    or ``$2.50`` of spend."""
    raw = str(text).strip()
    try:
        if raw.lower() == "auto":
            return Budget(math.ceil(AUTO_SHARE * cases) + AUTO_CRITICAL_TRIALS * critical, None, raw)
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
        raise UserError(f"expected auto, a number of trials (120), a share of the cases (50%) or dollars ($2.50), "
                        f"got {text!r}", where="adaptive_budget") from None
