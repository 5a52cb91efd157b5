"""Async orchestration: a bounded pool of workers takes cases in dataset order, asks the target,
scores the metrics and hands each ``CaseResult`` to the sinks the moment it is ready.

Memory stays flat: at most ``concurrency`` cases are in flight, and results leave through the sinks
(spool file, SQLite, aggregate, progress) instead of accumulating in a list.

Every answer is bounded and redacted as it arrives (``runner.admit``). An answer of
``LARGE_ANSWER_CHARS`` or more is admitted and scored in a worker thread, each metric within what is
left of ``score_seconds`` for the case (default: the per-call timeout), so one huge answer never holds
the event loop while the other cases' calls wait for their replies: a metric that overruns is errored
("scoring took longer than …") and its thread is abandoned (a daemon thread: it never delays the exit).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from evalgate.calls.costs import BudgetExceeded
from evalgate.calls.executor import CallCancelled
from evalgate.config.settings import DEFAULT_MAX_ANSWER_CHARS
from evalgate.metrics.registry import (
    EMPTY_ANSWER_REASON,
    NO_JUDGE_REASON,
    Metric,
    MetricContext,
    MetricSkipped,
    MetricUnavailable,
    Score,
    all_metrics,
    judge_dependent,
    reads_answer_text,
)
from evalgate.model import (
    Answer,
    Case,
    CaseResult,
    CaseStatus,
    MetricErrored,
    MetricResult,
    MetricStatus,
    Threshold,
    trusted,
)
from evalgate.runner.admit import admit, answer_size
from evalgate.runner.conversation import ConversationOptions, converse
from evalgate.runner.expectations import ExpectationDigests
from evalgate.runner.record import case_record
from evalgate.safety.redact import redact
from evalgate.targets.base import Target, TargetCall, accepts_call
from evalgate.verdict.gate import case_verdict, judge_metric

LARGE_ANSWER_CHARS = 64_000
"""Answers of at least this many characters (text and list items) are admitted and scored off the event
loop: ≈ 30 ms of token counting or mention matching, enough to delay the other cases' calls."""


class Sink(Protocol):
    def add(self, result: CaseResult) -> None: ...


@dataclass
class CasePlan:
    """What to run for one case: its ordered metrics, thresholds and metric options."""

    metrics: list[Metric]
    options: Any
    thresholds: dict[str, Threshold | None] | None = None
    """Per-case thresholds (a case's ``assert:`` entries) over the run's; None stands for "no threshold"."""

    @functools.cached_property
    def names(self) -> tuple[str, ...]:
        return tuple(metric.name for metric in self.metrics)


@dataclass
class EngineStats:
    started: float = field(default_factory=time.monotonic)
    finished_cases: int = 0
    target_errors: int = 0
    cancelled: bool = False


class Engine:
    """Runs cases concurrently and streams results to sinks.

    ``concurrency`` cases are in progress at once, plus ``spare_workers``: when every call the cases make
    goes through the run's ``Executor`` (whose shared semaphore keeps at most ``concurrency`` calls in
    flight), spare cases wait there with their next request ready, so a call slot is refilled the moment
    a reply is read instead of after the case that got it has scored it. The endpoints still never see
    more than ``concurrency`` calls at once (the benchmark checks it at the servers; the gain, which
    matters when scoring takes about as long as a call, is measured in bench/README.md)."""

    def __init__(
        self,
        *,
        target: Target,
        plan_for: Callable[[Case], CasePlan],
        thresholds: dict[str, Threshold],
        sinks: list[Sink],
        concurrency: int = 8,
        spare_workers: int = 0,
        strict: bool = False,
        judge: Any = None,
        repeat: int = 1,
        stop: asyncio.Event | None = None,
        grace_seconds: float = 5.0,
        budget_reached: Callable[[], bool] | None = None,
        metrics: Mapping[str, Metric] | None = None,
        max_answer_chars: int = DEFAULT_MAX_ANSWER_CHARS,
        score_seconds: float = 60.0,
        halted: Callable[[], bool] | None = None,
        prefetch_judged: bool = False,
        optional: Mapping[str | None, frozenset[str]] | None = None,
        conversations: Any = None,
        not_judged: str | None = None,
        advisory: frozenset[str] = frozenset(),
    ) -> None:
        self.target = target
        self.plan_for = plan_for
        self.expectations = ExpectationDigests()
        self.thresholds = thresholds
        self.sinks = sinks
        self.concurrency = concurrency
        self.spare_workers = spare_workers
        self.judge = judge
        self.repeat = repeat
        self.stop = stop or asyncio.Event()
        self.grace_seconds = grace_seconds
        self.max_answer_chars = max_answer_chars
        self.score_seconds = score_seconds
        self.live = getattr(target, "kind", "recorded") != "recorded"
        self.conversations: ConversationOptions | None = conversations
        """``runner.conversation.ConversationOptions`` for conversation cases (None: the defaults)."""
        self.takes_call = accepts_call(target)
        """Whether the target's ``answer`` takes the ``TargetCall`` (``targets.base``)."""
        self.prefetch_judged = prefetch_judged
        """Start a case's async (judged) metrics at once instead of one after another (batch judging: every
        judge request of the case joins the same batch); each result is still taken in plan order."""
        self._set_stopping(halted, budget_reached)
        self._set_gating(strict=strict, judge=judge, metrics=metrics, optional=optional, not_judged=not_judged,
                         advisory=advisory)
        self.stats = EngineStats()
        self._sink_error: BaseException | None = None
        self._workers: list[asyncio.Task[None]] = []

    def _set_stopping(self, halted: Callable[[], bool] | None, budget_reached: Callable[[], bool] | None) -> None:
        """What ends the run early: an interruption (``halted``) or ``max_cost`` (``budget_reached``)."""
        self.halted = halted
        """True once the run was interrupted (a signal): read before each case, because a worker whose
        cases never wait (recorded answers) gives the loop no turn in which ``stop`` could be set."""
        self.budget_reached = budget_reached
        """True once ``max_cost`` refused a call (``CostLedger.exceeded``): the engine then drains."""
        self.draining = False
        """Set when ``max_cost`` stops the run: no new case starts, the cases in progress finish and are recorded."""

    def _set_gating(self, *, strict: bool, judge: Any, metrics: Mapping[str, Metric] | None,
                    optional: Mapping[str | None, frozenset[str]] | None, not_judged: str | None,
                    advisory: frozenset[str]) -> None:
        """What a case's verdict depends on besides its metric results (``verdict``)."""
        self.strict = strict
        self.not_judged = not_judged
        """Why the run has no judge although one is configured (``runner.missing``): judged metrics skipped
        for want of a judge carry it as their reason, and a case only they could decide is ``skipped``."""
        self.advisory = advisory
        """Judged metrics whose judge may not gate: their values are recorded ``advisory`` (``passed`` null)."""
        self.evidence = judge_dependent(metrics or all_metrics()) if judge is not None else frozenset()
        """Metrics whose value needs a judge verdict: gated on a case, they error it without one
        (``verdict.gate.case_verdict``)."""
        self.optional = dict(optional or {})
        """``optional_metrics`` by suite (None: every suite's): gated metrics a case may lack a value for."""
        self.needs_judge = judge_dependent(metrics or all_metrics())

    async def run(self, cases: Iterable[Case], items: Iterable[tuple[Case, int]] | None = None) -> EngineStats:
        """Evaluate ``cases`` with ``concurrency`` workers; every finished case reaches the sinks (also when
        the run is stopped or a worker fails), then a sink's failure, if any, is raised. ``items`` (case,
        repeat index) replaces the cases × ``repeat`` work (the re-trials of ``repeat: adaptive``)."""
        work = self._work_items(cases) if items is None else iter(items)
        count = self.concurrency + self.spare_workers
        workers = self._workers = [asyncio.create_task(self._worker(work)) for _ in range(count)]
        stopper = asyncio.create_task(self.stop.wait())
        pending: set[asyncio.Task[Any]] = set(workers)
        try:
            while pending:
                done, pending = await asyncio.wait(pending | {stopper}, return_when=asyncio.FIRST_COMPLETED)
                pending.discard(stopper)
                for task in done:
                    if task is not stopper and not task.cancelled() and task.exception() is not None:
                        stopper.cancel()
                        for other in pending:
                            other.cancel()
                        raise task.exception()  # type: ignore[misc]
                if stopper in done and pending and self._sink_error is None:
                    self.stats.cancelled = True
                    _, still = await asyncio.wait(pending, timeout=self.grace_seconds)
                    for task in still:
                        task.cancel()
                    await asyncio.gather(*still, return_exceptions=True)
                    break
        finally:
            stopper.cancel()
        if self._sink_error is not None:
            raise self._sink_error
        if self.stop.is_set():
            self.stats.cancelled = True
        return self.stats

    @staticmethod
    def _work_items_for(cases: Iterable[Case], repeat: int) -> Iterator[tuple[Case, int]]:
        for case in cases:
            for index in range(repeat):
                yield case, index

    def _work_items(self, cases: Iterable[Case]) -> Iterator[tuple[Case, int]]:
        return self._work_items_for(cases, self.repeat)

    async def _worker(self, work: Iterator[tuple[Case, int]]) -> None:
        halted = self.halted
        while not self.stop.is_set() and not self.draining:
            if halted is not None and halted():  # interrupted: no new case
                self.stats.cancelled = True
                self.stop.set()
                return
            try:
                case, repeat = next(work)
            except StopIteration:
                return
            try:
                result = await self.evaluate(case, repeat)
            except BudgetExceeded:  # the case's first paid call did not fit: nothing of it was paid, drop it;
                self.draining = True  # the other cases in progress finish (their calls are paid for)
                self.stats.cancelled = True
                return
            except CallCancelled:  # the run is stopping (signal): drop the unfinished case
                self.stop.set()
                self.stats.cancelled = True
                return
            self._deliver(result)
            if self._sink_error is not None:
                return
            if self.budget_reached is not None and self.budget_reached():
                self.draining = True
                self.stats.cancelled = True

    def _deliver(self, result: CaseResult) -> None:
        """Hand ``result`` to every sink as soon as its case finished. A sink that raises stops the run:
        the error is kept for ``run`` to raise and the workers are cancelled (their unfinished cases were
        never recorded)."""
        if self._sink_error is not None:
            return
        try:
            for sink in self.sinks:
                sink.add(result)
        except BaseException as exc:
            self._sink_error = exc
            current = asyncio.current_task()
            for worker in self._workers:
                if worker is not current:
                    worker.cancel()
            return
        self.stats.finished_cases += 1

    async def evaluate(self, case: Case, repeat: int = 0) -> CaseResult:
        """Answer and score one case; never raises for target or metric failures. ``latency_ms`` is the
        target's own measurement of its successful call (None when it has none): timing the await here
        would add the wait for a call slot and every other case's work on this loop. A conversation case
        is run turn by turn (``runner.conversation``)."""
        if case.turns is not None or case.simulated_user is not None:
            return await converse(self, case, repeat)
        answer = await self.call_target(case, TargetCall(case.id, repeat))
        if answer.error:
            self.stats.target_errors += 1
            return self.record(case, answer, {}, repeat)
        answer, metrics = await self.score(case, answer, repeat)
        return self.record(case, answer, metrics, repeat)

    async def score(self, case: Case, answer: Answer, repeat: int = 0, memo: dict[str, Any] | None = None,
                    history: list[dict[str, str]] | None = None) -> tuple[Answer, dict[str, MetricResult]]:
        """``answer`` admitted (bounded, redacted) and its metrics for ``case``; an answer cut to
        ``max_answer_chars`` comes back with its error and no metrics. ``memo`` pre-fills the metrics'
        shared scratch space (a conversation's turn outcomes); ``history``: a conversation turn's messages
        before this answer, which with the admitted answer become its ``transcript``."""
        size = answer_size(answer)
        large = size >= LARGE_ANSWER_CHARS
        if large:
            answer = await off_loop(admit, answer, limit=self.max_answer_chars, live=self.live, size=size)
        else:
            answer = admit(answer, limit=self.max_answer_chars, live=self.live, size=size)
        if answer.error:  # cut to max_answer_chars: kept for the record, never scored
            return answer, {}
        if history is not None:
            answer = answer.model_copy(update={"transcript": [*history, {"role": "assistant",
                                                                         "content": answer.output or ""}]})
        plan = self.plan_for(case)
        ctx = MetricContext(options=plan.options, judge=self.judge, repeat=repeat, thresholds=plan.thresholds,
                            planned=plan.names)
        if memo:
            ctx.memo.update(memo)
        if large:
            return answer, await self._score_off_loop(case, answer, plan, ctx, size)
        output = answer.output
        empty = type(output) is str and not case.expect_empty and (not output or output.isspace())
        metrics: dict[str, MetricResult] = {}
        started = self._prefetch(plan, case, answer, ctx) if self.prefetch_judged and not empty else {}
        try:
            for metric in plan.metrics:
                if empty and (missing := self._empty(metric, ctx)) is not None:
                    metrics[metric.name] = missing
                    continue
                if metric.name in started:
                    metrics[metric.name] = await started[metric.name]
                    continue
                outcome = self._score_now(metric, case, answer, ctx)
                if type(outcome) is not MetricResult:  # an async metric (a judge): finish it
                    outcome = await self._score_later(metric, outcome, ctx)
                metrics[metric.name] = outcome
        finally:
            for task in started.values():
                task.cancel()
        return answer, metrics

    def _empty(self, metric: Metric, ctx: MetricContext) -> MetricResult | None:
        """On an empty (or whitespace) answer the case does not expect: ``unavailable`` for a metric that
        scores the answer text (missing evidence: never sent to a judge, never passed by a rule such as
        ``not_contains``), None for the others (scored as usual; a judged one without a judge is skipped)."""
        if not reads_answer_text(metric) or (metric.uses_judge and self.judge is None):
            return None
        return MetricResult(status=MetricStatus.unavailable, reason=EMPTY_ANSWER_REASON,
                            threshold=self._threshold(metric.name, ctx))

    async def call_target(self, case: Case, call: TargetCall) -> Answer:
        """The target's answer for ``case`` (one call, described by ``call``); a target that raises
        gives an error answer."""
        try:
            if self.takes_call:
                return await self.target.answer(case, call)
            return await self.target.answer(case)
        except Exception as exc:  # a target must not raise, but a bug in one must not kill the run
            return Answer(error=f"target failed: {type(exc).__name__}: {exc}")

    def _prefetch(self, plan: CasePlan, case: Case, answer: Answer, ctx: MetricContext
                  ) -> dict[str, asyncio.Task[MetricResult]]:
        """The case's async metrics, started now (``prefetch_judged``)."""
        return {metric.name: asyncio.ensure_future(self._score_later(metric, metric.fn(case, answer, ctx), ctx))
                for metric in plan.metrics if inspect.iscoroutinefunction(metric.fn)}

    async def _score_off_loop(self, case: Case, answer: Answer, plan: CasePlan, ctx: MetricContext,
                              size: int) -> dict[str, MetricResult]:
        """Score a large answer: each metric's synchronous work in a worker thread, all of them within
        ``score_seconds``; a metric still running then, and those after it, are errored."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.score_seconds
        metrics: dict[str, MetricResult] = {}
        for metric in plan.metrics:
            remaining = deadline - loop.time()
            if remaining <= 0:
                metrics[metric.name] = MetricResult(
                    status=MetricStatus.errored, threshold=self._threshold(metric.name, ctx),
                    reason=f"not scored: the case's {self.score_seconds:g}s for scoring a {size:,}-character "
                           "answer ran out")
                continue
            try:
                outcome = await asyncio.wait_for(off_loop(self._score_now, metric, case, answer, ctx), remaining)
            except TimeoutError:
                outcome = MetricResult(
                    status=MetricStatus.errored, threshold=self._threshold(metric.name, ctx),
                    reason=f"scoring took longer than {self.score_seconds:g}s on a {size:,}-character answer")
                deadline = loop.time()  # the thread may still run: score nothing else beside it
            if type(outcome) is not MetricResult:  # an async metric (a judge): finish it on the loop
                outcome = await self._score_later(metric, outcome, ctx)
            metrics[metric.name] = outcome
        return metrics

    def _score_now(self, metric: Metric, case: Case, answer: Answer, ctx: MetricContext) -> MetricResult | Any:
        """The metric's result, or the awaitable an async metric returned (no coroutine of our own for
        the synchronous metrics: most of them)."""
        try:
            score = metric.fn(case, answer, ctx)
            if type(score) is not Score and inspect.isawaitable(score):
                return score
        except Exception as exc:
            return self._failed(metric, exc, ctx)
        return self._judged(metric, score, ctx)

    async def _score_later(self, metric: Metric, pending: Any, ctx: MetricContext) -> MetricResult:
        try:
            score = await pending
        except Exception as exc:
            return self._failed(metric, exc, ctx)
        return self._judged(metric, score, ctx)

    def _threshold(self, name: str, ctx: MetricContext) -> Threshold | None:
        """The case's own threshold for ``name`` when its plan sets one, else the run's."""
        own = ctx.thresholds
        if own is not None and name in own:
            return own[name]
        return self.thresholds.get(name)

    def _failed(self, metric: Metric, exc: Exception, ctx: MetricContext) -> MetricResult:
        """The result of a metric that raised: skipped, unavailable or errored (a ``MetricErrored``'s
        message is the reason as it stands)."""
        threshold = self._threshold(metric.name, ctx)
        if isinstance(exc, MetricSkipped):
            reason = str(exc)
            if self.not_judged and reason == NO_JUDGE_REASON:
                reason = self.not_judged
            return _skipped(reason, threshold)
        if isinstance(exc, MetricUnavailable):
            return MetricResult(
                status=MetricStatus.unavailable,
                reason=redact(str(exc)),
                details=exc.details,
                threshold=threshold,
            )
        reason = str(exc) if isinstance(exc, MetricErrored) else f"{type(exc).__name__}: {exc}"
        return MetricResult(status=MetricStatus.errored, reason=redact(reason), threshold=threshold)

    def _judged(self, metric: Metric, score: Score, ctx: MetricContext) -> MetricResult:
        """A computed score: errored when outside the metric's range, else against its threshold."""
        value = float(score.value)
        low, high = metric.value_range or (-math.inf, math.inf)
        if not math.isfinite(value) or not low <= value <= high:
            return MetricResult(
                status=MetricStatus.errored,
                reason=f"value {value!r} outside the metric's range [{low:g}, {high:g}]",
                details=score.details,
            )
        ctx.values[metric.name] = value
        return judge_metric(value, self._threshold(metric.name, ctx), score.details,
                            advisory=metric.name in self.advisory)

    def verdict(self, metrics: dict[str, MetricResult], error: str | None = None,
                suite: str | None = None) -> tuple[CaseStatus, list[str]]:
        """The case (or turn) status and reasons of ``metrics`` (``verdict.gate.case_verdict``); ``suite`` picks
        its ``optional_metrics`` (None: evalgate.yaml's)."""
        optional = self.optional.get(suite, self.optional.get(None, frozenset()))
        return case_verdict(metrics, error=error, strict=self.strict, evidence=self.evidence,
                            optional=optional, needs_judge=self.needs_judge, not_judged=self.not_judged)

    def _expectation(self, case: Case) -> str:
        """The case's expectation digest (``runner.expectations``); a plan that cannot be made (a check's
        ``applies`` raising, already reported where the case was scored) counts as no plan."""
        try:
            plan = self.plan_for(case)
        except Exception:
            plan = None
        return self.expectations.digest(case, plan)

    def record(self, case: Case, answer: Answer, metrics: dict[str, MetricResult], repeat: int,
               conversation: dict[str, Any] | None = None) -> CaseResult:
        """The case's record (``runner.record.case_record``) with its verdict and expectation digest."""
        status, reasons = self.verdict(metrics, answer.error, case.suite)
        return case_record(case, answer, metrics, repeat, status=status, reasons=reasons,
                           expectation=self._expectation(case), conversation=conversation)


def off_loop(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> asyncio.Future[Any]:
    """``fn(*args, **kwargs)`` in a new daemon thread; the returned future (of the running loop) gets its
    result or exception. Unlike an executor's worker, an abandoned thread never delays the process's exit."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(outcome: Any, failed: bool) -> None:
        if future.done():
            return
        if failed:
            future.set_exception(outcome)
        else:
            future.set_result(outcome)

    def work() -> None:
        try:
            outcome, failed = fn(*args, **kwargs), False
        except BaseException as exc:
            outcome, failed = exc, True
        if not loop.is_closed():
            loop.call_soon_threadsafe(settle, outcome, failed)

    threading.Thread(target=work, name="evalgate-score", daemon=True).start()
    return future


def _skipped(reason: str, threshold: Threshold | None) -> MetricResult:
    """``MetricResult(status=skipped, reason=…, threshold=…)`` without re-validating its inputs."""
    values: dict[str, Any] = {"value": None, "threshold": threshold, "passed": None,
                              "status": MetricStatus.skipped, "reason": reason, "details": {}}
    if threshold is None or type(threshold) is Threshold:
        return trusted(MetricResult, values, {"status", "reason", "threshold"})
    return MetricResult(status=MetricStatus.skipped, reason=reason, threshold=threshold)
