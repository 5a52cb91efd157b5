"""A conversation case, run turn by turn (docs/conversations.md).

For each user message (a ``turns:`` entry, or one a simulated user writes) the target is called with a
``TargetCall`` carrying the turn number, the conversation so far (``messages``: user and assistant
messages ending with this turn's) and, for an http target with ``target_conversation: id``, the
conversation id: generated per case and repeat (``eg-`` + 16 hex digits), or read from the agent's first
reply (``target_conversation_id_from``). Each answer is admitted and scored against the turn's own
expectations like a single-turn case; the first failed turn stops the conversation unless
``stop_on_failed_turn: false``; a turn whose call fails errors the case (``turn N: …``), keeping the
transcript so far. A turn's trace is its call's spans (receiver) or its own ``trace_file``; failing both, trace
k of the conversation case's ``trace_file`` (``traces.traced.conversation_file_traces``), whose whole summary
is then the conversation's trace (else the turns' traces merged).

Then the case's own expectations are scored on the conversation as a whole: an ``Answer`` whose text is
every answer joined by blank lines, whose sources / agents / tools are every turn's in order, whose
tokens, latency and cost are the sums, and whose ``transcript`` is every message, for the judged
conversation metrics. ``conversation_turns`` (metrics/conversation.py) reads the turns' outcomes.

A simulated user (``simulated_user:``): before each turn the next message is the base run's user message
for that turn when the base run simulated the same user (persona, goal, first message, turn limit) and its
answers to every earlier turn equal this run's (``replayed``), else the
simulator writes it (``judges.simulator``); after each passed turn the judge decides whether the case's
``goal`` is met (``goal_completion`` ≥ its threshold), which ends the conversation, as does ``max_turns``.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evalgate.calls.executor import CallFailed
from evalgate.dialect import request_context_fields
from evalgate.metrics.conversation import TURNS_MEMO
from evalgate.metrics.registry import get_metric
from evalgate.model import TURN_EXPECTATIONS, TURN_RECORDED, Answer, Case, CaseStatus, MetricUnavailable, Turn
from evalgate.safety.redact import redact
from evalgate.targets.base import TargetCall
from evalgate.traces.summary import merge_traces
from evalgate.traces.traced import conversation_file_traces

if TYPE_CHECKING:
    from evalgate.model import CaseResult, MetricResult
    from evalgate.runner.engine import Engine

INHERITED = ("suite", "category", "tags", "risk_level", "difficulty", "evolution_type", "language",
             "metadata", "assistant_role")
"""Fields a turn's case takes from its conversation case (with the dialects' request context fields)."""


@dataclass
class ConversationOptions:
    """How the run carries conversations (settings; see the module docstring)."""

    stop_on_failed_turn: bool = True
    send_id: bool = False
    """The target keeps the state under a conversation id (http, ``target_conversation: id``)."""
    id_from: str | None = None
    simulator: Any = None
    """A ``judges.simulator.UserSimulator``, or None (simulated users then error their case)."""
    replay: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    """case id → the base run's simulated user (``user``: its fingerprint) and ``turns`` (``input``,
    ``output``), for simulated users."""


def turn_case(case: Case, turn: Turn, number: int) -> Case:
    """The single-turn case scored on turn ``number``'s answer: the turn's message and expectations, and the
    conversation's suite, category, risk and context."""
    values: dict[str, Any] = {name: getattr(case, name) for name in (*INHERITED, *request_context_fields())}
    values["id"] = case.id
    values["input"] = turn.input
    for name in (*TURN_EXPECTATIONS, *TURN_RECORDED):
        value = getattr(turn, name)
        if value is not None and value != []:
            values[name] = value
    made = Case.model_validate(values)
    made.source_file, made.source_line, made.index = case.source_file, case.source_line, case.index
    made.dialect = case.dialect  # a seed's dialect (evalgate.dialects) applies to its conversations' turns too
    return made


def user_fingerprint(case: Case) -> str:
    """sha256 (16 hex) of what defines a simulated user (persona, goal, first message, turn limit): the base
    run's messages are replayed only to the same user."""
    assert case.simulated_user is not None
    user = case.simulated_user
    payload = json.dumps([user.persona, case.goal, user.first_message, user.max_turns])
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def reply_value(reply: Any, path: str) -> str | None:
    """The text at dotted ``path`` of a JSON reply (None when absent or not a scalar)."""
    value = reply
    for part in path.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    return str(value)


async def converse(engine: Engine, case: Case, repeat: int) -> CaseResult:
    """Run ``case``'s conversation on ``engine``'s target and score it (see the module docstring)."""
    options: ConversationOptions = getattr(engine, "conversations", None) or ConversationOptions()
    simulated = case.simulated_user is not None
    planned = case.simulated_user.max_turns if case.simulated_user is not None else len(case.turns or [])
    conversation_id = f"eg-{secrets.token_hex(8)}" if options.send_id and not options.id_from else None
    messages: list[dict[str, str]] = []
    records: list[dict[str, Any]] = []
    outcomes: list[tuple[int, str, str | None]] = []
    answers: list[Answer] = []
    error: str | None = None
    stopped = goal_met = False
    fingerprint = user_fingerprint(case) if simulated else None
    replay = options.replay.get(case.id) if simulated else None
    base = replay["turns"] if replay is not None and replay.get("user") == fingerprint else None
    file_whole: dict[str, Any] | None = None
    file_turns: list[dict[str, Any]] = []
    if case.trace_file:
        try:
            file_whole, file_turns = conversation_file_traces(case)
        except ValueError as exc:
            error = str(exc)  # nothing is sent: the case errors naming the file
    for number in range(1, planned + 1 if error is None else 1):
        replayed = False
        if case.turns is not None:
            turn = case.turns[number - 1]
        else:
            text, replayed, problem = await _next_message(options, case, messages, answers, base, number)
            if text is None:
                error = f"turn {number}: {problem}"
                records.append({"turn": number, "input": "", "status": "errored", "error": problem})
                break
            turn = Turn(input=text)
        current = turn_case(case, turn, number)
        messages.append({"role": "user", "content": turn.input})
        call = TargetCall(case.id, repeat, turn=number, messages=[dict(m) for m in messages],
                          conversation_id=conversation_id)
        answer = await engine.call_target(current, call)
        if answer.trace is None and len(file_turns) >= number and not answer.error:
            answer = answer.model_copy(update={"trace": file_turns[number - 1]})
        record: dict[str, Any] = {"turn": number, "input": turn.input}
        if replayed:
            record["replayed"] = True
        if not answer.error and options.send_id and options.id_from and conversation_id is None:
            conversation_id = reply_value(call.reply, options.id_from)
            if conversation_id is None:
                answer = Answer(error=f"the agent's reply has no conversation id at {options.id_from!r} "
                                      "(target_conversation_id_from)")
        if answer.error:
            engine.stats.target_errors += 1
            error = f"turn {number}: {answer.error}"
            records.append({**record, "status": "errored", "error": redact(answer.error)})
            break
        answer, metrics = await engine.score(current, answer, repeat, history=[dict(m) for m in messages])
        status, reasons = engine.verdict(metrics, error=answer.error)
        messages.append({"role": "assistant", "content": answer.output or ""})
        answers.append(answer)
        records.append({**record, **_turn_record(answer, status, reasons, metrics)})
        if answer.error:
            error = f"turn {number}: {answer.error}"
            break
        outcomes.append((number, status.value, reasons[0] if reasons else None))
        if status is not CaseStatus.passed and options.stop_on_failed_turn:
            stopped = number < planned
            break
        if simulated and status is CaseStatus.passed:
            goal_met = await _goal_met(engine, case, messages, answer, repeat)
            if goal_met:
                break
    summary: dict[str, Any] = {"turns": records, "planned_turns": planned if not simulated else None,
                               "failed_turn": next((n for n, s, _ in outcomes if s != "passed"), None),
                               "stopped": stopped,
                               "conversation_id": redact(conversation_id) if conversation_id else None}
    if simulated:
        summary["simulated"] = True
        summary["goal_met"] = goal_met
        summary["user"] = fingerprint
    if error is not None:
        summary["failed_turn"] = summary["failed_turn"] or (records[-1]["turn"] if records else None)
        partial = whole_answer(answers, messages).model_copy(update={"error": error})
        return engine._result(case, partial, {}, repeat, summary)
    whole = whole_answer(answers, messages)
    if file_whole is not None and not any(a.trace and a.trace.get("source") != "file" for a in answers):
        whole = whole.model_copy(update={"trace": file_whole})  # the file's every span, spans of unsent turns too
    memo = {TURNS_MEMO: (outcomes, planned if not simulated else len(outcomes))}
    whole, metrics = await engine.score(case, whole, repeat, memo)
    turns_result = metrics.get("conversation_turns")
    if turns_result is not None and turns_result.status.value == "failed" and summary["failed_turn"]:
        failed = next(r for r in records if r["turn"] == summary["failed_turn"])
        why = (failed.get("reasons") or ["a metric failed"])[0]
        left = f"; {planned - len(records)} later turn(s) not sent" if stopped and not simulated else ""
        metrics["conversation_turns"] = turns_result.model_copy(
            update={"reason": f"turn {failed['turn']} failed: {why}{left}"})
    return engine._result(case, whole, metrics, repeat, summary)


def _turn_record(answer: Answer, status: CaseStatus, reasons: list[str],
                 metrics: dict[str, MetricResult]) -> dict[str, Any]:
    record: dict[str, Any] = {"output": answer.output, "status": status.value, "reasons": reasons,
                              "metrics": {name: result.model_dump(mode="json", exclude_defaults=True)
                                          for name, result in metrics.items()}}
    for name in ("tools_used", "agents_called", "sources", "agent_id", "latency_ms"):
        value = getattr(answer, name)
        if value is not None:
            record[name] = value
    return record


def whole_answer(answers: list[Answer], messages: list[dict[str, str]]) -> Answer:
    """The conversation as one answer (see the module docstring)."""

    def joined(name: str) -> list[str] | None:
        lists = [getattr(a, name) for a in answers if getattr(a, name) is not None]
        return [item for items in lists for item in items] if lists else None

    def total(name: str) -> Any:
        values = [getattr(a, name) for a in answers if getattr(a, name) is not None]
        return sum(values) if values else None

    agent_ids = [a.agent_id for a in answers if a.agent_id]
    latency = total("latency_ms")
    return Answer(output="\n\n".join(a.output or "" for a in answers) if answers else None,
                  sources=joined("sources"), agents_called=joined("agents_called"), tools_used=joined("tools_used"),
                  data_sources=joined("data_sources"), agent_id=agent_ids[-1] if agent_ids else None,
                  num_tokens=total("num_tokens"), prompt_tokens=total("prompt_tokens"),
                  completion_tokens=total("completion_tokens"), cost_usd=total("cost_usd"),
                  latency_ms=round(latency, 3) if latency is not None else None,
                  transcript=[dict(m) for m in messages], trace=merge_traces([a.trace for a in answers]))


async def _next_message(options: ConversationOptions, case: Case, messages: list[dict[str, str]],
                        answers: list[Answer], base: list[dict[str, Any]] | None, number: int
                        ) -> tuple[str | None, bool, str | None]:
    """(the user's next message, replayed from the base run?, why there is none)."""
    if base is not None and len(base) >= number and all(
            base[i].get("output") == answers[i].output for i in range(number - 1)):
        text = base[number - 1].get("input")
        if isinstance(text, str) and text.strip():
            return text, True, None
    assert case.simulated_user is not None
    if number == 1 and case.simulated_user.first_message:
        return case.simulated_user.first_message, False, None
    if options.simulator is None:
        return None, False, ("a simulated user needs an LLM to play it: set judge_provider (or simulator_model "
                             "with a judge provider)")
    try:
        return await options.simulator.next_message(case, messages), False, None
    except (CallFailed, MetricUnavailable) as exc:
        return None, False, f"the simulated user could not write its message: {redact(str(exc))}"


async def _goal_met(engine: Engine, case: Case, messages: list[dict[str, str]], last: Answer, repeat: int) -> bool:
    """Whether the judge scores ``goal_completion`` on the transcript so far at or above its threshold."""
    if engine.judge is None:
        return False
    metric = get_metric("goal_completion")
    definition = metric.fn.definition  # type: ignore[attr-defined]
    answer = Answer(output=last.output, transcript=[dict(m) for m in messages])
    try:
        scored = await engine.judge.criteria_score(definition, case, answer, repeat=repeat)
    except MetricUnavailable:
        return False
    threshold = engine.thresholds.get("goal_completion")
    return threshold.admits(float(scored.value)) if threshold is not None else float(scored.value) >= 0.5
