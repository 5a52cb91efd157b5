"""Upload evalgate's output files as a GitHub Actions artifact, speaking the v4 protocol from the container.

Sequence (the same as ``@actions/artifact``): read the backend ids from the ``scp`` claim of the JWT in
``ACTIONS_RUNTIME_TOKEN``; Twirp ``CreateArtifact`` at the origin of ``ACTIONS_RESULTS_URL``; upload a
deflated zip to the returned signed URL as an Azure block blob (sequential Put Block, then Put Block
List); Twirp ``FinalizeArtifact`` with the zip's size (bytes) and ``sha256:<hex>``.

Artifacts never change the verdict: every service or network problem becomes ``UploadResult.uploaded
= False`` with a warning. Only configuration mistakes (bad artifact name, bad file paths, negative
retention) raise :class:`~evalgate.errors.UserError`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import random
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit
from xml.sax.saxutils import escape as xml_escape

import httpx

from evalgate import __version__
from evalgate.errors import UserError
from evalgate.github.commands import add_mask
from evalgate.safety.redact import redact, register_secret

TOKEN_VAR = "ACTIONS_RUNTIME_TOKEN"
RESULTS_URL_VAR = "ACTIONS_RESULTS_URL"
TWIRP_SERVICE = "github.actions.results.api.v1.ArtifactService"
ARTIFACT_VERSION = 7
ZIP_MIME = "application/zip"
BLOCK_SIZE = 8 * 1024 * 1024  # bytes per Put Block, as the toolkit's upload chunk
AZURE_STORAGE_VERSION = "2025-01-05"  # x-ms-version; in Azurite 3.37's accepted list
RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})
USAGE_ERROR = "insufficient usage"
FORBIDDEN_PATH_CHARS = '"', ":", "<", ">", "|", "*", "?", "\r", "\n"
FORBIDDEN_NAME_CHARS = (*FORBIDDEN_PATH_CHARS, "\\", "/")
ENCODE_URI_COMPONENT_SAFE = "-_.!~*'()"
GITHUB_HOSTS = ("github.com",)
GITHUB_HOST_SUFFIXES = (".ghe.com", ".localhost")


@dataclass(frozen=True)
class UploadResult:
    """Outcome of :func:`upload_artifact`: ``size`` in bytes and ``digest`` = ``sha256:<hex>`` of the zip."""

    uploaded: bool
    artifact_id: int | None = None
    size: int | None = None
    digest: str | None = None
    url: str | None = None
    warning: str | None = None


@dataclass(frozen=True)
class RetryPolicy:
    """Attempts and backoff: attempt 0 waits ``base_delay`` s, attempt n waits U[b·mⁿ, b·mⁿ⁺¹) s."""

    attempts: int = 5
    base_delay: float = 3.0
    multiplier: float = 1.5
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)


@dataclass(frozen=True)
class BackendIds:
    workflow_run: str
    workflow_job_run: str


@dataclass(frozen=True)
class ZipEntry:
    source: Path
    arcname: str


class ArtifactServiceError(Exception):
    """The results service or blob store failed; the message is safe to print."""


# ---- pure helpers ---------------------------------------------------------------------------------------


def validate_artifact_name(name: str) -> None:
    """Reject empty names and the characters the service refuses (NTFS-unsafe ones, ``\\`` and ``/``)."""
    if not name:
        raise UserError("artifact name is empty", where="artifact name")
    bad = [c for c in FORBIDDEN_NAME_CHARS if c in name]
    if bad:
        shown = " ".join(repr(c) for c in bad)
        raise UserError(f"{name!r} contains forbidden character(s) {shown}; not allowed: "
                        + " ".join(repr(c) for c in FORBIDDEN_NAME_CHARS), where="artifact name")


def zip_entries(files: list[Path], root: Path | None) -> list[ZipEntry]:
    """Files (directories expand recursively) with their in-zip names relative to ``root``.

    ``root`` defaults to the deepest directory containing every file.
    """
    sources = [p for f in files for p in _expand(Path(f))]
    if not sources:
        raise UserError("no files to upload", where="artifact files")
    base = (root or _common_parent(sources)).resolve()
    entries: dict[str, ZipEntry] = {}
    for source in sources:
        resolved = source.resolve()
        if not resolved.is_relative_to(base):
            raise UserError(f"{source} is outside the artifact root {base}", where="artifact files")
        arcname = resolved.relative_to(base).as_posix()
        bad = [c for c in FORBIDDEN_PATH_CHARS if c in arcname]
        if bad:
            raise UserError(f"{arcname!r} contains forbidden character(s) {' '.join(map(repr, bad))}",
                            where="artifact files")
        entries.setdefault(arcname, ZipEntry(resolved, arcname))
    return list(entries.values())


def _expand(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file())
    if not path.is_file():
        raise UserError(f"{path} does not exist", where="artifact files")
    return [path]


def _common_parent(paths: list[Path]) -> Path:
    parents = [p.resolve().parent for p in paths]
    common = parents[0]
    while not all(p.is_relative_to(common) for p in parents):
        common = common.parent
    return common


def expiry(
    retention_days: int | None, env: Mapping[str, str], now: datetime
) -> tuple[datetime | None, str | None]:
    """``now + days`` (days clamped to ``GITHUB_RETENTION_DAYS``) and a notice when clamped.

    ``None`` or 0 means the repository default (no ``expires_at`` is sent).
    """
    if not retention_days:
        return None, None
    if retention_days < 0:
        raise UserError(f"must be at least 1 day, got {retention_days}", where="artifact retention-days")
    maximum = _positive_int(env.get("GITHUB_RETENTION_DAYS"))
    if maximum is not None and retention_days > maximum:
        notice = (f"artifact retention of {retention_days} days exceeds the repository maximum; "
                  f"using {maximum} days")
        return now + timedelta(days=maximum), notice
    return now + timedelta(days=retention_days), None


def _positive_int(text: str | None) -> int | None:
    try:
        value = int(text or "")
    except ValueError:
        return None
    return value if value > 0 else None


def rfc3339(moment: datetime) -> str:
    """UTC timestamp with milliseconds, e.g. ``2026-11-29T00:06:19.539Z`` (protobuf JSON ``Timestamp``)."""
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def backend_ids(token: str) -> BackendIds:
    """Ids from the ``Actions.Results:<run>:<job>`` entry of the JWT ``scp`` claim (signature unchecked)."""
    parts = token.split(".")
    if len(parts) != 3:
        raise ArtifactServiceError(f"{TOKEN_VAR} is not a JWT")
    try:
        payload = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        claims = json.loads(payload)
    except (binascii.Error, ValueError) as exc:
        raise ArtifactServiceError(f"{TOKEN_VAR} has an unreadable payload") from exc
    scopes = claims.get("scp") if isinstance(claims, dict) else None
    for scope in (scopes or "").split(" ") if isinstance(scopes, str) else []:
        pieces = scope.split(":")
        if pieces[0] == "Actions.Results":
            if len(pieces) != 3 or not all(pieces[1:]):
                break
            return BackendIds(pieces[1], pieces[2])
    raise ArtifactServiceError(f"{TOKEN_VAR} has no Actions.Results:<run>:<job> scope")


def retry_delay(attempt: int, policy: RetryPolicy, rand: Callable[[], float] = random.random) -> float:
    """Seconds to wait after failed ``attempt`` (0-based): b, then uniform in [b·mⁿ, b·mⁿ⁺¹)."""
    if attempt == 0:
        return policy.base_delay
    low = policy.base_delay * policy.multiplier**attempt
    return low + rand() * (low * policy.multiplier - low)


def response_field(data: Mapping[str, Any], snake: str) -> Any:
    """A response field by proto name (snake_case) or its lowerCamelCase JSON name."""
    if snake in data:
        return data[snake]
    head, *rest = snake.split("_")
    return data.get(head + "".join(word.title() for word in rest))


def block_id(index: int) -> str:
    """Base64 block id; every id of a blob has the same length (28 characters)."""
    return base64.b64encode(f"evalgate-{index:010d}".encode()).decode()


def block_list_xml(ids: list[str]) -> bytes:
    latest = "".join(f"<Latest>{xml_escape(i)}</Latest>" for i in ids)
    return f'<?xml version="1.0" encoding="utf-8"?><BlockList>{latest}</BlockList>'.encode()


def sas_signature(url: str) -> str | None:
    values = parse_qs(urlsplit(url).query).get("sig")
    return values[0] if values else None


def scrub_url(url: str) -> str:
    """The URL without its query (which may hold a SAS signature)."""
    return urlsplit(url)._replace(query="", fragment="").geturl()


def print_add_mask(value: str) -> None:
    """Ask the runner to mask ``value`` in logs (``::add-mask::`` workflow command on stdout)."""
    print(add_mask(value), flush=True)


def artifact_url(env: Mapping[str, str], artifact_id: int) -> str | None:
    """``{server}/{repo}/actions/runs/{run}/artifacts/{id}`` when the three variables are known."""
    server, repo, run = (env.get(k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
    if not (server and repo and run):
        return None
    return f"{server.rstrip('/')}/{repo}/actions/runs/{run}/artifacts/{artifact_id}"


def is_ghes(env: Mapping[str, str]) -> bool:
    """True on GitHub Enterprise Server, which has no v4 artifacts (same host test as the toolkit)."""
    host = (urlsplit(env.get("GITHUB_SERVER_URL") or "https://github.com").hostname or "").lower()
    return host not in GITHUB_HOSTS and not host.endswith(GITHUB_HOST_SUFFIXES)


def _files_text(files: list[Path]) -> str:
    return ", ".join(str(f) for f in files)


# ---- I/O ------------------------------------------------------------------------------------------------


def write_zip(entries: list[ZipEntry], destination: Path) -> None:
    """Stream every entry into a deflate zip at ``destination`` (files are read in chunks, not loaded)."""
    with zipfile.ZipFile(destination, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6,
                         strict_timestamps=False) as archive:
        for entry in entries:
            archive.write(entry.source, entry.arcname)


def _read_blocks(path: Path, block_size: int) -> Iterator[bytes]:
    with path.open("rb") as handle:
        while chunk := handle.read(block_size):
            yield chunk


def _send(send: Callable[[], httpx.Response], policy: RetryPolicy, what: str,
          give_up: Callable[[httpx.Response], str | None] = lambda _: None) -> httpx.Response:
    """Run ``send`` with retries on 429/5xx and on timeouts/resets; connection refusals fail at once.

    ``give_up(response)`` returns a reason to stop retrying (e.g. the storage quota is exhausted).
    """
    attempts = max(1, policy.attempts)
    for attempt in range(attempts):
        try:
            response = send()
        except httpx.ConnectError as exc:
            raise ArtifactServiceError(f"{what}: cannot connect ({type(exc).__name__})") from None
        except httpx.TransportError as exc:
            failure = f"{what}: {type(exc).__name__}"
        else:
            reason = give_up(response)
            if reason:
                raise ArtifactServiceError(f"{what}: {reason}")
            if response.status_code not in RETRYABLE_STATUSES:
                return response
            failure = f"{what}: HTTP {response.status_code}{_error_detail(response)}"
        if attempt + 1 < attempts:
            policy.sleep(retry_delay(attempt, policy))
    raise ArtifactServiceError(f"{failure} (gave up after {attempts} attempts)")


def _error_detail(response: httpx.Response) -> str:
    """`` (msg)`` from a Twirp JSON error or `` (Code)`` from an Azure XML error, else empty."""
    text = response.text[:2000]
    try:
        data = json.loads(text)
    except ValueError:
        start, end = text.find("<Code>"), text.find("</Code>")
        return f" ({text[start + 6:end]})" if 0 <= start < end else ""
    msg = data.get("msg") if isinstance(data, dict) else None
    return f" ({msg})" if msg else ""


def _usage_exhausted(response: httpx.Response) -> str | None:
    if response.is_success:
        return None
    try:
        msg = response.json().get("msg")
    except (ValueError, AttributeError):
        return None
    if isinstance(msg, str) and USAGE_ERROR in msg:
        return f"artifact storage quota exhausted ({msg})"
    return None


class TwirpClient:
    """JSON Twirp calls to ``{origin}/twirp/github.actions.results.api.v1.ArtifactService/{method}``."""

    def __init__(self, client: httpx.Client, results_url: str, token: str, policy: RetryPolicy) -> None:
        parts = urlsplit(results_url)
        if not parts.scheme or not parts.netloc:
            raise ArtifactServiceError(f"{RESULTS_URL_VAR} is not an absolute URL")
        self._origin = f"{parts.scheme}://{parts.netloc}"
        self._client, self._policy = client, policy
        self._headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def call(self, method: str, body: Mapping[str, Any]) -> dict[str, Any]:
        url = f"{self._origin}/twirp/{TWIRP_SERVICE}/{method}"
        payload = json.dumps(body).encode()
        response = _send(lambda: self._client.post(url, content=payload, headers=self._headers),
                         self._policy, method, _usage_exhausted)
        if not response.is_success:
            raise ArtifactServiceError(f"{method}: HTTP {response.status_code}{_error_detail(response)}")
        try:
            data = response.json()
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise ArtifactServiceError(f"{method}: the response is not a JSON object")
        if response_field(data, "ok") is False:
            raise ArtifactServiceError(f"{method}: the service answered ok=false")
        return data


def upload_block_blob(client: httpx.Client, sas_url: str, source: Path, block_size: int,
                      policy: RetryPolicy) -> tuple[int, str]:
    """Put Block for each ``block_size`` chunk in order, then Put Block List; returns (bytes, sha256 hex)."""
    base = httpx.URL(sas_url)
    digest, size, ids = hashlib.sha256(), 0, []
    for index, chunk in enumerate(_read_blocks(source, block_size)):
        bid = block_id(index)
        # copy_merge_params keeps the SAS query; params= would replace it and drop ``sig``.
        _put_blob(client, base.copy_merge_params({"comp": "block", "blockid": bid}), chunk, {}, policy,
                  f"blob store Put Block {index}")
        digest.update(chunk)
        size += len(chunk)
        ids.append(bid)
    list_headers = {"x-ms-blob-content-type": ZIP_MIME, "Content-Type": "application/xml"}
    _put_blob(client, base.copy_merge_params({"comp": "blocklist"}), block_list_xml(ids), list_headers,
              policy, "blob store Put Block List")
    return size, digest.hexdigest()


def _put_blob(client: httpx.Client, url: httpx.URL, content: bytes, headers: Mapping[str, str],
              policy: RetryPolicy, what: str) -> None:
    """PUT to the blob store (with retries) and require 201 Created."""
    all_headers = {"x-ms-version": AZURE_STORAGE_VERSION, **headers}
    response = _send(lambda: client.put(url, content=content, headers=all_headers), policy, what)
    if response.status_code != 201:
        raise ArtifactServiceError(f"{what}: HTTP {response.status_code}{_error_detail(response)}")


def mask_signature(sas_url: str, mask: Callable[[str], None]) -> list[str]:
    """Mask the SAS ``sig`` raw and URL-encoded (as JS ``encodeURIComponent``); returns the masked values."""
    sig = sas_signature(sas_url)
    if not sig:
        return []
    values = list(dict.fromkeys([sig, quote(sig, safe=ENCODE_URI_COMPONENT_SAFE)]))
    for value in values:
        register_secret(value)
        mask(value)
    return values


def upload_artifact(
    name: str,
    files: list[Path],
    *,
    env: Mapping[str, str],
    retention_days: int | None = None,
    root: Path | None = None,
    mask: Callable[[str], None] = print_add_mask,
    block_size: int = BLOCK_SIZE,
    retry: RetryPolicy | None = None,
    timeout: float = 120.0,
) -> UploadResult:
    """Zip ``files`` and upload them as artifact ``name``; service failures return ``uploaded=False``."""
    if block_size <= 0:
        raise ValueError(f"block_size must be a positive number of bytes, got {block_size}")
    validate_artifact_name(name)
    entries = zip_entries(files, root)
    expires_at, notice = expiry(retention_days, env, datetime.now(UTC))
    missing = [var for var in (TOKEN_VAR, RESULTS_URL_VAR) if not env.get(var)]
    if missing:
        return UploadResult(False, warning=(
            f"artifacts were not uploaded: {' and '.join(missing)} not set (not running in a GitHub Actions "
            f"job?); the files are at {_files_text(files)}"))
    if is_ghes(env):
        return UploadResult(False, warning=(
            "artifacts were not uploaded: GitHub Enterprise Server does not support v4 artifacts; "
            f"the files are at {_files_text(files)}"))
    token = env[TOKEN_VAR]
    register_secret(token)
    try:
        result = _upload(name, entries, env, expires_at, mask, block_size, retry or RetryPolicy(), timeout)
    except (ArtifactServiceError, httpx.HTTPError, OSError) as exc:
        reason = redact(str(exc) or type(exc).__name__, extra=[token])
        return UploadResult(False, warning=_join(
            notice, f"artifact {name!r} was not uploaded ({reason}); the files are at {_files_text(files)}"))
    return UploadResult(True, result.artifact_id, result.size, result.digest, result.url, notice)


def _join(*parts: str | None) -> str | None:
    text = "; ".join(p for p in parts if p)
    return text or None


def _upload(name: str, entries: list[ZipEntry], env: Mapping[str, str], expires_at: datetime | None,
            mask: Callable[[str], None], block_size: int, policy: RetryPolicy,
            timeout: float) -> UploadResult:
    ids = backend_ids(env[TOKEN_VAR])
    identity = {"workflow_run_backend_id": ids.workflow_run,
                "workflow_job_run_backend_id": ids.workflow_job_run, "name": name}
    with tempfile.TemporaryDirectory(prefix="evalgate-artifact-") as tmp, httpx.Client(
        timeout=timeout, headers={"User-Agent": f"evalgate/{__version__}"}
    ) as client:
        archive = Path(tmp) / "artifact.zip"
        write_zip(entries, archive)
        twirp = TwirpClient(client, env[RESULTS_URL_VAR], env[TOKEN_VAR], policy)
        create: dict[str, Any] = {**identity, "version": ARTIFACT_VERSION}
        if env.get("ACT") != "true":  # nektos/act's artifact server (0.2.89) rejects the field it does not know
            create["mime_type"] = ZIP_MIME
        if expires_at is not None:
            create["expires_at"] = rfc3339(expires_at)
        sas_url = response_field(twirp.call("CreateArtifact", create), "signed_upload_url")
        if not isinstance(sas_url, str) or not sas_url:
            raise ArtifactServiceError("CreateArtifact: no signed_upload_url in the response")
        secrets = mask_signature(sas_url, mask)
        try:
            size, sha256 = upload_block_blob(client, sas_url, archive, block_size, policy)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            reason = redact(f"blob upload to {scrub_url(sas_url)}: {exc}", extra=secrets)
            raise ArtifactServiceError(reason) from None
        digest = f"sha256:{sha256}"
        finalized = twirp.call("FinalizeArtifact", {**identity, "size": str(size), "hash": digest})
    artifact_id = _int_or_none(response_field(finalized, "artifact_id"))
    if artifact_id is None:
        raise ArtifactServiceError("FinalizeArtifact: no artifact_id in the response")
    return UploadResult(True, artifact_id, size, digest, artifact_url(env, artifact_id))


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
