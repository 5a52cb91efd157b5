"""Dataset kinds: each dialect's case format (``Dialect.case_format``: its required fields and value sets).

A suite declares its kind (``suite: {kind: NAME}``, or ``kind:`` in evalgate.yaml for every file), or
a case shows it by using a dialect's own spellings (its ``detect`` hook, ``evalgate.dialect.native_format``;
checked then only when the format says ``checked_when_detected``). A case of a kind must carry that kind's
required fields (empty lists are fine), and its values must be in the kind's value sets; a suite's ``valid:``
mapping (field → allowed values; ``null`` switches a field's check off) replaces them field by field, for any
kind or none.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from evalgate.dialect import DIALECTS, CaseFormat, field_value, native_format
from evalgate.model import Case


@functools.cache
def markers() -> frozenset[str]:
    """Fields without which ``infer_kind`` finds no kind (the checked formats' ``detect`` markers)."""
    return frozenset(marker for dialect in DIALECTS.values()
                     if dialect.case_format is not None and dialect.case_format.checked_when_detected
                     for marker in dialect.markers)


def kind_format(name: str | None) -> CaseFormat | None:
    """The case format of the dialect ``name`` (None for none, ``generic`` or a dialect without one)."""
    dialect = DIALECTS.get(name or "")
    return dialect.case_format if dialect is not None else None


def infer_kind(data: Mapping[str, Any], wrapper: str | None) -> tuple[str | None, str]:
    """The kind a raw case shows by its spellings, and why (``evalgate.dialect.native_format``), when that
    dialect's format is checked on detected cases (else its fields are checked only when declared)."""
    name, why = native_format(data, wrapper)
    found = kind_format(name)
    return (name, why) if found is not None and found.checked_when_detected else (None, "")


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
        if self.kind is None and not self.valid and markers().isdisjoint(data):
            return None  # the usual case: no declaration and none of the seeds' telltale fields
        name, why = (self.kind, "its suite declares it") if self.kind else infer_kind(data, self.wrapper)
        kind = kind_format(name)
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

    def _value_problem(self, case: Case, kind: CaseFormat | None) -> str | None:
        sets: dict[str, Any] = dict(kind.valid) if kind is not None else {}
        sets.update(self.valid)
        for field_name, allowed in sets.items():
            if not allowed:
                continue
            origin = ("the suite's 'valid:'" if field_name in self.valid
                      else f"{kind.label if kind else ''}'s documented values; a suite's 'valid:' changes them")
            value = field_value(case, field_name)
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
    return field_value(case, field_name) is not None
