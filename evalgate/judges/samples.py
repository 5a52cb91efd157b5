"""What the judge returns: one reply read (``Sample``), the values averaged over a template call's samples
(``JudgeVerdict``) and one metric's value with its details (``JudgeScore``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalgate.calls.costs import Usage
    from evalgate.judges.output import OutputMode
    from evalgate.judges.prompts import Values


@dataclass(slots=True)
class Sample:
    values: Values
    reasoning: str
    extras: dict[str, Any]
    cached: bool
    repaired: bool
    mode: OutputMode
    usage: Usage | None = None
    cost_usd: float | None = None
    parsed_from: str = "json"


@dataclass(slots=True)
class JudgeVerdict:
    """Values averaged over the samples of one template call, and what explains them."""

    values: Values
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class JudgeScore:
    value: float
    details: dict[str, Any]
