"""Pairwise preferences of the judge between the base branch's answer and the head's. Pure functions only.

Each preference is ``head``, ``base`` or ``tie`` (``judges.pairwise.combine``: both orders must agree), or
``unavailable`` (a reply that is no evidence: counted apart, in no test).

``summarize``: wins (head preferred), losses (base preferred) and ties per metric, with the exact sign test
over wins and losses (``verdict.calibration.sign_test``): ``p_worse`` is the one-sided p-value that the head is
worse. The decision is not made here: a gated metric's sign test is a member of the comparison's one weighted
Holm family (``verdict.compare``, kind ``pairwise``, sharing its metric's weight), which fails the gate under
``fail_on_regression`` when its adjusted p ≤ α.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from evalgate.verdict.calibration import sign_test


def summarize(preferences: Iterable[tuple[str, str]]) -> dict[str, dict[str, Any]]:
    """(metric, preferred) pairs → per metric ``{wins, losses, ties, unavailable, p_worse, p_two_sided}``."""
    table: dict[str, dict[str, Any]] = {}
    for metric, preferred in preferences:
        row = table.setdefault(metric, {"wins": 0, "losses": 0, "ties": 0, "unavailable": 0})
        row[{"head": "wins", "base": "losses", "unavailable": "unavailable"}.get(preferred, "ties")] += 1
    for row in table.values():
        row.update(sign_test(row["wins"], row["losses"]))  # unrounded: 6 decimals would print 1e-9 as 0
    return dict(sorted(table.items()))
