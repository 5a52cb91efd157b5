"""What counts the cases as they finish, besides the recorder (``open_tallies`` → ``Tallies``): the aggregate
(through the repeats' majority or the adaptive plan), the failures for the console, the judge's health, the gate
policy's case facts and identical repeats; ``Tallies.finish`` scores the run once its cases ended."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalgate.config.sections import GateSettings
from evalgate.judges.client import JudgeClient
from evalgate.judges.health import HealthTally
from evalgate.metrics.registry import judge_dependent
from evalgate.report.progress import FailureCollector
from evalgate.runner.adaptive import AdaptiveSink
from evalgate.runner.baseline import Base
from evalgate.runner.redundancy import IdenticalRepeats
from evalgate.runner.setup import Prepared
from evalgate.store.history import flaky_case_ids
from evalgate.store.reader import BaselineLookup
from evalgate.store.recorder import CaseRecorder
from evalgate.verdict.adaptive import Plan, base_outcomes
from evalgate.verdict.aggregate import RunAggregate
from evalgate.verdict.compare import PASS_RATE_WEIGHT
from evalgate.verdict.gate import judge_metric_sets
from evalgate.verdict.policy import CaseSet
from evalgate.verdict.repeats import RepeatSink
from evalgate.verdict.tolerance import resolve_tolerances


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
