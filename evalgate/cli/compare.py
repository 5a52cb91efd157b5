"""``evalgate compare BASE HEAD [--format text|json|markdown] [--alpha A] [--fail-on-regression]``: the
baseline comparison of two results files (results.json or SQLite); exit 1 only with ``--fail-on-regression``
and a significant regression of a gated metric or a critical case flipped to fail."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import Any

from evalgate.errors import UserError


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
    from evalgate.runner.api import compare

    try:
        result = compare(args.base, args.head, significance_level=args.alpha, repeat_rule=args.repeat_rule,
                         fail_on_regression=args.fail_on_regression)
    except UserError as exc:
        if exc.where == "significance_level":
            raise UserError(str(exc).removeprefix("significance_level: "), where="--alpha") from None
        raise
    comparison = result.comparison
    if args.format == "json":
        print(json.dumps(comparison, indent=2, ensure_ascii=False))
    elif args.format == "markdown":
        sys.stdout.write(render_comparison_markdown(comparison))
    else:
        render_comparison(comparison, make_console(sys.stdout))
    for reason in result.reasons:
        print(f"evalgate: regression: {reason}", file=sys.stderr)
    return 1 if result.reasons else 0


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

