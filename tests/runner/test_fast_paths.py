"""The shortcuts of the deterministic scoring path give exactly what the plain computation gives: the
plan cache, records built without validation, the recorded answer, per-case memos of the metric
families, and the engine's synchronous scoring."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import random
from enum import StrEnum
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from evalgate.config.options import MetricOptions
from evalgate.config.suite import SuiteConfig, parse_suite_config
from evalgate.dataset.load import DatasetStream
from evalgate.metrics.registry import Metric, MetricContext, Score, all_metrics
from evalgate.model import Answer, Case, CaseResult, CaseStatus, Mention, MetricResult, MetricStatus, Threshold, trusted
from evalgate.runner.engine import CasePlan, Engine
from evalgate.runner.record import ANSWER_DETAIL_SET, answer_details
from evalgate.runner.setup import case_shape, fill, make_planner, make_uncached_planner
from evalgate.targets.recorded import RecordedTarget, answer_from_case
from evalgate.verdict.gate import judge_metric, resolve_thresholds

REPO = Path(__file__).resolve().parents[2]
TEXTS = [None, "", "   ", "text"]
LISTS = [None, [], ["  "], ["", "a"], ["a", "b"]]


def demo_cases() -> list[Case]:
    """The bundled demo suites and the seed fixtures (each loads on its own: they share ids)."""
    return [case for root in (REPO / "datasets", REPO / "tests" / "fixtures" / "datasets")
            for case in DatasetStream([str(root)], REPO, fail_fast=False)]


def varied_cases(count: int = 400) -> list[Case]:
    """Cases with every optional field unset, empty, blank or filled, in random combinations."""
    rng = random.Random(7)
    cases = []
    for i in range(count):
        data: dict[str, Any] = {"id": f"v{i}", "input": rng.choice(["q", None]) or "q"}
        for name in ("expected_output", "expected_specialist", "verified_answer_summary", "expected_answer_criteria",
                     "language", "output", "agent_id"):
            data[name] = rng.choice(TEXTS)
        for name in ("expected_sources", "expected_keywords", "expected_data_sources", "retrieval_context",
                     "agents_should_include", "tools_should_exclude", "sources", "tools_used", "debug_context"):
            data[name] = rng.choice(LISTS)
        data["passing_criteria"] = rng.choice([None, "", "be nice", ["a"], []])
        data["category"] = rng.choice([None, "crm", "math", "safety", "agentic", "rules", "CRM"])
        data["suite"] = rng.choice([None, "alpha", "beta"])
        data["latency_ms"] = rng.choice([None, 0, 12.5])
        data["num_tokens"] = rng.choice([None, 0, 7])
        data["risk_level"] = rng.choice(["low", "critical"])
        data["metrics"] = rng.choice([None, [], ["keyword_coverage"]])
        data["rules"] = rng.choice([[], [{"type": "contains", "value": "x"}]])
        if rng.random() < 0.3:
            data |= {"brands_mine": ["A"], "brands_competitors": ["B"], "expected_my_mentions": rng.choice([None, ["A"]])}
        cases.append(Case.model_validate(data))
    return cases


def suites() -> tuple[SuiteConfig, dict[str, SuiteConfig]]:
    global_suite = parse_suite_config({"exclude_metrics": ["rank_accuracy"]}, "evalgate.yaml")
    alpha = parse_suite_config({"name": "alpha", "metrics": ["num_tokens"],
                                "options": {"category_rules": {"crm": [{"type": "max_length", "value": 9}]}}}, "a")
    beta = parse_suite_config({"name": "beta", "category_metrics": {"math": ["math"], "crm": ["safety"]}}, "b")
    return global_suite, {"alpha": alpha, "beta": beta}


@pytest.mark.parametrize("shapes", [4096, 3])
def test_the_plan_cache_gives_the_uncached_plan_for_every_case(shapes: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("evalgate.runner.setup.PLAN_CACHE_SHAPES", shapes)  # 3: the cache is cleared again and again
    metrics = all_metrics()
    for global_suite, by_name in [(SuiteConfig(), {}), suites()]:
        cached, uncached = make_planner(metrics, global_suite, by_name), make_uncached_planner(metrics, global_suite,
                                                                                               by_name)
        for case in [*varied_cases(), *demo_cases()]:
            got, want = cached(case), uncached(case)
            assert [m.name for m in got.metrics] == [m.name for m in want.metrics], case.id
            assert got.options == want.options


def test_case_shape_tells_apart_what_applies_rules_read() -> None:
    base = {"id": "a", "input": "q"}
    shapes = {case_shape(Case.model_validate(base | {"expected_keywords": value})) for value in LISTS}
    assert len(shapes) == 4  # unset, empty, only blank texts, some text
    assert fill("  ") != fill("x") != fill("") and fill(0) != fill(3) and fill(True) is True
    same = case_shape(Case.model_validate(base | {"output": "one"})), case_shape(Case.model_validate(base | {"id": "b",
                                                                                                            "output": "two"}))
    assert same[0] == same[1]


def test_trusted_records_equal_validated_ones() -> None:
    threshold = Threshold(op="min", value=0.9)
    fast = trusted(MetricResult, {"value": 0.5, "threshold": threshold, "passed": False,
                                  "status": MetricStatus.failed, "reason": "r", "details": {"k": [1]}})
    slow = MetricResult(value=0.5, threshold=threshold, passed=False, status=MetricStatus.failed, reason="r",
                        details={"k": [1]})
    assert fast == slow and fast.model_fields_set == slow.model_fields_set
    assert fast.model_dump_json() == slow.model_dump_json()


class Key(StrEnum):
    k = "k"


@pytest.mark.parametrize("details", [{}, {"a": 1, "b": [1.5, None], "c": {"d": "e"}}, {1: "int key"},
                                     {Key.k: "enum key"}, {"nan": math.nan}])
@pytest.mark.parametrize("value", [0.95, 0.5, 1.0])
def test_judge_metric_equals_the_validated_result(details: dict[Any, Any], value: float) -> None:
    for threshold in (None, Threshold(op="min", value=0.9), Threshold(op="max", value=0.6)):
        passed = True if threshold is None else threshold.admits(value)
        expected = {"value": value, "threshold": threshold, "passed": passed,
                    "status": MetricStatus.passed if passed else MetricStatus.failed,
                    "reason": None if passed else f"{value:.3f} misses threshold {threshold}", "details": details}
        if any(not isinstance(key, str) for key in details):  # invalid before and after: the same error
            with pytest.raises(ValidationError):
                MetricResult(**expected)
            with pytest.raises(ValidationError):
                judge_metric(value, threshold, details)
            continue
        got, want = judge_metric(value, threshold, details), MetricResult(**expected)
        assert got.model_dump_json() == want.model_dump_json()
        assert got.model_dump() == want.model_dump() and got.model_fields_set == want.model_fields_set
        assert [type(k) for k in got.details] == [type(k) for k in want.details]


def test_the_recorded_answer_equals_the_validated_one() -> None:
    for case in [*varied_cases(), *demo_cases()]:
        fields = {name: getattr(case, name) for name in ("output", "sources", "agents_called", "tools_used", "agent_id",
                                                          "data_sources", "mentions", "ranked_list", "debug_context",
                                                          "num_tokens", "latency_ms")}
        if case.output is None:
            fields["error"] = "no recorded output for this case (field 'output' / 'llm_answer_text')"
        got, want = answer_from_case(case), Answer(**fields)
        assert got == want and got.model_fields_set == want.model_fields_set
        assert got.model_dump_json() == want.model_dump_json()
        assert all(getattr(got, n) is not getattr(case, n) for n in ("sources", "tools_used") if getattr(case, n))


def test_answer_details_equal_the_pydantic_dump() -> None:
    answers = [Answer(output="x"), Answer(sources=["a"], agent_id="z", prompt_tokens=5, completion_tokens=0,
                                          mentions=[Mention(brand="A", rank=1), Mention(brand="B")]),
               Answer(ranked_list=[], tools_used=["t"], num_tokens=3),
               Answer(output="x", trace={"spans": 2, "tools": [{"name": "a", "arguments": {"q": 1}}]})]
    odd = Answer(agent_id="q")
    odd.prompt_tokens = True  # type: ignore[assignment]  # assigned after validation: the slow path
    answers.append(odd)
    for answer in answers:
        got, want = answer_details(answer), answer.model_dump(include=ANSWER_DETAIL_SET, exclude_none=True)
        assert got == want and list(got) == list(want)
        assert [type(v) for v in got.values()] == [type(v) for v in want.values()]


def _uncached_engine_result(engine: Engine, case: Case) -> CaseResult:
    """The case scored with a fresh ``MetricContext`` per metric (no memo shared) and validated records."""
    answer = answer_from_case(case)
    if answer.error:
        return engine.record(case, answer, {}, 0)
    plan = engine.plan_for(case)
    values: dict[str, float] = {}
    metrics = {}
    empty = type(answer.output) is str and not answer.output.strip() and not case.expect_empty
    for metric in plan.metrics:
        ctx = MetricContext(options=plan.options, values=dict(values))
        missing = engine._empty(metric, ctx) if empty else None  # an empty answer: missing evidence
        result = missing if missing is not None else engine._score_now(metric, case, answer, ctx)
        if type(result) is not MetricResult:  # a judged metric: finish it
            result = asyncio.run(engine._score_later(metric, result, ctx))
        values.update(ctx.values)
        metrics[metric.name] = MetricResult.model_validate(result.model_dump())
    return engine.record(case, answer, metrics, 0)


def test_scoring_with_shared_memos_equals_scoring_each_metric_alone() -> None:
    metrics = all_metrics()
    engine = Engine(target=RecordedTarget(), plan_for=make_planner(metrics, SuiteConfig(), {}),
                    thresholds=resolve_thresholds(metrics, []), sinks=[])
    for case in [*varied_cases(200), *demo_cases()]:
        got = asyncio.run(engine.evaluate(case))
        want = _uncached_engine_result(engine, case)
        assert got.model_dump_json() == want.model_dump_json(), case.id
        assert got.model_dump() == CaseResult.model_validate(got.model_dump()).model_dump()


def test_async_and_sync_metrics_mix_in_dependency_order() -> None:
    async def later(case: Case, answer: Answer, ctx: MetricContext) -> Score:
        await asyncio.sleep(0)
        return Score(0.25)

    def now(case: Case, answer: Answer, ctx: MetricContext) -> Score:
        return Score(ctx.values["later"] * 2, {"seen": sorted(ctx.values)})

    def make(name: str, fn: Any, depends_on: tuple[str, ...] = ()) -> Metric:
        return Metric(name=name, fn=fn, direction="higher", default_threshold=None, applies=lambda c: True,
                      kind="deterministic", description="", family="t", depends_on=depends_on)

    plan = CasePlan(metrics=[make("later", later), make("now", now, ("later",))], options=MetricOptions())
    engine = Engine(target=RecordedTarget(), plan_for=lambda case: plan, thresholds={}, sinks=[])
    result = asyncio.run(engine.evaluate(Case(id="c", output="x")))
    assert result.metrics["now"].value == 0.5 and result.metrics["now"].details == {"seen": ["later"]}


def test_case_results_round_trip_through_json() -> None:
    metrics = all_metrics()
    engine = Engine(target=RecordedTarget(), plan_for=make_planner(metrics, SuiteConfig(), {}),
                    thresholds=resolve_thresholds(metrics, []), sinks=[])
    for case in itertools.islice(demo_cases(), 60):
        result = asyncio.run(engine.evaluate(case))
        again = CaseResult.model_validate_json(result.model_dump_json())
        assert json.loads(again.model_dump_json()) == json.loads(result.model_dump_json())
        assert result.status in CaseStatus
