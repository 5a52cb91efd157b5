"""The baseline a run is compared with: ``baseline: none | auto | <path>``.

``auto`` finds the base branch's newest evalgate results through the REST API (needs the workflow
permission ``actions: read``):

1. ``GET /repos/{owner}/{repo}/actions/artifacts?name=<artifact-name>&per_page=100``, following
   ``Link: rel="next"`` (same origin only, at most ``MAX_PAGES`` pages);
2. keep artifacts with exactly that name, not ``expired``, whose ``workflow_run.head_branch`` is the
   PR's base branch and whose run is in this repository (``head_repository_id == repository_id``
   when both are given, so a fork's branch of the same name does not count);
3. order: the run at the PR's base SHA first, then newest (``created_at``, then ``id``);
4. ``GET /repos/{owner}/{repo}/actions/artifacts/{id}/zip`` without following redirects; the 302
   ``Location`` (short-lived blob storage URL) is fetched by a separate client that has no
   ``Authorization`` header, so the token never reaches the storage host;
5. the zip is read in memory (at most ``max_zip_bytes`` downloaded, a member at most
   ``max_member_bytes`` uncompressed), its ``digest`` (``sha256:…``) checked when given, and
   ``results.json`` (else an evalgate SQLite file) parsed. A run that did not finish (status other than
   ``completed``/``merged``) is skipped for the next candidate (at most ``MAX_CANDIDATES`` downloads);
6. the artifact's ``judge-cache.db`` (the base run's judge verdicts), when it holds one that is a SQLite
   file within ``max_member_bytes``, comes back with the document so the run can reuse its verdicts
   (``store.judge_cache``); one that is missing or unreadable only means every verdict is judged again.

A gate that failed on the base branch still gives a valid baseline: the question is what changed.

Nothing here raises: every failure (not a pull request, no artifact, expired, wrong branch only,
HTTP 401/403/404, network error, oversized or corrupt zip, invalid results) comes back as
``BaselineLookup(document=None, warning=...)`` and the report says "no baseline".
"""

from __future__ import annotations

import hashlib
import io
import json
import tempfile
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalgate import __version__
from evalgate.errors import UserError
from evalgate.github.api import GitHubAPI, GitHubAPIError, error_message
from evalgate.github.context import DEFAULT_API_URL, ActionContext
from evalgate.safety.redact import redact
from evalgate.store.reader import (
    JUDGE_CACHE_FILE,
    SQLITE_HEADER,
    BaselineLookup,
    load_results_sqlite,
    validate_results,
)

if TYPE_CHECKING:
    import httpx

    from evalgate.github.api import GitHubAPI, GitHubAPIError

DEFAULT_ARTIFACT_NAME = "evalgate-results"
MAX_PAGES = 10
MAX_CANDIDATES = 3
MAX_ZIP_BYTES = 256 * 1024 * 1024
MAX_MEMBER_BYTES = 512 * 1024 * 1024
"""Largest artifact member unzipped in memory (a zip-bomb bound; a baseline *file* is streamed at any size)."""
FINISHED = ("completed", "merged")
REDIRECTS = (301, 302, 303, 307, 308)
SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
ACTIONS_READ_HINT = "give the workflow `permissions: actions: read`"


@dataclass(frozen=True)
class BaselineQuery:
    """What ``auto`` needs to know about the pull request."""

    repository: str
    """``owner/repo``."""
    base_ref: str
    artifact_name: str = DEFAULT_ARTIFACT_NAME
    token: str | None = None
    api_url: str = DEFAULT_API_URL
    base_sha: str | None = None


class BaselineUnavailable(Exception):
    """Why one step of the discovery could not give a baseline (becomes the warning, or a notice when
    ``expected``: nothing is wrong, there is simply no earlier run to compare with)."""

    def __init__(self, message: str, *, expected: bool = False) -> None:
        super().__init__(message)
        self.expected = expected


NOTICE = "notice"
NOT_A_PULL_REQUEST = "no baseline: not a pull request or merge queue run (no base branch to compare with)"


# ── resolving the setting ──────────────────────────────────────────────────────────────────────


def base_of(ctx: Any) -> tuple[str | None, str | None]:
    """``(base branch, base SHA)``: a pull request's base, or a merge queue group's ``merge_group.base_ref``
    (``refs/heads/`` removed) and ``merge_group.base_sha``; ``(None, None)`` for other events."""
    event = getattr(ctx, "event", None) or {}
    if not isinstance(event, Mapping):
        return getattr(ctx, "base_ref", None), None
    group = event.get("merge_group")
    if getattr(ctx, "event_name", None) == "merge_group" and isinstance(group, Mapping):
        ref = group.get("base_ref")
        sha = group.get("base_sha")
        branch = ref.removeprefix("refs/heads/") if isinstance(ref, str) and ref else None
        return branch, sha if isinstance(sha, str) else None
    base = (event.get("pull_request") or {}).get("base") or {}
    return getattr(ctx, "base_ref", None), base.get("sha") if isinstance(base.get("sha"), str) else None


def query_from_context(ctx: Any, *, artifact_name: str | None = None,
                       token: str | None = None) -> BaselineQuery | BaselineLookup:
    """A ``BaselineQuery`` from an ``ActionContext`` (base branch and SHA of a pull request or merge
    queue group, repository, API URL), or the lookup result saying why there cannot be one."""
    repository = getattr(ctx, "repository", None)
    base_ref, base_sha = base_of(ctx)
    if not base_ref:
        return BaselineLookup(None, warning=NOT_A_PULL_REQUEST, severity=NOTICE)
    if not repository:
        return BaselineLookup(None, warning="no baseline: GITHUB_REPOSITORY is not set")
    if not token:
        return BaselineLookup(None, warning="no baseline: no GitHub token to list the base branch's artifacts")
    return BaselineQuery(
        repository=repository,
        base_ref=base_ref,
        artifact_name=artifact_name or DEFAULT_ARTIFACT_NAME,
        token=token,
        api_url=getattr(ctx, "api_url", None) or DEFAULT_API_URL,
        base_sha=base_sha,
    )


def auto_loader(ctx: Any, *, artifact_name: str | None = None, token: str | None = None,
                **options: Any) -> Callable[[], BaselineLookup]:
    """A zero-argument callable for ``execute(baseline_loader=...)``; ``options`` go to
    ``discover_baseline`` (size caps, test transports)."""

    def load() -> BaselineLookup:
        query = query_from_context(ctx, artifact_name=artifact_name, token=token)
        if isinstance(query, BaselineLookup):
            return query
        return discover_baseline(query, **options)

    return load


def loader_from_env(env: Mapping[str, str], *, artifact_name: str | None = None) -> Callable[[], BaselineLookup]:
    """``auto_loader`` for the ``GITHUB_*`` environment (token ``GITHUB_TOKEN`` or input ``github-token``;
    artifact name: ``artifact_name``, input ``artifact-name``, else ``evalgate-results``)."""

    def load() -> BaselineLookup:
        try:
            ctx = ActionContext.from_env(env)
        except UserError as exc:
            return BaselineLookup(None, warning=f"no baseline: {redact(str(exc))}")
        token = env.get("INPUT_GITHUB-TOKEN") or env.get("GITHUB_TOKEN")
        name = artifact_name or env.get("INPUT_ARTIFACT-NAME") or DEFAULT_ARTIFACT_NAME
        return auto_loader(ctx, artifact_name=name, token=token)()

    return load


# ── discovery ─────────────────────────────────────────────────────────────────────────────────


def discover_baseline(
    query: BaselineQuery,
    *,
    max_zip_bytes: int = MAX_ZIP_BYTES,
    max_member_bytes: int = MAX_MEMBER_BYTES,
    timeout: float = 30.0,
    blob_transport: httpx.BaseTransport | None = None,
    **api_options: Any,
) -> BaselineLookup:
    """Find, download and read the base branch's results (module doc). Never raises."""
    api_options = {"max_attempts": 3, "max_total": 30.0, "timeout": timeout} | api_options
    try:
        with GitHubAPI(token=query.token, base_url=query.api_url, **api_options) as api:
            artifacts = list(list_artifacts(api, query.repository, query.artifact_name))
            candidates = choose_candidates(artifacts, query)
            return _first_finished(api, query, candidates, max_zip_bytes, max_member_bytes, timeout, blob_transport)
    except BaselineUnavailable as exc:
        return BaselineLookup(None, warning=f"no baseline: {redact(str(exc))}",
                              severity=NOTICE if exc.expected else "warning")
    except GitHubAPIError as exc:
        return BaselineLookup(None, warning=f"no baseline: {api_problem(exc, query)}")
    except Exception as exc:  # never let the baseline break a run
        return BaselineLookup(None, warning=f"no baseline: {type(exc).__name__}: {redact(str(exc))}")


def _first_finished(api: GitHubAPI, query: BaselineQuery, candidates: Sequence[Mapping[str, Any]],
                    max_zip: int, max_member: int, timeout: float,
                    blob_transport: httpx.BaseTransport | None) -> BaselineLookup:
    skipped: list[str] = []
    for artifact in candidates[:MAX_CANDIDATES]:
        data = download_artifact(api, query.repository, artifact, max_bytes=max_zip, timeout=timeout,
                                 transport=blob_transport)
        document = read_results_zip(data, max_member_bytes=max_member, where=f"artifact {artifact.get('id')}")
        status = str(document.get("status") or "completed")
        if status in FINISHED:
            return BaselineLookup(document, source=describe(artifact, query), label=short_label(artifact, query),
                                  judge_cache=read_judge_cache_zip(data, max_member_bytes=max_member))
        skipped.append(f"artifact {artifact.get('id')} holds a {status} run")
    raise BaselineUnavailable("; ".join(skipped) or "no usable artifact")


def list_artifacts(api: GitHubAPI, repository: str, name: str) -> Iterator[dict[str, Any]]:
    """Every artifact the list endpoint returns for ``name`` (object pages with an ``artifacts`` array)."""
    url: str | None = api.url(f"/repos/{repository}/actions/artifacts")
    params: dict[str, Any] | None = {"name": name, "per_page": 100}
    for _ in range(MAX_PAGES):
        if url is None:
            return
        response = api.request("GET", url, params=params)
        if not response.is_success:
            raise GitHubAPIError("GET", _no_query(url), response.status_code, error_message(response))
        page = response.json()
        items = page.get("artifacts") if isinstance(page, dict) else None
        if not isinstance(items, list):
            raise BaselineUnavailable("the artifact list response has no 'artifacts' array")
        yield from (item for item in items if isinstance(item, dict))
        next_url = response.links.get("next", {}).get("url")
        url, params = (api.url(next_url) if next_url else None), None


def choose_candidates(artifacts: Sequence[Mapping[str, Any]], query: BaselineQuery) -> list[Mapping[str, Any]]:
    """Usable artifacts, best first (module doc, steps 2–3); ``BaselineUnavailable`` saying why none is."""
    named = [a for a in artifacts if a.get("name") == query.artifact_name]
    if not named:
        raise BaselineUnavailable(f"no artifact named {query.artifact_name!r} in {query.repository} yet "
                                  f"(the first run, or evalgate has not run on {query.base_ref!r})", expected=True)
    live = [a for a in named if not a.get("expired")]
    if not live:
        raise BaselineUnavailable(f"every artifact named {query.artifact_name!r} has expired "
                                  "(retention-days); the next run on the base branch will create one", expected=True)
    on_branch = [a for a in live if _on_base_branch(a, query.base_ref)]
    if not on_branch:
        branches = sorted({str(_run(a).get("head_branch")) for a in live})
        shown = ", ".join(branches[:3]) + (", …" if len(branches) > 3 else "")
        raise BaselineUnavailable(f"no artifact named {query.artifact_name!r} from branch {query.base_ref!r} "
                                  f"(found only on: {shown}); run evalgate on pushes to {query.base_ref!r}",
                                  expected=True)
    return sorted(on_branch, key=lambda a: _preference(a, query.base_sha), reverse=True)


def _run(artifact: Mapping[str, Any]) -> Mapping[str, Any]:
    run = artifact.get("workflow_run")
    return run if isinstance(run, Mapping) else {}


def _on_base_branch(artifact: Mapping[str, Any], base_ref: str) -> bool:
    run = _run(artifact)
    head_repo, repo = run.get("head_repository_id"), run.get("repository_id")
    same_repo = head_repo is None or repo is None or head_repo == repo
    return run.get("head_branch") == base_ref and same_repo


def _preference(artifact: Mapping[str, Any], base_sha: str | None) -> tuple[bool, str, int]:
    at_base = bool(base_sha) and _run(artifact).get("head_sha") == base_sha
    artifact_id = artifact.get("id")
    return at_base, str(artifact.get("created_at") or ""), artifact_id if isinstance(artifact_id, int) else 0


def describe(artifact: Mapping[str, Any], query: BaselineQuery) -> str:
    """Where the baseline came from, in one line."""
    run = _run(artifact)
    sha = str(run.get("head_sha") or "")
    where = f"artifact {query.artifact_name!r} (id {artifact.get('id')}) of workflow run {run.get('id')} " \
            f"on {query.base_ref} @ {sha[:7] or '?'}"
    if query.base_sha and sha == query.base_sha:
        return where + ", the pull request's base commit"
    if query.base_sha:
        return where + f", the newest on the branch (none at the base commit {query.base_sha[:7]})"
    return where + ", the newest on the branch"


def short_label(artifact: Mapping[str, Any], query: BaselineQuery) -> str:
    """``main @ abc1234``: the base branch and the commit its artifact was made at."""
    sha = str(_run(artifact).get("head_sha") or "")
    return f"{query.base_ref} @ {sha[:7] or '?'}"


# ── download and unzip ────────────────────────────────────────────────────────────────────────


def download_artifact(api: GitHubAPI, repository: str, artifact: Mapping[str, Any], *, max_bytes: int,
                      timeout: float = 30.0, transport: httpx.BaseTransport | None = None) -> bytes:
    """The artifact's zip bytes; the redirect target is fetched without the token."""
    size = artifact.get("size_in_bytes")
    if isinstance(size, int) and size > max_bytes:
        raise BaselineUnavailable(f"artifact {artifact.get('id')} is {size} bytes, over the {max_bytes}-byte limit")
    response = api.request("GET", f"/repos/{repository}/actions/artifacts/{artifact.get('id')}/zip")
    if response.status_code in REDIRECTS and response.headers.get("location"):
        target = str(response.url.join(response.headers["location"]))
        data = fetch_without_auth(target, max_bytes=max_bytes, timeout=timeout, transport=transport)
    elif response.status_code == 200:
        data = response.content
        if len(data) > max_bytes:
            raise BaselineUnavailable(f"artifact {artifact.get('id')} is over the {max_bytes}-byte limit")
    elif response.status_code == 410:
        raise BaselineUnavailable(f"artifact {artifact.get('id')} has expired")
    else:
        raise GitHubAPIError("GET", _no_query(str(response.url)), response.status_code, error_message(response))
    check_digest(data, artifact)
    return data


def fetch_without_auth(url: str, *, max_bytes: int, timeout: float = 30.0,
                       transport: httpx.BaseTransport | None = None) -> bytes:
    """GET ``url`` with a client that carries no credentials, reading at most ``max_bytes``."""
    import httpx  # lazy: httpx (~0.2 s) only when something is sent

    headers = {"User-Agent": f"evalgate/{__version__}"}
    with httpx.Client(headers=headers, timeout=timeout, follow_redirects=True, max_redirects=5,
                      transport=transport) as client:
        try:
            with client.stream("GET", url) as response:
                if not response.is_success:
                    raise BaselineUnavailable(f"artifact download failed: HTTP {response.status_code} "
                                              f"from {_origin(url)}")
                return _read_capped(response.iter_bytes(), max_bytes)
        except httpx.HTTPError as exc:
            raise BaselineUnavailable(f"artifact download from {_origin(url)} failed: {type(exc).__name__}") from None


def _read_capped(chunks: Iterator[bytes], max_bytes: int) -> bytes:
    buffer = bytearray()
    for chunk in chunks:
        buffer += chunk
        if len(buffer) > max_bytes:
            raise BaselineUnavailable(f"artifact download exceeded the {max_bytes}-byte limit")
    return bytes(buffer)


def check_digest(data: bytes, artifact: Mapping[str, Any]) -> None:
    """Compare ``sha256:<hex>`` in the artifact's ``digest`` with the downloaded bytes (when given)."""
    digest = artifact.get("digest")
    if not isinstance(digest, str) or not digest.startswith("sha256:"):
        return
    if hashlib.sha256(data).hexdigest() != digest.removeprefix("sha256:").lower():
        raise BaselineUnavailable(f"artifact {artifact.get('id')} failed its sha256 digest check (corrupt download)")


def read_results_zip(data: bytes, *, max_member_bytes: int = MAX_MEMBER_BYTES, where: str = "artifact") -> dict[str, Any]:
    """The results document in a zip: ``results.json`` (shallowest), else an evalgate SQLite file."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise BaselineUnavailable(f"{where} is not a valid zip file") from None
    with archive:
        members = [info for info in archive.infolist() if not info.is_dir()]
        chosen = _pick_member(members)
        if chosen is None:
            raise BaselineUnavailable(f"{where} holds no results.json or SQLite results file")
        if chosen.file_size > max_member_bytes:
            raise BaselineUnavailable(f"{where}: {chosen.filename} is {chosen.file_size} bytes uncompressed, "
                                      f"over the {max_member_bytes}-byte limit")
        try:
            with archive.open(chosen) as handle:
                content = handle.read(max_member_bytes + 1)
        except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
            raise BaselineUnavailable(f"{where}: {chosen.filename} cannot be read ({exc})") from None
    if len(content) > max_member_bytes:
        raise BaselineUnavailable(f"{where}: {chosen.filename} is over the {max_member_bytes}-byte limit")
    label = f"{where}: {chosen.filename}"
    if content.startswith(SQLITE_HEADER):
        return _sqlite_document(content, label)
    return _json_document(content, label)


def read_judge_cache_zip(data: bytes, *, max_member_bytes: int = MAX_MEMBER_BYTES) -> bytes | None:
    """The bytes of the shallowest ``judge-cache.db`` in the zip when it is a SQLite file within the size
    cap; None otherwise (never raises: a cache only saves calls)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            found = sorted((m for m in archive.infolist() if not m.is_dir()
                            and m.filename.rsplit("/", 1)[-1] == JUDGE_CACHE_FILE),
                           key=lambda m: (m.filename.count("/"), m.filename))
            if not found or found[0].file_size > max_member_bytes:
                return None
            with archive.open(found[0]) as handle:
                content = handle.read(max_member_bytes + 1)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError):
        return None
    if len(content) > max_member_bytes or not content.startswith(SQLITE_HEADER):
        return None
    return content


def _pick_member(members: Sequence[zipfile.ZipInfo]) -> zipfile.ZipInfo | None:
    def depth(info: zipfile.ZipInfo) -> tuple[int, str]:
        return info.filename.count("/"), info.filename

    results = sorted((m for m in members if m.filename.rsplit("/", 1)[-1] == "results.json"), key=depth)
    if results:
        return results[0]
    stores = sorted((m for m in members if m.filename.lower().endswith(SQLITE_SUFFIXES)
                     and m.filename.rsplit("/", 1)[-1] != JUDGE_CACHE_FILE), key=depth)
    return stores[0] if stores else None


def _json_document(content: bytes, label: str) -> dict[str, Any]:
    try:
        document = json.loads(content.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BaselineUnavailable(f"{label} is not valid JSON ({exc})") from None
    except RecursionError:
        raise BaselineUnavailable(f"{label} is not valid JSON (nested too deeply)") from None
    try:
        return validate_results(document, label)
    except UserError as exc:
        raise BaselineUnavailable(str(exc)) from None


def _sqlite_document(content: bytes, label: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="evalgate-baseline-") as folder:
        path = Path(folder) / "baseline.db"
        path.write_bytes(content)
        try:
            return load_results_sqlite(path)
        except UserError as exc:
            raise BaselineUnavailable(f"{label}: {str(exc).replace(str(path), 'SQLite file')}") from None


# ── messages ──────────────────────────────────────────────────────────────────────────────────


def api_problem(exc: GitHubAPIError, query: BaselineQuery) -> str:
    """A one-line explanation of a failed API call, with the fix when there is one."""
    message = redact(exc.message)
    if exc.status is None:
        return f"cannot reach the GitHub API at {_origin(query.api_url)} ({message})"
    if exc.status == 401:
        return f"the GitHub token was rejected (HTTP 401: {message})"
    if exc.status == 403:
        return f"listing or downloading artifacts was forbidden (HTTP 403: {message}); {ACTIONS_READ_HINT}"
    if exc.status == 404:
        return f"repository {query.repository} or its artifact was not found, or the token cannot see it (HTTP 404)"
    return f"GitHub API error HTTP {exc.status}: {message}"


def _origin(url: str) -> str:
    import httpx  # lazy: httpx (~0.2 s) only when something is sent

    parsed = httpx.URL(url)
    port = f":{parsed.port}" if parsed.port else ""
    return f"{parsed.scheme}://{parsed.host}{port}"


def _no_query(url: str) -> str:
    import httpx  # lazy: httpx (~0.2 s) only when something is sent

    return str(httpx.URL(url).copy_with(query=None))
