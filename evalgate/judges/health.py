"""Judge health: checks that make a readable verdict unusable, and the per-metric counts every report shows.

Checks on a verdict that parsed (``HealthCheck.check``, called by ``JudgeClient`` once per verdict and by
pairwise judging once per reply). A verdict that fails one of these is ``unavailable`` (``details.judge_failure:
unhealthy``, ``details.health``: which check), so a gated case errors by the existing rule; a pairwise reply
that fails one is no preference (``unavailable``, never a win or a tie). They read the reasoning, which a judge
that understood the task fills with what it compared; a weak model (SmolLM2-135M) fills it with pieces of the
prompt instead. In order:

* ``empty_reasoning`` — every sample's reasoning is blank;
* ``fence_echo`` — the reasoning repeats the prompt's fence markup: ``<<<``/``>>>``, ``UNTRUSTED``, ``END id=``,
  or a fence id of this prompt (its 12 hex digits, or a run of ≥ 6 of them holding a digit and a letter). No
  judge reasoning about the answer has a reason to write these;
* ``placeholder_reasoning`` — the reasoning copies the template rather than judging: it is a placeholder
  (``<your step-by-step comparison>``: starts with ``<`` and ends with ``>``, or holds a ``<…>`` placeholder the
  prompt shows), or copies the prompt's own (trusted) text — the rubric steps, the task line, the case's
  criteria: all of it found verbatim (≥ 12 characters), or ≥ half of its words inside runs of ≥ ``COPY_RUN`` (6)
  words found verbatim in the prompt with the fenced case text removed;
* ``copied_prompt`` — ≥ 80 % of its words lie in runs of 6 words found verbatim anywhere in the prompt: the
  answer or the criteria parroted back ("I refuse to write a harassing message; …" as the reasoning for that
  very answer), with hardly a word of its own. Quoting the answer inside a judgement stays well below: the
  scripted demo judge's reasonings, which quote 40 characters of the answer, come out at most ≈ 0.5;
* ``json_debris`` — the reasoning is JSON left-overs, not prose: no word of two letters or more (``][``, a list
  of numbers), a single word or number in all (``"A"``; ``on topic`` and ``412 / 880 = 46.8 %: correct``
  pass), a start with JSON punctuation (``}`` ``]`` ``,`` ``:``: no sentence starts so), a verdict key
  (``"score":``) or a line of only a brace or bracket inside, or punctuation ≥ 40 % of its visible characters;
* ``repeated_reasoning`` (run level) — the same reasoning (≥ 20 characters, compared without case and spacing)
  given for ``REPEAT_PROMPTS`` (3) or more different prompts of one template **with scores more than half the
  scale apart** (a pass and a fail: 0.2 and 0.9 on 0–1): the same words cannot explain both, so they explain
  neither — a formula, not evidence. From the third prompt on, once the string has come with such scores, its
  verdicts are unusable; the first two stand (they were recorded before the third arrived), and shards count
  their own. Why 3 and why only with far-apart scores: two different prompts can share a reasoning when their
  cases are alike (a reworded question, the same answer), and a capable judge writes "The answer matches the
  expected output." for every easy case with the same score, or "It never mentions the refund." with 0 and 0.1
  — repeating a true statement is not missing evidence, and voiding it would error every case of an easy
  suite. Identical reasonings that stand are still counted (``duplicate_reasoning``).

Two more are counted and shown (and listed in the verdict's ``details.health_flags`` for ``inconsistent``) but
leave the verdict standing:

* ``duplicate_reasoning`` — the same reasoning (≥ 20 characters) was given for another case on the same
  metric: counted by ``HealthTally`` as Σ over identical reasonings of (cases − 1), which does not depend on the
  order cases finish (a merged run counts what the unsharded run counts);
* ``inconsistent`` — with ``judge_samples`` > 1, the samples' values of one score span more than half of the
  scale (0.8 and 0.2 on 0–1).

Counted per metric (``HealthTally``, a case sink): verdicts, unusable ones by cause — the checks plus
``parse_failure`` (no valid JSON verdict), ``out_of_scale`` (a score off the metric's scale), ``refusal`` (the
model declined to judge, e.g. "I'm sorry, I can't …"), ``call_failed`` (unreachable or refused by the server)
and ``budget`` — the two flags (``unusable`` counts only the causes), and up to ``EXAMPLES`` examples of
unusable replies (one per cause first, each cut to ``EXAMPLE_CHARS`` characters; reports escape them).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalgate.judges.prompts import RenderedPrompt
    from evalgate.judges.samples import Sample
    from evalgate.model import CaseResult

CHECKS = ("empty_reasoning", "fence_echo", "placeholder_reasoning", "copied_prompt", "json_debris",
          "repeated_reasoning")
FLAGS = ("duplicate_reasoning", "inconsistent")
CAUSES = ("parse_failure", "out_of_scale", "refusal", *CHECKS, *FLAGS, "call_failed", "budget")
MIN_COPIED = 12
MIN_DUPLICATE = 20
COPY_RUN = 6
"""Words in a row found verbatim in the prompt's trusted text that count as copied."""
COPY_SHARE = 0.5
COPY_ALL = 0.8
MIN_TOKENS = 2
DEBRIS_PUNCTUATION = 0.4
REPEAT_PROMPTS = 3
EXAMPLES = 3
EXAMPLE_CHARS = 160
FENCED = re.compile(r"<<<UNTRUSTED (?P<label>.+?) id=(?P<id>[0-9a-f]+)>>>.*?<<<END id=(?P=id) UNTRUSTED>>>",
                    re.S)
FENCE_ID = re.compile(r"<<<UNTRUSTED .+? id=(?P<id>[0-9a-f]+)>>>")
FENCE_MARKUP = re.compile(r"<<<|>>>|\bUNTRUSTED\b|\bEND\s+id\s*=")
"""Case-sensitive: the fence writes ``UNTRUSTED`` and ``END id=`` in capitals; "untrusted input" is prose."""
HEX_RUN = re.compile(r"[0-9a-f]{6,}", re.I)
PLACEHOLDER = re.compile(r"<[^<>\n]{3,60}>")
KNOWN_PLACEHOLDER = re.compile(r"<\s*(?:your|brief|short|step|reasoning|explanation|comparison)\b[^<>\n]{0,60}>", re.I)
PROSE_WORD = re.compile(r"[^\W\d_]{2,}")
WORD = re.compile(r"\w+")
DEBRIS_START = tuple("}],:")
JSON_KEY = re.compile(r'"\s*(?:reasoning|score|preferred)\s*"\s*:')
SPACE = re.compile(r"\s+")
REFUSAL = re.compile(r"\b(i'?m sorry|i am sorry|i can(?:no|')t (?:help|assist|comply|evaluate|provide)|i am unable|"
                     r"i'?m unable|as an ai\b|i won'?t be able)", re.I)
OUT_OF_SCALE = re.compile(r"less than or equal|greater than or equal|off the scale|not on the scale|out of range", re.I)


def _norm(text: str) -> str:
    return SPACE.sub(" ", text).strip().lower()


def _digest(text: str) -> bytes:
    return hashlib.blake2b(_norm(text).encode(), digest_size=12).digest()


@dataclass(frozen=True)
class PromptText:
    """What the checks compare a reasoning with, for one prompt: its trusted text (fenced case text removed,
    normalised), the word runs of ``COPY_RUN`` in that text and in the whole prompt, and its fence ids."""

    trusted: str
    trusted_runs: frozenset[tuple[str, ...]]
    all_runs: frozenset[tuple[str, ...]]
    ids: tuple[str, ...]


def _runs(text: str) -> frozenset[tuple[str, ...]]:
    words = tuple(w.lower() for w in WORD.findall(text))
    return frozenset(words[i:i + COPY_RUN] for i in range(len(words) - COPY_RUN + 1))


@lru_cache(maxsize=256)
def prompt_text(messages: tuple[str, ...]) -> PromptText:
    """``PromptText`` of a prompt's message contents (cached: a verdict and its samples share one)."""
    text = " ".join(FENCED.sub(" ", content) for content in messages)
    ids = tuple(dict.fromkeys(m.group("id").lower() for content in messages for m in FENCE_ID.finditer(content)))
    return PromptText(_norm(text), _runs(text), _runs(" ".join(messages)), ids)


def _contents(prompt: RenderedPrompt) -> tuple[str, ...]:
    return tuple(str(m.get("content") or "") for m in prompt.messages)


def fence_echo(text: str, ids: Sequence[str]) -> str | None:
    """The fence markup or fence-id fragment ``text`` repeats, or None."""
    found = FENCE_MARKUP.search(text)
    if found is not None:
        return found.group(0)
    for run in HEX_RUN.findall(text):
        lowered = run.lower()
        if not (any(c.isdigit() for c in lowered) and any(c.isalpha() for c in lowered)):
            continue  # "facade", "123456": words and numbers, not an id
        if any(lowered in tag or tag in lowered for tag in ids):
            return run
    return None


def copied_share(text: str, runs: frozenset[tuple[str, ...]]) -> float:
    """Share of ``text``'s words that lie inside a run of ``COPY_RUN`` words found verbatim in ``runs``."""
    words = [w.lower() for w in WORD.findall(text)]
    if len(words) < COPY_RUN:
        return 0.0
    covered = [False] * len(words)
    for i in range(len(words) - COPY_RUN + 1):
        if tuple(words[i:i + COPY_RUN]) in runs:
            for j in range(i, i + COPY_RUN):
                covered[j] = True
    return sum(covered) / len(words)


def json_debris(text: str) -> bool:
    """True when ``text`` is JSON left-overs rather than prose (module doc)."""
    if not PROSE_WORD.search(text) or len(WORD.findall(text)) < MIN_TOKENS:
        return True
    if text.startswith(DEBRIS_START) or JSON_KEY.search(text):
        return True
    if any(line.strip() in ("{", "}", "},", "]", "[") for line in text.splitlines()):
        return True
    visible = [c for c in text if not c.isspace()]
    punctuation = sum(1 for c in visible if not c.isalnum())
    return punctuation >= DEBRIS_PUNCTUATION * len(visible)


@dataclass
class Repeats:
    """One reasoning's first ``REPEAT_PROMPTS`` − 1 prompts (hashes: their verdicts stand) and the lowest and
    highest value of each score it came with."""

    prompts: list[str] = field(default_factory=list)
    low: dict[str, float] = field(default_factory=dict)
    high: dict[str, float] = field(default_factory=dict)

    def add(self, values: Mapping[str, float]) -> None:
        for name, value in values.items():
            self.low[name] = min(value, self.low.get(name, value))
            self.high[name] = max(value, self.high.get(name, value))

    def span(self) -> float:
        """The widest range one score took with this reasoning."""
        return max((self.high[name] - self.low[name] for name in self.low), default=0.0)


@dataclass
class HealthCheck:
    """The per-verdict checks of one run's judge, and the run-level memory ``repeated_reasoning`` needs."""

    seen: dict[tuple[str, bytes], Repeats] = field(default_factory=dict)
    """(template, digest of a normalised reasoning) → the prompts that got it and the values it came with."""

    def check(self, prompt: RenderedPrompt, samples: Sequence[Sample]) -> tuple[tuple[str, str] | None, list[str]]:
        """((check, reason) for a failed check that voids the verdict, else None; the counted flags)."""
        reasonings = [s.reasoning for s in samples]
        if all(not r.strip() for r in reasonings):
            return ("empty_reasoning", "the judge gave no reasoning for its score"), []
        text = next(r for r in reasonings if r.strip()).strip()
        failed = self.unusable(prompt, text, samples[0].values)
        if failed is not None:
            return failed, []
        flags: list[str] = []
        if len(samples) > 1:
            low, high = prompt.template.value_range
            if any(max(s.values[name] for s in samples) - min(s.values[name] for s in samples) > (high - low) / 2
                   for name in samples[0].values):
                flags.append("inconsistent")
        return None, flags

    def unusable(self, prompt: RenderedPrompt, text: str,
                 values: Mapping[str, float] | None = None) -> tuple[str, str] | None:
        """(check, reason) when the reasoning ``text`` (not blank), given with ``values``, fails a check, else
        None; a reasoning that passes the others is remembered for ``repeated_reasoning``."""
        shown = repr(text[:80])
        contents = _contents(prompt)
        seen_text = prompt_text(contents)
        trusted = seen_text.trusted
        echoed = fence_echo(text, seen_text.ids)
        if echoed is not None:
            return "fence_echo", f"the judge's reasoning repeats the prompt's fence markup {echoed[:24]!r} ({shown})"
        if (text.startswith("<") and text.endswith(">")) or any(
                KNOWN_PLACEHOLDER.fullmatch(p) or p in trusted for p in PLACEHOLDER.findall(text.lower())):
            return "placeholder_reasoning", f"the judge's reasoning copies the prompt's placeholder text ({shown})"
        if (len(text) >= MIN_COPIED and _norm(text) in trusted) or copied_share(text, seen_text.trusted_runs) >= COPY_SHARE:
            return "placeholder_reasoning", f"the judge's reasoning copies the prompt's own text ({shown})"
        if copied_share(text, seen_text.all_runs) >= COPY_ALL:
            return "copied_prompt", f"the judge's reasoning is the prompt's text (the answer, the criteria) copied ({shown})"
        if json_debris(text):
            return "json_debris", f"the judge's reasoning is JSON debris, not prose ({shown})"
        if len(_norm(text)) >= MIN_DUPLICATE:
            key = hashlib.sha256("\x00".join(contents).encode()).hexdigest()[:16]
            seen = self.seen.setdefault((prompt.template.name, _digest(text)), Repeats())
            seen.add(values or {})
            if key not in seen.prompts and len(seen.prompts) < REPEAT_PROMPTS - 1:
                seen.prompts.append(key)
            low, high = prompt.template.value_range
            if key not in seen.prompts and seen.span() > (high - low) / 2:
                return "repeated_reasoning", (f"the judge gave this reasoning word for word for {REPEAT_PROMPTS} or "
                                              f"more different prompts, with different scores ({shown})")
        return None


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
    first: dict[str, dict[str, str]] = field(default_factory=dict)
    """The first unusable reply of each cause ``{cause, case, text}``."""
    more: list[dict[str, str]] = field(default_factory=list)
    """Further unusable replies (at most ``EXAMPLES``, each text once), shown when fewer causes than ``EXAMPLES``
    occurred."""

    def example(self, cause: str, case: str, text: str) -> None:
        """Keep ``text`` (cut to ``EXAMPLE_CHARS``) as an example of ``cause``."""
        shown = text.strip()
        if not shown:
            return
        row = {"cause": cause, "case": case,
               "text": shown if len(shown) <= EXAMPLE_CHARS else shown[:EXAMPLE_CHARS] + "…"}
        if any(kept["text"] == row["text"] for kept in (*self.first.values(), *self.more)):
            return  # the same words again: no new example
        if cause not in self.first:
            self.first[cause] = row
        elif len(self.more) < EXAMPLES:
            self.more.append(row)

    @property
    def examples(self) -> list[dict[str, str]]:
        """Up to ``EXAMPLES`` unusable replies: one per cause first (in order of appearance), then others."""
        return [*self.first.values(), *self.more][:EXAMPLES]

    @property
    def unusable(self) -> int:
        return sum(self.causes.values())

    def as_dict(self) -> dict[str, Any]:
        return {"verdicts": self.verdicts, "usable": self.verdicts - self.unusable, "unusable": self.unusable,
                **{cause: self.causes.get(cause, 0) + self.flags.get(cause, 0) for cause in CAUSES},
                **({"examples": list(self.examples)} if self.examples else {})}


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
                    text = details.get("reasoning") if cause in CHECKS else details.get("raw_reply")
                    if isinstance(text, str):
                        tally.example(cause, str(result.id), text)
            for flag in details.get("health_flags") or ():
                tally.flags[flag] = tally.flags.get(flag, 0) + 1
            reasoning = details.get("reasoning")
            if (metric.status.value in ("passed", "failed") and "judge_failure" not in details
                    and isinstance(reasoning, str) and len(_norm(reasoning)) >= MIN_DUPLICATE):
                digest = _digest(reasoning)
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
