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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jinja2

from evalgate.redact import redact
from evalgate.report.console import call_summary
from evalgate.report.escape import truncate
from evalgate.report.markdown import (
    format_number,
    format_percent,
    format_signed,
    format_threshold,
    format_usd,
    is_critical,
    risk_rank,
)

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"
TEMPLATE_NAME = "report.html.j2"
TEXT_LIMIT = 20_000
MAX_CASES = 5_000
FAILED_STATUSES = ("failed", "errored")
STATUS_ORDER = {"errored": 0, "failed": 1, "passed": 2, "skipped": 3}
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
    env.filters.update(num=format_value, signed=format_signed, pct=format_percent, usd=format_usd)
    return env.get_template(TEMPLATE_NAME)


def format_value(value: Any, digits: int = 3) -> str:
    """A score with ``digits`` decimals; from 1000 up (tokens, milliseconds) whole numbers with separators."""
    if isinstance(value, int | float) and not isinstance(value, bool) and abs(value) >= 1000:
        return f"{value:,.0f}"
    return format_number(value, digits)


# ---------------------------------------------------------------------------------------------
# view model (raw values; the template escapes)


def build_html_view(results: Mapping[str, Any], *, max_cases: int = MAX_CASES) -> dict[str, Any]:
    """Everything the template shows, as plain values."""
    cases = [c for c in results.get("results") or [] if isinstance(c, Mapping)]
    ordered = order_cases(cases)
    shown = ordered[: max(0, max_cases)]
    gate = results.get("gate") or {}
    comparison = comparison_view(results.get("comparison"))
    return {
        "verdict": {
            "passed": bool(gate.get("passed")),
            "exit_code": gate.get("exit_code"),
            "status": str(results.get("status") or "completed"),
            "reasons": [str(r) for r in gate.get("reasons") or []],
        },
        "totals": totals_view(results.get("summary") or {}),
        "spend": call_summary(results),
        "metrics": metrics_view(results.get("metrics") or {}, (results.get("comparison") or {}).get("metrics") or {}),
        "has_comparison": comparison is not None,
        "comparison": comparison,
        "critical": [case_ref(c) for c in ordered if is_critical(c) and c.get("status") in FAILED_STATUSES],
        "flaky": flaky_cases(cases),
        "breakdowns": breakdowns_view(results.get("breakdowns") or {}),
        "cases": [case_view(c, position) for position, c in enumerate(shown, start=1)],
        "cases_total": len(cases),
        "cases_omitted": len(ordered) - len(shown),
        "run": run_view(results),
    }


def totals_view(summary: Mapping[str, Any]) -> dict[str, Any]:
    tokens = summary.get("tokens") or {}
    return {
        "total": summary.get("total_test_cases", 0),
        "passed": summary.get("total_passed", 0),
        "failed": summary.get("total_failed", 0),
        "errored": summary.get("total_errored", 0),
        "skipped": summary.get("total_skipped", 0),
        "critical_failures": summary.get("critical_failures", 0),
        "pass_rate": summary.get("pass_rate"),
        "weighted_pass_rate": summary.get("weighted_pass_rate"),
        "tokens_total": tokens.get("total"),
        "tokens_average": tokens.get("average"),
        "judge_prompt": tokens.get("judge_prompt"),
        "judge_completion": tokens.get("judge_completion"),
        "cost_usd": summary.get("cost_usd"),
        "latency_average": (summary.get("latency_ms") or {}).get("average"),
    }


def metric_result(info: Mapping[str, Any]) -> str:
    """``passed``/``failed`` against the threshold, ``skipped`` with no value, else ``none`` (informational)."""
    if info.get("average") is None:
        return "skipped"
    if info.get("threshold") is None:
        return "none"
    return "passed" if info.get("passed") else "failed"


def metrics_view(metrics: Mapping[str, Any], compared: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for name, info in metrics.items():
        info = info or {}
        rows.append({
            "name": str(name),
            "average": info.get("average"),
            "min": info.get("min"),
            "max": info.get("max"),
            "threshold": format_threshold(info.get("threshold")),
            "direction": info.get("direction") or "higher",
            "kind": info.get("kind") or "deterministic",
            "result": metric_result(info),
            "count": info.get("count", 0),
            "failed": info.get("failed", 0),
            "not_run": sum(int(info.get(k) or 0) for k in ("skipped", "unavailable", "errored")),
            "vs_base": delta_view(compared.get(name)),
        })
    return rows


def delta_view(entry: Any) -> dict[str, Any] | None:
    """A metric's base-vs-head entry; ``arrow`` ▲/▼ by the sign of ``delta`` (head − base)."""
    if not isinstance(entry, Mapping) or not isinstance(entry.get("delta"), int | float):
        return None
    delta = float(entry["delta"])
    return {
        "delta": delta,
        "arrow": "▲" if delta > 0 else "▼" if delta < 0 else "=",
        "base": entry.get("base"),
        "head": entry.get("head"),
        "ci_low": entry.get("ci_low"),
        "ci_high": entry.get("ci_high"),
        "significant": bool(entry.get("significant")),
        "regression": bool(entry.get("regression")),
        "improvement": bool(entry.get("improvement")),
    }


def comparison_view(comparison: Any) -> dict[str, Any] | None:
    if not isinstance(comparison, Mapping):
        return None
    cases = comparison.get("cases") or {}
    baseline = comparison.get("baseline") or {}
    pass_rate = comparison.get("pass_rate") if isinstance(comparison.get("pass_rate"), Mapping) else None
    regressions = sorted((e for e in cases.get("regressions") or [] if isinstance(e, Mapping)),
                         key=lambda e: (not is_critical(e), risk_rank(e)))
    return {
        "baseline_source": baseline.get("source") if isinstance(baseline, Mapping) else None,
        "summary": comparison.get("summary"),
        "regression": bool(comparison.get("regression")),
        "significance_level": comparison.get("significance_level"),
        "pass_rate": pass_rate,
        "metrics": [
            {"name": str(name), **view}
            for name, entry in (comparison.get("metrics") or {}).items()
            if (view := delta_view(entry)) is not None
        ],
        "regressions": [flip_view(e) for e in regressions],
        "fixes": [flip_view(e) for e in cases.get("fixes") or [] if isinstance(e, Mapping)],
        "new": len(cases.get("new") or []),
        "removed": len(cases.get("removed") or []),
    }


def flip_view(entry: Mapping[str, Any]) -> dict[str, Any]:
    return {**case_ref(entry), "base_status": entry.get("base_status"), "head_status": entry.get("head_status")}


def flaky_cases(cases: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Cases run more than once whose repeats disagree on pass/fail; pass fraction = passes / repeats."""
    by_id: dict[str, list[Mapping[str, Any]]] = {}
    for case in cases:
        by_id.setdefault(str(case.get("id")), []).append(case)
    flaky = []
    for case_id, runs in by_id.items():
        outcomes = [bool(r.get("passed")) for r in sorted(runs, key=lambda r: r.get("repeat") or 0)]
        if len(outcomes) > 1 and 0 < sum(outcomes) < len(outcomes):
            flaky.append({
                **case_ref(runs[0]),
                "id": case_id,
                "repeats": len(outcomes),
                "passes": sum(outcomes),
                "pass_fraction": sum(outcomes) / len(outcomes),
                "outcomes": ["pass" if ok else "fail" for ok in outcomes],
            })
    return sorted(flaky, key=lambda f: (not f["critical"], risk_rank(f), f["pass_fraction"], f["id"]))


def breakdowns_view(breakdowns: Mapping[str, Any]) -> list[dict[str, Any]]:
    sections = []
    for dimension, groups in breakdowns.items():
        if not isinstance(groups, Mapping) or not groups:
            continue
        rows = [
            {
                "name": str(name),
                "total": g.get("total", 0),
                "passed": g.get("passed", 0),
                "failed": g.get("failed", 0),
                "errored": g.get("errored", 0),
                "pass_rate": g.get("pass_rate"),
                "averages": sorted((g.get("average_scores") or {}).items()),
            }
            for name, g in sorted(groups.items())
            if isinstance(g, Mapping)
        ]
        sections.append({"dimension": str(dimension), "title": DIMENSION_TITLES.get(str(dimension), str(dimension)),
                         "rows": rows})
    return sections


def order_cases(cases: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Errored and failed first (critical, then by risk), then passed and skipped; dataset order within."""
    def key(case: Mapping[str, Any]) -> tuple[int, int, int, int, int]:
        failing = case.get("status") in FAILED_STATUSES
        return (0 if failing else 1, 0 if failing and is_critical(case) else 1,
                risk_rank(case) if failing else 0, int(case.get("index") or 0), int(case.get("repeat") or 0))

    return sorted(cases, key=key)


def case_ref(case: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": str(case.get("id")),
        "status": str(case.get("status") or "unknown"),
        "source": case.get("source"),
        "risk_level": case.get("risk_level"),
        "critical": is_critical(case),
        "reasons": [str(r) for r in case.get("reasons") or []],
        "repeat": case.get("repeat") or 0,
    }


def case_view(case: Mapping[str, Any], position: int) -> dict[str, Any]:
    expected = case.get("expected") or {}
    answer = case.get("answer") or {}
    return {
        **case_ref(case),
        "anchor": f"case-{position}",
        "suite": case.get("suite"),
        "category": case.get("category"),
        "difficulty": case.get("difficulty"),
        "tags": [str(t) for t in case.get("tags") or []],
        "description": _text(case.get("description")),
        "error": _text(case.get("error")),
        "input": _text(case.get("input")),
        "output": _text(case.get("output")),
        "expected": _json_text(expected) if expected else None,
        "answer": _json_text(answer) if answer else None,
        "metrics": [
            {
                "name": str(name),
                "value": m.get("value"),
                "threshold": format_threshold(m.get("threshold")),
                "status": str(m.get("status") or "unknown"),
                "reason": _text(m.get("reason")),
            }
            for name, m in (case.get("metrics") or {}).items()
            if isinstance(m, Mapping)
        ],
        "num_tokens": case.get("num_tokens"),
        "latency_ms": case.get("latency_ms"),
        "cost_usd": case.get("cost_usd"),
    }


def run_view(results: Mapping[str, Any]) -> dict[str, Any]:
    metadata = results.get("metadata") or {}
    judge = metadata.get("judge") or {}
    judge_text = str(judge.get("provider") or "none") + (f" ({judge['model']})" if judge.get("model") else "")
    return {
        "run_id": results.get("run_id"),
        "timestamp": results.get("timestamp"),
        "datasets": [_dataset_text(d) for d in metadata.get("datasets") or []],
        "judge": judge_text,
        "target": (metadata.get("target") or {}).get("kind"),
        "version": (metadata.get("versions") or {}).get("evalgate"),
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


def _text(value: Any) -> str | None:
    return None if value in (None, "") else truncate(str(value), TEXT_LIMIT)


def _json_text(value: Any) -> str:
    return truncate(json.dumps(value, indent=2, ensure_ascii=False, default=str), TEXT_LIMIT)
