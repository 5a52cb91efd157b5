"""Markdown report for the PR comment and the job summary, rendered from a results document.

The results document (docs/results.md, plus the optional ``comparison`` block) is
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

import os
import posixpath
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from evalgate.errors import UserError
from evalgate.model import CaseResult
from evalgate.report.console import call_summary
from evalgate.report.digest import beyond
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
from evalgate.report.view import (
    Link,
    adaptive_view,
    baseline_note,
    case_metrics,
    case_records,
    case_ref,
    compact_json,
    comparison_view,
    critical_refs,
    failed_case_view,
    failing_by_importance,
    flaky_view,
    format_number,
    format_p,
    format_percent,
    format_signed,
    format_threshold,
    format_usd,
    gate_changes_view,
    group_row,
    intervals_view,
    is_critical,
    judge_stability_view,
    judge_view,
    metric_groups,
    metric_rows,
    no_link,
    not_scored_view,
    reasons_view,
    repeats_view,
    risk_rank,
    run_view,
    skipped_metrics,
    totals_view,
    transcript_text,
    transcript_view,
    usage_view,
    verdict_view,
)
from evalgate.safety.redact import redact

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"
TEMPLATE_PATH = TEMPLATE_DIR / "comment.md.j2"
COMPARISON_TEMPLATE = "comparison.md.j2"
"""The comparison section: included by the comment template, rendered alone by ``render_comparison``."""
COMMENT_MARKER = "<!-- evalgate:comment tag={tag} -->"
SUMMARY_MAX_BYTES = 1_000_000
MIN_DETAIL_SIZE = 40
"""A lower bound on the size of one rendered case-details block (characters or bytes)."""
METRIC_PROBLEM_STATUSES = ("failed", "errored", "unavailable")
UNCHANGED_ARROW = "＝"
"""The ``vs base`` arrow for a zero delta (``▲``/``▼`` otherwise)."""
__all__ = [  # also re-exported for evalgate.github.annotations
    "SourceLinks", "comment_marker", "format_number", "format_threshold", "is_critical", "render_comment",
    "render_comparison", "render_summary", "repo_relative", "risk_rank", "sanitize_tag", "split_source", "utf8_len",
]

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


FAILED_TOP = 10
"""Failed cases listed in the open (most important first); the next ``list_cap`` go inside ``<details>``."""


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

    def label(self, source: str | None) -> str | None:
        """``source`` as the reader knows it: repository-relative ``path:line`` (else as given)."""
        path, line = split_source(source)
        rel = repo_relative(path, self.workspace, self.base_dir) if path else None
        return source if rel is None else f"{rel}:{line}" if line else rel


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


def render_comparison(comparison: Mapping[str, Any]) -> str:
    """A comparison (``evalgate.verdict.compare.compare_runs``) on its own, as ``evalgate compare --format
    markdown`` prints it: the PR comment's comparison section with a heading naming the baseline and a
    per-metric table (base, head, delta, confidence interval, pairs, change; bold = significant)."""
    view = comparison_view(comparison, no_link, unchanged=UNCHANGED_ARROW)
    if view is None:
        raise UserError("not a comparison (expected a mapping)", where="comparison")
    view |= {"regressions_omitted": 0, "fixes_omitted": 0}  # every flip is listed
    template = _environment().get_template(COMPARISON_TEMPLATE)
    try:
        text = template.render(comparison=view, standalone=True, metrics=[])
    except (jinja2.TemplateError, TypeError, ValueError) as exc:
        raise UserError(f"template error: {exc}", where=COMPARISON_TEMPLATE) from None
    return redact(_finish(text))


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
        loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),  # {% include "comparison.md.j2" %}
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
        pval=format_p,
        signed=format_signed,
        pct=format_percent,
        usd=format_usd,
    )
    return env


def _text(value: Any) -> str:
    return "" if value is None else str(value)


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
    more = int(view.get("failing_beyond") or 0)  # failed cases a digest counted but does not hold (report.digest)
    out["details_omitted"] = len(details) - min(plan.details, len(details)) + more
    out["breakdown"] = view["breakdown"] if plan.breakdown else []
    out["breakdown_omitted"] = bool(view["breakdown"]) and not plan.breakdown
    out["critical"], out["critical_omitted"] = _capped(view["critical"], plan.list_cap)
    out["critical_omitted"] += int(view.get("critical_beyond") or 0)
    failed = view["failed_cases"]
    out["failed_top"] = failed[:FAILED_TOP]
    out["failed_more"], out["failed_omitted"] = _capped(failed[FAILED_TOP:], plan.list_cap)
    out["failed_omitted"] += more
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
# view model (the sections come from evalgate.report.view; what is Markdown-specific stays here:
# source links, excerpt lengths, the category breakdown and the failed-case details)


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
    link: Link = source_links.url if source_links else no_link
    cases = case_records(results)
    comparison = comparison_view(results.get("comparison"), link, unchanged=UNCHANGED_ARROW)
    failing = failing_by_importance(cases)
    metrics = metric_rows(results, unchanged=UNCHANGED_ARROW)
    view = {
        "reasons": reasons_view(results),
        "failed_cases": [failed_case_view(c, link) for c in failing],
        "metric_groups": metric_groups(results, metrics),
        "skipped_metrics": skipped_metrics(results),
        "mode": mode,
        "tag": tag,
        "title": _title(tag),
        "verdict": verdict_view(results),
        "totals": totals_view(results),
        "metrics": metrics,
        "not_scored": not_scored_view(results),
        "judge": judge_view(results),
        "has_comparison": comparison is not None,
        "critical": critical_refs(cases, link),
        "failing_beyond": beyond(results, "failing"),
        "critical_beyond": beyond(results, "critical_failing"),
        "breakdown": _category_breakdown(results),
        "comparison": comparison,
        "details": [_detail_view(c, link, EXCERPTS[mode]) for c in failing],
        "baseline_note": baseline_note(results),
        "gate_changes": gate_changes_view(results),
        "repeats": repeats_view(results),
        "adaptive": adaptive_view(results),
        "flaky": [flaky_view(f, link) for f in results.get("flaky") or [] if isinstance(f, Mapping)],
        "intervals": intervals_view(results),
        "judge_stability": judge_stability_view(results),
        "spend": call_summary(results),
        "usage": usage_view(results),
        "run": _run_view(results),
        "links": {"run_url": run_url, "artifact_url": artifact_url},
    }
    if source_links is not None:
        _relabel(view, source_links)
    return view


def _relabel(view: dict[str, Any], links: SourceLinks) -> None:
    """Linked case sources shown repository-relative (the link carries the commit)."""
    comparison = view.get("comparison") or {}
    for group in (view["failed_cases"], view["critical"], view["details"], view["flaky"],
                  comparison.get("regressions") or [], comparison.get("fixes") or []):
        for ref in group:
            if ref.get("link"):
                ref["source"] = links.label(ref.get("source"))


def _title(tag: str) -> str:
    clean = sanitize_tag(tag) if tag else ""
    return "evalgate" if clean in ("", "default", "evalgate") else f"evalgate · {clean}"


def _category_breakdown(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``category`` groups, lowest pass rate first (ties by name)."""
    groups = ((results.get("breakdowns") or {}).get("category")) or {}
    rows = [(name, g) for name, g in groups.items() if isinstance(g, Mapping)]
    return [group_row(name, g) for name, g in sorted(rows, key=lambda kv: (kv[1].get("pass_rate") or 0.0, kv[0]))]


def _run_view(results: Mapping[str, Any]) -> dict[str, Any]:
    datasets = (results.get("metadata") or {}).get("datasets") or []
    return run_view(results) | {
        "datasets": [{"path": d.get("path"), "cases": d.get("cases")} for d in datasets if isinstance(d, Mapping)]
    }


def _detail_view(case: CaseResult, link: Link, limits: Excerpts) -> dict[str, Any]:
    expected = case.expected
    return {
        **case_ref(case, link),
        "category": case.category,
        "description": case.description,
        "input": truncate(case.input, limits.input) if case.input else None,
        "expected": truncate(compact_json(expected), limits.expected) if expected else None,
        "answer": truncate(case.output, limits.answer) if case.output else None,
        "error": truncate(case.error, limits.error) if case.error else None,
        "failed_metrics": [
            {**row, "reason": truncate(str(row["reason"] or ""), limits.error),
             "explanation": truncate(row["explanation"], limits.error) if row["explanation"] else None}
            for row in case_metrics(case, METRIC_PROBLEM_STATUSES)
        ],
        "num_tokens": case.num_tokens,
        "cost_usd": case.cost_usd,
        "transcript": _transcript(case, limits),
    }


def _transcript(case: CaseResult, limits: Excerpts) -> dict[str, Any] | None:
    """A conversation's transcript for the folded block: its text (each message cut like an answer) and
    the turn count."""
    rows = transcript_view(case, limits.input)
    if not rows:
        return None
    return {"turns": len(rows), "failed_turn": (case.conversation or {}).get("failed_turn"),
            "text": truncate(transcript_text(rows), limits.answer * 2)}
