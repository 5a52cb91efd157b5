"""Pairwise preferences of the judge between the base branch's answer and the head's. Pure functions only.

Each preference is ``head``, ``base`` or ``tie`` (``judges.pairwise.combine``: both orders must agree).

``summarize``: wins (head preferred), losses (base preferred) and ties per metric, with the exact sign test
over wins and losses (``verdict.calibration.sign_test``): ``p_worse`` is the one-sided p-value that the head is
worse; ``pairwise_reasons`` Holm-adjusts it with the comparison's family and fails the gate under
``fail_on_regression`` when the adjusted p ≤ α.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
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


def pairwise_reasons(summary: Mapping[str, dict[str, Any]], gated: Iterable[str], alpha: float,
                     fail_on_regression: bool, family: Sequence[float] = ()) -> list[str]:
    """Gate reasons: a gated metric whose head answers lost significantly. The family-wise rule of the absolute
    comparison (``verdict.compare``: Holm–Bonferroni at ``alpha``) is applied to the pairwise sign tests together
    with that family's raw p-values ``family`` (the comparison's own tests), so a pairwise regression must clear
    a family of all of them; each gated row gets ``p_adjusted``. (The comparison's own decisions are made in its
    own family, without the pairwise tests.)"""
    from evalgate.verdict.stats import holm

    gated = [name for name in summary if name in set(gated)]
    adjusted = holm([*family, *(summary[name]["p_worse"] for name in gated)])[len(family):]
    for name, p_adjusted in zip(gated, adjusted, strict=True):
        summary[name]["p_adjusted"] = round(p_adjusted, 6)
        summary[name]["family_size"] = len(family) + len(gated)
    if not fail_on_regression:
        return []
    return [f"{name}: the judge preferred the base branch's answer {summary[name]['losses']} time(s) and this "
            f"change's {summary[name]['wins']} time(s) ({summary[name]['ties']} tie(s); sign test p = "
            f"{summary[name]['p_worse']:.4f}, Holm-adjusted over {summary[name]['family_size']} tests "
            f"{summary[name]['p_adjusted']:.4f} ≤ {alpha:g})"
            for name in gated if summary[name]["p_adjusted"] <= alpha]
