"""The ``evalgate`` command line. Each verb is a thin wrapper over a library function.

Exit status: 0 the gate passed, 1 the gate failed, 2 configuration or dataset error (one line on
stderr, no traceback). Heavy modules are imported inside the verbs so ``--version`` starts fast.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from evalgate import __version__
from evalgate.errors import EXIT_USER_ERROR, UserError

BOOL = argparse.BooleanOptionalAction


def _add_selection(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("dataset and selection")
    group.add_argument("--dataset", "-d", action="append", metavar="PATH",
                       help="dataset file, directory or glob (repeatable; default: the bundled demo suites)")
    group.add_argument("--fixtures", action="append", metavar="PATH", dest="fixtures",
                       help="alias of --dataset (seed 001's 'eval --fixtures')")
    group.add_argument("--config", "-c", metavar="FILE", help="evalgate.yaml (default: ./evalgate.yaml if present)")
    group.add_argument("--case-ids", metavar="IDS", help="comma-separated case ids (overrides --first-n)")
    group.add_argument("--first-n", type=int, metavar="N", help="run only the first N cases in dataset order")
    group.add_argument("--category", metavar="NAMES", help="comma-separated categories to keep")
    group.add_argument("--tags", metavar="TAGS", help="comma-separated tags to keep (any)")
    group.add_argument("--shard", metavar="I/N", help="run the stable shard I of N (by case-id hash)")


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    gate = parser.add_argument_group("gate")
    gate.add_argument("--metric-thresholds", metavar="JSON", help='e.g. \'{"mention_f1": 0.9, "num_tokens": {"max": 4000}}\'')
    gate.add_argument("--strict-metrics", action=BOOL, default=None, help="a skipped or unavailable metric fails")
    gate.add_argument("--fail-on-critical", action=BOOL, default=None, help="any failed critical case fails the run (default on)")
    gate.add_argument("--min-pass-rate", type=float, metavar="RATE", help="minimum fraction of cases that pass (0–1)")
    gate.add_argument("--max-errored", type=int, metavar="N", help="errored cases tolerated before the gate fails (default 0)")
    gate.add_argument("--baseline", metavar="PATH|auto|none", help="previous results.json or SQLite file to compare with")
    gate.add_argument("--fail-on-regression", action=BOOL, default=None, help="fail on a significant regression vs baseline")
    gate.add_argument("--significance-level", type=float, metavar="ALPHA", help="significance level (default 0.05)")
    out = parser.add_argument_group("output")
    out.add_argument("--output-dir", "-o", metavar="DIR", help="where results.json and results.db go (default evalgate-results)")
    out.add_argument("--db", metavar="FILE", help="SQLite file (default OUTPUT_DIR/results.db); runs are appended")
    out.add_argument("--format", choices=["text", "json"], help="json prints results.json to stdout")
    out.add_argument("--verbose", "-v", action="store_true", default=None, help="breakdowns and more detail")
    out.add_argument("--progress", choices=["auto", "rich", "plain", "none"], help="progress display (default auto)")
    target = parser.add_argument_group("target and judge")
    target.add_argument("--target", choices=["recorded", "http", "openai", "command"], help="how answers are obtained")
    target.add_argument("--target-url", metavar="URL", help="HTTP target endpoint")
    target.add_argument("--outputs-file", metavar="FILE", help="recorded answers keyed by case id (JSON/JSONL)")
    target.add_argument("--target-command", metavar="CMD", help="command target: JSON list or comma-separated argv")
    target.add_argument("--target-model", metavar="MODEL", help="model for the openai target")
    target.add_argument("--target-provider", choices=["openai", "gemini", "ollama", "local"],
                        help="provider of the openai target (default: the judge's, else openai)")
    target.add_argument("--judge-provider", choices=["none", "openai", "gemini", "ollama", "local"])
    target.add_argument("--judge-model", metavar="MODEL")
    target.add_argument("--judge-base-url", metavar="URL")
    target.add_argument("--judge-samples", type=int, metavar="K", help="judge calls averaged per judged metric")
    target.add_argument("--chat-client", choices=["direct", "openai-sdk"],
                        help="how judge and model calls are made: direct JSON (default) or the openai SDK")
    target.add_argument("--no-cache", action="store_true", default=None, help="bypass the judge cache")
    target.add_argument("--max-cost", type=float, metavar="USD", help="abort cleanly before exceeding this spend")
    ex = parser.add_argument_group("execution")
    ex.add_argument("--concurrency", type=int, metavar="N", help="calls in flight at once (default 8)")
    ex.add_argument("--api-retries", type=int, metavar="N", help="retries per call (default 3)")
    ex.add_argument("--api-timeout-seconds", type=float, metavar="S", help="timeout per call (default 60)")
    ex.add_argument("--repeat", type=int, metavar="N", help="run each case N times (flakiness)")
    ex.add_argument("--repeat-rule", choices=["majority", "all", "any"],
                    help="case verdict over its repeats (default majority: passes > N/2)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="evalgate",
        description="Gate pull requests on the quality of LLM and agent systems.",
        epilog="Exit status: 0 passed, 1 gate failed, 2 configuration or dataset error.",
    )
    parser.add_argument("--version", action="version", version=f"evalgate {__version__}")
    verbs = parser.add_subparsers(dest="verb", metavar="COMMAND")
    for name, help_text in (("run", "evaluate the datasets and apply the gate"),
                            ("eval", "alias of run (seed 001: eval --fixtures F --db D --format json)")):
        verb = verbs.add_parser(name, help=help_text, description=help_text)
        _add_selection(verb)
        _add_run_options(verb)
    validate = verbs.add_parser("validate", help="check datasets and config without calling anything (dry run)",
                                description="Validate datasets and configuration; no network call is made.")
    _add_selection(validate)
    validate.add_argument("--format", choices=["text", "json"], help="json prints the summary as JSON")
    validate.add_argument("--metric-thresholds", metavar="JSON")
    for extra in _extra_verbs():
        extra(verbs)
    return parser


def _extra_verbs() -> list[Any]:
    """The verbs defined in their own modules (compare, merge, history, report)."""
    from evalgate.cli import compare, history, merge, report

    return [history.add_history, report.add_report, merge.add_merge, compare.add_compare]


def _cli_values(args: argparse.Namespace) -> dict[str, Any]:
    values = {k: v for k, v in vars(args).items() if v is not None and k not in {"verb", "fixtures", "func"}}
    datasets = (args.dataset or []) + (getattr(args, "fixtures", None) or [])
    values.pop("dataset", None)
    if datasets:
        values["dataset"] = datasets
    return values


def cmd_run(args: argparse.Namespace) -> int:
    import asyncio

    from evalgate.config.settings import build_settings
    from evalgate.report.progress import make_progress
    from evalgate.runner.run import execute

    settings, suite_config, _ = build_settings(cli=_cli_values(args))
    json_mode = settings.format == "json"

    def progress_for(total: int) -> Any:
        return make_progress(settings.progress, total, quiet=json_mode and settings.progress == "auto")

    loader = None
    if settings.baseline_kind == "auto":
        from evalgate.github.baseline import loader_from_env

        loader = loader_from_env(os.environ)
    outcome = asyncio.run(execute(settings, suite_config, progress_for=progress_for, baseline_loader=loader))
    if json_mode:
        sys.stdout.write(outcome.results_path.read_text(encoding="utf-8"))
        warning = (outcome.document.get("baseline") or {}).get("warning")
        if warning:
            print(f"evalgate: warning: {warning}", file=sys.stderr)
    else:
        from evalgate.report.console import make_console, render_failures, render_report

        console = make_console(sys.stdout)
        render_report(outcome.document, console, verbose=settings.verbose)
        render_failures(outcome.failures, console)
        console.print(f"Results: {outcome.results_path}  ·  SQLite: {outcome.db_path}")
    return outcome.verdict.exit_code


def cmd_validate(args: argparse.Namespace) -> int:
    import json

    from evalgate.config.settings import build_settings
    from evalgate.dataset.summary import dataset_summary, render_summary_text
    from evalgate.runner.setup import prepare

    settings, suite_config, _ = build_settings(cli=_cli_values(args))
    prepared = prepare(settings, suite_config)
    summary = dataset_summary(prepared.cases)
    summary["files"] = prepared.files
    summary["thresholds"] = {name: t.model_dump() for name, t in sorted(prepared.thresholds.items())}
    if settings.format == "json":
        print(json.dumps(summary, indent=2, default=str))
    else:
        print(render_summary_text(summary))
        print(f"OK: {len(prepared.cases)} cases valid in {len(prepared.files)} file(s); no network call was made.")
    return 0


COMMANDS = {"run": cmd_run, "eval": cmd_run, "validate": cmd_validate}


def main(argv: Sequence[str] | None = None) -> int:
    from evalgate.safety.redact import register_environment

    register_environment(os.environ)  # the process environment is read here, at the edge
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not argv:
        argv = ["run"]
    args = parser.parse_args(argv)
    handler = COMMANDS.get(args.verb) or getattr(args, "func", None)
    if handler is None:
        parser.print_help()
        return EXIT_USER_ERROR
    try:
        return int(handler(args))
    except UserError as exc:
        from evalgate.safety.redact import redact

        print(f"evalgate: error: {redact(str(exc))}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("evalgate: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as exc:  # a bug, not a user error: keep the traceback, but in a file
        return report_crash(exc)


def console_main() -> NoReturn:
    """The ``evalgate`` console script: ``main()`` and its exit status, with the interpreter's normal exit
    (atexit hooks, buffered output flushed)."""
    sys.exit(main())


def report_crash(exc: BaseException) -> int:
    """One line on stderr, the redacted traceback in ``evalgate-crash.log``; exit 1 (not passed).

    results.json and the database already hold every case finished before the crash, with
    ``status: crashed`` (see ``evalgate.runner.run.execute``)."""
    import tempfile
    import traceback

    from evalgate.safety.redact import redact

    text = redact("".join(traceback.format_exception(exc)))
    log = os.path.join(tempfile.gettempdir(), "evalgate-crash.log")
    with contextlib.suppress(OSError), open(log, "w", encoding="utf-8") as handle:
        handle.write(text)
    print(f"evalgate: internal error: {redact(f'{type(exc).__name__}: {exc}')} "
          f"(partial results, if any, were written with status 'crashed'; traceback in {log})", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
