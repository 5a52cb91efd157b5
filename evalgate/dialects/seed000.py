"""Seed 000 (Wikipedia agent: ground truth with expected sources) as a dialect.

Adds, on cases with ``expected_sources``: its LLM judge (``judge_score``, gated > 0.75), the token count
and its token-penalised ``combined_score`` (hit_rate^2 · judge_score^1.5 / (num_tokens/1000)^0.5); and
its strict minimums hit_rate > 0.80 and MRR > 0.70 as default thresholds. Its judge (``judge_score``, an
overall score with accuracy, completeness and relevance) runs at temperature 0.1 "for consistency", as the
seed specifies (``judge_temperatures``). The combined score's exponents are the generic defaults of the
suite option ``combined_score`` (``config.options.CombinedScoreOptions``); its informational target
> 1.20 and its hit-rate and MRR minimums are in the metrics' descriptions (``metric_docs``).

Its output document (``--compat seed000``) is its ``evaluation.json``: ``timestamp``, ``num_questions``,
``summary`` (``avg_hit_rate``, ``avg_mrr``, ``avg_judge_score``, ``avg_combined_score``,
``best_combined_score``, ``avg_num_tokens``, ``total_tokens``), ``metadata`` (``ground_truth_file``,
``search_mode``, ``judge_model``) and flat ``results`` (``question``, ``hit_rate``, ``mrr``, ``judge_score``,
``num_tokens``, ``combined_score``). Averages are over the questions where the metric has a value; a metric
that never ran (no judge) is ``null``. ``search_mode`` is the agent's own setting, unknown to evalgate:
``null``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from evalgate.dialect import CaseFormat, Dialect, OutputDocument, Passes, Trigger
from evalgate.model import Case, CaseResult
from evalgate.report.documents import Average, build_document, chosen, file_of, metric_value, totals
from evalgate.store.reader import recorded

METRICS = ("hit_rate", "mrr", "judge_score", "combined_score")
"""The metrics evaluation.json reports (its records are the cases on which any of them ran)."""


def _has_sources(case: Case) -> bool:
    return case.expected_sources is not None


def _detect(data: Mapping[str, Any], wrapper: str | None) -> str | None:
    """A seed 000 ground-truth entry: ``question`` with ``expected_sources`` and no ``id`` / ``input``."""
    if "question" in data and "expected_sources" in data and not {"id", "input", "case_id"} & set(data):
        return "it is a seed 000 ground-truth entry (question, expected_sources, no id)"
    return None


def _entry(record: CaseResult) -> dict[str, Any]:
    tokens = metric_value(record, "num_tokens")
    if tokens is None and record.num_tokens is not None:
        tokens = float(record.num_tokens)
    return {
        "question": record.input,
        "hit_rate": metric_value(record, "hit_rate"),
        "mrr": metric_value(record, "mrr"),
        "judge_score": metric_value(record, "judge_score"),
        "num_tokens": None if tokens is None else int(tokens),
        "combined_score": metric_value(record, "combined_score"),
    }


class _Totals:
    def __init__(self) -> None:
        self.averages = {name: Average() for name in ("hit_rate", "mrr", "judge_score", "combined_score",
                                                      "num_tokens")}
        self.best: float | None = None
        self.total_tokens: int | None = None
        self.count = 0
        self.files: dict[str, None] = {}

    def add(self, record: CaseResult) -> None:
        entry = _entry(record)
        self.count += 1
        self.files.setdefault(file_of(recorded(record, "source")))
        for name, average in self.averages.items():
            average.add(None if entry[name] is None else (float(entry[name]) if name == "num_tokens" else entry[name]))
        if entry["combined_score"] is not None:
            self.best = entry["combined_score"] if self.best is None else max(self.best, entry["combined_score"])
        if entry["num_tokens"] is not None:
            self.total_tokens = (self.total_tokens or 0) + entry["num_tokens"]


def parts(head: Mapping[str, Any], passes: Passes, include_responses: bool = True
          ) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """evaluation.json (keys in the module docstring) as its fields but ``results`` and a generator of
    ``results``' entries: two passes over the records, memory independent of their number. ``head`` is
    read after the first pass (a streamed document's fields are complete then)."""
    found, narrowed = totals(passes, METRICS, _Totals)
    averages = found.averages
    judge = (head.get("metadata") or {}).get("judge") or {}
    document = {
        "timestamp": head.get("timestamp"),
        "num_questions": found.count,
        "summary": {
            "avg_hit_rate": averages["hit_rate"].value,
            "avg_mrr": averages["mrr"].value,
            "avg_judge_score": averages["judge_score"].value,
            "avg_combined_score": averages["combined_score"].value,
            "best_combined_score": round(found.best, 6) if found.best is not None else None,
            "avg_num_tokens": averages["num_tokens"].value,
            "total_tokens": found.total_tokens,
        },
        "metadata": {
            "ground_truth_file": ", ".join(found.files) if found.files else None,
            "search_mode": None,
            "judge_model": judge.get("model") if judge.get("provider") not in (None, "none") else None,
        },
    }
    return document, (_entry(record) for record in chosen(passes, METRICS, narrowed))


def evaluation_json(document: Mapping[str, Any]) -> dict[str, Any]:
    """evaluation.json for a results ``document`` in memory (keys in the module docstring)."""
    return build_document(DIALECT.name, document)


DIALECT = Dialect(
    name="seed000",
    label="seed 000 (Wikipedia agent)",
    owns=("judge_score", "combined_score"),
    owned_when={"judge_score": "the case has expected_sources", "combined_score": "the case has expected_sources"},
    triggers=(Trigger("num_tokens", _has_sources, "seed 000 counts the tokens of every answer"),),
    detect=_detect,
    detect_order=30,
    markers=frozenset({"question"}),
    thresholds={"hit_rate": {"gt": 0.8}, "mrr": {"gt": 0.7}},
    kind_aliases=("000", "wikipedia-agent"),
    compat_aliases=("000", "0"),
    case_format=CaseFormat("seed 000 ground truth", (("input", "question"), ("expected_sources", "expected_sources"))),
    elsewhere="its output document evaluation.json (--compat seed000)",
    document=OutputDocument("evaluation.json", parts, "results"),
    judge_temperatures={"judge_score": 0.1},
    metric_docs={"judge_score": "Seed 000's LLM judge: overall_score in [0, 1], with accuracy, completeness, "
                                "relevance and reasoning in details; threshold > 0.75 (seed 000's minimum, strict).",
                 "combined_score": "Combined score (seed 000): {}, seed 000's informational target is > 1.20.",
                 "hit_rate": '{} (seed 000\'s dialect: > 0.80, its minimum "Hit rate > 0.80").',
                 "mrr": '{} (seed 000\'s dialect: > 0.70, its "MRR > 0.70").'},
)
