"""The in-house frameworks' output shapes, built from a results document (``--compat SEED``).

Pure functions of a results.json document (with its ``results``); the runner writes what they return
beside results.json (``COMPAT_FILES``) and the CLI prints them. Each per-case document is built from two
passes over the records (``seed000_parts`` / ``seed004_parts``: the totals, then the entries one at a
time), so ``write_compat_document`` writes it from a results.json of any size in bounded memory, byte
for byte what ``json.dumps(compat_document(...), indent=2)`` gives.

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

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import IO, Any

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

Passes = Callable[[], Iterable[Mapping[str, Any]]]
"""A fresh pass over a run's case records in dataset order (index, repeat) at each call: results.json's
``results`` streamed (``store.results_json.StreamedDocument``) or a list in memory."""


def ordered(document: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A document's records (in memory) in dataset order, the order results.json is written in."""
    records = [r for r in document.get("results") or [] if isinstance(r, Mapping)]
    return sorted(records, key=lambda r: (int(r.get("index") or 0), int(r.get("repeat") or 0)))


def first_of_each(records: Iterable[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    """One record per case (its lowest repeat) from ``records`` in dataset order (a case's repeats are
    adjacent, lowest first): the record whose id differs from the one before it. Memory: one id."""
    previous: str | None = None
    for record in records:
        key = str(record.get("id"))
        if key != previous:
            previous = key
            yield record


def first_records(document: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """One record per case (its lowest repeat), in dataset order."""
    return list(first_of_each(ordered(document)))


class Average:
    """``mean`` of the values added, kept as a running sum and count: the same float as summing the list
    left to right (``sum``), so a streamed document equals the in-memory one."""

    def __init__(self) -> None:
        self.total: float = 0
        self.count = 0

    def add(self, value: float | None) -> None:
        if value is not None:
            self.total += value
            self.count += 1

    @property
    def value(self) -> float | None:
        return round(self.total / self.count, 6) if self.count else None


def metric_value(record: Mapping[str, Any], name: str) -> float | None:
    """The metric's value on the case, or None when it did not produce one."""
    metric = (record.get("metrics") or {}).get(name)
    if not isinstance(metric, Mapping) or metric.get("status") not in ("passed", "failed", "advisory"):
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


def _has_any(record: Mapping[str, Any], names: tuple[str, ...]) -> bool:
    return any(name in (record.get("metrics") or {}) for name in names)


def _totals(passes: Passes, names: tuple[str, ...], make: Callable[[], Any]) -> tuple[Any, bool]:
    """One pass over the first records: totals (``make()``, ``.add(record)``) over every one and over those
    on which any of ``names`` ran; returns the latter and True when any did, else the former and False."""
    every, narrow, narrowed = make(), make(), False
    for record in first_of_each(passes()):
        every.add(record)
        if _has_any(record, names):
            narrowed = True
            narrow.add(record)
    return (narrow if narrowed else every), narrowed


def _chosen(passes: Passes, names: tuple[str, ...], narrowed: bool) -> Iterator[Mapping[str, Any]]:
    """A pass over the first records the totals were taken over (``_totals``)."""
    return (r for r in first_of_each(passes()) if not narrowed or _has_any(r, names))


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


def _seed000_entry(record: Mapping[str, Any]) -> dict[str, Any]:
    tokens = metric_value(record, "num_tokens")
    if tokens is None and isinstance(record.get("num_tokens"), int):
        tokens = float(record["num_tokens"])
    return {
        "question": record.get("input"),
        "hit_rate": metric_value(record, "hit_rate"),
        "mrr": metric_value(record, "mrr"),
        "judge_score": metric_value(record, "judge_score"),
        "num_tokens": None if tokens is None else int(tokens),
        "combined_score": metric_value(record, "combined_score"),
    }


class _Seed000Totals:
    def __init__(self) -> None:
        self.averages = {name: Average() for name in ("hit_rate", "mrr", "judge_score", "combined_score",
                                                      "num_tokens")}
        self.best: float | None = None
        self.total_tokens: int | None = None
        self.count = 0
        self.files: dict[str, None] = {}

    def add(self, record: Mapping[str, Any]) -> None:
        entry = _seed000_entry(record)
        self.count += 1
        self.files.setdefault(_file_of(record.get("source")))
        for name, average in self.averages.items():
            average.add(None if entry[name] is None else (float(entry[name]) if name == "num_tokens" else entry[name]))
        if entry["combined_score"] is not None:
            self.best = entry["combined_score"] if self.best is None else max(self.best, entry["combined_score"])
        if entry["num_tokens"] is not None:
            self.total_tokens = (self.total_tokens or 0) + entry["num_tokens"]


def seed000_parts(head: Mapping[str, Any], passes: Passes) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """Seed 000's evaluation.json (keys in the module docstring) as its fields but ``results`` and a
    generator of ``results``' entries: two passes over the records, memory independent of their number.
    ``head`` is read after the first pass (a streamed document's fields are complete then)."""
    totals, narrowed = _totals(passes, SEED000_METRICS, _Seed000Totals)
    averages = totals.averages
    judge = (head.get("metadata") or {}).get("judge") or {}
    document = {
        "timestamp": head.get("timestamp"),
        "num_questions": totals.count,
        "summary": {
            "avg_hit_rate": averages["hit_rate"].value,
            "avg_mrr": averages["mrr"].value,
            "avg_judge_score": averages["judge_score"].value,
            "avg_combined_score": averages["combined_score"].value,
            "best_combined_score": round(totals.best, 6) if totals.best is not None else None,
            "avg_num_tokens": averages["num_tokens"].value,
            "total_tokens": totals.total_tokens,
        },
        "metadata": {
            "ground_truth_file": ", ".join(totals.files) if totals.files else None,
            "search_mode": None,
            "judge_model": judge.get("model") if judge.get("provider") not in (None, "none") else None,
        },
    }
    return document, (_seed000_entry(record) for record in _chosen(passes, SEED000_METRICS, narrowed))


def seed000_document(document: Mapping[str, Any]) -> dict[str, Any]:
    """Seed 000's evaluation.json (keys in the module docstring)."""
    records = ordered(document)
    head, entries = seed000_parts(document, lambda: records)
    return {**head, "results": list(entries)}


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
    if isinstance(weights, Mapping) and set(weights) == set(SEED004_WEIGHTS):
        return {name: float(weights[name]) for name in SEED004_WEIGHTS}
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


class _Seed004Totals:
    def __init__(self) -> None:
        self.averages = {name: Average() for name in SEED004_METRICS[:4]}
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


def seed004_parts(head: Mapping[str, Any], passes: Passes, include_responses: bool = True
                  ) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """Seed 004's results.json (keys in the module docstring) as its fields but ``per_query`` and a
    generator of ``per_query``'s entries: two passes over the records, memory independent of their number
    (one row per category and difficulty). ``head`` is read after the first pass."""
    totals, narrowed = _totals(passes, SEED004_METRICS, _Seed004Totals)
    weights = totals.weights or dict(SEED004_WEIGHTS)
    means = {name: average.value for name, average in totals.averages.items()}
    composite = None
    if all(means[name] is not None for name in SEED004_WEIGHTS):
        scaled = {name: float(means[name] or 0.0) for name in SEED004_WEIGHTS}
        scaled["response_quality"] /= 5.0
        composite = round(sum(weights[name] * scaled[name] for name in SEED004_WEIGHTS), 6)
    thresholds = head.get("thresholds") or {}
    checks = [admits(thresholds.get(name), value) for name, value in (
        ("specialist_match", means["specialist_match"]), ("keyword_coverage", means["keyword_coverage"]),
        ("data_source_match", means["data_source_match"]), ("response_quality", means["response_quality"]),
        ("composite", composite)) if value is not None]
    all_present = composite is not None
    document = {
        "metadata": {"timestamp": head.get("timestamp"), "total_queries": totals.total, "errors": totals.errors},
        "aggregate": {
            "total_queries": totals.total,
            "specialist_accuracy": means["specialist_match"],
            "avg_keyword_coverage": means["keyword_coverage"],
            "avg_data_source_match": means["data_source_match"],
            "avg_response_quality": means["response_quality"],
            "composite_score": composite,
            "pass_verdict": bool(all_present and all(check is not False for check in checks)),
            "by_category": {label: group.row() for label, group in totals.groups["category"].items()},
            "by_difficulty": {label: group.row() for label, group in totals.groups["difficulty"].items()},
        },
    }
    return document, (_per_query(record, include_responses)
                      for record in _chosen(passes, SEED004_METRICS, narrowed))


def seed004_document(document: Mapping[str, Any], include_responses: bool = True) -> dict[str, Any]:
    """Seed 004's results.json (keys in the module docstring)."""
    records = ordered(document)
    head, entries = seed004_parts(document, lambda: records, include_responses)
    return {**head, "per_query": list(entries)}


def compat_document(seed: str, document: Mapping[str, Any], include_responses: bool = True) -> dict[str, Any]:
    """The ``seed``'s document for ``document`` (``seed`` in ``COMPAT_SEEDS``)."""
    if seed == "seed000":
        return seed000_document(document)
    if seed == "seed001":
        return seed001_document(document)
    if seed == "seed004":
        return seed004_document(document, include_responses)
    raise ValueError(f"no output shape for {seed!r}; choose one of {', '.join(COMPAT_SEEDS)}")


LIST_KEYS = {"seed000": "results", "seed004": "per_query"}
"""Each seed document's list of per-case entries (its last field)."""


def write_compat_document(seed: str, results_path: Path, out: IO[str], include_responses: bool = True,
                          clean: Callable[[str], str] = lambda text: text) -> None:
    """``seed``'s document for the results.json at ``results_path``, written to ``out`` as
    ``json.dumps(compat_document(...), indent=2, ensure_ascii=False) + "\n"`` would be, in bounded memory:
    the records are streamed (``StreamedDocument``, two passes: the totals, with the document's fields, then
    the entries), each entry is written as it is made and
    passed through ``clean`` (redaction) on its own."""
    from evalgate.store.results_json import StreamedDocument

    streams = [StreamedDocument(results_path)]
    head = streams[0].head  # complete once the first pass has read the whole file

    def passes() -> Iterator[Mapping[str, Any]]:
        stream = streams.pop() if streams else StreamedDocument(results_path)
        return (r for r in stream.records() if isinstance(r, Mapping))

    if seed == "seed001":
        out.write(clean(json.dumps(seed001_document(StreamedDocument(results_path).read_head()), indent=2,
                                   ensure_ascii=False) + "\n"))
        return
    if seed == "seed000":
        fields, entries = seed000_parts(head, passes)
    elif seed == "seed004":
        fields, entries = seed004_parts(head, passes, include_responses)
    else:
        raise ValueError(f"no output shape for {seed!r}; choose one of {', '.join(COMPAT_SEEDS)}")
    dump_with_list(fields, LIST_KEYS[seed], entries, out, clean)


def dump_with_list(fields: Mapping[str, Any], key: str, entries: Iterable[Any], out: IO[str],
                   clean: Callable[[str], str]) -> None:
    """``{**fields, key: list(entries)}`` as ``json.dumps(indent=2, ensure_ascii=False)`` plus a newline,
    written one entry at a time (the list is the document's last field)."""
    text = json.dumps({**fields, key: []}, indent=2, ensure_ascii=False)
    cut = text.rindex("[]")
    lead, empty = text[:cut] + "[\n", True
    for entry in entries:
        lines = json.dumps(entry, indent=2, ensure_ascii=False).split("\n")
        out.write(clean(lead + "\n".join("    " + line for line in lines)))
        lead, empty = ",\n", False
    out.write(clean(text + "\n") if empty else "\n  ]\n}\n")
