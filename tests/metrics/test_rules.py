"""Seed 002 deterministic rule checks: every rule type passing and failing, category rules, the
unavailable/skipped paths, properties, and the bundled black-box suite."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from evalgate.config.options import MetricOptions
from evalgate.metrics.registry import REGISTRY, MetricContext, MetricSkipped, MetricUnavailable
from evalgate.metrics.rules import (
    category_rules,
    count_answer_tokens,
    evaluate_rule,
    parse_json_output,
    rule_label,
    rules,
)
from evalgate.model import Answer, Case, RuleCheck

ROOT = Path(__file__).resolve().parents[2]


def rule(type_: str, value: Any = None, **extra: Any) -> RuleCheck:
    return RuleCheck.model_validate({"type": type_, "value": value, **extra})


def check(rule_: RuleCheck, output: str | None = None, **answer: Any) -> tuple[bool | None, str]:
    outcome = evaluate_rule(rule_, Answer(output=output, **answer))
    return outcome.passed, outcome.reason


def ctx(**options: Any) -> MetricContext:
    return MetricContext(options=MetricOptions(**options))


def case(**fields: Any) -> Case:
    return Case.model_validate({"id": "bb", "input": "q", **fields})


# --- every rule type, passing and failing -----------------------------------------------------------


@pytest.mark.parametrize(
    ("rule_", "output", "passed"),
    [
        (rule("contains", "hold"), "You should HOLD him.", True),
        (rule("contains", "hold"), "Drop him.", False),
        (rule("contains", "HOLD", case_sensitive=True), "hold him", False),
        (rule("contains", ["hold", "injury report"]), "Hold; check the injury report.", True),
        (rule("contains", ["hold", "injury report"]), "Hold him.", False),
        (rule("not_contains", "as an AI"), "Hold him.", True),
        (rule("not_contains", "as an AI"), "As an ai model I think", False),
        (rule("not_contains", "As an AI", case_sensitive=True), "as an ai", True),
        (rule("not_contains", ["drop", "cut"]), "Keep him.", True),
        (rule("not_contains", ["drop", "cut"]), "Cut him.", False),
        (rule("regex", r"\b61\b"), "a 61-point gap", True),
        (rule("regex", r"\b61\b"), "a 610-point gap", False),
        (rule("regex", "brunson"), "Start Brunson", True),
        (rule("regex", "brunson", case_sensitive=True), "Start Brunson", False),
        (rule("regex", [r"\bwon\b", r"\blost\b"]), "You won 6 and lost 3", True),
        (rule("regex", [r"\bwon\b", r"\blost\b"]), "You won 6", False),
        (rule("not_regex", r"\bdrop (him|giannis)\b"), "Hold Giannis.", True),
        (rule("not_regex", r"\bdrop (him|giannis)\b"), "Just DROP Giannis now.", False),
        (rule("not_regex", "DROP", case_sensitive=True), "drop", True),
        (rule("is_json"), '{"name": "Naz Reid"}', True),
        (rule("is_json"), "  [1, 2, 3]\n", True),
        (rule("is_json"), '```json\n[{"name": "Naz Reid"}]\n```', True),
        (rule("is_json"), '```\n{"a": 1}\n```', True),
        (rule("is_json"), 'Here you go:\n```json\n{"a": 1}\n```', False),
        (rule("is_json"), '```json\n{"a": 1}\n```\n```json\n{"b": 2}\n```', False),
        (rule("is_json"), "{name: 'Naz'}", False),
        (rule("is_json"), "", False),
        (rule("min_length", 10), "  0123456789  ", True),
        (rule("min_length", 10), "012345678", False),
        (rule("max_length", 5), "abcde\n", True),
        (rule("max_length", 5), "abcdef", False),
    ],
)
def test_text_rules(rule_: RuleCheck, output: str, passed: bool) -> None:
    assert check(rule_, output)[0] is passed


def test_reasons_are_short_and_specific() -> None:
    assert check(rule("contains", ["hold", "official", "report"]), "nothing")[1] == "missing 'hold' (+2 more)"
    assert check(rule("not_contains", "drop"), "Drop him")[1] == "contains 'drop'"
    assert check(rule("not_regex", r"drop \w+"), "please drop Giannis today")[1] == r"/drop \w+/ matched 'drop Giannis'"
    assert check(rule("regex", r"\d+%"), "none")[1] == r"no match for /\d+%/"
    assert check(rule("max_length", 3), "abcd")[1] == "4 chars (max 3)"
    assert check(rule("is_json"), "nope")[1].startswith("not JSON: ")
    long = check(rule("contains", "x" * 200), "y")[1]
    assert len(long) < 80 and long.endswith("…'")


def test_max_tokens_uses_the_reported_count() -> None:
    assert check(rule("max_tokens", 100), "short", num_tokens=100) == (True, "100 tokens, reported (max 100)")
    assert check(rule("max_tokens", 100), "short", num_tokens=101)[0] is False


def test_max_tokens_falls_back_to_chars_over_four(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "evalgate.text.tokens", None)  # import fails
    assert count_answer_tokens("x" * 41) == (10, "chars/4")
    assert check(rule("max_tokens", 10), "x" * 43) == (True, "10 tokens, chars/4 (max 10)")
    assert check(rule("max_tokens", 10), "x" * 44)[0] is False


def test_max_tokens_uses_the_token_counter_when_present(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("evalgate.text.tokens")
    fake.count_tokens = lambda text: (len(text.split()), "words")  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "evalgate.text.tokens", fake)
    assert check(rule("max_tokens", 3), "one two three") == (True, "3 tokens, words (max 3)")
    assert check(rule("max_tokens", 2), "one two three")[0] is False
    fake.count_tokens = lambda text: len(text)  # type: ignore[attr-defined]
    assert check(rule("max_tokens", 13), "one two three") == (True, "13 tokens, tokenizer (max 13)")


def test_max_latency() -> None:
    assert check(rule("max_latency", 5000), "x", latency_ms=4999.5) == (True, "4999.5 ms (max 5000 ms)")
    assert check(rule("max_latency", 5000), "x", latency_ms=5000.1)[0] is False
    assert check(rule("max_latency", 5000), "x") == (None, "the target reported no latency")


def test_text_rules_without_output_cannot_be_evaluated() -> None:
    assert check(rule("contains", "x"), None)[0] is None
    assert check(rule("max_tokens", 5), None)[0] is None
    assert check(rule("max_tokens", 5), None, num_tokens=3)[0] is True
    assert check(rule("max_latency", 5), None, latency_ms=3)[0] is True


def test_parse_json_output() -> None:
    assert parse_json_output('```JSON\n{"a": [1]}```') == {"a": [1]}
    with pytest.raises(ValueError):
        parse_json_output("``` not json ```")


def test_labels() -> None:
    assert rule_label(rule("contains", "hold")) == "contains:hold"
    assert rule_label(rule("is_json")) == "is_json"
    assert rule_label(rule("is_json", name="valid-json")) == "valid-json"
    assert rule_label(rule("max_length", 900)) == "max_length:900"


# --- the registered metric --------------------------------------------------------------------------


def test_rules_fraction_and_details() -> None:
    checks = [
        {"type": "contains", "value": "hold"},
        {"type": "regex", "value": r"\d"},
        {"type": "max_length", "value": 5},
    ]
    score = rules(case(rules=checks), Answer(output="Hold him for 2 weeks"), ctx())
    assert score.value == pytest.approx(2 / 3)
    assert score.details["passed"] == 2 and score.details["failed"] == 1 and score.details["unevaluated"] == 0
    assert score.details["checks"][2] == {
        "label": "max_length:5",
        "type": "max_length",
        "passed": False,
        "reason": "20 chars (max 5)",
        "origin": "case",
    }


def test_category_rules_are_added() -> None:
    options = {"category_rules": {"safety": [{"type": "not_contains", "value": "drop", "name": "no-drop"}]}}
    safety = case(category="Safety", rules=[{"type": "contains", "value": "hold"}])
    score = rules(safety, Answer(output="Hold him, don't drop him"), ctx(**options))
    assert score.value == 0.5
    assert [c["origin"] for c in score.details["checks"]] == ["case", "category:Safety"]
    assert score.details["checks"][1]["label"] == "no-drop"
    # only the category's rules
    assert rules(case(category="safety"), Answer(output="keep"), ctx(**options)).value == 1.0


def test_category_lookup() -> None:
    by_category = {"safety": [rule("contains", "a")], "Math": [rule("regex", r"\d")]}
    assert len(category_rules("safety", by_category)) == 1
    assert len(category_rules(" MATH ", by_category)) == 1
    assert category_rules("waiver", by_category) == []
    assert category_rules(None, by_category) == []


def test_no_rules_anywhere_is_skipped() -> None:
    with pytest.raises(MetricSkipped, match="no rules"):
        rules(case(category="waiver"), Answer(output="x"), ctx())


def test_unevaluated_check_makes_an_otherwise_passing_case_unavailable() -> None:
    checks = [{"type": "contains", "value": "hold"}, {"type": "max_latency", "value": 1000}]
    with pytest.raises(MetricUnavailable, match="max_latency:1000") as raised:
        rules(case(rules=checks), Answer(output="hold"), ctx())
    assert raised.value.details["unevaluated"] == 1


def test_failed_check_is_reported_even_when_another_cannot_run() -> None:
    checks = [{"type": "contains", "value": "hold"}, {"type": "max_latency", "value": 1000}]
    score = rules(case(rules=checks), Answer(output="drop him"), ctx())
    assert score.value == 0.0
    assert score.details["unevaluated"] == 1 and score.details["failed"] == 1


def test_applies_and_registration() -> None:
    metric = REGISTRY["rules"]
    assert metric.default_threshold == 1.0 and metric.direction == "higher"
    plain = MetricOptions()
    with_math = MetricOptions(category_rules={"Math": [RuleCheck(type="is_json")]})
    assert metric.applies_to(case(rules=[{"type": "is_json"}]), plain)
    assert metric.applies_to(case(category="math"), with_math)  # category names match ignoring case
    assert not metric.applies_to(case(category="math"), plain)  # no rules anywhere: not applied at all
    assert not metric.applies_to(case(), with_math)
    assert not metric.applies_to(case(category="  "), with_math)


# --- properties -------------------------------------------------------------------------------------

rule_pool = st.sampled_from(
    [
        rule("contains", "hold"),
        rule("contains", ["a", "b"], case_sensitive=True),
        rule("not_contains", "drop"),
        rule("regex", r"\d+"),
        rule("not_regex", r"^\s*$"),
        rule("is_json"),
        rule("max_tokens", 20),
        rule("max_latency", 100),
        rule("min_length", 3),
        rule("max_length", 50),
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    case_rules=st.lists(rule_pool, max_size=5),
    category=st.none() | st.sampled_from(["safety", "math", ""]),
    output=st.none() | st.text(max_size=200),
    num_tokens=st.none() | st.integers(min_value=0, max_value=100),
    latency=st.none() | st.floats(min_value=0, max_value=1e6, allow_nan=False),
)
def test_bounded_and_only_expected_exceptions(
    case_rules: list[RuleCheck],
    category: str | None,
    output: str | None,
    num_tokens: int | None,
    latency: float | None,
) -> None:
    options = ctx(category_rules={"safety": [rule("not_contains", "drop")]})
    checked = case(rules=[r.model_dump() for r in case_rules], category=category)
    answer = Answer(output=output, num_tokens=num_tokens, latency_ms=latency)
    try:
        score = rules(checked, answer, options)
    except (MetricSkipped, MetricUnavailable):
        return
    assert 0.0 <= score.value <= 1.0
    evaluated = [c for c in score.details["checks"] if c["passed"] is not None]
    assert score.value == pytest.approx(sum(c["passed"] for c in evaluated) / len(evaluated))


@settings(max_examples=200, deadline=None)
@given(needle=st.text(min_size=1, max_size=10), text=st.text(max_size=100))
def test_contains_and_not_contains_are_complements(needle: str, text: str) -> None:
    assert check(rule("contains", needle), text)[0] is not check(rule("not_contains", needle), text)[0]


# --- the bundled suites -----------------------------------------------------------------------------


def _suite(path: Path) -> tuple[dict[str, Any], list[Case]]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data.get("suite", {}), [Case.model_validate(row) for row in data["cases"]]


def _recorded(case_: Case) -> Answer:
    return Answer(output=case_.output, num_tokens=case_.num_tokens, latency_ms=case_.latency_ms)


def test_blackbox_suite_passes_with_and_without_the_suite_block() -> None:
    suite, cases = _suite(ROOT / "datasets/blackbox-agent/cases.yaml")
    assert 10 <= len(cases) <= 20 and len({c.id for c in cases}) == len(cases)
    assert {"safety_star_rumor_01", "supervisor_do_not_drop_star", "routing_matchup_review_not_optimizer"} <= {
        c.id for c in cases
    }
    assert sum(c.is_critical for c in cases) >= 2
    assert any(c.language == "el" for c in cases)
    with_block = ctx(**suite["options"])
    covered = set()
    for blackbox in cases:
        assert blackbox.rules and blackbox.output, blackbox.id
        for context in (with_block, ctx()):
            score = rules(blackbox, _recorded(blackbox), context)
            assert score.value == 1.0, (blackbox.id, score.details)
        covered |= {c.type for c in blackbox.rules}
    assert covered >= {"contains", "not_contains", "regex", "not_regex", "is_json", "max_tokens", "max_length"}


def test_blackbox_regressions_fail_including_a_critical_case() -> None:
    _, cases = _suite(ROOT / "datasets/failing/blackbox-agent-regressions.yaml")
    assert any(c.is_critical for c in cases)
    for blackbox in cases:
        assert blackbox.description, blackbox.id
        assert rules(blackbox, _recorded(blackbox), ctx()).value < 1.0, blackbox.id


def test_rule_reasons_and_case_sensitive_patterns_at_their_edges() -> None:
    """Snippets keep up to 60 characters and cut longer text to 59 + '…'; one more missing item is
    '(+1 more)'; case-sensitive patterns with quantifiers match by case."""
    exact, over = "x" * 60, "x" * 61
    assert check(rule("contains", exact), "y")[1] == f"missing {exact!r}"
    assert check(rule("contains", over), "y")[1] == f"missing {'x' * 59 + '…'!r}"
    assert check(rule("contains", ["a1", "b2"]), "zzz")[1] == "missing 'a1' (+1 more)"
    assert check(rule("regex", r"ID-\d+", case_sensitive=True), "ref ID-42")[0] is True
    assert check(rule("regex", r"ID-\d+", case_sensitive=True), "ref id-42")[0] is False
    assert check(rule("not_regex", r"DROP \w+", case_sensitive=True), "drop him")[0] is True
    assert check(rule("not_regex", r"DROP \w+", case_sensitive=True), "DROP him") == (False, "/DROP \\w+/ matched 'DROP him'")
