"""The ``evalgate`` command line. Each verb is a thin wrapper over a library function.

Exit status (``EXIT_EPILOG``; results.json's ``gate.exit_code`` is always the same number): 0 the gate
passed, 1 the gate failed (or evalgate crashed), 2 configuration or dataset error or an unreachable
target/judge (one line on stderr, no traceback), 130 interrupted by SIGINT/SIGTERM. Heavy modules are
imported inside the verbs so ``--version`` starts fast.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import json
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from evalgate import __version__
from evalgate.cli import calibrate, compare, history, init, merge, publish, report, view
from evalgate.cli.options import (
    DIALECTS,
    add_run_options,
    add_selection,
    cli_values,
    guard_secret_destinations,
    print_notices,
)
from evalgate.errors import (
    EXIT_GATE_FAILED,
    EXIT_INTERRUPTED,
    EXIT_USER_ERROR,
    Interrupt,
    RunInterrupted,
    UserError,
)
from evalgate.safety.redact import redact, register_environment

if TYPE_CHECKING:
    from evalgate.config.sections import PublishSettings


EXIT_EPILOG = """\
exit status (results.json's gate.exit_code is the same number):
  0    the gate passed
  1    the gate failed: a threshold, a critical case, errored cases beyond --max-errored (a target
       answering with errors included), a regression, max_cost; also an internal crash (status crashed)
  2    configuration or dataset error, or the target/judge could not be reached at all before any
       case ran (DNS failure, connection refused, no connection within the connect timeout)
  130  interrupted by SIGINT (Ctrl-C) or SIGTERM: partial results with status cancelled"""


RUN_HELP_OPTIONS = frozenset({
    "--dataset", "--config", "--case-ids", "--first-n", "--category", "--tags", "--shard",
    "--metric-thresholds", "--strict-metrics", "--fail-on-critical", "--min-pass-rate", "--max-errored", "--baseline",
    "--fail-on-regression", "--calibration", "--output-dir", "--format", "--verbose", "--progress", "--target",
    "--target-url", "--outputs-file", "--judge-provider", "--judge-model", "--judge-base-url", "--judge-missing",
    "--max-cost", "--concurrency", "--repeat", "--dry-run", "--help", "--help-all",
})
"""The options ``run --help`` shows, in their groups; ``--help-all`` shows every option, the in-house
frameworks' spellings (``--fixtures``, ``--ids``, ``--api-url``, ``--output``) included."""
RUN_USAGE = "evalgate %(verb)s [--dataset PATH]... [--config FILE] [options]"


class _HelpAll(argparse.Action):
    """``--help-all``: every option of the verb, then exit 0."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest=dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        for action in parser._actions:
            full = getattr(action, "full_help", None)
            if full is not None:
                action.help = full
        parser.print_help()
        parser.exit()


def _short_help(verb: argparse.ArgumentParser) -> None:
    """Hide from ``--help`` every option outside ``RUN_HELP_OPTIONS`` (``--help-all`` shows them again)."""
    hidden = 0
    for action in verb._actions:
        if action.option_strings and not RUN_HELP_OPTIONS.intersection(action.option_strings):
            action.full_help = action.help  # type: ignore[attr-defined]
            action.help = argparse.SUPPRESS
            hidden += 1
    verb.epilog = (f"{hidden} more options (execution, retries and rate limits, judge tuning, caches, traces, "
                   "output formats of in-house frameworks): evalgate run --help-all\n\n" + (verb.epilog or ""))


def _run_verbs() -> list[tuple[str, str]]:
    """``run`` and the dialects' aliases of it (verb, help)."""
    verbs = [("run", "evaluate the datasets and apply the gate")]
    if DIALECTS.on:
        from evalgate import dialect  # lazy: the registry imports the data model (pydantic), not for --version

        verbs += [d.verb for d in dialect.DIALECTS.values() if d.verb]
    return verbs


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="evalgate",
        description="Gate pull requests on the quality of LLM and agent systems.",
        epilog=EXIT_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"evalgate {__version__}")
    verbs = parser.add_subparsers(dest="verb", metavar="COMMAND")
    run_verbs = _run_verbs()
    for name, help_text in run_verbs:
        verb = verbs.add_parser(name, help=help_text, description=help_text, epilog=EXIT_EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                usage=RUN_USAGE % {"verb": name})
        verb.add_argument("--help-all", action=_HelpAll, help="show every option, then exit")
        add_selection(verb)
        add_run_options(verb)
        verb.add_argument("--dry-run", action="store_true", help="validate only, no call (same as evalgate validate)")
        _short_help(verb)
    validate = verbs.add_parser("validate", help="check datasets and config without calling anything (dry run)",
                                description="Validate datasets and configuration; no network call is made.")
    add_selection(validate)
    validate.add_argument("--format", choices=["text", "json"], help="json prints the summary as JSON")
    validate.add_argument("--metric-thresholds", metavar="JSON")
    validate.add_argument("--explain", action="store_true", default=None,
                          help="per case: the metrics that will run, their thresholds and why each applies")
    validate.add_argument("--compat", metavar="SEEDS", help="in-house framework dialects on for cases without a kind")
    explain = verbs.add_parser("explain", help="per case: the metrics that will run, their thresholds and why "
                                                 "(validate --explain)",
                               description="Validate, then print per case every metric that will run, its threshold "
                                           "(and where it was set) and why it applies; no network call is made.")
    add_selection(explain)
    explain.add_argument("--format", choices=["text", "json"], help="json prints the explanation as JSON")
    explain.add_argument("--compat", metavar="SEEDS", help="in-house framework dialects on for cases without a kind")
    explain.set_defaults(explain=True)
    looked_up = validate.add_argument_group("judge cache (read only, to tell whether generated steps are cached)")
    looked_up.add_argument("--judge-provider", choices=["none", "openai", "gemini", "ollama", "local"])
    looked_up.add_argument("--judge-model", metavar="MODEL")
    looked_up.add_argument("--judge-base-url", metavar="URL")
    looked_up.add_argument("--output-dir", "-o", metavar="DIR", help="where the run writes (judge-cache.db is there)")
    looked_up.add_argument("--db", metavar="FILE")
    for extra in _extra_verbs():
        extra(verbs)
    # a dialect's verb works but is not listed: a new user's list of commands names evalgate's own (docs/cli.md)
    hidden = {name for name, _ in run_verbs[1:]}
    verbs._choices_actions = [a for a in verbs._choices_actions if a.dest not in hidden]
    return parser


def _extra_verbs() -> list[Any]:
    """The verbs defined in their own modules (compare, merge, history, report, init, publish, view)."""
    return [history.add_history, report.add_report, merge.add_merge, compare.add_compare, init.add_init,
            publish.add_publish, calibrate.add_calibrate, view.add_view]


def cmd_run(args: argparse.Namespace) -> int:
    from evalgate.config.sections import PublishSettings  # lazy: the run stack (pydantic, httpx), not for --help
    from evalgate.config.settings import build_settings  # lazy: the run stack (pydantic, httpx), not for --help
    from evalgate.report.progress import make_progress  # lazy: the run stack (pydantic, httpx), not for --help
    from evalgate.runner.run import execute  # lazy: the run stack (pydantic, httpx), not for --help

    Interrupt.check()  # a signal that came during the imports above
    values, origins, notices = cli_values(args)
    from evalgate import dialect  # lazy: the registry imports the data model (pydantic), not for --help

    own = dialect.verbs().get(args.verb)
    defaults = {"compat": [own]} if own else None
    settings, suite_config, _ = build_settings(cli=values, cli_origins=origins, defaults=defaults)
    guard_secret_destinations(settings)
    _crash_dir.append(settings.output_path)
    print_notices(notices + settings.notices)
    if getattr(args, "dry_run", False):
        print_notices(["--dry-run is evalgate validate: every file and setting is checked, no call is made"])
        return validate_and_report(settings, suite_config)
    publishing = PublishSettings.of(settings)  # what the console, the seed documents and the export read
    if publishing.langfuse:
        from evalgate.export.langfuse import require_keys  # lazy: the Langfuse export only with --langfuse

        require_keys(publishing, where="--langfuse")

    def progress_for(total: int) -> Any:
        return make_progress(publishing.progress, total,
                             quiet=publishing.format == "json" and publishing.progress == "auto",
                             every_seconds=publishing.progress_interval_seconds)

    loader = None
    if settings.baseline_kind == "auto":
        from evalgate.github.baseline import loader_from_env  # lazy: the GitHub client only for baseline: auto

        loader = loader_from_env(os.environ)
    labels: list[str] = []
    if settings.baseline_kind != "none" and os.environ.get("GITHUB_EVENT_PATH"):  # the approval label (gate_changes)
        from evalgate.github.context import load_event, pull_request_labels  # lazy: only in a pull request's run

        labels = pull_request_labels(load_event(os.environ["GITHUB_EVENT_PATH"]))
    outcome = asyncio.run(execute(settings, suite_config, progress_for=progress_for, baseline_loader=loader,
                                  pr_labels=labels))
    code = int(outcome.verdict.exit_code)
    late = outcome.signals or list(Interrupt.received)
    if late and code != EXIT_INTERRUPTED:  # the results were complete and written when the signal came
        print(f"evalgate: interrupted by {late[0]} after the results were written: they are complete "
              f"(status {outcome.document['status']}), the report is not printed (exit {code})", file=sys.stderr)
        Interrupt.received.clear()  # reported
        return code
    try:
        _print_outcome(outcome, publishing)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except KeyboardInterrupt:
        print(f"evalgate: interrupted while printing the report; the results are complete (exit {code})",
              file=sys.stderr)
    except Exception as exc:  # a bug in a reporter does not change the verdict already written
        report_crash(exc, note=f"while printing the report; the results are complete and the exit status "
                               f"is the verdict's ({code})")
    if publishing.langfuse:
        export_langfuse(publishing, outcome.results_path)  # a failure is a warning: the verdict stands
    if Interrupt.received and code != EXIT_INTERRUPTED:  # came while the report was printed
        print(f"evalgate: interrupted by {Interrupt.received[0]} after the results were written: they are "
              f"complete (status {outcome.document['status']}; exit {code})", file=sys.stderr)
        Interrupt.received.clear()  # reported
    return code


def _print_outcome(outcome: Any, settings: PublishSettings) -> None:
    """results.json on stdout (``--format json``) or the console report."""
    print_notices(outcome.notices)
    if settings.format == "json":
        printed = outcome.results_path
        if len(settings.compat) == 1 and settings.compat[0] in outcome.compat_paths:
            printed = outcome.compat_paths[settings.compat[0]]
        report.copy_to_stdout(printed)
        warning = (outcome.document.get("baseline") or {}).get("warning")
        if warning:
            print(f"evalgate: warning: {warning}", file=sys.stderr)
    else:
        from evalgate.report.console import (  # lazy: rich and the report only once a run has results
            judge_hint,
            make_console,
            render_failures,
            render_report,
        )

        console = make_console(sys.stdout)
        render_report(outcome.document, console, verbose=settings.verbose)
        render_failures(outcome.failures, console)
        hint = judge_hint(outcome.document)
        if hint:
            console.print(hint, markup=False)
        console.print(f"Results: {outcome.results_path}  ·  SQLite: {outcome.db_path}")
        for seed, path in sorted(outcome.compat_paths.items()):
            console.print(f"{seed.partition(':')[0]} output: {path}", markup=False)
        from evalgate.dialect import console_summaries  # lazy: the registry imports the data model (pydantic)

        for summary in console_summaries(settings.compat, outcome.document, outcome.db_path):
            sys.stdout.flush()
            sys.stdout.write("\n" + summary)
    if outcome.verdict.exit_code == EXIT_INTERRUPTED:
        by = f" by {' and '.join(dict.fromkeys(outcome.signals))}" if outcome.signals else ""
        print(f"evalgate: interrupted{by}: partial results written with status 'cancelled' (exit 130)", file=sys.stderr)


def export_langfuse(settings: PublishSettings, results_path: Any) -> None:
    """Send the run's scores to Langfuse; a failure is a warning (the verdict stands)."""
    from evalgate.export.langfuse import LangfuseError, export_results  # lazy: only with --langfuse

    try:
        summary = export_results(results_path, settings)
    except LangfuseError as exc:
        print(f"evalgate: warning: Langfuse export failed: {exc}", file=sys.stderr)
        return
    print(f"evalgate: Langfuse: {summary}", file=sys.stderr)


def cmd_validate(args: argparse.Namespace) -> int:
    from evalgate.config.settings import build_settings  # lazy: the run stack (pydantic, httpx), not for --help

    values, origins, notices = cli_values(args)
    settings, suite_config, _ = build_settings(cli=values, cli_origins=origins)
    print_notices(notices + settings.notices)
    try:
        return validate_and_report(settings, suite_config, explain=bool(getattr(args, "explain", False)))
    except UserError as exc:
        listed = getattr(exc, "errors", None)
        if not listed or len(listed) < 2:
            raise
        for line in listed:  # validate lists every problem found (the loader keeps the first 20), one per line
            print(f"evalgate: error: {redact(line)}", file=sys.stderr)
        total = int(getattr(exc, "total", len(listed)))
        unlisted = f", the first {len(listed)} listed" if total > len(listed) else ""
        print(f"evalgate: {total} errors{unlisted}", file=sys.stderr)
        return EXIT_USER_ERROR


def validate_and_report(settings: Any, suite_config: Any, *, explain: bool = False) -> int:
    """``evalgate validate`` once settings are built: prepare (validates everything), print the summary."""
    from evalgate.runner.api import validate_settings  # lazy: the run stack (pydantic, httpx), not for --help

    result = validate_settings(settings, suite_config)
    try:
        _print_validation(result, settings, explain)
    except BrokenPipeError:  # the reader stopped reading (validate | head): the datasets are valid all the same
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _print_validation(result: Any, settings: Any, explain: bool) -> None:
    from evalgate.dataset.summary import render_summary_text  # lazy: the dataset stack (pydantic), not for --help

    print_notices(result.notices)
    summary = dict(result.summary)
    summary["files"] = result.files
    summary["thresholds"] = result.thresholds
    summary["custom_metrics"] = result.custom_metrics
    if explain:
        summary["explain"] = result.explanation()
        summary["judged_gating"] = result.judged
    if settings.format == "json":
        print(json.dumps(summary, indent=2, default=str))
    elif explain:
        from evalgate.report.view import format_threshold  # lazy: the run stack (pydantic, httpx), not for --help
        from evalgate.runner.explain import render_explanation  # lazy: the run stack (pydantic, httpx), not for --help

        print(render_explanation([(case, result.explain(case)) for case in result.selected], format_threshold))
        if result.judged:
            print("judged metrics")
            for line in result.judged:
                print(f"  {line}")
        print(f"OK: {result.cases} cases valid in {len(result.files)} file(s); no network call was made.")
    else:
        print(render_summary_text(summary))
        if result.custom_metrics:
            print()
            print(render_custom_metrics(result.custom_metrics))
        print(f"OK: {result.cases} cases valid in {len(result.files)} file(s); no network call was made.")


def render_custom_metrics(rows: list[dict[str, Any]]) -> str:
    """``evalgate validate``'s list of the user's own metrics: name, kind, threshold, what it checks, and
    for judged metrics whether their evaluation steps are declared, cached or still to be written."""
    from evalgate.report.view import format_threshold  # lazy: the run stack (pydantic, httpx), not for --help

    lines = ["your own metrics"]
    for row in rows:
        threshold = format_threshold(row.get("threshold")) or "no threshold"
        kind = "judged" if row["type"] == "judged" else "code check"
        lines.append(f"  {row['name']}  [{kind}, {threshold}]  {row.get('summary') or ''}".rstrip())
        lines.append(f"      from {row.get('origin')}")
        if "steps" in row:
            lines.append(f"      evaluation steps: {row['steps']}")
    return "\n".join(lines)


COMMANDS = {"run": cmd_run, "validate": cmd_validate, "explain": cmd_validate}
"""Verb → handler; a dialect's verb (``evalgate.dialect.verbs``) is ``run``."""


def _run_verbs_names() -> set[str]:
    return {name for name, _ in _run_verbs()}


def main(argv: Sequence[str] | None = None) -> int:
    previous = Interrupt.install()  # SIGINT/SIGTERM before a run installs its own handlers: exit 130
    try:
        register_environment(os.environ)  # the process environment is read here, at the edge
        argv = list(sys.argv[1:] if argv is None else argv)
        if not argv:
            argv = ["run"]
        DIALECTS.on = not argv[0].startswith("-")  # `evalgate --version` and top-level help need no dialect
        try:
            parser = build_parser()
        finally:
            DIALECTS.on = True
        args = parser.parse_args(argv)
        handler = COMMANDS.get(args.verb) or (cmd_run if args.verb in _run_verbs_names() else None) \
            or getattr(args, "func", None)
        if handler is None:
            parser.print_help()
            return EXIT_USER_ERROR
        return int(handler(args))
    except UserError as exc:
        print(f"evalgate: error: {redact(str(exc))}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt as exc:  # before any result was written (or in another verb)
        how = f" by {exc.signal_name}" if isinstance(exc, RunInterrupted) else ""
        print(f"evalgate: interrupted{how} before any case ran: nothing was evaluated, no results written "
              f"(exit {EXIT_INTERRUPTED})", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_GATE_FAILED
    except Exception as exc:  # a bug, not a user error: keep the traceback, but in a file
        return report_crash(exc)
    finally:
        Interrupt.restore(previous)


def console_main() -> NoReturn:
    """The ``evalgate`` console script: ``main()`` and its exit status, with the interpreter's normal exit
    (atexit hooks, buffered output flushed). A SIGINT/SIGTERM that arrives once ``main`` has handed back
    its handlers (the results, if any, are written) is noted on stderr; the exit status stands."""
    Interrupt.record_only()  # what main's handlers hand back to: the process is not killed while it exits
    atexit.register(Interrupt.hold)  # nor in its last milliseconds (threads joined, modules torn down)
    status = main()
    if Interrupt.received and status != EXIT_INTERRUPTED:
        print(f"evalgate: {Interrupt.received[0]} arrived as evalgate was finishing: the exit status stands "
              f"(exit {status})", file=sys.stderr)
    sys.exit(status)


CRASH_LOG = "evalgate-crash.log"
_crash_dir: list[Path] = []
"""The run's output directory, once its settings are known: where ``report_crash`` writes its log."""


def report_crash(exc: BaseException, note: str | None = None, directory: Path | None = None) -> int:
    """One line on stderr, the redacted traceback in ``evalgate-crash.log`` in the run's output directory
    (``directory``, else the one of the settings being run, else ./evalgate-results); exit 1 (not passed).

    results.json and the database already hold every case finished before the crash, with
    ``status: crashed`` and ``gate.exit_code`` 1 (see ``evalgate.runner.run.execute``). ``note``
    replaces that sentence when the crash came after the results were complete."""
    text = redact("".join(traceback.format_exception(exc)))
    folder = directory or (_crash_dir[-1] if _crash_dir else Path("evalgate-results"))
    log = str(folder / CRASH_LOG)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if os.path.islink(log):
            os.unlink(log)  # never write through a link planted in the output directory
        with open(log, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as error:
        log = f"nowhere: {log} cannot be written ({error.strerror})"
    context = note or "partial results, if any, were written with status 'crashed'"
    print(f"evalgate: internal error: {redact(f'{type(exc).__name__}: {exc}')} ({context}; traceback in {log})",
          file=sys.stderr)
    return EXIT_GATE_FAILED


if __name__ == "__main__":
    sys.exit(main())

