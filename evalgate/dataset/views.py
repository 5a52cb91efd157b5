"""The stable, documented views of a case and an answer that your own code receives: code checks
(``evalgate.metrics.checks``) get ``(CaseView, AnswerView)``, custom targets (``evalgate.targets.custom``)
get a ``CaseView``. Read-only; attributes are named like the dataset keys; lists are tuples; absent fields
are None. They do not change when evalgate's internal models do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalgate.model import Answer, Case

__all__ = ["AnswerView", "CaseView"]


@dataclass(frozen=True, slots=True)
class CaseView:
    """One test case as a check sees it. Lists are tuples; absent fields are None."""

    id: str
    input: str | None
    category: str | None
    tags: tuple[str, ...]
    risk_level: str
    """critical, high, medium or low."""
    suite: str | None
    description: str | None
    language: str | None
    difficulty: str | None
    expected_output: str | None
    expected_keywords: tuple[str, ...] | None
    expected_sources: tuple[str, ...] | None
    expected_answer_criteria: str | None
    passing_criteria: str | None
    """One text (a list of criteria is joined as ``- item`` lines)."""
    retrieval_context: tuple[str, ...] | None
    metadata: Mapping[str, Any]
    """Every key of the case evalgate does not know itself, plus its ``metadata:`` mapping."""
    source: str
    """``file:line`` of the case in its dataset."""
    data: Mapping[str, Any]
    """Every field the case sets, under its dataset name (``tools_should_include``, a dialect's own fields …)."""

    @property
    def critical(self) -> bool:
        return self.risk_level == "critical"

    def get(self, key: str, default: Any = None) -> Any:
        """A ``metadata`` key of the case, else any field it sets (``data``), else ``default``."""
        if key in self.metadata:
            return self.metadata[key]
        return self.data.get(key, default)

    @classmethod
    def of(cls, case: Case) -> CaseView:
        criteria = case.passing_criteria
        if isinstance(criteria, list):
            criteria = "\n".join(f"- {item}" for item in criteria)
        return cls(
            id=case.id, input=case.input, category=case.category, tags=tuple(case.tags),
            risk_level=case.risk_level.value, suite=case.suite, description=case.description,
            language=case.language, difficulty=case.difficulty, expected_output=case.expected_output,
            expected_keywords=_tuple(case.expected_keywords), expected_sources=_tuple(case.expected_sources),
            expected_answer_criteria=case.expected_answer_criteria, passing_criteria=criteria,
            retrieval_context=_tuple(case.retrieval_context), metadata=MappingProxyType(dict(case.metadata)),
            source=case.location,
            data=MappingProxyType(case.model_dump(mode="json", exclude_none=True, exclude={"metadata"})),
        )


@dataclass(frozen=True, slots=True)
class AnswerView:
    """What the system under test returned for the case. Lists are tuples; absent fields are None."""

    output: str | None
    sources: tuple[str, ...] | None
    tools_used: tuple[str, ...] | None
    agents_called: tuple[str, ...] | None
    agent_id: str | None
    data_sources: tuple[str, ...] | None
    debug_context: tuple[str, ...] | None
    ranked_list: tuple[str, ...] | None
    mentions: tuple[Mapping[str, Any], ...] | None
    """Each ``{"brand", "is_mine", "rank"}``."""
    num_tokens: int | None
    latency_ms: float | None
    cost_usd: float | None
    transcript: tuple[Mapping[str, str], ...] | None = None
    """A conversation's messages (``{"role": "user" | "assistant", "content"}``) when the check runs on the
    whole conversation (docs/conversations.md); None for a single answer."""

    @property
    def text(self) -> str:
        """``output``, or ``""`` when the target returned none."""
        return self.output or ""

    @classmethod
    def of(cls, answer: Answer) -> AnswerView:
        mentions = None if answer.mentions is None else tuple(
            MappingProxyType(m.model_dump()) for m in answer.mentions)
        return cls(
            output=answer.output, sources=_tuple(answer.sources), tools_used=_tuple(answer.tools_used),
            agents_called=_tuple(answer.agents_called), agent_id=answer.agent_id,
            data_sources=_tuple(answer.data_sources), debug_context=_tuple(answer.debug_context),
            ranked_list=_tuple(answer.ranked_list), mentions=mentions, num_tokens=answer.num_tokens,
            latency_ms=answer.latency_ms, cost_usd=answer.cost_usd,
            transcript=None if answer.transcript is None else tuple(MappingProxyType(dict(m)) for m in answer.transcript),
        )


def _tuple(values: list[str] | None) -> tuple[str, ...] | None:
    return None if values is None else tuple(values)
