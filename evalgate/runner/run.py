"""One evaluation run from settings to verdict: ``prepare`` (runner.setup) → engine → gate → results
(runner.finish, store). The CLI and the Action both call ``execute``; publishing (PR comment, artifacts)
happens after it returns, outside this package.

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
import signal
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalgate.config.settings import Settings
from evalgate.errors import Interrupt, RunInterrupted, UserError
from evalgate.metrics.registry import judge_dependent
from evalgate.report.progress import FailureCollector
from evalgate.runner.calibrate import attach_calibration
from evalgate.runner.engine import Engine, off_loop
from evalgate.runner.finish import (
    _compared_record,
    attach_comparison,
    attach_gate_policy,
    build_document,
    custom_metrics_metadata,
    new_run_id,
    policy_of,
    run_metadata,
    write_compat_documents,
)
from evalgate.runner.preflight import check_reachable, endpoints_of
from evalgate.runner.redundancy import IdenticalRepeats, upfront_warnings
from evalgate.runner.reuse import add_reuse, restore_base_cache
from evalgate.runner.setup import prepare
from evalgate.safety.redact import redact_mapping, register_environment
from evalgate.store.outdir import OutputLock, clean_stale, spool_path
from evalgate.store.recorder import CaseRecorder
from evalgate.store.results_json import CaseSpool, write_results
from evalgate.store.sqlite import SQLiteStore
from evalgate.verdict.aggregate import RunAggregate
from evalgate.verdict.gate import NO_GATE, Verdict, judge_metric_sets, nothing_gated, run_verdict
from evalgate.verdict.policy import CaseSet
from evalgate.verdict.repeats import RepeatSink, apply_report

if TYPE_CHECKING:
    from evalgate.store.reader import BaselineLookup


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
    from evalgate.calls.costs import add_spend
    from evalgate.calls.runtime import Runtime
    from evalgate.judges.factory import build_judge, build_simulator
    from evalgate.runner.conversation import ConversationOptions
    from evalgate.targets.factory import build_target
    from evalgate.text.tokens import configure as configure_tokenizer
    from evalgate.traces.session import TraceSession

    received = interruption.received
    env = settings.environment  # read once at the edge (config), passed down from here
    register_environment(env)
    configure_tokenizer(env)
    check_output_paths(settings, cwd)
    interruption.enter("preparing")  # plain Python code: a signal unwinds it at once
    prepared = prepare(settings, suite_config, cwd)
    from evalgate.runner.missing import check_answers_recorded

    check_answers_recorded(settings, prepared.cases)  # nothing to score: exit 2 saying how to add answers
    interruption.enter("waiting")  # a signal cancels the wait
    baseline = None
    if settings.baseline_kind != "none":  # the default: nothing to look up or import
        from evalgate.store.reader import resolve_baseline

        # a daemon thread: an interrupted lookup is left behind, never waited for at exit
        baseline = await off_loop(resolve_baseline, settings.baseline, auto=baseline_loader, cwd=cwd)
    before: dict[str, str] = {}
    replay: dict[str, dict[str, Any]] = {}
    if baseline is not None and baseline.document is not None:  # keep only what the comparison reads
        replay = simulated_turns(baseline.document["results"])
        if settings.pairwise:  # and the answers, to ask the judge which is better where one changed
            from evalgate.runner.pairwise import base_outputs

            before = base_outputs(baseline.document["results"])
        records = baseline.document["results"]
        # a baseline file is streamed (store.reader.StoredRecords): slimmed as it is read again, never held
        baseline.document["results"] = records.map(_compared_record) if hasattr(records, "map") else \
            [_compared_record(r) for r in records]
    restored = restore_base_cache(settings, baseline, cwd)
    if restored.notice:
        prepared.notices.extend(restored.notice.splitlines())
    runtime = Runtime.from_settings(settings, stop)
    try:
        from evalgate.runner.missing import not_judged_reason

        not_judged = not_judged_reason(settings)  # a fork's or a bot's pull request: no judge key (skip)
        judging = settings.model_copy(update={"judge_provider": "none"}) if not_judged else settings
        judge = build_judge(judging, runtime, env, base_cache=restored.cache)
        target = build_target(settings, runtime, env)
        conversations = ConversationOptions(
            stop_on_failed_turn=settings.stop_on_failed_turn,
            send_id=target.kind == "http" and settings.target_conversation == "id",
            id_from=settings.target_conversation_id_from,
            simulator=build_simulator(judging, runtime, env, judge), replay=replay)
    except BaseException:
        restored.close()
        raise
    if not_judged:
        prepared.notices.append(f"judged metrics {not_judged}: the rest of the gate decides")  # the comment too
    if getattr(judge, "batch_notice", None):
        prepared.notices.append(str(judge.batch_notice))  # type: ignore[union-attr]
    traces = TraceSession(settings)
    try:
        await check_reachable(endpoints_of(target, judge), settings.connect_timeout_seconds, env)
        Interrupt.check()  # a signal whose wake-up found no wait left to cancel: still nothing written
        from evalgate.runner.calibrate import judge_policy, prove_judges

        # the judge proves itself on controls built from the suite (cached: a rerun costs no call)
        controls = await prove_judges(settings, prepared, judge, cwd or Path.cwd(),
                                      announce=lambda text: print(f"evalgate: {text}", file=sys.stderr, flush=True))
        calibration = judge_policy(settings, prepared, judge, cwd or Path.cwd(), controls)
        prepared.thresholds = calibration.thresholds  # a judged metric whose judge is not proven does not gate
        await traces.start()  # the OTLP receiver (traces: true); a busy port is a UserError
    except BaseException:
        await _close_quietly(target, judge, runtime)
        restored.close()
        raise
    target = traces.wrap(target)  # each case's traceparent, spans and trace summary (traces.traced)
    if traces.notice:
        prepared.notices.append(traces.notice)
    progress = progress_for(len(prepared.cases) * settings.repeat) if progress_for else None
    estimate: dict[str, Any] | None = None
    now = dt.datetime.now(dt.UTC)
    run_id, timestamp = lock.run_id, now.strftime("%Y-%m-%dT%H:%M:%SZ")
    output_dir = settings.output_path
    output_dir.mkdir(parents=True, exist_ok=True)
    clean_stale(output_dir)  # what a killed run left here (the lock is ours: no run is using them)
    results_path = output_dir / "results.json"
    spool = CaseSpool(spool_path(output_dir, run_id))
    store = SQLiteStore(settings.db_path, run_id, timestamp, marker=lock.marker())
    prepared.notices.extend(store.notices)
    recorder = CaseRecorder(spool, store)
    aggregate = RunAggregate(*judge_metric_sets(prepared.metrics, prepared.thresholds, judging=judge is not None),
                             unjudged=judge_dependent(prepared.metrics) if judge is None else ())
    failures = FailureCollector()
    repeats = RepeatSink(aggregate, repeat=settings.repeat, rule=settings.repeat_rule)
    from evalgate.judges.health import HealthTally

    health = HealthTally()
    case_set = CaseSet()
    adaptive = _adaptive_sink(settings, baseline, repeats) if settings.adaptive else None
    sinks: list[Any] = [adaptive or repeats, recorder, failures, health, case_set]
    echo = IdenticalRepeats(settings.repeat)
    if settings.repeat > 1:
        sinks.append(echo)
    if progress is not None:
        sinks.append(progress)
    warnings: list[str] = []
    engine = Engine(
        target=target,
        plan_for=prepared.plan_for,
        thresholds=prepared.thresholds,
        sinks=sinks,
        concurrency=settings.concurrency,
        spare_workers=spare_workers(settings.concurrency, target, batch_window(settings, judge)),
        strict=settings.strict_metrics,
        judge=judge,
        repeat=settings.repeat,
        stop=stop,
        budget_reached=lambda: runtime.ledger.exceeded,
        metrics=prepared.metrics,
        max_answer_chars=settings.max_answer_chars,
        score_seconds=settings.api_timeout_seconds,
        halted=interruption.requested,
        grace_seconds=SIGNAL_GRACE_SECONDS,
        prefetch_judged=getattr(judge, "batch", None) is not None,
        optional=prepared.optional,
        conversations=conversations,
        advisory=calibration.advisory(),
        not_judged=not_judged,
    )
    pairwise: dict[str, Any] | None = None
    interruption.enter("running")  # a signal stops new cases (a flag each worker reads) and wakes the loop
    status = "crashed"
    frozen = _freeze_for_large_run(len(prepared.cases) * settings.repeat)
    try:
        if progress is not None and hasattr(progress, "start"):
            progress.start(runtime.executor)
        running = asyncio.ensure_future(engine.run(adaptive.feed(prepared.cases) if adaptive else prepared.cases))
        estimating = asyncio.ensure_future(estimate_once_started(
            running, lambda: _announce(settings, prepared, judge, target, warnings, conversations.simulator)))
        try:
            stats = await running
            estimate = await estimating
            if estimate is not None and controls:  # the controls were judged before the cases: their bound too
                estimate["controls"] = {"cap_per_metric": settings.controls_max_items,
                                        "items": {name: record["items"] for name, record in sorted(controls.items())}}
        except BaseException:
            estimating.cancel()
            raise
        if adaptive is not None and not stats.cancelled:
            from evalgate.config.budget import parse_budget
            from evalgate.runner.adaptive import run_rounds

            plan = adaptive.plan
            budget = parse_budget(settings.adaptive_budget, len(plan.cases),
                                  sum(1 for c in plan.cases.values() if c.critical))
            await run_rounds(engine, adaptive, budget, lambda: runtime.ledger.spent)
        status = "cancelled" if stats.cancelled else "completed"
        if before and judge is not None and status == "completed":
            from evalgate.runner.pairwise import judge_pairs

            pairwise = await judge_pairs(judge, prepared, spool.iter_records_in_order(), before, settings.concurrency)
    finally:
        interruption.enter("finishing")  # the results are written whatever arrives now (well within 1 s)
        _thaw(frozen)
        if progress is not None and hasattr(progress, "close"):
            progress.close()
        await _close_quietly(target, judge, runtime)
        await traces.close()
        if conversations.simulator is not None:
            with contextlib.suppress(Exception):
                await conversations.simulator.aclose()
        restored.close()
        if adaptive is not None:
            adaptive.finish()
            _excuse_known_flaky(aggregate, adaptive.known_flaky)
        repeats.finish()
        total = len(prepared.cases) * settings.repeat

        def results_for(status: str) -> tuple[dict[str, Any], Verdict]:
            """The results document (and verdict) of the run ended with ``status``."""
            interrupted = status == "cancelled" and (bool(received) or not runtime.ledger.exceeded)
            extra = [f"run {status} before every case finished"] if status != "completed" else []
            extra += calibration.failures_for(aggregate.metrics)
            no_gate = NO_GATE if nothing_gated(aggregate, prepared.thresholds) else None
            if no_gate is not None and no_gate_fails(settings):
                extra.append(f"{no_gate} — no_gate: fail")
            if interrupted:
                by = " and ".join(dict.fromkeys(received)) or "the caller"
                every = engine.stats.finished_cases >= total
                extra[0] = (f"interrupted by {by} as the run was finishing: every case finished, the results "
                            "are marked cancelled" if every else f"interrupted by {by}: run cancelled before "
                            "every case finished")
            if runtime.ledger.exceeded:
                extra.append(f"{runtime.ledger.stop_message()}; the cases in progress finished, "
                             f"{max(0, total - engine.stats.finished_cases)} case(s) not run")
            verdict = run_verdict(aggregate, prepared.thresholds, policy_of(settings), extra, interrupted=interrupted)
            judge_totals = runtime.ledger.roles.get("judge")
            late = echo.warning(target.kind, judge is not None, echo.results,
                                judge_totals.calls if judge_totals is not None else 0)
            if late is not None and status == "completed":
                _warn(late, warnings)
            for said in traces.warnings() if status == "completed" else []:
                _warn(said, warnings)
            metadata = (run_metadata(settings, prepared, target) | runtime.metadata() | traces.describe()
                        | {"estimate": estimate})
            if warnings:
                metadata["warnings"] = list(warnings)
            if judge is not None:
                metadata["judge"] = redact_mapping(judge.metadata())
            if conversations.simulator is not None and conversations.simulator.calls:
                metadata["simulator"] = conversations.simulator.describe()
            if prepared.user_metrics or prepared.used_inline:
                metadata["custom_metrics"] = custom_metrics_metadata(prepared, judge)
            document = build_document(
                run_id=run_id, timestamp=timestamp, status=status, aggregate=aggregate,
                thresholds=prepared.thresholds, verdict=verdict, metadata=metadata, metrics=prepared.metrics,
            )
            attach_calibration(document, calibration, health.report())
            add_spend(document["summary"], runtime.ledger)
            add_reuse(document["summary"], judge)
            apply_report(document, repeats.report())
            if adaptive is not None:
                document["adaptive"] = adaptive.plan.report() | {"budget": settings.adaptive_budget,
                                                                 "known_flaky_critical": adaptive.known_flaky}
            if pairwise is not None:
                document["pairwise"] = pairwise
            regression_reasons = attach_comparison(  # the pairwise sign tests join the comparison's one family
                document, baseline, spool.iter_records_in_order(), settings, pairwise=pairwise,
                pairwise_gated=calibration.pairwise_gated(prepared.thresholds) if pairwise is not None else ())
            policy_reasons, gate_fields = attach_gate_policy(document, baseline, settings, prepared,
                                                             case_set.as_dict(), cwd, pr_labels)
            if regression_reasons or policy_reasons:
                verdict = run_verdict(aggregate, prepared.thresholds, policy_of(settings),
                                      extra + regression_reasons + policy_reasons, interrupted=interrupted)
                document["gate"] = verdict.as_dict()
                attach_calibration(document, calibration, None)
            document["gate"].update(gate_fields)
            if no_gate is not None:
                document["gate"]["no_gate"] = no_gate
            return document, verdict

        if received and status == "completed":  # every case finished, but the run was asked to stop
            status = "cancelled"
        document, verdict = results_for(status)
        write_results(results_path, document, spool, run_id)
        if received and status == "completed":  # the signal came while results.json was being written
            status = "cancelled"
            document, verdict = results_for(status)
            write_results(results_path, document, spool, run_id)
        spool.close()
        store.finish(document)  # a signal from here on leaves the results complete (``RunOutcome.signals``)
        spool.path.unlink(missing_ok=True)
    compat_paths = write_compat_documents(settings, results_path, cwd)
    return RunOutcome(document=document, results_path=results_path, db_path=settings.db_path,
                      verdict=verdict, failures=failures.failures, compat_paths=compat_paths,
                      notices=prepared.notices, signals=list(received))


def no_gate_fails(settings: Settings) -> bool:
    """``no_gate``: ``fail``, or ``auto`` under ``calibration: required``."""
    return settings.no_gate == "fail" or (settings.no_gate == "auto" and settings.calibration == "required")


def _adaptive_sink(settings: Settings, baseline: Any, downstream: Any) -> Any:
    """The ``repeat: adaptive`` sink over ``downstream`` with the base's run outcomes (none without a baseline)."""
    from evalgate.runner.adaptive import AdaptiveSink
    from evalgate.verdict.adaptive import Plan, base_outcomes
    from evalgate.verdict.compare import PASS_RATE_WEIGHT

    records = baseline.document["results"] if baseline is not None and baseline.document is not None else []
    alpha = settings.significance_level
    from evalgate.store.history import flaky_case_ids

    plan = Plan(alpha=alpha, level=PASS_RATE_WEIGHT * alpha, requirement=settings.critical_pass_probability,
                flaky_history=flaky_case_ids(settings.db_path))
    from evalgate.verdict.tolerance import resolve_tolerances

    return AdaptiveSink(downstream, plan, base_outcomes(records), settings.repeat_rule,
                        resolve_tolerances(settings.regression_tolerance))


def _excuse_known_flaky(aggregate: RunAggregate, known: list[str]) -> None:
    """Known flaky critical cases (the base fails them as often) are listed, not gate failures."""
    if not known:
        return
    kept = [f for f in aggregate.critical_failures if f["id"] not in set(known)]
    aggregate.critical_failure_count -= len(aggregate.critical_failures) - len(kept)
    aggregate.critical_failures = kept


def check_output_paths(settings: Settings, cwd: Path | None) -> None:
    """The output directory is a directory and its results.json, if any, a file; ``compat_output`` (seed
    004's ``--output``) must not be one of the files evalgate writes itself."""
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


def batch_window(settings: Settings, judge: Any) -> int:
    """Cases kept in progress by batch judging (0: the judge calls directly)."""
    return settings.judge_batch_window if getattr(judge, "batch", None) is not None else 0


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
    from evalgate.judges.estimate import announce_estimate
    from evalgate.runner.conversation import turn_case

    estimate = announce_estimate(settings, prepared, judge, target, simulator=simulator, turn_case=turn_case)
    cold = cold_judged_metrics(settings, prepared) if judge is not None and settings.judge_samples > 1 else []
    for text in upfront_warnings(settings, target.kind, judge is not None, estimate, cold):
        _warn(text, warnings)
    return estimate


def cold_judged_metrics(settings: Settings, prepared: Any, sample: int = 200) -> list[str]:
    """The judged metrics planned for (the first ``sample``) cases that run at temperature 0."""
    import itertools

    from evalgate.judges.factory import metric_temperatures
    from evalgate.judges.prompts import METRIC_TEMPLATES

    temperatures = metric_temperatures(settings)
    planned = {metric.name for case in itertools.islice(prepared.cases, sample)
               for metric in prepared.plan_for(case).metrics}
    return sorted(name for name in planned & set(METRIC_TEMPLATES)
                  if temperatures.get(name, settings.judge_temperature) == 0)


def _warn(text: str, warnings: list[str]) -> None:
    """Print a run warning on stderr and keep it for results.json (``metadata.warnings``)."""
    import sys

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
