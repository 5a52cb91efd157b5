"""Decide: the run's verdict from its aggregate, its thresholds and how the run ended (``RunEnd``).

The reasons a run's end adds to the gate (``end_reasons``), in this order: the run did not finish every case
(or a signal interrupted it), the judged metrics that calibration requires and whose judge is not proven,
``no_gate: fail`` when nothing gated was scored, and the spending limit that stopped it. The regression
comparison and the gate policy add theirs after (``runner.finish``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from evalgate.config.sections import GateSettings
from evalgate.model import Threshold
from evalgate.verdict.aggregate import RunAggregate
from evalgate.verdict.gate import GatePolicy, Verdict, run_verdict


class RunEnd(NamedTuple):
    """How the cases stopped: ``status`` (``completed``, ``cancelled``, ``crashed``), the signals received, how
    many of ``total_cases`` (cases × repeats) finished, and the spending limit's message when it stopped the
    run (None: it did not)."""

    status: str
    signals: tuple[str, ...]
    finished_cases: int
    total_cases: int
    budget_stop: str | None = None

    @property
    def interrupted(self) -> bool:
        """Cancelled by a signal or the caller (not by the spending limit alone)."""
        return self.status == "cancelled" and (bool(self.signals) or self.budget_stop is None)


def no_gate_fails(gate: GateSettings) -> bool:
    """``no_gate``: ``fail``, or ``auto`` under ``calibration: required``."""
    return gate.no_gate == "fail" or (gate.no_gate == "auto" and gate.calibration == "required")


def gate_policy(gate: GateSettings) -> GatePolicy:
    """The rules ``run_verdict`` applies (``strict_metrics``, ``fail_on_critical``, ``min_pass_rate``,
    ``max_errored``)."""
    return GatePolicy(strict=gate.strict_metrics, fail_on_critical=gate.fail_on_critical,
                      min_pass_rate=gate.min_pass_rate, max_errored=gate.max_errored)


def end_reasons(end: RunEnd, calibration_failures: Sequence[str], no_gate: str | None, gate: GateSettings) -> list[str]:
    """The gate reasons of the run's end (see the module docstring); ``no_gate``: ``verdict.gate.NO_GATE`` when
    nothing gated was scored, else None."""
    reasons = [f"run {end.status} before every case finished"] if end.status != "completed" else []
    reasons += calibration_failures
    if no_gate is not None and no_gate_fails(gate):
        reasons.append(f"{no_gate} — no_gate: fail")
    if end.interrupted:
        by = " and ".join(dict.fromkeys(end.signals)) or "the caller"
        reasons[0] = (f"interrupted by {by} as the run was finishing: every case finished, the results are marked "
                      "cancelled" if end.finished_cases >= end.total_cases else
                      f"interrupted by {by}: run cancelled before every case finished")
    if end.budget_stop is not None:
        reasons.append(f"{end.budget_stop}; the cases in progress finished, "
                       f"{max(0, end.total_cases - end.finished_cases)} case(s) not run")
    return reasons


def decide(gate: GateSettings, aggregate: RunAggregate, thresholds: Mapping[str, Threshold], reasons: list[str],
           end: RunEnd) -> Verdict:
    """The verdict: ``run_verdict`` under the section's rules with ``reasons`` added."""
    return run_verdict(aggregate, thresholds, gate_policy(gate), reasons, interrupted=end.interrupted)
