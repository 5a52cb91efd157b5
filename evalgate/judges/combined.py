"""One judge call for several metrics (the suite option ``judge_combine``).

The judged metrics in ``metrics.judged.SHARED_INPUTS`` show the judge the same inputs and ask for one
0–1 score each. With ``judge_combine`` on, those planned for a case are scored by one call: ``combined.j2``
shows each member's task and steps (rendered from its own template's ``task`` and ``steps`` blocks, so the
rubric text stays the one the separate call would show), the case's criteria and the inputs once, and the
verdict is ``{"reasoning", "<metric>": score, …}``. The call is made once per case: the second member's
``JudgeClient.score`` finds the verdict in the client's memo (same prompt, same key) or in the judge cache.

Fixed text per case: one system message and one set of fenced inputs instead of one per metric.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, create_model

from evalgate.judges.prompts import (
    JudgeTemplate,
    PromptInputs,
    RenderedPrompt,
    Values,
    environment,
    system_prompt,
    template_for_metric,
    template_version,
)

if TYPE_CHECKING:
    from evalgate.model import Answer, Case

COMBINED_FILE = "combined.j2"
WITH_REFERENCE = frozenset({"correctness", "math"})
"""Members whose own prompt shows the expected output (their group's prompt shows it once)."""


@dataclass(frozen=True, slots=True)
class CombinedTemplate(JudgeTemplate):
    """``combined.j2`` for an ordered tuple of metrics sharing their inputs."""

    members: tuple[str, ...] = ()

    @property
    def file(self) -> str:
        return COMBINED_FILE

    def render(self, case: Case, answer: Answer) -> RenderedPrompt:
        inputs = PromptInputs.of(case, answer)
        variables = inputs.variables()
        members = [(name, *_blocks(name, variables)) for name in self.members]
        user = environment().get_template(COMBINED_FILE).render(
            members=members, with_reference=bool(WITH_REFERENCE & set(self.members)), **variables).strip()
        messages = ({"role": "system", "content": system_prompt()}, {"role": "user", "content": user})
        return RenderedPrompt(self, combined_version(self.members), messages, inputs)


def _blocks(metric: str, variables: dict[str, Any]) -> tuple[str, str]:
    """The ``task`` and ``steps`` blocks of ``metric``'s own template, rendered."""
    template = environment().get_template(template_for_metric(metric).file)
    context = template.new_context(variables)
    return tuple("".join(template.blocks[block](context)).strip() for block in ("task", "steps"))  # type: ignore[return-value]


@cache
def combined_version(members: tuple[str, ...]) -> str:
    """``combined@`` + 12 hex of sha256 over combined.j2's version and each member template's version."""
    parts = [template_version(COMBINED_FILE), *(template_version(template_for_metric(m).file) for m in members)]
    return "combined@" + hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:12]


@cache
def combined_verdict(members: tuple[str, ...]) -> type[BaseModel]:
    """``{"reasoning": str, "<metric>": float in [0, 1], …}`` in ``members`` order."""
    fields: dict[str, Any] = {"reasoning": (str, ...)}
    fields.update({name: (float, Field(ge=0.0, le=1.0)) for name in members})
    return create_model("CombinedVerdict_" + "_".join(members), **fields)


@cache
def combined_template(members: tuple[str, ...]) -> CombinedTemplate:
    """The template scoring ``members`` (≥ 2 metrics of one ``SHARED_INPUTS`` group) in one call."""
    if len(members) < 2:
        raise ValueError("a combined call needs at least two metrics")

    def values(verdict: Any, inputs: PromptInputs) -> Values:
        return {name: float(getattr(verdict, name)) for name in members}

    return CombinedTemplate("_and_".join(members), combined_verdict(members), values, (0.0, 1.0), members)
