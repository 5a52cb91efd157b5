"""Loopback fake of the GitHub Actions Results artifact service (Twirp JSON) backed by a real Azurite.

It answers ``CreateArtifact``, ``FinalizeArtifact``, ``ListArtifacts`` and ``GetSignedArtifactURL`` under
``/twirp/github.actions.results.api.v1.ArtifactService/`` the way the official ``@actions/artifact`` client
expects, and hands out blob-service SAS URLs (HMAC-SHA256 over the documented string-to-sign, ``sv``
2021-08-06) for a container it creates in Azurite with Shared Key auth. Every request must carry
``Authorization: Bearer <the runtime token>`` and the workflow run / job backend ids from that token's
``scp`` claim. ``FinalizeArtifact`` reads the blob back and checks that ``size`` and ``hash`` match it.

Tests can inject faults (``inject``), switch replies to lowerCamelCase (``camel_case``) and inspect
``requests`` (the decoded request log) and ``artifacts``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import quote, urlencode

import httpx

TWIRP_PREFIX = "/twirp/github.actions.results.api.v1.ArtifactService/"
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
SAS_VERSION = "2021-08-06"
STORAGE_VERSION = "2021-08-06"
FORBIDDEN_NAME_CHARS = '":<>|*?\r\n\\/'


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def make_runtime_token(run_backend_id: str, job_backend_id: str, *, extra_scopes: str = "") -> str:
    """An unsigned-looking JWT whose ``scp`` claim carries ``Actions.Results:<run>:<job>``."""
    header = _b64url(json.dumps({"typ": "JWT", "alg": "RS256"}).encode())
    scopes = " ".join(s for s in (extra_scopes, f"Actions.Results:{run_backend_id}:{job_backend_id}") if s)
    payload = _b64url(json.dumps({"scp": scopes, "iss": "fake-actions", "nbf": 0}).encode())
    signature = _b64url(hashlib.sha256(f"{header}.{payload}".encode()).digest())
    return f"{header}.{payload}.{signature}"


def blob_sas_query(blob_path: str, permissions: str, expiry: datetime, key: str = AZURITE_KEY) -> str:
    """Query string of a blob-service SAS for ``<container>/<blob>`` (``sr=b``, ``sv`` 2021-08-06).

    signature = base64(HMAC-SHA256(base64decode(key), 16 newline-joined fields)).
    """
    se = expiry.strftime("%Y-%m-%dT%H:%M:%SZ")
    fields = [permissions, "", se, f"/blob/{AZURITE_ACCOUNT}/{blob_path}", "", "", "", SAS_VERSION, "b",
              "", "", "", "", "", "", ""]
    digest = hmac.new(base64.b64decode(key), "\n".join(fields).encode(), hashlib.sha256).digest()
    sig = base64.b64encode(digest).decode()
    return urlencode({"sv": SAS_VERSION, "sr": "b", "sp": permissions, "se": se, "sig": sig}, quote_via=quote)


def shared_key_headers(
    method: str, path: str, query: dict[str, str], key: str = AZURITE_KEY
) -> dict[str, str]:
    """Headers signing a body-less request with Shared Key (the account-key HMAC of the canonical request)."""
    headers = {"x-ms-date": formatdate(usegmt=True), "x-ms-version": STORAGE_VERSION}
    canonical_headers = "".join(f"{k}:{headers[k]}\n" for k in sorted(headers))
    resource = f"/{AZURITE_ACCOUNT}{path}" + "".join(f"\n{k.lower()}:{query[k]}" for k in sorted(query))
    string_to_sign = "\n".join([method, "", "", "", "", "", "", "", "", "", "", ""]) + "\n"
    string_to_sign += canonical_headers + resource
    digest = hmac.new(base64.b64decode(key), string_to_sign.encode(), hashlib.sha256).digest()
    headers["Authorization"] = f"SharedKey {AZURITE_ACCOUNT}:{base64.b64encode(digest).decode()}"
    return headers


def _pick(body: dict[str, Any], snake: str) -> Any:
    """A request field by proto name or its lowerCamelCase JSON name."""
    if snake in body:
        return body[snake]
    head, *rest = snake.split("_")
    return body.get(head + "".join(p.title() for p in rest))


def _camel(data: Any) -> Any:
    if isinstance(data, dict):
        out = {}
        for key, value in data.items():
            head, *rest = key.split("_")
            out[head + "".join(p.title() for p in rest)] = _camel(value)
        return out
    if isinstance(data, list):
        return [_camel(v) for v in data]
    return data


class TwirpError(Exception):
    def __init__(self, status: int, code: str, msg: str) -> None:
        super().__init__(msg)
        self.status, self.code, self.msg = status, code, msg


@dataclass
class Fault:
    status: int
    msg: str
    code: str = "internal"


@dataclass
class StoredArtifact:
    database_id: int
    name: str
    blob_path: str
    version: int
    mime_type: str | None
    expires_at: str | None
    created_at: str
    size: int | None = None
    digest: str | None = None
    finalized: bool = False


@dataclass
class ArtifactService:
    """The fake service's state; ``start()`` serves it on 127.0.0.1 in a background thread."""

    blob_endpoint: str  # e.g. http://127.0.0.1:10000 (Azurite, path-style URLs)
    run_backend_id: str
    job_backend_id: str
    container: str = "actions-results"
    upload_endpoint: str | None = None  # where signed upload URLs point (defaults to blob_endpoint)
    upload_permissions: str = "cw"  # SAS ``sp`` of signed upload URLs ("r" makes every Put Block fail)
    camel_case: bool = False
    requests: list[dict[str, Any]] = field(default_factory=list)
    artifacts: dict[str, StoredArtifact] = field(default_factory=dict)
    signed_urls: list[str] = field(default_factory=list)
    _faults: dict[str, deque[Fault]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None
    _next_id: int = 1000

    @property
    def token(self) -> str:
        return make_runtime_token(self.run_backend_id, self.job_backend_id,
                                  extra_scopes="Actions.GenericRead:0")

    @property
    def url(self) -> str:
        assert self._server is not None, "service not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def inject(self, method: str, status: int, msg: str = "injected failure", times: int = 1) -> None:
        """Make the next ``times`` calls of ``method`` fail with ``status`` and a Twirp ``msg``."""
        queue = self._faults.setdefault(method, deque())
        queue.extend(Fault(status, msg) for _ in range(times))

    def calls(self, method: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["method"] == method]

    def start(self) -> ArtifactService:
        self._create_container()
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                status, reply = service.handle(self.path, dict(self.headers.items()), raw)
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # ---- blob store -------------------------------------------------------------------------------------
    def _create_container(self) -> None:
        path = f"/{AZURITE_ACCOUNT}/{self.container}"
        query = {"restype": "container"}
        resp = httpx.put(f"{self.blob_endpoint}{path}", params=query,
                         headers=shared_key_headers("PUT", path, query), timeout=10)
        if resp.status_code not in (201, 409):
            raise RuntimeError(f"Azurite refused the container: {resp.status_code} {resp.text[:300]}")

    def _signed_url(self, blob_path: str, permissions: str, endpoint: str | None = None) -> str:
        expiry = datetime.now(UTC) + timedelta(hours=1)
        base = endpoint or self.blob_endpoint
        url = f"{base}/{AZURITE_ACCOUNT}/{blob_path}?{blob_sas_query(blob_path, permissions, expiry)}"
        self.signed_urls.append(url)
        return url

    def read_blob(self, blob_path: str) -> httpx.Response:
        return httpx.get(self._signed_url(blob_path, "r"), timeout=30)

    def block_list(self, blob_path: str) -> httpx.Response:
        """Azure ``Get Block List`` (committed blocks, in commit order) for a stored blob."""
        url = httpx.URL(self._signed_url(blob_path, "r")).copy_merge_params(
            {"comp": "blocklist", "blocklisttype": "committed"})
        return httpx.get(url, headers={"x-ms-version": STORAGE_VERSION}, timeout=30)

    # ---- Twirp ------------------------------------------------------------------------------------------
    def handle(self, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, dict[str, Any]]:
        method = path.removeprefix(TWIRP_PREFIX) if path.startswith(TWIRP_PREFIX) else ""
        headers = {k.lower(): v for k, v in headers.items()}
        entry: dict[str, Any] = {"method": method, "path": path, "headers": headers, "body": None}
        try:
            entry["body"] = json.loads(raw or b"{}")
        except ValueError:
            entry["body"] = raw.decode("utf-8", "replace")
        with self._lock:
            self.requests.append(entry)
            try:
                status, reply = 200, self._dispatch(method, headers, entry["body"])
            except TwirpError as exc:
                status, reply = exc.status, {"code": exc.code, "msg": exc.msg}
        entry["status"] = status
        return status, (_camel(reply) if self.camel_case and status == 200 else reply)

    def _dispatch(self, method: str, headers: dict[str, str], body: Any) -> dict[str, Any]:
        handlers = {
            "CreateArtifact": self._create,
            "FinalizeArtifact": self._finalize,
            "ListArtifacts": self._list,
            "GetSignedArtifactURL": self._signed,
        }
        if method not in handlers:
            raise TwirpError(404, "bad_route", f"no handler for path {method!r}")
        if headers.get("authorization") != f"Bearer {self.token}":
            raise TwirpError(401, "unauthenticated", "invalid or missing bearer token")
        if not headers.get("content-type", "").startswith("application/json") or not isinstance(body, dict):
            raise TwirpError(400, "malformed", "expected a JSON object with Content-Type application/json")
        if (_pick(body, "workflow_run_backend_id"), _pick(body, "workflow_job_run_backend_id")) != (
            self.run_backend_id, self.job_backend_id):
            raise TwirpError(403, "permission_denied", "backend ids do not match the runtime token")
        faults = self._faults.get(method)
        if faults:
            fault = faults.popleft()
            raise TwirpError(fault.status, fault.code, fault.msg)
        return handlers[method](body)

    def _create(self, body: dict[str, Any]) -> dict[str, Any]:
        name = _pick(body, "name") or ""
        if not name or any(c in name for c in FORBIDDEN_NAME_CHARS):
            raise TwirpError(400, "invalid_argument", f"invalid artifact name {name!r}")
        if name in self.artifacts:
            raise TwirpError(409, "already_exists", f"an artifact named {name!r} already exists in this run")
        version = int(_pick(body, "version") or 0)
        if version < 4:
            raise TwirpError(400, "invalid_argument", f"unsupported artifact version {version}")
        expires_at = _pick(body, "expires_at")
        if expires_at is not None and datetime.fromisoformat(expires_at) <= datetime.now(UTC):
            raise TwirpError(400, "invalid_argument", "expires_at is in the past")
        self._next_id += 1
        blob_path = f"{self.container}/{self.run_backend_id}/{self.job_backend_id}/{self._next_id}"
        self.artifacts[name] = StoredArtifact(
            database_id=self._next_id, name=name, blob_path=blob_path, version=version,
            mime_type=_pick(body, "mime_type"), expires_at=expires_at,
            created_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
        url = self._signed_url(blob_path, self.upload_permissions, self.upload_endpoint)
        return {"ok": True, "signed_upload_url": url}

    def _finalize(self, body: dict[str, Any]) -> dict[str, Any]:
        artifact = self.artifacts.get(_pick(body, "name") or "")
        if artifact is None or artifact.finalized:
            raise TwirpError(404, "not_found", "no pending artifact with that name")
        size, digest = int(_pick(body, "size") or 0), _pick(body, "hash")
        blob = self.read_blob(artifact.blob_path)
        if blob.status_code != 200:
            raise TwirpError(400, "failed_precondition", f"blob not readable: HTTP {blob.status_code}")
        actual = "sha256:" + hashlib.sha256(blob.content).hexdigest()
        if size != len(blob.content) or (digest is not None and digest != actual):
            raise TwirpError(400, "invalid_argument", f"size/hash mismatch: got {size}/{digest}, "
                             f"blob has {len(blob.content)}/{actual}")
        artifact.size, artifact.digest, artifact.finalized = size, digest, True
        return {"ok": True, "artifact_id": str(artifact.database_id)}

    def _list(self, body: dict[str, Any]) -> dict[str, Any]:
        name_filter, id_filter = _pick(body, "name_filter"), _pick(body, "id_filter")
        listed = [
            a for a in self.artifacts.values()
            if a.finalized and (name_filter is None or a.name == name_filter)
            and (id_filter is None or str(a.database_id) == str(id_filter))
        ]
        return {"artifacts": [self._describe(a) for a in listed]}

    def _describe(self, artifact: StoredArtifact) -> dict[str, Any]:
        described: dict[str, Any] = {
            "workflow_run_backend_id": self.run_backend_id,
            "workflow_job_run_backend_id": self.job_backend_id,
            "database_id": str(artifact.database_id),
            "name": artifact.name,
            "size": str(artifact.size),
            "created_at": artifact.created_at,
        }
        if artifact.digest:
            described["digest"] = artifact.digest
        return described

    def _signed(self, body: dict[str, Any]) -> dict[str, Any]:
        artifact = self.artifacts.get(_pick(body, "name") or "")
        if artifact is None or not artifact.finalized:
            raise TwirpError(404, "not_found", "artifact not found")
        return {"signed_url": self._signed_url(artifact.blob_path, "r")}
