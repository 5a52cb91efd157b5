"""The gate reasons that come from outside a run's own cases and thresholds, assembled in one place.

``run_verdict`` (``verdict.gate``) lists why the cases and metric averages fail the gate; ``gate_reasons``
lists what is added to that (its ``extra_reasons``), in this order:

1. shards missing from a merge, and shards that stopped before every case finished (cancelled, crashed,
   ``max_cost`` reached): partial results never pass;
2. judged metrics whose judge is not proven under ``calibration: required`` (worded here:
   ``judge_line``, ``calibration_reason``, ``merged_calibration_reason``; decided by ``runner.calibrate``);
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


CALIBRATION_REQUIRED = "calibration: required"
"""The suffix of a gate reason that exists because ``calibration: required`` refuses an unproven judge."""
NOT_GATING = "verdicts shown, not gating"
"""The suffix of a note on a judged metric whose verdicts are shown but do not gate."""


def judge_line(name: str, label: str, evidence: str, gating: bool, why: str, control_state: str,
               control_why: str) -> str:
    """The one line that says whether a judged metric gates and why (console, comment, explain).
    ``evidence``: labels, controls, seed, trusted or none; ``label``: the judge; ``why``/``control_why``: the
    calibration's and the controls' own reasons."""
    if evidence == "labels":
        return (f"{name}: judge {label} calibrated on human labels: {why}" if gating else
                f"{name}: judge not calibrated for {label}: {why}")
    if evidence == "controls":
        return (f"{name}: judge {label} passed its controls: {control_why}" if gating else
                f"{name}: judge {label} failed its controls: {control_why}" if control_state == "failed" else
                f"{name}: judge {label} not proven by controls: {control_why}")
    if evidence == "seed":
        return (f"{name}: judge not calibrated for {label} — no controls could be built; gating as the seed "
                "frameworks did (a seed kind is declared; run `evalgate calibrate`)")
    if evidence == "trusted":
        return f"{name}: judge {label} gates unchecked (no controls could be built; calibration: off)"
    return f"{name}: judge not calibrated for {label}: {why}; no controls could be built from the suite"


def calibration_reason(line: str) -> str:
    """The gate reason of a judged metric whose judge is not proven under ``calibration: required``."""
    return f"{line} — {CALIBRATION_REQUIRED}"


def not_gating_note(line: str) -> str:
    """The note on a judged metric whose judge is not proven (``calibration: warn``)."""
    return f"{line} — {NOT_GATING}"


def merged_calibration_reason(metric: str, entry: Mapping[str, Any]) -> str:
    """A merged run's gate reason for ``metric`` (``name`` or ``name (pairwise)``) from its calibration
    entry (``judge``, ``reason``, ``evidence``): the shards' weakest standing under ``calibration: required``."""
    proven = "not proven" if entry.get("evidence") == "controls" else "not calibrated"
    return calibration_reason(f"{metric}: judge {proven} for {entry.get('judge')}: {entry.get('reason')}")


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
