"""Judge health: checks that make a readable verdict unusable, and the per-metric counts every report shows.

Checks on a verdict that parsed (``HealthCheck.check``, called by ``JudgeClient`` once per verdict); a verdict
that fails one is ``unavailable`` (``details.judge_failure: unhealthy``, ``details.health``: which check), so a
gated case errors by the existing rule:

* ``empty_reasoning`` — every sample's reasoning is blank;
* ``placeholder_reasoning`` — the reasoning is a placeholder (``<your step-by-step reasoning>``: it starts with
  ``<`` and ends with ``>``) or copies the prompt's own (trusted) text: ≥ 12 characters found verbatim in the
  prompt with the fenced case text removed;
* ``duplicate_reasoning`` — the same reasoning (≥ 20 characters, compared without case and spacing) was given
  for a different prompt of the same template earlier in the run (the first one stands);
* ``inconsistent`` — with ``judge_samples`` > 1, the samples' values of one score span more than half of the
  scale (0.6 and 0.1 on 0–1: no verdict to average).

Counted per metric (``HealthTally``, a case sink): verdicts, and unusable ones by cause — those four plus
``parse_failure`` (no valid JSON verdict), ``out_of_scale`` (a score off the metric's scale), ``refusal`` (the
model declined to judge, e.g. "I'm sorry, I can't …"), ``call_failed`` (unreachable or refused by the server)
and ``budget``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalgate.judges.client import Sample
    from evalgate.judges.prompts import RenderedPrompt
    from evalgate.model import CaseResult

CHECKS = ("empty_reasoning", "placeholder_reasoning", "duplicate_reasoning", "inconsistent")
CAUSES = ("parse_failure", "out_of_scale", "refusal", *CHECKS, "call_failed", "budget")
MIN_COPIED = 12
MIN_DUPLICATE = 20
FENCED = re.compile(r"<<<UNTRUSTED (?P<label>.+?) id=(?P<id>[0-9a-f]+)>>>.*?<<<END (?P=label) id=(?P=id) UNTRUSTED>>>",
                    re.S)
SPACE = re.compile(r"\s+")
REFUSAL = re.compile(r"\b(i'?m sorry|i am sorry|i can(?:no|')t (?:help|assist|comply|evaluate|provide)|i am unable|"
                     r"i'?m unable|as an ai\b|i won'?t be able)", re.I)
OUT_OF_SCALE = re.compile(r"less than or equal|greater than or equal|off the scale|not on the scale|out of range", re.I)


def _norm(text: str) -> str:
    return SPACE.sub(" ", text).strip().lower()


@dataclass
class HealthCheck:
    """The checks of one run's judge (it remembers reasoning seen, per template)."""

    seen: dict[tuple[str, str], str] = field(default_factory=dict)
    """(template, normalised reasoning) → the prompt hash that gave it first."""

    def check(self, prompt: RenderedPrompt, samples: Sequence[Sample], prompt_hash: str) -> tuple[str, str] | None:
        """(check, reason) for the first failed check, else None."""
        reasonings = [s.reasoning for s in samples]
        if all(not r.strip() for r in reasonings):
            return "empty_reasoning", "the judge gave no reasoning for its score"
        reasoning = next(r for r in reasonings if r.strip())
        text = reasoning.strip()
        if (text.startswith("<") and text.endswith(">")) or self._copied(prompt, text):
            return "placeholder_reasoning", f"the judge's reasoning copies the prompt's placeholder text ({text[:80]!r})"
        normal = _norm(text)
        if len(normal) >= MIN_DUPLICATE:
            slot = (prompt.template.name, normal)
            first = self.seen.setdefault(slot, prompt_hash)
            if first != prompt_hash:
                return "duplicate_reasoning", ("the judge gave word for word the same reasoning for another case "
                                              f"({text[:80]!r})")
        if len(samples) > 1:
            low, high = prompt.template.value_range
            for name in samples[0].values:
                values = [s.values[name] for s in samples]
                if max(values) - min(values) > (high - low) / 2:
                    shown = ", ".join(f"{v:.2f}" for v in values)
                    return "inconsistent", f"the judge's {len(samples)} samples disagree on {name}: {shown}"
        return None

    @staticmethod
    def _copied(prompt: RenderedPrompt, text: str) -> bool:
        if len(text) < MIN_COPIED:
            return False
        trusted = " ".join(FENCED.sub(" ", str(m.get("content") or "")) for m in prompt.messages)
        return _norm(text) in _norm(trusted)


def cause_of(details: dict[str, Any], reason: str) -> str | None:
    """The health cause of an unavailable judged result (None: it was not the judge's)."""
    failure = details.get("judge_failure")
    if failure == "unhealthy":
        return str(details.get("health") or "unhealthy")
    if failure == "unreadable":
        raw = str(details.get("raw_reply") or "")
        if REFUSAL.search(raw) and not raw.lstrip().startswith("{"):
            return "refusal"
        if OUT_OF_SCALE.search(reason) or OUT_OF_SCALE.search(str(details.get("first_problem") or "")):
            return "out_of_scale"
        return "parse_failure"
    if failure in ("unreachable", "refused"):
        return "call_failed"
    if failure == "budget":
        return "budget"
    return None


@dataclass
class MetricHealth:
    verdicts: int = 0
    causes: dict[str, int] = field(default_factory=dict)

    @property
    def unusable(self) -> int:
        return sum(self.causes.values())

    def as_dict(self) -> dict[str, Any]:
        return {"verdicts": self.verdicts, "usable": self.verdicts - self.unusable, "unusable": self.unusable,
                **{cause: self.causes.get(cause, 0) for cause in CAUSES}}


class HealthTally:
    """A case sink: judge health per judged metric (results.json ``summary.judge_health``)."""

    def __init__(self) -> None:
        self.metrics: dict[str, MetricHealth] = {}

    def __call__(self, result: CaseResult) -> None:
        self.add(result)

    def add(self, result: CaseResult) -> None:
        for name, metric in result.metrics.items():
            details = metric.details or {}
            if details.get("method") != "judge" and "judge_failure" not in details:
                continue
            tally = self.metrics.setdefault(name, MetricHealth())
            tally.verdicts += 1
            if metric.status.value in ("unavailable", "errored") or "judge_failure" in details:
                cause = cause_of(details, metric.reason or "")
                if cause is not None:
                    tally.causes[cause] = tally.causes.get(cause, 0) + 1

    def report(self) -> dict[str, Any]:
        metrics = {name: tally.as_dict() for name, tally in sorted(self.metrics.items())}
        total = {"verdicts": sum(m["verdicts"] for m in metrics.values()),
                 "unusable": sum(m["unusable"] for m in metrics.values()),
                 **{cause: sum(m[cause] for m in metrics.values()) for cause in CAUSES}}
        return {"metrics": metrics, "total": total}
