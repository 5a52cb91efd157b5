"""The async engine: bounded concurrency, streaming sinks, metric outcome states, cancellation."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from evalgate.config.options import MetricOptions
from evalgate.metrics.registry import Metric, MetricContext, MetricSkipped, MetricUnavailable, Score
from evalgate.model import Answer, Case, CaseResult, CaseStatus, MetricStatus, Threshold
from evalgate.runner.engine import CasePlan, Engine
from evalgate.runner.setup import ordered_metrics


class SlowTarget:
    kind = "fake"

    def __init__(self, delay: float = 0.01) -> None:
        self.delay = delay
        self.in_flight = 0
        self.peak = 0
        self.calls = 0

    async def answer(self, case: Case) -> Answer:
        self.calls += 1
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.in_flight -= 1
        if case.id == "boom":
            return Answer(error="HTTP 503 from target")
        return Answer(output=f"answer to {case.input}")

    async def aclose(self) -> None:
        return None

    def describe(self) -> dict[str, object]:
        return {"kind": self.kind}


def make_metric(name: str, fn, *, depends_on: tuple[str, ...] = (), value_range=(0.0, 1.0)) -> Metric:
    return Metric(name=name, fn=fn, direction="higher", default_threshold=None, applies=lambda c: True,
                  kind="deterministic", description="", family="test", value_range=value_range,
                  depends_on=depends_on)


def length_metric(case: Case, answer: Answer, ctx: MetricContext) -> Score:
    return Score(min(1.0, len(answer.output or "") / 20))


async def judged_metric(case: Case, answer: Answer, ctx: MetricContext) -> Score:
    if ctx.judge is None:
        raise MetricSkipped("no judge configured")
    return Score(1.0)


def derived_metric(case: Case, answer: Answer, ctx: MetricContext) -> Score:
    if "length" not in ctx.values:
        raise MetricUnavailable("needs length")
    return Score(ctx.values["length"] / 2)


def broken_metric(case: Case, answer: Answer, ctx: MetricContext) -> Score:
    raise ZeroDivisionError("bug")


def out_of_range(case: Case, answer: Answer, ctx: MetricContext) -> Score:
    return Score(1.5)


class ListSink:
    def __init__(self) -> None:
        self.results: list[CaseResult] = []

    def add(self, result: CaseResult) -> None:
        self.results.append(result)


def cases(n: int) -> list[Case]:
    return [Case(id=f"c{i}", input=f"question {i}", index=i) for i in range(n)]


def engine_for(target, metrics, sink, **kwargs) -> Engine:
    plan = CasePlan(metrics=metrics, options=MetricOptions())
    return Engine(target=target, plan_for=lambda case: plan, thresholds=kwargs.pop("thresholds", {}),
                  sinks=[sink], **kwargs)


def test_concurrency_is_bounded_and_every_case_streams_out() -> None:
    target, sink = SlowTarget(), ListSink()
    engine = engine_for(target, [make_metric("length", length_metric)], sink, concurrency=4)
    stats = asyncio.run(engine.run(cases(40)))
    assert target.peak == 4 and target.calls == 40 and stats.finished_cases == 40
    assert sorted(r.index for r in sink.results) == list(range(40))


def test_metric_outcome_states_and_dependency_order() -> None:
    metrics = ordered_metrics(
        {"length", "judged", "derived", "broken", "range"},
        {
            "derived": make_metric("derived", derived_metric, depends_on=("length",)),
            "length": make_metric("length", length_metric),
            "judged": make_metric("judged", judged_metric),
            "broken": make_metric("broken", broken_metric),
            "range": make_metric("range", out_of_range),
        },
    )
    assert [m.name for m in metrics].index("length") < [m.name for m in metrics].index("derived")
    sink = ListSink()
    engine = engine_for(SlowTarget(0), metrics, sink, thresholds={"length": Threshold(op="min", value=0.5)})
    asyncio.run(engine.run([Case(id="x", input="hi")]))
    result = sink.results[0]
    statuses = {name: m.status for name, m in result.metrics.items()}
    assert statuses == {"broken": MetricStatus.errored, "derived": MetricStatus.passed,
                        "judged": MetricStatus.skipped, "length": MetricStatus.passed,
                        "range": MetricStatus.errored}
    assert result.metrics["broken"].reason == "ZeroDivisionError: bug"
    assert "outside the metric's range" in result.metrics["range"].reason
    assert result.metrics["derived"].value == pytest.approx(result.metrics["length"].value / 2)
    assert result.status is CaseStatus.errored


def test_target_errors_make_errored_cases_and_the_run_goes_on() -> None:
    sink = ListSink()
    engine = engine_for(SlowTarget(0), [make_metric("length", length_metric)], sink)
    asyncio.run(engine.run([Case(id="boom", input="a"), Case(id="ok", input="b", index=1)]))
    by_id = {r.id: r for r in sink.results}
    assert by_id["boom"].status is CaseStatus.errored and by_id["boom"].error == "HTTP 503 from target"
    assert by_id["ok"].status is CaseStatus.passed


def test_stop_event_keeps_finished_results_and_stops_new_work() -> None:
    async def scenario() -> tuple[ListSink, SlowTarget, bool]:
        sink, target, stop = ListSink(), SlowTarget(0.05), asyncio.Event()
        engine = engine_for(target, [make_metric("length", length_metric)], sink, concurrency=2, stop=stop,
                            grace_seconds=1.0)
        task = asyncio.create_task(engine.run(cases(100)))
        await asyncio.sleep(0.18)
        stop.set()
        stats = await task
        return sink, target, stats.cancelled

    sink, target, cancelled = asyncio.run(scenario())
    assert cancelled
    assert 4 <= len(sink.results) <= 12 and target.calls <= 12
    assert all(r.status is CaseStatus.passed for r in sink.results)


class LoggingTarget(SlowTarget):
    def __init__(self, log: list[str]) -> None:
        super().__init__(0.001)
        self.log = log

    async def answer(self, case: Case) -> Answer:
        self.log.append(f"call {case.id}")
        return await super().answer(case)


class LoggingSink:
    def __init__(self, log: list[str], fail_at: str | None = None) -> None:
        self.log, self.fail_at = log, fail_at

    def add(self, result: CaseResult) -> None:
        if result.id == self.fail_at:
            raise OSError(28, "No space left on device")
        self.log.append(f"sink {result.id}")


def test_each_result_reaches_the_sinks_when_its_case_finishes() -> None:
    """With one worker, case k is stored before case k+1's call is made, and every case arrives, in order."""
    log: list[str] = []
    engine = engine_for(LoggingTarget(log), [make_metric("length", length_metric)], LoggingSink(log), concurrency=1)
    stats = asyncio.run(engine.run(cases(4)))
    assert log == ["call c0", "sink c0", "call c1", "sink c1", "call c2", "sink c2", "call c3", "sink c3"]
    assert stats.finished_cases == 4


def test_a_failing_sink_stops_the_run_and_is_raised_after_earlier_results_were_delivered() -> None:
    log: list[str] = []
    target = LoggingTarget(log)
    engine = engine_for(target, [make_metric("length", length_metric)], LoggingSink(log, fail_at="c3"), concurrency=2)
    with pytest.raises(OSError, match="No space left"):
        asyncio.run(engine.run(cases(50)))
    assert sorted(line for line in log if line.startswith("sink")) == ["sink c0", "sink c1", "sink c2"]
    assert target.calls < 10 and engine.stats.finished_cases == 3


class ExecutorTarget(SlowTarget):
    """A target whose calls go through an ``Executor``, like the HTTP and model targets."""

    calls_bounded = True

    def __init__(self, executor) -> None:
        super().__init__(0.005)
        self.executor = executor
        self.cases_in_progress = 0
        self.peak_cases = 0

    async def answer(self, case: Case) -> Answer:
        self.cases_in_progress += 1
        self.peak_cases = max(self.peak_cases, self.cases_in_progress)
        try:
            return await self.executor.call("target", lambda: SlowTarget.answer(self, case), what="fake")
        finally:
            self.cases_in_progress -= 1


def test_spare_workers_wait_for_a_call_slot_so_calls_in_flight_stay_at_concurrency() -> None:
    from evalgate.calls.executor import Executor
    from evalgate.runner.answering import spare_workers

    target, sink = ExecutorTarget(Executor(concurrency=4)), ListSink()
    engine = engine_for(target, [make_metric("length", length_metric)], sink, concurrency=4,
                        spare_workers=spare_workers(4, target))
    stats = asyncio.run(engine.run(cases(60)))
    assert stats.finished_cases == 60 and target.calls == 60
    assert target.peak == 4  # calls in flight: the bound the endpoints see
    assert target.peak_cases == 6  # cases in progress: 4 + max(2, 4 // 2) spare ones, ready to call
    from evalgate.targets.command import CommandTarget
    from evalgate.targets.openai_chat import OpenAIChatTarget
    from evalgate.targets.recorded import RecordedTarget

    assert spare_workers(64, OpenAIChatTarget) == 32 and spare_workers(8, RecordedTarget) == 4
    assert spare_workers(8, CommandTarget) == 0  # a command target's processes are not under the executor
    assert spare_workers(1, target) == 0  # concurrency 1: one case at a time


class InstantTarget(SlowTarget):
    """Answers without ever giving the event loop a turn, like recorded answers."""

    async def answer(self, case: Case) -> Answer:
        self.calls += 1
        return Answer(output=f"answer to {case.input}")


def test_results_of_workers_that_never_wait_do_not_pile_up() -> None:
    """Results must not pile up between answering and the sinks, even when no worker ever waits (recorded
    answers): each is handed over before its worker takes the next case."""
    target = InstantTarget()
    backlog: list[int] = []

    class Backlog:
        def add(self, result: CaseResult) -> None:
            backlog.append(target.calls - (len(backlog) + 1))

    engine = engine_for(target, [make_metric("length", length_metric)], Backlog(), concurrency=4, spare_workers=2)
    stats = asyncio.run(engine.run(cases(2000)))
    assert stats.finished_cases == 2000 and len(backlog) == 2000
    assert max(backlog) == 0


def test_repeats_run_each_case_n_times() -> None:
    sink = ListSink()
    engine = engine_for(SlowTarget(0), [make_metric("length", length_metric)], sink, repeat=3)
    asyncio.run(engine.run(cases(2)))
    assert sorted((r.id, r.repeat) for r in sink.results) == [("c0", 0), ("c0", 1), ("c0", 2),
                                                              ("c1", 0), ("c1", 1), ("c1", 2)]


def test_a_crash_mid_run_leaves_valid_partial_results(tmp_path, monkeypatch) -> None:
    """A bug that escapes the engine (here: a failing sink) still finalises results.json and SQLite."""
    import json
    import sqlite3

    import jsonschema

    from evalgate.cli import main as cli
    from evalgate.store.results_json import SCHEMA_PATH

    calls = {"n": 0}
    original = __import__("evalgate.store.sqlite", fromlist=["SQLiteStore"]).SQLiteStore.add

    def flaky_add(self, result, record_json):
        calls["n"] += 1
        if calls["n"] == 5:
            raise OSError(28, "No space left on device")
        return original(self, result, record_json)

    monkeypatch.setattr("evalgate.store.sqlite.SQLiteStore.add", flaky_add)
    out = tmp_path / "out"
    dataset = str(Path(__file__).resolve().parents[2] / "datasets" / "brand-mentions")
    code = cli.main(["run", "-d", dataset, "-o", str(out), "--concurrency", "1", "--progress", "none"])
    assert code == 1
    document = json.loads((out / "results.json").read_text())
    jsonschema.validate(document, json.loads(SCHEMA_PATH.read_text()))
    assert document["status"] == "crashed" and not document["gate"]["passed"]
    assert 4 <= len(document["results"]) <= 5
    assert any("crashed" in reason for reason in document["gate"]["reasons"])
    conn = sqlite3.connect(out / "results.db")
    assert conn.execute("SELECT status FROM eg_runs").fetchone() == ("crashed",)
