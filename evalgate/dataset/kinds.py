"""Dataset kinds: the in-house frameworks' case formats and what each requires.

A suite declares its kind (``suite: {kind: seed001}``, or ``kind:`` in evalgate.yaml for every file), or
a case shows it by using that seed's own spellings (``infer_kind``):

* ``seed001`` — brand fields (``brands_mine``, ``brands_competitors``, ``expected_*_mentions``,
  ``expected_ranked_list``) and no input (a seed 001 fixture has none: its text is the extractor's input),
  with seed 001's ``intent_id`` / ``llm_answer_text``, or in a ``test_cases:`` file (seed 001's wrapper),
  or without evalgate's ``id`` / ``output``;
* ``seed004`` — ``expected_specialist`` with ``query`` (seed 004's name for the input).

Seed 000, 002 and 003 cases are checked only when declared (their fields are shared with other
formats). A case of a kind must carry that kind's required fields (``KINDS``; empty lists are fine),
and its values must be in the kind's value sets: seed 004 defaults to the specialist ids, difficulties,
categories and data sources its documentation lists; a suite's ``valid:`` mapping (field → allowed
values; ``null`` switches a field's check off) replaces them field by field, for any kind or none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from evalgate.config.suite import KIND_NAMES
from evalgate.dialect import DIALECTS, native_format
from evalgate.model import Case


@dataclass(frozen=True, slots=True)
class Kind:
    """A seed's case format: the fields a case must carry (Case field, the seed's name for it)."""

    name: str
    label: str
    required: tuple[tuple[str, str], ...]
    any_of: tuple[tuple[str, str], ...] = ()
    """At least one of these must be present (seed 003's workflow expectations)."""
    valid: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Default value sets (field → allowed values)."""


SEED001_FIELDS: tuple[tuple[str, str], ...] = (
    ("description", "description"),
    ("id", "intent_id"),
    ("output", "llm_answer_text"),
    ("brands_mine", "brands_mine"),
    ("brands_competitors", "brands_competitors"),
    ("expected_my_mentions", "expected_my_mentions"),
    ("expected_competitor_mentions", "expected_competitor_mentions"),
    ("expected_ranked_list", "expected_ranked_list"),
)
SEED004_VALID: dict[str, tuple[str, ...]] = {
    "expected_specialist": ("procedure_expert", "quality_inspector", "maintenance_advisor", "data_analyst",
                            "document_analyst"),
    "difficulty": ("simple", "medium", "complex"),
    "category": ("procedure", "quality", "maintenance", "data", "document"),
    "expected_data_sources": ("rag", "sap", "mes"),
}
"""Seed 004's documented value sets: its five specialists, difficulties, categories and data sources."""

KINDS: dict[str, Kind] = {
    "seed000": Kind("seed000", "seed 000 ground truth", (("input", "question"), ("expected_sources", "expected_sources"))),
    "seed001": Kind("seed001", "seed 001 fixtures", SEED001_FIELDS),
    "seed002": Kind("seed002", "seed 002 cases", (("id", "id"), ("category", "category"), ("input", "input"))),
    "seed003": Kind("seed003", "seed 003 scenarios", (("input", "input"),),
                    any_of=(("agents_should_include", "agents_should_include"),
                            ("agents_should_exclude", "agents_should_exclude"),
                            ("tools_should_include", "tools_should_include"),
                            ("tools_should_exclude", "tools_should_exclude"))),
    "seed004": Kind("seed004", "seed 004 golden dataset",
                    (("id", "id"), ("input", "query"), ("expected_specialist", "expected_specialist"),
                     ("expected_keywords", "expected_keywords"), ("expected_data_sources", "expected_data_sources"),
                     ("difficulty", "difficulty"), ("category", "category"),
                     ("verified_answer_summary", "verified_answer_summary")),
                    valid=SEED004_VALID),
}
assert tuple(KINDS) == KIND_NAMES

MARKERS: tuple[str, ...] = tuple(sorted(marker for name in KINDS for marker in DIALECTS[name].markers))
"""Fields without which ``infer_kind`` finds no kind."""


def infer_kind(data: Mapping[str, Any], wrapper: str | None) -> tuple[str | None, str]:
    """The kind a raw case shows by its spellings, and why (``evalgate.dialect.native_format``); seed 000's
    format is recognised for its dialect but its fields are checked only when declared."""
    name, why = native_format(data, wrapper)
    return (name, why) if name in ("seed001", "seed004") else (None, "")


@dataclass(frozen=True, slots=True)
class KindCheck:
    """What the cases of one file are checked against: a declared kind (or None: infer per case) and
    the suite's ``valid:`` overrides."""

    kind: str | None = None
    valid: Mapping[str, Any] = field(default_factory=dict)
    wrapper: str | None = None
    """The file's case-list key (``test_cases`` / ``cases``), None for a list or JSONL."""

    def problem(self, case: Case, data: Mapping[str, Any]) -> str | None:
        """The first way ``case`` (read from ``data``) breaks its kind's rules, or None."""
        if self.kind is None and not self.valid and not any(marker in data for marker in MARKERS):
            return None  # the usual case: no declaration and none of the seeds' telltale fields
        name, why = (self.kind, "its suite declares it") if self.kind else infer_kind(data, self.wrapper)
        kind = KINDS.get(name or "")
        if kind is not None:
            missing = [seed_name for field_name, seed_name in kind.required if not _present(case, field_name)]
            if missing:
                listed = ", ".join(seed for _, seed in kind.required)
                return (f"missing required field{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))} "
                        f"({kind.label} require {listed}; this case is {name} because {why})")
            if kind.any_of and not any(_present(case, f) for f, _ in kind.any_of):
                return (f"{kind.label} need at least one of {', '.join(seed for _, seed in kind.any_of)} "
                        f"(this case is {name} because {why})")
        return self._value_problem(case, kind)

    def _value_problem(self, case: Case, kind: Kind | None) -> str | None:
        sets: dict[str, Any] = dict(kind.valid) if kind is not None else {}
        sets.update(self.valid)
        for field_name, allowed in sets.items():
            if not allowed:
                continue
            origin = ("the suite's 'valid:'" if field_name in self.valid
                      else f"{kind.label if kind else ''}'s documented values; a suite's 'valid:' changes them")
            value = getattr(case, field_name, None)
            values = value if isinstance(value, list) else [] if value is None else [value]
            allowed_set = {str(a) for a in allowed}
            for item in values:
                text = getattr(item, "value", item)
                if str(text) not in allowed_set:
                    return (f"field {field_name!r}: {str(text)!r} is not a valid value; valid: "
                            f"{', '.join(map(str, allowed))} ({origin})")
        return None


def _present(case: Case, field_name: str) -> bool:
    if field_name == "id":
        return "id" in case.model_fields_set
    if field_name == "input" and case.is_conversation:
        return True  # a conversation's messages are its turns (docs/conversations.md)
    return getattr(case, field_name, None) is not None
