"""Repeats: collapsing a case's repeats into one verdict, the streaming sink (bounded, totals count
cases), flaky cases, bootstrap intervals over cases, judge-sample stability, and a whole run with a
command target that answers differently on each repeat."""

from __future__ import annotations

import asyncio
import json
import math
import statistics
import sys
import textwrap
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from evalgate.config.options import MetricOptions
from evalgate.config.settings import Settings
from evalgate.metrics.registry import all_metrics
from evalgate.model import Answer, Case, CaseStatus, MetricStatus, Threshold
from evalgate.runner.engine import CasePlan, Engine
from evalgate.store.results_json import SCHEMA_PATH
from evalgate.verdict import stats
from evalgate.verdict.aggregate import RunAggregate
from evalgate.verdict.repeats import RepeatSink, apply_report, case_status, collapse_repeats, summarise_case
from tests.support.repeats import Counting, E, F, P, S, metric, result

# ── collapsing ────────────────────────────────────────────────────────────────────────────────


def test_collapse_majority_flaky_case_means_and_sums() -> None:
    repeats = [
        result("a", 0, P, metrics={"f1": metric(1.0)}, tokens=10, latency=100.0, cost=0.01),
        result("a", 2, P, metrics={"f1": metric(0.95)}, tokens=30, latency=300.0, cost=0.03),
        result("a", 1, F, metrics={"f1": metric(0.5)}, tokens=20, latency=200.0),
    ]
    collapsed = collapse_repeats(repeats)
    assert collapsed.status is P and collapsed.passed and collapsed.reasons == [] and collapsed.error is None
    assert collapsed.metrics["f1"].value == pytest.approx((1.0 + 0.95 + 0.5) / 3)
    assert collapsed.metrics["f1"].status is MetricStatus.passed  # 2 of 3 repeats met the threshold
    assert collapsed.metrics["f1"].details["repeats"]["stdev"] == pytest.approx(statistics.stdev([1.0, 0.5, 0.95]), abs=1e-6)
    assert (collapsed.num_tokens, collapsed.latency_ms, collapsed.cost_usd) == (60, 200.0, pytest.approx(0.04))
    summary = summarise_case(repeats, "majority")
    assert summary.flaky and summary.passes == 2 and summary.outcomes == ("passed", "failed", "passed")
    assert summary.pass_fraction == pytest.approx(2 / 3)


def test_a_tie_fails_under_majority_and_names_a_failing_repeat() -> None:
    collapsed = collapse_repeats([result("b", 0, P), result("b", 1, F)])
    assert collapsed.status is F and not collapsed.passed
    assert collapsed.reasons == ["passed 1 of 2 repeats (majority rule)", "repeat 1: b r1 failed"]


@pytest.mark.parametrize(("statuses", "rule", "expected"), [
    ((P, F, P), "majority", P), ((P, F, P), "all", F), ((F, F, P), "any", P), ((F, F, P), "majority", F),
    ((E, E, F), "majority", F), ((E, E, P), "majority", E), ((S, P, P), "all", P), ((S, S, S), "majority", S),
    ((S, F, P), "majority", F),
])
def test_case_status_rules(statuses: tuple[CaseStatus, ...], rule: stats.RepeatRule, expected: CaseStatus) -> None:
    assert case_status(statuses, rule) is expected


def test_a_metric_without_values_keeps_its_most_severe_status() -> None:
    repeats = [result("c", 0, E, metrics={"judge": metric(None, MetricStatus.unavailable)}),
               result("c", 1, E, metrics={"judge": metric(None, MetricStatus.errored)})]
    collapsed = collapse_repeats(repeats)
    assert collapsed.status is E and collapsed.error == "target failed: boom"
    assert collapsed.metrics["judge"].status is MetricStatus.errored and collapsed.metrics["judge"].value is None


# ── the sink ──────────────────────────────────────────────────────────────────────────────────


def test_sink_counts_cases_not_repeats_and_holds_only_pending_cases() -> None:
    aggregate = RunAggregate()
    sink = RepeatSink(aggregate, repeat=3)
    plan = {i: [P, F, P] if i % 4 == 0 else [P, P, P] for i in range(40)}
    most_pending = 0
    window = 4  # like an engine with concurrency 4: repeats of nearby cases interleave
    order = [(i, r) for i in range(40) for r in range(3)]
    order = [item for start in range(0, len(order), window) for item in reversed(order[start:start + window])]
    for i, r in order:
        sink.add(result(f"case{i}", r, plan[i][r], index=i, metrics={"f1": metric(1.0 if plan[i][r] is P else 0.5)}))
        most_pending = max(most_pending, len(sink.pending))
    sink.finish()
    assert most_pending <= window
    assert aggregate.total_test_cases == 40 and aggregate.total_passed == 40 and aggregate.total_failed == 0
    assert aggregate.metrics["f1"].count == 40
    report = sink.report()
    assert report["summary"]["repeats"] == {"repeat": 3, "rule": "majority", "cases": 40, "incomplete_cases": 0,
                                            "flaky_cases": 10, "flaky_listed": 10}
    assert [f["id"] for f in report["flaky"]] == [f"case{i}" for i in range(0, 40, 4)]


def test_finish_forwards_cases_whose_repeats_did_not_all_run() -> None:
    downstream = Counting()
    sink = RepeatSink(downstream, repeat=3)
    for r in range(3):
        sink.add(result("done", r, P, index=0))
    sink.add(result("cut", 0, F, index=1))
    sink.add(result("cut", 1, F, index=1))
    assert [r.id for r in downstream.results] == ["done"]
    sink.finish()
    assert [(r.id, r.status) for r in downstream.results] == [("done", P), ("cut", F)]
    assert sink.report()["summary"]["repeats"]["incomplete_cases"] == 1 and not sink.pending


def test_flaky_list_is_capped_keeping_the_riskiest() -> None:
    sink = RepeatSink(Counting(), repeat=2, rule="any", flaky_limit=3)
    risks = ["low", "medium", "critical", "medium", "high", "critical", "low"]
    for i, risk in enumerate(risks):
        sink.add(result(f"k{i}", 0, P, index=i, risk=risk))
        sink.add(result(f"k{i}", 1, F, index=i, risk=risk))
    report = sink.report()
    assert report["summary"]["repeats"]["flaky_cases"] == 7
    assert [(f["id"], f["risk_level"]) for f in report["flaky"]] == [("k2", "critical"), ("k5", "critical"),
                                                                      ("k4", "high")]
    assert report["flaky"][0]["outcomes"] == ["passed", "failed"]
    assert report["flaky"][0]["status"] == "failed"  # critical: pass^k, every repeat must pass whatever the rule
    assert report["flaky"][2]["status"] == "passed"  # high risk: rule "any"


def test_confidence_intervals_bootstrap_the_per_case_means() -> None:
    sink = RepeatSink(Counting(), repeat=2)
    values = {i: (0.5 + 0.04 * i, 0.6 + 0.03 * i) for i in range(12)}
    for i, pair in values.items():
        for r, value in enumerate(pair):
            sink.add(result(f"m{i}", r, P if value >= 0.9 else F, index=i, metrics={"f1": metric(value)}))
    intervals = sink.report()["summary"]["confidence_intervals"]
    means = [sum(pair) / 2 for pair in values.values()]
    mean, low, high = stats.bca_mean_ci(means)  # type: ignore[misc]
    row = intervals["metrics"]["f1"]
    assert (row["mean"], row["low"], row["high"], row["cases"]) == (round(mean, 6), round(low, 6), round(high, 6), 12)
    assert low < mean < high
    assert row["within_case_stdev"] == pytest.approx(statistics.fmean(statistics.stdev(p) for p in values.values()),
                                                     abs=1e-6)
    verdicts = [1.0 if statistics.fmean([p >= 0.9 for p in pair]) > 0.5 else 0.0 for pair in values.values()]
    expected = stats.wilson_interval(int(sum(verdicts)), len(verdicts))
    assert expected is not None and intervals["pass_rate"]["mean"] == round(expected[0], 6)
    assert (intervals["pass_rate"]["low"], intervals["pass_rate"]["high"]) == (round(expected[1], 6),
                                                                              round(expected[2], 6))
    assert intervals["pass_rate"]["method"] == "Wilson" and row["method"] == "BCa bootstrap"
    assert intervals["confidence"] == 0.95 and intervals["resamples"] == stats.DEFAULT_RESAMPLES
    assert sink.confidence_intervals() == sink.confidence_intervals()  # fixed seed


def test_single_runs_pass_straight_through_without_intervals() -> None:
    downstream = Counting()
    sink = RepeatSink(downstream)
    first = result("only", 0, F)
    sink.add(first)
    assert downstream.results == [first]
    assert sink.report() == {"summary": {}}


def test_judge_sample_stability() -> None:
    sink = RepeatSink(Counting())
    samples = [[0.8, 1.0, 0.9], [0.95, 0.95, 0.95], [0.2, 0.4, 0.3]]
    for i, values in enumerate(samples):
        judged = metric(statistics.fmean(values), samples=[{"faithfulness": v, "other": 0.0} for v in values])
        sink.add(result(f"j{i}", 0, P, index=i, metrics={"faithfulness": judged, "plain": metric(1.0)}))
    stability = sink.report()["summary"]["judge_stability"]
    assert list(stability) == ["faithfulness"]
    row = stability["faithfulness"]
    spreads = [statistics.stdev(v) for v in samples]
    assert row["samples"] == 3 and row["answers"] == 3
    assert row["mean_stdev"] == pytest.approx(statistics.fmean(spreads), abs=1e-6)
    assert row["max_stdev"] == pytest.approx(max(spreads), abs=1e-6)
    assert row["straddling_threshold"] == 1  # only [0.8, 1.0, 0.9] has samples on both sides of 0.9


def test_apply_report_adds_summary_keys_and_flaky() -> None:
    document: dict[str, Any] = {"summary": {"pass_rate": 1.0}}
    apply_report(document, {"summary": {"repeats": {"repeat": 2}}, "flaky": [{"id": "x"}]})
    assert document == {"summary": {"pass_rate": 1.0, "repeats": {"repeat": 2}}, "flaky": [{"id": "x"}]}


# ── with the engine ───────────────────────────────────────────────────────────────────────────


class AlternatingTarget:
    """Answers case ``wobbly`` correctly on even calls only; every other case always correctly."""

    kind = "test"

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}

    async def answer(self, case: Case) -> Answer:
        count = self.calls.get(case.id, 0)
        self.calls[case.id] = count + 1
        good = case.id != "wobbly" or count % 2 == 0
        return Answer(output="Hold him and check the official report." if good else "Drop him now.")

    async def aclose(self) -> None:
        return None


def test_engine_repeats_reach_the_sink_and_the_aggregate() -> None:
    cases = [Case.model_validate({"id": name, "input": "Drop him?", "risk_level": risk,
                                  "rules": [{"type": "regex", "value": "\\bhold\\b"}]})
             for name, risk in (("steady", "medium"), ("wobbly", "critical"), ("steady2", "low"))]
    for index, case in enumerate(cases):
        vars(case)["index"] = index
    metrics = all_metrics()
    plan = CasePlan(metrics=[metrics["rules"]], options=MetricOptions())
    aggregate = RunAggregate()
    sink = RepeatSink(aggregate, repeat=3)
    target = AlternatingTarget()
    engine = Engine(target=target, plan_for=lambda case: plan, thresholds={"rules": Threshold(op="min", value=1.0)},
                    sinks=[sink], concurrency=1, repeat=3)
    asyncio.run(engine.run(cases))
    sink.finish()
    assert target.calls == {"steady": 3, "wobbly": 3, "steady2": 3}
    # wobbly passes 2 of 3: enough for the majority rule, not for a critical case (pass^3)
    assert aggregate.total_test_cases == 3 and aggregate.total_passed == 2
    assert [f["id"] for f in aggregate.critical_failures] == ["wobbly"]
    flaky = sink.report()["flaky"]
    assert [(f["id"], f["outcomes"], f["passes"]) for f in flaky] == [("wobbly", ["passed", "failed", "passed"], 2)]


FLIP_SCRIPT = """
import json, os, sys
case = json.load(sys.stdin)
folder = sys.argv[1]
attempt = 0
while True:
    try:
        os.close(os.open(os.path.join(folder, f"{case['id']}.{attempt}"), os.O_CREAT | os.O_EXCL))
        break
    except FileExistsError:
        attempt += 1
good = case["id"] != "wobbly" or attempt != 1
print(json.dumps({"output": "Hold him; check the official report." if good else "Drop him now."}))
"""


def test_a_whole_run_with_repeats_counts_cases_and_lists_the_flaky_one(tmp_path: Path) -> None:
    from evalgate.runner.run import execute

    (tmp_path / "flip.py").write_text(FLIP_SCRIPT)
    (tmp_path / "calls").mkdir()
    dataset = tmp_path / "cases.yaml"
    dataset.write_text(textwrap.dedent("""\
        cases:
          - id: steady
            input: Should I drop my star?
            rules: [{type: regex, value: "\\\\b[Hh]old\\\\b"}]
          - id: wobbly
            input: Should I drop my star today?
            risk_level: critical
            rules: [{type: regex, value: "\\\\b[Hh]old\\\\b"}]
        """))
    settings = Settings(dataset=[str(dataset)], target="command", output_dir=str(tmp_path / "out"), repeat=3,
                        target_command=[sys.executable, str(tmp_path / "flip.py"), str(tmp_path / "calls")],
                        concurrency=2, metric_thresholds={"rules": 0.8})
    outcome = asyncio.run(execute(settings, {}, cwd=tmp_path, install_signal_handlers=False))
    document = json.loads(outcome.results_path.read_text())
    jsonschema.validate(document, json.loads(SCHEMA_PATH.read_text()))
    assert len(document["results"]) == 6 and sorted(p.name for p in (tmp_path / "calls").iterdir())[-1] == "wobbly.2"
    summary = document["summary"]
    assert (summary["total_test_cases"], summary["total_passed"], summary["critical_failures"]) == (2, 1, 1)
    assert summary["repeats"]["flaky_cases"] == 1 and not document["gate"]["passed"]  # critical: pass^3
    assert any("passed 2 of 3 repeats (critical: pass^3, every repeat must pass)" in reason
               for reason in document["gate"]["reasons"])
    # the second *call* fails; with concurrency 2 it may serve repeat 1 or 2, so compare the multiset
    assert [(f["id"], sorted(f["outcomes"])) for f in document["flaky"]] == [("wobbly", ["failed", "passed", "passed"])]
    rules = summary["confidence_intervals"]["metrics"]["rules"]
    assert rules["cases"] == 2 and math.isclose(rules["mean"], (1.0 + 2 / 3) / 2, abs_tol=1e-6)
    assert document["metrics"]["rules"]["count"] == 2
    strict = settings.model_copy(update={"repeat_rule": "all", "output_dir": str(tmp_path / "all")})
    for leftover in (tmp_path / "calls").iterdir():
        leftover.unlink()
    failed = asyncio.run(execute(strict, {}, cwd=tmp_path, install_signal_handlers=False))
    assert failed.verdict.exit_code == 1 and failed.document["summary"]["critical_failures"] == 1
    assert any("critical case wobbly failed" in reason and "passed 2 of 3 repeats (critical: pass^3" in reason
               for reason in failed.verdict.reasons)


def test_judge_samples_and_repeats_are_real_calls_and_their_spread_is_reported(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from evalgate.cli.main import main as cli_main
    from tests.servers.openai_server import Judge, OpenAIServer

    key = "sk-loopback-judge-key-repeats"
    monkeypatch.setenv("LOCAL_JUDGE_API_KEY", key)
    monkeypatch.setenv("EVALGATE_CALIBRATION", "trust")  # relevancy gates, so its threshold is the stability line
    cycle = [0.6, 0.9, 0.75, 0.95]
    calls: list[float] = []

    def score(prompt: str) -> float:
        value = cycle[len(calls) % len(cycle)]
        calls.append(value)
        return value

    cases = [{"id": f"q{i}", "input": f"Question {i}?", "output": f"Answer {i}.", "metrics": ["relevancy"]}
             for i in range(2)]
    dataset = tmp_path / "cases.json"
    dataset.write_text(json.dumps(cases))
    with OpenAIServer(api_key=key, judge=Judge(score=score)) as judge:
        code = cli_main(["run", "-d", str(dataset), "--judge-provider", "local", "--judge-base-url",
                         judge.base_url + "/v1", "--judge-samples", "3", "--repeat", "2", "--metric-thresholds",
                         '{"relevancy": 0.8}', "--concurrency", "1", "-o", str(tmp_path / "out"), "--progress", "none"])
    document = json.loads((tmp_path / "out" / "results.json").read_text())
    jsonschema.validate(document, json.loads(SCHEMA_PATH.read_text()))
    judged = [r for r in document["results"] if r["metrics"].get("relevancy", {}).get("status") in ("passed", "failed")]
    assert len(judged) == 4 and len(calls) == 4 * 3  # 2 cases × 2 repeats × 3 samples, none served twice
    stability = document["summary"]["judge_stability"]["relevancy"]
    spreads = [statistics.stdev(s["relevancy"] for s in r["metrics"]["relevancy"]["details"]["samples"]) for r in judged]
    assert stability["samples"] == 3 and stability["answers"] == 4
    assert stability["mean_stdev"] == pytest.approx(statistics.fmean(spreads), abs=1e-6) and stability["mean_stdev"] > 0
    assert stability["straddling_threshold"] == 4  # every answer had samples on both sides of 0.8
    summary = document["summary"]
    assert code == 1 and (summary["total_test_cases"], summary["total_failed"]) == (2, 2)  # each passed 1 of 2
    assert summary["repeats"]["flaky_cases"] == 2
    assert document["summary"]["confidence_intervals"]["metrics"]["relevancy"]["cases"] == 2
