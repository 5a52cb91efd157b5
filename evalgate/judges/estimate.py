"""The cost estimate printed before a run starts (and stored as results.json ``metadata.estimate``).

Calls, per selected case and repeat (× ``repeat``):

* judge: Σ over the case's planned judged metrics of (distinct templates + declared judged metrics) ×
  ``judge_samples``; plus one step-writing call per criteria text without declared steps (once per run);
* a conversation (``turns:``): the judged metrics planned for each turn's case, on that turn's answer, then
  the case's own on the whole conversation; a simulated user (``simulated_user:``): per turn up to
  ``max_turns``, the turn's metrics, one ``goal_completion`` check (× samples; the last turn's is the
  whole conversation's ``goal_completion``, answered from the run's memory) and one **simulator** call
  (none for turn 1 with a ``first_message``), at the simulator model's price;
* model target (``openai``): one call per case, one per turn of a conversation, its prompt the messages the
  target sends (``target_system_prompt`` and, in a conversation, the history so far).

Conversations are counted to their last turn (``max_turns`` for a simulated user): an upper bound, exact
when no turn fails (a failed turn stops the conversation) and a simulated user's goal is met only at the
last turn. Single-turn calls are exact, cache hits aside (the estimate ignores the cache and the run's
in-memory verdict reuse). Repair retries (``judges.client``, prompt-only output) are counted apart as an
upper bound: up to one per judge call, each costing the first call's prompt plus its reply plus
``REPAIR_EXTRA_TOKENS``; none in the structured modes.

Prompt tokens are counted on the rendered prompts with the case's recorded answer (a turn's ``output``), or
``ASSUMED_ANSWER_TOKENS`` of filler when there is none. Completion tokens of a verdict (``verdict_tokens``)
are those of a full verdict of the template's schema: a ``reasoning`` at its cap (``REASONING_MAX_CHARS``,
300 characters ≈ 60–75 tokens, what the lean prompts ask for and grammars enforce), each score ``0.75``,
and for list-valued verdicts one entry per item the judge lists (faithfulness: a claim per sentence of the
answer; context_recall: a statement per sentence of the reference; context_precision: a verdict per
chunk; written steps: ``ASSUMED_STEPS``), capped at the template's ``max_tokens``. A model target's reply
is ``ASSUMED_ANSWER_TOKENS``; a simulated user's message is as long as the case's ``goal`` (at most
``simulator.MAX_MESSAGE_TOKENS``). At most ``SAMPLE_CASES`` cases are rendered; the rest are extrapolated
from their mean.

Tokens are counted with the tokenizer (``metrics.tokens``) when they become dollars, i.e. when every model
that will be called has a price. When some model has none the cost is unknown anyway, and the token
figures are ceil(characters / 4) estimates (said so in the line): loading the tokenizer would delay the
start of every such run for no dollar figure.
"""

from __future__ import annotations

import itertools
import json
import re
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from evalgate.calls.costs import MESSAGE_OVERHEAD, Price, count_message_tokens
from evalgate.judges.client import max_tokens_for
from evalgate.judges.custom import criteria_template, steps_prompt
from evalgate.judges.output import REASONING_MAX_CHARS
from evalgate.judges.prompts import METRIC_TEMPLATES, TEMPLATES, render
from evalgate.judges.simulator import MAX_MESSAGE_TOKENS, simulator_prompt
from evalgate.metrics.registry import get_metric
from evalgate.model import Answer, MetricSkipped, MetricUnavailable, Turn
from evalgate.targets.base import TargetCall
from evalgate.text.tokens import estimate_tokens

if TYPE_CHECKING:
    from evalgate.model import Case

ASSUMED_ANSWER_TOKENS = 300
REPAIR_EXTRA_TOKENS = 60
"""The repair message and its framing, in tokens."""
SAMPLE_CASES = 200
FILLER_WORD = "word "
ASSUMED_STEPS = 5
"""Evaluation steps a judge writes from a declared criteria (1–20 allowed)."""
_SENTENCE = re.compile(r"(?<=[.!?])\s+")

Count = Callable[[Sequence[Mapping[str, Any]]], int]


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
    simulator_calls: int = 0
    """Calls of the model that plays simulated users (``judges.simulator``)."""
    upper_bound: bool = False
    """Some conversation was counted to its last turn (it may stop earlier)."""
    by_role: dict[str, dict[str, int]] = field(default_factory=dict)
    """``judge`` / ``target`` / ``simulator`` → ``calls``, ``prompt_tokens``, ``completion_tokens``."""

    def line(self, max_cost: float | None) -> str:
        cost = "unknown (no price for the model)" if self.cost_usd is None else f"~${self.cost_usd:.4f}"
        simulated = f", {self.simulator_calls} simulated-user call(s)" if self.simulator_calls else ""
        text = (f"cost estimate: {cost} for {self.judge_calls} judge call(s){simulated} and {self.target_calls} "
                f"model call(s), ~{self.prompt_tokens} prompt + ~{self.completion_tokens} completion tokens "
                f"({'' if self.tokens_counted else 'estimated as characters/4; '}cache hits not counted"
                f"{'; conversations to their last turn: at most' if self.upper_bound else ''})")
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
                "simulator_calls": self.simulator_calls,
                "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 6),
                "tokens_counted": self.tokens_counted, "repair_calls_max": self.repair_calls,
                "repair_cost_usd_max": None if self.repair_cost_usd is None else round(self.repair_cost_usd, 6),
                "output_mode": self.output_mode, "upper_bound": self.upper_bound,
                "by_role": {role: dict(figures) for role, figures in self.by_role.items()}}


def judge_templates_for(metric_names: Sequence[str]) -> list[str]:
    """Distinct templates the metrics need (answer_quality, factual_correctness and completeness share one call)."""
    return sorted({METRIC_TEMPLATES[name] for name in metric_names if name in METRIC_TEMPLATES})


@dataclass
class _Tally:
    """Calls and tokens per role (``judge``, ``target``, ``simulator``): [calls, prompt, completion]."""

    roles: dict[str, list[int]] = field(default_factory=lambda: {r: [0, 0, 0] for r in ("judge", "target",
                                                                                        "simulator")})
    steps: set[str] = field(default_factory=set)
    upper_bound: bool = False

    def add(self, role: str, calls: int, prompt: int, completion: int) -> None:
        figures = self.roles[role]
        figures[0] += calls
        figures[1] += prompt
        figures[2] += completion


@dataclass
class _Plan:
    """What the estimate needs of the run (see ``estimate_run``)."""

    metrics_for: Callable[[Case], Sequence[str]]
    criteria_for: Callable[[Case], Sequence[Any]] | None
    turn_case: Callable[[Case, Turn, int], Case] | None
    samples: int
    judging: bool
    model_target: bool
    simulating: bool
    count: Count
    target_messages: Callable[[Case, Any], Sequence[Mapping[str, Any]]] | None = None
    """The model target's ``messages(case, call)`` (system prompt included), or None: the input alone."""

    def model_prompt(self, case: Case, call: Any) -> int:
        """Prompt tokens of the model target's call for ``case`` (a ``TargetCall`` of a turn, or None)."""
        messages: Sequence[Mapping[str, Any]] | None = None
        if self.target_messages is not None:
            try:
                messages = self.target_messages(case, call)
            except Exception:  # a system prompt that does not render errors the case at run time, unpaid
                messages = None
        if messages is None:
            messages = call.messages if call is not None else [{"role": "user", "content": case.input or ""}]
        return self.count(messages)


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
    turn_case: Callable[[Case, Turn, int], Case] | None = None,
    simulating: bool | None = None,
    simulator_price: Price | None = None,
    target_messages: Callable[[Case, Any], Sequence[Mapping[str, Any]]] | None = None,
) -> RunEstimate:
    """``criteria_for(case)``: the ``CriteriaDefinition`` of each declared judged metric planned for the case
    (one call per case each, plus one step-writing call per criteria text without declared steps);
    ``output_mode``: the judge's output mode at the start (``prompt``: repair retries are possible);
    ``turn_case(case, turn, number)``: the case a conversation's turn is scored as (``runner.conversation``;
    without it turns are judged by the case's own metrics); ``simulating``: a model plays simulated users
    (default: when judging), at ``simulator_price`` (default: the judge's); ``target_messages(case, call)``:
    the model target's messages (its system prompt included)."""
    simulating = judging if simulating is None else simulating
    sim_price = simulator_price if simulator_price is not None else judge_price
    priced = ((not judging or judge_price is not None) and (not model_target or target_price is not None)
              and (not simulating or sim_price is not None))
    plan = _Plan(metrics_for, criteria_for, turn_case, samples, judging, model_target, simulating,
                 count_message_tokens if priced else estimate_message_tokens, target_messages)
    sampled = list(itertools.islice(cases, SAMPLE_CASES))
    scale = len(cases) / len(sampled) if sampled else 0.0
    tally = _Tally()
    for case in sampled:
        _estimate_case(case, plan, tally)
    figures = {role: [round(value * scale * repeat) for value in values] for role, values in tally.roles.items()}
    for criteria in sorted(tally.steps):  # once per run, not per case
        _steps_call(criteria, plan, figures["judge"])
    judge_calls, judge_prompt, judge_completion = figures["judge"]
    if not any(figures["simulator"]):
        figures.pop("simulator")
    cost: float | None = 0.0
    for role, price in (("judge", judge_price), ("target", target_price), ("simulator", sim_price)):
        calls, prompt, completion = figures.get(role, (0, 0, 0))
        if calls and price is None:
            cost = None
        elif calls and cost is not None and price is not None:
            cost += price.cost(prompt, completion)
    repair_calls = judge_calls if judging and output_mode == "prompt" else 0
    repair_cost: float | None = 0.0
    if repair_calls:
        repair_prompt = judge_prompt + judge_completion + repair_calls * REPAIR_EXTRA_TOKENS
        repair_cost = None if judge_price is None else judge_price.cost(repair_prompt, judge_completion)
    return RunEstimate(judge_calls, figures["target"][0], sum(f[1] for f in figures.values()),
                       sum(f[2] for f in figures.values()), cost, tokens_counted=priced, repair_calls=repair_calls,
                       repair_cost_usd=repair_cost, output_mode=output_mode if judging else None,
                       simulator_calls=figures.get("simulator", [0])[0], upper_bound=tally.upper_bound,
                       by_role={role: {"calls": f[0], "prompt_tokens": f[1], "completion_tokens": f[2]}
                                for role, f in figures.items() if f[0]})


def _filler(tokens: int) -> str:
    return FILLER_WORD * tokens


def _estimate_case(case: Case, plan: _Plan, tally: _Tally) -> None:
    if case.turns is None and case.simulated_user is None:
        answer = Answer(output=case.output if case.output is not None else _filler(ASSUMED_ANSWER_TOKENS),
                        debug_context=case.debug_context)
        _judge_work(case, answer, plan, tally)
        if plan.model_target:
            tally.add("target", 1, plan.model_prompt(case, None), ASSUMED_ANSWER_TOKENS)
        return
    tally.upper_bound = tally.upper_bound or len(case.turns or ()) > 1 or case.simulated_user is not None
    messages: list[dict[str, str]] = []
    answers: list[str] = []
    turns = case.turns if case.turns is not None else [None] * case.simulated_user.max_turns  # type: ignore[union-attr]
    for number, given in enumerate(turns, 1):
        if given is None:  # a simulated user's turn
            user = case.simulated_user
            assert user is not None
            if number == 1 and user.first_message:
                said = user.first_message
            else:
                said = _simulated_message(case, messages, plan, tally)
            turn = Turn(input=said)
        else:
            turn = given
        current = plan.turn_case(case, turn, number) if plan.turn_case is not None else case
        if plan.model_target:  # the whole history so far, this turn's message included
            call = TargetCall(case.id, 0, turn=number, messages=[*messages, {"role": "user", "content": turn.input}])
            tally.add("target", 1, plan.model_prompt(current, call), ASSUMED_ANSWER_TOKENS)
        output = turn.output if turn.output is not None else _filler(ASSUMED_ANSWER_TOKENS)
        messages += [{"role": "user", "content": turn.input}, {"role": "assistant", "content": output}]
        answers.append(output)
        _judge_work(current, Answer(output=output, transcript=[dict(m) for m in messages]), plan, tally)
        if given is None and plan.judging and not (number == len(turns) and _plans_goal(case, plan)):
            # the goal check after each passed turn; the last one's prompt is the whole conversation's
            # goal_completion, which the run then answers from memory
            _goal_check(case, Answer(output=output, transcript=[dict(m) for m in messages]), plan, tally)
    whole = Answer(output="\n\n".join(answers), transcript=[dict(m) for m in messages])
    _judge_work(case, whole, plan, tally)


def _simulated_message(case: Case, messages: list[dict[str, str]], plan: _Plan, tally: _Tally) -> str:
    """The simulator's call for the next user message (counted when a simulator plays the user); the
    message assumed as long as the goal."""
    goal = case.goal or ""
    if plan.simulating:
        prompt = plan.count([{"role": "user", "content": simulator_prompt(case, messages)}])
        reply = min(MAX_MESSAGE_TOKENS, _text_tokens(goal, plan.count))
        tally.add("simulator", 1, prompt, reply)
    return goal


def _plans_goal(case: Case, plan: _Plan) -> bool:
    """Whether ``goal_completion`` is scored on the whole conversation of ``case``."""
    definitions = plan.criteria_for(case) if plan.criteria_for is not None else ()
    return any(getattr(definition, "name", None) == "goal_completion" for definition in definitions)


def _goal_check(case: Case, answer: Answer, plan: _Plan, tally: _Tally) -> None:
    definition = get_metric("goal_completion").fn.definition  # type: ignore[attr-defined]
    _criteria_work(definition, case, answer, plan, tally)


def _judge_work(case: Case, answer: Answer, plan: _Plan, tally: _Tally) -> None:
    """The judge calls the planned judged metrics of ``case`` make on ``answer``."""
    if not plan.judging:
        return

    for name in judge_templates_for(plan.metrics_for(case)):
        template = TEMPLATES[name]
        rendered = render(template, case, answer)
        tally.add("judge", plan.samples, plan.count(rendered.messages) * plan.samples,
                  verdict_tokens(template, case, answer, plan.count) * plan.samples)
    for definition in plan.criteria_for(case) if plan.criteria_for is not None else ():
        _criteria_work(definition, case, answer, plan, tally)


def _criteria_work(definition: Any, case: Case, answer: Answer, plan: _Plan, tally: _Tally) -> None:
    steps = definition.steps or ("(evaluation steps the judge writes once from the criteria)",)
    template = criteria_template(definition, steps, definition.steps is None)
    try:
        prompt = template.render(case, answer)
    except (MetricSkipped, MetricUnavailable):
        return  # the case lacks a field the metric shows: skipped, no call
    tally.add("judge", plan.samples, plan.count(prompt.messages) * plan.samples,
              verdict_tokens(template, case, answer, plan.count) * plan.samples)
    if definition.steps is None:
        tally.steps.add(definition.criteria)


def _steps_call(criteria: str, plan: _Plan, judge: list[int]) -> None:
    prompt = steps_prompt(criteria)
    judge[0] += 1
    judge[1] += plan.count(prompt.messages)
    judge[2] += verdict_tokens(prompt.template, None, None, plan.count)


def _text_tokens(text: str, count: Count) -> int:
    return max(0, count([{"content": text}]) - MESSAGE_OVERHEAD)


def _sentences(text: str | None) -> list[str]:
    return [part for part in _SENTENCE.split((text or "").strip()) if part.strip()]


def _list_items(template_name: str, case: Case | None, answer: Answer | None) -> list[str]:
    """The texts a list-valued verdict has one entry for (see the module docstring)."""
    if template_name == "faithfulness":
        return _sentences(answer.output if answer is not None else None)
    if template_name == "context_recall":
        return _sentences(case.expected_output if case is not None else None)
    if template_name == "context_precision":
        return ["" for _ in (case.retrieval_context if case is not None else None) or []]
    return [_filler(12) for _ in range(ASSUMED_STEPS)]


def _example(model: type[BaseModel], text: str, items: list[str]) -> dict[str, Any]:
    """A verdict of ``model``'s shape: strings ``text``, numbers 0.75, lists one entry per item."""
    example: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        annotation = info.annotation
        if getattr(annotation, "__origin__", None) is list:
            (inner,) = getattr(annotation, "__args__", (str,))
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                example[name] = [_example(inner, item, []) for item in items]
            else:
                example[name] = list(items)
        elif annotation is str:
            example[name] = text
        elif annotation is bool:
            example[name] = True
        elif annotation is int:
            example[name] = 1
        else:  # float scores, literals
            example[name] = 0.75 if annotation is float else "supported"
    return example


def verdict_tokens(template: Any, case: Case | None, answer: Answer | None, count: Count) -> int:
    """Completion tokens assumed for one verdict of ``template`` (see the module docstring): the tokens of
    a full verdict of its schema, at most the template's ``max_tokens``."""
    verdict = _example(template.verdict, _filler(REASONING_MAX_CHARS // len(FILLER_WORD)),
                       _list_items(template.name, case, answer))
    verdict["reasoning"] = _filler(REASONING_MAX_CHARS // len(FILLER_WORD))
    return min(max_tokens_for(template), _text_tokens(json.dumps(verdict), count))


def estimate_message_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """Σ (ceil(characters(content) / 4) + MESSAGE_OVERHEAD): the tokenizer-free count."""
    return sum(estimate_tokens(str(m.get("content") or "")) + MESSAGE_OVERHEAD for m in messages)


def announce_estimate(prepared: Any, judge: Any, target: Any, *, repeat: int, samples: int, max_cost: float | None,
                      simulator: Any = None, turn_case: Callable[[Case, Turn, int], Case] | None = None
                      ) -> dict[str, Any] | None:
    """Print the pre-run estimate to stderr when a judge or a model target will make paid calls (``samples``:
    ``judge_samples``; ``max_cost``: the budget the line compares with)."""
    model_target = getattr(target, "kind", None) == "openai"
    if judge is None and not model_target:
        return None
    estimate = estimate_run(
        prepared.cases, lambda case: [m.name for m in prepared.plan_for(case).metrics],
        repeat=repeat, samples=samples,
        judge_price=judge.service.price if judge is not None else None, judging=judge is not None,
        target_price=target.service.price if model_target else None, model_target=model_target,
        criteria_for=lambda case: [m.fn.definition for m in prepared.plan_for(case).metrics
                                   if hasattr(m.fn, "definition")],
        output_mode=judge.output.mode if judge is not None else None,
        turn_case=turn_case, simulating=simulator is not None,
        simulator_price=simulator.service.price if simulator is not None else None,
        target_messages=getattr(target, "messages", None) if model_target else None,
    )
    print(f"evalgate: {estimate.line(max_cost)}", file=sys.stderr)
    return estimate.as_dict()
