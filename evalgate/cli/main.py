"""The ``evalgate`` command line. Each verb is a thin wrapper over a library function.

Exit status (``EXIT_EPILOG``; results.json's ``gate.exit_code`` is always the same number): 0 the gate
passed, 1 the gate failed (or evalgate crashed), 2 configuration or dataset error or an unreachable
target/judge (one line on stderr, no traceback), 130 interrupted by SIGINT/SIGTERM. Heavy modules are
imported inside the verbs so ``--version`` starts fast.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from evalgate import __version__
from evalgate.errors import (
    EXIT_GATE_FAILED,
    EXIT_INTERRUPTED,
    EXIT_USER_ERROR,
    Interrupt,
    RunInterrupted,
    UserError,
)

BOOL = argparse.BooleanOptionalAction

EXIT_EPILOG = """\
exit status (results.json's gate.exit_code is the same number):
  0    the gate passed
  1    the gate failed: a threshold, a critical case, errored cases beyond --max-errored (a target
       answering with errors included), a regression, max_cost; also an internal crash (status crashed)
  2    configuration or dataset error, or the target/judge could not be reached at all before any
       case ran (DNS failure, connection refused, no connection within the connect timeout)
  130  interrupted by SIGINT (Ctrl-C) or SIGTERM: partial results with status cancelled"""


def _add_selection(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("dataset and selection")
    group.add_argument("--dataset", "-d", action="append", metavar="PATH",
                       help="dataset file, directory or glob (repeatable; default: the bundled demo suites)")
    group.add_argument("--fixtures", action="append", metavar="PATH", dest="fixtures",
                       help="alias of --dataset (seed 001's 'eval --fixtures')")
    group.add_argument("--config", "-c", metavar="FILE", help="evalgate.yaml (default: ./evalgate.yaml if present)")
    group.add_argument("--case-ids", metavar="IDS", help="comma-separated case ids (overrides --first-n)")
    group.add_argument("--ids", nargs="+", metavar="ID", help="space-separated case ids (seed 004's spelling of --case-ids)")
    group.add_argument("--first-n", type=int, metavar="N", help="run only the first N cases in dataset order")
    group.add_argument("--category", metavar="NAMES", help="comma-separated categories to keep")
    group.add_argument("--tags", metavar="TAGS", help="comma-separated tags to keep (any)")
    group.add_argument("--shard", metavar="I/N", help="run the stable shard I of N (by case-id hash)")


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    gate = parser.add_argument_group("gate")
    gate.add_argument("--metric-thresholds", metavar="JSON",
                      help='e.g. \'{"keyword_coverage": 0.8, "num_tokens": {"max": 4000}}\'')
    gate.add_argument("--strict-metrics", action=BOOL, default=None, help="a skipped or unavailable metric fails")
    gate.add_argument("--fail-on-critical", action=BOOL, default=None, help="any failed critical case fails the run (default on)")
    gate.add_argument("--min-pass-rate", type=float, metavar="RATE", help="minimum fraction of cases that pass (0–1)")
    gate.add_argument("--max-errored", type=int, metavar="N", help="errored cases tolerated before the gate fails (default 0)")
    gate.add_argument("--baseline", metavar="PATH|auto|none", help="previous results.json or SQLite file to compare with")
    gate.add_argument("--fail-on-regression", action=BOOL, default=None, help="fail on a significant regression vs baseline")
    gate.add_argument("--significance-level", type=float, metavar="ALPHA", help="significance level (default 0.05)")
    gate.add_argument("--gate-changes", choices=["report", "fail"],
                      help="a run that loosens the gate against its baseline: list it (report, default) or also fail "
                           "unless the pull request carries --gate-change-label (fail); docs/security.md")
    gate.add_argument("--gate-change-label", metavar="LABEL",
                      help="pull-request label approving a loosening (default evalgate-gate-change-approved)")
    gate.add_argument("--calibration", choices=["auto", "required", "off", "trust"],
                      help="judged metrics gate only on evidence: human labels or the judge passing its controls "
                           "(auto, default); a judge without it fails the run (required); controls only (off); "
                           "every judge gates unchecked (trust); docs/judges.md")
    gate.add_argument("--no-gate", choices=["auto", "pass", "fail"],
                      help="a run in which no gated metric could decide: fail it or pass it (auto: fail under "
                           "calibration: required)")
    gate.add_argument("--pairwise", action=BOOL, default=None,
                      help="with a baseline, ask the judge which answer is better where an answer changed")
    out = parser.add_argument_group("output")
    out.add_argument("--output-dir", "-o", metavar="DIR", help="where results.json and results.db go (default evalgate-results)")
    out.add_argument("--db", metavar="FILE", help="SQLite file (default OUTPUT_DIR/results.db); runs are appended")
    out.add_argument("--format", choices=["text", "json"],
                     help="json prints results.json to stdout (with --compat: that framework's document)")
    out.add_argument("--compat", metavar="SEEDS",
                     help="turn on these in-house frameworks' dialects (seed000 … seed004, comma-separated) for "
                          "cases without a kind, and produce their output shapes (seed000, seed001, seed004): "
                          "files beside results.json and the seed's console summary")
    out.add_argument("--output", dest="compat_output", metavar="FILE",
                     help="seed 004's --output: write seed 004's results document to FILE too")
    out.add_argument("--langfuse", action=BOOL, default=None,
                     help="export scores to Langfuse (LANGFUSE_PUBLIC_KEY, LANGFUSE_SECRET_KEY, LANGFUSE_HOST)")
    out.add_argument("--wait", action="store_true", default=None,
                     help="when another run is writing to the output directory, wait for it instead of stopping")
    out.add_argument("--verbose", "-v", action="store_true", default=None, help="breakdowns and more detail")
    out.add_argument("--progress", choices=["auto", "rich", "plain", "none"], help="progress display (default auto)")
    target = parser.add_argument_group("target and judge")
    target.add_argument("--target", metavar="KIND",
                        help="how answers are obtained: recorded | http | openai | command | package.module:factory")
    target.add_argument("--target-options", metavar="JSON", help="keyword arguments of a custom target's factory")
    target.add_argument("--target-url", metavar="URL", help="HTTP target endpoint")
    target.add_argument("--api-url", metavar="URL",
                        help="seed 004's agent API: --target http --target-url URL/chat")
    target.add_argument("--outputs-file", metavar="FILE", help="recorded answers keyed by case id (JSON/JSONL)")
    target.add_argument("--target-command", metavar="CMD", help="command target: JSON list or comma-separated argv")
    target.add_argument("--target-response-format", choices=["auto", "json", "text"],
                        help="how http/command replies are read: auto (default: JSON when it parses; a reply "
                             "whose Content-Type says JSON must parse) | json (must parse) | text (never parsed)")
    target.add_argument("--target-model", metavar="MODEL", help="model for the openai target")
    target.add_argument("--target-provider", choices=["openai", "gemini", "ollama", "local"],
                        help="provider of the openai target (default: the judge's, else openai)")
    target.add_argument("--judge-provider", choices=["none", "openai", "gemini", "ollama", "local"])
    target.add_argument("--judge-model", metavar="MODEL")
    target.add_argument("--judge-base-url", metavar="URL")
    target.add_argument("--judge-missing", choices=["auto", "skip", "fail"],
                        help="the judge provider's API key is absent: report judged metrics as not judged and let "
                             "the rest of the gate decide (skip), or stop with exit 2 (fail); auto (default): skip "
                             "on pull requests from forks and bots, fail elsewhere")
    target.add_argument("--judge-samples", type=int, metavar="K", help="judge calls averaged per judged metric")
    target.add_argument("--judge-output", choices=["auto", "json_schema", "json_object", "prompt"],
                        help="how the verdict's JSON schema is requested (default auto: the provider's structured "
                             "output, falling back once per run when refused)")
    target.add_argument("--judge-mode", choices=["direct", "batch"],
                        help="batch: judge through the provider's batch interface at half price (push, schedule and "
                             "workflow_dispatch runs; pull requests judge directly); see docs/judges.md")
    target.add_argument("--chat-client", choices=["direct", "openai-sdk"],
                        help="how judge and model calls are made: direct JSON (default) or the openai SDK")
    target.add_argument("--no-cache", action="store_true", default=None, help="bypass the judge cache")
    target.add_argument("--judge-cache", metavar="PATH|none",
                        help="base branch's judge-cache.db (or its directory) to reuse verdicts from "
                             "(default: the baseline's)")
    target.add_argument("--judge-shared-cache", metavar="PATH|none",
                        help="judge cache shared by every output directory on this machine (default: the user's "
                             "cache directory; off in GitHub Actions, never read in a pull request run)")
    target.add_argument("--judge-max-reply-bytes", type=int, metavar="BYTES",
                        help="largest judge reply read (default 1048576); a longer one leaves its verdict unavailable")
    target.add_argument("--judge-rpm", type=float, metavar="N", help="judge requests per minute, when it sends no limits")
    target.add_argument("--judge-tpm", type=float, metavar="N", help="judge tokens per minute, when it sends no limits")
    target.add_argument("--max-cost", type=float, metavar="USD", help="abort cleanly before exceeding this spend")
    ex = parser.add_argument_group("execution")
    ex.add_argument("--concurrency", type=int, metavar="N", help="calls in flight at once (default 8)")
    ex.add_argument("--api-retries", type=int, metavar="N", help="retries per call (default 3)")
    ex.add_argument("--target-rpm", type=float, metavar="N", help="target requests per minute, when it sends no limits")
    ex.add_argument("--target-tpm", type=float, metavar="N", help="model target tokens per minute, when it sends none")
    ex.add_argument("--api-timeout-seconds", type=float, metavar="S",
                    help="time limit per attempt: connect, send, wait and read (default 60)")
    ex.add_argument("--connect-timeout-seconds", type=float, metavar="S",
                    help="time limit to open a connection, TCP and TLS (default 10)")
    ex.add_argument("--read-timeout-seconds", type=float, metavar="S",
                    help="longest silence while a reply is awaited: before its first byte or between two "
                         "chunks (default: no limit beyond --api-timeout-seconds)")
    ex.add_argument("--progress-interval-seconds", type=float, metavar="S",
                    help="seconds between plain progress lines (default 10)")
    ex.add_argument("--max-answer-chars", type=int, metavar="N",
                    help="largest answer kept whole (default 1000000); a larger one is cut and its case errored")
    ex.add_argument("--repeat", type=_repeat, metavar="N|adaptive",
                    help="run each case N times (flakiness), or 'adaptive': once, then re-try only the uncertain "
                         "cases until a sequential test decides")
    ex.add_argument("--adaptive-budget", metavar="auto|N|N%%|$X",
                    help="re-trials repeat: adaptive may add: auto, trials, a share of the cases, or dollars "
                         "(default auto: 50%% of the cases + 39 per critical case)")
    ex.add_argument("--repeat-rule", choices=["majority", "all", "any"],
                    help="case verdict over its repeats (default majority: passes > N/2)")
    ex.add_argument("--traces", action=BOOL, default=None,
                    help="receive the agent's OpenTelemetry spans over OTLP/HTTP (docs/traces.md)")
    ex.add_argument("--traces-host", metavar="HOST", help="interface of the trace receiver (default 127.0.0.1)")
    ex.add_argument("--traces-port", type=int, metavar="PORT", help="port of the trace receiver (default 4318; 0: any)")


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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="evalgate",
        description="Gate pull requests on the quality of LLM and agent systems.",
        epilog=EXIT_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"evalgate {__version__}")
    verbs = parser.add_subparsers(dest="verb", metavar="COMMAND")
    for name, help_text in (("run", "evaluate the datasets and apply the gate"),
                            ("eval", "alias of run (seed 001: eval --fixtures F --db D --format json)")):
        verb = verbs.add_parser(name, help=help_text, description=help_text, epilog=EXIT_EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                usage=RUN_USAGE % {"verb": name})
        verb.add_argument("--help-all", action=_HelpAll, help="show every option, then exit")
        _add_selection(verb)
        _add_run_options(verb)
        verb.add_argument("--dry-run", action="store_true", help="validate only, no call (same as evalgate validate)")
        _short_help(verb)
    validate = verbs.add_parser("validate", help="check datasets and config without calling anything (dry run)",
                                description="Validate datasets and configuration; no network call is made.")
    _add_selection(validate)
    validate.add_argument("--format", choices=["text", "json"], help="json prints the summary as JSON")
    validate.add_argument("--metric-thresholds", metavar="JSON")
    validate.add_argument("--explain", action="store_true", default=None,
                          help="per case: the metrics that will run, their thresholds and why each applies")
    validate.add_argument("--compat", metavar="SEEDS", help="in-house framework dialects on for cases without a kind")
    explain = verbs.add_parser("explain", help="per case: the metrics that will run, their thresholds and why "
                                                 "(validate --explain)",
                               description="Validate, then print per case every metric that will run, its threshold "
                                           "(and where it was set) and why it applies; no network call is made.")
    _add_selection(explain)
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
    # seed 001's `eval` works but is not listed: a new user's list of commands names evalgate's own (docs/cli.md)
    verbs._choices_actions = [a for a in verbs._choices_actions if a.dest != "eval"]
    return parser


def _extra_verbs() -> list[Any]:
    """The verbs defined in their own modules (compare, merge, history, report, init, publish, view)."""
    from evalgate.cli import calibrate, compare, history, init, merge, publish, report, view

    return [history.add_history, report.add_report, merge.add_merge, compare.add_compare, init.add_init,
            publish.add_publish, calibrate.add_calibrate, view.add_view]


NOT_SETTINGS = frozenset({"verb", "fixtures", "func", "ids", "api_url", "dry_run", "explain"})


def _cli_values(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """(settings from the flags, flag that set a setting when it is not ``--<setting>``, notices for the
    seeds' spellings)."""
    values = {k: v for k, v in vars(args).items() if v is not None and k not in NOT_SETTINGS}
    origins: dict[str, str] = {}
    notices: list[str] = []
    datasets = (args.dataset or []) + (getattr(args, "fixtures", None) or [])
    values.pop("dataset", None)
    if datasets:
        values["dataset"] = datasets
    ids = getattr(args, "ids", None)
    if ids:
        if values.get("case_ids"):
            raise UserError("give case ids with --case-ids or --ids, not both", where="--ids")
        values["case_ids"] = [part.strip() for item in ids for part in item.split(",") if part.strip()]
        origins["case_ids"] = "--ids"
        notices.append(f"--ids {' '.join(ids)} is read as --case-ids {','.join(values['case_ids'])}")
    api_url = getattr(args, "api_url", None)
    if api_url:
        from evalgate.config.legacy import chat_url

        if values.get("target_url"):
            raise UserError("give the agent's URL with --target-url or --api-url, not both", where="--api-url")
        values.setdefault("target", "http")
        values["target_url"] = chat_url(api_url)
        origins["target_url"] = "--api-url"
        notices.append(f"--api-url {api_url} is read as --target http --target-url {values['target_url']} "
                       "(seed 004's runner posts {\"message\": query} to URL/chat)")
    if values.get("compat_output"):
        compat = [part for part in str(values.get("compat") or "").split(",") if part.strip()]
        if "seed004" not in compat and "004" not in compat:
            values["compat"] = ",".join([*compat, "seed004"])
        origins["compat_output"] = "--output"
        notices.append(f"--output {values['compat_output']}: seed 004's results document is written there; "
                       "evalgate's own results.json and results.db stay in --output-dir")
    return values, origins, notices


def _print_notices(notices: list[str]) -> None:
    from evalgate.safety.redact import redact

    for notice in notices:
        print(f"evalgate: notice: {redact(notice)}", file=sys.stderr)


def guard_secret_destinations(settings: Any) -> None:
    """Inside a workflow step whose checkout is a pull request's (``pull_request_target`` or ``workflow_run``
    with other code than the base commit checked out, or ``EVALGATE_UNTRUSTED_CHECKOUT=true``), refuse a setting
    from the checkout's evalgate.yaml that would choose where a secret is sent (``config.trust``; exit 2)."""
    from evalgate.config.trust import refuse_checkout_redirects
    from evalgate.github.checkout import env_secrets_reason

    cwd = Path.cwd()
    refuse_checkout_redirects(settings, env_secrets_reason(os.environ, cwd), cwd)


def cmd_run(args: argparse.Namespace) -> int:
    import asyncio

    from evalgate.config.settings import build_settings
    from evalgate.report.progress import make_progress
    from evalgate.runner.run import execute

    Interrupt.check()  # a signal that came during the imports above
    values, origins, notices = _cli_values(args)
    defaults = {"compat": ["seed001"]} if args.verb == "eval" else None
    settings, suite_config, _ = build_settings(cli=values, cli_origins=origins, defaults=defaults)
    guard_secret_destinations(settings)
    _crash_dir.append(settings.output_path)
    _print_notices(notices + settings.notices)
    if getattr(args, "dry_run", False):
        _print_notices(["--dry-run is evalgate validate: every file and setting is checked, no call is made"])
        return validate_and_report(settings, suite_config)
    if settings.langfuse:
        from evalgate.export.langfuse import require_keys

        require_keys(settings, where="--langfuse")
    json_mode = settings.format == "json"

    def progress_for(total: int) -> Any:
        return make_progress(settings.progress, total, quiet=json_mode and settings.progress == "auto",
                             every_seconds=settings.progress_interval_seconds)

    loader = None
    if settings.baseline_kind == "auto":
        from evalgate.github.baseline import loader_from_env

        loader = loader_from_env(os.environ)
    labels: list[str] = []
    if settings.baseline_kind != "none" and os.environ.get("GITHUB_EVENT_PATH"):  # the approval label (gate_changes)
        from evalgate.github.context import load_event, pull_request_labels

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
        _print_outcome(outcome, settings, json_mode)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except KeyboardInterrupt:
        print(f"evalgate: interrupted while printing the report; the results are complete (exit {code})",
              file=sys.stderr)
    except Exception as exc:  # a bug in a reporter does not change the verdict already written
        report_crash(exc, note=f"while printing the report; the results are complete and the exit status "
                               f"is the verdict's ({code})")
    if settings.langfuse:
        export_langfuse(settings, outcome.results_path)  # a failure is a warning: the verdict stands
    if Interrupt.received and code != EXIT_INTERRUPTED:  # came while the report was printed
        print(f"evalgate: interrupted by {Interrupt.received[0]} after the results were written: they are "
              f"complete (status {outcome.document['status']}; exit {code})", file=sys.stderr)
        Interrupt.received.clear()  # reported
    return code


def _print_outcome(outcome: Any, settings: Any, json_mode: bool) -> None:
    """results.json on stdout (``--format json``) or the console report."""
    _print_notices(outcome.notices)
    if json_mode:
        printed = outcome.results_path
        if len(settings.compat) == 1 and settings.compat[0] in outcome.compat_paths:
            printed = outcome.compat_paths[settings.compat[0]]
        from evalgate.cli.report import copy_to_stdout

        copy_to_stdout(printed)
        warning = (outcome.document.get("baseline") or {}).get("warning")
        if warning:
            print(f"evalgate: warning: {warning}", file=sys.stderr)
    else:
        from evalgate.report.console import (
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
        from evalgate.dialect import console_summaries

        for summary in console_summaries(settings.compat, outcome.document, outcome.db_path):
            sys.stdout.flush()
            sys.stdout.write("\n" + summary)
    if outcome.verdict.exit_code == EXIT_INTERRUPTED:
        by = f" by {' and '.join(dict.fromkeys(outcome.signals))}" if outcome.signals else ""
        print(f"evalgate: interrupted{by}: partial results written with status 'cancelled' (exit 130)", file=sys.stderr)


def export_langfuse(settings: Any, results_path: Any) -> None:
    """Send the run's scores to Langfuse; a failure is a warning (the verdict stands)."""
    from evalgate.export.langfuse import LangfuseError, export_results

    try:
        summary = export_results(results_path, settings)
    except LangfuseError as exc:
        print(f"evalgate: warning: Langfuse export failed: {exc}", file=sys.stderr)
        return
    print(f"evalgate: Langfuse: {summary}", file=sys.stderr)


def cmd_validate(args: argparse.Namespace) -> int:
    from evalgate.config.settings import build_settings

    values, origins, notices = _cli_values(args)
    settings, suite_config, _ = build_settings(cli=values, cli_origins=origins)
    _print_notices(notices + settings.notices)
    try:
        return validate_and_report(settings, suite_config, explain=bool(getattr(args, "explain", False)))
    except UserError as exc:
        listed = getattr(exc, "errors", None)
        if not listed or len(listed) < 2:
            raise
        from evalgate.safety.redact import redact

        for line in listed:  # validate lists every problem found (the loader keeps the first 20), one per line
            print(f"evalgate: error: {redact(line)}", file=sys.stderr)
        total = int(getattr(exc, "total", len(listed)))
        unlisted = f", the first {len(listed)} listed" if total > len(listed) else ""
        print(f"evalgate: {total} errors{unlisted}", file=sys.stderr)
        return EXIT_USER_ERROR


def validate_and_report(settings: Any, suite_config: Any, *, explain: bool = False) -> int:
    """``evalgate validate`` once settings are built: prepare (validates everything), print the summary."""
    from evalgate.runner.api import validate_settings

    result = validate_settings(settings, suite_config)
    try:
        _print_validation(result, settings, explain)
    except BrokenPipeError:  # the reader stopped reading (validate | head): the datasets are valid all the same
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _print_validation(result: Any, settings: Any, explain: bool) -> None:
    import json

    from evalgate.dataset.summary import render_summary_text

    _print_notices(result.notices)
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
        from evalgate.report.view import format_threshold
        from evalgate.runner.explain import render_explanation

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
    from evalgate.report.view import format_threshold

    lines = ["your own metrics"]
    for row in rows:
        threshold = format_threshold(row.get("threshold")) or "no threshold"
        kind = "judged" if row["type"] == "judged" else "code check"
        lines.append(f"  {row['name']}  [{kind}, {threshold}]  {row.get('summary') or ''}".rstrip())
        lines.append(f"      from {row.get('origin')}")
        if "steps" in row:
            lines.append(f"      evaluation steps: {row['steps']}")
    return "\n".join(lines)


COMMANDS = {"run": cmd_run, "eval": cmd_run, "validate": cmd_validate, "explain": cmd_validate}


def main(argv: Sequence[str] | None = None) -> int:
    previous = Interrupt.install()  # SIGINT/SIGTERM before a run installs its own handlers: exit 130
    try:
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
        return int(handler(args))
    except UserError as exc:
        from evalgate.safety.redact import redact

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
    import atexit

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
    import traceback

    from evalgate.safety.redact import redact

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


def _repeat(text: str) -> int | str:
    """``--repeat``: a whole number or ``adaptive``."""
    if text.strip().lower() == "adaptive":
        return "adaptive"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number or 'adaptive', got {text!r}") from None
