"""Judging the metrics you declare (``evalgate.metrics.criteria``) with the run's judge.

Per case: ``criteria.j2`` shows the criteria (trusted), the evaluation steps, the rubric and each field the
declaration names, fenced like every untrusted text; the verdict is ``{"reasoning", "score"}`` with the score
on the rubric's scale, validated against a JSON schema bounded by that scale (sent as ``response_format``
where the provider takes one), and goes through the same cache, samples, repair retry, cost ledger and
``unavailable`` outcomes as the built-in judged metrics (``JudgeClient.verdict``).

Steps: a definition without ``evaluation_steps`` gets them from the judge once per criteria text and judge
(``criteria_steps.j2``; the reply is cached in the judge cache like any other, so a later run reuses them
without a call); concurrent cases wait for that one call. When it fails, every case of that metric is
``unavailable`` with the reason; no case asks again.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, Field, create_model

from evalgate.judges.prompts import (
    JudgeTemplate,
    PromptInputs,
    RenderedPrompt,
    StepsVerdict,
    Values,
    environment,
    system_prompt,
    template_version,
)
from evalgate.judges.samples import JudgeScore, JudgeVerdict, Sample
from evalgate.metrics.criteria import CriteriaDefinition, field_values
from evalgate.model import MAX_STEPS, MetricUnavailable

if TYPE_CHECKING:
    from evalgate.model import Answer, Case

CRITERIA_FILE = "criteria.j2"
STEPS_FILE = "criteria_steps.j2"


@cache
def verdict_model(low: float, high: float) -> type[BaseModel]:
    """``{"reasoning": str, "score": float in [low, high]}`` (one class per scale)."""
    label = re.sub(r"[^0-9A-Za-z]", "_", f"{low:g}_{high:g}")
    return create_model(f"CriteriaVerdict_{label}", reasoning=(str, ...),
                        score=(float, Field(ge=low, le=high)))


def _template_name(metric: str) -> str:
    """A response-format-safe name (``[A-Za-z0-9_-]``, ≤ 48 characters) for a metric's template."""
    return ("criteria_" + re.sub(r"[^A-Za-z0-9_-]", "_", metric))[:48]


@dataclass(frozen=True, slots=True)
class CriteriaTemplate(JudgeTemplate):
    """``criteria.j2`` for one definition with its steps (declared or generated)."""

    definition: CriteriaDefinition | None = None
    steps: tuple[str, ...] = ()
    steps_origin: str = "given by the test author"

    @property
    def file(self) -> str:
        return CRITERIA_FILE

    def render(self, case: Case, answer: Answer) -> RenderedPrompt:
        definition = self.definition
        assert definition is not None
        low, high = definition.scale
        user = environment().get_template(CRITERIA_FILE).render(
            metric_name=definition.name, criteria=definition.criteria, steps=list(self.steps),
            steps_origin=self.steps_origin, rubric=list(definition.rubric), low=low, high=high,
            shown=field_values(definition, case, answer),
        ).strip()
        messages = ({"role": "system", "content": system_prompt()}, {"role": "user", "content": user})
        return RenderedPrompt(self, template_version(CRITERIA_FILE), messages, PromptInputs.of(case, answer))


@lru_cache(maxsize=256)
def criteria_template(definition: CriteriaDefinition, steps: tuple[str, ...], generated: bool) -> CriteriaTemplate:
    low, high = definition.scale
    span = high - low
    name = definition.name

    def values(verdict: Any, inputs: PromptInputs) -> Values:
        return {name: (float(verdict.score) - low) / span}

    return CriteriaTemplate(_template_name(name), verdict_model(low, high), values, (0.0, 1.0), definition, steps,
                            "written by the judge from the criteria, once for every case" if generated
                            else "given by the test author")


def _no_values(verdict: Any, inputs: PromptInputs) -> Values:
    return {}


STEPS_TEMPLATE = JudgeTemplate("criteria_steps", StepsVerdict, _no_values)


def steps_prompt(criteria: str) -> RenderedPrompt:
    """The step-generation prompt for ``criteria`` (its text alone decides it, with the judge's model)."""
    user = environment().get_template(STEPS_FILE).render(criteria=criteria, max_steps=MAX_STEPS).strip()
    messages = ({"role": "system", "content": system_prompt()}, {"role": "user", "content": user})
    empty = PromptInputs("", "", "", "", "", "", (), (), (), (), (), (), (), "", "")
    return RenderedPrompt(STEPS_TEMPLATE, template_version(STEPS_FILE), messages, empty)


class VerdictSource(Protocol):
    """What custom judging asks of the run's judge (``judges.client.JudgeClient`` is one)."""

    async def verdict(self, template: JudgeTemplate, case: Case, answer: Answer, *, repeat: int = 0,
                      rubric: str | None = None) -> JudgeVerdict: ...

    async def once(self, prompt: RenderedPrompt) -> Sample: ...

    def cached(self, prompt: RenderedPrompt) -> Sample | None: ...


@dataclass
class GeneratedSteps:
    steps: tuple[str, ...]
    cached: bool
    reasoning: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class CriteriaJudging:
    """The custom-metric state of one judge client: generated steps, one call per criteria text."""

    client: VerdictSource
    pending: dict[str, asyncio.Future[GeneratedSteps]] = field(default_factory=dict)
    generated: dict[str, GeneratedSteps | str] = field(default_factory=dict)
    """criteria text → its steps, or the reason they could not be generated (for the results)."""

    async def score(self, definition: CriteriaDefinition, case: Case, answer: Answer, *, repeat: int) -> JudgeScore:
        if definition.steps is not None:
            template = criteria_template(definition, definition.steps, generated=False)
            extra: dict[str, Any] = {"steps_source": "declared"}
        else:
            steps = await self.steps_for(definition.criteria)
            template = criteria_template(definition, steps.steps, generated=True)
            extra = {"steps_source": "cache" if steps.cached else "generated"}
        verdict = await self.client.verdict(template, case, answer, repeat=repeat)
        details = dict(verdict.details)
        details.update(extra, criteria=definition.summary)
        return JudgeScore(verdict.values[definition.name], details)

    async def steps_for(self, criteria: str) -> GeneratedSteps:
        """The judge's steps for ``criteria``: one call (or cache hit) however many cases ask at once."""
        future = self.pending.get(criteria)
        if future is None:
            future = self.pending[criteria] = asyncio.ensure_future(self._generate(criteria))
            future.add_done_callback(_retrieve)
        return await asyncio.shield(future)

    async def _generate(self, criteria: str) -> GeneratedSteps:
        try:
            sample = await self.client.once(steps_prompt(criteria))
        except MetricUnavailable as exc:
            self.generated[criteria] = str(exc)
            raise MetricUnavailable(f"the judge could not write evaluation steps from the criteria: {exc}",
                                    dict(exc.details)) from None
        steps = _clean_steps(sample.extras.get("steps"))
        if not steps:
            self.generated[criteria] = "the judge returned no usable step"
            raise MetricUnavailable("the judge returned no usable evaluation step for the criteria")
        result = GeneratedSteps(steps, sample.cached, sample.reasoning)
        self.generated[criteria] = result
        return result

    def cached_steps(self, criteria: str) -> tuple[str, ...] | None:
        """Steps for ``criteria`` already in the judge cache (no call), or None."""
        sample = self.client.cached(steps_prompt(criteria))
        return _clean_steps(sample.extras.get("steps")) if sample is not None else None


def _clean_steps(raw: Any) -> tuple[str, ...]:
    if not isinstance(raw, list):
        return ()
    return tuple(" ".join(str(step).split()) for step in raw if str(step).strip())[:MAX_STEPS]


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark a failed generation's exception as seen (every waiting case already got it)."""
    if not future.cancelled():
        future.exception()


def criteria_judging(client: VerdictSource) -> CriteriaJudging:
    """The ``CriteriaJudging`` of ``client`` (created on first use)."""
    judging = getattr(client, "_criteria", None)
    if judging is None:
        judging = CriteriaJudging(client)
        client._criteria = judging  # type: ignore[attr-defined]
    return judging


def steps_metadata(client: Any) -> dict[str, Any]:
    """criteria text → ``{"steps": [...], "cached": bool}`` or ``{"error": reason}``, for the results."""
    judging = getattr(client, "_criteria", None)
    if judging is None:
        return {}
    out: dict[str, Any] = {}
    for criteria, steps in judging.generated.items():
        out[criteria] = ({"error": steps} if isinstance(steps, str)
                         else {"steps": list(steps.steps), "cached": steps.cached})
    return out
