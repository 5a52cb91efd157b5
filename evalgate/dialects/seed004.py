"""Seed 004 (golden dataset routed to specialists) as a dialect.

Adds its 1–5 ``response_quality`` (judge, or its heuristic without one; gated ≥ 3.5) and its weighted
``composite`` (0.30 specialist + 0.25 keywords + 0.20 data sources + 0.25 quality/5; gated ≥ 0.75) on its
golden cases. Its ``eval_config.yaml``, ``EVAL_JUDGE_API_KEY`` and runner flags live in ``config/legacy.py``
and the CLI; its results document below.

Its ``response_quality`` judge is shown the case's ``verified_answer_summary`` (the ``summary`` of its
prompt), and that summary is the reference a positive calibration control answers with
(``prompt_fields``, ``reference_fields``); a suite's ``llm_judge.rubric`` replaces the template's rubric.

Its output document (``--compat seed004``) is its ``results.json``: ``metadata`` (``timestamp``,
``total_queries``, ``errors``), ``aggregate`` (``total_queries``, ``specialist_accuracy``,
``avg_keyword_coverage``, ``avg_data_source_match``, ``avg_response_quality``, ``composite_score``,
``pass_verdict``, ``by_category``, ``by_difficulty``) and ``per_query`` (scores, ``keywords_found`` /
``keywords_missing``, ``data_sources_found``, …). Aggregates are over the queries that did not error, as
seed 004 computes them; the composite is the weighted sum of those averages; ``pass_verdict`` applies the
run's thresholds for the five metrics. Its runner's ``--output`` names this document
(``compat_output``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from evalgate.dialect import Dialect, OutputDocument, Passes
from evalgate.report.documents import Average, admits, build_document, chosen, metric_details, metric_value, totals

METRICS = ("specialist_match", "keyword_coverage", "data_source_match", "response_quality", "composite")
WEIGHTS = {"specialist_match": 0.30, "keyword_coverage": 0.25, "data_source_match": 0.20, "response_quality": 0.25}
RESPONSE_TEXT_CHARS = 2000
"""Seed 004 truncates each per_query response_text to this many characters."""


def _detect(data: Mapping[str, Any], wrapper: str | None) -> str | None:
    """Seed 004's spellings: ``expected_specialist`` with ``query``."""
    return "it uses seed 004's field names" if "expected_specialist" in data and "query" in data else None


class _Group:
    """One ``by_category`` / ``by_difficulty`` row, accumulated."""

    def __init__(self) -> None:
        self.count = 0
        self.averages = {name: Average() for name in ("specialist_match", "keyword_coverage", "response_quality",
                                                      "latency_ms")}

    def add(self, record: Mapping[str, Any]) -> None:
        self.count += 1
        for name in ("specialist_match", "keyword_coverage", "response_quality"):
            self.averages[name].add(metric_value(record, name))
        latency = record.get("latency_ms")
        self.averages["latency_ms"].add(float(latency) if isinstance(latency, int | float) else None)

    def row(self) -> dict[str, Any]:
        return {"count": self.count, "specialist_accuracy": self.averages["specialist_match"].value,
                "avg_keyword_coverage": self.averages["keyword_coverage"].value,
                "avg_response_quality": self.averages["response_quality"].value,
                "avg_latency_ms": self.averages["latency_ms"].value}


def _golden_weights(record: Mapping[str, Any]) -> dict[str, float] | None:
    """The composite weights the run used, from a composite's details (None when this record has none)."""
    weights = metric_details(record, "composite").get("weights")
    if isinstance(weights, Mapping) and set(weights) == set(WEIGHTS):
        return {name: float(weights[name]) for name in WEIGHTS}
    return None


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


class _Totals:
    def __init__(self) -> None:
        self.averages = {name: Average() for name in METRICS[:4]}
        self.weights: dict[str, float] | None = None
        self.total = self.errors = 0
        self.groups: dict[str, dict[str, _Group]] = {"category": {}, "difficulty": {}}

    def add(self, record: Mapping[str, Any]) -> None:
        self.total += 1
        self.weights = self.weights or _golden_weights(record)
        if record.get("status") == "errored":
            self.errors += 1
            return
        for name, average in self.averages.items():
            average.add(metric_value(record, name))
        for field, rows in self.groups.items():
            rows.setdefault(str(record.get(field)), _Group()).add(record)


def parts(head: Mapping[str, Any], passes: Passes, include_responses: bool = True
          ) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """Its results.json (keys in the module docstring) as its fields but ``per_query`` and a generator of
    ``per_query``'s entries: two passes over the records, memory independent of their number (one row per
    category and difficulty). ``head`` is read after the first pass."""
    found, narrowed = totals(passes, METRICS, _Totals)
    weights = found.weights or dict(WEIGHTS)
    means = {name: average.value for name, average in found.averages.items()}
    composite = None
    if all(means[name] is not None for name in WEIGHTS):
        scaled = {name: float(means[name] or 0.0) for name in WEIGHTS}
        scaled["response_quality"] /= 5.0
        composite = round(sum(weights[name] * scaled[name] for name in WEIGHTS), 6)
    thresholds = head.get("thresholds") or {}
    checks = [admits(thresholds.get(name), value) for name, value in (
        ("specialist_match", means["specialist_match"]), ("keyword_coverage", means["keyword_coverage"]),
        ("data_source_match", means["data_source_match"]), ("response_quality", means["response_quality"]),
        ("composite", composite)) if value is not None]
    all_present = composite is not None
    document = {
        "metadata": {"timestamp": head.get("timestamp"), "total_queries": found.total, "errors": found.errors},
        "aggregate": {
            "total_queries": found.total,
            "specialist_accuracy": means["specialist_match"],
            "avg_keyword_coverage": means["keyword_coverage"],
            "avg_data_source_match": means["data_source_match"],
            "avg_response_quality": means["response_quality"],
            "composite_score": composite,
            "pass_verdict": bool(all_present and all(check is not False for check in checks)),
            "by_category": {label: group.row() for label, group in found.groups["category"].items()},
            "by_difficulty": {label: group.row() for label, group in found.groups["difficulty"].items()},
        },
    }
    return document, (_per_query(record, include_responses) for record in chosen(passes, METRICS, narrowed))


def results_json(document: Mapping[str, Any], include_responses: bool = True) -> dict[str, Any]:
    """Its results.json for a results ``document`` in memory (keys in the module docstring)."""
    return build_document(DIALECT.name, document, include_responses)


DIALECT = Dialect(
    name="seed004",
    label="seed 004 (golden dataset)",
    owns=("response_quality", "composite"),
    owned_when={"response_quality": "the case has expected_specialist or verified_answer_summary",
                "composite": "the case has expected_specialist or verified_answer_summary"},
    detect=_detect,
    detect_order=20,
    markers=frozenset({"expected_specialist"}),
    elsewhere="eval_config.yaml and EVAL_JUDGE_API_KEY in config/legacy.py, its output document "
              "seed004-results.json",
    document=OutputDocument("seed004-results.json", parts, "per_query", takes_output=True),
    expectations={"expected_specialist": "expected_keywords", "verified_answer_summary": "expected_data_sources"},
    reference_fields={"response_quality": "verified_answer_summary"},
    prompt_fields={"summary": "verified_answer_summary"},
)
