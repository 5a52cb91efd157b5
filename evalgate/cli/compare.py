"""``evalgate compare BASE HEAD [--format text|json|markdown] [--alpha A] [--fail-on-regression]``: the
baseline comparison of two results files (results.json or SQLite), and how HEAD's gate policy is looser than
BASE's; exit 1 only with ``--fail-on-regression`` and a significant regression of a gated metric or a critical
case flipped to fail (a loosened gate is listed, never an exit status here: ``gate_changes`` decides in a run)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from evalgate.errors import UserError
from evalgate.report.escape import escape_prose


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
    from evalgate.report.console import make_console, render_comparison  # lazy: the report (rich), not for --help
    from evalgate.runner.api import compare  # lazy: the run stack (pydantic, httpx), not for --help

    try:
        result = compare(args.base, args.head, significance_level=args.alpha, repeat_rule=args.repeat_rule,
                         fail_on_regression=args.fail_on_regression)
    except UserError as exc:
        if exc.where == "significance_level":
            raise UserError(str(exc).removeprefix("significance_level: "), where="--alpha") from None
        raise
    from evalgate.report.view import gate_changes_view  # lazy: the report (rich), not for --help

    comparison = result.comparison
    changes = gate_changes_view({"gate": {"loosened": result.loosened}})  # truncated, at most the listed few
    if args.format == "json":
        extra = {} if result.loosened is None else {"gate_loosened": result.loosened}  # both runs recorded policies
        print(json.dumps({**comparison, **extra}, indent=2, ensure_ascii=False))
    elif args.format == "markdown":
        from evalgate.report.markdown import render_comparison as render_markdown  # lazy: jinja2, only for markdown

        sys.stdout.write(render_markdown(comparison))
        if changes:
            more = [f"- +{changes['omitted']} more\n"] if changes["omitted"] else []
            sys.stdout.write("\n**HEAD loosens the gate:**\n\n" + "".join(
                [f"- {escape_prose(item)}\n" for item in changes["items"]] + more))
    else:
        render_comparison(comparison, make_console(sys.stdout))
        for item in (changes or {}).get("items", ()):
            print(f"gate loosened: {item}")
        if changes and changes["omitted"]:
            print(f"gate loosened: +{changes['omitted']} more")
    for reason in result.reasons:
        print(f"evalgate: regression: {reason}", file=sys.stderr)
    return 1 if result.reasons else 0
