"""The gate reasons that come from outside a run's own cases and thresholds, assembled in one place.

``run_verdict`` (``verdict.gate``) lists why the cases and metric averages fail the gate; ``gate_reasons``
lists what is added to that (its ``extra_reasons``), in this order:

1. shards missing from a merge, and shards that stopped before every case finished (cancelled, crashed,
   ``max_cost`` reached): partial results never pass;
2. judged metrics whose calibration failed (``verdict.calibration``);
3. the baseline comparison: each rejected test of the regression family, only with
   ``fail_on_regression`` (``verdict.compare.comparison_gate_reasons``), then each metric whose threshold
   the base run's cases miss though the new cases lift the average (``diluted_reasons``, always);
4. the gate policy loosened by the pull request without approval (``verdict.policy.gate_reason``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalgate.verdict.compare import comparison_gate_reasons, diluted_reasons

FINISHED = ("completed", "merged")
"""Run statuses of a run whose every case finished."""


@dataclass(frozen=True)
class ShardEnd:
    """How one merged shard's run ended: its label, ``status`` and whether ``max_cost`` stopped it."""

    label: str
    status: str
    budget_exceeded: bool = False


def gate_reasons(*, missing_shards: Sequence[str] = (), shards: Sequence[ShardEnd] = (),
                 calibration: Sequence[str] = (), comparison: Mapping[str, Any] | None = None,
                 fail_on_regression: bool = False, diluted: bool = True,
                 policy: Sequence[str] = ()) -> list[str]:
    """The extra gate reasons, in the module docstring's order. ``comparison``: the run's baseline comparison
    (None: none was made); ``diluted=False`` leaves out the diluted-threshold reasons (``evalgate compare``
    lists the regression decision only)."""
    reasons = [f"shard(s) {', '.join(missing_shards)} missing: the merged results are partial"] if missing_shards else []
    for shard in shards:
        if shard.status not in FINISHED:
            reasons.append(f"{shard.label}: run {shard.status} before every case finished")
        if shard.budget_exceeded:
            reasons.append(f"{shard.label}: max_cost reached: the shard stopped before exceeding the budget")
    reasons += calibration
    if comparison is not None:
        reasons += comparison_gate_reasons(comparison, fail_on_regression)
        if diluted:
            reasons += diluted_reasons(comparison)
    reasons += policy
    return reasons
