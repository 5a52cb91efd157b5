"""Judged metrics you declare: ``criteria`` in plain words, optional ``evaluation_steps`` and ``rubric``,
and the case fields the judge sees (docs/custom-metrics.md).

The metric asks the run's judge (``ctx.judge.criteria_score``, in ``evalgate.judges.custom``) for a score
on the rubric's scale and maps it linearly onto [0, 1]: value = (score − lowest band) / (highest − lowest).
Without ``evaluation_steps`` the judge writes them once per criteria text and judge model (cached, stored
in the results) and every case reuses them.

Outcomes, as for the built-in judged metrics: no judge configured → ``skipped``; a field the declaration
shows that the case lacks (``expected_output``, ``retrieval_context``, ``metadata.KEY``…) → ``skipped``
with that reason; the answer lacks its text or a ``debug_context`` the declaration shows → ``unavailable``;
a judge that cannot give a valid verdict → ``unavailable`` with the reason.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evalgate.metrics.registry import (
    NO_JUDGE_REASON,
    Metric,
    MetricContext,
    MetricSkipped,
    MetricUnavailable,
    Score,
    in_scope,
)
from evalgate.model import DEFAULT_JUDGE_FIELDS

if TYPE_CHECKING:
    from evalgate.model import Answer, Case, JudgedParts, MetricDeclaration

FAMILY = "criteria"
DEFAULT_RUBRIC: tuple[tuple[float, str], ...] = (
    (1.0, "fully meets the criteria."),
    (0.75, "meets the criteria with one minor lapse."),
    (0.5, "partly meets them; a clear problem a user would notice."),
    (0.25, "mostly fails them; only a small part is acceptable."),
    (0.0, "fails them entirely, or the answer is empty."),
)
"""The scale used when a declaration gives no ``rubric`` (0–1, five bands)."""
ANSWER_FIELDS = frozenset({"output", "debug_context", "transcript"})
FIELD_LABELS = {"input": "question", "output": "answer", "expected_output": "expected output",
                "retrieval_context": "retrieved context", "debug_context": "context the system reported",
                "expected_answer_criteria": "expected answer criteria", "transcript": "conversation",
                "goal": "user's goal", "assistant_role": "assistant's role"}


@dataclass(frozen=True, slots=True)
class CriteriaDefinition:
    """One judged metric's definition, as the judge uses it."""

    name: str
    criteria: str
    steps: tuple[str, ...] | None
    """Declared evaluation steps; None: the judge writes them once from ``criteria``."""
    rubric: tuple[tuple[float, str], ...]
    """(score, description) from the highest score to the lowest."""
    fields: tuple[str, ...]
    origin: str
    """``file:line`` of the declaration."""

    @property
    def scale(self) -> tuple[float, float]:
        scores = [score for score, _ in self.rubric]
        return min(scores), max(scores)

    @property
    def summary(self) -> str:
        """The criteria's first line (what the reports show beside the score)."""
        return next((line.strip() for line in self.criteria.splitlines() if line.strip()), "")

    @property
    def fingerprint(self) -> str:
        """sha256 (16 hex) of everything that shapes the judge's prompt."""
        payload = json.dumps([self.criteria, self.steps, self.rubric, self.fields])
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    def info(self) -> dict[str, Any]:
        return {"type": "judged", "origin": self.origin, "criteria": self.criteria,
                "evaluation_steps": list(self.steps) if self.steps else None,
                "steps_source": "declared" if self.steps else "generated",
                "rubric": [{"score": s, "description": d} for s, d in self.rubric], "fields": list(self.fields)}


MENTIONS_EXPECTED = re.compile(r"\bexpected[ _](?:output|answer)\b|\breference answer\b", re.I)
"""Criteria that speak of the expected output: without an explicit ``fields`` list the judge is shown it."""


def implied_fields(criteria: str) -> tuple[str, ...]:
    """The fields the judge sees when a definition lists none: the question and the answer, plus
    ``expected_output`` when the criteria mention the expected output (else the judge would have nothing
    to compare with)."""
    if MENTIONS_EXPECTED.search(criteria):
        return (*DEFAULT_JUDGE_FIELDS, "expected_output")
    return DEFAULT_JUDGE_FIELDS


def definition_of(name: str, parts: JudgedParts, origin: str) -> CriteriaDefinition:
    """The ``CriteriaDefinition`` of a declaration (or an inline ``assert:`` entry) named ``name``."""
    assert parts.criteria is not None
    rubric = (tuple((band.score, band.description) for band in parts.rubric) if parts.rubric else DEFAULT_RUBRIC)
    fields = tuple(parts.fields) if parts.fields else implied_fields(parts.criteria)
    return CriteriaDefinition(name=name, criteria=parts.criteria.strip(),
                              steps=tuple(parts.evaluation_steps) if parts.evaluation_steps else None,
                              rubric=rubric, fields=fields, origin=origin)


# --- what the judge sees ----------------------------------------------------------------------------------------


def field_values(definition: CriteriaDefinition, case: Case, answer: Answer) -> list[tuple[str, str]]:
    """(label, text) of each field the definition shows, in its order. Raises ``MetricSkipped`` when the
    case lacks one and ``MetricUnavailable`` when the answer does."""
    shown: list[tuple[str, str]] = []
    for name in definition.fields:
        value = _value(name, case, answer)
        if _empty(value):
            if name == "transcript" and not case.is_conversation:
                raise MetricSkipped(f"the case is not a conversation (metric {definition.name} judges the transcript)")
            if name in ANSWER_FIELDS:
                raise MetricUnavailable(f"the target returned no {'output text' if name == 'output' else name} "
                                        f"for {definition.name} to judge")
            raise MetricSkipped(f"the case has no {name} (metric {definition.name} shows it to the judge)")
        shown.append((FIELD_LABELS.get(name, name), transcript_text(value) if name == "transcript" else _text(value)))
    return shown


def _value(name: str, case: Case, answer: Answer) -> Any:
    if name.startswith("metadata."):
        return case.metadata.get(name.removeprefix("metadata."))
    if name in ANSWER_FIELDS:
        return getattr(answer, name)
    return getattr(case, name)


def transcript_text(messages: list[dict[str, str]]) -> str:
    """A conversation as the judge reads it: one ``role: text`` paragraph per message, in order."""
    return "\n\n".join(f"{m.get('role', 'user')}: {m.get('content', '')}" for m in messages)


def _empty(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, list | tuple):
        return not any(not isinstance(item, str) or item.strip() for item in value)
    return False


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        return "\n\n".join(f"[{number}] {item}" for number, item in enumerate(value, start=1))
    return json.dumps(value, ensure_ascii=False, default=str, indent=2)


# --- the registry Metric -----------------------------------------------------------------------------------------


def criteria_metric(definition: CriteriaDefinition, *, categories: tuple[str, ...] | None = None,
                    tags: tuple[str, ...] | None = None, run_on_all: bool = True,
                    description: str | None = None) -> Metric:
    """The registry ``Metric`` judging ``definition`` (planned per case)."""

    async def judged(case: Case, answer: Answer, ctx: MetricContext) -> Score:
        if ctx.judge is None:
            raise MetricSkipped(NO_JUDGE_REASON)
        field_values(definition, case, answer)  # skipped / unavailable before any call
        scored = await ctx.judge.criteria_score(definition, case, answer, repeat=ctx.repeat)
        return Score(float(scored.value), dict(scored.details))

    def applies(case: Case) -> bool:
        return run_on_all and in_scope(case, categories, tags)

    judged.__name__ = judged.__qualname__ = definition.name
    judged.definition = definition  # type: ignore[attr-defined]  # read by the cost estimate
    return Metric(name=definition.name, fn=judged, direction="higher", default_threshold=None, applies=applies,
                  kind="judged", description=description or definition.summary, family=FAMILY,
                  value_range=(0.0, 1.0), per_case=True, info=definition.info(), uses_judge=True)


def declaration_metric(declaration: MetricDeclaration, origin: str) -> Metric:
    """The Metric of a judged declaration (``criteria``)."""
    return criteria_metric(definition_of(declaration.name, declaration, origin),
                           categories=_names(declaration.categories), tags=_names(declaration.tags),
                           run_on_all=declaration.run == "all", description=declaration.description)


def _names(values: list[str] | None) -> tuple[str, ...] | None:
    return None if values is None else tuple(values)


def describe(metric: Metric) -> Mapping[str, Any] | None:
    """The metadata of a user metric (None for a built-in)."""
    return metric.info if isinstance(metric.info, Mapping) else None
