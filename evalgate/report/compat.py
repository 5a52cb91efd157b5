"""The in-house frameworks' output shapes, built from a results document (``--compat SEED``).

Pure functions of a results.json document (with its ``results``); the runner writes what they return
beside results.json (``COMPAT_FILES``) and the CLI prints them.

* ``seed000_document`` — seed 000's ``evaluation.json``: ``timestamp``, ``num_questions``, ``summary``
  (``avg_hit_rate``, ``avg_mrr``, ``avg_judge_score``, ``avg_combined_score``, ``best_combined_score``,
  ``avg_num_tokens``, ``total_tokens``), ``metadata`` (``ground_truth_file``, ``search_mode``,
  ``judge_model``) and flat ``results`` (``question``, ``hit_rate``, ``mrr``, ``judge_score``,
  ``num_tokens``, ``combined_score``). Averages are over the questions where the metric has a value; a
  metric that never ran (no judge) is ``null``. ``search_mode`` is the agent's own setting, unknown to
  evalgate: ``null``.
* ``seed001_document`` — seed 001's ``--format json``: ``run_id``, ``pass_rate``, ``total_test_cases``,
  ``total_passed``, ``total_failed`` (failed + errored, as ``eval_runs``), ``average_scores``,
  ``thresholds_passed`` (so ``jq .pass_rate`` works).
* ``seed004_document`` — seed 004's ``results.json``: ``metadata`` (``timestamp``, ``total_queries``,
  ``errors``), ``aggregate`` (``total_queries``, ``specialist_accuracy``, ``avg_keyword_coverage``,
  ``avg_data_source_match``, ``avg_response_quality``, ``composite_score``, ``pass_verdict``,
  ``by_category``, ``by_difficulty``) and ``per_query`` (scores, ``keywords_found`` /
  ``keywords_missing``, ``data_sources_found``, …). Aggregates are over the queries that did not error,
  as seed 004 computes them; the composite is the weighted sum of those averages; ``pass_verdict``
  applies the run's thresholds for the five metrics.
* ``render_seed001_summary`` — seed 001's console summary ("Metrics Summary", "mention_precision:
  0.95 (✅ >= 0.90)", "All thresholds passed", "Results saved to: …"), from a jinja2 template.

With repeats, each case's first repeat is used.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evalgate.model import Threshold

COMPAT_SEEDS: tuple[str, ...] = ("seed000", "seed001", "seed004")
COMPAT_FILES: dict[str, str] = {
    "seed000": "evaluation.json",
    "seed001": "seed001-summary.json",
    "seed004": "seed004-results.json",
}
"""File written beside results.json for each seed."""
SEED000_METRICS = ("hit_rate", "mrr", "judge_score", "combined_score")
SEED001_METRICS = ("mention_precision", "mention_recall", "mention_f1", "rank_accuracy", "brand_coverage",
                   "false_is_mine_rate")
SEED004_METRICS = ("specialist_match", "keyword_coverage", "data_source_match", "response_quality", "composite")
SEED004_WEIGHTS = {"specialist_match": 0.30, "keyword_coverage": 0.25, "data_source_match": 0.20,
                   "response_quality": 0.25}
RESPONSE_TEXT_CHARS = 2000
"""Seed 004 truncates each per_query response_text to this many characters."""
OPERATORS = {"min": ">=", "max": "<=", "gt": ">", "lt": "<"}


# --- helpers ----------------------------------------------------------------------------------------


def first_records(document: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """One record per case (its lowest repeat), in dataset order."""
    chosen: dict[str, Mapping[str, Any]] = {}
    for record in document.get("results") or []:
        key = str(record.get("id"))
        kept = chosen.get(key)
        if kept is None or int(record.get("repeat") or 0) < int(kept.get("repeat") or 0):
            chosen[key] = record
    return sorted(chosen.values(), key=lambda r: int(r.get("index") or 0))


def metric_value(record: Mapping[str, Any], name: str) -> float | None:
    """The metric's value on the case, or None when it did not produce one."""
    metric = (record.get("metrics") or {}).get(name)
    if not isinstance(metric, Mapping) or metric.get("status") not in ("passed", "failed"):
        return None
    value = metric.get("value")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def metric_details(record: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    metric = (record.get("metrics") or {}).get(name)
    details = metric.get("details") if isinstance(metric, Mapping) else None
    return details if isinstance(details, Mapping) else {}


def mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(sum(present) / len(present), 6) if present else None


def _with_any(records: list[Mapping[str, Any]], names: tuple[str, ...]) -> list[Mapping[str, Any]]:
    """The records on which any of ``names`` ran (all records when none did)."""
    chosen = [r for r in records if any(name in (r.get("metrics") or {}) for name in names)]
    return chosen or records


def _file_of(source: Any) -> str:
    text = str(source or "")
    head, sep, tail = text.rpartition(":")
    return head if sep and tail.isdigit() else text


def admits(threshold: Any, value: float) -> bool | None:
    """``threshold`` (a results.json ``{op: x}`` mapping) applied to ``value`` (``Threshold.admits``); None
    without one."""
    if not isinstance(threshold, Mapping) or len(threshold) != 1:
        return None
    try:
        return Threshold.model_validate(dict(threshold)).admits(value)
    except ValidationError:
        return None


# --- seed 000 ---------------------------------------------------------------------------------------


def seed000_document(document: Mapping[str, Any]) -> dict[str, Any]:
    """Seed 000's evaluation.json (keys in the module docstring)."""
    questions = _with_any(first_records(document), SEED000_METRICS)
    results = []
    for record in questions:
        tokens = metric_value(record, "num_tokens")
        if tokens is None and isinstance(record.get("num_tokens"), int):
            tokens = float(record["num_tokens"])
        results.append({
            "question": record.get("input"),
            "hit_rate": metric_value(record, "hit_rate"),
            "mrr": metric_value(record, "mrr"),
            "judge_score": metric_value(record, "judge_score"),
            "num_tokens": None if tokens is None else int(tokens),
            "combined_score": metric_value(record, "combined_score"),
        })
    combined = [r["combined_score"] for r in results if r["combined_score"] is not None]
    tokens_known = [r["num_tokens"] for r in results if r["num_tokens"] is not None]
    judge = (document.get("metadata") or {}).get("judge") or {}
    files = list(dict.fromkeys(_file_of(r.get("source")) for r in questions))
    return {
        "timestamp": document.get("timestamp"),
        "num_questions": len(results),
        "summary": {
            "avg_hit_rate": mean(r["hit_rate"] for r in results),
            "avg_mrr": mean(r["mrr"] for r in results),
            "avg_judge_score": mean(r["judge_score"] for r in results),
            "avg_combined_score": mean(combined),
            "best_combined_score": round(max(combined), 6) if combined else None,
            "avg_num_tokens": mean(float(t) for t in tokens_known),
            "total_tokens": sum(tokens_known) if tokens_known else None,
        },
        "metadata": {
            "ground_truth_file": ", ".join(files) if files else None,
            "search_mode": None,
            "judge_model": judge.get("model") if judge.get("provider") not in (None, "none") else None,
        },
        "results": results,
    }


# --- seed 001 ---------------------------------------------------------------------------------------


def seed001_document(document: Mapping[str, Any]) -> dict[str, Any]:
    """Seed 001's ``--format json`` document (keys in the module docstring)."""
    summary = document.get("summary") or {}
    return {
        "run_id": document.get("run_id"),
        "pass_rate": summary.get("pass_rate"),
        "total_test_cases": summary.get("total_test_cases"),
        "total_passed": summary.get("total_passed"),
        "total_failed": int(summary.get("total_failed") or 0) + int(summary.get("total_errored") or 0),
        "average_scores": dict(summary.get("average_scores") or {}),
        "thresholds_passed": bool(document.get("thresholds_passed")),
    }


def seed001_summary_view(document: Mapping[str, Any], db_path: str) -> dict[str, Any]:
    """What seed 001's console summary shows: totals, one line per metric, the threshold verdict."""
    summary = document.get("summary") or {}
    table = document.get("metrics") or {}
    names = [name for name in SEED001_METRICS if name in table]
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
    width = max((len(r["name"]) + 2 for r in rows if r["name"] in SEED001_METRICS[:5]),
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


def render_seed001_summary(document: Mapping[str, Any], db_path: str | Path) -> str:
    """Seed 001's console summary for ``document`` (template ``templates/seed001_summary.txt.j2``)."""
    view = seed001_summary_view(document, str(db_path))
    return _template("seed001_summary.txt.j2").render(**view).rstrip() + "\n"


@cache
def _template(name: str) -> Any:
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(Path(__file__).parent / "templates")),
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             autoescape=False, keep_trailing_newline=True)
    return env.get_template(name)


# --- seed 004 ---------------------------------------------------------------------------------------


def _golden_weights(records: list[Mapping[str, Any]]) -> dict[str, float]:
    """The composite weights the run used (from a composite's details), else seed 004's."""
    for record in records:
        weights = metric_details(record, "composite").get("weights")
        if isinstance(weights, Mapping) and set(weights) == set(SEED004_WEIGHTS):
            return {name: float(weights[name]) for name in SEED004_WEIGHTS}
    return dict(SEED004_WEIGHTS)


def _breakdown(records: list[Mapping[str, Any]], field: str) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for record in records:
        groups.setdefault(str(record.get(field)), []).append(record)
    return {
        label: {
            "count": len(members),
            "specialist_accuracy": mean(metric_value(r, "specialist_match") for r in members),
            "avg_keyword_coverage": mean(metric_value(r, "keyword_coverage") for r in members),
            "avg_response_quality": mean(metric_value(r, "response_quality") for r in members),
            "avg_latency_ms": mean(float(r["latency_ms"]) if isinstance(r.get("latency_ms"), int | float) else None
                                   for r in members),
        }
        for label, members in groups.items()
    }


def _per_query(record: Mapping[str, Any], include_responses: bool) -> dict[str, Any]:
    keywords = metric_details(record, "keyword_coverage")
    sources = metric_details(record, "data_source_match")
    specialist = metric_details(record, "specialist_match")
    expected = record.get("expected") or {}
    answer = record.get("answer") or {}
    match = metric_value(record, "specialist_match")
    coverage = metric_value(record, "keyword_coverage")
    source_match = metric_value(record, "data_source_match")
    quality = metric_value(record, "response_quality")
    output = record.get("output")
    latency = record.get("latency_ms")
    entry: dict[str, Any] = {
        "id": record.get("id"),
        "query": record.get("input"),
        "category": record.get("category"),
        "difficulty": record.get("difficulty"),
        "expected_specialist": expected.get("expected_specialist", specialist.get("expected")),
        "actual_specialist": answer.get("agent_id", specialist.get("actual")),
        "specialist_match": None if match is None else match == 1.0,
        "keyword_coverage": None if coverage is None else round(coverage, 3),
        "keywords_found": list(keywords.get("found") or []),
        "keywords_missing": list(keywords.get("missing") or []),
        "data_source_match": None if source_match is None else round(source_match, 3),
        "data_sources_found": list(sources.get("used") or []),
        "response_quality": None if quality is None else round(quality, 2),
        "response_length": len(output) if isinstance(output, str) else 0,
        "latency_ms": int(latency) if isinstance(latency, int | float) else 0,
        "error": record.get("error"),
    }
    if include_responses and isinstance(output, str) and output:
        entry["response_text"] = output[:RESPONSE_TEXT_CHARS]
    return entry


def seed004_document(document: Mapping[str, Any], include_responses: bool = True) -> dict[str, Any]:
    """Seed 004's results.json (keys in the module docstring)."""
    queries = _with_any(first_records(document), SEED004_METRICS)
    valid = [r for r in queries if r.get("status") != "errored"]
    averages = {name: mean(metric_value(r, name) for r in valid) for name in SEED004_METRICS[:4]}
    weights = _golden_weights(queries)
    composite = None
    if all(averages[name] is not None for name in SEED004_WEIGHTS):
        scaled = {name: float(averages[name] or 0.0) for name in SEED004_WEIGHTS}
        scaled["response_quality"] /= 5.0
        composite = round(sum(weights[name] * scaled[name] for name in SEED004_WEIGHTS), 6)
    thresholds = document.get("thresholds") or {}
    checks = [admits(thresholds.get(name), value) for name, value in (
        ("specialist_match", averages["specialist_match"]), ("keyword_coverage", averages["keyword_coverage"]),
        ("data_source_match", averages["data_source_match"]), ("response_quality", averages["response_quality"]),
        ("composite", composite)) if value is not None]
    all_present = composite is not None
    return {
        "metadata": {
            "timestamp": document.get("timestamp"),
            "total_queries": len(queries),
            "errors": sum(1 for r in queries if r.get("status") == "errored"),
        },
        "aggregate": {
            "total_queries": len(queries),
            "specialist_accuracy": averages["specialist_match"],
            "avg_keyword_coverage": averages["keyword_coverage"],
            "avg_data_source_match": averages["data_source_match"],
            "avg_response_quality": averages["response_quality"],
            "composite_score": composite,
            "pass_verdict": bool(all_present and all(check is not False for check in checks)),
            "by_category": _breakdown(valid, "category"),
            "by_difficulty": _breakdown(valid, "difficulty"),
        },
        "per_query": [_per_query(r, include_responses) for r in queries],
    }


def compat_document(seed: str, document: Mapping[str, Any], include_responses: bool = True) -> dict[str, Any]:
    """The ``seed``'s document for ``document`` (``seed`` in ``COMPAT_SEEDS``)."""
    if seed == "seed000":
        return seed000_document(document)
    if seed == "seed001":
        return seed001_document(document)
    if seed == "seed004":
        return seed004_document(document, include_responses)
    raise ValueError(f"no output shape for {seed!r}; choose one of {', '.join(COMPAT_SEEDS)}")
