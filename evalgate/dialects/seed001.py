"""Seed 001 (brand-mention extraction fixtures) as a dialect.

Its metrics (mention precision/recall/F1, rank accuracy, brand coverage, false is_mine rate) run on the
brand fields in any suite, since those fields ask for them; what is seed 001's alone lives at the edges:
the ``test_cases:`` wrapper and ``intent_id`` / ``llm_answer_text`` spellings (``native_format``), the
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

Its systems under test are extractors: a case without input is sent its text (``llm_answer_text``) and its
brand lists (``request_body``), and a command target gets the text as ``llm_answer_text`` too.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from evalgate.dialect import Dialect, OutputDocument, Passes
from evalgate.model import Case
from evalgate.report.documents import OPERATORS, build_document, template

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


def parts(head: Mapping[str, Any], passes: Passes, include_responses: bool = True
          ) -> tuple[dict[str, Any], Iterator[Any]]:
    """Its ``--format json`` document (keys in the module docstring), from results.json's fields alone."""
    summary = head.get("summary") or {}
    return {
        "run_id": head.get("run_id"),
        "pass_rate": summary.get("pass_rate"),
        "total_test_cases": summary.get("total_test_cases"),
        "total_passed": summary.get("total_passed"),
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
    return case.brands_mine is not None or case.brands_competitors is not None


def request_body(case: Case, context: Mapping[str, Any]) -> dict[str, Any] | None:
    """The system under test is an extractor: a case without input sends the text to analyse (its output)
    as the message and as ``llm_answer_text``, with its brand lists."""
    if case.input is None and case.output is not None and _lists_brands(case):
        return {"message": case.output, "llm_answer_text": case.output, "brands_mine": case.brands_mine or [],
                "brands_competitors": case.brands_competitors or [], **context}
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
    elsewhere="evalgate eval, its output document seed001-summary.json and console summary, the layout of the "
              "history tables eval_runs/eval_results",
    document=OutputDocument("seed001-summary.json", parts),
    console_summary=console_summary,
    expectations={"brands_mine": "tools_should_exclude", "brands_competitors": "brands_mine"},
    request_fields=frozenset({"brands_mine", "brands_competitors"}),
    request_body=request_body,
    request_stdin=request_stdin,
)
