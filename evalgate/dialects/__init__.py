"""The generic core's defaults and the five in-house frameworks as opt-in dialects, in one place.

A suite without a ``kind`` gets the generic defaults (``generic.GENERIC``: which built-in metric runs on
which case, with its default threshold). A seed's behaviours — its category → metric map, the metrics
and default thresholds that exist only because that framework had them — apply to a case only when:

1. its suite declares the seed's ``kind:`` (a suite block, or ``kind:`` in evalgate.yaml for every file
   without its own; ``kind: generic`` opts a suite out of everything below);
2. its file is in that seed's own format (``native_format``: the seed's own field names or wrapper);
3. or the run names the seed in ``compat`` (``--compat seed002``; ``FANVISE_*`` variables imply seed 002,
   seed 004's ``eval_config.yaml`` and ``evalgate eval`` imply their seeds).

Each seed's module (``seed000`` … ``seed004``) lists what its dialect adds; its other parts live at the
edges they belong to and are named there: variable and file spellings in ``config/legacy.py``, output
shapes in ``report/compat.py``, required fields and value sets in ``dataset/kinds.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from evalgate.model import Case

GENERIC = "generic"
"""The kind that opts a suite out of every dialect (``kind: generic``)."""


@dataclass(frozen=True, slots=True)
class Trigger:
    """A metric a dialect runs on the cases where ``applies`` holds, and why (for ``evalgate explain``)."""

    metric: str
    applies: Callable[[Case], bool]
    why: str


@dataclass(frozen=True, slots=True)
class Dialect:
    """What one in-house framework's dialect changes for its cases."""

    name: str
    label: str
    owns: tuple[str, ...] = ()
    """Built-in metrics that run by their ``applies`` rule only in this dialect (elsewhere only when named)."""
    triggers: tuple[Trigger, ...] = ()
    """Metrics this dialect adds on conditions of its own."""
    category_metrics: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Category → metrics, used when neither evalgate.yaml nor the case's suite sets ``category_metrics``."""
    thresholds: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    """Default thresholds for runs that include a case of this dialect (below every user setting)."""
    elsewhere: str = ""
    """Where the rest of the seed's compatibility lives (for the docs)."""


def _dialects() -> dict[str, Dialect]:
    from evalgate.dialects import seed000, seed001, seed002, seed003, seed004

    return {module.DIALECT.name: module.DIALECT for module in (seed000, seed001, seed002, seed003, seed004)}


DIALECTS: dict[str, Dialect] = _dialects()
OWNER: dict[str, str] = {name: dialect.name for dialect in DIALECTS.values() for name in dialect.owns}
"""Metric → the dialect that owns it."""


# --- which dialects a case speaks --------------------------------------------------------------------------

BRAND_FIELDS = frozenset({"brands_mine", "brands_competitors", "expected_my_mentions", "expected_competitor_mentions",
                          "expected_ranked_list"})
EVALGATE_SPELLINGS = frozenset({"id", "input", "output"})
INPUT_SPELLINGS = frozenset({"input", "question", "query", "message", "prompt"})
SEED001_SPELLINGS = frozenset({"intent_id", "llm_answer_text"})
MARKERS: frozenset[str] = frozenset({*BRAND_FIELDS, "expected_specialist", "question"})
"""Fields without which ``native_format`` finds no seed format (one set test for the usual case)."""


def native_format(data: Mapping[str, Any], wrapper: str | None) -> tuple[str | None, str]:
    """The seed whose own format a raw case is in, and why; (None, "") for none.

    * seed 000: ``question`` with ``expected_sources`` and no ``id`` / ``input`` (its ground_truth.json entries);
    * seed 001: brand fields and no input, with ``intent_id`` / ``llm_answer_text``, in a ``test_cases:``
      file, or without evalgate's ``id`` / ``output``;
    * seed 004: ``expected_specialist`` with ``query``.
    """
    if MARKERS.isdisjoint(data):
        return None, ""
    keys = set(data)
    if keys & BRAND_FIELDS and not keys & INPUT_SPELLINGS:  # seed 001 fixtures have no input: the text is the input
        if keys & SEED001_SPELLINGS:
            return "seed001", "it uses seed 001's field names"
        if wrapper == "test_cases":
            return "seed001", "its file uses seed 001's test_cases: list"
        if not keys & EVALGATE_SPELLINGS:
            return "seed001", "it has seed 001's brand fields"
    if "expected_specialist" in keys and "query" in keys:
        return "seed004", "it uses seed 004's field names"
    if "question" in keys and "expected_sources" in keys and not keys & {"id", "input", "case_id"}:
        return "seed000", "it is a seed 000 ground-truth entry (question, expected_sources, no id)"
    return None, ""


def case_dialect(declared: str | None, data: Mapping[str, Any], wrapper: str | None) -> str | None:
    """The dialect the loader stamps on a case: its suite's declared kind, else its file's native format."""
    if declared:
        return declared
    return native_format(data, wrapper)[0]


def active_dialects(case: Case, compat: Collection[str] = ()) -> tuple[str, ...]:
    """The dialects whose behaviours apply to ``case``: its own (declared or native) plus the run's
    ``compat`` seeds; none for ``kind: generic``."""
    own = case.dialect
    if own == GENERIC:
        return ()
    names = [own] if own in DIALECTS else []
    names += [name for name in compat if name in DIALECTS and name not in names]
    return tuple(names)


def why_dialect(case: Case, name: str, compat: Collection[str] = ()) -> str:
    """Why ``case`` speaks dialect ``name``, in words."""
    if case.dialect == name:
        return f"the case is {name}"
    return f"the run's compat includes {name}"


# --- what the dialects change ---------------------------------------------------------------------------------


def category_map(dialects: Iterable[str]) -> dict[str, list[str]]:
    """The dialects' default category → metrics maps, merged."""
    merged: dict[str, list[str]] = {}
    for name in dialects:
        for category, metrics in DIALECTS[name].category_metrics.items():
            merged.setdefault(category, []).extend(m for m in metrics if m not in merged.get(category, []))
    return merged


def triggered(case: Case, dialects: Iterable[str]) -> dict[str, str]:
    """Metric → why, for the dialects' own triggers that hold for ``case``."""
    found: dict[str, str] = {}
    for name in dialects:
        for trigger in DIALECTS[name].triggers:
            if trigger.metric not in found and trigger.applies(case):
                found[trigger.metric] = f"{DIALECTS[name].label}: {trigger.why}"
    return found


def threshold_layer(dialects: Iterable[str]) -> dict[str, Mapping[str, float]]:
    """The dialects' default thresholds, as one threshold layer (later dialects do not override earlier)."""
    layer: dict[str, Mapping[str, float]] = {}
    for name in sorted(set(dialects)):
        for metric, threshold in DIALECTS.get(name, Dialect(name, name)).thresholds.items():
            layer.setdefault(metric, threshold)
    return layer
