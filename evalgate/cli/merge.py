"""``evalgate merge SHARD... --output-dir D``: shard results into one run, gate recomputed (``--comment``
posts the PR comment and job summary when running in GitHub Actions)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalgate.cli.report import copy_to_stdout
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
    parser.add_argument("--baseline", metavar="FILE", help="compare the merged run with this results.json or SQLite "
                        "file, as an unsharded run would be (default: no comparison)")
    parser.add_argument("--fail-on-regression", action="store_true",
                        help="with --baseline: a significant regression or a critical case that newly fails fails the gate")
    parser.add_argument("--html", metavar="FILE", help="also write the standalone HTML report here")
    parser.add_argument("--comment", action="store_true",
                        help="in GitHub Actions: post/update the PR comment and write the job summary (needs GITHUB_TOKEN)")
    parser.add_argument("--comment-tag", default="", metavar="TAG", help="keeps distinct comments apart (default: one)")
    parser.add_argument("--pr-number", metavar="N", help="pull request to comment on (default: from the event)")
    parser.set_defaults(func=cmd_merge)


def cmd_merge(args: argparse.Namespace) -> int:
    from evalgate.report.console import make_console, render_report  # lazy: the report (rich), not for --help
    from evalgate.runner.merge import merge_runs  # lazy: the run stack (pydantic, httpx), not for --help

    baseline, settings = None, None
    if args.baseline:
        from evalgate.config.settings import Settings  # lazy: the run stack (pydantic, httpx), not for --help
        from evalgate.store.reader import resolve_baseline  # lazy: the run stack (pydantic, httpx), not for --help

        settings = Settings(baseline=args.baseline, fail_on_regression=args.fail_on_regression)
        baseline = resolve_baseline(args.baseline, cwd=Path.cwd())
    elif args.fail_on_regression:
        raise UserError("needs --baseline FILE to compare with", where="--fail-on-regression")
    outcome = merge_runs(args.shards, output_dir=Path(args.output_dir), db_path=Path(args.db) if args.db else None,
                         allow_partial=args.allow_partial, baseline=baseline, settings=settings)
    for warning in outcome.warnings:
        print(f"evalgate: warning: {warning}", file=sys.stderr)
    if args.format == "json":
        copy_to_stdout(outcome.results_path)
    else:
        console = make_console(sys.stdout)
        render_report(outcome.document, console)
        console.print(f"Merged {len(args.shards)} input(s) → {outcome.results_path}  ·  SQLite: {outcome.db_path}")
    if args.html:
        _write_html(outcome.results_path, Path(args.html))
    if args.comment:
        comment_on_pr(outcome.results_path, outcome.db_path, tag=args.comment_tag, pr_number=args.pr_number,
                      env=os.environ)
    return outcome.verdict.exit_code


def _write_html(results_path: Path, destination: Path) -> None:
    from evalgate.report.digest import load_digest  # lazy: the HTML report (jinja2), only with --html
    from evalgate.report.html import MAX_CASES, write_html  # lazy: the HTML report (jinja2), only with --html

    document = load_digest(results_path, keep_cases=MAX_CASES)  # streamed, as `evalgate report` reads it
    try:
        write_html(document, destination)
    except OSError as exc:
        raise UserError(f"cannot write ({exc.strerror})", where=str(destination)) from None


def comment_on_pr(results_path: Path, db_path: Path, *, tag: str, pr_number: str | None,
                  env: Mapping[str, str]) -> None:
    """The job summary and the PR comment for a merged run, through the Action's publishing steps
    (``evalgate.github.publish``); problems are warnings on stderr, never a change of exit status."""
    from evalgate.github.commands import warning  # lazy: the GitHub client, not for --help
    from evalgate.github.context import ActionContext  # lazy: the GitHub client, not for --help
    from evalgate.github.publish import DEFAULT_TAG, PublishOptions, publish  # lazy: the GitHub client, not for --help

    context = ActionContext.from_env(env, pr_number=pr_number)
    token = env.get("GITHUB_TOKEN") or env.get("INPUT_GITHUB-TOKEN") or None
    options = PublishOptions(comment="always", comment_tag=tag or DEFAULT_TAG, github_token=token,
                             upload_artifacts=False)
    publish(results_path, db_path, ctx=context, options=options, env=env, steps=("summary", "comment"),
            emit=lambda line: print(line, file=sys.stderr), require_comment=True,
            warning_line=lambda message: warning(message) if context.is_actions else f"evalgate: warning: {message}")
