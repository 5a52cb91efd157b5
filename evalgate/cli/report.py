"""``evalgate report RESULTS [--format markdown|html] [-o FILE]``: a standalone report."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalgate.errors import UserError

HTML_SUFFIXES = (".html", ".htm")

def add_report(verbs: Any) -> None:
    text = "render a standalone report (Markdown, or one self-contained HTML file) from results"
    parser = verbs.add_parser("report", help=text, description=text[0].upper() + text[1:] + ".")
    parser.add_argument("results", metavar="RESULTS", help="results.json, or a SQLite results file (FILE#RUN_ID)")
    parser.add_argument("--format", choices=["markdown", "html"],
                        help="default: html when -o ends in .html, otherwise markdown")
    parser.add_argument("--output", "-o", metavar="FILE",
                        help="write here instead of stdout (HTML to a terminal goes to report.html beside RESULTS)")
    parser.add_argument("--max-cases", type=int, default=5000, metavar="N", help="case details in the HTML (default 5000)")
    parser.set_defaults(func=cmd_report)


def report_format(requested: str | None, output: str | None) -> str:
    """``--format``, else inferred from the output file's suffix (``.html`` → html), else markdown."""
    if requested:
        return requested
    return "html" if output and Path(output).suffix.lower() in HTML_SUFFIXES else "markdown"


def cmd_report(args: argparse.Namespace) -> int:
    from evalgate.report.digest import load_digest  # lazy: the report (rich), not for --help

    fmt = report_format(args.format, args.output)  # every case streamed, the shown ones kept (report.digest)
    document = load_digest(args.results, keep_cases=args.max_cases if fmt == "html" else 0)
    if fmt == "html" and not args.output and sys.stdout.isatty():
        # 600 lines of HTML in a terminal help nobody: write the file beside the results, say where
        args.output = str(Path(str(args.results).partition("#")[0]).resolve().parent / "report.html")
    text = render_report_text(document, fmt, max_cases=args.max_cases)
    if args.output:
        _write_text(Path(args.output), text)
        print(f"Report: {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def render_report_text(document: Mapping[str, Any], fmt: str, *, max_cases: int = 5000) -> str:
    if fmt == "html":
        from evalgate.report.html import render_html  # lazy: jinja2, only for --format html

        return render_html(document, max_cases=max_cases)
    from evalgate.report.markdown import render_summary  # lazy: jinja2, only for markdown

    return render_summary(document, run_url=None, artifact_url=None)


def copy_to_stdout(path: Path, chunk: int = 1 << 20) -> None:
    """``path``'s text written to stdout ``chunk`` characters at a time (a results.json of any size)."""
    with open(path, encoding="utf-8") as handle:
        while text := handle.read(chunk):
            sys.stdout.write(text)


def _write_text(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write ({exc.strerror})", where=str(path)) from None
