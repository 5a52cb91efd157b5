"""Standalone HTML report: one self-contained file (inline CSS, no script, no external asset) that a
browser opens from disk with no server.

The results document is turned into a view model of raw values (``build_html_view``) and rendered by
``templates/report.html.j2`` with jinja2 **autoescape on**, so every case text, id, reason and model
answer is HTML-escaped; a Content-Security-Policy meta tag (``default-src 'none'``) also keeps the
browser from loading or running anything should a value ever slip through. Secrets are redacted from
the final text.

Sections: verdict and gate reasons, totals (with judge spend and call retries / HTTP 429s), the metric table with thresholds (and a "vs base" column
when the document has a ``comparison``), critical failures, the comparison block, flaky cases (cases
whose repeats disagree on pass/fail), breakdowns by every dimension, per-case details in
``<details>`` (failed and errored first: critical, then by risk, then dataset order), run metadata.
Text fields are cut at ``TEXT_LIMIT`` characters and at most ``max_cases`` case records are shown.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2

from evalgate.model import CaseResult
from evalgate.report.console import call_summary
from evalgate.report.digest import beyond
from evalgate.report.escape import truncate
from evalgate.report.view import (
    adaptive_view,
    case_metrics,
    case_records,
    case_ref,
    comparison_view,
    critical_refs,
    failed_case_view,
    failing_by_importance,
    failing_first,
    flaky_from_records,
    flaky_view,
    format_count,
    format_number,
    format_p,
    format_percent,
    format_signed,
    format_usd,
    gate_changes_view,
    group_row,
    judge_view,
    metric_rows,
    not_scored_view,
    run_view,
    skipped_metrics,
    totals_view,
    transcript_view,
    usage_view,
    verdict_view,
)
from evalgate.safety.redact import redact

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"
TEMPLATE_NAME = "report.html.j2"
TEXT_LIMIT = 20_000
MAX_CASES = 5_000
DIMENSION_TITLES = {"suite": "Suite", "category": "Category", "difficulty": "Difficulty",
                    "risk_level": "Risk level", "evolution_type": "Evolution type", "tag": "Tag"}


def render_html(results: Mapping[str, Any], *, max_cases: int = MAX_CASES) -> str:
    """The whole report as one HTML document (UTF-8 text)."""
    view = build_html_view(results, max_cases=max_cases)
    return redact(_template().render(**view))


def write_html(results: Mapping[str, Any], destination: Path, *, max_cases: int = MAX_CASES) -> Path:
    """Render and write the report to ``destination`` (parent directories created)."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    destination.write_text(render_html(results, max_cases=max_cases), encoding="utf-8")
    return destination


def _template() -> jinja2.Template:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(num=format_value, signed=format_signed, pct=format_percent, usd=format_usd, pval=format_p,
                       count=format_count)
    return env.get_template(TEMPLATE_NAME)


def format_value(value: Any, digits: int = 3) -> str:
    """A score with ``digits`` decimals; from 1000 up (tokens, milliseconds) whole numbers with separators."""
    if isinstance(value, int | float) and not isinstance(value, bool) and abs(value) >= 1000:
        return f"{value:,.0f}"
    return format_number(value, digits)


# ---------------------------------------------------------------------------------------------
# view model (sections from evalgate.report.view; raw values, the template escapes)


def build_html_view(results: Mapping[str, Any], *, max_cases: int = MAX_CASES) -> dict[str, Any]:
    """Everything the template shows, as plain values."""
    cases = case_records(results)
    ordered = failing_first(cases)
    shown = ordered[: max(0, max_cases)]
    comparison = comparison_view(results.get("comparison"))
    latencies = (results.get("summary") or {}).get("latency_ms") or {}
    latency = latencies.get("average")
    return {
        "verdict": verdict_view(results),
        "gate_changes": gate_changes_view(results),
        "totals": totals_view(results) | usage_view(results) | {"latency_average": latency, "latency_p50": latencies.get("p50"),
                                                                "latency_p95": latencies.get("p95")},
        "spend": call_summary(results),
        "metrics": metric_rows(results),
        "not_scored": not_scored_view(results),
        "judge": judge_view(results),
        "has_comparison": comparison is not None,
        "comparison": comparison,
        "critical": critical_refs(ordered),
        "failed_cases": [failed_case_view(c) for c in failing_by_importance(cases)],
        "skipped_metrics": skipped_metrics(results),
        "flaky": _flaky(results, cases),
        "adaptive": adaptive_view(results),
        "breakdowns": _breakdowns(results.get("breakdowns") or {}),
        "cases": [_case_view(c, position) for position, c in enumerate(shown, start=1)],
        "cases_total": len(cases) + beyond(results, "cases"),
        "cases_omitted": len(ordered) + beyond(results, "cases") - len(shown),
        "run": _run_view(results),
    }


def _flaky(results: Mapping[str, Any], cases: list[CaseResult]) -> list[dict[str, Any]]:
    """Flaky cases from the records; from the run's own ``flaky`` list when the records are a digest
    (``report.digest``: not every repeat is held)."""
    listed = results.get("flaky")
    if beyond(results, "cases") and isinstance(listed, list):
        return [flaky_view(f) for f in listed if isinstance(f, Mapping)]
    return flaky_from_records(cases)


def _breakdowns(breakdowns: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One section per dimension with groups, groups by name."""
    return [
        {"dimension": str(dimension), "title": DIMENSION_TITLES.get(str(dimension), str(dimension)),
         "rows": [group_row(name, g) for name, g in sorted(groups.items()) if isinstance(g, Mapping)]}
        for dimension, groups in breakdowns.items()
        if isinstance(groups, Mapping) and groups
    ]


def _case_view(case: CaseResult, position: int) -> dict[str, Any]:
    expected = case.expected
    answer = case.answer
    return {
        **case_ref(case),
        "anchor": f"case-{position}",
        "suite": case.suite,
        "category": case.category,
        "difficulty": case.difficulty,
        "tags": case.tags,
        "description": shown_text(case.description),
        "error": shown_text(case.error),
        "input": shown_text(case.input),
        "output": shown_text(case.output),
        "expected": shown_json(expected) if expected else None,
        "answer": shown_json(other) if (other := {k: v for k, v in answer.items() if k != "trace"}) else None,
        "trace": trace_view(answer.get("trace")),
        "metrics": [
            {**row, "reason": shown_text(row["reason"])} for row in case_metrics(case)
        ],
        "num_tokens": case.num_tokens,
        "latency_ms": case.latency_ms,
        "cost_usd": case.cost_usd,
        "transcript": transcript_view(case, TEXT_LIMIT),
        "failed_turn": (case.conversation or {}).get("failed_turn"),
    }


TRACE_KINDS = {"agent": "agent", "tool": "tool", "llm": "LLM", "handoff": "handoff", "workflow": "workflow"}


def trace_view(trace: Any) -> dict[str, Any] | None:
    """A case's span tree for the report: a one-line summary and one text line per span, indented by
    depth (``name  [kind]  ms``, ✗ for a span that failed, the turn when the case made several calls)."""
    if not isinstance(trace, Mapping):
        return None
    tokens = trace.get("tokens") or {}
    parts = [f"{trace.get('spans', 0)} span(s)", f"{trace.get('tool_calls', 0)} tool call(s)",
             f"{trace.get('llm_call_count', 0)} LLM call(s)", f"{tokens.get('total', 0):,} tokens",
             f"source {trace.get('source', 'otlp')}"]
    if trace.get("dropped_spans"):
        parts.append(f"{trace['dropped_spans']} span(s) over the cap not kept")
    rows = [row for row in trace.get("tree") or [] if isinstance(row, Mapping)]
    turns = len({row.get("turn", 0) for row in rows}) > 1
    lines = []
    for row in rows:
        kind = TRACE_KINDS.get(str(row.get("kind")), "")
        line = "  " * min(int(row.get("depth") or 0), 20) + str(row.get("name", ""))
        line += f"  [{kind}]" if kind else ""
        line += f"  {float(row.get('ms') or 0):.1f} ms"
        line += "  ✗ failed" if row.get("failed") else ""
        line += f"  (turn {int(row.get('turn') or 0) + 1})" if turns else ""
        lines.append(line)
    if int(trace.get("spans") or 0) > len(rows):
        lines.append(f"… {int(trace.get('spans') or 0) - len(rows)} more span(s)")
    return {"summary": " · ".join(parts), "tree": truncate("\n".join(lines), TEXT_LIMIT) if lines else None}


def _run_view(results: Mapping[str, Any]) -> dict[str, Any]:
    metadata = results.get("metadata") or {}
    return run_view(results) | {
        "datasets": [_dataset_text(d) for d in metadata.get("datasets") or []],
        "merged_from": [
            {"source": m.get("source"), "run_id": m.get("run_id"), "shard": m.get("shard"),
             "status": m.get("status"), "records": m.get("records")}
            for m in metadata.get("merged_from") or []
            if isinstance(m, Mapping)
        ],
    }


def _dataset_text(entry: Any) -> str:
    if isinstance(entry, Mapping):
        cases = entry.get("cases")
        return f"{entry.get('path')}" + (f" ({cases} cases)" if cases is not None else "")
    return str(entry)


def shown_text(value: Any) -> str | None:
    """A text field as a report shows it: None when empty, else cut at ``TEXT_LIMIT`` characters."""
    return None if value in (None, "") else truncate(str(value), TEXT_LIMIT)


def shown_json(value: Any) -> str:
    """A structured field as indented JSON, cut at ``TEXT_LIMIT`` characters."""
    return truncate(json.dumps(value, indent=2, ensure_ascii=False, default=str), TEXT_LIMIT)
