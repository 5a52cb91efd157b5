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
from evalgate.model import Case, DialectField

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


CASE_FIELDS = (
    DialectField("brands_mine", list[str] | None, after="tools_should_exclude", role="own_brands"),
    DialectField("brands_competitors", list[str] | None, after="brands_mine", role="competitor_brands"),
)
"""The brands of the fixture's own company and of its competitors (any suite may set them)."""
SPELLINGS = {"intent_id": "id", "llm_answer_text": "output"}
"""Seed 001's names of evalgate's ``id`` and ``output``."""


def _fold_name(name: str) -> str:
    """Brand comparison key, as the mention metrics use it: whitespace runs collapsed, case-folded."""
    return " ".join(name.split()).casefold()


def check_brands(case: Case) -> None:
    """A brand is mine or a competitor, never both; every expected mention and ranked brand is one of them."""
    brands_mine = case.dialect_value("brands_mine")
    brands_competitors = case.dialect_value("brands_competitors")
    if (brands_mine is None and brands_competitors is None and case.expected_my_mentions is None
            and case.expected_competitor_mentions is None and case.expected_ranked_list is None):
        return  # nothing to check (most cases): skip building the sets
    mine_names = {_fold_name(b): b for b in brands_mine or [] if _fold_name(b)}
    for brand in brands_competitors or []:
        if _fold_name(brand) in mine_names:
            raise ValueError(f"brands_competitors: {brand!r} is also in brands_mine "
                             f"(as {mine_names[_fold_name(brand)]!r}); a brand is mine or a competitor")
    mine = {b.lower() for b in brands_mine or []}
    competitors = {b.lower() for b in brands_competitors or []}
    for name, expected, pool, pool_name in (
        ("expected_my_mentions", case.expected_my_mentions, mine, "brands_mine"),
        ("expected_competitor_mentions", case.expected_competitor_mentions, competitors, "brands_competitors"),
    ):
        for brand in expected or []:
            if brand.lower() not in pool:
                raise ValueError(f"{name}: {brand!r} is not in {pool_name}")
    either = mine | competitors
    for brand in case.expected_ranked_list or []:
        if brand.lower() not in either:
            raise ValueError(f"expected_ranked_list: {brand!r} is in neither brands_mine nor brands_competitors")


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
    elsewhere="evalgate eval, seed001-summary.json in report/compat.py, eval_runs/eval_results in store/schema.py",
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
    case_fields=CASE_FIELDS,
    field_spellings=SPELLINGS,
    check_case=check_brands,
)
