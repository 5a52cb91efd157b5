"""Pairwise preferences of the judge between the base branch's answer and the head's. Pure functions only.

Each preference is ``head``, ``base`` or ``tie`` (``judges.pairwise.combine``: both orders must agree).

``summarize``: wins (head preferred), losses (base preferred) and ties per metric, with the exact sign test
over wins and losses (``verdict.calibration.sign_test``): ``p_worse`` is the one-sided p-value that the head is
worse, which ``pairwise_reasons`` compares with the significance level under ``fail_on_regression``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from evalgate.verdict.calibration import sign_test


def summarize(preferences: Iterable[tuple[str, str]]) -> dict[str, dict[str, Any]]:
    """(metric, preferred) pairs → per metric ``{wins, losses, ties, p_worse, p_two_sided}``."""
    table: dict[str, dict[str, Any]] = {}
    for metric, preferred in preferences:
        row = table.setdefault(metric, {"wins": 0, "losses": 0, "ties": 0})
        row[{"head": "wins", "base": "losses"}.get(preferred, "ties")] += 1
    for row in table.values():
        row.update({k: round(v, 6) for k, v in sign_test(row["wins"], row["losses"]).items()})
    return dict(sorted(table.items()))


def pairwise_reasons(summary: Mapping[str, Mapping[str, Any]], gated: Iterable[str], alpha: float,
                     fail_on_regression: bool) -> list[str]:
    """Gate reasons: a gated metric whose head answers lost significantly (``p_worse`` < ``alpha``). This is the
    one place a family-wise rule (e.g. Holm over the run's comparisons) would adjust ``alpha``."""
    if not fail_on_regression:
        return []
    gated = set(gated)
    return [f"{name}: the judge preferred the base branch's answer {row['losses']} time(s) and this change's "
            f"{row['wins']} time(s) ({row['ties']} tie(s); sign test p = {row['p_worse']:.4f} < {alpha:g})"
            for name, row in summary.items() if name in gated and row["p_worse"] < alpha]
