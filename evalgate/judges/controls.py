"""Control items built from the suite itself, and the judge's verdicts on them (``runner.calibrate``).

A judged metric may gate without human labels once its judge separates **controls**: answers whose verdict is
known by construction, built deterministically from the cases the metric runs on (no model, no human):

* positive (must pass): the case's reference (``expected_output``, or the field a dialect keeps the metric's
  reference in: ``evalgate.dialect.reference_field``) as the answer, and the same reference after a neutral
  lead-in;
* negative (must fail): another case's reference (an answer to a different question), an evasive non-answer, and
  for metrics that compare the answer with its reference, perturbations that break it: every number changed, the
  first claim negated, its second half dropped, its first quarter only (truncated);
* conversations (``knowledge_retention``): the case's user messages with an assistant that restates them
  (positive) and one that says it does not know, asks again or denies being told (negative).

Which metrics have controls (``family``): the reference metrics ``correctness``, ``math``, ``response_quality`` and
every criteria metric whose prompt shows the expected output; ``relevancy`` (other case's answer and the evasive
answer only: a perturbed answer still addresses its question); ``knowledge_retention``. The others (context,
safety, policy, tools, style …) cannot be given a verdict by construction: only human labels vouch for them.

The set is bounded: at most ``max_items`` items (cases taken in dataset order, ``CASES_CAP`` at most), and its
digest (sha256 over the items' kinds, labels and texts) is part of what the stored record is keyed by.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from evalgate.dialect import reference_field
from evalgate.judges.calibration import score_answer
from evalgate.model import Answer

if TYPE_CHECKING:
    from evalgate.judges.client import JudgeClient
    from evalgate.metrics.registry import Metric
    from evalgate.model import Case

Family = Literal["reference", "addresses", "retention"]
DEFAULT_MAX_ITEMS = 60
"""The default cap on control items per metric (``controls_max_items``): the size ``bench.calibration`` measures."""
MIN_ITEMS = 10
"""Fewer controls than this (or no item of one class) is no evidence: the judge is not admitted by controls."""
LEAD_IN = "Here is the answer. "
EVASIVE = "I am not able to help with that right now."
NUMBER = re.compile(r"\d+(?:[.,]\d+)?")
NEGATIONS = ((" is ", " is not "), (" are ", " are not "), (" was ", " was not "), (" can ", " cannot "),
             (" will ", " will not "), (" has ", " does not have "), (" have ", " do not have "))
FORGETFUL = ("Sorry, I don't know what you told me before. Could you tell me again?",
             "I don't remember anything you said earlier; what was it?",
             "You never told me anything about that.")
REFERENCE_METRICS = frozenset({"correctness", "math"})
ADDRESSES_METRICS = frozenset({"relevancy"})


@dataclass(frozen=True, slots=True)
class Control:
    """One control item: the case it was built from, the answer shown to the judge, and the known label."""

    case: Case
    answer: Answer
    label: bool
    kind: str

    @property
    def name(self) -> str:
        return f"{self.case.id}:{self.kind}"


def family(metric: Metric) -> Family | None:
    """Which controls ``metric`` can have (None: none can be built; see the module docstring)."""
    if metric.name in REFERENCE_METRICS or metric.name == "response_quality":
        return "reference"
    if metric.name in ADDRESSES_METRICS:
        return "addresses"
    if metric.name == "knowledge_retention":
        return "retention"
    definition = getattr(metric.fn, "definition", None)
    if definition is not None and "expected_output" in getattr(definition, "fields", ()):
        return "reference"
    return None


def reference_of(metric: Metric, case: Case) -> str | None:
    """The text a positive control answers with (None: the case gives none)."""
    text = getattr(case, reference_field(metric.name), None)
    return text.strip() if isinstance(text, str) and text.strip() else None


def user_messages(case: Case) -> list[str]:
    return [str(turn.input) for turn in case.turns or [] if getattr(turn, "input", None)]


def eligible(metric: Metric, case: Case, kind: Family) -> bool:
    if kind == "retention":
        return len(user_messages(case)) >= 2
    return not case.is_conversation and bool(case.input) and reference_of(metric, case) is not None


def changed_numbers(text: str) -> str | None:
    """Every number n → n + 7 (keeping its digits' form); None when the text has none."""
    if not NUMBER.search(text):
        return None

    def bump(found: re.Match[str]) -> str:
        digits = found.group(0)
        head = re.match(r"\d+", digits)
        assert head is not None
        number = str(int(head.group(0)) + 7).zfill(len(head.group(0)))
        return number + digits[len(head.group(0)):]

    return NUMBER.sub(bump, text)


def negated(text: str) -> str:
    """The first claim negated: the first ``is``/``are``/``can`` … turned negative, else "It is not true that …"."""
    for plain, negative in NEGATIONS:
        if plain in f" {text}":
            return f" {text}".replace(plain, negative, 1).strip()
    first = text[:1].lower() + text[1:]
    return f"Do not {first}" if re.match(r"^[A-Z][a-z]+ ", text) and not re.match(r"^(The|A|An|It|I|You|We|They|He|"
                                                                                  r"She|This|That)\b", text) \
        else f"It is not true that {first}"


def dropped(text: str) -> str | None:
    """The reference without its second half (by sentence, else by clause); None when it has one part."""
    parts = [p for p in re.split(r"(?<=[.!?])\s+", text) if p.strip()]
    if len(parts) < 2:
        parts = [p for p in re.split(r",\s+|;\s+|\s+and\s+|\s+then\s+", text) if p.strip()]
    if len(parts) < 2:
        return None
    kept = parts[: max(1, len(parts) // 2)]
    return " ".join(kept).rstrip(",;") + ("" if kept[-1].rstrip().endswith((".", "!", "?")) else ".")


def truncated(text: str) -> str | None:
    words = text.split()
    return " ".join(words[: max(2, len(words) // 4)]) + " …" if len(words) >= 8 else None


def reference_controls(metric: Metric, cases: list[Case], kind: Family) -> list[Control]:
    items: list[Control] = []
    references = [reference_of(metric, case) or "" for case in cases]
    for i, case in enumerate(cases):
        text = references[i]
        items.append(Control(case, Answer(output=text), True, "reference"))
        items.append(Control(case, Answer(output=LEAD_IN + text), True, "reference-lead-in"))
        other = next((references[j] for j in (*range(i + 1, len(cases)), *range(i))
                      if references[j] != text and cases[j].input != case.input), None)
        if other is not None:
            items.append(Control(case, Answer(output=other), False, "other-case"))
        items.append(Control(case, Answer(output=EVASIVE), False, "evasive"))
        if kind != "reference":
            continue
        for name, perturbed in (("changed-number", changed_numbers(text)), ("negated", negated(text)),
                                ("dropped-half", dropped(text)), ("truncated", truncated(text))):
            if perturbed is not None and perturbed != text:
                items.append(Control(case, Answer(output=perturbed), False, name))
    return items


def transcript(users: list[str], replies: list[str]) -> list[dict[str, str]]:
    messages: list[dict[str, str]] = []
    for user, reply in zip(users, replies, strict=True):
        messages += [{"role": "user", "content": user}, {"role": "assistant", "content": reply}]
    return messages


def retention_controls(cases: list[Case]) -> list[Control]:
    """Per conversation: two assistants that restate what the user said (positive), three that forget it."""
    items: list[Control] = []
    for case in cases:
        users = user_messages(case)
        recall = [f"Noted. So far you told me: {' '.join(users[: k + 1])}" for k in range(len(users))]
        last_only = ["Noted.", *[f"Understood. Earlier you told me: {' '.join(users[:k])}" for k in range(1, len(users))]]
        for name, replies, label in (("restates", recall, True), ("recalls-later", last_only, True),
                                     *((f"forgets-{n + 1}", ["Noted.", *[line] * (len(users) - 1)], False)
                                       for n, line in enumerate(FORGETFUL))):
            messages = transcript(users, replies)
            items.append(Control(case, Answer(output=replies[-1], transcript=messages), label, name))
    return items


def build(metric: Metric, cases: Iterable[Case], max_items: int = DEFAULT_MAX_ITEMS) -> list[Control]:
    """The control set of ``metric`` from ``cases`` (those it runs on), at most ``max_items`` items, balanced over
    the cases taken (dataset order); [] when the metric has no controls (``family``)."""
    kind = family(metric)
    if kind is None:
        return []
    per_case = 5 if kind == "retention" else 4 if kind == "addresses" else 8
    wanted = max(2, -(-max_items // per_case) + 1)
    taken: list[Case] = []
    for case in cases:
        if eligible(metric, case, kind):
            taken.append(case)
            if len(taken) >= wanted:
                break
    items = retention_controls(taken) if kind == "retention" else reference_controls(metric, taken, kind)
    if len(items) <= max_items:
        return items
    positives = [item for item in items if item.label]
    negatives = [item for item in items if not item.label]
    keep_pos = min(len(positives), max(max_items // 3, max_items - len(negatives)))
    return positives[:keep_pos] + negatives[: max_items - keep_pos]


def digest(items: list[Control]) -> str:
    """16 hex digits of sha256 over the items (case id, kind, label, answer text and transcript)."""
    rows = [[item.case.id, item.kind, item.label, item.answer.output, item.answer.transcript] for item in items]
    return hashlib.sha256(json.dumps(rows, ensure_ascii=False, default=str).encode()).hexdigest()[:16]


async def score_control(judge: JudgeClient, metric: Metric, item: Control, options: Any
                        ) -> tuple[float | None, str, str | None]:
    """The judge's value for one control, scored as a labelled example is
    (``judges.calibration.score_answer``): (value, reasoning, problem)."""
    return await score_answer(judge, metric, item.case, item.answer, options)
