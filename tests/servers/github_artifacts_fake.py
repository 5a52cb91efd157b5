"""A loopback fake of GitHub's Actions artifact REST endpoints, with a separate blob-storage host.

API server (``fake.url``), under ``/repos/{owner}/{repo}/actions``:

* ``GET artifacts?name=&per_page=&page=`` → ``{"total_count": N, "artifacts": [...]}``, newest first,
  ``per_page`` default 30 (max 100), ``Link`` header with ``next``/``last`` like api.github.com;
* ``GET artifacts/{id}/zip`` → 302 to a short-lived signed URL on the blob host (410 when expired,
  404 when unknown).

Blob server (``fake.blob_url``, another port, i.e. another origin): ``GET /blob/{id}?sig=…`` → the zip
bytes (403 when the signature is wrong). The API server serves the same path too, for a redirect
that stays on the API host (``redirect_to_api_host``).

Modes: ``forbidden`` answers the actions endpoints with 403 "Resource not accessible by integration"
(a token without ``actions: read``); a wrong or missing bearer token gets 401. Every request to
either server is recorded in ``log`` with its headers (lower-cased names).
"""

from __future__ import annotations

import hashlib
import io
import json
import secrets
import threading
import zipfile
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from tests.servers._github import bad_credentials, not_accessible, not_found, paginate

DOCS = "https://docs.github.com/rest/actions/artifacts"
REPOSITORY_ID = 4242


@dataclass
class Logged:
    server: str
    """``api`` or ``blob``."""
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]


@dataclass
class StoredArtifact:
    meta: dict[str, Any]
    content: bytes
    signature: str = field(default_factory=lambda: secrets.token_hex(8))


def zip_bytes(files: dict[str, bytes | str]) -> bytes:
    """A zip archive holding ``files`` (name → content)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, content in files.items():
            archive.writestr(name, content.encode("utf-8") if isinstance(content, str) else content)
    return buffer.getvalue()


class GitHubArtifactsFake:
    """``with GitHubArtifactsFake() as gh: gh.add_artifact(...)``; ``gh.url`` is the API base URL."""

    def __init__(self, token: str = "ghs_artifacts_fake_token", repository: str = "octo/evals") -> None:
        self.token = token
        self.repository = repository
        self.forbidden = False
        self.redirect_to_api_host = False
        self.log: list[Logged] = []
        self.artifacts: dict[int, StoredArtifact] = {}
        self._next_id = 500
        self._lock = threading.Lock()
        self._servers: dict[str, ThreadingHTTPServer] = {}

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> GitHubArtifactsFake:
        for name in ("api", "blob"):
            server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self, name))
            threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
            self._servers[name] = server
        return self

    def stop(self) -> None:
        for server in self._servers.values():
            server.shutdown()
            server.server_close()
        self._servers.clear()

    def __enter__(self) -> GitHubArtifactsFake:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _base(self, name: str) -> str:
        host, port = self._servers[name].server_address[:2]
        return f"http://{host}:{port}"

    @property
    def url(self) -> str:
        return self._base("api")

    @property
    def blob_url(self) -> str:
        return self._base("blob")

    def pull_request_env(self, directory: Path, base_sha: str, *, number: int = 1,
                         head_ref: str = "change") -> dict[str, str]:
        """The variables a ``pull_request`` run against this fake sees (its event file written in
        ``directory``): the PR's base is ``main`` at ``base_sha``."""
        event = {"pull_request": {"number": number, "base": {"ref": "main", "sha": base_sha},
                                  "head": {"ref": head_ref, "sha": "d" * 40, "repo": {"full_name": self.repository}}},
                 "repository": {"full_name": self.repository}}
        path = directory / "event.json"
        path.write_text(json.dumps(event), encoding="utf-8")
        return {"GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": str(path),
                "GITHUB_REPOSITORY": self.repository, "GITHUB_API_URL": self.url, "GITHUB_TOKEN": self.token}

    # -- state -----------------------------------------------------------------------------

    def add_artifact(self, name: str, content: bytes, *, head_branch: str = "main", head_sha: str = "a" * 40,
                     created_at: str = "2026-11-20T10:00:00Z", expired: bool = False,
                     head_repository_id: int = REPOSITORY_ID, digest: bool = True) -> int:
        """Store an artifact (its zip bytes) made by a workflow run on ``head_branch`` at ``head_sha``."""
        with self._lock:
            self._next_id += 1
            artifact_id = self._next_id
            meta = {
                "id": artifact_id,
                "node_id": f"MDg6QXJ0aWZhY3Q{artifact_id}",
                "name": name,
                "size_in_bytes": len(content),
                "url": f"{self.url}/repos/{self.repository}/actions/artifacts/{artifact_id}",
                "archive_download_url": f"{self.url}/repos/{self.repository}/actions/artifacts/{artifact_id}/zip",
                "expired": expired,
                "created_at": created_at,
                "updated_at": created_at,
                "expires_at": "2027-02-18T10:00:00Z",
                "digest": f"sha256:{hashlib.sha256(content).hexdigest()}" if digest else None,
                "workflow_run": {"id": 9000 + artifact_id, "repository_id": REPOSITORY_ID,
                                 "head_repository_id": head_repository_id, "head_branch": head_branch,
                                 "head_sha": head_sha},
            }
            self.artifacts[artifact_id] = StoredArtifact(meta, content)
            return artifact_id

    def requests(self, server: str | None = None) -> list[Logged]:
        return [entry for entry in self.log if server is None or entry.server == server]

    # -- handling (server threads) ------------------------------------------------------------

    def handle(self, server: str, method: str, raw_path: str, headers: dict[str, str]) -> tuple[int, Any, dict]:
        parts = urlsplit(raw_path)
        query = parse_qs(parts.query)
        with self._lock:
            self.log.append(Logged(server, method, parts.path, query, headers))
            segments = parts.path.strip("/").split("/")
            if segments[0] == "blob":
                return self._blob(segments, query)
            if server != "api":
                return not_found(DOCS)
            if headers.get("authorization") != f"Bearer {self.token}":
                return bad_credentials(DOCS)
            return self._api(method, segments, query, parts.path)

    def _api(self, method: str, segments: list[str], query: dict[str, list[str]], path: str) -> tuple[int, Any, dict]:
        repo = "/".join(segments[1:3])
        is_actions = len(segments) >= 5 and segments[0] == "repos" and segments[3:5] == ["actions", "artifacts"]
        if method != "GET" or not is_actions or repo != self.repository:
            return not_found(DOCS)
        if self.forbidden:
            return not_accessible(DOCS)
        if len(segments) == 5:
            return self._list(query, path)
        if len(segments) == 7 and segments[6] == "zip" and segments[5].isdigit():
            return self._zip(int(segments[5]))
        return not_found(DOCS)

    def _list(self, query: dict[str, list[str]], path: str) -> tuple[int, Any, dict]:
        name = (query.get("name") or [None])[0]
        items = [a.meta for a in self.artifacts.values() if name is None or a.meta["name"] == name]
        items.sort(key=lambda m: (m["created_at"], m["id"]), reverse=True)
        chunk, per_page, page, last = paginate(items, query)
        headers = {}
        if page < last:
            def ref(n: int, rel: str) -> str:
                params = {"per_page": per_page, "page": n} | ({"name": name} if name else {})
                return f'<{self.url}{path}?{urlencode(params)}>; rel="{rel}"'

            headers["Link"] = f"{ref(page + 1, 'next')}, {ref(last, 'last')}"
        return 200, {"total_count": len(items), "artifacts": chunk}, headers

    def _zip(self, artifact_id: int) -> tuple[int, Any, dict]:
        stored = self.artifacts.get(artifact_id)
        if stored is None:
            return not_found(DOCS)
        if stored.meta["expired"]:
            return 410, {"message": "Artifact has expired", "documentation_url": DOCS}, {}
        host = self.url if self.redirect_to_api_host else self.blob_url
        return 302, None, {"Location": f"{host}/blob/{artifact_id}?sig={stored.signature}&se=60"}

    def _blob(self, segments: list[str], query: dict[str, list[str]]) -> tuple[int, Any, dict]:
        stored = self.artifacts.get(int(segments[1])) if len(segments) == 2 and segments[1].isdigit() else None
        if stored is None:
            return 404, b"BlobNotFound", {"Content-Type": "application/xml"}
        if (query.get("sig") or [None])[0] != stored.signature:
            return 403, b"AuthenticationFailed", {"Content-Type": "application/xml"}
        return 200, stored.content, {"Content-Type": "application/zip"}


def _make_handler(fake: GitHubArtifactsFake, server: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, body, extra = fake.handle(server, self.command, self.path, headers)
            data = body if isinstance(body, bytes) else (b"" if body is None else json.dumps(body).encode("utf-8"))
            self.send_response(status)
            if not isinstance(body, bytes):
                self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            for key, value in extra.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler
