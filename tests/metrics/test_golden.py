"""Seed 004 golden-dataset metrics: hand-computed values, the composite formula, the heuristic's
range and monotonicity, the judge path, and the bundled golden suite."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalgate.config.options import CompositeWeights, MetricOptions
from evalgate.metrics.golden import (
    composite,
    content_terms,
    data_source_match,
    has_term,
    heuristic_quality,
    keyword_coverage,
    response_quality,
    specialist_match,
    structure_indicators,
)
from evalgate.metrics.registry import REGISTRY, MetricContext, MetricSkipped, MetricUnavailable, Score
from evalgate.model import Answer, Case

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ("specialist_match", "keyword_coverage", "data_source_match", "response_quality", "composite")


def ctx(judge: Any = None, values: dict[str, float] | None = None, **options: Any) -> MetricContext:
    return MetricContext(options=MetricOptions(**options), judge=judge, values=dict(values or {}))


def case(**fields: Any) -> Case:
    return Case.model_validate({"id": "GD-T", "query": "q", **fields})


def quality(case_: Case, answer: Answer, context: MetricContext | None = None) -> Score:
    return asyncio.run(response_quality(case_, answer, context or ctx()))


# --- whole-word matching ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "term", "expected"),
    [
        ("Data from SAP shows", "sap", True),
        ("a sapphire blue", "sap", False),
        ("three times a day", "mes", False),
        ("MES cycle times", "mes", True),
        ("see the control\nchart", "control chart", True),
        ("Source:SOP-12", "source:", True),
        ("Cpk=1.41", "cpk", True),
        ("SPCs", "spc", False),
        ("", "spc", False),
        ("anything", "   ", False),
    ],
)
def test_has_term(text: str, term: str, expected: bool) -> None:
    assert has_term(text, term) is expected


# --- specialist_match -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("agent_id", "value"),
    [
        ("procedure_expert", 1.0),
        ("Procedure_Expert", 1.0),
        ("procedure-expert", 1.0),
        ("ProcedureExpertAgent", 1.0),
        ("quality_inspector", 0.0),
        ("procedure_expert_v2", 0.0),
    ],
)
def test_specialist_match(agent_id: str, value: float) -> None:
    score = specialist_match(case(expected_specialist="procedure_expert"), Answer(agent_id=agent_id), ctx())
    assert score.value == value
    assert score.details == {"expected": "procedure_expert", "actual": agent_id}


def test_specialist_match_without_agent_id_is_unavailable() -> None:
    with pytest.raises(MetricUnavailable, match="agent_id"):
        specialist_match(case(expected_specialist="data_analyst"), Answer(output="x"), ctx())


def test_specialist_match_without_expectation_is_skipped() -> None:
    with pytest.raises(MetricSkipped):
        specialist_match(case(expected_specialist="  "), Answer(agent_id="data_analyst"), ctx())


# --- keyword_coverage -------------------------------------------------------------------------------


def test_keyword_coverage_hand_computed() -> None:
    golden = case(expected_keywords=["Cpk", "control chart", "root cause analysis", "SAP", "cpk"])
    answer = Answer(output="The CPK is 1.41. Run an analysis of the root cause on the control chart data.")
    score = keyword_coverage(golden, answer, ctx())
    # distinct keywords: Cpk, control chart, root cause analysis, SAP → 3 found of 4
    assert score.value == pytest.approx(0.75)
    assert score.details == {
        "found": ["Cpk", "control chart", "root cause analysis"],
        "missing": ["SAP"],
        "scattered": ["root cause analysis"],
    }


def test_multi_word_keyword_needs_every_word() -> None:
    golden = case(expected_keywords=["preventive maintenance schedule", "work order"])
    answer = Answer(output="The maintenance schedule lists one work order.")
    score = keyword_coverage(golden, answer, ctx())
    assert score.value == pytest.approx(0.5)
    assert score.details["missing"] == ["preventive maintenance schedule"]


def test_keywords_match_whole_words_only() -> None:
    golden = case(expected_keywords=["bearing", "oee"])
    assert keyword_coverage(golden, Answer(output="Bearings and shoee"), ctx()).value == 0.0
    assert keyword_coverage(golden, Answer(output="bearing (OEE 81%)"), ctx()).value == 1.0


def test_keyword_coverage_edge_cases() -> None:
    with pytest.raises(MetricSkipped):
        keyword_coverage(case(expected_keywords=["", " "]), Answer(output="x"), ctx())
    with pytest.raises(MetricUnavailable, match="no output"):
        keyword_coverage(case(expected_keywords=["x"]), Answer(), ctx())
    assert keyword_coverage(case(expected_keywords=["x"]), Answer(output=""), ctx()).value == 0.0


# --- data_source_match ------------------------------------------------------------------------------


def test_data_source_match_hand_computed() -> None:
    golden = case(expected_data_sources=["rag", "sap", "mes"])
    answer = Answer(
        output="Per the production order 1002345 the line ran three times; see the attached table.",
        sources=["SOP-PM-014 Compressor maintenance manual"],
    )
    score = data_source_match(golden, answer, ctx())
    assert score.value == pytest.approx(2 / 3)
    sources = score.details["sources"]
    assert sources["sap"] == {"used": True, "via": "output", "indicator": "production order"}
    assert sources["rag"]["used"] and sources["rag"]["via"] in {"output", "citation"}
    assert sources["mes"] == {"used": False, "via": None, "indicator": None}  # "times" is not "mes"
    assert score.details["used"] == ["rag", "sap"] and score.details["missing"] == ["mes"]


def test_citation_indicator_counts() -> None:
    golden = case(expected_data_sources=["rag"])
    score = data_source_match(golden, Answer(output="Torque is 12 Nm.", sources=["Capper manual rev D"]), ctx())
    assert score.value == 1.0
    assert score.details["sources"]["rag"] == {"used": True, "via": "citation", "indicator": "manual"}


def test_reported_data_sources_count_ignoring_case() -> None:
    golden = case(expected_data_sources=["sap", "mes"])
    score = data_source_match(golden, Answer(output="Done.", data_sources=["SAP"]), ctx())
    assert score.value == 0.5
    assert score.details["sources"]["sap"]["via"] == "data_sources"


def test_indicator_vocabularies_are_configurable() -> None:
    golden = case(expected_data_sources=["mes", "historian"])
    answer = Answer(output="The PI historian trend shows the OEE dropped.")
    assert data_source_match(golden, answer, ctx()).value == 0.5  # default: oee → mes; no historian vocabulary
    custom = ctx(data_source_indicators={"MES": ["shop floor"], "historian": ["pi historian", "trend"]})
    score = data_source_match(golden, answer, custom)
    assert score.value == 0.5
    assert score.details["sources"]["historian"]["indicator"] == "pi historian"
    assert not score.details["sources"]["mes"]["used"]


def test_data_source_match_edge_cases() -> None:
    with pytest.raises(MetricSkipped):
        data_source_match(case(expected_data_sources=[]), Answer(output="x"), ctx())
    with pytest.raises(MetricUnavailable):
        data_source_match(case(expected_data_sources=["sap"]), Answer(agent_id="data_analyst"), ctx())
    assert data_source_match(case(expected_data_sources=["sap"]), Answer(data_sources=[]), ctx()).value == 0.0


# --- response_quality: heuristic --------------------------------------------------------------------


def test_heuristic_hand_computed() -> None:
    golden = case(verified_answer_summary="Cpk above 1.33 shows a capable process")
    score = heuristic_quality(golden, Answer(output="Cpk is 1.41, so the process is capable."))
    # words = 9 → L = 9/60 = 0.15; reference terms cpk, above, shows, capable, process → O = 3/5;
    # structure: numbers only → S = 1/4; 1 + 4·(0.3·0.15 + 0.5·0.6 + 0.2·0.25) = 2.58
    assert score.value == pytest.approx(2.58)
    assert score.details["method"] == "heuristic"
    assert score.details["overlap_missing"] == ["above", "shows"]
    assert score.details["structure"] == {"list": False, "numbers": True, "units": False, "steps": False}


def test_heuristic_without_reference_drops_the_overlap_weight() -> None:
    golden = case(expected_specialist="quality_inspector")
    score = heuristic_quality(golden, Answer(output="Cpk is 1.41, so the process is capable."))
    # (0.3·0.15 + 0.2·0.25) / 0.5 = 0.19 → 1 + 4·0.19 = 1.76
    assert score.value == pytest.approx(1.76)
    assert score.details["overlap_score"] is None


def test_heuristic_falls_back_to_keywords_as_reference() -> None:
    golden = case(expected_specialist="quality_inspector", expected_keywords=["Cpk", "control chart"])
    score = heuristic_quality(golden, Answer(output="Cpk is fine."))
    assert score.details["overlap_reference"] == "expected_keywords"
    assert score.details["overlap_score"] == pytest.approx(1 / 3, abs=1e-4)  # cpk of cpk, control, chart


def test_heuristic_extremes() -> None:
    golden = case(verified_answer_summary="Isolate energy, apply locks, verify zero energy")
    best = (
        "Follow these steps:\n1. Isolate every energy source and bleed air to 0 bar.\n"
        "2. Apply locks and tags.\n3. Verify zero energy with a try-start.\n" + "Details follow here. " * 20
    )
    assert quality(golden, Answer(output=best)).value == pytest.approx(5.0)
    assert quality(golden, Answer(output="")).value == pytest.approx(1.0)


def test_structure_indicators() -> None:
    assert structure_indicators("- a\n- b") == {"list": True, "numbers": False, "units": False, "steps": False}
    assert structure_indicators("First x, then y.")["steps"] is True
    assert structure_indicators("Step 2 is next")["steps"] is True
    assert structure_indicators("Takes 12 min at 4.5 bar")["units"] is True
    assert structure_indicators("costs €40")["units"] is True
    assert structure_indicators("at 85.3%")["units"] is True
    assert structure_indicators("line 3 runs")["units"] is False


def test_content_terms_drop_stopwords_and_short_words() -> None:
    assert content_terms("The Cpk of the process is above 1.33 and it is capable") == [
        "cpk",
        "process",
        "above",
        "capable",
    ]


def test_more_summary_coverage_scores_higher() -> None:
    golden = case(verified_answer_summary="Replace bearing, check belt tension and motor current")
    weak = quality(golden, Answer(output="Check the motor."))
    better = quality(golden, Answer(output="Check the motor current and belt tension."))
    best = quality(golden, Answer(output="Replace the bearing, check the motor current and belt tension."))
    assert weak.value < better.value < best.value


def test_structure_scores_higher() -> None:
    golden = case(verified_answer_summary="Clean nozzle and recalibrate")
    flat = quality(golden, Answer(output="Clean the nozzle and recalibrate it"))
    listed = quality(golden, Answer(output="- Clean the nozzle\n- Recalibrate it at 20 psi"))
    assert listed.value > flat.value


# --- response_quality: judge ------------------------------------------------------------------------


class FakeJudge:
    """Records calls and returns a fixed score, like the judge client will."""

    def __init__(self, value: Any) -> None:
        self.value = value
        self.calls: list[tuple[str, str, str | None]] = []
        self.options: list[dict[str, Any]] = []

    async def score(self, name: str, case_: Case, answer: Answer, **kwargs: Any) -> Score:
        self.calls.append((name, case_.id, answer.output))
        self.options.append(kwargs)
        return Score(self.value, {"reason": "clear and complete"})


def test_judge_path_returns_the_judge_score() -> None:
    judge = FakeJudge(4.2)
    score = quality(case(verified_answer_summary="s"), Answer(output="answer"), ctx(judge=judge))
    assert score.value == 4.2
    assert score.details == {"reason": "clear and complete", "method": "judge"}
    assert judge.calls == [("response_quality", "GD-T", "answer")]
    assert judge.options == [{"repeat": 0}]


def test_judge_gets_the_repeat_index() -> None:
    judge = FakeJudge(3.0)
    context = ctx(judge=judge)
    context.repeat = 2
    quality(case(verified_answer_summary="s"), Answer(output="answer"), context)
    assert judge.options == [{"repeat": 2}]


@pytest.mark.parametrize("bad", [0.5, 7, float("nan"), "4", None, True])
def test_judge_value_outside_scale_falls_back_to_the_heuristic_and_says_why(bad: Any) -> None:
    context = ctx(judge=FakeJudge(bad))
    score = quality(case(verified_answer_summary="s"), Answer(output="answer"), context)
    # heuristic: 1 word → L = 1/60; no reference terms (W = 0.5); no structure: 1 + 4·(0.3/60)/0.5 = 1.04
    assert score.value == pytest.approx(1.04)
    assert score.details["method"] == "heuristic"
    assert "judge returned" in score.details["judge_unavailable"]
    assert score.details["judge_failure"] == "unreadable"
    assert context.judge_fallbacks == {"response_quality": score.details["judge_unavailable"]}


def test_an_unavailable_judge_falls_back_to_the_heuristic_with_the_reason() -> None:
    class DownJudge:
        async def score(self, name: str, case_: Case, answer: Answer, **kwargs: Any) -> Score:
            raise MetricUnavailable("judge call failed: HTTP 503", {"judge_failure": "unreachable", "method": "judge"})

    score = quality(case(verified_answer_summary="s"), Answer(output="answer"), ctx(judge=DownJudge()))
    assert score.value == pytest.approx(1.04)
    assert (score.details["method"], score.details["judge_failure"]) == ("heuristic", "unreachable")
    assert "503" in score.details["judge_unavailable"]
    assert score.details["judge_details"] == {"judge_failure": "unreachable"}  # the judge's, minus its "method"


def test_no_output_text_stays_unavailable_with_a_judge() -> None:
    class DownJudge:
        async def score(self, name: str, case_: Case, answer: Answer, **kwargs: Any) -> Score:
            raise MetricUnavailable("the target returned no output text to judge")

    with pytest.raises(MetricUnavailable, match="no output text"):
        quality(case(verified_answer_summary="s"), Answer(output=None), ctx(judge=DownJudge()))


def test_composite_says_when_response_quality_came_from_the_heuristic() -> None:
    values = {"specialist_match": 1.0, "keyword_coverage": 0.8, "data_source_match": 0.5, "response_quality": 4.0}
    context = ctx(values=values)
    context.judge_fallbacks["response_quality"] = "judge call failed: HTTP 503"
    score = composite(case(expected_specialist="x"), Answer(), context)
    assert score.value == pytest.approx(0.80)
    assert score.details["judge_unavailable"] == "response_quality scored by the heuristic: judge call failed: HTTP 503"


# --- composite --------------------------------------------------------------------------------------


def test_composite_seed_formula() -> None:
    values = {"specialist_match": 1.0, "keyword_coverage": 0.8, "data_source_match": 0.5, "response_quality": 4.0}
    score = composite(case(expected_specialist="x"), Answer(), ctx(values=values))
    # 0.30·1 + 0.25·0.8 + 0.20·0.5 + 0.25·(4/5) = 0.30 + 0.20 + 0.10 + 0.20
    assert score.value == pytest.approx(0.80)
    assert score.details["contributions"] == pytest.approx(
        {"specialist_match": 0.30, "keyword_coverage": 0.20, "data_source_match": 0.10, "response_quality": 0.20}
    )


def test_composite_weights_are_configurable() -> None:
    values = {"specialist_match": 1.0, "keyword_coverage": 0.8, "data_source_match": 0.5, "response_quality": 4.0}
    weights = CompositeWeights(
        specialist_match=0.25, keyword_coverage=0.25, data_source_match=0.25, response_quality=0.25
    )
    score = composite(case(expected_specialist="x"), Answer(), ctx(values=values, composite_weights=weights))
    assert score.value == pytest.approx(0.25 + 0.20 + 0.125 + 0.20)


def test_composite_missing_component_is_unavailable() -> None:
    values = {"specialist_match": 0.0, "keyword_coverage": 1.0, "response_quality": 3.0}
    with pytest.raises(MetricUnavailable, match="data_source_match") as raised:
        composite(case(expected_specialist="x"), Answer(), ctx(values=values))
    assert raised.value.details == {"missing": ["data_source_match"]}


def test_composite_extremes() -> None:
    low = {"specialist_match": 0.0, "keyword_coverage": 0.0, "data_source_match": 0.0, "response_quality": 1.0}
    high = {"specialist_match": 1.0, "keyword_coverage": 1.0, "data_source_match": 1.0, "response_quality": 5.0}
    assert composite(case(), Answer(), ctx(values=low)).value == pytest.approx(0.05)
    assert composite(case(), Answer(), ctx(values=high)).value == pytest.approx(1.0)


# --- registration -----------------------------------------------------------------------------------


def test_registration_and_applies() -> None:
    thresholds = {name: REGISTRY[name].default_threshold for name in GOLDEN}
    assert thresholds == {
        "specialist_match": 0.85,
        "keyword_coverage": 0.60,
        "data_source_match": 0.70,
        "response_quality": 3.5,
        "composite": 0.75,
    }
    assert REGISTRY["response_quality"].value_range == (1.0, 5.0)
    assert REGISTRY["composite"].depends_on == GOLDEN[:4]
    bare = case()
    assert not any(REGISTRY[name].applies(bare) for name in GOLDEN)
    full = case(
        expected_specialist="data_analyst",
        expected_keywords=["OEE"],
        expected_data_sources=["mes"],
    )
    assert all(REGISTRY[name].applies(full) for name in GOLDEN)
    summary_only = case(verified_answer_summary="s")
    assert REGISTRY["response_quality"].applies(summary_only) and REGISTRY["composite"].applies(summary_only)
    assert not REGISTRY["specialist_match"].applies(summary_only)


# --- properties -------------------------------------------------------------------------------------

texts = st.text(max_size=300)
maybe_texts = st.none() | texts
words = st.lists(st.text(max_size=25), max_size=6)


@settings(max_examples=300, deadline=None)
@given(
    specialist=maybe_texts,
    keywords=st.none() | words,
    expected_sources=st.none() | st.lists(st.sampled_from(["rag", "sap", "mes", "other", ""]), max_size=4),
    summary=maybe_texts,
    output=maybe_texts,
    agent_id=maybe_texts,
    data_sources=st.none() | words,
    citations=st.none() | words,
)
def test_bounded_and_only_expected_exceptions(
    specialist: str | None,
    keywords: list[str] | None,
    expected_sources: list[str] | None,
    summary: str | None,
    output: str | None,
    agent_id: str | None,
    data_sources: list[str] | None,
    citations: list[str] | None,
) -> None:
    golden = case(
        expected_specialist=specialist,
        expected_keywords=keywords,
        expected_data_sources=expected_sources,
        verified_answer_summary=summary,
    )
    answer = Answer(output=output, agent_id=agent_id, data_sources=data_sources, sources=citations)
    context = ctx()
    for name in GOLDEN:
        metric = REGISTRY[name]
        try:
            result = metric.fn(golden, answer, context)
            score = asyncio.run(result) if asyncio.iscoroutine(result) else result
        except (MetricSkipped, MetricUnavailable):
            continue
        low, high = metric.value_range or (0.0, 1.0)
        assert low <= score.value <= high, (name, score)
        context.values[name] = score.value


@settings(max_examples=300, deadline=None)
@given(summary=maybe_texts, keywords=st.none() | words, output=texts, extra=texts)
def test_heuristic_in_range_and_never_lowered_by_appending(
    summary: str | None, keywords: list[str] | None, output: str, extra: str
) -> None:
    golden = case(verified_answer_summary=summary, expected_keywords=keywords, expected_specialist="x")
    before = heuristic_quality(golden, Answer(output=output)).value
    after = heuristic_quality(golden, Answer(output=output + "\n" + extra)).value
    assert 1.0 <= before <= 5.0 and 1.0 <= after <= 5.0
    assert after >= before - 1e-12


# --- the bundled suites -----------------------------------------------------------------------------


def _load(path: Path) -> list[Case]:
    rows = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(rows, list)
    return [Case.model_validate(row) for row in rows]


def _scores(golden: Case) -> dict[str, float]:
    answer = Answer(
        output=golden.output, agent_id=golden.agent_id, data_sources=golden.data_sources, sources=golden.sources
    )
    context = ctx()
    for name in GOLDEN:
        result = REGISTRY[name].fn(golden, answer, context)
        score = asyncio.run(result) if asyncio.iscoroutine(result) else result
        context.values[name] = score.value
    return context.values


def test_golden_suite_passes_default_thresholds() -> None:
    cases = _load(ROOT / "datasets/golden-dataset/golden_dataset.json")
    assert 10 <= len(cases) <= 20
    assert [c.id for c in cases] == [f"GD-{n:03d}" for n in range(1, len(cases) + 1)]
    specialists = {c.dialect_value("expected_specialist") for c in cases}
    assert specialists == {
        "procedure_expert",
        "quality_inspector",
        "maintenance_advisor",
        "data_analyst",
        "document_analyst",
    }
    assert {c.difficulty for c in cases} == {"simple", "medium", "complex"}
    for golden in cases:
        values = _scores(golden)
        for name in GOLDEN:
            assert REGISTRY[name].default_threshold is not None
            assert values[name] >= REGISTRY[name].default_threshold, (golden.id, name, values)


def test_golden_regressions_fail() -> None:
    cases = _load(ROOT / "datasets/failing/golden-regressions.json")
    assert cases
    for golden in cases:
        assert golden.description, golden.id
        values = _scores(golden)
        assert values["composite"] < REGISTRY["composite"].default_threshold, (golden.id, values)


def test_composite_stays_within_one_and_rounds_its_contributions_to_six_places() -> None:
    """Weights may sum to 1 within 1e-6: with every component perfect the composite is still at most 1.0.
    Contributions in the details are rounded to 6 places (0.3·(1/3) = 0.1 → 0.1, 0.25·(1/3) → 0.083333)."""
    perfect = {"specialist_match": 1.0, "keyword_coverage": 1.0, "data_source_match": 1.0, "response_quality": 5.0}
    heavy = CompositeWeights(specialist_match=0.3000005, keyword_coverage=0.25, data_source_match=0.20,
                             response_quality=0.25)
    assert composite(case(), Answer(), ctx(values=perfect, composite_weights=heavy)).value == 1.0
    thirds = {"specialist_match": 1 / 3, "keyword_coverage": 1 / 3, "data_source_match": 1 / 3, "response_quality": 5 / 3}
    details = composite(case(), Answer(), ctx(values=thirds)).details
    assert details["contributions"] == {"specialist_match": 0.1, "keyword_coverage": 0.083333,
                                        "data_source_match": 0.066667, "response_quality": 0.083333}


def test_heuristic_lists_at_most_20_missing_reference_terms() -> None:
    """details.overlap_missing is capped at the first 20 reference terms the answer lacks."""
    terms = [f"term{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(25)]
    score = heuristic_quality(case(verified_answer_summary=" ".join(terms)), Answer(output="nothing relevant here"))
    assert score.details["overlap_missing"] == terms[:20]
