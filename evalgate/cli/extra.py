"""Verbs beyond run/validate: compare, merge, history, report. Each registers a sub-parser with
``set_defaults(func=...)``; the handler returns the exit status.

* ``evalgate history [--db FILE]`` — runs over time, metric trends, most-failing cases (``--plot``);
* ``evalgate report RESULTS [--format markdown|html] [-o FILE]`` — a standalone report;
* ``evalgate merge SHARD... --output-dir D`` — shard results into one run, gate recomputed
  (``--comment`` posts the PR comment and job summary when running in GitHub Actions);
* ``evalgate compare BASE HEAD [--format text|json|markdown] [--alpha A] [--fail-on-regression]`` — the
  baseline comparison of two results files (results.json or SQLite); exit 1 only with
  ``--fail-on-regression`` and a significant regression of a gated metric or a critical case flipped to fail.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalgate.errors import UserError

DEFAULT_DB = Path("evalgate-results") / "results.db"
HTML_SUFFIXES = (".html", ".htm")


# ---------------------------------------------------------------------------------------------
# history


def add_history(verbs: Any) -> None:
    text = "runs over time, metric trends over the last N days and most-failing cases from a results database"
    parser = verbs.add_parser("history", help=text, description=text[0].upper() + text[1:] + ".")
    parser.add_argument("--db", metavar="FILE", default=str(DEFAULT_DB), help=f"SQLite results file (default {DEFAULT_DB})")
    parser.add_argument("--days", type=float, default=30, metavar="N", help="trend window in days (default 30)")
    parser.add_argument("--until", metavar="DATE", help="end of the window: ISO date or date-time, UTC (default now)")
    parser.add_argument("--limit", type=int, default=10, metavar="N", help="runs and failing cases listed (default 10)")
    parser.add_argument("--format", choices=["text", "json"], default="text", help="json prints the query results")
    parser.add_argument("--plot", metavar="FILE", help="also draw a .png or .svg chart (needs evalgate[plot])")
    parser.add_argument("--metric", action="append", metavar="NAME", help="metric to plot (repeatable)")
    parser.set_defaults(func=cmd_history)


def cmd_history(args: argparse.Namespace) -> int:
    from evalgate.store.history import build_history, parse_until, plot_history, render_text

    history = build_history(Path(args.db), days=args.days, until=parse_until(args.until), limit=args.limit)
    if args.format == "json":
        print(json.dumps(history.as_dict(), indent=2))
    else:
        sys.stdout.write(render_text(history))
    if args.plot:
        written = plot_history(history, Path(args.plot), args.metric or [])
        print(f"Plot: {written}", file=sys.stderr if args.format == "json" else sys.stdout)
    return 0


# ---------------------------------------------------------------------------------------------
# report


def add_report(verbs: Any) -> None:
    text = "render a standalone report (Markdown, or one self-contained HTML file) from results"
    parser = verbs.add_parser("report", help=text, description=text[0].upper() + text[1:] + ".")
    parser.add_argument("results", metavar="RESULTS", help="results.json, or a SQLite results file (FILE#RUN_ID)")
    parser.add_argument("--format", choices=["markdown", "html"],
                        help="default: html when -o ends in .html, otherwise markdown")
    parser.add_argument("--output", "-o", metavar="FILE", help="write here instead of stdout")
    parser.add_argument("--max-cases", type=int, default=5000, metavar="N", help="case details in the HTML (default 5000)")
    parser.set_defaults(func=cmd_report)


def report_format(requested: str | None, output: str | None) -> str:
    """``--format``, else inferred from the output file's suffix (``.html`` → html), else markdown."""
    if requested:
        return requested
    return "html" if output and Path(output).suffix.lower() in HTML_SUFFIXES else "markdown"


def cmd_report(args: argparse.Namespace) -> int:
    from evalgate.runner.merge import load_document

    document = load_document(args.results)
    text = render_report_text(document, report_format(args.format, args.output), max_cases=args.max_cases)
    if args.output:
        _write_text(Path(args.output), text)
        print(f"Report: {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def render_report_text(document: Mapping[str, Any], fmt: str, *, max_cases: int = 5000) -> str:
    if fmt == "html":
        from evalgate.report.html import render_html

        return render_html(document, max_cases=max_cases)
    from evalgate.report.markdown import render_summary

    return render_summary(document, run_url=None, artifact_url=None)


def _write_text(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write ({exc.strerror})", where=str(path)) from None


# ---------------------------------------------------------------------------------------------
# merge


def add_merge(verbs: Any) -> None:
    text = "merge shard results (results.json and/or SQLite files) into one run and recompute the gate"
    parser = verbs.add_parser("merge", help=text, description=text[0].upper() + text[1:] + ".",
                              epilog="Exit status: 0 the merged gate passed, 1 it failed, 2 the inputs disagree.")
    parser.add_argument("shards", nargs="+", metavar="SHARD", help="results.json or SQLite file (FILE#RUN_ID picks a run)")
    parser.add_argument("--output-dir", "-o", default="evalgate-results", metavar="DIR",
                        help="where the merged results.json (and results.db) go (default evalgate-results)")
    parser.add_argument("--db", metavar="FILE", help="SQLite file for the merged run (default OUTPUT_DIR/results.db)")
    parser.add_argument("--allow-partial", action="store_true", help="merge even if some shards i/n are missing "
                        "(the gate then fails: partial results)")
    parser.add_argument("--format", choices=["text", "json"], default="text", help="json prints the merged results.json")
    parser.add_argument("--html", metavar="FILE", help="also write the standalone HTML report here")
    parser.add_argument("--comment", action="store_true",
                        help="in GitHub Actions: post/update the PR comment and write the job summary (needs GITHUB_TOKEN)")
    parser.add_argument("--comment-tag", default="", metavar="TAG", help="keeps distinct comments apart (default: one)")
    parser.add_argument("--pr-number", metavar="N", help="pull request to comment on (default: from the event)")
    parser.set_defaults(func=cmd_merge)


def cmd_merge(args: argparse.Namespace) -> int:
    from evalgate.report.console import make_console, render_report
    from evalgate.runner.merge import merge_runs

    outcome = merge_runs(args.shards, output_dir=Path(args.output_dir), db_path=Path(args.db) if args.db else None,
                         allow_partial=args.allow_partial)
    for warning in outcome.warnings:
        print(f"evalgate: warning: {warning}", file=sys.stderr)
    if args.format == "json":
        sys.stdout.write(outcome.results_path.read_text(encoding="utf-8"))
    else:
        console = make_console(sys.stdout)
        render_report(outcome.document, console)
        console.print(f"Merged {len(args.shards)} input(s) → {outcome.results_path}  ·  SQLite: {outcome.db_path}")
    if args.html:
        _write_html(outcome.results_path, Path(args.html))
    if args.comment:
        for line in publish(outcome.results_path, tag=args.comment_tag, pr_number=args.pr_number, env=os.environ):
            print(line, file=sys.stderr)
    return outcome.verdict.exit_code


def _write_html(results_path: Path, destination: Path) -> None:
    from evalgate.report.html import write_html

    document = json.loads(results_path.read_text(encoding="utf-8"))
    try:
        write_html(document, destination)
    except OSError as exc:
        raise UserError(f"cannot write ({exc.strerror})", where=str(destination)) from None


def publish(results_path: Path, *, tag: str, pr_number: str | None, env: Mapping[str, str]) -> list[str]:
    """Post or update the PR comment and append the job summary for a results file; never raises for
    GitHub failures (they come back as warning lines to print)."""
    from evalgate.github.api import GitHubAPI
    from evalgate.github.commands import warning
    from evalgate.github.comment import upsert_comment
    from evalgate.github.context import ActionContext
    from evalgate.github.outputs import write_summary_report
    from evalgate.report.markdown import SourceLinks, render_comment

    document = json.loads(results_path.read_text(encoding="utf-8"))
    context = ActionContext.from_env(env, pr_number=pr_number)
    links = (SourceLinks(context.server_url, context.repository, context.blob_sha, workspace=context.workspace)
             if context.repository and context.blob_sha else None)
    write_summary_report(context.summary_path, document, run_url=context.run_url, artifact_url=None, tag=tag,
                         source_links=links)
    token = env.get("GITHUB_TOKEN") or env.get("INPUT_GITHUB-TOKEN") or ""
    messages: list[str] = []
    problems: list[str] = []
    if context.pr_number is None:
        problems.append(f"no pull request ({context.pr_reason or 'not a pull_request event'}): PR comment skipped")
    elif not token:
        problems.append("GITHUB_TOKEN is not set: PR comment skipped")
    else:
        body = render_comment(document, run_url=context.run_url, artifact_url=None, tag=tag, source_links=links)
        with GitHubAPI.from_env(env, token) as api:
            result = upsert_comment(api, context.repository or "", context.pr_number, body, tag)
        if result.url:
            messages.append(f"PR comment {result.action}: {result.url}")
        if result.warning:
            problems.append(result.warning)
    return messages + [warning(p) if context.is_actions else f"evalgate: warning: {p}" for p in problems]


# ---------------------------------------------------------------------------------------------
# compare


def add_compare(verbs: Any) -> None:
    text = "compare two runs (results.json or SQLite): metric deltas with confidence intervals, flipped cases"
    parser = verbs.add_parser("compare", help=text, description=text[0].upper() + text[1:] + ".",
                              epilog="Exit status: 0, or 1 with --fail-on-regression when a gated metric "
                                     "regressed significantly or a critical case flipped to fail; 2 unreadable input.")
    parser.add_argument("base", metavar="BASE", help="the baseline run: results.json or a SQLite results file")
    parser.add_argument("head", metavar="HEAD", help="the run to judge: results.json or a SQLite results file")
    parser.add_argument("--format", choices=["text", "json", "markdown"], default="text", help="output format")
    parser.add_argument("--alpha", type=float, metavar="A",
                        help="significance level (default: HEAD's significance_level, else 0.05)")
    parser.add_argument("--repeat-rule", choices=["majority", "all", "any"],
                        help="verdict of a repeated case (default: HEAD's repeat_rule, else majority)")
    parser.add_argument("--fail-on-regression", action="store_true", help="exit 1 on a significant regression")
    parser.set_defaults(func=cmd_compare)


def cmd_compare(args: argparse.Namespace) -> int:
    from evalgate.report.console import make_console, render_comparison
    from evalgate.verdict.compare import DEFAULT_ALPHA, compare_runs, comparison_gate_reasons, load_results

    base, head = load_results(args.base), load_results(args.head)
    config = (head.get("metadata") or {}).get("config") or {}
    alpha = args.alpha if args.alpha is not None else config.get("significance_level", DEFAULT_ALPHA)
    if not isinstance(alpha, int | float) or not 0.0 < alpha < 1.0:
        raise UserError(f"significance level must be between 0 and 1, got {alpha!r}", where="--alpha")
    rule = args.repeat_rule or config.get("repeat_rule") or "majority"
    comparison = compare_runs(base, head, alpha=float(alpha), baseline_source=args.base, repeat_rule=rule)
    if args.format == "json":
        print(json.dumps(comparison, indent=2, ensure_ascii=False))
    elif args.format == "markdown":
        sys.stdout.write(render_comparison_markdown(comparison))
    else:
        render_comparison(comparison, make_console(sys.stdout))
    reasons = comparison_gate_reasons(comparison, args.fail_on_regression)
    for reason in reasons:
        print(f"evalgate: regression: {reason}", file=sys.stderr)
    return 1 if reasons else 0


def render_comparison_markdown(comparison: Mapping[str, Any]) -> str:
    """A comparison block as GitHub Markdown: summary, the vs-base table (bold = significant), the
    McNemar line, regressions (critical first) and fixes. Dataset text is escaped."""
    from evalgate.report.escape import escape_cell, escape_prose, inline_code

    alpha = float(comparison.get("significance_level", 0.05))
    source = (comparison.get("baseline") or {}).get("source") or "baseline"
    lines = [f"### evalgate: compared with {inline_code(source)}", "", escape_prose(str(comparison.get("summary", ""))), ""]
    metrics = comparison.get("metrics") or {}
    if metrics:
        lines += [f"| Metric | Base | Head | Δ | {(1 - alpha) * 100:g}% CI | n | Change |",
                  "|:--|--:|--:|--:|:--|--:|:--|"]
        for name, row in metrics.items():
            lines.append(f"| {inline_code(name, in_table=True)} | {row['base']:.3f} | {row['head']:.3f} | "
                         f"{_delta_cell(row)} | {row['ci_low']:+.3f} … {row['ci_high']:+.3f} | {row['n_paired']} | "
                         f"{escape_cell(_change(row))} |")
        lines.append("")
    rate = comparison.get("pass_rate") or {}
    if rate.get("n_paired"):
        verdict = "significant" if rate.get("significant") else "not significant"
        lines += [f"Pass rate {rate['base']:.1%} → {rate['head']:.1%} over {rate['n_paired']} shared cases · "
                  f"{rate['regressions']} regressed, {rate['fixes']} fixed · exact McNemar p={rate['p_value']:.3g} "
                  f"({verdict} at α={alpha:g})", ""]
    cases = comparison.get("cases") or {}
    for title, flips in (("Regressions", cases.get("regressions") or []), ("Fixes", cases.get("fixes") or [])):
        if flips:
            lines += [f"#### {title} ({len(flips)})", ""]
            lines += [f"- {'‼️ ' if f.get('critical') else ''}{inline_code(f['id'])}"
                      f"{' (critical)' if f.get('critical') else ''}: {f.get('base_status')} → {f.get('head_status')}"
                      f" — {inline_code(f.get('source') or '?')}" for f in flips]
            lines.append("")
    if cases.get("new") or cases.get("removed"):
        lines += [f"{len(cases.get('new') or [])} new and {len(cases.get('removed') or [])} removed case(s).", ""]
    return "\n".join(lines)


def _delta_cell(row: Mapping[str, Any]) -> str:
    """▲/▼ with the signed delta, bold when significant."""
    delta = float(row["delta"])
    arrow = "▲" if delta > 0 else "▼" if delta < 0 else "="
    text = f"{arrow} {delta:+.3f}"
    return f"**{text}**" if row.get("significant") else text


def _change(row: Mapping[str, Any]) -> str:
    if row.get("regression"):
        return "regression"
    if row.get("improvement"):
        return "improvement"
    return "not significant" if row.get("delta") else "no change"


VERBS: list[Any] = [add_history, add_report, add_merge, add_compare]
