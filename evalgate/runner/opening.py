"""The open stage of a run: the judge and the target built, their endpoints checked, the judge proven on the
suite's controls (``runner.calibrate``) and the trace receiver started, before the first case (``open_run`` →
``Opened``); what was opened is closed again if any of it fails."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalgate.calls.runtime import Runtime
from evalgate.config.settings import Settings
from evalgate.errors import Interrupt
from evalgate.judges.client import JudgeClient
from evalgate.judges.factory import build_judge, build_simulator
from evalgate.runner.baseline import Base
from evalgate.runner.calibrate import JudgePolicy, judge_policy, prove_judges
from evalgate.runner.conversation import ConversationOptions
from evalgate.runner.missing import not_judged_reason
from evalgate.runner.preflight import check_reachable, endpoints_of
from evalgate.runner.reuse import Restored, restore_base_cache
from evalgate.runner.setup import Prepared
from evalgate.targets.factory import build_target
from evalgate.traces.session import TraceSession


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


async def _close_quietly(target: Any, judge: Any, runtime: Any) -> None:
    """Close the target's and judge's connections, then the run's wire thread; failures are ignored."""
    with contextlib.suppress(Exception):
        await target.aclose()
    if judge is not None and hasattr(judge, "aclose"):
        with contextlib.suppress(Exception):
            await judge.aclose()
    with contextlib.suppress(Exception):
        await runtime.aclose()
