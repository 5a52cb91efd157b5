"""The Action's sharding: a shard's publishing (``shard: i/n``) and the merge step (``mode: merge``).

A shard job evaluates its part, uploads ``<artifact>-shard-<i>-of-<n>`` and posts no comment (its job
summary and annotations stay). The merge step downloads this run's shard artifacts
(:mod:`evalgate.github.shards`), merges them (:func:`evalgate.runner.merge.merge_runs`: the gate
recomputed over every case), compares the merged run with the baseline as an unsharded run would be
(``baseline``, ``fail-on-regression``), and publishes once: comment, summary, artifact ``<artifact>`` (the
name the next pull request's ``baseline: auto`` looks for), outputs; its exit status is the merged verdict.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from evalgate.cli.action_setup import ActionSetup, Emit, baseline_loader, baseline_note
from evalgate.github.commands import new_stop_token, notice, warning
from evalgate.github.context import pull_request_labels
from evalgate.github.publish import PublishOptions, publish
from evalgate.github.shards import download_shards, shard_artifact_name
from evalgate.report import console as report_console
from evalgate.runner.merge import merge_runs
from evalgate.store import reader


def shard_options(options: PublishOptions, shard: tuple[int, int] | None, emit: Emit) -> PublishOptions:
    """For a shard: its own artifact name and no PR comment (the merge step comments), said once."""
    if shard is None or options.mode != "evaluate":
        return options
    name = shard_artifact_name(options.resolved_artifact_name, shard)
    emit(f"evalgate: shard {shard[0]}/{shard[1]}: results go to artifact {name!r}; no PR comment or case "
         "annotations here: a mode: merge step after the shard jobs posts them once for the whole run")
    return replace(options, artifact_name=name, comment="never")


MISSING_SHARD_HINT = ("their shard jobs uploaded no results: re-run the failed jobs; every shard job runs the "
                      "action with the same artifact-name and comment-tag inputs and shard: i/N for each i, and the "
                      "merge job needs them (needs:, if: ${{ !cancelled() }})")
"""What the merge step says when a shard is missing: action inputs and workflow keys, never a CLI flag."""


def merge_step(setup_: ActionSetup, env: Mapping[str, str], emit: Emit) -> int:
    """``mode: merge``: download, merge, compare, publish; returns the merged verdict's exit status."""
    settings, options = setup_.settings, setup_.options
    base = options.resolved_artifact_name
    spool = Path(env.get("RUNNER_TEMP") or settings.output_path.parent) / f"evalgate-shards-{base}"
    shutil.rmtree(spool, ignore_errors=True)
    directories = download_shards(base, spool, env)
    emit(f"evalgate: merging {len(directories)} shard artifact(s): {', '.join(d.name for d in directories)}")
    baseline = None
    if settings.baseline_kind != "none":
        baseline = reader.resolve_baseline(settings.baseline, auto=baseline_loader(setup_), cwd=setup_.workspace)
    try:
        outcome = merge_runs(directories, output_dir=settings.output_path, db_path=settings.db_path,
                             baseline=baseline, settings=settings, pr_labels=pull_request_labels(setup_.ctx.event),
                             missing_hint=MISSING_SHARD_HINT)
    finally:
        shutil.rmtree(spool, ignore_errors=True)
    for line in outcome.warnings:  # each shard's own comparison: expected, the merged run is compared instead
        emit(f"evalgate: {line}")
    note = baseline_note(outcome.document)
    if note:
        level, message = note
        emit((notice if level == "notice" else warning)(message, title="evalgate: baseline"))
    token = new_stop_token()
    emit(f"::stop-commands::{token}")
    try:
        console = report_console.make_console(sys.stdout)
        report_console.render_report(outcome.document, console, verbose=settings.verbose)
        console.print(f"Merged results: {outcome.results_path}  ·  SQLite: {outcome.db_path}", markup=False)
        sys.stdout.flush()
    finally:
        emit(f"::{token}::")
    publish(outcome.results_path, outcome.db_path, ctx=setup_.ctx, options=options, env=env, emit=emit)
    return int(outcome.verdict.exit_code)
