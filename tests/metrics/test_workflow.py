"""Seed 003 workflow validation: the seed's examples verbatim, every side rule, and the demo suites."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from evalgate.config.options import MetricOptions
from evalgate.errors import UserError
from evalgate.metrics.registry import REGISTRY, MetricContext, MetricUnavailable, Score
from evalgate.metrics.workflow import check_side, workflow, workflow_agents, workflow_tools
from evalgate.model import Answer, Case

ROOT = Path(__file__).resolve().parents[2]


def ctx(**options: Any) -> MetricContext:
    return MetricContext(options=MetricOptions(**options))


def case(**fields: Any) -> Case:
    return Case.model_validate({"id": "wf", "input": "q", **fields})


# --- the seed's two examples, verbatim ----------------------------------------------------------------


def test_seed_pass_example() -> None:
    scenario = case(
        agents_should_include=["research"],
        agents_should_exclude=["clarification"],
        tools_should_include=["pdf_retrieval"],
        tools_should_exclude=["web_search"],
    )
    answer = Answer(agents_called=["orchestrator", "research"], tools_used=["pdf_retrieval"])
    score = workflow(scenario, answer, ctx())
    assert score.value == 1.0
    assert score.details == {
        "pass": True,
        "agents": {
            "pass": True,
            "included": ["research"],
            "excluded": ["clarification"],
            "missing": [],
            "unexpected": [],
        },
        "tools": {
            "pass": True,
            "included": ["pdf_retrieval"],
            "excluded": ["web_search"],
            "missing": [],
            "unexpected": [],
        },
    }


def test_seed_fail_example() -> None:
    scenario = case(tools_should_include=["pdf_retrieval", "web_search"])
    score = workflow(scenario, Answer(tools_used=["pdf_retrieval"]), ctx())
    assert score.value == 0.0
    assert score.details["pass"] is False
    tools = score.details["tools"]
    assert tools["pass"] is False
    assert tools["included"] == ["pdf_retrieval"]
    assert tools["missing"] == ["web_search"]
    assert tools["unexpected"] == []
    # the scenario says nothing about agents: that side passes without an agents_called list
    assert score.details["agents"]["pass"] is True


# --- check_side: every list -------------------------------------------------------------------------


def test_excluded_agent_called_is_unexpected_and_not_excluded() -> None:
    result = check_side(
        ["orchestrator", "research", "clarification"], ["research"], ["clarification"], ["orchestrator"]
    )
    assert result == {
        "pass": False,
        "included": ["research"],
        "excluded": [],
        "missing": [],
        "unexpected": ["clarification"],
    }


def test_unlisted_call_is_unexpected_when_include_is_declared() -> None:
    result = check_side(["orchestrator", "research", "summariser"], ["research"], None, ["orchestrator"])
    assert result["unexpected"] == ["summariser"]
    assert result["pass"] is False


def test_always_expected_agent_is_not_unexpected() -> None:
    assert check_side(["orchestrator", "research"], ["research"], None, ["orchestrator"])["pass"] is True
    # without the always-expected list the orchestrator is an un-listed call
    assert check_side(["orchestrator", "research"], ["research"], None)["unexpected"] == ["orchestrator"]


def test_always_expected_agent_listed_as_excluded_is_unexpected() -> None:
    result = check_side(["orchestrator"], None, ["orchestrator"], ["orchestrator"])
    assert result["unexpected"] == ["orchestrator"]


def test_exclude_only_side_forbids_only_the_listed_names() -> None:
    result = check_side(["research", "calculator"], None, ["web_search"])
    assert result == {
        "pass": True,
        "included": [],
        "excluded": ["web_search"],
        "missing": [],
        "unexpected": [],
    }


def test_empty_include_list_means_nothing_but_the_always_expected() -> None:
    assert check_side(["orchestrator"], [], None, ["orchestrator"])["pass"] is True
    assert check_side(["orchestrator", "research"], [], None, ["orchestrator"])["unexpected"] == ["research"]


def test_names_compare_ignoring_case_and_spaces_and_keep_spelling() -> None:
    result = check_side([" PDF_Retrieval ", "pdf_retrieval"], ["pdf_retrieval", "PDF_RETRIEVAL"], ["Web_Search"])
    assert result == {
        "pass": True,
        "included": ["pdf_retrieval"],
        "excluded": ["Web_Search"],
        "missing": [],
        "unexpected": [],
    }


def test_missing_and_unexpected_together() -> None:
    result = check_side(["web_search"], ["pdf_retrieval"], ["web_search"])
    assert result["missing"] == ["pdf_retrieval"]
    assert result["unexpected"] == ["web_search"]
    assert result["included"] == [] and result["excluded"] == []


# --- the registered metrics -------------------------------------------------------------------------


def test_options_change_the_always_expected_agents() -> None:
    scenario = case(agents_should_include=["research"])
    answer = Answer(agents_called=["router", "research"])
    assert workflow(scenario, answer, ctx()).value == 0.0
    assert workflow(scenario, answer, ctx(always_expected_agents=["router"])).value == 1.0


def test_always_expected_agents_do_not_apply_to_tools() -> None:
    scenario = case(tools_should_include=["pdf_retrieval"])
    score = workflow(scenario, Answer(tools_used=["pdf_retrieval", "orchestrator"]), ctx())
    assert score.details["tools"]["unexpected"] == ["orchestrator"]


def test_side_metrics_report_each_side() -> None:
    scenario = case(agents_should_include=["research"], tools_should_include=["web_search"])
    answer = Answer(agents_called=["orchestrator", "research"], tools_used=[])
    context = ctx()
    assert workflow_agents(scenario, answer, context).value == 1.0
    tools = workflow_tools(scenario, answer, context)
    assert tools.value == 0.0 and tools.details["missing"] == ["web_search"]
    assert workflow(scenario, answer, context).value == 0.0


def test_empty_called_list_is_a_valid_answer() -> None:
    scenario = case(tools_should_exclude=["web_search"])
    assert workflow(scenario, Answer(tools_used=[]), ctx()).value == 1.0


def test_no_reported_calls_is_unavailable() -> None:
    scenario = case(agents_should_include=["research"], tools_should_include=["pdf_retrieval"])
    answer = Answer(tools_used=["pdf_retrieval"])
    with pytest.raises(MetricUnavailable, match="agents_called"):
        workflow(scenario, answer, ctx())
    with pytest.raises(MetricUnavailable, match="agents_called"):
        workflow_agents(scenario, answer, ctx())
    assert workflow_tools(scenario, answer, ctx()).value == 1.0


def test_unavailable_is_memoised_and_raised_again_for_each_metric() -> None:
    scenario = case(tools_should_include=["pdf_retrieval"])
    context = ctx()
    for _ in range(2):
        with pytest.raises(MetricUnavailable, match="tools_used"):
            workflow(scenario, Answer(), context)
    assert "workflow.sides" in context.memo


def test_memo_shares_one_computation_per_case() -> None:
    scenario = case(tools_should_include=["pdf_retrieval"])
    context = ctx()
    first = workflow_tools(scenario, Answer(tools_used=["pdf_retrieval"]), context)
    # a different answer on the same context reuses the memo: the family computes once per case
    second = workflow_tools(scenario, Answer(tools_used=[]), context)
    assert first.details is second.details


def test_contradictory_expectations_are_refused_by_the_model_and_at_run_time() -> None:
    with pytest.raises(ValueError, match="agents_should_exclude: 'Research' is also in agents_should_include"):
        case(agents_should_include=["research"], agents_should_exclude=["Research"])
    # a case edited after validation (model_copy skips validators) is still refused when scored
    scenario = case(agents_should_include=["research"]).model_copy(update={"agents_should_exclude": ["Research"]})
    scenario.source_file, scenario.source_line = "datasets/x.yaml", 7
    with pytest.raises(UserError, match=r"^datasets/x\.yaml:7: case 'wf': research listed in both"):
        workflow(scenario, Answer(agents_called=["research"]), ctx())


def test_applies() -> None:
    applies = {name: REGISTRY[name].applies for name in ("workflow", "workflow_agents", "workflow_tools")}
    plain = case()
    agents_only = case(agents_should_exclude=["clarification"])
    tools_only = case(tools_should_include=[])
    assert not any(fn(plain) for fn in applies.values())
    assert applies["workflow"](agents_only) and applies["workflow_agents"](agents_only)
    assert not applies["workflow_tools"](agents_only)
    assert applies["workflow"](tools_only) and applies["workflow_tools"](tools_only)
    assert not applies["workflow_agents"](tools_only)


def test_registration() -> None:
    assert REGISTRY["workflow"].default_threshold == 1.0
    assert REGISTRY["workflow_agents"].default_threshold == 1.0  # binary sides: status agrees with details.pass
    assert REGISTRY["workflow_tools"].default_threshold == 1.0
    assert REGISTRY["workflow"].description.startswith("1.0 when both the agents and the tools sides pass")


# --- properties -------------------------------------------------------------------------------------

names = st.sampled_from(["orchestrator", "research", "Research", "clarification", "pdf_retrieval", "web_search", " x "])
maybe_names = st.none() | st.lists(names, max_size=5)


@settings(max_examples=300, deadline=None)
@given(
    include=maybe_names,
    exclude=maybe_names,
    tools_include=maybe_names,
    called=maybe_names,
    used=maybe_names,
)
def test_arbitrary_inputs_give_a_binary_score_or_unavailable(
    include: list[str] | None,
    exclude: list[str] | None,
    tools_include: list[str] | None,
    called: list[str] | None,
    used: list[str] | None,
) -> None:
    if include and exclude and {n.strip().lower() for n in include} & {n.strip().lower() for n in exclude}:
        exclude = None  # contradictions are a dataset error, tested above
    scenario = case(agents_should_include=include, agents_should_exclude=exclude, tools_should_include=tools_include)
    answer = Answer(agents_called=called, tools_used=used)
    for fn in (workflow, workflow_agents, workflow_tools):
        try:
            score = fn(scenario, answer, ctx())
        except MetricUnavailable:
            continue
        assert isinstance(score, Score) and score.value in (0.0, 1.0)
    try:
        overall = workflow(scenario, answer, ctx())
    except MetricUnavailable:
        return
    sides = overall.details
    assert overall.value == float(sides["agents"]["pass"] and sides["tools"]["pass"])
    for side in ("agents", "tools"):
        result = sides[side]
        assert result["pass"] == (not result["missing"] and not result["unexpected"])


@settings(max_examples=200, deadline=None)
@given(include=st.lists(names, max_size=4), called=st.lists(names, max_size=6))
def test_included_and_missing_partition_the_include_list(include: list[str], called: list[str]) -> None:
    result = check_side(called, include, None)
    wanted = {n.strip().lower() for n in include}
    assert {n.lower() for n in result["included"]} | {n.lower() for n in result["missing"]} == wanted
    assert not {n.lower() for n in result["included"]} & {n.lower() for n in result["missing"]}


# --- the bundled suites -----------------------------------------------------------------------------


def _scenarios(path: Path) -> list[Case]:
    return [Case.model_validate(row) for row in yaml.safe_load(path.read_text(encoding="utf-8"))]


def _recorded(scenario: Case) -> Answer:
    return Answer(output=scenario.output, agents_called=scenario.agents_called, tools_used=scenario.tools_used)


def test_demo_suite_passes() -> None:
    scenarios = _scenarios(ROOT / "datasets/workflow-validation/scenarios.yaml")
    assert 10 <= len(scenarios) <= 20
    assert len({s.id for s in scenarios}) == len(scenarios)
    for scenario in scenarios:
        assert scenario.output and scenario.expected_answer_criteria, scenario.id
        score = workflow(scenario, _recorded(scenario), ctx())
        assert score.value == 1.0, (scenario.id, score.details)


def test_regression_suite_fails_every_case() -> None:
    scenarios = _scenarios(ROOT / "datasets/failing/workflow-regressions.yaml")
    assert scenarios
    for scenario in scenarios:
        assert scenario.description, scenario.id
        assert workflow(scenario, _recorded(scenario), ctx()).value == 0.0, scenario.id
