"""One evaluation run from settings to verdict, as the pipeline it is (``execute``):

    load and select (``runner.setup.prepare``) → baseline (``load_baseline``) → open the target and judge
    (``open_run``: the judge proves itself, ``runner.calibrate``) → answer (``answer``: each case answered and
    scored as it streams through ``runner.engine``) → score (``score_pairs``, ``Tallies.finish``) → decide
    (``verdict.decide``) → record (``store.run_files``, results.json) → publish (the seed documents).

Each stage takes the settings section it reads (``config.sections``) where its callees do not need the whole
``Settings``. The CLI and the Action both call ``execute``; publishing the PR comment and artifacts happens
after it returns, outside this package.

SIGINT and SIGTERM are honoured within a second in every phase (``Interruption``), however large the
run: while the datasets are read and checked they unwind at once (nothing was evaluated, no results
are written, exit 130); during the baseline lookup and the pre-flight check they cancel the wait (the
same); while cases run no new case starts — the check is a plain flag read before each case, so a
recorded run whose cases never wait on the event loop stops too —, calls in flight get
``SIGNAL_GRACE_SECONDS`` to finish (then they are cancelled and their cases left out), and the finished
cases are written with status ``cancelled`` (exit 130). A signal that arrives once every case has
finished, until results.json is written, marks the results cancelled too (results.json is then written
again, ≈ 0.1 s for 100k cases); one that arrives after that leaves them complete, and the caller exits
with the verdict's status (``RunOutcome.signals`` names it).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import gc
import itertools
import signal
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalgate.calls.costs import add_spend
from evalgate.calls.runtime import Runtime
from evalgate.config.budget import parse_budget
from evalgate.config.sections import AnswerSettings, GateSettings, RecordSettings, SelectionSettings
from evalgate.config.settings import Settings
from evalgate.errors import Interrupt, RunInterrupted, UserError
from evalgate.judges.client import JudgeClient
from evalgate.judges.estimate import announce_estimate
from evalgate.judges.factory import build_judge, build_simulator, metric_temperatures
from evalgate.judges.health import HealthTally
from evalgate.judges.prompts import METRIC_TEMPLATES
from evalgate.metrics.registry import judge_dependent
from evalgate.model import Case
from evalgate.report.progress import FailureCollector
from evalgate.runner.adaptive import AdaptiveSink, run_rounds
from evalgate.runner.calibrate import JudgePolicy, attach_calibration, judge_policy, prove_judges
from evalgate.runner.conversation import ConversationOptions, turn_case
from evalgate.runner.engine import Engine, off_loop
from evalgate.runner.finish import (
    attach_comparison,
    attach_gate_policy,
    build_document,
    compared_record,
    custom_metrics_metadata,
    new_run_id,
    run_metadata,
    write_compat_documents,
)
from evalgate.runner.missing import check_answers_recorded, not_judged_reason
from evalgate.runner.pairwise import base_outputs, judge_pairs
from evalgate.runner.preflight import check_reachable, endpoints_of
from evalgate.runner.redundancy import IdenticalRepeats, upfront_warnings
from evalgate.runner.reuse import Restored, add_reuse, restore_base_cache
from evalgate.runner.setup import Prepared, prepare
from evalgate.safety.redact import redact_mapping, register_environment
from evalgate.store import reader
from evalgate.store.history import flaky_case_ids
from evalgate.store.outdir import OutputLock
from evalgate.store.reader import BaselineLookup
from evalgate.store.recorder import CaseRecorder
from evalgate.store.results_json import write_results
from evalgate.store.run_files import RunFiles, open_run_files
from evalgate.targets.factory import build_target
from evalgate.text.tokens import configure as configure_tokenizer
from evalgate.traces.session import TraceSession
from evalgate.verdict.adaptive import Plan, base_outcomes
from evalgate.verdict.aggregate import RunAggregate
from evalgate.verdict.compare import PASS_RATE_WEIGHT
from evalgate.verdict.decide import RunEnd, decide, end_reasons
from evalgate.verdict.gate import NO_GATE, Verdict, judge_metric_sets, nothing_gated
from evalgate.verdict.policy import CaseSet
from evalgate.verdict.repeats import RepeatSink, apply_report
from evalgate.verdict.tolerance import resolve_tolerances


@dataclass
class RunOutcome:
    document: dict[str, Any]
    results_path: Path
    db_path: Path
    verdict: Verdict
    failures: list[dict[str, Any]] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    """One-line notices from preparing the run (``Prepared.notices``)."""
    compat_paths: dict[str, Path] = field(default_factory=dict)
    """Seed-shaped documents written (``compat``): seed → path (``seed:output`` for ``compat_output``)."""
    signals: list[str] = field(default_factory=list)
    """Names of the signals received during the run (SIGINT, SIGTERM), in order."""


async def execute(
    settings: Settings,
    suite_config: Mapping[str, Any],
    *,
    cwd: Path | None = None,
    progress_for: Callable[[int], Any] | None = None,
    stop: asyncio.Event | None = None,
    install_signal_handlers: bool = True,
    baseline_loader: Callable[[], BaselineLookup] | None = None,
    pr_labels: Iterable[str] = (),
) -> RunOutcome:
    """Run the evaluation and write results.json + SQLite. Always finalises what was computed.

    ``baseline_loader`` answers ``baseline: auto`` (the Action passes
    ``evalgate.github.baseline.auto_loader(...)``); a path baseline is read here, before the run.
    ``pr_labels``: the pull request's labels (the edges read them from the event payload), for the approval
    label of ``gate_changes: fail`` (``runner.finish.attach_gate_policy``).
    SIGINT and SIGTERM (with ``install_signal_handlers``), like setting ``stop``, end the run early:
    partial results with status ``cancelled`` and ``gate.exit_code`` 130.
    """
    stop = stop or asyncio.Event()
    interruption = Interruption(stop)
    handlers = interruption.install() if install_signal_handlers else {}
    lock: OutputLock | None = None
    try:
        now = dt.datetime.now(dt.UTC)
        lock = OutputLock(settings.output_path, new_run_id(now))
        # one run at a time in the output directory (a signal while waiting ends the wait: nothing written)
        lock.acquire(wait=settings.wait, where=settings.origin("output_dir"), check=Interrupt.check)
        return await _execute(settings, suite_config, cwd=cwd, progress_for=progress_for, stop=stop,
                              interruption=interruption, baseline_loader=baseline_loader, lock=lock,
                              pr_labels=tuple(pr_labels))
    except asyncio.CancelledError:
        if interruption.received:  # the signal cancelled a wait before any case ran
            raise RunInterrupted(interruption.received[0]) from None
        raise
    finally:
        if lock is not None:
            lock.release()
        if handlers:
            Interrupt.unwind = False  # a later signal (the caller's start-up handler) is only recorded
        Interrupt.restore(handlers)
        interruption.received.clear()  # this run's signals are in its outcome (or the exception raised)


async def _execute(
    settings: Settings,
    suite_config: Mapping[str, Any],
    *,
    cwd: Path | None,
    progress_for: Callable[[int], Any] | None,
    stop: asyncio.Event,
    interruption: Interruption,
    baseline_loader: Callable[[], BaselineLookup] | None,
    lock: OutputLock,
    pr_labels: tuple[str, ...] = (),
) -> RunOutcome:
    """The pipeline (module docstring); the results are written whatever ends the cases."""
    register_environment(settings.environment)  # read once at the edge (config), passed down from here
    configure_tokenizer(settings.environment)
    record = RecordSettings.of(settings)
    check_output_paths(record, cwd)
    interruption.enter("preparing")  # plain Python code: a signal unwinds it at once
    prepared = load_and_select(SelectionSettings.of(settings), suite_config, cwd)
    interruption.enter("waiting")  # a signal cancels the wait
    gate, answering = GateSettings.of(settings), AnswerSettings.of(settings)
    base = await load_baseline(gate, baseline_loader, cwd)
    opened = await open_run(settings, prepared, base, stop, cwd)
    progress = progress_for(len(prepared.cases) * settings.repeat) if progress_for else None
    files = open_run_files(record, lock.run_id,
                           dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), lock.marker())
    prepared.notices.extend(files.store.notices)
    tallies = open_tallies(gate, record.db_path, prepared, opened.judge, base, progress)
    engine = _engine(answering, prepared, opened, tallies.sinks(files.recorder), stop, interruption)
    warnings: list[str] = []
    answered = Answered()
    interruption.enter("running")  # a signal stops new cases (a flag each worker reads) and wakes the loop
    frozen = _freeze_for_large_run(len(prepared.cases) * settings.repeat)
    try:
        if progress is not None and hasattr(progress, "start"):
            progress.start(opened.runtime.executor)
        await answer(engine, prepared.cases, tallies.adaptive, answering, lambda: opened.runtime.ledger.spent,
                     lambda: _estimate(settings, prepared, opened, warnings), answered)
        await score_pairs(opened.judge, prepared, files, base, answering.concurrency, answered)
    finally:
        interruption.enter("finishing")  # the results are written whatever arrives now (well within 1 s)
        _thaw(frozen)
        if progress is not None and hasattr(progress, "close"):
            progress.close()
        await opened.close()
        tallies.finish()
        run = Finishing(settings, gate, prepared, base, opened, tallies, files, engine, answered, warnings,
                        interruption.received, cwd, pr_labels)
        document, verdict = _record(files, lambda status: _results(run, status), interruption.received,
                                    answered.status)
    compat_paths = write_compat_documents(settings, files.results_path, cwd)  # publish: the seeds' documents
    return RunOutcome(document=document, results_path=files.results_path, db_path=settings.db_path,
                      verdict=verdict, failures=tallies.failures.failures, compat_paths=compat_paths,
                      notices=prepared.notices, signals=list(interruption.received))


# --- load and select ------------------------------------------------------------------------------------------


def load_and_select(selection: SelectionSettings, suite_config: Mapping[str, Any], cwd: Path | None) -> Prepared:
    """The selected cases, their thresholds and plans (``runner.setup.prepare``); a dataset with nothing to
    score (the default target and no answers) is a user error saying how to add answers (exit 2)."""
    prepared = prepare(selection, suite_config, cwd)
    check_answers_recorded(selection, prepared.cases)
    return prepared


@dataclass(frozen=True)
class Base:
    """The base run the run compares with (``load_baseline``): none, or its results slimmed to what the
    comparison reads, with its simulated conversations to replay and, for ``pairwise``, its answers."""

    lookup: BaselineLookup | None = None
    replay: dict[str, dict[str, Any]] = field(default_factory=dict)
    """case id → the base run's simulated user and turns (``simulated_turns``)."""
    before: dict[str, str] = field(default_factory=dict)
    """case id → the base run's answer (``pairwise``: the judge is asked which is better where one changed)."""


async def load_baseline(gate: GateSettings, loader: Callable[[], BaselineLookup] | None, cwd: Path | None) -> Base:
    """The ``baseline`` (``auto``: ``loader``; a path: read here), looked up in a daemon thread: an interrupted
    lookup is left behind, never waited for at exit. Nothing is looked up for ``none`` (the default)."""
    if gate.baseline_kind == "none":
        return Base()
    lookup = await off_loop(reader.resolve_baseline, gate.baseline, auto=loader, cwd=cwd)
    if lookup is None or lookup.document is None:
        return Base(lookup)
    records = lookup.document["results"]
    replay = simulated_turns(records)
    before = base_outputs(records) if gate.pairwise else {}
    # a baseline file is streamed (store.reader.StoredRecords): slimmed as it is read again, never held
    lookup.document["results"] = records.map(compared_record) if hasattr(records, "map") else \
        [compared_record(r) for r in records]
    return Base(lookup, replay, before)


# --- open the target and the judge ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Opened:
    """What answers and judges the cases, opened and proven before the first case (``open_run``)."""

    runtime: Runtime
    judge: JudgeClient | None
    target: Any
    """The target, wrapped by ``traces`` (each case's traceparent, spans and trace summary)."""
    conversations: ConversationOptions
    traces: TraceSession
    restored: Restored
    controls: dict[str, dict[str, Any]]
    """Metric → its judge's record on the controls (``runner.calibrate.prove_judges``)."""
    calibration: JudgePolicy
    not_judged: str | None
    """Why judged metrics are not judged (a pull request without the judge's key), or None."""

    async def close(self) -> None:
        """Close the target's, judge's and simulator's connections, the trace receiver and the base cache."""
        await _close_quietly(self.target, self.judge, self.runtime)
        await self.traces.close()
        if self.conversations.simulator is not None:
            with contextlib.suppress(Exception):
                await self.conversations.simulator.aclose()
        self.restored.close()


async def open_run(settings: Settings, prepared: Prepared, base: Base, stop: asyncio.Event,
                   cwd: Path | None) -> Opened:
    """Build the judge and target, check their endpoints answer, prove the judge on the suite's controls and
    decide which judged metrics gate (``prepared.thresholds`` then holds the gating ones), and start the trace
    receiver. What was opened is closed again if any of it fails."""
    restored = restore_base_cache(settings, base.lookup, cwd)
    if restored.notice:
        prepared.notices.extend(restored.notice.splitlines())
    runtime = Runtime.from_settings(settings, stop)
    try:
        not_judged, judge, target, conversations = _clients(settings, runtime, restored, base)
    except BaseException:
        restored.close()
        raise
    if not_judged:
        prepared.notices.append(f"judged metrics {not_judged}: the rest of the gate decides")  # the comment too
    if getattr(judge, "batch_notice", None):
        prepared.notices.append(str(judge.batch_notice))  # type: ignore[union-attr]
    traces = TraceSession(settings)
    try:
        controls, calibration = await _prove(settings, prepared, judge, target, cwd)
        await traces.start()  # the OTLP receiver (traces: true); a busy port is a UserError
    except BaseException:
        await _close_quietly(target, judge, runtime)
        restored.close()
        raise
    if traces.notice:
        prepared.notices.append(traces.notice)
    return Opened(runtime, judge, traces.wrap(target), conversations, traces, restored, controls, calibration,
                  not_judged)


def _clients(settings: Settings, runtime: Runtime, restored: Restored, base: Base
             ) -> tuple[str | None, JudgeClient | None, Any, ConversationOptions]:
    """Why judged metrics are not judged (or None), the judge (None without one), the target and how it carries
    conversations (with the simulated user and the base run's turns to replay)."""
    env = settings.environment
    not_judged = not_judged_reason(settings)  # a fork's or a bot's pull request: no judge key (skip)
    judging = settings.model_copy(update={"judge_provider": "none"}) if not_judged else settings
    judge = build_judge(judging, runtime, env, base_cache=restored.cache)
    target = build_target(settings, runtime, env)
    conversations = ConversationOptions(
        stop_on_failed_turn=settings.stop_on_failed_turn,
        send_id=target.kind == "http" and settings.target_conversation == "id",
        id_from=settings.target_conversation_id_from,
        simulator=build_simulator(judging, runtime, env, judge), replay=base.replay)
    return not_judged, judge, target, conversations


async def _prove(settings: Settings, prepared: Prepared, judge: JudgeClient | None, target: Any,
                 cwd: Path | None) -> tuple[dict[str, dict[str, Any]], JudgePolicy]:
    """Check the endpoints answer, then let the judge prove itself on controls built from the suite (cached: a
    rerun costs no call) and decide which judged metrics gate."""
    await check_reachable(endpoints_of(target, judge), settings.connect_timeout_seconds, settings.environment)
    Interrupt.check()  # a signal whose wake-up found no wait left to cancel: still nothing written
    controls = await prove_judges(settings, prepared, judge, cwd or Path.cwd(),
                                  announce=lambda text: print(f"evalgate: {text}", file=sys.stderr, flush=True))
    calibration = judge_policy(settings, prepared, judge, cwd or Path.cwd(), controls)
    prepared.thresholds = calibration.thresholds  # a judged metric whose judge is not proven does not gate
    return controls, calibration


# --- answer and score -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tallies:
    """The sinks that count the cases as they finish (besides the recorder): the aggregate (through the repeats'
    majority, or the adaptive plan), the failures for the console, the judge's health, the gate policy's case
    facts, identical repeats, and the progress display."""

    aggregate: RunAggregate
    repeats: RepeatSink
    adaptive: AdaptiveSink | None
    failures: FailureCollector
    health: HealthTally
    case_set: CaseSet
    echo: IdenticalRepeats
    progress: Any

    def sinks(self, recorder: CaseRecorder) -> list[Any]:
        """The engine's sinks, in the order each finished case reaches them."""
        sinks: list[Any] = [self.adaptive or self.repeats, recorder, self.failures, self.health, self.case_set]
        if self.echo.repeat > 1:
            sinks.append(self.echo)
        if self.progress is not None:
            sinks.append(self.progress)
        return sinks

    def finish(self) -> None:
        """Score the run: close the adaptive plan (known flaky critical cases listed, not failures) and the
        repeats, whose last case's outcomes then reach the aggregate."""
        if self.adaptive is not None:
            self.adaptive.finish()
            _excuse_known_flaky(self.aggregate, self.adaptive.known_flaky)
        self.repeats.finish()


def open_tallies(gate: GateSettings, db_path: Path, prepared: Prepared, judge: JudgeClient | None, base: Base,
                 progress: Any) -> Tallies:
    """The run's ``Tallies`` (``db_path``: the history ``repeat: adaptive`` reads known flaky cases from)."""
    aggregate = RunAggregate(*judge_metric_sets(prepared.metrics, prepared.thresholds, judging=judge is not None),
                             unjudged=judge_dependent(prepared.metrics) if judge is None else ())
    repeats = RepeatSink(aggregate, repeat=gate.repeat, rule=gate.repeat_rule)
    adaptive = _adaptive_sink(gate, db_path, base.lookup, repeats) if gate.adaptive else None
    return Tallies(aggregate, repeats, adaptive, FailureCollector(), HealthTally(), CaseSet(),
                   IdenticalRepeats(gate.repeat), progress)


def _engine(section: AnswerSettings, prepared: Prepared, opened: Opened, sinks: list[Any], stop: asyncio.Event,
            interruption: Interruption) -> Engine:
    """The engine that answers and scores each case and streams it to ``sinks``."""
    judge, target = opened.judge, opened.target
    return Engine(
        target=target,
        plan_for=prepared.plan_for,
        thresholds=prepared.thresholds,
        sinks=sinks,
        concurrency=section.concurrency,
        spare_workers=spare_workers(section.concurrency, target, batch_window(section, judge)),
        strict=section.strict_metrics,
        judge=judge,
        repeat=section.repeat,
        stop=stop,
        budget_reached=lambda: opened.runtime.ledger.exceeded,
        metrics=prepared.metrics,
        max_answer_chars=section.max_answer_chars,
        score_seconds=section.api_timeout_seconds,
        halted=interruption.requested,
        grace_seconds=SIGNAL_GRACE_SECONDS,
        prefetch_judged=getattr(judge, "batch", None) is not None,
        optional=prepared.optional,
        conversations=opened.conversations,
        advisory=opened.calibration.advisory(),
        not_judged=opened.not_judged,
    )


@dataclass
class Answered:
    """How the cases ended: ``status`` stays ``crashed`` unless ``answer`` returns; the cost estimate; the
    pairwise preferences (``score_pairs``)."""

    status: str = "crashed"
    estimate: dict[str, Any] | None = None
    pairwise: dict[str, Any] | None = None


async def answer(engine: Engine, cases: Iterable[Case], adaptive: AdaptiveSink | None, section: AnswerSettings,
                 spent: Callable[[], float], announce: Callable[[], dict[str, Any] | None],
                 answered: Answered) -> None:
    """Answer and score every case (the engine streams each to its sinks), announcing the cost estimate once
    the first calls are sent (``estimate_once_started``); with ``adaptive``, then the rounds that add repeats
    where the decision is not yet sure, within ``adaptive_budget`` (``spent``: the money spent so far)."""
    running = asyncio.ensure_future(engine.run(adaptive.feed(cases) if adaptive else cases))
    estimating = asyncio.ensure_future(estimate_once_started(running, announce))
    try:
        stats = await running
        answered.estimate = await estimating
    except BaseException:
        estimating.cancel()
        raise
    if adaptive is not None and not stats.cancelled:
        plan = adaptive.plan
        budget = parse_budget(section.adaptive_budget, len(plan.cases),
                              sum(1 for c in plan.cases.values() if c.critical))
        await run_rounds(engine, adaptive, budget, spent)
    answered.status = "cancelled" if stats.cancelled else "completed"


async def score_pairs(judge: JudgeClient | None, prepared: Prepared, files: RunFiles, base: Base, concurrency: int,
                      answered: Answered) -> None:
    """``pairwise``: once every case completed, ask the judge which answer is better, the base run's or this
    one's, wherever one changed (``runner.pairwise``)."""
    if base.before and judge is not None and answered.status == "completed":
        answered.pairwise = await judge_pairs(judge, prepared, files.spool.iter_records_in_order(), base.before,
                                              concurrency)


def _estimate(settings: Settings, prepared: Prepared, opened: Opened, warnings: list[str]) -> dict[str, Any] | None:
    """The cost estimate (``_announce``), with the bound of the controls judged before the cases."""
    estimate = _announce(settings, prepared, opened.judge, opened.target, warnings, opened.conversations.simulator)
    if estimate is not None and opened.controls:
        estimate["controls"] = {"cap_per_metric": settings.controls_max_items,
                                "items": {name: record["items"] for name, record in sorted(opened.controls.items())}}
    return estimate


# --- decide and record ----------------------------------------------------------------------------------------


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


def _record(files: RunFiles, results_for: Callable[[str], tuple[dict[str, Any], Verdict]], received: list[str],
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


def _results(run: Finishing, status: str) -> tuple[dict[str, Any], Verdict]:
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
        _warn(late, run.warnings)
    for said in opened.traces.warnings() if status == "completed" else []:
        _warn(said, run.warnings)


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


def _adaptive_sink(gate: GateSettings, db_path: Path, baseline: BaselineLookup | None,
                   downstream: RepeatSink) -> AdaptiveSink:
    """The ``repeat: adaptive`` sink over ``downstream`` with the base's run outcomes (none without a baseline)."""
    records = baseline.document["results"] if baseline is not None and baseline.document is not None else []
    alpha = gate.significance_level
    plan = Plan(alpha=alpha, level=PASS_RATE_WEIGHT * alpha, requirement=gate.critical_pass_probability,
                flaky_history=flaky_case_ids(db_path))
    return AdaptiveSink(downstream, plan, base_outcomes(records), gate.repeat_rule,
                        resolve_tolerances(gate.regression_tolerance))


def _excuse_known_flaky(aggregate: RunAggregate, known: list[str]) -> None:
    """Known flaky critical cases (the base fails them as often) are listed, not gate failures."""
    if not known:
        return
    kept = [f for f in aggregate.critical_failures if f["id"] not in set(known)]
    aggregate.critical_failure_count -= len(aggregate.critical_failures) - len(kept)
    aggregate.critical_failures = kept


def check_output_paths(settings: RecordSettings, cwd: Path | None) -> None:
    """The output directory is a directory and its results.json, if any, a file; ``compat_output`` (a
    dialect's own ``--output``) must not be one of the files evalgate writes itself."""
    for path, kind in ((settings.output_path, "a directory"), (settings.output_path / "results.json", "a file")):
        exists = path.exists()
        if exists and (not path.is_dir() if kind == "a directory" else not path.is_file()):
            raise UserError(f"{path} is in the way: evalgate writes {kind} there; remove it or choose another "
                            "output directory", where=settings.origin("output_dir"))
    if not settings.compat_output:
        return
    base = cwd or Path.cwd()
    extra = Path(settings.compat_output)
    extra = (extra if extra.is_absolute() else base / extra).resolve()
    output = settings.output_path if settings.output_path.is_absolute() else base / settings.output_path
    own = {(output / "results.json").resolve(), (settings.db_path if settings.db_path.is_absolute()
                                                   else base / settings.db_path).resolve()}
    if extra in own:
        raise UserError(f"{settings.compat_output} is where evalgate writes its own results; give --output another "
                        "path or --output-dir another directory", where="--output (compat_output)")


def spare_workers(concurrency: int, target: Any, batch: int = 0) -> int:
    """Cases in progress beyond ``concurrency`` (see ``Engine``): half as many again, at least two, when
    ``target.calls_bounded`` (every call the cases make waits at the executor's bound) and
    ``concurrency`` > 1; none otherwise. A case scores between its calls, and a call slot it leaves stays
    empty meanwhile unless another case is waiting for it; the measured effect is in bench/README.md.
    Batch judging (``batch``: its window) keeps that many cases waiting for their batched verdicts."""
    if not getattr(target, "calls_bounded", False):
        return 0
    if batch:
        return max(0, batch - concurrency)
    if concurrency == 1:
        return 0  # concurrency 1 stays one case at a time, start to finish (what debugging expects)
    return max(2, concurrency // 2)


def batch_window(section: AnswerSettings, judge: Any) -> int:
    """Cases kept in progress by batch judging (0: the judge calls directly)."""
    return section.judge_batch_window if getattr(judge, "batch", None) is not None else 0


DISPATCH_TURNS = 256
"""Event-loop turns given to the workers' first calls before the estimate: enough for C connections to
open and their requests to be written; idle turns are cheap, so a short run loses next to nothing."""


async def estimate_once_started(running: asyncio.Future[Any], announce: Callable[[], dict[str, Any] | None],
                                turns: int = DISPATCH_TURNS) -> dict[str, Any] | None:
    """``announce()`` (the cost estimate: it renders up to 200 judge prompts, jinja2's import included),
    run in a thread once the event loop has turned ``turns`` times (fewer if ``running`` ends
    first). The run's first calls are then already sent, and the estimate's work fills the wait for
    their replies: in the thread it yields the interpreter to the event loop every few milliseconds
    instead of holding the loop for its whole duration. It only reads the cases (each iteration is a
    fresh one) and renders templates (jinja2 environments are thread-safe)."""
    for _ in range(turns):
        if running.done():
            break
        await asyncio.sleep(0)
    return await asyncio.to_thread(announce)


LARGE_RUN_CASES = 5_000


def _freeze_for_large_run(cases: int) -> tuple[int, int, int] | None:
    """For ``cases`` ≥ ``LARGE_RUN_CASES``: move every object alive now (modules, settings, plans…) out
    of the garbage collector's sight until the run ends (``gc.freeze``), so its full collections scan
    only what the run creates, and collect the young generation every ``GC_YOUNG_THRESHOLD``
    allocations instead of 700 (fewer rescans of the cases in flight). Returns the thresholds to restore (None: nothing changed)."""
    if cases < LARGE_RUN_CASES:
        return None
    previous = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *previous[1:])
    return previous


def _thaw(previous: tuple[int, int, int] | None) -> None:
    """Undo ``_freeze_for_large_run``."""
    if previous is not None:
        gc.set_threshold(*previous)
        gc.unfreeze()


GC_YOUNG_THRESHOLD = 10_000


def _announce(settings: Settings, prepared: Any, judge: Any, target: Any, warnings: list[str],
              simulator: Any = None) -> dict[str, Any] | None:
    """The cost estimate line, then the warnings about redundant samples or repeats (with its figures)."""
    estimate = announce_estimate(settings, prepared, judge, target, simulator=simulator, turn_case=turn_case)
    cold = cold_judged_metrics(settings, prepared) if judge is not None and settings.judge_samples > 1 else []
    for text in upfront_warnings(settings, target.kind, judge is not None, estimate, cold):
        _warn(text, warnings)
    return estimate


def cold_judged_metrics(settings: Settings, prepared: Any, sample: int = 200) -> list[str]:
    """The judged metrics planned for (the first ``sample``) cases that run at temperature 0."""
    temperatures = metric_temperatures(settings)
    planned = {metric.name for case in itertools.islice(prepared.cases, sample)
               for metric in prepared.plan_for(case).metrics}
    return sorted(name for name in planned & set(METRIC_TEMPLATES)
                  if temperatures.get(name, settings.judge_temperature) == 0)


def _warn(text: str, warnings: list[str]) -> None:
    """Print a run warning on stderr and keep it for results.json (``metadata.warnings``)."""
    warnings.append(text)
    print(f"evalgate: warning: {text}", file=sys.stderr, flush=True)


async def _close_quietly(target: Any, judge: Any, runtime: Any) -> None:
    """Close the target's and judge's connections, then the run's wire thread; failures are ignored."""
    with contextlib.suppress(Exception):
        await target.aclose()
    if judge is not None and hasattr(judge, "aclose"):
        with contextlib.suppress(Exception):
            await judge.aclose()
    with contextlib.suppress(Exception):
        await runtime.aclose()


SIGNAL_GRACE_SECONDS = 0.5
"""How long calls in flight may still take after SIGINT/SIGTERM before they are cancelled: the process
must be gone within a second of the signal."""


class Interruption:
    """What SIGINT and SIGTERM do to a run, phase by phase (see the module docstring).

    A Python-level handler (``signal.signal``), not the event loop's: the loop's handler only runs when
    the loop gets a turn, which a recorded run's cases (never waiting) and the synchronous dataset checks
    do not give it. The handler runs in the main thread between two bytecodes and records the signal in
    ``Interrupt.received`` (``requested`` turns true for the engine's workers). In ``preparing`` it
    raises ``RunInterrupted`` right there (or, inside an import, leaves it to the dataset reader's next
    ``Interrupt.check()``); in the other phases it wakes the loop with ``call_soon_threadsafe``, which sets
    ``stop`` and, while ``waiting``, cancels the run's task."""

    def __init__(self, stop: asyncio.Event) -> None:
        self.stop = stop
        self.received = Interrupt.received
        self.phase = "starting"
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None

    def requested(self) -> bool:
        """True once a signal arrived (what the engine reads before each case)."""
        return bool(self.received)

    def enter(self, phase: str) -> None:
        if phase in ("preparing", "waiting"):  # a signal that came between two phases
            Interrupt.check()
        self.phase = phase

    def install(self) -> dict[int, Any]:
        """Handle SIGINT and SIGTERM until ``Interrupt.restore``; returns the handlers replaced (none when
        not in the main thread, where signals cannot be handled)."""
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        installed: dict[int, Any] = {}
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                installed[sig] = signal.signal(sig, self._handle)
            except (ValueError, OSError):  # not the main thread
                break
        return installed

    def _handle(self, signum: int, frame: Any) -> None:
        self.received.append(signal.Signals(signum).name)
        if self.phase in ("starting", "preparing"):
            if not Interrupt.importing(frame):
                Interrupt.check()
            return
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        self.stop.set()
        if self.phase == "waiting" and self._task is not None:
            self._task.cancel()



def simulated_turns(records: Any) -> dict[str, dict[str, Any]]:
    """case id → the user messages and answers of its simulated conversation in the base run (repeat 0), so
    a simulated user replays them while the agent answers as it did (``runner.conversation``)."""
    found: dict[str, dict[str, Any]] = {}
    for record in records or []:
        conversation = record.get("conversation") if isinstance(record, dict) else None
        if not isinstance(conversation, dict) or not conversation.get("simulated") or record.get("repeat"):
            continue
        found[str(record.get("id"))] = {
            "user": conversation.get("user"),
            "turns": [{"input": t.get("input"), "output": t.get("output")}
                      for t in conversation.get("turns") or [] if isinstance(t, dict)]}
    return found
