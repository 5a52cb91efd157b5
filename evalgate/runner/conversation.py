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
from typing import Any, Protocol

from evalgate.calls.executor import CallFailed
from evalgate.dialect import field_value, request_context_fields
from evalgate.metrics.conversation import TURNS_MEMO
from evalgate.metrics.registry import get_metric
from evalgate.model import (
    TURN_EXPECTATIONS,
    TURN_RECORDED,
    Answer,
    Case,
    CaseResult,
    CaseStatus,
    MetricResult,
    MetricUnavailable,
    Threshold,
    Turn,
)
from evalgate.runner.record import conversation_summary, errored_turn, turn_record
from evalgate.safety.redact import redact
from evalgate.targets.base import TargetCall
from evalgate.traces.summary import merge_traces
from evalgate.traces.traced import conversation_file_traces

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
    values: dict[str, Any] = {name: field_value(case, name) for name in (*INHERITED, *request_context_fields())}
    values["id"] = case.id
    values["input"] = turn.input
    for name in (*TURN_EXPECTATIONS, *TURN_RECORDED):
        value = getattr(turn, name)
        if value is not None and value != []:
            values[name] = value
    values.update({name: value for name, value in turn.dialect_data.items() if value is not None and value != []})
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


class TurnStats(Protocol):
    target_errors: int


class Runner(Protocol):
    """What a conversation needs of the run's engine (``runner.engine.Engine``)."""

    @property
    def conversations(self) -> ConversationOptions | None: ...
    @property
    def judge(self) -> Any: ...
    @property
    def thresholds(self) -> Mapping[str, Threshold]: ...
    @property
    def stats(self) -> TurnStats: ...

    async def call_target(self, case: Case, call: TargetCall) -> Answer: ...

    async def score(self, case: Case, answer: Answer, repeat: int = 0, memo: dict[str, Any] | None = None,
                    history: list[dict[str, str]] | None = None) -> tuple[Answer, dict[str, MetricResult]]: ...

    def verdict(self, metrics: dict[str, MetricResult], error: str | None = None,
                suite: str | None = None) -> tuple[CaseStatus, list[str]]: ...

    def record(self, case: Case, answer: Answer, metrics: dict[str, MetricResult], repeat: int,
               conversation: dict[str, Any] | None = None) -> CaseResult: ...


@dataclass
class _Talk:
    """A conversation in progress: what ``converse``'s steps share."""

    planned: int
    simulated: bool
    conversation_id: str | None
    fingerprint: str | None
    base: list[dict[str, Any]] | None
    """The base run's turns to replay (a simulated user), or None."""
    file_whole: dict[str, Any] | None = None
    file_turns: list[dict[str, Any]] = field(default_factory=list)
    messages: list[dict[str, str]] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    outcomes: list[tuple[int, str, str | None]] = field(default_factory=list)
    answers: list[Answer] = field(default_factory=list)
    error: str | None = None
    stopped: bool = False
    goal_met: bool = False


async def converse(engine: Runner, case: Case, repeat: int) -> CaseResult:
    """Run ``case``'s conversation on ``engine``'s target and score it (see the module docstring)."""
    options = engine.conversations or ConversationOptions()
    talk = _start(options, case)
    for number in range(1, talk.planned + 1 if talk.error is None else 1):
        if not await _take_turn(engine, options, case, repeat, talk, number):
            break
    failed_turn = next((n for n, s, _ in talk.outcomes if s != "passed"), None)
    if talk.error is not None:
        failed_turn = failed_turn or (talk.records[-1]["turn"] if talk.records else None)
    summary = conversation_summary(talk.records, planned=talk.planned, simulated=talk.simulated,
                                   stopped=talk.stopped, failed_turn=failed_turn,
                                   conversation_id=talk.conversation_id, goal_met=talk.goal_met, user=talk.fingerprint)
    if talk.error is not None:
        partial = whole_answer(talk.answers, talk.messages).model_copy(update={"error": talk.error})
        return engine.record(case, partial, {}, repeat, summary)
    return await _score_whole(engine, case, repeat, talk, summary)


def _start(options: ConversationOptions, case: Case) -> _Talk:
    """A new conversation for ``case``: its planned turns, id, simulated user and trace file (a file that
    cannot be read errors the case before anything is sent)."""
    simulated = case.simulated_user is not None
    fingerprint = user_fingerprint(case) if simulated else None
    replay = options.replay.get(case.id) if simulated else None
    talk = _Talk(
        planned=case.simulated_user.max_turns if case.simulated_user is not None else len(case.turns or []),
        simulated=simulated,
        conversation_id=f"eg-{secrets.token_hex(8)}" if options.send_id and not options.id_from else None,
        fingerprint=fingerprint,
        base=replay["turns"] if replay is not None and replay.get("user") == fingerprint else None)
    if case.trace_file:
        try:
            talk.file_whole, talk.file_turns = conversation_file_traces(case)
        except ValueError as exc:
            talk.error = str(exc)  # nothing is sent: the case errors naming the file
    return talk


async def _take_turn(engine: Runner, options: ConversationOptions, case: Case, repeat: int, talk: _Talk,
                     number: int) -> bool:
    """Send turn ``number`` and score its answer; False when the conversation ends here (an error, a failed
    turn with ``stop_on_failed_turn``, the simulated user's goal met)."""
    replayed = False
    if case.turns is not None:
        turn = case.turns[number - 1]
    else:
        text, replayed, problem = await _next_message(options, case, talk.messages, talk.answers, talk.base, number)
        if text is None:
            talk.error = f"turn {number}: {problem}"
            talk.records.append(errored_turn(number, "", problem))
            return False
        turn = Turn(input=text)
    current = turn_case(case, turn, number)
    answer = await _send(engine, options, case, repeat, talk, current, turn.input, number)
    if answer.error:
        engine.stats.target_errors += 1
        talk.error = f"turn {number}: {answer.error}"
        talk.records.append(errored_turn(number, turn.input, redact(answer.error), replayed=replayed))
        return False
    answer, metrics = await engine.score(current, answer, repeat, history=[dict(m) for m in talk.messages])
    status, reasons = engine.verdict(metrics, error=answer.error)
    talk.messages.append({"role": "assistant", "content": answer.output or ""})
    talk.answers.append(answer)
    talk.records.append(turn_record(number, turn.input, answer, status, reasons, metrics, replayed=replayed))
    if answer.error:
        talk.error = f"turn {number}: {answer.error}"
        return False
    talk.outcomes.append((number, status.value, reasons[0] if reasons else None))
    if status is not CaseStatus.passed and options.stop_on_failed_turn:
        talk.stopped = number < talk.planned
        return False
    if talk.simulated and status is CaseStatus.passed:
        talk.goal_met = await _goal_met(engine, case, talk.messages, answer, repeat)
        return not talk.goal_met
    return True


async def _send(engine: Runner, options: ConversationOptions, case: Case, repeat: int, talk: _Talk,
                current: Case, text: str, number: int) -> Answer:
    """The target's answer to turn ``number`` (its trace from the case's trace file when the call has none);
    the conversation id read from the first reply when the agent makes it (``target_conversation_id_from``)."""
    talk.messages.append({"role": "user", "content": text})
    call = TargetCall(case.id, repeat, turn=number, messages=[dict(m) for m in talk.messages],
                      conversation_id=talk.conversation_id)
    answer = await engine.call_target(current, call)
    if answer.trace is None and len(talk.file_turns) >= number and not answer.error:
        answer = answer.model_copy(update={"trace": talk.file_turns[number - 1]})
    if not answer.error and options.send_id and options.id_from and talk.conversation_id is None:
        talk.conversation_id = reply_value(call.reply, options.id_from)
        if talk.conversation_id is None:
            answer = Answer(error=f"the agent's reply has no conversation id at {options.id_from!r} "
                                  "(target_conversation_id_from)")
    return answer


async def _score_whole(engine: Runner, case: Case, repeat: int, talk: _Talk, summary: dict[str, Any]) -> CaseResult:
    """Score the case's own expectations on the conversation as a whole (see the module docstring)."""
    whole = whole_answer(talk.answers, talk.messages)
    if talk.file_whole is not None and not any(a.trace and a.trace.get("source") != "file" for a in talk.answers):
        whole = whole.model_copy(update={"trace": talk.file_whole})  # the file's every span, spans of unsent turns too
    memo = {TURNS_MEMO: (talk.outcomes, talk.planned if not talk.simulated else len(talk.outcomes))}
    whole, metrics = await engine.score(case, whole, repeat, memo)
    turns_result = metrics.get("conversation_turns")
    if turns_result is not None and turns_result.status.value == "failed" and summary["failed_turn"]:
        failed = next(r for r in talk.records if r["turn"] == summary["failed_turn"])
        why = (failed.get("reasons") or ["a metric failed"])[0]
        left = (f"; {talk.planned - len(talk.records)} later turn(s) not sent"
                if talk.stopped and not talk.simulated else "")
        metrics["conversation_turns"] = turns_result.model_copy(
            update={"reason": f"turn {failed['turn']} failed: {why}{left}"})
    return engine.record(case, whole, metrics, repeat, summary)


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


async def _goal_met(engine: Runner, case: Case, messages: list[dict[str, str]], last: Answer, repeat: int) -> bool:
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
