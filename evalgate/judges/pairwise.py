"""Pairwise regression judging: for a case whose answer changed against the base branch, ask the judge which
of the two answers better satisfies a judged metric, in both orders (``pairwise.j2``; the metric's description,
or a declared metric's criteria, is the rubric).

Position-bias control: order 1 shows the base answer as A and the head answer as B, order 2 the other way
round. A preference counts only when both orders name the same answer (``combine``);
otherwise, and when the judge says ``tie`` or cannot be read, it is a tie. Both calls go through the judge's
cache, cost ledger and output modes like any judge call (``JudgeClient.once``).

Each reply passes the judge's health checks (``judges.health``: fence echo, the template's placeholder or
rubric copied, JSON debris, one reasoning repeated across prompts) like a per-case verdict. A reply that fails
one, cannot be read or was not given is no evidence: ``prefer`` lists it under ``unusable`` (order, cause and
the reply's reasoning) and the comparison counts the pair as ``unavailable``, never as a preference or a tie
(``runner.pairwise``); ``preferred`` stays ``tie`` for callers that only know the three outcomes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from evalgate.judges.health import cause_of
from evalgate.judges.prompts import (
    JudgeTemplate,
    PromptInputs,
    RenderedPrompt,
    environment,
    system_prompt,
    template_version,
)
from evalgate.model import MetricUnavailable
from evalgate.targets.recorded import answer_from_case

if TYPE_CHECKING:
    from evalgate.judges.client import JudgeClient
    from evalgate.judges.prompts import PromptInputs, RenderedPrompt, Values
    from evalgate.metrics.registry import Metric
    from evalgate.model import Case

PAIRWISE_FILE = "pairwise.j2"
Choice = Literal["A", "B", "tie"]


def combine(base_first: str, head_first: str) -> str:
    """``head``, ``base`` or ``tie`` from the two orders' answers (``A``, ``B``, ``tie``): order 1 shows the base
    as A, order 2 the head as A. The head wins when order 1 says B and order 2 says A, the base when order 1 says
    A and order 2 says B; anything else (the judge kept its position, or said tie) is a tie, so a judge that
    always prefers the first answer shown produces only ties."""
    if base_first == "B" and head_first == "A":
        return "head"
    if base_first == "A" and head_first == "B":
        return "base"
    return "tie"


class PairwiseVerdict(BaseModel):
    reasoning: str
    preferred: Choice


def _values(verdict: PairwiseVerdict, inputs: PromptInputs) -> Values:
    """A → 1.0, B → 0.0, tie → 0.5 (the value a sample carries)."""
    return {"preferred_a": {"A": 1.0, "B": 0.0, "tie": 0.5}[verdict.preferred]}


def pairwise_template() -> Any:
    return JudgeTemplate("pairwise", PairwiseVerdict, _values)


def render_pair(metric: Metric, case: Case, answer_a: str, answer_b: str) -> RenderedPrompt:
    info = metric.info if isinstance(metric.info, dict) else {}
    rubric = str(info.get("criteria") or metric.description or metric.name)
    user = environment().get_template(PAIRWISE_FILE).render(
        metric=metric.name, rubric=rubric, criteria=case.passing_criteria or "", input=case.input or "",
        reference=case.expected_output or "", answer_a=answer_a or "(empty)", answer_b=answer_b or "(empty)",
    ).strip()
    messages = ({"role": "system", "content": system_prompt()}, {"role": "user", "content": user})
    inputs = PromptInputs.of(case, answer_from_case(case))
    return RenderedPrompt(pairwise_template(), template_version(PAIRWISE_FILE), messages, inputs)


async def ask(judge: JudgeClient, prompt: RenderedPrompt) -> tuple[Choice, str, tuple[str, str] | None]:
    """One order's preference: ``A``, ``B`` or ``tie``, its reasoning, and (cause, reply text) when the reply is
    no evidence (unreadable, failed or unhealthy: then the preference is ``tie`` with why)."""
    try:
        sample = await judge.once(prompt)
    except MetricUnavailable as exc:
        cause = cause_of(exc.details, str(exc)) or "parse_failure"
        return "tie", f"no preference: {exc}", (cause, str(exc.details.get("raw_reply") or ""))
    unhealthy, _ = judge.health.check(prompt, [sample])
    if unhealthy is not None:
        return "tie", f"no preference: {unhealthy[1]}", (unhealthy[0], sample.reasoning)
    value = sample.values["preferred_a"]
    return ("A" if value == 1.0 else "B" if value == 0.0 else "tie"), sample.reasoning, None


async def prefer(judge: JudgeClient, metric: Metric, case: Case, base: str, head: str) -> dict[str, Any]:
    """Both orders' preferences and the combined one (``head``, ``base`` or ``tie``); ``unusable``: the orders
    whose reply is no evidence (``{order, cause, text}``), when any."""
    first, first_reason, first_bad = await ask(judge, render_pair(metric, case, base, head))   # A = base, B = head
    second, second_reason, second_bad = await ask(judge, render_pair(metric, case, head, base))  # A = head, B = base
    found: dict[str, Any] = {"preferred": combine(first, second), "base_first": first, "head_first": second,
                             "reasoning": [first_reason[:300], second_reason[:300]]}
    unusable = [{"order": order, "cause": bad[0], "text": bad[1][:300]}
                for order, bad in ((1, first_bad), (2, second_bad)) if bad is not None]
    if unusable:
        found["preferred"] = "tie"
        found["unusable"] = unusable
    return found
