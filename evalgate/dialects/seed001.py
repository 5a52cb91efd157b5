"""Seed 001 (brand-mention extraction fixtures) as a dialect.

Its metrics (mention precision/recall/F1, rank accuracy, brand coverage, false is_mine rate) run on the
brand fields in any suite, since those fields ask for them; what is seed 001's alone lives at the edges:
the ``test_cases:`` wrapper and ``intent_id`` / ``llm_answer_text`` spellings (``_detect``, ``SPELLINGS``), the
``evalgate eval`` verb, its JSON document and console summary (below) and its SQLite tables
(``store/schema.py``).

Its output document (``--compat seed001``) is its ``--format json``: ``run_id``, ``pass_rate``,
``total_test_cases``, ``total_passed``, ``total_failed`` (failed + errored, as ``eval_runs``),
``average_scores``, ``thresholds_passed`` (so ``jq .pass_rate`` works); its console summary ("Metrics
Summary", "mention_precision: 0.95 (✅ >= 0.90)", "All thresholds passed", "Results saved to: …") comes from
``templates/seed001_summary.txt.j2``.

Its tool's results database layout (``eval_runs``, ``eval_results`` and their indexes) is the history
tables every evalgate run writes (``store.schema``), so its three trend queries (``evalgate history``) and
a database its tool wrote keep working.

Its tests 2 and 5 expect an answer with nothing expected and nothing found to score 1.0 on every mention
metric (``metrics.mentions``' empty-case rule).

Its systems under test are extractors: a case without input is sent its text (``llm_answer_text``) and its
brand lists (``request_body``), and a command target gets the text as ``llm_answer_text`` too.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from evalgate.dialect import CaseFormat, CliFlag, Dialect, OutputDocument, Passes
from evalgate.model import Case, DialectField
from evalgate.report.documents import OPERATORS, build_document, template
from evalgate.report.view import picked

BRAND_FIELDS = frozenset({"brands_mine", "brands_competitors", "expected_my_mentions", "expected_competitor_mentions",
                          "expected_ranked_list"})
INPUT_SPELLINGS = frozenset({"input", "question", "query", "message", "prompt"})
EVALGATE_SPELLINGS = frozenset({"id", "input", "output"})
SEED001_SPELLINGS = frozenset({"intent_id", "llm_answer_text"})
METRICS = ("mention_precision", "mention_recall", "mention_f1", "rank_accuracy", "brand_coverage",
           "false_is_mine_rate")
"""The metrics its console summary lists (in this order)."""


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
def parts(head: Mapping[str, Any], passes: Passes, include_responses: bool = True
          ) -> tuple[dict[str, Any], Iterator[Any]]:
    """Its ``--format json`` document (keys in the module docstring), from results.json's fields alone."""
    summary = head.get("summary") or {}
    return {
        "run_id": head.get("run_id"),
        **picked(summary, {key: key for key in ("pass_rate", "total_test_cases", "total_passed")}),
        "total_failed": int(summary.get("total_failed") or 0) + int(summary.get("total_errored") or 0),
        "average_scores": dict(summary.get("average_scores") or {}),
        "thresholds_passed": bool(head.get("thresholds_passed")),
    }, iter(())


def summary_json(document: Mapping[str, Any]) -> dict[str, Any]:
    """Its ``--format json`` document for a results ``document`` (keys in the module docstring)."""
    return build_document(DIALECT.name, document)


def summary_view(document: Mapping[str, Any], db_path: str) -> dict[str, Any]:
    """What its console summary shows: totals, one line per metric, the threshold verdict."""
    summary = document.get("summary") or {}
    table = document.get("metrics") or {}
    names = [name for name in METRICS if name in table]
    if not names:
        names = sorted(name for name, row in table.items() if isinstance(row, Mapping) and row.get("threshold"))
    rows = []
    for name in names:
        row = table[name]
        average = row.get("average")
        threshold = row.get("threshold")
        op, bound = next(iter(threshold.items())) if isinstance(threshold, Mapping) and threshold else (None, None)
        rows.append({"name": name, "average": average, "op": OPERATORS.get(op or ""), "bound": bound,
                     "passed": row.get("passed")})
    # seed 001 pads "name:" to its longest metric name ("mention_precision:") plus one space
    width = max((len(r["name"]) + 2 for r in rows if r["name"] in METRICS[:5]),
                default=max((len(r["name"]) + 1 for r in rows), default=0))
    total = int(summary.get("total_test_cases") or 0)
    passed = int(summary.get("total_passed") or 0)
    failed_metrics = [r["name"] for r in rows if r["passed"] is False]
    failed_metrics += sorted(name for name, row in table.items()
                             if isinstance(row, Mapping) and row.get("passed") is False and name not in names)
    return {
        "total": total,
        "passed": passed,
        "failed": total - passed,
        "pass_percent": 100.0 * passed / total if total else 0.0,
        "rows": rows,
        "width": width,
        "thresholds_passed": bool(document.get("thresholds_passed")),
        "failed_metrics": failed_metrics,
        "db_path": db_path,
    }


@cache
def _summary_template() -> Any:
    return template(Path(__file__).parent / "templates", "seed001_summary.txt.j2")


def console_summary(document: Mapping[str, Any], db_path: str | Path) -> str:
    """Its console summary for a results ``document`` (template ``templates/seed001_summary.txt.j2``)."""
    return _summary_template().render(**summary_view(document, str(db_path))).rstrip() + "\n"


def _lists_brands(case: Case) -> bool:
    return case.dialect_value("brands_mine") is not None or case.dialect_value("brands_competitors") is not None


def request_body(case: Case, context: Mapping[str, Any]) -> dict[str, Any] | None:
    """The system under test is an extractor: a case without input sends the text to analyse (its output)
    as the message and as ``llm_answer_text``, with its brand lists."""
    if case.input is None and case.output is not None and _lists_brands(case):
        return {"message": case.output, "llm_answer_text": case.output,
                "brands_mine": case.dialect_value("brands_mine") or [],
                "brands_competitors": case.dialect_value("brands_competitors") or [], **context}
    return None


def request_stdin(case: Case) -> dict[str, Any]:
    """A command target's case record also carries the text an extractor reads as ``llm_answer_text``."""
    return {"llm_answer_text": case.output} if case.output is not None and _lists_brands(case) else {}


DIALECT = Dialect(
    name="seed001",
    label="seed 001 (brand mentions)",
    detect=_detect,
    detect_order=10,
    markers=BRAND_FIELDS,
    kind_aliases=("001", "brand-mentions"),
    compat_aliases=("001", "1"),
    case_format=CASE_FORMAT,
    value_fields=frozenset({"brands_mine", "brands_competitors"}),
    cli_flags=(CliFlag(("--fixtures",), after="--dataset",
                       options={"action": "append", "metavar": "PATH", "dest": "fixtures",
                                "help": "alias of --dataset (seed 001's 'eval --fixtures')"}),),
    cli_read=_read_cli,
    verb=("eval", "alias of run (seed 001: eval --fixtures F --db D --format json)"),
    case_fields=CASE_FIELDS,
    field_spellings=SPELLINGS,
    check_case=check_brands,
    elsewhere="evalgate eval, its output document seed001-summary.json and console summary, the layout of the "
              "history tables eval_runs/eval_results",
    document=OutputDocument("seed001-summary.json", parts),
    console_summary=console_summary,
    expectations={"brands_mine": "tools_should_exclude", "brands_competitors": "brands_mine"},
    request_fields=frozenset({"brands_mine", "brands_competitors"}),
    request_body=request_body,
    request_stdin=request_stdin,
    metric_docs={"false_is_mine_rate": "{}. The case's own brands are its brands_mine."},
)
