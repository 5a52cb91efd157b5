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
