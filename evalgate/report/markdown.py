"""Markdown report for the PR comment and the job summary, rendered from a results document.

The results document (docs/design.md, "results.json", plus the optional ``comparison`` block) is
turned into a *view model* of raw values (``build_view``); the jinja2 template escapes every
untrusted value explicitly through the filters registered here (autoescape is off):

=============  =================================================================================
filter         use
=============  =================================================================================
``prose``      text in a Markdown paragraph or list item (HTML, inline syntax, mentions neutralised)
``cell``       text in a table cell (prose rules + ``|`` and newlines)
``code``       inline code span; ``code_cell`` the same inside a table
``fenced``     fenced code block the text cannot break out of
``html``       text inside an HTML element such as ``<summary>``
``url``        a link target (http/https only)
``num``        a score: 3 decimals, ``—`` for None; ``signed`` the same with an explicit sign
``pct``        a fraction in [0, 1] as a percentage with one decimal
``usd``        a cost in US dollars with 4 decimals
=============  =================================================================================

Size: the body must fit a budget (characters for a PR comment, counted as UTF-16 code units; UTF-8
bytes for the job summary). When it does not, per-case details are dropped first (least important
first, critical cases last), then the breakdown table, then long lists are capped; as a last
resort the text is cut. A line says how many case details were omitted.
"""

from __future__ import annotations

import json
import os
import posixpath
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from evalgate.errors import UserError
from evalgate.redact import redact
from evalgate.report.console import call_summary
from evalgate.report.escape import (
    cut_utf16,
    escape_cell,
    escape_html,
    escape_prose,
    fenced,
    inline_code,
    link_target,
    truncate,
    utf16_len,
)

TEMPLATE_PATH = Path(__file__).resolve().parent / "templates" / "comment.md.j2"
COMMENT_MARKER = "<!-- evalgate:comment tag={tag} -->"
SUMMARY_MAX_BYTES = 1_000_000
RISK_ORDER = {"critical": 0, "high": 1, "medium": 2, "low": 3}
FAILED_STATUSES = ("failed", "errored")
MIN_DETAIL_SIZE = 40
"""A lower bound on the size of one rendered case-details block (characters or bytes)."""
METRIC_PROBLEM_STATUSES = ("failed", "errored", "unavailable")

Mode = Literal["comment", "summary"]


@dataclass(frozen=True)
class Excerpts:
    """Per-field character limits for case details (before escaping)."""

    input: int
    expected: int
    answer: int
    error: int


EXCERPTS: dict[Mode, Excerpts] = {
    "comment": Excerpts(input=400, expected=300, answer=600, error=400),
    "summary": Excerpts(input=2000, expected=2000, answer=4000, error=2000),
}


@dataclass(frozen=True)
class Plan:
    """How much of the report to render: ``details`` case blocks, the breakdown, list caps."""

    details: int
    breakdown: bool = True
    list_cap: int = 50


@dataclass(frozen=True)
class SourceLinks:
    """Turns a case source ``path:line`` into ``{server}/{repo}/blob/{sha}/{path}#L{line}``.

    Relative paths are taken relative to ``base_dir`` (default: the current directory); the link
    path is relative to ``workspace`` (the repository checkout). Paths outside it get no link.
    """

    server_url: str
    repository: str
    sha: str
    workspace: str | None = None
    base_dir: str | None = None

    def url(self, source: str | None) -> str | None:
        path, line = split_source(source)
        rel = repo_relative(path, self.workspace, self.base_dir) if path else None
        if rel is None:
            return None
        anchor = f"#L{line}" if line else ""
        return f"{self.server_url.rstrip('/')}/{self.repository}/blob/{self.sha}/{rel}{anchor}"


def split_source(source: str | None) -> tuple[str | None, int | None]:
    """``"datasets/a.yaml:12"`` → ``("datasets/a.yaml", 12)``; no line → ``(path, None)``."""
    if not source or source.startswith("<"):
        return None, None
    head, sep, tail = source.rpartition(":")
    if sep and head and tail.isdigit():
        return head, int(tail)
    return source, None


def repo_relative(path: str, workspace: str | None, base_dir: str | None = None) -> str | None:
    """``path`` relative to ``workspace`` with ``/`` separators, or None when it lies outside it."""
    base = base_dir or os.getcwd()
    absolute = path if os.path.isabs(path) else os.path.join(base, path)
    root = workspace or base
    rel = os.path.relpath(os.path.normpath(absolute), os.path.normpath(root))
    if rel == os.pardir or rel.startswith(os.pardir + os.sep) or os.path.isabs(rel):
        return None
    return posixpath.join(*rel.split(os.sep))


def comment_marker(tag: str) -> str:
    """The hidden first line that identifies evalgate's comment for ``tag``."""
    return COMMENT_MARKER.format(tag=sanitize_tag(tag))


def sanitize_tag(tag: str) -> str:
    """Keep ``[A-Za-z0-9._/-]`` so a tag cannot close the HTML comment; empty → ``default``."""
    cleaned = "".join(ch if ch.isascii() and (ch.isalnum() or ch in "._/-") else "-" for ch in tag.strip())
    return cleaned.strip("-") or "default"


# ---------------------------------------------------------------------------------------------
# public entry points


def render_comment(
    results: Mapping[str, Any],
    *,
    run_url: str | None,
    artifact_url: str | None,
    tag: str,
    template_path: Path | None = None,
    max_chars: int = 65000,
    source_links: SourceLinks | None = None,
) -> str:
    """The PR comment body: marker line + report, at most ``max_chars`` UTF-16 code units."""
    marker = comment_marker(tag) + "\n"
    view = build_view(
        results, mode="comment", run_url=run_url, artifact_url=artifact_url, tag=tag, source_links=source_links
    )
    template = load_template(template_path)
    budget = max_chars - utf16_len(marker)
    return marker + fit(view, template, budget=budget, measure=utf16_len, cut=_cut_chars)


def render_summary(
    results: Mapping[str, Any],
    *,
    run_url: str | None,
    artifact_url: str | None,
    tag: str = "",
    template_path: Path | None = None,
    max_bytes: int = SUMMARY_MAX_BYTES,
    source_links: SourceLinks | None = None,
) -> str:
    """The job-summary Markdown (longer excerpts, no marker), at most ``max_bytes`` UTF-8 bytes."""
    view = build_view(
        results, mode="summary", run_url=run_url, artifact_url=artifact_url, tag=tag, source_links=source_links
    )
    template = load_template(template_path)
    return fit(view, template, budget=max_bytes, measure=utf8_len, cut=_cut_bytes)


def utf8_len(text: str) -> int:
    """Size in UTF-8 bytes."""
    return len(text.encode("utf-8"))


# ---------------------------------------------------------------------------------------------
# template loading and rendering


def load_template(template_path: Path | None) -> jinja2.Template:
    """The bundled template, or the user's file; problems become a one-line ``UserError``."""
    path = template_path or TEMPLATE_PATH
    try:
        source = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read report template: {exc.strerror}", where=str(path)) from None
    try:
        template = _environment().from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        raise UserError(f"template syntax error: {exc.message}", where=f"{path}:{exc.lineno}") from None
    template.name = str(path)
    return template


def _environment() -> SandboxedEnvironment:
    env = SandboxedEnvironment(
        autoescape=False,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(
        prose=lambda v: escape_prose(_text(v)),
        cell=lambda v: escape_cell(_text(v)),
        code=lambda v: inline_code(_text(v)),
        code_cell=lambda v: inline_code(_text(v), in_table=True),
        fenced=lambda v, lang="": fenced(_text(v), lang),
        html=lambda v: escape_html(_text(v)),
        url=lambda v: link_target(_text(v)),
        num=format_number,
        signed=format_signed,
        pct=format_percent,
        usd=format_usd,
    )
    return env


def render_view(view: Mapping[str, Any], template: jinja2.Template, plan: Plan) -> str:
    """Render ``view`` cut down to ``plan``; secrets are redacted from the result."""
    try:
        text = template.render(**apply_plan(view, plan))
    except (jinja2.TemplateError, TypeError, ValueError) as exc:  # user templates can misuse filters
        raise UserError(f"template error: {exc}", where=template.name or "report template") from None
    return redact(_finish(text))


def fit(
    view: Mapping[str, Any],
    template: jinja2.Template,
    *,
    budget: int,
    measure: Callable[[str], int],
    cut: Callable[[str, int], str],
) -> str:
    """Largest rendering within ``budget``: drop details (binary search), then breakdown, then lists.

    At most ``budget // MIN_DETAIL_SIZE`` details are tried, so huge runs do not render megabytes.
    """
    total = len(view["details"])
    upper = min(total, budget // MIN_DETAIL_SIZE)
    if upper == total:
        full = render_view(view, template, Plan(details=total))
        if measure(full) <= budget:
            return full
    for plan in (Plan(details=0), Plan(details=0, breakdown=False), Plan(details=0, breakdown=False, list_cap=10)):
        text = render_view(view, template, plan)
        if measure(text) <= budget:
            if plan.breakdown:
                return _most_details(view, template, plan, budget, measure, text, upper)
            return text
    return cut(text, budget)


def _most_details(
    view: Mapping[str, Any],
    template: jinja2.Template,
    plan: Plan,
    budget: int,
    measure: Callable[[str], int],
    fallback: str,
    upper: int,
) -> str:
    """Binary search for the most case details (kept in importance order) that still fit."""
    low, high, best = 0, upper, fallback
    while low < high:
        mid = (low + high + 1) // 2
        text = render_view(view, template, replace(plan, details=mid))
        if measure(text) <= budget:
            low, best = mid, text
        else:
            high = mid - 1
    return best


def apply_plan(view: Mapping[str, Any], plan: Plan) -> dict[str, Any]:
    """A copy of ``view`` with details, breakdown and long lists cut according to ``plan``."""
    out = dict(view)
    details = view["details"]
    out["details"] = details[: plan.details]
    out["details_omitted"] = len(details) - min(plan.details, len(details))
    out["breakdown"] = view["breakdown"] if plan.breakdown else []
    out["breakdown_omitted"] = bool(view["breakdown"]) and not plan.breakdown
    out["critical"], out["critical_omitted"] = _capped(view["critical"], plan.list_cap)
    out["flaky"], out["flaky_omitted"] = _capped(view["flaky"], plan.list_cap)
    if view["repeats"]:  # flaky cases beyond the ones results.json lists are counted, not named
        out["flaky_omitted"] = max(0, view["repeats"]["flaky_cases"] - len(out["flaky"]))
    verdict = dict(view["verdict"])
    verdict["reasons"], verdict["reasons_omitted"] = _capped(verdict["reasons"], plan.list_cap)
    out["verdict"] = verdict
    if view["comparison"] is not None:
        comparison = dict(view["comparison"])
        comparison["regressions"], comparison["regressions_omitted"] = _capped(
            comparison["regressions"], plan.list_cap
        )
        comparison["fixes"], comparison["fixes_omitted"] = _capped(comparison["fixes"], plan.list_cap)
        out["comparison"] = comparison
    return out


def _capped(items: Sequence[Any], cap: int) -> tuple[list[Any], int]:
    return list(items[:cap]), max(0, len(items) - cap)


def _cut_chars(text: str, budget: int) -> str:
    note = "\n\n… report cut to fit the comment size limit — see the job summary / artifact\n"
    return cut_utf16(text, max(0, budget - utf16_len(note))) + note


def _cut_bytes(text: str, budget: int) -> str:
    note = "\n\n… report cut to fit the job summary size limit — see the artifact\n"
    keep = max(0, budget - utf8_len(note))
    return text.encode("utf-8")[:keep].decode("utf-8", errors="ignore") + note


def _finish(text: str) -> str:
    """Trim leading/trailing blank lines; end with exactly one newline."""
    return text.strip("\n") + "\n"


# ---------------------------------------------------------------------------------------------
# view model


def build_view(
    results: Mapping[str, Any],
    *,
    mode: Mode,
    run_url: str | None,
    artifact_url: str | None,
    tag: str = "",
    source_links: SourceLinks | None = None,
) -> dict[str, Any]:
    """Raw values the template needs (nothing escaped yet). Keys are documented in the template."""
    link = source_links.url if source_links else (lambda _source: None)
    cases = [c for c in results.get("results") or [] if isinstance(c, Mapping)]
    comparison = _comparison_view(results.get("comparison"), link)
    return {
        "mode": mode,
        "tag": tag,
        "title": _title(tag),
        "verdict": _verdict_view(results),
        "totals": _totals_view(results),
        "metrics": _metrics_view(results),
        "has_comparison": comparison is not None,
        "critical": [_case_ref(c, link) for c in cases if is_critical(c) and c.get("status") in FAILED_STATUSES],
        "breakdown": _breakdown_view(results),
        "comparison": comparison,
        "details": [_detail_view(c, link, EXCERPTS[mode]) for c in _detail_order(cases)],
        "baseline_note": _baseline_note(results),
        "repeats": _repeats_view(results),
        "flaky": [_flaky_view(f, link) for f in results.get("flaky") or [] if isinstance(f, Mapping)],
        "intervals": _intervals_view(results),
        "judge_stability": _judge_stability_view(results),
        "spend": call_summary(results),
        "usage": _usage_view(results),
        "run": _run_view(results),
        "links": {"run_url": run_url, "artifact_url": artifact_url},
    }


def _title(tag: str) -> str:
    clean = sanitize_tag(tag) if tag else ""
    return "evalgate" if clean in ("", "default", "evalgate") else f"evalgate · {clean}"


def _verdict_view(results: Mapping[str, Any]) -> dict[str, Any]:
    gate = results.get("gate") or {}
    return {
        "passed": bool(gate.get("passed")),
        "exit_code": gate.get("exit_code"),
        "status": str(results.get("status") or "completed"),
        "reasons": [str(r) for r in gate.get("reasons") or []],
    }


def _totals_view(results: Mapping[str, Any]) -> dict[str, Any]:
    summary = results.get("summary") or {}
    return {
        "total": summary.get("total_test_cases", 0),
        "passed": summary.get("total_passed", 0),
        "failed": summary.get("total_failed", 0),
        "errored": summary.get("total_errored", 0),
        "skipped": summary.get("total_skipped", 0),
        "critical_failures": summary.get("critical_failures", 0),
        "pass_rate": summary.get("pass_rate"),
        "weighted_pass_rate": summary.get("weighted_pass_rate"),
    }


def _metrics_view(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    compared = ((results.get("comparison") or {}).get("metrics")) or {}
    rows = []
    for name, info in (results.get("metrics") or {}).items():
        info = info or {}
        rows.append(
            {
                "name": name,
                "average": info.get("average"),
                "threshold": format_threshold(info.get("threshold")),
                "result": _metric_result(info),
                "count": info.get("count", 0),
                "skipped": info.get("skipped", 0),
                "unavailable": info.get("unavailable", 0),
                "vs_base": _delta_view(compared.get(name)),
            }
        )
    return rows


def _metric_result(info: Mapping[str, Any]) -> str:
    """``passed`` / ``failed`` against the threshold, ``skipped`` when nothing was scored, else ``none``."""
    if info.get("average") is None:
        return "skipped"
    if info.get("threshold") is None:
        return "none"
    return "passed" if info.get("passed") else "failed"


def _delta_view(entry: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not entry or entry.get("delta") is None:
        return None
    delta = float(entry["delta"])
    return {
        "delta": delta,
        "arrow": "▲" if delta > 0 else "▼" if delta < 0 else "＝",
        "significant": bool(entry.get("significant")),
        "regression": bool(entry.get("regression")),
        "improvement": bool(entry.get("improvement")),
        "ci_low": entry.get("ci_low"),
        "ci_high": entry.get("ci_high"),
        "base": entry.get("base"),
    }


def _breakdown_view(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    groups = ((results.get("breakdowns") or {}).get("category")) or {}
    return [
        {
            "name": name,
            "total": g.get("total", 0),
            "passed": g.get("passed", 0),
            "failed": g.get("failed", 0),
            "errored": g.get("errored", 0),
            "pass_rate": g.get("pass_rate"),
        }
        for name, g in sorted(groups.items(), key=lambda kv: (kv[1].get("pass_rate") or 0.0, kv[0]))
    ]


def _comparison_view(comparison: Any, link: Callable[[str | None], str | None]) -> dict[str, Any] | None:
    if not isinstance(comparison, Mapping):
        return None
    cases = comparison.get("cases") or {}
    baseline = comparison.get("baseline") or {}

    def flip(entry: Mapping[str, Any]) -> dict[str, Any]:
        return {**_case_ref(entry, link), "base_status": entry.get("base_status"), "head_status": entry.get("head_status")}

    regressions = sorted(cases.get("regressions") or [], key=lambda e: (not is_critical(e), risk_rank(e)))
    return {
        "baseline_source": baseline.get("source"),
        "summary": comparison.get("summary"),
        "regression": bool(comparison.get("regression")),
        "significance_level": comparison.get("significance_level"),
        "pass_rate": comparison.get("pass_rate"),
        "regressions": [flip(e) for e in regressions],
        "fixes": [flip(e) for e in cases.get("fixes") or []],
        "new": len(cases.get("new") or []),
        "removed": len(cases.get("removed") or []),
    }


def _baseline_note(results: Mapping[str, Any]) -> dict[str, str] | None:
    """Why there is no comparison although a baseline was asked for: ``{"title", "reason"}``, else None."""
    baseline = results.get("baseline")
    if not isinstance(baseline, Mapping) or isinstance(results.get("comparison"), Mapping):
        return None
    warning = str(baseline.get("warning") or "").strip()
    if baseline.get("found"):
        reason = warning.removeprefix("no comparison:").strip()
        return {"title": "No comparison", "reason": reason or "the comparison with the baseline failed"}
    return {"title": "No baseline", "reason": warning.removeprefix("no baseline:").strip() or "none found"}


def _repeats_view(results: Mapping[str, Any]) -> dict[str, Any] | None:
    repeats = (results.get("summary") or {}).get("repeats")
    if not isinstance(repeats, Mapping):
        return None
    return {key: repeats.get(key) or 0 for key in ("repeat", "cases", "flaky_cases", "incomplete_cases")} | {
        "rule": str(repeats.get("rule") or "majority")}


def _flaky_view(entry: Mapping[str, Any], link: Callable[[str | None], str | None]) -> dict[str, Any]:
    """One flaky case: passes / repeats and each repeat's status in order."""
    return {
        **_case_ref(entry, link),
        "passes": entry.get("passes", 0),
        "repeats": entry.get("repeats", 0),
        "pass_fraction": entry.get("pass_fraction"),
        "outcomes": [str(o) for o in entry.get("outcomes") or []],
    }


def _intervals_view(results: Mapping[str, Any]) -> dict[str, Any] | None:
    """Suite averages with their bootstrap confidence interval (``summary.confidence_intervals``)."""
    intervals = (results.get("summary") or {}).get("confidence_intervals")
    if not isinstance(intervals, Mapping):
        return None
    rows = [_interval_row("pass rate", intervals.get("pass_rate"), rate=True)]
    rows += [_interval_row(str(name), row, rate=False) for name, row in (intervals.get("metrics") or {}).items()]
    kept = [row for row in rows if row is not None]
    if not kept:
        return None
    confidence = intervals.get("confidence")
    level = confidence * 100 if isinstance(confidence, int | float) and 0 < confidence < 1 else 95
    return {"level": f"{level:g}%", "rows": kept}


def _interval_row(name: str, row: Any, *, rate: bool) -> dict[str, Any] | None:
    if not isinstance(row, Mapping):
        return None
    return {"name": name, "rate": rate, "mean": row.get("mean"), "low": row.get("low"), "high": row.get("high"),
            "cases": row.get("cases", 0), "within_case_stdev": row.get("within_case_stdev")}


def _judge_stability_view(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per judged metric sampled K > 1 times: spread of the samples (``summary.judge_stability``)."""
    stability = (results.get("summary") or {}).get("judge_stability") or {}
    return [
        {"name": str(name), "samples": row.get("samples", 0), "answers": row.get("answers", 0),
         "mean_stdev": row.get("mean_stdev"), "max_stdev": row.get("max_stdev"),
         "straddling": row.get("straddling_threshold", 0)}
        for name, row in stability.items()
        if isinstance(row, Mapping)
    ]


def _usage_view(results: Mapping[str, Any]) -> dict[str, Any]:
    summary = results.get("summary") or {}
    tokens = summary.get("tokens") or {}
    return {
        "tokens_total": tokens.get("total"),
        "tokens_average": tokens.get("average"),
        "judge_prompt": tokens.get("judge_prompt"),
        "judge_completion": tokens.get("judge_completion"),
        "cost_usd": summary.get("cost_usd"),
    }


def _run_view(results: Mapping[str, Any]) -> dict[str, Any]:
    metadata = results.get("metadata") or {}
    judge = metadata.get("judge") or {}
    judge_text = str(judge.get("provider") or "none")
    if judge.get("model"):
        judge_text += f" ({judge['model']})"
    return {
        "run_id": results.get("run_id"),
        "timestamp": results.get("timestamp"),
        "datasets": [
            {"path": d.get("path"), "cases": d.get("cases")}
            for d in metadata.get("datasets") or []
            if isinstance(d, Mapping)
        ],
        "judge": judge_text,
        "target": (metadata.get("target") or {}).get("kind"),
        "version": (metadata.get("versions") or {}).get("evalgate"),
    }


def _case_ref(case: Mapping[str, Any], link: Callable[[str | None], str | None]) -> dict[str, Any]:
    source = case.get("source")
    return {
        "id": str(case.get("id")),
        "status": case.get("status"),
        "source": source,
        "link": link(source),
        "risk_level": case.get("risk_level"),
        "critical": is_critical(case),
        "reasons": [str(r) for r in case.get("reasons") or []],
        "repeat": case.get("repeat") or 0,
    }


def _detail_order(cases: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Failed/errored cases, most important first: critical, then by risk, then dataset order."""
    failing = [c for c in cases if c.get("status") in FAILED_STATUSES]
    return sorted(failing, key=lambda c: (not is_critical(c), risk_rank(c), c.get("index") or 0))


def _detail_view(
    case: Mapping[str, Any], link: Callable[[str | None], str | None], limits: Excerpts
) -> dict[str, Any]:
    expected = case.get("expected") or {}
    return {
        **_case_ref(case, link),
        "category": case.get("category"),
        "description": case.get("description"),
        "input": truncate(str(case["input"]), limits.input) if case.get("input") else None,
        "expected": truncate(compact_json(expected), limits.expected) if expected else None,
        "answer": truncate(str(case["output"]), limits.answer) if case.get("output") else None,
        "error": truncate(str(case["error"]), limits.error) if case.get("error") else None,
        "failed_metrics": [
            {
                "name": name,
                "value": m.get("value"),
                "threshold": format_threshold(m.get("threshold")),
                "status": m.get("status"),
                "reason": truncate(str(m.get("reason") or ""), limits.error),
            }
            for name, m in (case.get("metrics") or {}).items()
            if isinstance(m, Mapping) and m.get("status") in METRIC_PROBLEM_STATUSES
        ],
        "num_tokens": case.get("num_tokens"),
        "cost_usd": case.get("cost_usd"),
    }


def is_critical(case: Mapping[str, Any]) -> bool:
    """True for ``risk_level: critical`` or an explicit ``critical: true``."""
    return bool(case.get("critical")) or str(case.get("risk_level") or "").lower() == "critical"


def risk_rank(case: Mapping[str, Any]) -> int:
    """0 for critical … 3 for low, 4 for unknown risk levels (sorts most important first)."""
    return RISK_ORDER.get(str(case.get("risk_level") or "").lower(), len(RISK_ORDER))


# ---------------------------------------------------------------------------------------------
# formatting helpers (also used as template filters)


def compact_json(value: Any) -> str:
    """One-line JSON with ``", "`` / ``": "`` separators; non-JSON values via ``str``."""
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str, sort_keys=False)


def format_threshold(threshold: Any) -> str | None:
    """``{"min": 0.9}`` → ``≥ 0.9``; ``{"max": 0.2}`` → ``≤ 0.2``; a bare number counts as min."""
    if threshold is None:
        return None
    if isinstance(threshold, int | float):
        return f"≥ {threshold:g}"
    if isinstance(threshold, Mapping):
        if "min" in threshold:
            return f"≥ {float(threshold['min']):g}"
        if "max" in threshold:
            return f"≤ {float(threshold['max']):g}"
        if "op" in threshold and "value" in threshold:
            return f"{'≥' if threshold['op'] == 'min' else '≤'} {float(threshold['value']):g}"
    return str(threshold)


def format_number(value: Any, digits: int = 3) -> str:
    """A score with ``digits`` decimals; ``—`` for None or non-numbers."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "—"
    return f"{value:.{digits}f}"


def format_signed(value: Any, digits: int = 3) -> str:
    """A delta with explicit sign (``+0.012`` / ``−0.030``, typographic minus)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "—"
    text = f"{abs(value):.{digits}f}"
    return ("−" if value < 0 and float(text) != 0 else "+") + text


def format_percent(value: Any) -> str:
    """A fraction in [0, 1] as ``80.0%``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "—"
    return f"{value * 100:.1f}%"


def format_usd(value: Any) -> str:
    """A cost in US dollars: ``$0.0123``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "—"
    return f"${value:.4f}"


def _text(value: Any) -> str:
    return "" if value is None else str(value)
