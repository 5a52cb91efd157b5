"""Judge health: checks that make a readable verdict unusable, and the per-metric counts every report shows.

Checks on a verdict that parsed (``HealthCheck.check``, called by ``JudgeClient`` once per verdict). A verdict
that fails one of these is ``unavailable`` (``details.judge_failure: unhealthy``, ``details.health``: which
check), so a gated case errors by the existing rule:

* ``empty_reasoning`` — every sample's reasoning is blank;
* ``placeholder_reasoning`` — the reasoning is a placeholder (``<your step-by-step reasoning>``: it starts with
  ``<`` and ends with ``>``) or copies the prompt's own (trusted) text: ≥ 12 characters found verbatim in the
  prompt with the fenced case text removed.

Two more are properties of a judge's verdicts taken together, so they are counted and shown (and listed in the
verdict's ``details.health_flags`` for ``inconsistent``) but leave the verdict standing: which of two identical reasonings came
"first" depends on the order cases finish, and averaging disagreeing samples is what ``judge_samples`` is for:

* ``duplicate_reasoning`` — the same reasoning (≥ 20 characters, compared without case and spacing) was given
  for another case on the same metric: counted by ``HealthTally`` as Σ over identical reasonings of (cases − 1),
  which does not depend on the order cases finish (a merged run counts what the unsharded run counts);
* ``inconsistent`` — with ``judge_samples`` > 1, the samples' values of one score span more than half of the
  scale (0.8 and 0.2 on 0–1).

Counted per metric (``HealthTally``, a case sink): verdicts, unusable ones by cause — the two checks plus
``parse_failure`` (no valid JSON verdict), ``out_of_scale`` (a score off the metric's scale), ``refusal`` (the
model declined to judge, e.g. "I'm sorry, I can't …"), ``call_failed`` (unreachable or refused by the server)
and ``budget`` — and the two flags (``unusable`` counts only the causes).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalgate.judges.client import Sample
    from evalgate.judges.prompts import RenderedPrompt
    from evalgate.model import CaseResult

CHECKS = ("empty_reasoning", "placeholder_reasoning")
FLAGS = ("duplicate_reasoning", "inconsistent")
CAUSES = ("parse_failure", "out_of_scale", "refusal", *CHECKS, *FLAGS, "call_failed", "budget")
MIN_COPIED = 12
MIN_DUPLICATE = 20
FENCED = re.compile(r"<<<UNTRUSTED (?P<label>.+?) id=(?P<id>[0-9a-f]+)>>>.*?<<<END id=(?P=id) UNTRUSTED>>>",
                    re.S)
SPACE = re.compile(r"\s+")
REFUSAL = re.compile(r"\b(i'?m sorry|i am sorry|i can(?:no|')t (?:help|assist|comply|evaluate|provide)|i am unable|"
                     r"i'?m unable|as an ai\b|i won'?t be able)", re.I)
OUT_OF_SCALE = re.compile(r"less than or equal|greater than or equal|off the scale|not on the scale|out of range", re.I)


def _norm(text: str) -> str:
    return SPACE.sub(" ", text).strip().lower()


@dataclass
class HealthCheck:
    """The per-verdict checks of one run's judge."""

    def check(self, prompt: RenderedPrompt, samples: Sequence[Sample]) -> tuple[tuple[str, str] | None, list[str]]:
        """((check, reason) for a failed check that voids the verdict, else None; the counted flags)."""
        reasonings = [s.reasoning for s in samples]
        if all(not r.strip() for r in reasonings):
            return ("empty_reasoning", "the judge gave no reasoning for its score"), []
        text = next(r for r in reasonings if r.strip()).strip()
        if (text.startswith("<") and text.endswith(">")) or self._copied(prompt, text):
            return ("placeholder_reasoning",
                    f"the judge's reasoning copies the prompt's placeholder text ({text[:80]!r})"), []
        flags: list[str] = []
        if len(samples) > 1:
            low, high = prompt.template.value_range
            if any(max(s.values[name] for s in samples) - min(s.values[name] for s in samples) > (high - low) / 2
                   for name in samples[0].values):
                flags.append("inconsistent")
        return None, flags

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
    """Unusable verdicts by cause."""
    flags: dict[str, int] = field(default_factory=dict)
    """Verdicts that stand, flagged (``duplicate_reasoning``, ``inconsistent``)."""

    @property
    def unusable(self) -> int:
        return sum(self.causes.values())

    def as_dict(self) -> dict[str, Any]:
        return {"verdicts": self.verdicts, "usable": self.verdicts - self.unusable, "unusable": self.unusable,
                **{cause: self.causes.get(cause, 0) + self.flags.get(cause, 0) for cause in CAUSES}}


class HealthTally:
    """A case sink: judge health per judged metric (results.json ``summary.judge_health``)."""

    def __init__(self) -> None:
        self.metrics: dict[str, MetricHealth] = {}
        self._first: dict[tuple[str, bytes], str] = {}
        """(metric, digest of the normalised reasoning) → the first case that gave it."""
        self._others: set[tuple[str, bytes, str]] = set()
        """Other cases that gave a reasoning already seen (each counted once, whatever its repeats)."""

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
            for flag in details.get("health_flags") or ():
                tally.flags[flag] = tally.flags.get(flag, 0) + 1
            reasoning = details.get("reasoning")
            if (metric.status.value in ("passed", "failed") and "judge_failure" not in details
                    and isinstance(reasoning, str) and len(_norm(reasoning)) >= MIN_DUPLICATE):
                digest = hashlib.blake2b(_norm(reasoning).encode(), digest_size=12).digest()
                first = self._first.setdefault((name, digest), result.id)
                if first != result.id and (name, digest, result.id) not in self._others:
                    self._others.add((name, digest, result.id))
                    tally.flags["duplicate_reasoning"] = tally.flags.get("duplicate_reasoning", 0) + 1

    def report(self) -> dict[str, Any]:
        metrics = {name: tally.as_dict() for name, tally in sorted(self.metrics.items())}
        total = {"verdicts": sum(m["verdicts"] for m in metrics.values()),
                 "unusable": sum(m["unusable"] for m in metrics.values()),
                 **{cause: sum(m[cause] for m in metrics.values()) for cause in CAUSES}}
        return {"metrics": metrics, "total": total}
