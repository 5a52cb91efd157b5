"""The answer stage of a run: the engine that answers and scores each case and streams it to the sinks
(``build_engine``), run over every case with the cost estimate announced once the first calls are sent
(``answer`` → ``Answered``), then the pairwise preferences (``score_pairs``)."""

from __future__ import annotations

import asyncio
import itertools
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from evalgate.config.budget import parse_budget
from evalgate.config.sections import AnswerSettings, JudgeSettings
from evalgate.judges.client import JudgeClient
from evalgate.judges.estimate import announce_estimate
from evalgate.judges.factory import metric_temperatures
from evalgate.judges.prompts import METRIC_TEMPLATES
from evalgate.model import Case
from evalgate.runner.adaptive import AdaptiveSink, run_rounds
from evalgate.runner.baseline import Base
from evalgate.runner.conversation import turn_case
from evalgate.runner.engine import Engine
from evalgate.runner.opening import Opened
from evalgate.runner.pairwise import judge_pairs
from evalgate.runner.redundancy import upfront_warnings
from evalgate.runner.setup import Prepared
from evalgate.store.run_files import RunFiles


def build_engine(section: AnswerSettings, prepared: Prepared, opened: Opened, sinks: list[Any], stop: asyncio.Event,
                 halted: Callable[[], bool]) -> Engine:
    """The engine that answers and scores each case and streams it to ``sinks``; ``halted``: whether a signal
    arrived (read before each case starts)."""
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
        halted=halted,
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


def run_estimate(answering: AnswerSettings, judging: JudgeSettings, prepared: Prepared, opened: Opened,
                 warnings: list[str]) -> dict[str, Any] | None:
    """The cost estimate (``_announce``), with the bound of the controls judged before the cases."""
    estimate = _announce(answering, judging, prepared, opened.judge, opened.target, warnings,
                         opened.conversations.simulator)
    if estimate is not None and opened.controls:
        estimate["controls"] = {"cap_per_metric": judging.controls_max_items,
                                "items": {name: record["items"] for name, record in sorted(opened.controls.items())}}
    return estimate


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


def _announce(answering: AnswerSettings, judging: JudgeSettings, prepared: Any, judge: Any, target: Any,
              warnings: list[str],
              simulator: Any = None) -> dict[str, Any] | None:
    """The cost estimate line, then the warnings about redundant samples or repeats (with its figures)."""
    estimate = announce_estimate(prepared, judge, target, repeat=answering.repeat, samples=judging.judge_samples,
                                 max_cost=answering.max_cost, simulator=simulator, turn_case=turn_case)
    cold = cold_judged_metrics(judging, prepared) if judge is not None and judging.judge_samples > 1 else []
    for text in upfront_warnings(answering, judging, target.kind, judge is not None, estimate, cold):
        warn(text, warnings)
    return estimate


def cold_judged_metrics(judging: JudgeSettings, prepared: Any, sample: int = 200) -> list[str]:
    """The judged metrics planned for (the first ``sample``) cases that run at temperature 0."""
    temperatures = metric_temperatures(judging)
    planned = {metric.name for case in itertools.islice(prepared.cases, sample)
               for metric in prepared.plan_for(case).metrics}
    return sorted(name for name in planned & set(METRIC_TEMPLATES)
                  if temperatures.get(name, judging.judge_temperature) == 0)


def warn(text: str, warnings: list[str]) -> None:
    """Print a run warning on stderr and keep it for results.json (``metadata.warnings``)."""
    warnings.append(text)
    print(f"evalgate: warning: {text}", file=sys.stderr, flush=True)


SIGNAL_GRACE_SECONDS = 0.5
"""How long calls in flight may still take after SIGINT/SIGTERM before they are cancelled: the process
must be gone within a second of the signal."""
