"""The Action path of the entrypoint: ``INPUT_*`` + ``GITHUB_*`` + event → Settings → run → publish.

Steps: mask secrets (before anything else is printed) → read inputs → build the Actions context and
``Settings`` (inputs layer; relative ``output-dir``/``db`` anchored at ``GITHUB_WORKSPACE``) → confine every
path to the workspace or the runner temp directory (``evalgate.github.paths``, exit 2 otherwise) → run the
same pipeline as ``evalgate run`` with its console report wrapped in ``::stop-commands::`` (answers
are untrusted text) → publish. Exit status and the ``exit-code`` output follow the CLI's rule
(``evalgate.errors``): the verdict's 0/1/130, always equal to results.json's ``gate.exit_code``; 2 with
one ``::error`` line for a configuration or dataset error or an unreachable target/judge; 130 for an
interruption before any result was written; 1 with one ``::error`` line for a crash. Publishing
problems are warnings only. ``baseline: auto`` is answered
from the base branch's artifact of the same name (``evalgate.github.baseline``); a path baseline is
read by the run itself, and either way a missing baseline is a warning.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from evalgate.cli.action_merge import merge_step, shard_options
from evalgate.cli.action_setup import ActionSetup, Emit, baseline_loader, baseline_note
from evalgate.cli.main import build_parser, report_crash
from evalgate.cli.options import cli_values
from evalgate.config.references import refuse_user_code
from evalgate.config.sections import PublishSettings
from evalgate.config.settings import FIELD_NAMES, Settings, build_settings
from evalgate.config.trust import MARK, marked_untrusted, refuse_checkout_redirects
from evalgate.dataset.selected import demo_dir
from evalgate.errors import EXIT_GATE_FAILED, EXIT_INTERRUPTED, EXIT_USER_ERROR, Interrupt, UserError
from evalgate.export.langfuse import LangfuseError, export_results, require_keys
from evalgate.github.checkout import checked_out_commit, secrets_reason, untrusted_checkout
from evalgate.github.commands import counting, error, new_stop_token, notice, warning
from evalgate.github.context import ActionContext, pull_request_labels, read_inputs
from evalgate.github.enterprise import degrade
from evalgate.github.masking import env_secrets, mask_all, settings_secrets
from evalgate.github.outputs import write_outputs
from evalgate.github.paths import confine, confine_config
from evalgate.github.publish import (
    PUBLISH_INPUTS,
    PublishOptions,
    error_outputs,
    options_from_inputs,
    parse_bool,
    publish,
)
from evalgate.github.relay import relay
from evalgate.github.workspace import hand_over, missing_ancestors
from evalgate.report import console as report_console
from evalgate.report.progress import make_progress
from evalgate.report.view import gate_changes_view
from evalgate.runner.run import RunOutcome, execute
from evalgate.store.judge_cache import cache_path

LIST_INPUTS = ("dataset", "case-ids", "category", "tags", "compat")
"""Inputs that take a list: one item per line or comma-separated."""
IGNORED_INPUTS = ("args", "entrypoint")
"""Inputs every Docker action accepts; the runner hands them to ``docker run`` itself."""

ACTION_DEFAULTS = {"baseline": "auto"}
"""Defaults that differ in the Action: a PR is compared with its base branch's last run unless
evalgate.yaml, an ``EVALGATE_*`` variable or an input says otherwise."""


def emit_line(line: str) -> None:
    """Print one log line (workflow commands included) and flush, so order is kept with stderr."""
    print(line, flush=True)


def split_inputs(inputs: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """(settings inputs, publishing inputs, unknown input names); list inputs get newlines → commas."""
    settings_inputs: dict[str, str] = {}
    publish_inputs: dict[str, str] = {}
    unknown: list[str] = []
    for name, value in sorted(inputs.items()):
        if name in PUBLISH_INPUTS:
            publish_inputs[name] = value
        elif name.replace("-", "_") in FIELD_NAMES:
            settings_inputs[name] = list_text(value) if name in LIST_INPUTS else value
        elif name not in IGNORED_INPUTS:
            unknown.append(name)
    return settings_inputs, publish_inputs, unknown


def list_text(value: str) -> str:
    """Multi-line list input → comma-separated (blank lines and surrounding spaces dropped)."""
    if value.lstrip().startswith("["):
        return value
    items = [item.strip() for line in value.splitlines() for item in line.split(",")]
    return ",".join(item for item in items if item)


def anchor(settings: Settings, workspace: Path) -> Settings:
    """Relative ``output_dir`` and ``db`` resolved against the workspace (the runner's checkout)."""
    update: dict[str, str] = {}
    if not os.path.isabs(settings.output_dir):
        update["output_dir"] = str(workspace / settings.output_dir)
    if settings.db and not os.path.isabs(settings.db):
        update["db"] = str(workspace / settings.db)
    return settings.model_copy(update=update) if update else settings


def cli_flags(argv: Sequence[str]) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """``with: args`` / ``docker run … ARGS`` in Actions mode: ``evalgate run`` flags, highest precedence;
    with the flags that set them and the notices for the seeds' spellings (``cli.options.cli_values``)."""
    if not argv:
        return {}, {}, []
    try:
        args = build_parser().parse_args(["run", *argv])
    except SystemExit:
        raise UserError(f"invalid arguments: {' '.join(argv)}", where="args") from None
    return cli_values(args)


def setup(env: Mapping[str, str], argv: Sequence[str], emit: Emit) -> ActionSetup:
    """Inputs, context and settings; any invalid value raises ``UserError`` naming the input."""
    inputs = read_inputs(env)
    allow_pr_code = parse_bool(inputs.pop("allow-pr-code", ""), "allow-pr-code", default=False)
    marked = parse_bool(inputs.pop("untrusted-checkout", ""), "untrusted-checkout", default=False) \
        or marked_untrusted(env)  # the input, or EVALGATE_UNTRUSTED_CHECKOUT in the step's env: the same mark
    settings_inputs, publish_inputs, unknown = split_inputs(inputs)
    for name in unknown:
        emit(warning(f"unknown input '{name}' ignored", title="evalgate"))
    workspace = Path(env.get("GITHUB_WORKSPACE") or os.getcwd())
    options = options_from_inputs(publish_inputs, cwd=workspace)
    ctx = ActionContext.from_env(env, pr_number=options.pr_number)
    ctx = replace(ctx, evaluated_sha=checked_out_commit(workspace))  # links point at what was evaluated
    values, origins, notices = cli_flags(argv)
    confine_config(env, workspace, [(str(values.get("config") or ""), "--config"),
                                    (settings_inputs.get("config", ""), "input 'config'"),
                                    (env.get("EVALGATE_CONFIG", ""), "EVALGATE_CONFIG")])
    if marked:  # the whole run treats the checkout as untrusted (config.trust.untrusted_checkout), not only secrets
        env = {**env, MARK: "true"}
    settings, suite_config, _ = build_settings(cli=values, inputs=settings_inputs, env=env, cwd=workspace,
                                               defaults=ACTION_DEFAULTS, cli_origins=origins)
    for line in notices + settings.notices:
        emit(notice(line, title="evalgate"))
    if settings.langfuse:
        require_keys(PublishSettings.of(settings), where="langfuse")
    settings = anchor(settings, workspace)
    settings, options = degrade(ctx.server_url, settings, options, emit)  # Enterprise Server: notices, no failure
    confine(settings, env, workspace, comment_template=options.comment_template, bundled=[demo_dir()])
    guard_pr_code(ctx, settings, options, allow=allow_pr_code, emit=emit, marked=marked)
    return ActionSetup(ctx=ctx, options=options, settings=settings, suite_config=suite_config, workspace=workspace)


def guard_pr_code(ctx: ActionContext, settings: Settings, options: PublishOptions, *, allow: bool,
                  emit: Emit, marked: bool = False) -> None:
    """Under ``pull_request_target`` or ``workflow_run`` with the pull request's code checked out (or a checkout
    the workflow marks ``untrusted-checkout: true``), run none of it (a ``UserError`` naming what would have run;
    references refuse to load) and let none of its settings choose where a secret is sent (``UserError`` naming
    the setting: ``config.trust.refuse_checkout_redirects``), unless ``allow-pr-code``."""
    reason = untrusted_checkout(ctx, ctx.evaluated_sha, marked=marked)
    if reason and allow:
        emit(warning("allow-pr-code: true: the pull request's code runs with this workflow's secrets",
                     title=f"evalgate: {ctx.event_name or 'untrusted checkout'}"))
        reason = None
    if reason:
        refuse_checkout_redirects(settings, secrets_reason(ctx, ctx.evaluated_sha, marked=marked),
                                  Path(ctx.workspace) if ctx.workspace else None)
    refuse_user_code(reason)
    if reason and settings.target == "command":
        raise UserError(f"command target not run: {reason}", where="target")
    if reason and options.comment_template is not None:
        raise UserError(f"template not rendered: {reason}", where="input 'comment-template'")


def evaluate(setup_: ActionSetup, emit: Emit) -> RunOutcome:
    """Run the pipeline and print the console report inside a ``::stop-commands::`` block."""
    settings, publishing = setup_.settings, PublishSettings.of(setup_.settings)
    token = new_stop_token()
    emit(f"::stop-commands::{token}")
    try:
        outcome = asyncio.run(execute(
            settings, setup_.suite_config, cwd=setup_.workspace,
            progress_for=lambda total: make_progress(publishing.progress, total,
                                                     every_seconds=publishing.progress_interval_seconds),
            baseline_loader=baseline_loader(setup_), pr_labels=pull_request_labels(setup_.ctx.event)))
        console = report_console.make_console(sys.stdout)
        report_console.render_report(outcome.document, console, verbose=publishing.verbose)
        report_console.render_failures(outcome.failures, console)
        console.print(f"Results: {outcome.results_path}  ·  SQLite: {outcome.db_path}", markup=False)
        sys.stdout.flush()
    finally:
        emit(f"::{token}::")
    return outcome


def gate_changes_line(document: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(level, message)``: one annotation for what the run loosened against its base run (a warning), or
    that the base run's gate policy is unknown (a notice); None when there is nothing to say."""
    view = gate_changes_view(document)
    if view is None:
        return None
    if view["items"]:
        more = f"; +{view['omitted']} more" if view["omitted"] else ""
        approved = f" (approved with the label {view['approved_by']})" if view["approved_by"] else ""
        return "warning", f"this pull request loosens the gate{approved}: {'; '.join(view['items'])}{more}"
    return "notice", str(view["note"])


def written_paths(settings: Settings) -> list[Path]:
    """What a run writes: the output directory, the SQLite file (with its journal files) and the judge cache."""
    db = settings.db_path
    sidecars = [db.with_name(db.name + suffix) for suffix in ("-wal", "-shm", "-journal")]
    return [settings.output_path, db, *sidecars, cache_path(db)]


def run_action(env: Mapping[str, str], argv: Sequence[str] = (), emit: Emit = emit_line) -> int:
    """The whole Action step; returns the exit status. Whatever happens, files written into the
    workspace end up owned by the workspace's owner (:mod:`evalgate.github.workspace`)."""
    emit = counting(emit)  # publishing spends what is left of the runner's annotation budget
    mask_all(env_secrets(env), emit)
    previous = Interrupt.install()  # SIGINT/SIGTERM during the set-up: exit 130, nothing written
    try:
        try:
            setup_ = setup(env, argv, emit)
        except UserError as exc:
            return _user_error(exc, env, emit)
        except KeyboardInterrupt:
            return _interrupted(env, emit)
        paths = written_paths(setup_.settings)
        created = missing_ancestors(paths, setup_.workspace)
        try:
            return _evaluate_and_publish(setup_, env, emit)
        finally:  # with the files a run set aside beside its database (store.safe.set_aside)
            db = setup_.settings.db_path
            hand_over([*paths, *db.parent.glob(f"{db.name}.rejected-*"),
                       *db.parent.glob(f"{cache_path(db).name}.rejected-*")], setup_.workspace, created)
    finally:
        Interrupt.restore(previous)
        refuse_user_code(None)  # the guard belongs to this step only (in-process callers, tests)


def _evaluate_and_publish(setup_: ActionSetup, env: Mapping[str, str], emit: Emit) -> int:
    if setup_.options.mode == "publish":
        return relay(env=env, options=setup_.options, output_dir=setup_.settings.output_path, emit=emit)
    if setup_.options.mode == "merge":
        try:
            return merge_step(setup_, env, emit)
        except UserError as exc:  # no shard artifacts, shards that disagree, a missing shard
            return _user_error(exc, env, emit)
    try:
        mask_all(settings_secrets(setup_.settings), emit)
        outcome = evaluate(setup_, emit)
    except UserError as exc:
        return _user_error(exc, env, emit)
    except KeyboardInterrupt:  # before the run wrote anything (it handles signals itself once started)
        return _interrupted(env, emit)
    except Exception as exc:  # a bug: results already written say status 'crashed' and exit_code 1
        code = report_crash(exc, directory=setup_.settings.output_path)  # one line on stderr, the traceback in a file
        emit(error(f"internal error ({type(exc).__name__}); the gate did not pass", title="evalgate: crashed"))
        _best_effort_outputs(env, error_outputs(code), emit)
        return EXIT_GATE_FAILED
    note = baseline_note(outcome.document)
    if note:
        level, message = note
        emit((notice if level == "notice" else warning)(message, title="evalgate: baseline"))
    changes = gate_changes_line(outcome.document)
    if changes:
        level, message = changes
        emit((notice if level == "notice" else warning)(message, title="evalgate: gate changes"))
    for text in (outcome.document.get("metadata") or {}).get("warnings") or []:
        emit(warning(str(text), title="evalgate"))
    for line in outcome.notices:
        emit(notice(line, title="evalgate"))
    publishing = PublishSettings.of(setup_.settings)
    if publishing.langfuse:
        try:
            emit(notice(export_results(outcome.results_path, publishing), title="evalgate: Langfuse"))
        except LangfuseError as exc:
            emit(warning(f"Langfuse export failed: {exc}", title="evalgate: Langfuse"))
    options = shard_options(setup_.options, setup_.settings.shard_tuple, emit)
    # a shard's failed cases are annotated once, by the merge step that sees every shard
    publish(outcome.results_path, outcome.db_path, ctx=setup_.ctx, options=options, env=env, emit=emit,
            annotate=setup_.settings.shard_tuple is None)
    return int(outcome.verdict.exit_code)


def _user_error(exc: UserError, env: Mapping[str, str], emit: Emit) -> int:
    """One ``::error`` line for a configuration or dataset error, the error outputs; exit 2."""
    emit(error(str(exc), title="evalgate: configuration or dataset error"))
    _best_effort_outputs(env, error_outputs(EXIT_USER_ERROR), emit)
    return EXIT_USER_ERROR


def _interrupted(env: Mapping[str, str], emit: Emit) -> int:
    """One ``::error`` line for a signal before any result was written, the error outputs; exit 130."""
    emit(error("interrupted before any result was written", title="evalgate: interrupted"))
    _best_effort_outputs(env, error_outputs(EXIT_INTERRUPTED), emit)
    return EXIT_INTERRUPTED


def _best_effort_outputs(env: Mapping[str, str], outputs: Mapping[str, str], emit: Emit) -> None:
    try:
        write_outputs(env.get("GITHUB_OUTPUT"), outputs)
    except (UserError, ValueError) as exc:
        emit(warning(f"step outputs not written: {exc}", title="evalgate"))
