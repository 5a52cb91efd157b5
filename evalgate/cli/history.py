"""``evalgate history [--db FILE]``: runs over time, metric trends and most-failing cases (``--plot``)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

DEFAULT_DB = Path("evalgate-results") / "results.db"

def add_history(verbs: Any) -> None:
    text = "runs over time, metric trends over the last N days and most-failing cases from a results database"
    parser = verbs.add_parser("history", help=text, description=text[0].upper() + text[1:] + ".")
    parser.add_argument("--db", metavar="FILE", default=str(DEFAULT_DB), help=f"SQLite results file (default {DEFAULT_DB})")
    parser.add_argument("--days", type=float, default=30, metavar="N", help="trend window in days (default 30)")
    parser.add_argument("--until", metavar="DATE", help="end of the window: ISO date or date-time, UTC (default now)")
    parser.add_argument("--limit", type=int, default=10, metavar="N", help="runs and failing cases listed (default 10)")
    parser.add_argument("--format", choices=["text", "json"], default="text", help="json prints the query results")
    parser.add_argument("--plot", metavar="FILE", help="also draw a .png or .svg chart (needs evalgate-action[plot])")
    parser.add_argument("--metric", action="append", metavar="NAME", help="metric to plot (repeatable)")
    parser.set_defaults(func=cmd_history)


def cmd_history(args: argparse.Namespace) -> int:
    from evalgate.report.history import plot_history, render_text  # lazy: sqlite-utils and the report, not for --help
    from evalgate.store.history import build_history, parse_until  # lazy: sqlite-utils and the report, not for --help

    history = build_history(Path(args.db), days=args.days, until=parse_until(args.until), limit=args.limit)
    if args.format == "json":
        print(json.dumps(history.as_dict(), indent=2))
    else:
        sys.stdout.write(render_text(history))
    if args.plot:
        written = plot_history(history, Path(args.plot), args.metric or [])
        print(f"Plot: {written}", file=sys.stderr if args.format == "json" else sys.stdout)
    return 0
