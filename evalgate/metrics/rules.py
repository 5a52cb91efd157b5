"""Deterministic rule checks: hard pass/fail constraints on the answer that run without a
judge. A case's checks are its own ``rules`` plus the rules its category has in the suite options
(``category_rules``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from evalgate.config.options import MetricOptions
from evalgate.metrics.registry import MetricContext, MetricSkipped, MetricUnavailable, Score, metric

if TYPE_CHECKING:
    from evalgate.model import Answer, Case, RuleCheck

FAMILY = "rules"
_SNIPPET = 60
_FENCE = re.compile(r"\A```[ \t]*(?:json)?[ \t]*\n(.*?)\n?```\Z", re.DOTALL | re.IGNORECASE)

Verdict = tuple[bool | None, str]
"""(passed, reason); passed is None when the check could not be evaluated."""


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    """The result of one rule check on one answer."""

    label: str
    type: str
    passed: bool | None
    reason: str
    origin: str

    def as_dict(self) -> dict[str, Any]:
        """``dataclasses.asdict(self)`` (every field is a plain value), without its deep copy."""
        return {"label": self.label, "type": self.type, "passed": self.passed, "reason": self.reason,
                "origin": self.origin}


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _SNIPPET else text[: _SNIPPET - 1] + "…"


def _number(value: float) -> str:
    return f"{value:g}"


def _texts(rule: RuleCheck) -> list[str]:
    return [str(v) for v in rule.value] if isinstance(rule.value, list) else [str(rule.value)]


def _limit(rule: RuleCheck) -> float:
    return float(cast(float, rule.value))  # the model guarantees a number for the limit rules


# --- one function per rule type: (rule, answer) -> (passed, reason) --------------------------------


def _contains(rule: RuleCheck, text: str) -> Verdict:
    fold = (lambda s: s) if rule.case_sensitive else str.casefold
    absent = [n for n in _texts(rule) if fold(n) not in fold(text)]
    if absent:
        return False, f"missing {_short(absent[0])!r}" + (f" (+{len(absent) - 1} more)" if len(absent) > 1 else "")
    return True, "all present"


def _not_contains(rule: RuleCheck, text: str) -> Verdict:
    fold = (lambda s: s) if rule.case_sensitive else str.casefold
    present = [n for n in _texts(rule) if fold(n) in fold(text)]
    if present:
        return False, f"contains {_short(present[0])!r}"
    return True, "none present"


def _regex(rule: RuleCheck, text: str) -> Verdict:
    flags = 0 if rule.case_sensitive else re.IGNORECASE
    unmatched = [p for p in _texts(rule) if re.search(p, text, flags) is None]
    if unmatched:
        return False, f"no match for /{_short(unmatched[0])}/"
    return True, "matched"


def _not_regex(rule: RuleCheck, text: str) -> Verdict:
    flags = 0 if rule.case_sensitive else re.IGNORECASE
    for pattern in _texts(rule):
        found = re.search(pattern, text, flags)
        if found is not None:
            return False, f"/{_short(pattern)}/ matched {_short(found.group(0))!r}"
    return True, "no match"


def parse_json_output(text: str) -> Any:
    """Parse ``text`` as JSON, accepting an answer that is exactly one ```json fenced block.

    Raises ValueError when it is not JSON.
    """
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    return json.loads(fenced.group(1) if fenced else stripped)


def _is_json(rule: RuleCheck, text: str) -> Verdict:
    try:
        parse_json_output(text)
    except ValueError as exc:
        return False, f"not JSON: {_short(str(exc))}"
    return True, "valid JSON"


def _min_length(rule: RuleCheck, text: str) -> Verdict:
    size = len(text.strip())
    return size >= _limit(rule), f"{size} chars (min {_number(_limit(rule))})"


def _max_length(rule: RuleCheck, text: str) -> Verdict:
    size = len(text.strip())
    return size <= _limit(rule), f"{size} chars (max {_number(_limit(rule))})"


def count_answer_tokens(text: str) -> tuple[int, str]:
    """Tokens in ``text`` and how they were counted: ``evalgate.text.tokens.count_tokens`` (its
    tokenizer's name), or ``len(text) // 4`` (``chars/4``) when that module cannot be imported."""
    try:
        from evalgate.text.tokens import count_tokens  # optional: chars/4 without the tokenizer module
    except ImportError:
        return len(text) // 4, "chars/4"
    counted = count_tokens(text)
    if isinstance(counted, tuple):  # (count, tokenizer name)
        return int(counted[0]), str(counted[1])
    return int(counted), "tokenizer"


def _max_tokens(rule: RuleCheck, answer: Answer) -> Verdict:
    if answer.num_tokens is not None:
        tokens, how = answer.num_tokens, "reported"
    elif answer.output is not None:
        tokens, how = count_answer_tokens(answer.output)
    else:
        return None, "no output and no token count"
    return tokens <= _limit(rule), f"{tokens} tokens, {how} (max {_number(_limit(rule))})"


def _max_latency(rule: RuleCheck, answer: Answer) -> Verdict:
    if answer.latency_ms is None:
        return None, "the target reported no latency"
    return answer.latency_ms <= _limit(rule), f"{answer.latency_ms:g} ms (max {_number(_limit(rule))} ms)"


_TEXT_CHECKS: dict[str, Callable[[RuleCheck, str], Verdict]] = {
    "contains": _contains,
    "not_contains": _not_contains,
    "regex": _regex,
    "not_regex": _not_regex,
    "is_json": _is_json,
    "min_length": _min_length,
    "max_length": _max_length,
}
_ANSWER_CHECKS: dict[str, Callable[[RuleCheck, Answer], Verdict]] = {
    "max_tokens": _max_tokens,
    "max_latency": _max_latency,
}


def rule_label(rule: RuleCheck) -> str:
    """The check's ``name``, else ``type:value`` (``type`` alone when it has no value)."""
    if rule.name:
        return rule.name
    return rule.type if rule.value is None else f"{rule.type}:{rule.value}"


def evaluate_rule(rule: RuleCheck, answer: Answer, origin: str = "case") -> CheckOutcome:
    """Run one check. Text checks on an answer without output cannot be evaluated (passed=None)."""
    if rule.type in _ANSWER_CHECKS:
        passed, reason = _ANSWER_CHECKS[rule.type](rule, answer)
    elif answer.output is None:
        passed, reason = None, "the target returned no output text"
    else:
        passed, reason = _TEXT_CHECKS[rule.type](rule, answer.output)
    return CheckOutcome(rule_label(rule), rule.type, passed, reason, origin)


def category_rules(category: str | None, by_category: dict[str, list[RuleCheck]]) -> list[RuleCheck]:
    """Rules declared for ``category`` (exact name first, then ignoring case)."""
    if not category:
        return []
    if category in by_category:
        return list(by_category[category])
    wanted = category.strip().casefold()
    return [r for name, rules in by_category.items() if name.strip().casefold() == wanted for r in rules]


def _has_rules(case: Case, options: MetricOptions) -> bool:
    return bool(case.rules) or bool(category_rules(case.category, options.category_rules))


@metric("rules", family=FAMILY, threshold=1.0, applies=_has_rules)
def rules(case: Case, answer: Answer, ctx: MetricContext) -> Score:
    """Fraction of the case's deterministic rule checks that pass: passed / evaluated, in [0, 1].

    The checks are the case's ``rules`` plus its category's (options ``category_rules``). A check that
    cannot be evaluated (no latency, no output) is left out of the fraction; when no evaluated check
    failed, such a check makes the metric unavailable rather than passed.
    """
    declared = [(r, "case") for r in case.rules] + [
        (r, f"category:{case.category}") for r in category_rules(case.category, ctx.options.category_rules)
    ]
    if not declared:
        raise MetricSkipped(f"no rules for case {case.id!r} or its category {case.category!r}")
    outcomes = [evaluate_rule(rule, answer, origin) for rule, origin in declared]
    evaluated = [o for o in outcomes if o.passed is not None]
    passed = sum(1 for o in evaluated if o.passed)
    details = {
        "checks": [o.as_dict() for o in outcomes],
        "passed": passed,
        "failed": len(evaluated) - passed,
        "unevaluated": len(outcomes) - len(evaluated),
    }
    if passed == len(evaluated) and len(evaluated) < len(outcomes):
        pending = ", ".join(o.label for o in outcomes if o.passed is None)
        raise MetricUnavailable(f"could not evaluate rule(s): {_short(pending)}", details)
    return Score(passed / len(evaluated), details)
