"""Publish a finished run to GitHub: annotations, artifact, job summary, PR comment, step outputs.

Shared by the Action entrypoint and the CLI. Order: annotations → artifact upload (so the summary and
comment can link the artifact) → job summary → PR comment (so its URL can be an output) → outputs.
Every step is independent: a failure becomes one ``::warning`` line and never changes the verdict or
the exit code, which stay those of ``results.json`` (``gate.exit_code``).

Publishing options arrive as action inputs (``comment``, ``comment-tag``, ``pr-number``,
``github-token``, ``upload-artifacts``, ``artifact-name``, ``retention-days``, ``comment-template``)
and are validated up front by :func:`options_from_inputs` (bad values are a ``UserError``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from evalgate.errors import UserError
from evalgate.github.annotations import annotation_lines
from evalgate.github.api import GitHubAPI
from evalgate.github.artifacts import UploadResult, upload_artifact, validate_artifact_name
from evalgate.github.commands import CountingEmit, add_mask, counting, warning
from evalgate.github.comment import CommentResult, Stamp, find_marked_comment, upsert_comment
from evalgate.github.context import ActionContext, parse_pr_number
from evalgate.github.outputs import write_outputs, write_summary_report
from evalgate.report.digest import load_digest
from evalgate.report.markdown import SourceLinks, comment_marker, render_comment, render_summary, sanitize_tag
from evalgate.safety.redact import redact
from evalgate.store.judge_cache import cache_path
from evalgate.view.export import export_site
from evalgate.view.sources import open_catalog

BATCH_STATE_FILE = "judge-batch.json"
"""``evalgate.judges.batch.STATE_FILE`` (github/ does not import the judges)."""

CommentMode = Literal["always", "on-failure", "never"]
Mode = Literal["evaluate", "publish", "merge"]
MODES: tuple[str, ...] = get_args(Mode)
COMMENT_MODES: tuple[str, ...] = get_args(CommentMode)
DEFAULT_TAG = "default"
DEFAULT_ARTIFACT = "evalgate-results"
OUTPUT_SUMMARY_MAX_BYTES = 65_536
"""Cap (UTF-8 bytes) of the ``summary-markdown`` output: GitHub allows 1 MB of outputs per job."""
MAX_RETENTION_DAYS = 90
TRUE_TEXT = {"true", "yes", "on", "1"}
FALSE_TEXT = {"false", "no", "off", "0"}

PUBLISH_INPUTS: dict[str, str] = {
    "mode": "evaluate (default) | publish: in an on: workflow_run workflow, post the evaluated pull_request run's comment",
    "comment": "when to post the PR comment: always | on-failure | never",
    "comment-tag": "keeps one comment per tag when several evalgate steps run in one PR",
    "pr-number": "pull request to comment on (default: from the event payload)",
    "github-token": "token for the PR comment (default: the workflow's GITHUB_TOKEN)",
    "upload-artifacts": "upload results.json, results.db and judge-cache.db as one workflow artifact",
    "artifact-name": "artifact name (default evalgate-results, plus -<comment-tag> for a non-default tag)",
    "retention-days": "artifact retention in days (1–90; default: the repository setting)",
    "comment-template": "path of a jinja2 template that replaces the bundled comment/summary template",
    "allow-pr-code": "under pull_request_target with the PR's code checked out, run code from it anyway",
    "comment-author": "the login evalgate's comments are written as: only its comments are edited or deleted "
                      "(default: the token's user, github-actions[bot] for GITHUB_TOKEN; set it for a GitHub App "
                      "token, e.g. my-app[bot])",
    "untrusted-checkout": "treat the checkout as a pull request's: run no code from it, let none of its "
                          "settings choose where a secret is sent, read no evidence from it and fail a "
                          "loosening under gate-changes: fail",
}
"""Inputs that configure publishing rather than the evaluation (every other input is a setting)."""

OUTPUT_NAMES = ("passed", "exit-code", "pass-rate", "critical-failures", "results-json", "results-db",
                "comment-url", "summary-markdown", "artifact-name", "artifact-id", "artifact-url")

Emit = Callable[[str], None]


@dataclass(frozen=True)
class PublishOptions:
    """How to publish; built from action inputs by :func:`options_from_inputs`."""

    comment: CommentMode = "always"
    comment_tag: str = DEFAULT_TAG
    comment_author: str | None = None
    """The login evalgate's comments are written as (input ``comment-author``; None: learned, ``github.comment``)."""
    pr_number: int | None = None
    github_token: str | None = None
    upload_artifacts: bool = True
    artifact_name: str | None = None
    retention_days: int | None = None
    comment_template: Path | None = None
    mode: Mode = "evaluate"

    @property
    def resolved_artifact_name(self) -> str:
        """``artifact-name``, else ``evalgate-results`` plus ``-<tag>`` for a non-default comment tag."""
        return self.artifact_name or default_artifact_name(self.comment_tag)


@dataclass
class PublishReport:
    """What publishing did: the outputs written, the comment and artifact outcomes, and warnings."""

    outputs: dict[str, str] = field(default_factory=dict)
    comment: CommentResult | None = None
    artifact: UploadResult | None = None
    summary_markdown: str | None = None
    warnings: list[str] = field(default_factory=list)


def default_artifact_name(tag: str) -> str:
    """``evalgate-results`` for the default tag, else ``evalgate-results-<tag>`` (``/`` → ``-``)."""
    clean = sanitize_tag(tag).replace("/", "-")
    return DEFAULT_ARTIFACT if clean == DEFAULT_TAG else f"{DEFAULT_ARTIFACT}-{clean}"


def options_from_inputs(inputs: Mapping[str, str], *, cwd: Path | None = None) -> PublishOptions:
    """Validate the publishing inputs (hyphenated names, empty = unset); a bad value is a ``UserError``."""
    tag = (inputs.get("comment-tag") or "").strip() or DEFAULT_TAG
    if sanitize_tag(tag) != tag:
        raise UserError(f"use only letters, digits and . _ / - (got {tag!r})", where="input 'comment-tag'")
    options = PublishOptions(
        comment=_comment_mode(inputs.get("comment")),
        comment_tag=tag,
        comment_author=_login(inputs.get("comment-author")),
        pr_number=parse_pr_number(inputs.get("pr-number"), "input 'pr-number'"),
        github_token=(inputs.get("github-token") or "").strip() or None,
        upload_artifacts=parse_bool(inputs.get("upload-artifacts"), "upload-artifacts", default=True),
        artifact_name=(inputs.get("artifact-name") or "").strip() or None,
        retention_days=_retention(inputs.get("retention-days")),
        comment_template=_template_path(inputs.get("comment-template"), cwd or Path.cwd()),
        mode=_mode(inputs.get("mode")),
    )
    try:
        validate_artifact_name(options.resolved_artifact_name)
    except UserError as exc:
        raise UserError(str(exc), where="input 'artifact-name'") from None
    return options


def _login(value: str | None) -> str | None:
    """A GitHub login (``octocat``, ``my-app[bot]``) or None when unset; anything else is a ``UserError``."""
    text = (value or "").strip()
    if not text:
        return None
    if not re.fullmatch(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?", text):
        raise UserError(f"not a GitHub login (got {text!r}); e.g. github-actions[bot] or my-app[bot]",
                        where="input 'comment-author'")
    return text


def parse_bool(value: str | None, name: str, *, default: bool) -> bool:
    """``true/yes/on/1`` or ``false/no/off/0`` (any case); empty → ``default``."""
    text = (value or "").strip().lower()
    if not text:
        return default
    if text in TRUE_TEXT | FALSE_TEXT:
        return text in TRUE_TEXT
    raise UserError(f"expected true or false, got {value!r}", where=f"input '{name}'")


def _comment_mode(value: str | None) -> CommentMode:
    text = (value or "always").strip().lower()
    if text not in COMMENT_MODES:
        raise UserError(f"expected one of {', '.join(COMMENT_MODES)}, got {value!r}", where="input 'comment'")
    return text  # type: ignore[return-value]


def _mode(value: str | None) -> Mode:
    text = (value or "evaluate").strip().lower()
    if text not in MODES:
        raise UserError(f"expected one of {', '.join(MODES)}, got {value!r}", where="input 'mode'")
    return text  # type: ignore[return-value]


def _retention(value: str | None) -> int | None:
    text = (value or "").strip()
    if not text:
        return None
    if not text.isdigit() or not 1 <= int(text) <= MAX_RETENTION_DAYS:
        raise UserError(f"expected a whole number of days from 1 to {MAX_RETENTION_DAYS}, got {value!r}",
                        where="input 'retention-days'")
    return int(text)


def _template_path(value: str | None, cwd: Path) -> Path | None:
    text = (value or "").strip()
    if not text:
        return None
    path = Path(text) if os.path.isabs(text) else cwd / text
    if not path.is_file():
        raise UserError(f"template file not found: {text}", where="input 'comment-template'")
    return path


# ---------------------------------------------------------------------------------------------
# decisions (pure)


def comment_decision(mode: CommentMode, passed: bool, ctx: ActionContext, token: str | None) -> tuple[str, str | None]:
    """What to do about the PR comment: ``("post" | "update-only" | "skip", reason)``.

    ``on-failure`` with a passing gate only updates an existing comment (so it never shows a stale
    failure) and creates none. Without a PR (push, schedule …) or a token the comment is skipped.
    """
    if mode == "never":
        return "skip", "PR comment disabled (comment: never)"
    if ctx.pr_number is None:
        return "skip", f"PR comment skipped: {ctx.pr_reason or 'no pull request for this event'}"
    if not token:
        return "skip", "PR comment skipped: no github-token"
    if not ctx.owner_repo:
        return "skip", "PR comment skipped: GITHUB_REPOSITORY is not set"
    if mode == "on-failure" and passed:
        return "update-only", None
    return "post", None


def workspace_path(path: Path, workspace: str | None) -> str:
    """``path`` relative to the workspace with ``/`` separators; absolute when it lies outside it."""
    absolute = path.resolve()
    if workspace:
        root = Path(workspace).resolve()
        if absolute == root or root in absolute.parents:
            return absolute.relative_to(root).as_posix()
    return str(absolute)


def build_outputs(results: Mapping[str, Any], *, results_path: Path, db_path: Path, workspace: str | None,
                  comment_url: str | None, summary_markdown: str, artifact_name: str = DEFAULT_ARTIFACT,
                  artifact: UploadResult | None = None) -> dict[str, str]:
    """The step outputs. ``pass-rate`` is the fraction of cases passed (0–1); paths are workspace-relative;
    ``artifact-name``, ``-id`` and ``-url`` are empty unless ``artifact`` says the upload succeeded."""
    uploaded = artifact is not None and artifact.uploaded
    gate = results.get("gate") or {}
    summary = results.get("summary") or {}
    return {
        "passed": "true" if gate.get("passed") else "false",
        "exit-code": str(gate.get("exit_code", 1)),
        "pass-rate": _number(summary.get("pass_rate")),
        "critical-failures": str(summary.get("critical_failures") or 0),
        "results-json": workspace_path(results_path, workspace),
        "results-db": workspace_path(db_path, workspace),
        "comment-url": comment_url or "",
        "summary-markdown": summary_markdown,
        "artifact-name": artifact_name if uploaded else "",
        "artifact-id": str(artifact.artifact_id or "") if artifact is not None and uploaded else "",
        "artifact-url": (artifact.url or "") if artifact is not None and uploaded else "",
    }


def error_outputs(exit_code: int) -> dict[str, str]:
    """Outputs for a run that stopped before a verdict (configuration or dataset error)."""
    return {"passed": "false", "exit-code": str(exit_code), "pass-rate": "", "critical-failures": "",
            "results-json": "", "results-db": "", "comment-url": "", "summary-markdown": "", "artifact-name": "",
            "artifact-id": "", "artifact-url": ""}


def _number(value: Any) -> str:
    return "" if value is None else f"{float(value):.6g}"


# ---------------------------------------------------------------------------------------------
# the publishing steps (I/O)


STEPS = ("artifact", "summary", "comment", "outputs", "annotations")
"""Every publishing step, in the order they run (the Action runs them all; ``evalgate merge --comment``
runs ``summary`` and ``comment``)."""


def command_warning(message: str) -> str:
    """A warning as a workflow command (``::warning title=evalgate::…``)."""
    return warning(message, title="evalgate")


def publish(
    results_path: Path,
    db_path: Path,
    *,
    ctx: ActionContext,
    options: PublishOptions,
    env: Mapping[str, str],
    emit: Emit = print,
    api_factory: Callable[[str, str], GitHubAPI] | None = None,
    steps: Collection[str] = STEPS,
    warning_line: Callable[[str], str] = command_warning,
    require_comment: bool = False,
    artifact_url: str | None = None,
    annotate: bool = True,
) -> PublishReport:
    """Run the publishing ``steps`` for the run in ``results_path``; never raises for a publishing problem.

    ``api_factory(token, api_url)`` builds the REST client (tests inject timeouts). ``artifact_url``: the
    results' artifact when it was uploaded elsewhere (``evalgate publish``); ``annotate=False`` leaves out
    the file annotations (they belong to the run that evaluated). ``warning_line`` formats each warning
    for ``emit``; with ``require_comment`` a skipped PR comment (no pull request, no token) is a warning
    rather than a note.
    """
    report = PublishReport()

    results = load_digest(results_path)  # bounded memory for any number of cases (report.digest)
    base_dir = ctx.workspace or os.getcwd()
    counter = counting(emit)
    emit = counter

    def warn(message: str) -> None:
        report.warnings.append(redact(message))
        emit(warning_line(message))

    if "artifact" in steps:
        report.artifact = _step("artifact upload", warn,
                                lambda: _upload(results_path, db_path, options, env, emit, warn))
    artifact_url = (report.artifact.url if report.artifact else None) or artifact_url
    links = _source_links(ctx, base_dir)
    if "summary" in steps:
        _step("job summary", warn, lambda: write_summary_report(
            ctx.summary_path, results, run_url=ctx.run_url, artifact_url=artifact_url, tag=options.comment_tag,
            template_path=options.comment_template, source_links=links))
        summary_path = ctx.summary_path
        if summary_path and report.artifact is not None and report.artifact.uploaded \
                and (results_path.parent / SITE_DIR / "index.html").is_file():
            _step("job summary", warn, lambda: _append(summary_path, site_summary_line(artifact_url)))
    if "comment" in steps:
        note = warn if require_comment else emit_note(emit)
        report.comment = _step("PR comment", warn, lambda: _comment(
            results, ctx, options, artifact_url, links, emit, warn, note, api_factory or _default_api))
    if "outputs" in steps:
        report.summary_markdown = _step("summary-markdown output", warn, lambda: render_summary(
            results, run_url=ctx.run_url, artifact_url=artifact_url, tag=options.comment_tag,
            template_path=options.comment_template, max_bytes=OUTPUT_SUMMARY_MAX_BYTES, source_links=links)) or ""
        report.outputs = build_outputs(results, results_path=results_path, db_path=db_path, workspace=ctx.workspace,
                                       comment_url=report.comment.url if report.comment else None,
                                       summary_markdown=report.summary_markdown,
                                       artifact_name=options.resolved_artifact_name, artifact=report.artifact)
        _step("step outputs", warn, lambda: write_outputs(ctx.output_path, report.outputs))
    if annotate and "annotations" in steps:  # last: the step's own problems above get the runner's budget first
        _step("annotations", warn, lambda: _annotate(results, ctx, base_dir, counter))
    return report


def _append(path: str | Path, text: str) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(text)


def emit_note(emit: Emit) -> Callable[[str], None]:
    """``emit("evalgate: " + message)``: a note that is not a warning."""
    return lambda message: emit(f"evalgate: {message}")


def _step(name: str, warn: Callable[[str], None], action: Callable[[], Any]) -> Any:
    """Run one publishing step; any exception becomes a warning and ``None``."""
    try:
        return action()
    except UserError as exc:
        warn(f"{name} failed: {exc}")
    except Exception as exc:  # publishing must never change the verdict
        warn(f"{name} failed: {type(exc).__name__}: {exc}")
    return None


def _annotate(results: Mapping[str, Any], ctx: ActionContext, base_dir: str, emit: CountingEmit) -> None:
    lines = annotation_lines(results, workspace=ctx.workspace, base_dir=base_dir, max_errors=emit.left("error"),
                             max_warnings=emit.left("warning"))
    for line in lines:
        emit(line)


def _upload(results_path: Path, db_path: Path, options: PublishOptions, env: Mapping[str, str], emit: Emit,
            warn: Callable[[str], None]) -> UploadResult | None:
    batches = results_path.parent / BATCH_STATE_FILE  # judge_mode batch: a re-run resumes its batches
    files = [p for p in (results_path, db_path, cache_path(db_path), batches) if p.is_file()]
    if not options.upload_artifacts:
        emit(f"evalgate: artifact upload disabled (upload-artifacts: false); the files are at "
             f"{', '.join(str(p) for p in files)}")
        return None
    site = _export_site(db_path, results_path.parent / SITE_DIR, emit)
    if site is not None:
        files.append(site)
    result = upload_artifact(options.resolved_artifact_name, files, env=env, retention_days=options.retention_days,
                             mask=lambda value: emit(add_mask(value)))
    if result.uploaded:
        emit(f"evalgate: uploaded artifact {options.resolved_artifact_name!r} ({result.size} bytes)"
             + (f": {result.url}" if result.url else ""))
    if result.warning:
        warn(result.warning)
    return result


SITE_DIR = "evalgate-site"
"""The static results browser (``evalgate view --export``) uploaded in the results artifact."""
SITE_PAGES = 300
"""Pages exported for the artifact (the run, its failed cases, trends; the rest stays in ``evalgate view``)."""


def _export_site(db_path: Path, directory: Path, emit: Emit) -> Path | None:
    """``evalgate view --export`` of the run's database into ``directory`` for the artifact; None (and a
    note) when it cannot be written: the results are uploaded all the same."""
    if not db_path.is_file():
        return None
    try:
        catalog = open_catalog([db_path], immutable=True)  # the run is over: no journal files beside it
        try:
            export_site(catalog, directory, max_pages=SITE_PAGES)
        finally:
            catalog.close()
    except Exception as exc:  # never lose the upload of the results themselves
        emit(f"evalgate: the results browser was not exported ({type(exc).__name__}: {redact(str(exc))})")
        return None
    return directory


def site_summary_line(artifact_url: str | None) -> str:
    """The job summary's pointer to the static results browser in the artifact."""
    where = f"[the artifact]({artifact_url})" if artifact_url else "the results artifact"
    return (f"\n**Browse this run:** download {where}, unzip it and open `{SITE_DIR}/index.html` "
            "(or run `evalgate view` on the unzipped folder).\n")


def _source_links(ctx: ActionContext, base_dir: str) -> SourceLinks | None:
    if not (ctx.repository and ctx.blob_sha):
        return None
    return SourceLinks(server_url=ctx.server_url, repository=ctx.repository, sha=ctx.blob_sha,
                       workspace=ctx.workspace, base_dir=base_dir)


def _default_api(token: str, api_url: str) -> GitHubAPI:
    return GitHubAPI(token=token, base_url=api_url)


def _comment(results: Mapping[str, Any], ctx: ActionContext, options: PublishOptions, artifact_url: str | None,
             links: SourceLinks | None, emit: Emit, warn: Callable[[str], None], note: Callable[[str], None],
             api_factory: Callable[[str, str], GitHubAPI]) -> CommentResult:
    passed = bool((results.get("gate") or {}).get("passed"))
    action, reason = comment_decision(options.comment, passed, ctx, options.github_token)
    if action == "skip":
        note(reason or "PR comment skipped")
        return CommentResult("skipped", warning=reason)
    assert ctx.repository is not None and ctx.pr_number is not None and options.github_token
    body = render_comment(results, run_url=ctx.run_url, artifact_url=artifact_url, tag=options.comment_tag,
                          template_path=options.comment_template, source_links=links)
    with api_factory(options.github_token, ctx.api_url) as api:
        if action == "update-only" and not _has_comment(api, ctx, options.comment_tag, options.comment_author):
            emit("evalgate: PR comment skipped: the gate passed (comment: on-failure) and there is no earlier comment")
            return CommentResult("skipped")
        stamp = Stamp(head=ctx.head_sha or "", at=str(results.get("timestamp") or ""),
                      run=f"{ctx.run_id}.{ctx.run_attempt or 1}" if ctx.run_id else "")
        result = upsert_comment(api, ctx.repository, ctx.pr_number, body, options.comment_tag, stamp=stamp,
                                author=options.comment_author)
    if result.action == "failed":
        warn(result.warning or "PR comment failed")
    elif result.warning:  # a fresher report is already shown
        note(result.warning)
    else:
        emit(f"evalgate: PR comment {result.action}" + (f": {result.url}" if result.url else ""))
    return result


def _has_comment(api: GitHubAPI, ctx: ActionContext, tag: str, author: str | None) -> bool:
    assert ctx.repository is not None and ctx.pr_number is not None
    return find_marked_comment(api, ctx.repository, ctx.pr_number, comment_marker(tag), author) is not None
