"""Metrics of conversation cases (``turns:`` or ``simulated_user:``; docs/conversations.md).

* ``conversation_turns`` (deterministic): passed turns / turns planned. A turn passes when every metric
  its own expectations ask for passes (the same case verdict as a single-turn case); the turns a
  conversation did not reach after a failed turn (``stop_on_failed_turn``) count as not passed. A turn
  whose metric errored errors this metric (and so the case). The conversation loop
  (``runner.conversation``) leaves the turns' outcomes in ``ctx.memo[TURNS_MEMO]``.
* ``goal_completion``, ``knowledge_retention``, ``role_adherence`` (judged): declared judged metrics
  (``metrics.criteria``) over the whole transcript; ``goal_completion`` runs on conversations with a
  ``goal``, ``role_adherence`` on those with an ``assistant_role``, ``knowledge_retention`` where a case
  lists it (``metrics: [knowledge_retention]``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from evalgate.metrics.criteria import DEFAULT_RUBRIC, CriteriaDefinition, criteria_metric
from evalgate.metrics.registry import REGISTRY, MetricContext, Score, metric
from evalgate.model import DEFAULT_CUSTOM_THRESHOLD, MetricErrored, MetricUnavailable

if TYPE_CHECKING:
    from evalgate.model import Answer, Case

TURNS_MEMO = "conversation_turns"
"""``ctx.memo`` key: ``(outcomes, planned)``, outcomes being ``[(turn, status, first reason)]``."""


def _conversation(case: Case) -> bool:
    return case.turns is not None or case.simulated_user is not None


@metric("conversation_turns", family="conversation", threshold=1.0, applies=_conversation)
def conversation_turns(case: Case, answer: Answer, ctx: MetricContext) -> Score:
    """Share of a conversation's turns that passed their own expectations (turns not reached count as
    failed): passed / planned."""
    memo = ctx.memo.get(TURNS_MEMO)
    if memo is None:
        raise MetricUnavailable("the conversation's turns were not run")
    outcomes, planned = memo
    errored = next(((turn, reason) for turn, status, reason in outcomes if status == "errored"), None)
    if errored is not None:
        raise MetricErrored(f"turn {errored[0]} errored: {errored[1] or 'a metric errored'}")
    passed = sum(1 for _, status, _ in outcomes if status == "passed")
    failed = next(((turn, reason) for turn, status, reason in outcomes if status == "failed"), None)
    total = max(planned, len(outcomes), 1)
    details: dict[str, Any] = {"passed": passed, "planned": total, "reached": len(outcomes)}
    reason = None
    if failed is not None:
        details["failed_turn"] = failed[0]
        reason = f"turn {failed[0]} failed: {failed[1] or 'a metric failed'}"
        if len(outcomes) < total:
            reason += f" (stopped there; {total - len(outcomes)} turn(s) not sent)"
    return Score(passed / total, details, reason)


GOAL_COMPLETION = ("The assistant got the user to their goal by the end of the conversation: the user's goal "
                   "is fully achieved in the assistant's answers, not merely discussed, postponed or left for "
                   "the user to do.")
KNOWLEDGE_RETENTION = ("The assistant remembered what the user said in earlier turns: its later answers use the "
                       "facts, names, numbers and constraints the user gave before, never contradict them, and "
                       "never ask again for information the user already gave.")
ROLE_ADHERENCE = ("The assistant kept its assigned role (the assistant's role) in every answer: it stayed in "
                  "character and scope, and declined requests outside that role instead of leaving it.")


STEPS: dict[str, tuple[str, ...]] = {
    "goal_completion": (
        "Read the user's goal and list what the user needs to have at the end for it to be met.",
        "Read the conversation to its end and check each of those needs in the assistant's messages.",
        "Score by how much of the goal is actually achieved at the end; a refusal, a stall or a wrong result "
        "scores low.",
    ),
    "knowledge_retention": (
        "List the facts, names, numbers, preferences and constraints the user gives, with the turn of each.",
        "For every later assistant message, check that it uses those facts where they matter and does not "
        "contradict or forget them.",
        "Lower the score for every forgotten or contradicted fact and for every question about something the "
        "user already said.",
    ),
    "role_adherence": (
        "Read the assistant's role: what it is, its scope and its tone.",
        "Check every assistant message against that role.",
        "Lower the score for every message that leaves the role, its scope or its tone.",
    ),
}
"""Fixed evaluation steps of the built-in conversation metrics (no generation call per run)."""


def _judged(name: str, criteria: str, fields: tuple[str, ...], applies: Any) -> None:
    definition = CriteriaDefinition(name=name, criteria=criteria, steps=STEPS[name], rubric=DEFAULT_RUBRIC,
                                    fields=fields, origin="built-in (metrics/conversation.py)")
    base = criteria_metric(definition)
    REGISTRY[name] = replace(base, applies=applies, per_case=False, default_threshold=DEFAULT_CUSTOM_THRESHOLD,
                             family="conversation", info=None, kind="judged")


_judged("goal_completion", GOAL_COMPLETION, ("goal", "transcript"),
        lambda case: _conversation(case) and bool(case.goal and case.goal.strip()))
_judged("knowledge_retention", KNOWLEDGE_RETENTION, ("transcript",), lambda case: False)
_judged("role_adherence", ROLE_ADHERENCE, ("assistant_role", "transcript"),
        lambda case: _conversation(case) and bool(case.assistant_role and case.assistant_role.strip()))
