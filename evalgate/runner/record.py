"""The one place a case's record (``model.CaseResult``) is built, for single-turn and conversation cases alike.

``case_record`` turns a case, its (admitted) answer, its metric results and verdict into the record that
store/ writes (results.json line, SQLite document) and report/, github/, export/ read back
(``CaseResult.from_stored``). ``conversation_summary`` builds a conversation case's ``conversation`` block
and ``turn_record`` each of its turns. Pure: no I/O, no calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evalgate.dialect import expectation_fields
from evalgate.model import (
    Answer,
    Case,
    CaseResult,
    CaseStatus,
    Mention,
    MetricResult,
    RiskLevel,
    trusted,
)
from evalgate.safety.redact import redact

EXPECTATION_FIELDS = (
    "expected_output",
    "expected_sources",
    "expected_keywords",
    "expected_data_sources",
    "expected_answer_criteria",
    "passing_criteria",
    "agents_should_include",
    "agents_should_exclude",
    "tools_should_include",
    "tools_should_exclude",
    "expected_my_mentions",
    "expected_competitor_mentions",
    "expected_ranked_list",
)
ANSWER_DETAIL_FIELDS = (
    "sources",
    "agents_called",
    "tools_used",
    "agent_id",
    "data_sources",
    "mentions",
    "ranked_list",
    "prompt_tokens",
    "completion_tokens",
    "truncated",
    "trace",
)
ANSWER_DETAIL_SET = set(ANSWER_DETAIL_FIELDS)
ERROR_CHARS = 2_000
"""A case's error and each reason are cut to this many characters (after redaction) when stored."""
TURN_ANSWER_FIELDS = ("tools_used", "agents_called", "sources", "agent_id", "latency_ms")
"""Answer fields a conversation turn's record carries when set (besides its output)."""


def case_record(case: Case, answer: Answer, metrics: dict[str, MetricResult], repeat: int, *,
                status: CaseStatus, reasons: Sequence[str], expectation: str | None,
                conversation: dict[str, Any] | None = None) -> CaseResult:
    """The record of ``case`` (one repeat): ``answer`` (its ``error`` and the reasons redacted and cut to
    ``ERROR_CHARS``), ``metrics``, the verdict (``status``, ``reasons``), the expectation digest and, for a
    conversation case, its ``conversation`` block (``conversation_summary``; the record's ``input`` is then
    the first turn's message). ``num_tokens``: the answer's, else the ``num_tokens`` metric's value."""
    num_tokens = answer.num_tokens
    if num_tokens is None and "num_tokens" in metrics and metrics["num_tokens"].value is not None:
        num_tokens = int(metrics["num_tokens"].value)
    values: dict[str, Any] = {
        "id": case.id,
        "index": case.index,
        "suite": case.suite,
        "category": case.category,
        "risk_level": _RISK_TEXT[case.risk_level],
        "difficulty": case.difficulty,
        "evolution_type": case.evolution_type,
        "tags": list(case.tags),
        "description": case.description,
        "source": case.location,
        "status": status,
        "passed": status is CaseStatus.passed,
        "error": _cut(redact(answer.error)) if answer.error else None,
        "reasons": [_cut(redact(r)) for r in reasons],
        "input": case.input if conversation is None else _first_input(conversation),
        "expected": expectations_of(case),
        "output": answer.output,
        "answer": answer_details(answer),
        "metrics": metrics,
        "num_tokens": num_tokens,
        "latency_ms": answer.latency_ms,
        "cost_usd": answer.cost_usd,
        "repeat": repeat,
        "expectation": expectation,
        "conversation": conversation,
    }
    if _answer_values_valid(values):  # the case's fields were validated with these same types
        return trusted(CaseResult, values)
    return CaseResult(**values)


def _first_input(conversation: dict[str, Any]) -> str | None:
    """A conversation record's ``input``: its first turn's message (None when no turn was recorded)."""
    turns = conversation["turns"]
    return turns[0]["input"] if turns else None


def turn_record(number: int, text: str, answer: Answer, status: CaseStatus, reasons: list[str],
                metrics: dict[str, MetricResult], *, replayed: bool = False) -> dict[str, Any]:
    """One scored turn of a conversation: ``{turn, input, [replayed], output, status, reasons, metrics,
    [tools_used, agents_called, sources, agent_id, latency_ms]}`` (metrics without their defaults)."""
    record: dict[str, Any] = {"turn": number, "input": text}
    if replayed:
        record["replayed"] = True
    record.update({"output": answer.output, "status": status.value, "reasons": reasons,
                   "metrics": {name: result.model_dump(mode="json", exclude_defaults=True)
                               for name, result in metrics.items()}})
    for name in TURN_ANSWER_FIELDS:
        value = getattr(answer, name)
        if value is not None:
            record[name] = value
    return record


def errored_turn(number: int, text: str, error: str | None, *, replayed: bool = False) -> dict[str, Any]:
    """A conversation turn that got no answer: ``{turn, input, [replayed], status: errored, error}``
    (``error`` as given: the caller redacts what it did not write)."""
    record: dict[str, Any] = {"turn": number, "input": text}
    if replayed:
        record["replayed"] = True
    record.update({"status": "errored", "error": error})
    return record


def conversation_summary(turns: list[dict[str, Any]], *, planned: int, simulated: bool, stopped: bool,
                         failed_turn: int | None, conversation_id: str | None, goal_met: bool = False,
                         user: str | None = None) -> dict[str, Any]:
    """A conversation case's ``conversation`` block: ``{turns, planned_turns (None for a simulated user),
    failed_turn, stopped, conversation_id (redacted)}`` and, for a simulated user, ``simulated``, ``goal_met``
    and ``user`` (its fingerprint)."""
    summary: dict[str, Any] = {"turns": turns, "planned_turns": planned if not simulated else None,
                               "failed_turn": failed_turn, "stopped": stopped,
                               "conversation_id": redact(conversation_id) if conversation_id else None}
    if simulated:
        summary["simulated"] = True
        summary["goal_met"] = goal_met
        summary["user"] = user
    return summary


def _cut(text: str) -> str:
    """``text`` within ``ERROR_CHARS`` characters (cut after redaction, so no secret is split first)."""
    return text if len(text) <= ERROR_CHARS else text[:ERROR_CHARS] + f"… ({len(text):,} characters)"


_RISK_TEXT = {level: level.value for level in RiskLevel}
"""``level.value`` without the enum property (slow on Python 3.11)."""


def _answer_values_valid(values: dict[str, Any]) -> bool:
    """True when the answer-derived values already have exactly the types ``CaseResult`` declares
    (a target may assign anything to an ``Answer`` after it was validated)."""
    output, error, tokens = values["output"], values["error"], values["num_tokens"]
    return (
        (output is None or type(output) is str)
        and (error is None or type(error) is str)
        and (tokens is None or type(tokens) is int)
        and all(values[name] is None or type(values[name]) is float for name in ("latency_ms", "cost_usd"))
        and type(values["id"]) is str
        and type(values["index"]) is int
        and type(values["repeat"]) is int
    )


def answer_details(answer: Answer) -> dict[str, Any]:
    """``answer.model_dump(include=ANSWER_DETAIL_FIELDS, exclude_none=True)``, built directly (a tenth of
    the cost) when every value has the type ``Answer`` declares; else that very call."""
    fields = vars(answer)
    details: dict[str, Any] = {}
    for name in ANSWER_DETAIL_FIELDS:
        value = fields[name]
        if value is None:
            continue
        kind = type(value)
        if kind is list and name != "mentions" and all(type(item) is str for item in value):
            details[name] = list(value)
        elif kind is list and name == "mentions" and all(type(item) is Mention for item in value):
            details[name] = [mention.model_dump(exclude_none=True) for mention in value]
        elif ((kind is str and name == "agent_id") or (kind is int and name.endswith("_tokens"))
              or (kind is dict and name == "trace")):  # the trace summary: plain JSON built by traces.summary
            details[name] = value
        else:
            return answer.model_dump(include=ANSWER_DETAIL_SET, exclude_none=True)
    return details


def expectations_of(case: Case) -> dict[str, Any]:
    """The expectation fields a case actually sets, for reports."""
    expected: dict[str, Any] = {}
    fields = vars(case)
    for name in expectation_fields(EXPECTATION_FIELDS):  # with the dialects' own, each in its place
        value = fields[name] if name in fields else case.dialect_value(name)
        if value is not None:
            expected[name] = value
    if case.rules:
        expected["rules"] = [rule.model_dump(exclude_none=True, exclude_defaults=True) for rule in case.rules]
    if case.trajectory is not None:
        expected["trajectory"] = case.trajectory.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    if case.assertions:
        expected["assert"] = [entry.model_dump(mode="json", exclude_none=True) for entry in case.assertions]
    if case.expect_empty:
        expected["expect_empty"] = True
    return expected
