"""The cost estimate printed before a run starts.

calls = Σ over selected cases of (distinct judge templates among the case's planned judged metrics)
× judge_samples × repeat, plus one model call per case (per turn of a conversation) × repeat for the
``openai`` target.
Repair retries (``judges.client``: prompt-only output only) are counted apart as an upper bound: with the
judge in prompt mode at the start, up to one per judge call, each costing the first call's prompt plus
its reply plus ``REPAIR_EXTRA_TOKENS``; none in the structured modes.
Judge prompt tokens are counted on the rendered prompt with the case's recorded answer (or
``ASSUMED_ANSWER_TOKENS`` when there is none); completions are assumed to use
``ASSUMED_COMPLETION_TOKENS``. At most ``SAMPLE_CASES`` cases are rendered; the rest are extrapolated
from their mean. The estimate ignores cache hits, so a rerun usually costs less.

Tokens are counted with the tokenizer (``metrics.tokens``) when they become dollars, i.e. when every model
that will be called has a price. When some model has none the cost is unknown anyway, and the token
figures are ceil(characters / 4) estimates (said so in the line): loading the tokenizer would delay the
start of every such run for no dollar figure.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evalgate.calls.costs import MESSAGE_OVERHEAD, Price, count_message_tokens
from evalgate.model import Answer

if TYPE_CHECKING:
    from evalgate.model import Case

ASSUMED_ANSWER_TOKENS = 300
ASSUMED_COMPLETION_TOKENS = 250
REPAIR_EXTRA_TOKENS = 60
"""The repair message and its framing, in tokens."""
SAMPLE_CASES = 200
FILLER_WORD = "word "


@dataclass(frozen=True, slots=True)
class RunEstimate:
    judge_calls: int
    target_calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    """None when a model involved has no known price."""
    tokens_counted: bool = True
    """False: token figures are characters/4 estimates (no price, so the tokenizer was not loaded)."""
    repair_calls: int = 0
    """At most this many repair retries on top (prompt-only output; 0 with structured output)."""
    repair_cost_usd: float | None = 0.0
    output_mode: str | None = None

    def line(self, max_cost: float | None) -> str:
        cost = "unknown (no price for the model)" if self.cost_usd is None else f"~${self.cost_usd:.4f}"
        text = (f"cost estimate: {cost} for {self.judge_calls} judge call(s) and {self.target_calls} model call(s), "
                f"~{self.prompt_tokens} prompt + ~{self.completion_tokens} completion tokens "
                f"({'' if self.tokens_counted else 'estimated as characters/4; '}cache hits not counted)")
        if self.repair_calls:
            extra = "" if self.repair_cost_usd is None else f" (≤ ${self.repair_cost_usd:.4f})"
            text += f"; up to {self.repair_calls} repair retries more{extra} with prompt-only judge output"
        elif self.judge_calls and self.output_mode and self.output_mode != "prompt":
            text += f"; {self.output_mode} judge output: no repair retries"
        if max_cost is not None:
            text += f"; budget max_cost ${max_cost:g}"
            if self.cost_usd is not None and self.cost_usd > max_cost:
                text += " (the estimate exceeds it: the run will stop before spending more)"
        return text

    def as_dict(self) -> dict[str, Any]:
        return {"judge_calls": self.judge_calls, "target_calls": self.target_calls,
                "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 6),
                "tokens_counted": self.tokens_counted, "repair_calls_max": self.repair_calls,
                "repair_cost_usd_max": None if self.repair_cost_usd is None else round(self.repair_cost_usd, 6),
                "output_mode": self.output_mode}


def judge_templates_for(metric_names: Sequence[str]) -> list[str]:
    """Distinct templates the metrics need (seed 003's three metrics share one call)."""
    from evalgate.judges.prompts import METRIC_TEMPLATES

    return sorted({METRIC_TEMPLATES[name] for name in metric_names if name in METRIC_TEMPLATES})


def estimate_run(
    cases: Collection[Case],
    metrics_for: Callable[[Case], Sequence[str]],
    *,
    repeat: int,
    samples: int,
    judge_price: Price | None,
    judging: bool,
    target_price: Price | None = None,
    model_target: bool = False,
    criteria_for: Callable[[Case], Sequence[Any]] | None = None,
    output_mode: str | None = None,
) -> RunEstimate:
    """``criteria_for(case)``: the ``CriteriaDefinition`` of each declared judged metric planned for the case
    (one call per case each, plus one step-writing call per criteria text without declared steps);
    ``output_mode``: the judge's output mode at the start (``prompt``: repair retries are possible)."""
    from evalgate.judges.prompts import TEMPLATES, render  # jinja2: imported once a judge is in play

    priced = (not judging or judge_price is not None) and (not model_target or target_price is not None)
    count = count_message_tokens if priced else estimate_message_tokens
    sampled = list(itertools.islice(cases, SAMPLE_CASES))
    scale = len(cases) / len(sampled) if sampled else 0.0
    judge_calls = judge_prompt = target_prompt = target_calls = 0
    step_criteria: set[str] = set()
    for case in sampled:
        answer = Answer(output=case.output if case.output is not None else FILLER_WORD * ASSUMED_ANSWER_TOKENS,
                        debug_context=case.debug_context)
        names = judge_templates_for(metrics_for(case)) if judging else []
        for name in names:
            judge_prompt += count(render(TEMPLATES[name], case, answer).messages) * samples
        judge_calls += len(names) * samples
        for definition in (criteria_for(case) if judging and criteria_for is not None else ()):
            tokens = _criteria_prompt_tokens(definition, case, answer, count)
            if tokens is None:
                continue  # the case lacks a field the metric shows: skipped, no call
            judge_prompt += tokens * samples
            judge_calls += samples
            if definition.steps is None:
                step_criteria.add(definition.criteria)
        if model_target:
            target_calls += _model_calls(case)
            target_prompt += _conversation_prompt(case, count) if case.is_conversation \
                else count([{"content": case.input or ""}])
    judge_calls, judge_prompt = round(judge_calls * scale * repeat), round(judge_prompt * scale * repeat)
    for criteria in step_criteria:  # once per run, not per case
        from evalgate.judges.custom import steps_prompt

        judge_calls += 1
        judge_prompt += count(steps_prompt(criteria).messages)
    target_calls = round(target_calls * scale * repeat)
    target_prompt = round(target_prompt * scale * repeat)
    judge_completion = judge_calls * ASSUMED_COMPLETION_TOKENS
    target_completion = target_calls * ASSUMED_ANSWER_TOKENS
    cost: float | None = 0.0
    for calls, price, prompt, completion in ((judge_calls, judge_price, judge_prompt, judge_completion),
                                             (target_calls, target_price, target_prompt, target_completion)):
        if calls and price is None:
            cost = None
        elif calls and cost is not None and price is not None:
            cost += price.cost(prompt, completion)
    repair_calls = judge_calls if judging and output_mode == "prompt" else 0
    repair_prompt = judge_prompt + judge_completion + repair_calls * REPAIR_EXTRA_TOKENS if repair_calls else 0
    repair_cost: float | None = 0.0
    if repair_calls:
        repair_cost = None if judge_price is None else judge_price.cost(repair_prompt,
                                                                         repair_calls * ASSUMED_COMPLETION_TOKENS)
    return RunEstimate(judge_calls, target_calls, judge_prompt + target_prompt, judge_completion + target_completion,
                       cost, tokens_counted=priced, repair_calls=repair_calls, repair_cost_usd=repair_cost,
                       output_mode=output_mode if judging else None)


def _criteria_prompt_tokens(definition: Any, case: Case, answer: Answer,
                            count: Callable[[Sequence[Mapping[str, Any]]], int]) -> int | None:
    """Prompt tokens of a declared judged metric on ``case`` (None when the case lacks a field it shows);
    steps the judge will write are counted as one placeholder line."""
    from evalgate.judges.custom import criteria_template
    from evalgate.model import MetricSkipped, MetricUnavailable

    steps = definition.steps or ("(evaluation steps the judge writes once from the criteria)",)
    try:
        prompt = criteria_template(definition, steps, definition.steps is None).render(case, answer)
    except (MetricSkipped, MetricUnavailable):
        return None
    return count(prompt.messages)


def estimate_message_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """Σ (ceil(characters(content) / 4) + MESSAGE_OVERHEAD): the tokenizer-free count."""
    from evalgate.text.tokens import estimate_tokens

    return sum(estimate_tokens(str(m.get("content") or "")) + MESSAGE_OVERHEAD for m in messages)


def announce_estimate(settings: Any, prepared: Any, judge: Any, target: Any) -> dict[str, Any] | None:
    """Print the pre-run estimate to stderr when a judge or a model target will make paid calls."""
    import sys

    model_target = getattr(target, "kind", None) == "openai"
    if judge is None and not model_target:
        return None
    estimate = estimate_run(
        prepared.cases, lambda case: [m.name for m in prepared.plan_for(case).metrics],
        repeat=settings.repeat, samples=settings.judge_samples,
        judge_price=judge.service.price if judge is not None else None, judging=judge is not None,
        target_price=target.service.price if model_target else None, model_target=model_target,
        criteria_for=lambda case: [m.fn.definition for m in prepared.plan_for(case).metrics
                                   if hasattr(m.fn, "definition")],
        output_mode=judge.output.mode if judge is not None else None,
    )
    print(f"evalgate: {estimate.line(settings.max_cost)}", file=sys.stderr)
    return estimate.as_dict()


def _model_calls(case: Case) -> int:
    """Calls a case makes to a model target: one, or one per turn of a conversation (a simulated one's
    ``max_turns``, its upper bound)."""
    if case.turns is not None:
        return len(case.turns)
    if case.simulated_user is not None:
        return case.simulated_user.max_turns
    return 1


def _conversation_prompt(case: Case, count: Any) -> int:
    """Prompt tokens of a conversation's model calls: each turn resends the history, the earlier answers
    taken as ``ASSUMED_ANSWER_TOKENS`` each (a simulated user's messages as its goal's length)."""
    said = [turn.input for turn in case.turns] if case.turns is not None else [case.goal or ""] * _model_calls(case)
    total = 0
    for number in range(1, len(said) + 1):
        total += sum(count([{"content": text}]) for text in said[:number]) + (number - 1) * ASSUMED_ANSWER_TOKENS
    return total
