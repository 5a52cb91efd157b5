"""Retrieval metrics (seed 000 hit rate / MRR, precision@k, recall@k): hand-computed values, source
normalisation, a cross-check against ir-measures (pytrec_eval) and property tests."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalgate.config.options import MetricOptions
from evalgate.metrics.registry import MetricContext, MetricSkipped, MetricUnavailable, Score, get_metric
from evalgate.metrics.retrieval import (
    SourceMatch,
    hit_rate,
    match_sources,
    mrr,
    normalize_source,
    precision_at_k,
    recall_at_k,
)
from evalgate.model import Answer, Case

ROOT = Path(__file__).resolve().parents[2]
RETRIEVAL = (hit_rate, mrr, precision_at_k, recall_at_k)


def ctx(k: int = 5) -> MetricContext:
    return MetricContext(options=MetricOptions(k=k))


def score(fn: Any, expected: list[str], returned: list[str] | None, k: int = 5) -> Score:
    case = Case(input="question", expected_sources=expected)
    return fn(case, Answer(sources=returned), ctx(k))


# --- normalisation -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("https://en.wikipedia.org/wiki/Consumer_behaviour", "consumer behaviour"),
        ("http://en.m.wikipedia.org/wiki/Buyer%27s_remorse", "buyer's remorse"),
        ("de.wikipedia.org/wiki/Konsumentenverhalten", "konsumentenverhalten"),
        ("https://en.wikipedia.org/wiki/Scarcity_(social_psychology)#Marketing", "scarcity (social psychology)"),
        ("https://en.wikipedia.org/wiki/Why%3F?oldid=12", "why?"),
        ("  Consumer \t  Behaviour ", "consumer behaviour"),
        ("Consumer%20behaviour", "consumer behaviour"),
        ("Net_Promoter_Score", "net promoter score"),
        ("https://Example.COM/docs/Guide/?q=1#top", "example.com/docs/guide"),
        ("100% Pure", "100% pure"),
        ("Straße", "strasse"),
        ("   ", ""),
    ],
)
def test_normalize_source(raw: str, key: str) -> None:
    assert normalize_source(raw) == key


def test_url_title_and_case_variants_are_one_source() -> None:
    found = match_sources(
        ["Consumer behaviour"],
        ["https://en.wikipedia.org/wiki/Consumer_behaviour", "consumer behaviour", "Consumer_Behaviour"],
    )
    assert found.returned == ("consumer behaviour",)
    assert found.ranks == {"consumer behaviour": 1}


# --- hand-computed values ------------------------------------------------------------------------


EXPECTED = ["Consumer behaviour", "Behavioral economics"]
RETURNED = ["Marketing", "https://en.wikipedia.org/wiki/Behavioral_economics", "Consumer_behaviour"]


def test_hit_rate_and_mrr_by_hand() -> None:
    assert score(hit_rate, EXPECTED, RETURNED).value == 1.0
    assert score(mrr, EXPECTED, RETURNED).value == 0.5  # first expected source at rank 2


def test_precision_and_recall_at_k_by_hand() -> None:
    assert score(precision_at_k, EXPECTED, RETURNED).value == pytest.approx(2 / 5)
    assert score(recall_at_k, EXPECTED, RETURNED).value == 1.0
    assert score(precision_at_k, EXPECTED, RETURNED, k=2).value == 0.5  # 1 relevant in top 2
    assert score(recall_at_k, EXPECTED, RETURNED, k=2).value == 0.5
    assert score(precision_at_k, EXPECTED, RETURNED, k=1).value == 0.0
    assert score(recall_at_k, EXPECTED, RETURNED, k=1).value == 0.0


def test_rank_three_gives_one_third() -> None:
    value = score(
        mrr, ["Price elasticity of demand"], ["Demand curve", "Reference price", "Price elasticity of demand"]
    )
    assert value.value == pytest.approx(1 / 3)
    assert value.details["first_rank"] == 3


def test_duplicate_returned_sources_count_once_at_first_rank() -> None:
    returned = ["Marketing", "marketing", "https://en.wikipedia.org/wiki/Marketing", "Consumer behaviour"]
    result = score(mrr, ["Consumer behaviour"], returned)
    assert result.value == 0.5
    assert score(precision_at_k, ["Consumer behaviour", "Marketing"], returned, k=2).value == 1.0


def test_duplicate_expected_sources_count_once() -> None:
    assert score(recall_at_k, ["Loss aversion", "loss_aversion"], ["Loss aversion"]).value == 1.0


def test_miss_scores_zero_everywhere() -> None:
    for fn in RETRIEVAL:
        result = score(fn, ["Decoy effect"], ["Pricing strategies", "Marketing"])
        assert result.value == 0.0
        assert result.details["first_rank"] is None
        assert result.details["matched"] == []


def test_empty_returned_list_is_a_miss_not_an_error() -> None:
    for fn in RETRIEVAL:
        assert score(fn, ["Endowment effect"], []).value == 0.0


def test_no_sources_at_all_is_unavailable() -> None:
    for fn in RETRIEVAL:
        with pytest.raises(MetricUnavailable, match="target returned no sources"):
            score(fn, ["Endowment effect"], None)


def test_blank_expected_sources_are_unavailable() -> None:
    with pytest.raises(MetricUnavailable, match="blank"):
        score(hit_rate, ["  ", "_"], ["Marketing"])


def test_details_list_matches_in_rank_order_and_truncate_returned() -> None:
    returned = [f"Article {i}" for i in range(30)]
    result = score(hit_rate, ["article 25", "Article 3"], returned)
    assert result.details["matched"] == ["Article 3", "Article 25"]
    assert result.details["first_rank"] == 4
    assert result.details["returned"] == returned[:20]
    assert result.details["returned_count"] == 30
    assert result.details["expected"] == 2
    assert score(precision_at_k, ["Article 3"], returned, k=7).details["k"] == 7


def test_match_is_computed_once_per_case() -> None:
    case = Case(input="q", expected_sources=["A"])
    context = ctx()
    hit_rate(case, Answer(sources=["A"]), context)
    assert isinstance(context.memo["retrieval:sources"], SourceMatch)
    # a later metric of the family reuses the memo, even if handed a different answer
    assert mrr(case, Answer(sources=["B", "C"]), context).value == 1.0


def test_registration() -> None:
    assert (get_metric("hit_rate").default_threshold, get_metric("hit_rate").default_op) == (0.80, "min")
    assert get_metric("mrr").default_threshold is None  # seed 000's "> 0.70" is its dialect's (evalgate.dialects)
    for name in ("precision_at_k", "recall_at_k"):
        assert get_metric(name).default_threshold is None
    for name in ("hit_rate", "mrr", "precision_at_k", "recall_at_k"):
        registered = get_metric(name)
        assert registered.direction == "higher"
        assert registered.family == "retrieval"
        assert registered.value_range == (0.0, 1.0)
        assert registered.applies(Case(input="q", expected_sources=["A"]))
        assert not registered.applies(Case(input="q"))
        assert not registered.applies(Case(input="q", expected_sources=[]))
    assert "1/rank" in get_metric("mrr").description


# --- cross-check against ir-measures (pytrec_eval) ----------------------------------------------


def _random_queries(count: int, seed: int) -> list[tuple[set[str], list[str]]]:
    """(relevant docs, run ranked by distinct descending scores) per query."""
    rng = random.Random(seed)
    queries = []
    for _ in range(count):
        pool = [f"D{i}" for i in range(rng.randint(5, 40))]
        relevant = set(rng.sample(pool, rng.randint(1, min(6, len(pool)))))
        run = rng.sample(pool, rng.randint(1, len(pool)))
        scores = rng.sample(range(10_000), len(run))  # distinct: no ties for trec_eval to break
        ranked = [doc for _, doc in sorted(zip(scores, run, strict=True), reverse=True)]
        queries.append((relevant, ranked))
    return queries


def test_cross_check_with_ir_measures() -> None:
    ir_measures = pytest.importorskip("ir_measures", reason="ir-measures (test dependency) not installed")
    from ir_measures import RR, P, R, Success

    queries = _random_queries(300, seed=20261122)
    qrels = [ir_measures.Qrel(f"q{i}", doc, 1) for i, (rel, _) in enumerate(queries) for doc in rel]
    run = [
        ir_measures.ScoredDoc(f"q{i}", doc, float(len(ranked) - rank))
        for i, (_, ranked) in enumerate(queries)
        for rank, doc in enumerate(ranked)
    ]
    measures = [Success @ 1000, RR, P @ 5, R @ 5, P @ 3, R @ 3]
    reference: dict[tuple[str, str], float] = {
        (m.query_id, str(m.measure)): m.value for m in ir_measures.iter_calc(measures, qrels, run)
    }
    checked = 0
    for i, (relevant, ranked) in enumerate(queries):
        expected, qid = sorted(relevant), f"q{i}"
        ours = {
            "Success@1000": score(hit_rate, expected, ranked).value,
            "RR": score(mrr, expected, ranked).value,
            "P@5": score(precision_at_k, expected, ranked, k=5).value,
            "R@5": score(recall_at_k, expected, ranked, k=5).value,
            "P@3": score(precision_at_k, expected, ranked, k=3).value,
            "R@3": score(recall_at_k, expected, ranked, k=3).value,
        }
        for name, value in ours.items():
            assert value == pytest.approx(reference.get((qid, name), 0.0), abs=1e-9), (qid, name)
            checked += 1
    assert checked == 300 * 6
    assert 0 < sum(score(hit_rate, sorted(r), q).value for r, q in queries) < 300  # both outcomes occur


# --- properties ----------------------------------------------------------------------------------


titles = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=24)


@settings(max_examples=300, deadline=None)
@given(
    expected=st.lists(titles, min_size=1, max_size=6),
    returned=st.none() | st.lists(titles, max_size=12),
    k=st.integers(min_value=1, max_value=15),
)
def test_values_bounded_and_only_metric_exceptions(expected: list[str], returned: list[str] | None, k: int) -> None:
    case = Case(input="q", expected_sources=expected)
    context = ctx(k)
    for fn in RETRIEVAL:
        try:
            value = fn(case, Answer(sources=returned), context).value
        except (MetricSkipped, MetricUnavailable):
            continue
        assert 0.0 <= value <= 1.0
        if fn is hit_rate:
            assert value in (0.0, 1.0)
        if fn is mrr:
            assert value == 0.0 or math.isclose(1 / value, round(1 / value))
        if fn is precision_at_k:
            assert math.isclose(value * k, round(value * k))


# --- the bundled seed 000 suites ------------------------------------------------------------------


def _recorded_answer(case: Case) -> Answer:
    return Answer(output=case.output, sources=case.sources, num_tokens=case.num_tokens)


def _averages(cases: list[Case]) -> dict[str, float]:
    totals: dict[str, list[float]] = {"hit_rate": [], "mrr": []}
    for case in cases:
        context = ctx()
        totals["hit_rate"].append(hit_rate(case, _recorded_answer(case), context).value)
        totals["mrr"].append(mrr(case, _recorded_answer(case), context).value)
    return {name: sum(values) / len(values) for name, values in totals.items()}


def test_wikipedia_demo_suite_passes_seed_thresholds() -> None:
    raw = json.loads((ROOT / "datasets/wikipedia-agent/ground_truth.json").read_text(encoding="utf-8"))
    assert isinstance(raw, list) and 10 <= len(raw) <= 20
    assert all("id" not in item and item["question"] and item["expected_sources"] for item in raw)
    cases = [Case.model_validate(item) for item in raw]
    assert len({c.id for c in cases}) == len(cases)
    averages = _averages(cases)
    assert averages["hit_rate"] == pytest.approx(15 / 16)  # one miss (redirect title)
    assert averages["mrr"] == pytest.approx((13 + 1 / 2 + 1 / 3) / 16)  # ranks 2 and 3 once each
    assert averages["hit_rate"] >= 0.80 and averages["mrr"] >= 0.70


def test_wikipedia_failing_suite_fails_every_case() -> None:
    yaml = pytest.importorskip("yaml")
    raw = yaml.safe_load((ROOT / "datasets/failing/wikipedia-agent-regressions.yaml").read_text(encoding="utf-8"))
    cases = [Case.model_validate(item) for item in raw]
    assert cases
    for case in cases:
        context = ctx()
        hit = hit_rate(case, _recorded_answer(case), context).value
        reciprocal = mrr(case, _recorded_answer(case), context).value
        assert hit < 0.80 or reciprocal < 0.70, case.input
        assert case.description


def test_context_mrr_hand_computed() -> None:
    """Reference 'Reset the press within 5 minutes' has 6 words. Chunks: '' (no word: 0), 'nothing related'
    (0/6), 'the press: reset it' (3/6 = 0.5 ≥ 0.25: first relevant, rank 3), the reference itself (6/6).
    MRR = 1/3; overlaps are rounded to 6 places."""
    from evalgate.metrics.retrieval import context_mrr

    case = Case(input="q", expected_output="Reset the press within 5 minutes")
    chunks = ["", "nothing related", "the press: reset it", "Reset the press within 5 minutes", "press it"]
    scored = context_mrr(case, Answer(output="a", debug_context=chunks), ctx())
    assert scored.value == pytest.approx(1 / 3)
    assert scored.details == {"first_relevant_rank": 3, "chunks": 5, "overlaps": [0.0, 0.0, 0.5, 1.0, 0.166667],
                              "min_overlap": 0.25, "reference_words": 6}
    none = context_mrr(case, Answer(output="a"), ctx())
    assert none.value == 0.0 and none.details["reason"] == "the target returned no debug_context"
    blank_reference = context_mrr(Case(input="q", expected_output="   "), Answer(output="a", debug_context=chunks), ctx())
    assert blank_reference.value == 0.0 and blank_reference.details["reference_words"] == 0


def test_context_mrr_overlap_exactly_at_the_minimum_counts() -> None:
    """1 of 4 reference words is 0.25, the default minimum (also without options): relevant at rank 1."""
    from evalgate.metrics.retrieval import context_mrr

    case = Case(input="q", expected_output="alpha beta gamma delta")
    answer = Answer(output="a", debug_context=["alpha only"])
    assert context_mrr(case, answer, ctx()).value == 1.0
    assert context_mrr(case, answer, MetricContext(options=None)).value == 1.0
    stricter = MetricContext(options=MetricOptions(context_mrr_min_overlap=0.26))
    assert context_mrr(case, answer, stricter).value == 0.0
