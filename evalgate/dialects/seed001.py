"""Seed 001 (brand-mention extraction fixtures) as a dialect.

Its metrics (mention precision/recall/F1, rank accuracy, brand coverage, false is_mine rate) run on the
brand fields in any suite, since those fields ask for them; what is seed 001's alone lives at the edges:
the ``test_cases:`` wrapper and ``intent_id`` / ``llm_answer_text`` spellings (``native_format``), the
``evalgate eval`` verb, its JSON document and console summary (``report/compat.py``) and its SQLite tables
(``store/schema.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evalgate.dialect import CaseFormat, CliFlag, Dialect

BRAND_FIELDS = frozenset({"brands_mine", "brands_competitors", "expected_my_mentions", "expected_competitor_mentions",
                          "expected_ranked_list"})
INPUT_SPELLINGS = frozenset({"input", "question", "query", "message", "prompt"})
EVALGATE_SPELLINGS = frozenset({"id", "input", "output"})
SEED001_SPELLINGS = frozenset({"intent_id", "llm_answer_text"})


def _detect(data: Mapping[str, Any], wrapper: str | None) -> str | None:
    """Brand fields and no input (seed 001 fixtures have none: the text is the input), with ``intent_id`` /
    ``llm_answer_text``, in a ``test_cases:`` file, or without evalgate's ``id`` / ``output``."""
    keys = set(data)
    if not keys & BRAND_FIELDS or keys & INPUT_SPELLINGS:
        return None
    if keys & SEED001_SPELLINGS:
        return "it uses seed 001's field names"
    if wrapper == "test_cases":
        return "its file uses seed 001's test_cases: list"
    if not keys & EVALGATE_SPELLINGS:
        return "it has seed 001's brand fields"
    return None


CASE_FORMAT = CaseFormat(
    "seed 001 fixtures",
    (("description", "description"), ("id", "intent_id"), ("output", "llm_answer_text"), ("brands_mine", "brands_mine"),
     ("brands_competitors", "brands_competitors"), ("expected_my_mentions", "expected_my_mentions"),
     ("expected_competitor_mentions", "expected_competitor_mentions"), ("expected_ranked_list", "expected_ranked_list")),
    checked_when_detected=True)
"""What a seed 001 fixture carries (evalgate's field, seed 001's name for it)."""


def _read_cli(args: Any, values: dict[str, Any], origins: dict[str, str], notices: list[str]) -> None:
    """``--fixtures F`` (``eval --fixtures``) adds F to the datasets."""
    fixtures = getattr(args, "fixtures", None) or []
    if fixtures:
        values["dataset"] = list(values.get("dataset") or []) + fixtures


DIALECT = Dialect(
    name="seed001",
    label="seed 001 (brand mentions)",
    detect=_detect,
    detect_order=10,
    markers=BRAND_FIELDS,
    elsewhere="seed001-summary.json in report/compat.py, eval_runs/eval_results in store/schema.py",
    kind_aliases=("001", "brand-mentions"),
    compat_aliases=("001", "1"),
    case_format=CASE_FORMAT,
    value_fields=frozenset({"brands_mine", "brands_competitors"}),
    cli_flags=(CliFlag(("--fixtures",), after="--dataset",
                       options={"action": "append", "metavar": "PATH", "dest": "fixtures",
                                "help": "alias of --dataset (seed 001's 'eval --fixtures')"}),),
    cli_read=_read_cli,
    verb=("eval", "alias of run (seed 001: eval --fixtures F --db D --format json)"),
    written_files=("seed001-summary.json",),
)
