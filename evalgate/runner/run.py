"""One evaluation run from settings to verdict, as the pipeline it is (``execute``), one function per stage:

    load and select (``dataset.selected.load_selected``, called by ``runner.setup.prepare``, which plans each
    case) → baseline (``runner.baseline.load_baseline``) → open the target and judge (``runner.opening.open_run``:
    the judge proves itself, ``runner.calibrate``) → answer (``runner.answering.answer``: each case answered and
    scored as it streams through ``runner.engine``) → score (``runner.answering.score_pairs``,
    ``runner.tallies.Tallies.finish``) → decide (``verdict.decide``, in ``runner.results.results_document``) →
    record (``store.run_files``, ``runner.results.record_results``: results.json) → publish (the seed documents,
    ``runner.finish.write_compat_documents``).

Each stage takes the settings section it reads (``config.sections``) where its callees do not need the whole
``Settings``. The CLI and the Action both call ``execute``; publishing the PR comment and artifacts happens
after it returns, outside this package.

SIGINT and SIGTERM are honoured within a second in every phase (``Interruption``), however large the
run: while the datasets are read and checked they unwind at once (nothing was evaluated, no results
are written, exit 130); during the baseline lookup and the pre-flight check they cancel the wait (the
same); while cases run no new case starts — the check is a plain flag read before each case, so a
recorded run whose cases never wait on the event loop stops too —, calls in flight get
``runner.answering.SIGNAL_GRACE_SECONDS`` to finish (then they are cancelled and their cases left out), and the finished
cases are written with status ``cancelled`` (exit 130). A signal that arrives once every case has
finished, until results.json is written, marks the results cancelled too (results.json is then written
again, ≈ 0.1 s for 100k cases); one that arrives after that leaves them complete, and the caller exits
with the verdict's status (``RunOutcome.signals`` names it).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import gc
import signal
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalgate.config import sections
from evalgate.config.settings import Settings
from evalgate.dataset.selected import check_answers_recorded
from evalgate.errors import Interrupt, RunInterrupted
from evalgate.runner.answering import Answered, answer, build_engine, run_estimate, score_pairs
from evalgate.runner.baseline import load_baseline
from evalgate.runner.finish import new_run_id, write_compat_documents
from evalgate.runner.opening import open_run
from evalgate.runner.results import Finishing, record_results, results_document
from evalgate.runner.setup import prepare
from evalgate.runner.tallies import open_tallies
from evalgate.safety.redact import register_environment
from evalgate.store.outdir import OutputLock, check_output_paths
from evalgate.store.reader import BaselineLookup
from evalgate.store.run_files import open_run_files
from evalgate.text.tokens import configure as configure_tokenizer
from evalgate.verdict.gate import Verdict


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
    record = sections.RecordSettings.of(settings)
    check_output_paths(record, cwd)
    interruption.enter("preparing")  # plain Python code: a signal unwinds it at once
    selection = sections.SelectionSettings.of(settings)
    prepared = prepare(selection, suite_config, cwd)  # load and select (dataset.selected), then plan each case
    check_answers_recorded(selection, prepared.cases)  # nothing to score (the default target, no answers): exit 2
    interruption.enter("waiting")  # a signal cancels the wait
    gate, judging = sections.GateSettings.of(settings), sections.JudgeSettings.of(settings)
    answering = sections.AnswerSettings.of(settings)
    base = await load_baseline(gate, baseline_loader, cwd)
    opened = await open_run(settings, prepared, base, stop, cwd)
    progress = progress_for(len(prepared.cases) * settings.repeat) if progress_for else None
    files = open_run_files(record, lock.run_id,
                           dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), lock.marker())
    prepared.notices.extend(files.store.notices)
    tallies = open_tallies(gate, record.db_path, prepared, opened.judge, base, progress)
    engine = build_engine(answering, prepared, opened, tallies.sinks(files.recorder), stop, interruption.requested)
    warnings: list[str] = []
    answered = Answered()
    interruption.enter("running")  # a signal stops new cases (a flag each worker reads) and wakes the loop
    frozen = _freeze_for_large_run(len(prepared.cases) * settings.repeat)
    try:
        if progress is not None and hasattr(progress, "start"):
            progress.start(opened.runtime.executor)
        await answer(engine, prepared.cases, tallies.adaptive, answering, lambda: opened.runtime.ledger.spent,
                     lambda: run_estimate(answering, judging, prepared, opened, warnings), answered)
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
        document, verdict = record_results(files, lambda status: results_document(run, status),
                                           interruption.received, answered.status)
    compat_paths = write_compat_documents(sections.PublishSettings.of(settings), files.results_path, cwd)  # publish
    return RunOutcome(document=document, results_path=files.results_path, db_path=settings.db_path,
                      verdict=verdict, failures=tallies.failures.failures, compat_paths=compat_paths,
                      notices=prepared.notices, signals=list(interruption.received))


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
