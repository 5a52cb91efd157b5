"""Console report and progress display. Colours and live progress only on a TTY; plain lines in CI."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import IO, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from evalgate.calls.executor import CALL_COUNTERS
from evalgate.metrics.registry import NO_JUDGE_REASON
from evalgate.report.escape import strip_controls
from evalgate.report.progress import MAX_FAILED_LISTED
from evalgate.report.view import (
    calibration_label,
    format_threshold,
    gate_changes_view,
    is_number,
    judge_view,
    not_scored_view,
    others_line,
    trend_arrow,
)

MAX_FLIPS_LISTED = 20
MAX_FLAKY_LISTED = 20


class _Console(Console):
    """rich's console, except that a reader who stopped reading (``evalgate run | head -1``) raises
    ``BrokenPipeError`` to the caller instead of rich's ``SystemExit(1)``: the exit status is the verdict's,
    never the pipe's."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError(32, "the reader closed the pipe")


def make_console(stream: IO[str] | None = None) -> Console:
    stream = stream or sys.stdout
    tty = hasattr(stream, "isatty") and stream.isatty()
    return _Console(file=stream, force_terminal=tty, no_color=not tty, highlight=False, soft_wrap=True,
                    width=None if tty else 120)


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def metric_mark(row: dict[str, Any]) -> str:
    """✅ / ❌ against the threshold, ⚠ instead of ✅ when the judge left some of its verdicts missing; with no
    value ⚠ (unavailable or errored somewhere) or ⏭ (skipped by design)."""
    if row.get("passed") is True and row.get("judge_unavailable"):
        return "⚠"
    if row.get("passed") is True:
        return "✅"
    if row.get("passed") is False:
        return "❌"
    if row.get("average") is None and (row.get("unavailable") or row.get("errored")):
        return "⚠"
    if row.get("average") is None and row.get("skipped"):
        return "⏭"
    return "·"


def _render_gate_changes(document: dict[str, Any], console: Console) -> None:
    """One line: what the run loosened against its base run's gate policy (``gate.loosened``), or that the base
    run's policy is unknown."""
    view = gate_changes_view(document)
    if view is None:
        return
    if view["items"]:
        approved = f" (approved with the label {view['approved_by']})" if view["approved_by"] else ""
        more = f"; +{view['omitted']} more" if view["omitted"] else ""
        console.print(f"⚠ This run loosens the gate against its base{approved}: {'; '.join(view['items'])}{more}",
                      markup=False)
    if view["note"]:
        console.print(f"ℹ {view['note']}", markup=False)
    if view.get("dataset"):
        console.print(f"ℹ {view['dataset']}", markup=False)


def render_report(document: dict[str, Any], console: Console, *, verbose: bool = False) -> None:
    """Verdict first, then the metric table, breakdown by suite, and failed cases with reasons."""
    gate = document["gate"]
    summary = document["summary"]
    status = document.get("status", "completed")
    title = "✅ PASSED" if gate["passed"] else "❌ FAILED"
    console.print(Text(f"evalgate {title}", style="bold green" if gate["passed"] else "bold red"), end="")
    console.print(("  — NOTHING GATED" if gate.get("no_gate") else "")
                  + f"  (exit {gate['exit_code']}, run {document['run_id']}{'' if status == 'completed' else ', ' + status})")
    if gate.get("no_gate") and gate["passed"]:
        console.print(f"  ⚠ {gate['no_gate']} (no_gate: fail fails such a run)", markup=False)
    for reason in gate["reasons"]:
        console.print(f"  • {reason}", markup=False)
    _render_gate_changes(document, console)
    console.print(
        f"Cases: {summary['total_test_cases']}  passed {summary['total_passed']}  failed {summary['total_failed']}"
        f"  errored {summary['total_errored']}  pass rate {summary['pass_rate']:.1%}"
        f"  weighted {summary['weighted_pass_rate']:.1%}  critical failures {summary['critical_failures']}"
    )
    console.print(_metric_table(document))
    render_judge(document, console)
    render_not_scored(document, console, verbose=verbose)
    render_baseline(document, console)
    render_repeats(document, console)
    suites = document.get("breakdowns", {}).get("suite", {})
    if len(suites) > 1 or verbose:
        console.print(_group_table("Suites", suites))
    if verbose:
        for dimension in ("category", "difficulty", "risk_level", "evolution_type"):
            groups = document.get("breakdowns", {}).get(dimension, {})
            if groups:
                console.print(_group_table(dimension.replace("_", " ").title(), groups))
    tokens = summary.get("tokens", {})
    if tokens.get("total"):
        console.print(f"Tokens: {tokens['total']:,} total, {tokens.get('average') or 0:,.0f} per case"
                      + (f"; cost ${summary['cost_usd']:.4f}" if summary.get("cost_usd") else ""))
    latency = summary.get("latency_ms") or {}
    if latency.get("average") is not None:
        percentiles = "".join(f", {name} {latency[name]:,.0f} ms" for name in ("p50", "p95")
                              if latency.get(name) is not None)
        console.print(f"Latency: average {latency['average']:,.0f} ms{percentiles}")
    for line in spend_lines(call_summary(document)):
        console.print(line, markup=False)


CALL_PROBLEMS = (("retries", "retries"), ("rate_limited_429", "HTTP 429 responses"),
                 ("timeouts", "timed-out attempts"), ("failed", "failed calls"))
"""Counters shown when non-zero, with their labels."""


def call_summary(document: Mapping[str, Any]) -> dict[str, Any]:
    """Judge spend and outbound-call counters of a results document, as plain numbers.

    judge_*: ``summary.judge_calls`` (made, cached, cost in USD) and ``summary.tokens.judge_*``;
    calls/attempts/retries/rate_limited_429/failed/timeouts: the ``metadata.calls`` totals (a merged
    run sums its shards'); ``cost_usd``: the run's total spend (USD); ``max_cost_usd`` and
    ``budget_exceeded`` from ``metadata.cost``. Missing counters are 0.
    """
    summary = document.get("summary") or {}
    metadata = document.get("metadata") or {}
    judge = summary.get("judge_calls") or {}
    tokens = summary.get("tokens") or {}
    cost = metadata.get("cost") or {}
    return {
        "judge_made": _count(judge.get("made")),
        "judge_cached": _count(judge.get("cached")),
        "judge_cost_usd": _amount(judge.get("cost_usd")),
        "judge_prompt": _count(tokens.get("judge_prompt")),
        "judge_completion": _count(tokens.get("judge_completion")),
        "judge_prompt_cached": _count(tokens.get("judge_prompt_cached")),
        "judge_prompt_cache_saved_usd": _amount(judge.get("prompt_cache_saved_usd")),
        "judge_batch": _count(judge.get("batch")),
        "judge_batch_saved_usd": _amount(judge.get("batch_saved_usd")),
        "cost_usd": _amount(summary.get("cost_usd")),
        "max_cost_usd": cost.get("max_cost_usd") if is_number(cost.get("max_cost_usd")) else None,
        "budget_exceeded": bool(cost.get("budget_exceeded")),
        "judge_reuse": reuse_line(judge.get("base_cache")),
        **_call_counters(metadata),
    }


def reuse_line(base: Any) -> str | None:
    """``842 of 1,000 verdicts reused from main @ abc1234, $1.91 saved`` from ``summary.judge_calls.base_cache``
    (``runner.reuse``); None when no base cache was restored."""
    if not isinstance(base, Mapping):
        return None
    reused, verdicts = _count(base.get("reused")), _count(base.get("verdicts"))
    source = str(base.get("source") or "the base run")
    line = f"{reused:,} of {verdicts:,} verdicts reused from {source}"
    saved = base.get("saved_usd")
    tokens = _count(base.get("prompt_tokens_saved")) + _count(base.get("completion_tokens_saved"))
    if reused and is_number(saved):
        return line + f", ${_amount(saved):,.2f} saved"
    if reused:
        return line + f", {tokens:,} tokens not spent"
    if base.get("error"):
        return line + f" (its cache could not be read: {base['error']})"
    return line + f" (none of its {_count(base.get('base_rows')):,} verdicts matched: every judged prompt, " \
        "judge model or template changed)"


def _call_counters(metadata: Mapping[str, Any]) -> dict[str, int]:
    calls = metadata.get("calls")
    calls = calls if isinstance(calls, Mapping) else {}
    return {key: _count(calls.get(key)) for key in CALL_COUNTERS}


def _count(value: Any) -> int:
    return int(value) if is_number(value) else 0


def _amount(value: Any) -> float:
    return float(value) if is_number(value) else 0.0


def saving_note(spend: Mapping[str, Any]) -> str:
    """`` (12,800 prompt tokens from the provider's prompt cache, $0.0010 saved; 900 calls batched, $0.0400
    saved)`` when either applies, else empty."""
    parts = []
    if spend.get("judge_prompt_cached"):
        parts.append(f"{spend['judge_prompt_cached']:,} prompt tokens from the provider's prompt cache, "
                     f"${spend.get('judge_prompt_cache_saved_usd', 0.0):.4f} saved")
    if spend.get("judge_batch"):
        parts.append(f"{spend['judge_batch']:,} call(s) batched, ${spend.get('judge_batch_saved_usd', 0.0):.4f} saved")
    return f" ({'; '.join(parts)})" if parts else ""


def spend_lines(spend: Mapping[str, Any]) -> list[str]:
    """Console lines for judge spend and call retries; only the non-zero parts are printed."""
    lines = []
    if spend["judge_made"] or spend["judge_cached"]:
        lines.append(f"Judge: {spend['judge_made']:,} call(s), {spend['judge_cached']:,} cached; "
                     f"{spend['judge_prompt']:,} prompt + {spend['judge_completion']:,} completion tokens; "
                     f"cost ${spend['judge_cost_usd']:.4f}" + saving_note(spend))
    if spend.get("judge_reuse"):
        lines.append(f"Judge cache: {spend['judge_reuse']}")
    problems = [f"{spend[key]:,} {label}" for key, label in CALL_PROBLEMS if spend[key]]
    if problems:
        lines.append(f"Calls: {spend['calls']:,} API call(s), " + ", ".join(problems))
    return lines


def _metric_table(document: dict[str, Any]) -> Table:
    table = Table(title="Metrics", title_justify="left", show_edge=False, pad_edge=False)
    rows = document["metrics"]
    width = max((len(str(name)) for name in rows), default=6)
    errored = any(row.get("errored") for row in rows.values())
    for column in ("metric", "average", "threshold", "", "cases", "skipped", "unavailable", *(("errored",) if errored else ())):
        table.add_column(column, justify="left" if column in ("metric", "") else "right",
                         min_width=min(width, 28) if column == "metric" else None)
    summaries = any(row.get("summary") for row in rows.values())
    if summaries:
        table.add_column("checks", justify="left", overflow="ellipsis", no_wrap=True, max_width=48)
    for name, row in rows.items():
        threshold = row.get("threshold")
        bound = format_threshold(threshold) if threshold else "—"
        calibration = row.get("calibration") or {}
        if calibration.get("gating") is False and calibration.get("threshold"):
            bound = f"{format_threshold(calibration['threshold'])} (not gating)"
        unavailable = int(row.get("unavailable") or 0)
        fallback = max(0, int(row.get("judge_unavailable") or 0) - unavailable - int(row.get("errored") or 0))
        cells = [name, _fmt(row.get("average")), bound, metric_mark(row), str(row.get("count", 0)),
                 str(row.get("skipped") or ""),
                 (str(unavailable) if unavailable else "") + (f" +{fallback} heuristic" if fallback else "")]
        if errored:
            cells.append(str(row.get("errored") or ""))
        table.add_row(*cells, *([Text(str(row.get("summary") or ""))] if summaries else []))
    return table


def render_judge(document: dict[str, Any], console: Console) -> None:
    """Each judged metric's calibration (κ, n, date), the gate's notes on uncalibrated judges, and judge health
    (verdicts unusable by cause)."""
    labels = [(name, calibration_label(info)) for name, info in document.get("metrics", {}).items()]
    shown = [f"{name} {label}" for name, label in labels if label and label != "not calibrated"]
    if shown:
        console.print("Judge calibration: " + "; ".join(shown), markup=False)
    view = judge_view(document)
    if view is None:
        return
    for note in view["notes"]:
        console.print(f"  ℹ {note}", markup=False)
    total, pair_total = view["total"], view["pairwise_health"]
    if total or pair_total:
        line = (f"Judge health: {total.get('verdicts', 0)} verdict(s), {total.get('unusable', 0)} unusable"
                if total else "Judge health:")
        if pair_total:
            line += (f"{';' if total else ''} pairwise {pair_total.get('replies', 0)} repl(ies), "
                     f"{pair_total.get('unusable', 0)} unusable")
        console.print(line, markup=False)
    for row in view["health"]:
        if row["unusable"]:
            of = f"{row['verdicts']} replies" if row["what"] == "replies" else f"{row['verdicts']}"
            console.print(f"  ⚠ {row['name']}: {row['unusable']} of {of} unusable ({row['causes']})", markup=False)
            for example in row["examples"]:
                console.print(f"      e.g. {strip_controls(example['case'])[:40]} ({example['cause']}): "
                              f"{_one_line(example['text'])}", markup=False)
    if view["pairwise"]:
        console.print(f"Pairwise vs base ({view['pairwise_cases']} changed answer(s), both orders): "
                      + "; ".join(view["pairwise"]), markup=False)


def _one_line(text: str) -> str:
    """Untrusted reply text for one console line: controls dropped, line breaks shown as ⏎, quoted."""
    return repr(strip_controls(text).replace("\r\n", "⏎").replace("\n", "⏎"))


def render_not_scored(document: dict[str, Any], console: Console, *, verbose: bool = False) -> None:
    """Unavailable verdicts (should have been scored), then skipped ones (by design), each with its count and
    first reason; skipped metrics get one line each with ``--verbose``, a one-line summary otherwise."""
    view = not_scored_view(document)
    judge = view["judge"]
    if judge:
        of = f" of {judge['verdicts']}" if judge.get("verdicts") else ""
        console.print(f"⚠ Judge verdicts unavailable: {judge['missing']}{of} (first: {judge['first']})", markup=False)
    for row in view["unavailable"]:
        parts = []
        if row["count"]:
            parts.append(f"unavailable in {row['count']} case(s)")
        if row["heuristic"]:
            total = f" of {row['judge_verdicts']}" if row.get("judge_verdicts") else ""
            parts.append(f"no judge verdict in {row['heuristic']}{total} case(s), scored by the heuristic instead")
        console.print(f"  ⚠ {row['name']}: {', '.join(parts)} — first: {row['reason'] or 'no reason recorded'}",
                      markup=False)
    skipped = view["skipped"]
    if skipped and verbose:
        console.print("Skipped by design:")
        for row in skipped:
            console.print(f"  ⏭ {row['name']}: skipped in {row['count']} case(s) — {row['reason'] or 'no reason'}",
                          markup=False)
    elif skipped:
        listed = ", ".join(f"{row['name']} ({row['count']})" for row in skipped)
        console.print(f"Skipped by design: {listed} — first: {skipped[0]['reason'] or 'no reason'}", markup=False)


def render_baseline(document: dict[str, Any], console: Console) -> None:
    """The comparison with the baseline, or one line saying there is none and why."""
    baseline = document.get("baseline")
    comparison = document.get("comparison")
    if comparison:
        render_comparison(comparison, console)
    elif isinstance(baseline, dict):
        warning = str(baseline.get("warning") or "none found")
        console.print("No baseline: " + warning.removeprefix("no baseline: "), markup=False)


def render_comparison(comparison: dict[str, Any], console: Console, *, limit: int = MAX_FLIPS_LISTED) -> None:
    """What matters first: new failures (critical first) with their count and test, the critical cases'
    test, then the significant metric changes with effect, interval and adjusted p, then one line on every
    other metric; fixes and new/removed cases last."""
    alpha = comparison.get("significance_level", 0.05)
    source = (comparison.get("baseline") or {}).get("source") or "baseline"
    family = comparison.get("family") or {}
    console.print(f"Compared with {source}", markup=False)
    console.print(f"  {comparison.get('summary', '')}", markup=False)
    if family.get("size"):
        console.print(f"  One decision: {family['size']} test(s), {family.get('procedure', 'Holm–Bonferroni')} at "
                      f"family-wise α={alpha:g}", markup=False)
    cases = comparison.get("cases") or {}
    flips = cases.get("regressions") or []
    rate = comparison.get("pass_rate") or {}
    if rate.get("n_paired"):
        verdict = "a significant regression" if rate.get("regression") else "not significant"
        adjusted = f", adjusted p={rate['p_adjusted']:.3g}" if rate.get("p_adjusted") is not None else ""
        flagged = sum(1 for flip in flips if flip.get("critical"))
        console.print(f"New failures ({len(flips)}{f', {flagged} critical' if flagged else ''}): pass rate "
                      f"{rate.get('base') or 0:.1%} → {rate.get('head') or 0:.1%} over {rate['n_paired']} shared cases, "
                      f"{rate.get('regressions', 0)} regressed, {rate.get('fixes', 0)} fixed; "
                      f"{rate.get('test', 'exact McNemar')} p={rate.get('p_value', 1.0):.3g}{adjusted} ({verdict} at "
                      f"α={alpha:g})", markup=False)
    for flip in flips[:limit]:
        critical = " critical" if flip.get("critical") else ""
        console.print(f"  ▼ {flip['id']}{critical}: {flip.get('base_status')} → {flip.get('head_status')}"
                      f"{_runs(flip)} ({flip.get('source')})", markup=False)
    if len(flips) > limit:
        console.print(f"  … and {len(flips) - limit} more")
    _render_critical(comparison.get("critical"), console, alpha)
    metrics = comparison.get("metrics") or {}
    moved = {name: row for name, row in metrics.items() if row.get("significant")}
    if moved:
        console.print(_comparison_table(moved, alpha))
    others = others_line([{"name": name, "change": row.get("verdict"), **row}
                          for name, row in metrics.items() if not row.get("significant")])
    if others:
        console.print(f"Other metrics — {others}", markup=False)
    fixes = cases.get("fixes") or []
    if fixes:
        console.print(f"Fixes ({len(fixes)}):")
    for flip in fixes[:limit]:
        console.print(f"  ▲ {flip['id']}: {flip.get('base_status')} → {flip.get('head_status')} ({flip.get('source')})",
                      markup=False)
    if len(fixes) > limit:
        console.print(f"  … and {len(fixes) - limit} more")
    if cases.get("new") or cases.get("removed"):
        console.print(f"{len(cases.get('new') or [])} new and {len(cases.get('removed') or [])} removed case(s)")


def _runs(flip: dict[str, Any]) -> str:
    """`` [5/5 → 0/5 passing runs]`` for a case run more than once, else nothing."""
    if (flip.get("base_runs") or 1) <= 1 and (flip.get("head_runs") or 1) <= 1:
        return ""
    return (f" [{flip.get('base_passes')}/{flip.get('base_runs')} → {flip.get('head_passes')}/{flip.get('head_runs')}"
            " passing runs]")


def _render_critical(critical: Any, console: Console, alpha: float) -> None:
    if not isinstance(critical, dict) or not (critical.get("regressions") or critical.get("flaky_on_base")):
        return
    verdict = "a regression" if critical.get("regression") else "not significant"
    adjusted = f", adjusted p={critical['p_adjusted']:.3g}" if critical.get("p_adjusted") is not None else ""
    console.print(f"Critical cases: {len(critical.get('regressions') or [])} passed every base run and now fail, "
                  f"{len(critical.get('flaky_on_base') or [])} flaky on the base; {critical.get('test')} "
                  f"p={critical.get('p_value', 1.0):.3g}{adjusted} ({verdict} at α={alpha:g})", markup=False)
    for flip in critical.get("flaky_on_base") or []:
        console.print(f"  ~ {flip['id']} flaky on the base{_runs(flip)} ({flip.get('source')})", markup=False)
    if critical.get("note"):
        console.print(f"  {critical['note']}", markup=False)


def _comparison_table(metrics: dict[str, Any], alpha: float) -> Table:
    table = Table(title="Significant metric changes vs base", title_justify="left", show_edge=False, pad_edge=False)
    for column in ("metric", "base", "head", "Δ", f"{(1 - alpha) * 100:g}% CI", "p (adjusted)", "n", "change"):
        table.add_column(column, justify="left" if column in ("metric", "change") else "right")
    for name, row in metrics.items():
        change = str(row.get("verdict") or ("regression" if row.get("regression") else "improvement"))
        if not row.get("gated", True):
            change += " (ungated)"
        arrow = trend_arrow(row.get("delta", 0), unchanged="")
        adjusted = row.get("p_improvement_adjusted") if row.get("improvement") else row.get("p_adjusted")
        table.add_row(name, _fmt(row.get("base")), _fmt(row.get("head")), f"{arrow}{row.get('delta', 0):+.3f}",
                      f"{row.get('ci_low', 0):+.3f} … {row.get('ci_high', 0):+.3f} {row.get('ci_method') or ''}".rstrip(),
                      "n/a" if adjusted is None else f"{adjusted:.3g}", str(row.get("n_paired", 0)), change)
    return table


def render_repeats(document: dict[str, Any], console: Console, *, limit: int = MAX_FLAKY_LISTED) -> None:
    """Repeats: the rule, suite averages with their confidence intervals, flaky cases; judge stability."""
    summary = document.get("summary") or {}
    repeats = summary.get("repeats")
    if repeats:
        console.print(f"Repeats: {repeats['repeat']} per case ({repeats['rule']} rule), {repeats['flaky_cases']} "
                      f"flaky case(s) of {repeats['cases']}")
        intervals = summary.get("confidence_intervals") or {}
        if intervals:
            console.print(_interval_table(intervals))
    flaky = document.get("flaky") or []
    if flaky:
        console.print(f"Flaky cases ({len(flaky)}{'+' if repeats and repeats['flaky_cases'] > len(flaky) else ''}):")
        for case in flaky[:limit]:
            marker = "‼" if case.get("risk_level") == "critical" else "~"
            console.print(f"  {marker} {case['id']} passed {case['passes']}/{case['repeats']} "
                          f"[{' '.join(case.get('outcomes') or [])}] → {case.get('status')} ({case.get('source')})",
                          markup=False)
    for name, row in (summary.get("judge_stability") or {}).items():
        console.print(f"Judge stability {name}: {row['samples']} samples per answer, mean sd {_fmt(row['mean_stdev'])}, "
                      f"max sd {_fmt(row['max_stdev'])}, {row['straddling_threshold']} of {row['answers']} answers "
                      "with samples on both sides of the threshold", markup=False)


def _interval_table(intervals: dict[str, Any]) -> Table:
    level = f"{intervals.get('confidence', 0.95) * 100:g}%"
    table = Table(title=f"Suite averages ({level} CI over cases)", title_justify="left", show_edge=False,
                  pad_edge=False)
    for column in ("", "mean", f"{level} CI", "method", "cases", "sd within case"):
        table.add_column(column, justify="left" if column == "" else "right")
    rows = [("pass rate", intervals.get("pass_rate")), *(intervals.get("metrics") or {}).items()]
    for name, row in rows:
        if row:
            table.add_row(name, _fmt(row["mean"]), f"{_fmt(row['low'])} … {_fmt(row['high'])}",
                          str(row.get("method") or "bootstrap"), str(row["cases"]), _fmt(row.get("within_case_stdev")))
    return table


def _group_table(title: str, groups: dict[str, Any]) -> Table:
    table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    for column in ("group", "cases", "passed", "failed", "errored", "pass rate"):
        table.add_column(column, justify="left" if column == "group" else "right")
    for key, group in groups.items():
        table.add_row(key, str(group["total"]), str(group["passed"]), str(group["failed"]), str(group["errored"]),
                      _fmt(group["pass_rate"]))
    return table


def judge_hint(document: Mapping[str, Any]) -> str | None:
    """How to turn the judge on, when judged metrics were skipped because none is configured."""
    skipped = sum(int((row.get("reasons") or {}).get(NO_JUDGE_REASON, 0))
                  for row in (document.get("metrics") or {}).values())
    if not skipped:
        return None
    return (f"{skipped} judged metric result(s) skipped: no judge is configured. Turn it on with judge_provider "
            "(openai, gemini, ollama or local) and its API key, e.g. judge_provider: openai in evalgate.yaml and "
            "OPENAI_API_KEY in the environment (docs/judges.md).")



WHY_LINES = 6
"""Reasons printed per failed case; the rest are counted on one more line."""


def render_failures(failures: list[dict[str, Any]], console: Console) -> None:
    """Failed and errored cases, critical first, each with its location and reasons."""
    if not failures:
        return
    console.print(f"Failed cases ({len(failures)}{'+' if len(failures) >= MAX_FAILED_LISTED else ''}):")
    ordered = sorted(failures, key=lambda f: (f["risk_level"] != "critical", f["index"]))
    for failure in ordered[:MAX_FAILED_LISTED]:
        marker = "‼" if failure["risk_level"] == "critical" else "✗"
        console.print(f"  {marker} {failure['id']} [{failure['status']}] {failure['source']}", markup=False)
        lines = failure.get("why") or failure["reasons"]  # the same one-line reasons as the PR comment
        for line in lines[:WHY_LINES]:
            console.print(f"      - {line}", markup=False)
        if len(lines) > WHY_LINES:  # never cut silently
            console.print(f"      - +{len(lines) - WHY_LINES} more (results.json has every reason)", markup=False)
