"""Records that flow down the pipeline: an ``Answer`` from a target, ``MetricResult`` per metric,
``CaseResult`` per case. Plain pydantic models, serialised as-is into results.json and SQLite."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

from evalgate.dataset.models import Mention


class Answer(BaseModel):
    """What the system under test returned for one case (recorded, HTTP, model or command)."""

    model_config = ConfigDict(extra="forbid")
    output: str | None = None
    sources: list[str] | None = None
    agents_called: list[str] | None = None
    tools_used: list[str] | None = None
    agent_id: str | None = None
    data_sources: list[str] | None = None
    mentions: list[Mention] | None = None
    ranked_list: list[str] | None = None
    debug_context: list[str] | None = None
    num_tokens: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_ms: float | None = None
    cost_usd: float | None = None
    error: str | None = None
    """Set when the target could not produce an answer; the case is then ``errored``."""


class Threshold(BaseModel):
    """A bound on a metric: ``{"min": x}`` (higher is better) or ``{"max": x}`` (lower is better)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    op: Literal["min", "max"]
    value: float

    @model_validator(mode="before")
    @classmethod
    def _from_mapping(cls, data: Any) -> Any:
        if isinstance(data, dict) and "op" not in data:
            keys = set(data)
            if keys == {"min"}:
                return {"op": "min", "value": data["min"]}
            if keys == {"max"}:
                return {"op": "max", "value": data["max"]}
            raise ValueError(f"a threshold is a number, {{'min': x}} or {{'max': x}}; got keys {sorted(keys)}")
        return data

    @model_serializer
    def _to_mapping(self) -> dict[str, float]:
        return {self.op: self.value}

    def admits(self, value: float) -> bool:
        """True when ``value`` meets the bound (``>=`` for min, ``<=`` for max)."""
        return value >= self.value if self.op == "min" else value <= self.value

    def __str__(self) -> str:
        return f"{'≥' if self.op == 'min' else '≤'} {self.value:g}"


class MetricStatus(StrEnum):
    passed = "passed"
    failed = "failed"
    errored = "errored"
    skipped = "skipped"
    unavailable = "unavailable"


class MetricResult(BaseModel):
    """One metric on one case. ``value`` is None unless status is passed/failed."""

    model_config = ConfigDict(extra="forbid")
    value: float | None = None
    threshold: Threshold | None = None
    passed: bool | None = None
    status: MetricStatus
    reason: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)


class CaseStatus(StrEnum):
    passed = "passed"
    failed = "failed"
    errored = "errored"
    skipped = "skipped"


STATUS_TEXT: dict[Any, str] = {status: status.value for status in (*MetricStatus, *CaseStatus)}
"""``status.value`` of every metric and case status, without the enum property (slow on 3.11)."""


class CaseResult(BaseModel):
    """The scored outcome of one case (one repeat)."""

    model_config = ConfigDict(extra="forbid")
    id: str
    index: int = 0
    suite: str | None = None
    category: str | None = None
    risk_level: str = "medium"
    difficulty: str | None = None
    evolution_type: str | None = None
    tags: list[str] = Field(default_factory=list)
    description: str | None = None
    source: str = "<memory>"
    status: CaseStatus
    passed: bool
    error: str | None = None
    reasons: list[str] = Field(default_factory=list)
    input: str | None = None
    expected: dict[str, Any] = Field(default_factory=dict)
    output: str | None = None
    answer: dict[str, Any] = Field(default_factory=dict)
    """Target-side data other than the text (sources, tools, agents, mentions …)."""
    metrics: dict[str, MetricResult] = Field(default_factory=dict)
    num_tokens: int | None = None
    latency_ms: float | None = None
    cost_usd: float | None = None
    repeat: int = 0


ModelT = TypeVar("ModelT", bound=BaseModel)


def trusted(cls: type[ModelT], values: dict[str, Any], fields_set: set[str] | None = None) -> ModelT:
    """``cls`` built from ``values`` without validation, for hot paths whose inputs already have exactly
    the declared types (the caller checks what it cannot guarantee and validates otherwise).

    ``values`` must hold every field (it becomes the instance's ``__dict__``); ``fields_set`` is the set
    of fields given explicitly (default: all), as ``cls(**explicit)`` would record it. The result
    equals ``cls(**values)``: a ``CaseResult`` costs ~1.5 µs instead of ~7 µs validated (``model_construct``
    takes ~10 µs).
    """
    if not _TRUSTED_OK:
        return cls.model_validate(values)  # pragma: no cover - only if pydantic's internals changed
    instance = _new(cls)
    _set(instance, "__dict__", values)
    _set(instance, "__pydantic_fields_set__", set(values) if fields_set is None else fields_set)
    _set(instance, "__pydantic_extra__", None)
    _set(instance, "__pydantic_private__", None)
    return instance


_new = object.__new__
_set = object.__setattr__


def _trusted_matches_validation() -> bool:
    """One-time check that ``trusted`` reproduces pydantic's own construction (else it validates)."""
    global _TRUSTED_OK
    _TRUSTED_OK = True
    values = {"value": 0.5, "threshold": Threshold(op="min", value=0.9), "passed": False,
              "status": MetricStatus.failed, "reason": "r", "details": {"k": [1]}}
    try:
        fast, slow = trusted(MetricResult, dict(values)), MetricResult(**values)
        return (fast == slow and fast.model_fields_set == slow.model_fields_set
                and fast.model_dump_json() == slow.model_dump_json() and fast.model_copy() == slow)
    except Exception:  # pragma: no cover - only if pydantic's internals changed
        return False


_TRUSTED_OK = _trusted_matches_validation()
