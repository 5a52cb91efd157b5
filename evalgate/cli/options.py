"""The options ``run``, ``validate``, ``calibrate`` and the Action share: the dataset and selection flags, the
gate/output/target/execution flags, and how parsed flags become settings (``cli_values``)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from evalgate.safety.redact import redact

BOOL = argparse.BooleanOptionalAction


class DIALECTS:
    """Whether the parser adds the dialects' verbs and flags (off for ``--version`` and top-level help:
    loading the dialects imports the data model)."""

    on = True



def _dialect_flags(group: Any, after: str) -> None:
    """The dialects' own spellings of the flag ``after`` (``evalgate.dialect.cli_flags``), right after it;
    none when the dialects are not loaded (``evalgate --version``, top-level help)."""
    if not DIALECTS.on:
        return
    from evalgate import dialect  # lazy: the registry imports the data model (pydantic), not needed for --help

    for flag in dialect.cli_flags(after):
        group.add_argument(*flag.flags, **flag.options)


def _compat_help() -> str:
    """``--compat``'s help, naming the registered dialects (first … last) and those with an output document
    (``evalgate.dialect.DIALECTS``); without the names when the dialects are not loaded."""
    if not DIALECTS.on:
        return ("turn on these in-house frameworks' dialects (comma-separated) for cases without a kind, and "
                "produce their output shapes: files beside results.json and the seed's console summary")
    from evalgate import dialect  # lazy: the registry imports the data model (pydantic), not needed for --help

    names = list(dialect.DIALECTS)
    documents = ", ".join(name for name, one in dialect.DIALECTS.items() if one.document is not None)
    return (f"turn on these in-house frameworks' dialects ({names[0]} … {names[-1]}, comma-separated) for cases "
            f"without a kind, and produce their output shapes ({documents}): files beside results.json and the "
            "seed's console summary")


def add_selection(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("dataset and selection")
    group.add_argument("--dataset", "-d", action="append", metavar="PATH",
                       help="dataset file, directory or glob (repeatable; default: the bundled demo suites)")
    _dialect_flags(group, "--dataset")
    group.add_argument("--config", "-c", metavar="FILE", help="evalgate.yaml (default: ./evalgate.yaml if present)")
    group.add_argument("--case-ids", metavar="IDS", help="comma-separated case ids (overrides --first-n)")
    _dialect_flags(group, "--case-ids")
    group.add_argument("--first-n", type=int, metavar="N", help="run only the first N cases in dataset order")
    group.add_argument("--category", metavar="NAMES", help="comma-separated categories to keep")
    group.add_argument("--tags", metavar="TAGS", help="comma-separated tags to keep (any)")
    group.add_argument("--shard", metavar="I/N", help="run the stable shard I of N (by case-id hash)")


def add_run_options(parser: argparse.ArgumentParser) -> None:
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
    out.add_argument("--compat", metavar="SEEDS", help=_compat_help())
    _dialect_flags(out, "--compat")
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
    _dialect_flags(target, "--target-url")
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
    for flag, text in (  # durations in seconds
        ("--api-timeout-seconds", "time limit per attempt: connect, send, wait and read (default 60)"),
        ("--connect-timeout-seconds", "time limit to open a connection, TCP and TLS (default 10)"),
        ("--read-timeout-seconds", "longest silence while a reply is awaited: before its first byte or between two "
                                   "chunks (default: no limit beyond --api-timeout-seconds)"),
        ("--progress-interval-seconds", "seconds between plain progress lines (default 10)"),
    ):
        ex.add_argument(flag, type=float, metavar="S", help=text)
    ex.add_argument("--max-answer-chars", type=int, metavar="N",
                    help="largest answer kept whole (default 1000000); a larger one is cut and its case errored")
    ex.add_argument("--repeat", type=repeat_count, metavar="N|adaptive",
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


def repeat_count(text: str) -> int | str:
    """``--repeat``: a whole number or ``adaptive``."""
    if text.strip().lower() == "adaptive":
        return "adaptive"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number or 'adaptive', got {text!r}") from None


NOT_SETTINGS = frozenset({"verb", "func", "dry_run", "explain"})


def cli_values(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """(settings from the flags, flag that set a setting when it is not ``--<setting>``, notices for the
    dialects' spellings: ``evalgate.dialect.read_cli``)."""
    from evalgate import dialect  # lazy: the registry imports the data model (pydantic), not needed for --help

    skip = NOT_SETTINGS | dialect.cli_destinations()
    values = {k: v for k, v in vars(args).items() if v is not None and k not in skip}
    origins: dict[str, str] = {}
    notices: list[str] = []
    values.pop("dataset", None)
    if args.dataset:
        values["dataset"] = list(args.dataset)
    dialect.read_cli(args, values, origins, notices)
    return values, origins, notices


def print_notices(notices: list[str]) -> None:
    for notice in notices:
        print(f"evalgate: notice: {redact(notice)}", file=sys.stderr)


def guard_secret_destinations(settings: Any) -> None:
    """Inside a workflow step whose checkout is a pull request's (``pull_request_target`` or ``workflow_run``
    with other code than the base commit checked out, or ``EVALGATE_UNTRUSTED_CHECKOUT=true``), refuse a setting
    from the checkout's evalgate.yaml that would choose where a secret is sent (``config.trust``; exit 2)."""
    from evalgate.config.trust import refuse_checkout_redirects  # lazy: the run stack (pydantic, httpx), not for --help
    from evalgate.github.checkout import env_secrets_reason  # lazy: the run stack (pydantic, httpx), not for --help

    cwd = Path.cwd()
    refuse_checkout_redirects(settings, env_secrets_reason(os.environ, cwd), cwd)
