"""Metric behaviours that mutation testing found unguarded (bench/mutation/SURVIVORS.md), each against a
hand-computed value."""

from __future__ import annotations

from evalgate.config.options import MetricOptions
from evalgate.metrics.registry import MetricContext, get_metric
from evalgate.model import Answer, Case, Mention


def score(name: str, case: Case, answer: Answer) -> float:
    return get_metric(name).fn(case, answer, MetricContext(options=MetricOptions())).value  # type: ignore[union-attr]


def test_mentions_without_a_rank_come_last_in_reported_order() -> None:
    # ranks 1 (C) and 2 (B) first, then the unranked A and D in the order reported: C, B, A, D
    answer = Answer(mentions=[Mention(brand="A"), Mention(brand="B", rank=2), Mention(brand="D"),
                              Mention(brand="C", rank=1)])
    case = Case(id="r", input="q", brands_mine=["A"], brands_competitors=["B", "C", "D"],
                expected_ranked_list=["C", "B", "A", "D"])
    assert score("rank_accuracy", case, answer) == 1.0  # 4 of 4 positions


def test_brand_lists_apply_the_is_mine_check_with_either_list_alone() -> None:
    check = get_metric("false_is_mine_rate")
    options = MetricOptions()
    assert check.applies_to(Case(id="m", input="q", brands_mine=["Acme"]), options)
    assert check.applies_to(Case(id="c", input="q", brands_competitors=["Rival"]), options)
    assert not check.applies_to(Case(id="n", input="q"), options)


def test_specialist_names_lose_a_trailing_agent_but_agent_alone_stays() -> None:
    from evalgate.metrics.golden import _specialist_key

    assert _specialist_key("ProcedureExpertAgent") == _specialist_key("procedure_expert") == "procedureexpert"
    assert _specialist_key("Agent") == "agent"  # nothing left to strip: the name is kept


def test_a_two_word_keyword_is_found_when_its_words_are_scattered() -> None:
    from evalgate.metrics.golden import keyword_hits

    hits = keyword_hits("The policy says a refund is possible.", ["refund policy", "refund window"])
    assert hits["found"] == ["refund policy"] and hits["scattered"] == ["refund policy"]
    assert hits["missing"] == ["refund window"]


def test_heuristic_quality_gives_full_length_credit_from_60_words_and_no_more() -> None:
    from evalgate.metrics.golden import LENGTH_FULL_CREDIT_WORDS, heuristic_quality

    case = Case(id="g", input="q", verified_answer_summary="x")
    short = heuristic_quality(case, Answer(output=" ".join(["word"] * 20))).details
    long = heuristic_quality(case, Answer(output=" ".join(["word"] * (3 * LENGTH_FULL_CREDIT_WORDS)))).details
    assert short["length_score"] == 0.3333 and long["length_score"] == 1.0  # min(1, words / 60), 4 decimals


def test_a_latency_exactly_at_the_maximum_passes() -> None:
    from evalgate.metrics.rules import evaluate_rule
    from evalgate.model import RuleCheck

    rule = RuleCheck(type="max_latency", value=100)
    assert evaluate_rule(rule, Answer(output="a", latency_ms=100.0)).passed is True
    assert evaluate_rule(rule, Answer(output="a", latency_ms=100.5)).passed is False


def test_blank_retrieval_context_or_reference_does_not_count() -> None:
    from evalgate.metrics.judged import context_of

    options = MetricOptions()
    faithfulness, recall = get_metric("faithfulness"), get_metric("context_recall")
    blank = Case(id="b", input="q", retrieval_context=["   ", ""], expected_output="ref")
    real = Case(id="r", input="q", retrieval_context=["  ", "Paris is in France."], expected_output="  ")
    assert not faithfulness.applies_to(blank, options) and faithfulness.applies_to(real, options)
    assert not recall.applies_to(real, options)  # a blank reference is no reference
    assert context_of(real, Answer(output="a")) == ["Paris is in France."]


def test_a_judged_quality_at_either_end_of_the_scale_is_kept() -> None:
    import asyncio
    from types import SimpleNamespace

    from evalgate.metrics.golden import _judged_quality

    class Judge:
        def __init__(self, value: float) -> None:
            self.value = value

        async def score(self, *args: object, **kwargs: object) -> SimpleNamespace:
            return SimpleNamespace(value=self.value, details={})

    case = Case(id="g", input="q", verified_answer_summary="x")
    for value in (1.0, 5.0):
        ctx = MetricContext(options=MetricOptions(), judge=Judge(value))
        assert asyncio.run(_judged_quality(case, Answer(output="a"), ctx)).value == value


def test_a_rule_that_reads_the_suite_options_applies_as_a_plain_bool() -> None:
    from evalgate.model import RuleCheck

    rules = get_metric("rules")
    with_rule = Case(id="r", input="q", rules=[RuleCheck(type="contains", value="a")])
    assert rules.applies_to(with_rule, MetricOptions()) is True
    assert rules.applies_to(Case(id="n", input="q"), MetricOptions()) is False


def test_the_metric_decorator_keeps_the_function_and_takes_the_first_doc_paragraph(monkeypatch) -> None:
    """``@metric`` returns the function itself (the module keeps a callable) and describes the metric by
    its docstring's first paragraph, whitespace collapsed; no docstring gives an empty description."""
    from evalgate.metrics import registry

    monkeypatch.setattr(registry, "REGISTRY", {})

    @registry.metric("probe", family="test")
    def probe(case, answer, ctx):  # type: ignore[no-untyped-def]
        """Counts   the
        probe.

        Not part of the description."""
        return 1.0

    @registry.metric("bare", family="test")
    def bare(case, answer, ctx):  # type: ignore[no-untyped-def]
        return 0.0

    assert probe(None, None, None) == 1.0 and bare(None, None, None) == 0.0
    assert registry.REGISTRY["probe"].fn is probe
    assert registry.REGISTRY["probe"].description == "Counts the probe."
    assert registry.REGISTRY["bare"].description == ""


def test_metric_flags_and_the_metrics_that_depend_on_the_judge(monkeypatch) -> None:
    """``applies`` may take (case) or (case, options); a judged metric uses the judge unless told not to,
    and anything depending on one that does (directly or through another) depends on the judge too."""
    from evalgate.metrics import registry

    monkeypatch.setattr(registry, "REGISTRY", {})
    fn = lambda case, answer, ctx: 0.0  # noqa: E731
    registry.metric("judged", family="t", kind="judged", applies=lambda case, options: options == "on")(fn)
    registry.metric("judged_offline", family="t", kind="judged", uses_judge=False)(fn)
    registry.metric("plain", family="t", applies=lambda case: True)(fn)
    registry.metric("derived", family="t", depends_on=("judged",))(fn)
    registry.metric("derived_twice", family="t", depends_on=("derived",))(fn)
    registry.metric("derived_offline", family="t", depends_on=("judged_offline", "plain"))(fn)
    metrics = registry.REGISTRY
    assert metrics["judged"].applies_to(None, "on") and not metrics["judged"].applies_to(None, "off")
    assert metrics["plain"].applies_to(None, "anything")
    assert (metrics["judged"].uses_judge, metrics["judged_offline"].uses_judge, metrics["plain"].uses_judge) == (
        True, False, False)
    assert registry.judge_dependent(metrics) == frozenset({"judged", "derived", "derived_twice"})
    assert registry.judge_dependent({"plain": metrics["plain"]}) == frozenset()
