"""The decide-and-record stage of a run, once its cases ended (``Finishing``): the results document decided by
``verdict.decide`` (``results_document``), written as results.json and the run's files sealed (``record_results``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalgate.calls.costs import add_spend
from evalgate.config.sections import GateSettings
from evalgate.config.settings import Settings
from evalgate.runner.answering import Answered, warn
from evalgate.runner.baseline import Base
from evalgate.runner.calibrate import attach_calibration
from evalgate.runner.engine import Engine
from evalgate.runner.finish import (
    attach_comparison,
    attach_gate_policy,
    build_document,
    custom_metrics_metadata,
    run_metadata,
)
from evalgate.runner.opening import Opened
from evalgate.runner.reuse import add_reuse
from evalgate.runner.setup import Prepared
from evalgate.runner.tallies import Tallies
from evalgate.safety.redact import redact_mapping
from evalgate.store.results_json import write_results
from evalgate.store.run_files import RunFiles
from evalgate.verdict.decide import RunEnd, decide, end_reasons
from evalgate.verdict.gate import NO_GATE, Verdict, nothing_gated
from evalgate.verdict.repeats import apply_report


@dataclass(frozen=True)
class Finishing:
    """Everything the results of a run are made from, once its cases ended."""

    settings: Settings
    gate: GateSettings
    prepared: Prepared
    base: Base
    opened: Opened
    tallies: Tallies
    files: RunFiles
    engine: Engine
    answered: Answered
    warnings: list[str]
    received: list[str]
    cwd: Path | None
    pr_labels: tuple[str, ...]


def record_results(files: RunFiles, results_for: Callable[[str], tuple[dict[str, Any], Verdict]], received: list[str],
            status: str) -> tuple[dict[str, Any], Verdict]:
    """Write results.json (again, marked cancelled, when a signal came while it was written) and seal the run's
    files. A signal from here on leaves the results complete (``RunOutcome.signals``)."""
    if received and status == "completed":  # every case finished, but the run was asked to stop
        status = "cancelled"
    document, verdict = results_for(status)
    write_results(files.results_path, document, files.spool, files.run_id)
    if received and status == "completed":  # the signal came while results.json was being written
        status = "cancelled"
        document, verdict = results_for(status)
        write_results(files.results_path, document, files.spool, files.run_id)
    files.seal(document)
    return document, verdict


def results_document(run: Finishing, status: str) -> tuple[dict[str, Any], Verdict]:
    """The results document (and verdict) of the run ended with ``status``: decided by ``verdict.decide``, then
    decided again with the regression comparison's and the gate policy's reasons when they add any."""
    prepared, aggregate, ledger = run.prepared, run.tallies.aggregate, run.opened.runtime.ledger
    end = RunEnd(status, tuple(run.received), run.engine.stats.finished_cases, len(prepared.cases) * run.gate.repeat,
                 ledger.stop_message() if ledger.exceeded else None)
    no_gate = NO_GATE if nothing_gated(aggregate, prepared.thresholds) else None
    reasons = end_reasons(end, run.opened.calibration.failures_for(aggregate.metrics), no_gate, run.gate)
    verdict = decide(run.gate, aggregate, prepared.thresholds, reasons, end)
    _late_warnings(run, status)
    document = build_document(
        run_id=run.files.run_id, timestamp=run.files.timestamp, status=status, aggregate=aggregate,
        thresholds=prepared.thresholds, verdict=verdict, metadata=_metadata(run), metrics=prepared.metrics,
    )
    _attach_run_blocks(run, document)
    added, gate_fields = _compare(run, document)
    if added:
        verdict = decide(run.gate, aggregate, prepared.thresholds, reasons + added, end)
        document["gate"] = verdict.as_dict()
        attach_calibration(document, run.opened.calibration, None)
    document["gate"].update(gate_fields)
    if no_gate is not None:
        document["gate"]["no_gate"] = no_gate
    return document, verdict


def _late_warnings(run: Finishing, status: str) -> None:
    """Warnings only the finished run can give: identical repeats, and what the traces showed."""
    opened, echo = run.opened, run.tallies.echo
    judge_totals = opened.runtime.ledger.roles.get("judge")
    late = echo.warning(opened.target.kind, opened.judge is not None, echo.results,
                        judge_totals.calls if judge_totals is not None else 0)
    if late is not None and status == "completed":
        warn(late, run.warnings)
    for said in opened.traces.warnings() if status == "completed" else []:
        warn(said, run.warnings)


def _metadata(run: Finishing) -> dict[str, Any]:
    """results.json's ``metadata``: the run's settings and provenance, calls, traces, estimate and warnings,
    the judge, the simulated user and the user's own metrics."""
    opened, prepared = run.opened, run.prepared
    metadata = (run_metadata(run.settings, prepared, opened.target) | opened.runtime.metadata()
                | opened.traces.describe() | {"estimate": run.answered.estimate})
    if run.warnings:
        metadata["warnings"] = list(run.warnings)
    if opened.judge is not None:
        metadata["judge"] = redact_mapping(opened.judge.metadata())
    simulator = opened.conversations.simulator
    if simulator is not None and simulator.calls:
        metadata["simulator"] = simulator.describe()
    if prepared.user_metrics or prepared.used_inline:
        metadata["custom_metrics"] = custom_metrics_metadata(prepared, opened.judge)
    return metadata


def _attach_run_blocks(run: Finishing, document: dict[str, Any]) -> None:
    """The document's calibration, spend, reuse, repeats, adaptive and pairwise blocks."""
    opened, tallies = run.opened, run.tallies
    attach_calibration(document, opened.calibration, tallies.health.report())
    add_spend(document["summary"], opened.runtime.ledger)
    add_reuse(document["summary"], opened.judge)
    apply_report(document, tallies.repeats.report())
    if tallies.adaptive is not None:
        document["adaptive"] = tallies.adaptive.plan.report() | {"budget": run.gate.adaptive_budget,
                                                                 "known_flaky_critical": tallies.adaptive.known_flaky}
    if run.answered.pairwise is not None:
        document["pairwise"] = run.answered.pairwise


def _compare(run: Finishing, document: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """The regression comparison's reasons (the pairwise sign tests join its one family) and the gate policy's,
    with the gate fields the policy adds."""
    pairwise, calibration = run.answered.pairwise, run.opened.calibration
    regression_reasons = attach_comparison(
        document, run.base.lookup, run.files.spool.iter_records_in_order(), run.settings, pairwise=pairwise,
        pairwise_gated=calibration.pairwise_gated(run.prepared.thresholds) if pairwise is not None else ())
    policy_reasons, gate_fields = attach_gate_policy(document, run.base.lookup, run.settings, run.prepared,
                                                     run.tallies.case_set.as_dict(), run.cwd, run.pr_labels)
    return regression_reasons + policy_reasons, gate_fields
