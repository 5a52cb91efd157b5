"""The judged metrics of the seeds: registration, which cases they run on (seed 002's category mapping and
its override), the three outcomes, and a full run against the loopback agent and judge."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli.main import main as cli_main
from evalgate.config.options import MetricOptions
from evalgate.config.suite import SuiteConfig
from evalgate.dialects.seed002 import CATEGORY_METRICS as DEFAULT_CATEGORY_METRICS
from evalgate.metrics.judged import SPECS
from evalgate.metrics.registry import MetricContext, MetricSkipped, MetricUnavailable, all_metrics
from evalgate.model import Answer, Case
from evalgate.runner.setup import make_planner
from tests.servers.agent_server import AgentReply, AgentServer
from tests.servers.openai_server import Judge, OpenAIServer

KEY = "sk-metrics-test-97531"
SEED_002_THRESHOLDS = {"math": 0.90, "safety": 0.80, "relevancy": 0.70, "faithfulness": 0.70, "groundedness": 0.75,
                       "policy": 0.80, "localization": 0.75, "actionability": 0.75, "context_precision": 0.70,
                       "context_recall": 0.70, "correctness": 0.65, "tool_calling": 0.75}


def test_every_judged_metric_is_registered_with_its_default_threshold() -> None:
    metrics = all_metrics()
    judged = {name for name, m in metrics.items() if m.kind == "judged"}
    conversation = {"goal_completion", "knowledge_retention", "role_adherence"}  # docs/conversations.md
    assert judged == set(SEED_002_THRESHOLDS) | {"judge_score", "answer_quality", "factual_correctness",
                                                 "completeness"} | conversation
    assert all(metrics[name].default_threshold == 0.5 for name in conversation)
    for name, threshold in SEED_002_THRESHOLDS.items():
        assert metrics[name].default_threshold == threshold
    assert metrics["judge_score"].default_threshold == 0.75
    assert all(metrics[n].default_threshold is None for n in ("answer_quality", "factual_correctness", "completeness"))
    assert all(metrics[s.name].description for s in SPECS)


def plan_names(case: Case, global_suite: SuiteConfig | None = None, suites: dict[str, SuiteConfig] | None = None,
               compat: tuple[str, ...] = ()) -> set[str]:
    planner = make_planner(all_metrics(), global_suite or SuiteConfig(), suites or {}, compat=compat)
    return {m.name for m in planner(case).metrics if m.kind == "judged"}


def test_applies_rules_and_seed_002_category_mapping() -> None:
    """Seed 002's category map and its field-triggered judged metrics apply to its dialect's cases only."""
    fields: dict[str, Any] = {"category": "waiver", "input": "q", "expected_output": "e", "passing_criteria": "p"}
    assert plan_names(Case(id="w", dialect="seed002", **fields)) == {"correctness", "actionability", "relevancy"}
    rag = Case(id="r", category="other", input="q", retrieval_context=["c"], expected_output="e", dialect="seed002")
    assert plan_names(rag) == {"faithfulness", "groundedness", "context_precision", "context_recall"}
    assert plan_names(Case(id="g", input="q", language="el", dialect="seed002")) == {"localization"}
    assert plan_names(Case(id="h", question="q", expected_sources=["A"], dialect="seed000")) == {"judge_score"}
    assert plan_names(Case(id="a", category="agentic", input="q", dialect="seed002")) == {"correctness", "tool_calling"}
    assert set(DEFAULT_CATEGORY_METRICS["supervisor"]) == {"tool_calling"}
    # the same cases in a generic suite: nothing judged unless asked for
    assert plan_names(Case(id="w", **fields)) == set()
    assert plan_names(Case(id="s", category="safety", input="q")) == set()
    assert plan_names(Case(id="r", input="q", retrieval_context=["c"], expected_output="e", language="el")) == set()
    assert plan_names(Case(id="h", input="q", expected_sources=["A"])) == set()
    # generic criteria fields that ask for the judge: seed 003's quality scores, informational
    assert plan_names(Case(id="s", input="q", expected_answer_criteria="1. x")) == {
        "answer_quality", "factual_correctness", "completeness"}
    # asked for by name, in any suite
    assert plan_names(Case(id="s", category="safety", input="q", metrics=["safety"])) == {"safety"}
    # --compat seed002 turns the dialect on for cases without a kind; kind: generic opts out
    assert plan_names(Case(id="s", category="safety", input="q"), compat=("seed002",)) == {"safety"}
    assert plan_names(Case(id="s", category="safety", input="q", dialect="generic"), compat=("seed002",)) == set()


def test_category_metrics_in_config_replace_the_default_mapping() -> None:
    case = Case(id="w", category="waiver", input="q", suite="fanvise", dialect="seed002")
    custom = SuiteConfig(category_metrics={"waiver": ["safety"]})
    assert plan_names(case, custom) == {"safety"}
    assert plan_names(case, None, {"fanvise": SuiteConfig(name="fanvise", category_metrics={"waiver": ["math"]})}) == {
        "math"}
    assert plan_names(case, SuiteConfig(exclude_metrics=["correctness"])) == {"actionability"}
    generic = Case(id="w", category="waiver", input="q", suite="mine")
    assert plan_names(generic, custom) == {"safety"}  # a user's own map applies in any suite


def run_metric(name: str, case: Case, answer: Answer, judge: Any = None) -> Any:
    fn = all_metrics()[name].fn
    return asyncio.run(fn(case, answer, MetricContext(MetricOptions(), judge)))  # type: ignore[arg-type]


class RecordingJudge:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    async def score(self, metric: str, case: Case, answer: Answer, *, repeat: int = 0) -> Any:
        self.calls.append((metric, repeat))
        return type("Scored", (), {"value": 0.5, "details": {"method": "judge"}})()


def test_outcomes_without_a_judge_or_inputs() -> None:
    case = Case(id="c", input="q", category="waiver")
    with pytest.raises(MetricSkipped, match="no judge configured"):
        run_metric("correctness", case, Answer(output="a"))
    judge = RecordingJudge()
    with pytest.raises(MetricSkipped, match="no expected_output"):
        run_metric("correctness", case, Answer(output="a"), judge)
    with pytest.raises(MetricUnavailable, match="no retrieved context"):
        run_metric("faithfulness", case, Answer(output="a"), judge)
    with pytest.raises(MetricUnavailable, match="no output text"):
        run_metric("safety", case, Answer(output=None), judge)
    assert run_metric("faithfulness", case, Answer(output="a", debug_context=["live"]), judge).value == 0.5
    assert judge.calls == [("faithfulness", 0)]


def test_a_live_run_with_judged_metrics(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCAL_JUDGE_API_KEY", KEY)
    monkeypatch.setenv("EVALGATE_CALIBRATION", "trust")  # a gating judge, as before calibration existed
    cases = [
        {"id": "waiver_1", "category": "waiver", "input": "Who should I pick up?", "expected_output": "Caruso.",
         "passing_criteria": "recommends one player"},
        {"id": "rag_1", "category": "other", "input": "Is Reid playing?", "expected_output": "Reid is probable.",
         "retrieval_context": ["Reid: probable", "Weather: sunny"]},
        {"id": "empty_1", "category": "safety", "input": "Say nothing", "passing_criteria": "x",
         "expect_empty": True},  # without it the empty answer is missing evidence (test_missing_evidence.py)
    ]
    dataset = tmp_path / "cases.json"
    dataset.write_text(json.dumps(cases))

    def verdict(prompt: str, score: float) -> dict[str, Any]:
        if "factual claim" in prompt:
            return {"reasoning": "no claim to check", "claims": []}
        if "each retrieved context chunk" in prompt:
            return {"reasoning": "chunk 1 names the player, chunk 2 does not",
                    "chunks": [{"chunk": 1, "relevant": True}, {"chunk": 2, "relevant": False}]}
        if "statements of the expected output" in prompt:
            return {"reasoning": "the context says Reid is probable",
                    "statements": [{"statement": "Reid is probable", "attributable": True}]}
        return {"reasoning": "fine: it answers the question", "score": 0.9}

    answers = {"pick up": AgentReply(text="Pick up Caruso.", tools_used=["get_free_agents"]),
               "Reid": AgentReply(text="Reid is probable tonight.", debug_context=[]),
               "nothing": AgentReply(text="")}
    with AgentServer(answers) as agent, OpenAIServer(api_key=KEY, judge=Judge(verdict=verdict)) as judge:
        code = cli_main(["run", "--dataset", str(dataset), "--target", "http", "--target-url",
                         agent.base_url + "/api/agent/chat", "--judge-provider", "local", "--judge-base-url",
                         judge.base_url + "/v1", "--output-dir", str(tmp_path / "out"), "--progress", "none",
                         "--compat", "seed002"])
    document = json.loads((tmp_path / "out" / "results.json").read_text())
    by_id = {r["id"]: r["metrics"] for r in document["results"]}
    assert code == 0, document["gate"]
    assert {k: v["value"] for k, v in by_id["waiver_1"].items()} == {
        "actionability": 0.9, "correctness": 0.9, "relevancy": 0.9, "context_mrr": 0.0}  # no debug_context: 0.0
    rag = by_id["rag_1"]
    assert rag["faithfulness"]["value"] == 1.0  # no claims: documented value
    assert rag["context_precision"]["value"] == 1.0 and rag["context_recall"]["value"] == 1.0
    assert rag["groundedness"]["details"]["template_version"].startswith("groundedness@")
    assert by_id["empty_1"]["safety"]["status"] == "passed"
    table = document["metrics"]
    assert table["faithfulness"]["kind"] == "judged" and table["faithfulness"]["threshold"] == {"min": 0.7}
    judge_meta = document["metadata"]["judge"]
    assert judge_meta["provider"] == "local" and "faithfulness" in judge_meta["templates"]
    assert document["summary"]["judged_unavailable"] == 0
    assert document["summary"]["tokens"]["judge_prompt"] > 0


def test_unavailable_judged_metrics_are_counted_with_reasons(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCAL_JUDGE_API_KEY", KEY)
    monkeypatch.setenv("EVALGATE_CALIBRATION", "trust")  # a gating judge, as before calibration existed
    dataset = tmp_path / "cases.json"
    dataset.write_text(json.dumps([{"id": "a", "input": "hello", "passing_criteria": "greets", "metrics": ["relevancy"]},
                                   {"id": "b", "input": "hello again", "passing_criteria": "greets",
                                    "metrics": ["relevancy"]}]))
    off_scale = Judge(verdict=lambda prompt, score: {"reasoning": "excellent", "score": 7})
    with AgentServer({"hello": "hi"}) as agent, OpenAIServer(api_key=KEY, judge=off_scale) as judge:
        code = cli_main(["run", "--dataset", str(dataset), "--target", "http", "--target-url",
                         agent.base_url + "/api/agent/chat", "--judge-provider", "local", "--judge-base-url",
                         judge.base_url + "/v1", "--output-dir", str(tmp_path / "out"), "--progress", "none"])
    document = json.loads((tmp_path / "out" / "results.json").read_text())
    assert code == 1  # a gated judged metric without a verdict errors its case, strict mode or not
    assert document["summary"]["judged_unavailable"] == 2 and document["summary"]["total_errored"] == 2
    row = document["metrics"]["relevancy"]
    assert row["unavailable"] == 2
    assert any("not a valid verdict" in reason for reason in row["reasons"])
    result = document["results"][0]["metrics"]["relevancy"]
    assert result["status"] == "unavailable" and result["value"] is None
    assert '"score": 7' in result["details"]["raw_reply"]
