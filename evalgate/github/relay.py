"""Publish a pull request's results from a trusted ``workflow_run`` workflow (fork pull requests).

A ``pull_request`` run from a fork gets a read-only token: it can evaluate and upload the artifact, but
not comment. The second workflow, ``on: workflow_run`` (types: completed) of the first, runs in the base
repository with ``pull-requests: write`` and ``actions: read`` and calls this module
(``evalgate publish``, or the action with ``mode: publish``). It never checks out or runs the fork's
code: it only reads data.

1. The evaluated run: ``workflow_run`` in the event payload (id, head SHA, head branch and owner, the
   triggering event), or ``--run-id`` (then ``GET /repos/{repo}/actions/runs/{id}``).
2. Its artifact: ``GET /repos/{repo}/actions/runs/{id}/artifacts?name=<artifact-name>``, downloaded like a
   baseline (the 302 target fetched without the token, size caps, sha256 digest checked) and unzipped
   into the output directory (``results.json``, ``results.db``).
3. The pull request, never taken from the artifact (the fork controls its content): a number listed in
   ``workflow_run.pull_requests`` (same-repository branches), else ``GET /repos/{repo}/pulls?head=
   <owner>:<branch>&state=open``; either way the pull request's head SHA must equal the run's head SHA.
4. The same comment as the evaluating step would have posted (same renderer, same tag marker, upserted),
   linking the evaluating run and its artifact, plus the job summary and the step outputs.

Exit status: 0 when the comment was posted (or already up to date), 1 with one ``::error`` line when it
could not be (no artifact, no matching pull request, comment refused), 2 for a configuration error.
The verdict itself is the evaluating run's check; this job reports it, it does not re-decide it.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from evalgate.errors import UserError
from evalgate.github.api import GitHubAPI, GitHubAPIError
from evalgate.github.baseline import MAX_ZIP_BYTES, BaselineUnavailable, download_artifact
from evalgate.github.commands import error, notice, warning
from evalgate.github.context import ActionContext
from evalgate.github.publish import PublishOptions, publish
from evalgate.github.validate import MAX_WARNINGS, prune_head, prune_record
from evalgate.safety.redact import redact
from evalgate.store.reader import MAX_BASELINE_RECORDS, RESULTS_KEYS
from evalgate.store.results_json import COPY_CHUNK, StreamedDocument

Emit = Callable[[str], None]
RESULT_FILES = ("results.json", "results.db")
MAX_PUBLISHED_BYTES = 4 * 1024 * 1024 * 1024
"""Largest results.json or results.db unzipped from the artifact (each is read streamed; a 1,000,000-case
results.json is ≈ 700 MB)."""


class RelayError(Exception):
    """Why the results could not be published (one line, safe to print)."""


@dataclass(frozen=True)
class EvaluatedRun:
    """The ``pull_request`` workflow run whose results are published."""

    run_id: int
    repository: str
    head_sha: str | None = None
    head_branch: str | None = None
    head_owner: str | None = None
    event: str | None = None
    html_url: str | None = None
    pull_requests: list[Mapping[str, Any]] = field(default_factory=list)


def evaluated_run(payload: Mapping[str, Any], repository: str) -> EvaluatedRun:
    """The run described by a ``workflow_run`` event payload or a ``GET …/actions/runs/{id}`` reply."""
    run = payload.get("workflow_run") if "workflow_run" in payload else payload
    if not isinstance(run, Mapping) or not isinstance(run.get("id"), int):
        raise UserError("the event has no workflow_run.id: run publish from an `on: workflow_run` workflow, "
                        "or pass --run-id", where="GITHUB_EVENT_PATH")
    head_repo = run.get("head_repository") or {}
    owner = (head_repo.get("owner") or {}).get("login") or str(head_repo.get("full_name") or "").partition("/")[0]
    return EvaluatedRun(
        run_id=run["id"], repository=repository, head_sha=run.get("head_sha"), head_branch=run.get("head_branch"),
        head_owner=owner or None, event=run.get("event"), html_url=run.get("html_url"),
        pull_requests=[pr for pr in run.get("pull_requests") or [] if isinstance(pr, Mapping)],
    )


def run_artifact(api: GitHubAPI, run: EvaluatedRun, name: str) -> dict[str, Any]:
    """The live artifact named ``name`` of the run."""
    try:
        page = api.get(f"/repos/{run.repository}/actions/runs/{run.run_id}/artifacts",
                       params={"name": name, "per_page": 100})
    except GitHubAPIError as exc:
        raise RelayError(f"cannot list the artifacts of run {run.run_id}: {exc.message} (HTTP {exc.status}); "
                         "the workflow needs `permissions: actions: read`") from None
    items = [a for a in (page or {}).get("artifacts") or [] if isinstance(a, dict) and a.get("name") == name]
    live = [a for a in items if not a.get("expired")]
    if not live:
        state = "has expired" if items else "was not uploaded"
        raise RelayError(f"artifact {name!r} of run {run.run_id} {state}: the evaluating job must upload it "
                         "(upload-artifacts: true, the same artifact-name)")
    return max(live, key=lambda a: (str(a.get("created_at") or ""), a.get("id") or 0))


def pull_request_number(api: GitHubAPI, run: EvaluatedRun) -> int:
    """The open pull request whose head is the run's head SHA (module doc, step 3)."""
    if not run.head_sha:
        raise RelayError(f"run {run.run_id} has no head_sha")
    for pr in run.pull_requests:
        if (pr.get("head") or {}).get("sha") == run.head_sha and isinstance(pr.get("number"), int):
            return int(pr["number"])
    if not (run.head_owner and run.head_branch):
        raise RelayError(f"run {run.run_id} names no head branch to find its pull request by")
    try:
        pulls = api.get(f"/repos/{run.repository}/pulls",
                        params={"head": f"{run.head_owner}:{run.head_branch}", "state": "open", "per_page": 100})
    except GitHubAPIError as exc:
        raise RelayError(f"cannot list pull requests: {exc.message} (HTTP {exc.status})") from None
    numbers = [pr["number"] for pr in pulls or [] if isinstance(pr, dict) and isinstance(pr.get("number"), int)
               and (pr.get("head") or {}).get("sha") == run.head_sha]
    if not numbers:
        raise RelayError(f"no open pull request has head {run.head_owner}:{run.head_branch} at "
                         f"{run.head_sha[:7]} (pushed again since, or closed): nothing to comment on")
    return int(numbers[0])


def extract(data: bytes, directory: Path, warnings: list[str] | None = None) -> dict[str, Path]:
    """``results.json`` and ``results.db`` (shallowest of each) from the artifact zip into ``directory``;
    results.json is checked against the results schema (``github.validate``): each value of the wrong
    type is left out with a line in ``warnings``, and the checked document is what is published. Memory
    flat in the number of cases: members are copied in chunks, results.json is read streamed
    (``StreamedDocument``) and, when a value was left out, rewritten record by record."""
    directory.mkdir(parents=True, exist_ok=True)
    found: dict[str, Path] = {}
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise RelayError("the artifact is not a valid zip file") from None
    with archive:
        members = sorted((m for m in archive.infolist() if not m.is_dir()), key=lambda m: m.filename.count("/"))
        for wanted in RESULT_FILES:
            member = next((m for m in members if m.filename.rsplit("/", 1)[-1] == wanted), None)
            if member is None:
                continue
            if member.file_size > MAX_PUBLISHED_BYTES:
                raise RelayError(f"{member.filename} is over the {MAX_PUBLISHED_BYTES}-byte limit")
            target = directory / wanted
            with archive.open(member) as source, open(target, "wb") as out:
                copied = 0
                while chunk := source.read(COPY_CHUNK):
                    copied += len(chunk)
                    if copied > MAX_PUBLISHED_BYTES:  # the zip's sizes are the fork's word, not a fact
                        raise RelayError(f"{member.filename} is over the {MAX_PUBLISHED_BYTES}-byte limit")
                    out.write(chunk)
            found[wanted] = target
    if "results.json" not in found:
        raise RelayError("the artifact holds no results.json")
    problems = checked_results(found["results.json"])
    if warnings is not None:
        warnings.extend(problems)
    return found


def checked_results(path: Path) -> list[str]:
    """Check the results.json at ``path`` against the results schema, streamed: each record as it is read
    (``validate.prune_record``), then the fields (``prune_head``); when something was left out, the file is
    rewritten without it in a second pass. Returns the warnings; ``RelayError`` when it is not an evalgate
    results document."""
    stream = StreamedDocument(path)
    found: list[str] = []  # the records' warnings, while the fields are read in the same pass
    flagged = bytearray()  # 1 for each record with a value to leave out: one byte a record
    try:
        for position, record in enumerate(stream.records()):
            if position >= MAX_BASELINE_RECORDS:
                raise RelayError(f"results.json in the artifact holds more than the {MAX_BASELINE_RECORDS:,} "
                                 "case records read")
            before = len(found)
            prune_record(record, position, found)
            flagged.append(len(found) > before)
    except (UnicodeDecodeError, ValueError) as exc:
        raise RelayError(f"results.json in the artifact is not valid JSON ({exc})") from None
    except RecursionError:
        raise RelayError("results.json in the artifact is not valid JSON (nested too deeply)") from None
    head = dict(stream.head)  # complete now; a copy, as the rewrite below reads the file again
    if not isinstance(head.get("gate"), dict) or "results" in head:  # "results" in head: not a list
        raise RelayError("results.json in the artifact is not an evalgate results document")
    problems = prune_head(head) + found  # in the order a whole-document check gives them
    listed = stream.listed
    if not problems:
        return []
    missing = [key for key in RESULTS_KEYS if key not in head and not (key == "results" and listed)]
    if missing:
        raise RelayError(f"results.json in the artifact is not an evalgate results document ({problems[0]})")
    pruned = path.with_name(path.name + ".pruned")
    text = json.dumps({**head, "results": []}, ensure_ascii=False)  # as json.dumps(document), one record at a time
    cut = text.rindex("[]")
    with open(pruned, "w", encoding="utf-8") as out:
        out.write(text[:cut + 1])
        lead = ""
        for position, record in enumerate(StreamedDocument(path).records() if listed else ()):
            if not flagged[position] or prune_record(record, position, []):
                out.write(lead + json.dumps(record, ensure_ascii=False))
                lead = ", "
        out.write(text[cut + 1:])
    pruned.replace(path)
    return problems


def relay(*, env: Mapping[str, str], options: PublishOptions, output_dir: Path, run_id: int | None = None,
          emit: Emit = print, api_factory: Callable[[str, str], GitHubAPI] | None = None) -> int:
    """Steps 1–4 of the module doc; returns the exit status."""
    try:
        ctx = ActionContext.from_env(env)
        if not ctx.repository:
            raise UserError("GITHUB_REPOSITORY is not set", where="environment")
        if not options.github_token:
            raise UserError("no token: give the workflow `pull-requests: write` and `actions: read`",
                            where="input 'github-token' / GITHUB_TOKEN")
        factory = api_factory or (lambda token, url: GitHubAPI(token=token, base_url=url))
        with factory(options.github_token, ctx.api_url) as api:
            run = (evaluated_run(api.get(f"/repos/{ctx.repository}/actions/runs/{run_id}"), ctx.repository)
                   if run_id is not None else evaluated_run(ctx.event, ctx.repository))
            if run.event not in (None, "pull_request"):
                emit(notice(f"run {run.run_id} was triggered by {run.event}, not pull_request: nothing to publish",
                            title="evalgate publish"))
                return 0
            artifact = run_artifact(api, run, options.resolved_artifact_name)
            number = pull_request_number(api, run)
            data = download_artifact(api, run.repository, artifact, max_bytes=MAX_ZIP_BYTES)
    except UserError:
        raise
    except (RelayError, BaselineUnavailable, GitHubAPIError) as exc:
        emit(error(redact(str(exc)), title="evalgate publish"))
        return 1
    files = _extract_or_report(data, output_dir, emit)
    if files is None:
        return 1
    evaluated = replace(ctx, run_id=str(run.run_id), head_sha=run.head_sha, pr_number=number, pr_reason=None)
    artifact_url = f"{ctx.server_url}/{run.repository}/actions/runs/{run.run_id}/artifacts/{artifact['id']}"
    report = publish(files["results.json"], files.get("results.db", output_dir / "results.db"), ctx=evaluated,
                     options=replace(options, upload_artifacts=False, comment="always"), env=env, emit=emit,
                     api_factory=api_factory, artifact_url=artifact_url, annotate=False)
    comment = report.comment
    if comment is None or comment.action in ("failed",) or (comment.action == "skipped" and not comment.url):
        emit(error(f"the comment on pull request #{number} was not posted: "
                   f"{(comment.warning if comment else None) or 'see the warnings above'}", title="evalgate publish"))
        return 1
    emit(notice(f"results of run {run.run_id} published on pull request #{number}", title="evalgate publish"))
    return 0


def _extract_or_report(data: bytes, output_dir: Path, emit: Emit) -> dict[str, Path] | None:
    problems: list[str] = []
    try:
        files = extract(data, output_dir, problems)
    except RelayError as exc:
        emit(error(str(exc), title="evalgate publish"))
        return None
    for line in problems[:MAX_WARNINGS]:
        emit(warning(f"results.json in the artifact: {line}", title="evalgate publish"))
    if len(problems) > MAX_WARNINGS:
        emit(warning(f"results.json in the artifact: {len(problems) - MAX_WARNINGS} more value(s) of the wrong type "
                     "left out", title="evalgate publish"))
    return files
