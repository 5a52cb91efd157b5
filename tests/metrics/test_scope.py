"""Scope of user metrics (``categories`` / ``tags`` / ``run``): which cases a declared judged metric and a
code check run on."""

from __future__ import annotations

import re

import pytest

from evalgate.dataset.views import AnswerView, CaseView
from evalgate.metrics.checks import check_metric, make_spec
from evalgate.metrics.criteria import declaration_metric
from evalgate.metrics.registry import in_scope
from evalgate.model import Case, MetricDeclaration

BILLING_URGENT = Case(id="a", input="q", category="billing", tags=["urgent", "en"])
BILLING = Case(id="b", input="q", category="billing", tags=["en"])
SHIPPING_URGENT = Case(id="c", input="q", category="shipping", tags=["urgent"])
UNCATEGORISED = Case(id="d", input="q")
CASES = (BILLING_URGENT, BILLING, SHIPPING_URGENT, UNCATEGORISED)


@pytest.mark.parametrize(("categories", "tags", "expected"), [
    (None, None, ["a", "b", "c", "d"]),
    (("billing",), None, ["a", "b"]),
    (None, ("urgent",), ["a", "c"]),
    (("billing",), ("urgent",), ["a"]),
    (("billing", "shipping"), ("urgent", "fr"), ["a", "c"]),
    ((), None, []),
    (None, (), []),
])
def test_in_scope_needs_a_listed_category_and_any_listed_tag(
        categories: tuple[str, ...] | None, tags: tuple[str, ...] | None, expected: list[str]) -> None:
    assert [case.id for case in CASES if in_scope(case, categories, tags)] == expected


def _always(case: CaseView, answer: AnswerView) -> bool:
    return True


def test_declared_and_code_metrics_apply_to_their_scope_only() -> None:
    declared = declaration_metric(MetricDeclaration(name="polite", criteria="Is it polite?",
                                                    categories=["billing"], tags=["urgent"]), "suite")
    assert [case.id for case in CASES if declared.applies_to(case, None)] == ["a"]
    asked = declaration_metric(MetricDeclaration(name="polite", criteria="Is it polite?", categories=["billing"],
                                                 run="asked"), "suite")
    assert [case.id for case in CASES if asked.applies_to(case, None)] == []  # only cases that name it
    check = check_metric(make_spec(_always, where="t"), origin="t", tags=("urgent",))
    assert [case.id for case in CASES if check.applies_to(case, None)] == ["a", "c"]
    own_rule = check_metric(make_spec(_always, applies=lambda case: case.id != "a", where="t"), origin="t",
                            categories=("billing",))
    assert [case.id for case in CASES if own_rule.applies_to(case, None)] == ["b"]
    unscoped_off = check_metric(make_spec(_always, where="t"), origin="t", run_on_all=False)
    assert [case.id for case in CASES if unscoped_off.applies_to(case, None)] == []


@pytest.mark.parametrize(("given", "expected"), [
    (0.7, 0.7),
    ({"min": 0.4}, {"min": 0.4}),
    ({"max": 0.2}, {"max": 0.2}),
    ({"gt": 0.5}, {"gt": 0.5}),  # the strict bounds every other threshold accepts
    ({"lt": 0.5}, {"lt": 0.5}),
])
def test_a_declared_metric_takes_every_threshold_form(given: object, expected: object) -> None:
    declared = MetricDeclaration(name="polite", criteria="Is it polite?", threshold=given)
    threshold = declared.threshold
    assert (threshold if isinstance(threshold, float) else threshold.model_dump()) == expected  # type: ignore[union-attr]


@pytest.mark.parametrize(("given", "message"), [
    ({"minimum": 0.4}, "got keys ['minimum']"),
    ({"min": 0.4, "max": 0.9}, "got keys ['max', 'min']"),
    ({"gt": "high"}, "with a number x"),
    (float("nan"), "finite"),
])
def test_a_declared_metric_names_what_a_threshold_may_be(given: object, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        MetricDeclaration(name="polite", criteria="Is it polite?", threshold=given)
