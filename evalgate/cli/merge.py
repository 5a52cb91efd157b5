"""``evalgate merge SHARD... --output-dir D``: shard results into one run, gate recomputed (``--comment``
posts the PR comment and job summary when running in GitHub Actions)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalgate.errors import UserError


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
