"""The one number format of every report (console, PR comment, job summary, HTML, gate reasons).

``score(x)``: three decimals (``0.857``, ``1.000``, ``0.062``) for |x| < 1000; a whole number with
thousands separators (``14,200``) from 1000 up, where decimals say nothing (tokens, milliseconds);
``—`` for anything that is not a finite number.
"""

from __future__ import annotations

import math
from typing import Any

MISSING = "—"


def is_number(value: Any) -> bool:
    """A real, finite number (not a bool)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def score(value: Any, digits: int = 3) -> str:
    """``value`` in the report format (module doc); ``digits`` decimals below 1000."""
    if not is_number(value):
        return MISSING
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    text = f"{value:.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text
