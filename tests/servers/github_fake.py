"""A stateful loopback fake of GitHub's issue-comment REST endpoints.

Endpoints (under ``/repos/{owner}/{repo}``):

* ``GET  /issues/{n}/comments?per_page=&page=`` – ascending ids, ``per_page`` default 30, max 100,
  ``Link`` header with ``next``/``last``/``first``/``prev`` like api.github.com;
* ``POST /issues/{n}/comments`` ``{"body": …}`` → 201;
* ``PATCH /issues/comments/{id}`` ``{"body": …}`` → 200, ``GET`` → 200, ``DELETE`` → 204 (404 for an
  unknown id).

Also, for ``evalgate publish`` (workflow_run): ``GET /actions/runs/{id}`` and
``GET /actions/runs/{id}/artifacts?name=`` (seeded with ``add_run_artifact``), ``GET
/actions/artifacts/{id}/zip`` → 302 to ``/_blob/{id}?sig=…`` on the same server (served without
authentication, like a signed storage URL), and ``GET /pulls?head=owner:branch&state=open`` /
``GET /pulls/{n}`` (seeded with ``add_pull``).

Modes: ``read_only`` answers writes with 403 "Resource not accessible by integration" (a fork PR's
token); bodies over 65,536 characters get GitHub's 422; ``fail_next`` queues canned responses
(5xx, secondary rate limits) for the next requests; a wrong or missing bearer token gets 401.
Every request is recorded in ``log`` (the Authorization header is stored as given).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from tests.servers._github import bad_credentials, not_accessible, not_found, paginate

MAX_BODY_CHARS = 65536
DOCS = "https://docs.github.com/rest/issues/comments"


@dataclass
class Recorded:
    """One request as the fake saw it."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


@dataclass
class Canned:
    """A response to return instead of handling the next request."""

    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)
    method: str | None = None
    """Only a request with this method consumes it (None: any request)."""


class GitHubFake:
    """Run with ``with GitHubFake() as gh: …``; ``gh.url`` is the API base URL."""

    def __init__(self, token: str = "ghs_fake_token_for_tests", *, bot_login: str = "github-actions[bot]") -> None:
        self.token = token
        self.bot_login = bot_login
        self.read_only = False
        self.user_login: str | None = None
        """``GET /user`` answers this login (a personal token); None: 403, as for ``GITHUB_TOKEN``."""
        self.write_delay: Callable[[], tuple[float, float]] | None = None
        """Seconds a POST / PATCH / DELETE waits before it is applied and after (before the reply), per request:
        a slow GitHub, so that concurrent writers' requests overlap in every order."""
        self.log: list[Recorded] = []
        self.comments: dict[int, dict[str, Any]] = {}
        self._issue_of: dict[int, tuple[str, int]] = {}
        self._canned: deque[Canned] = deque()
        self.runs: dict[int, dict[str, Any]] = {}
        self.run_artifacts: dict[int, list[dict[str, Any]]] = {}
        self.blobs: dict[int, tuple[str, bytes]] = {}
        self.pulls: list[dict[str, Any]] = []
        self._next_id = 1000
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> GitHubFake:
        handler = _make_handler(self)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> GitHubFake:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "start() the fake first"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # -- state helpers for tests -------------------------------------------------------------

    def add_comment(self, repo: str, issue: int, body: str, *, login: str = "someone", bot: bool = False) -> dict:
        """Seed an existing comment (as another user unless ``bot``)."""
        with self._lock:
            return self._create(repo, issue, body, login=self.bot_login if bot else login)

    def comments_on(self, repo: str, issue: int) -> list[dict[str, Any]]:
        """Comments of one issue in ascending id order."""
        with self._lock:
            return [c for cid, c in sorted(self.comments.items()) if self._issue_of[cid] == (repo, issue)]

    def fail_next(self, status: int = 502, count: int = 1, *, headers: dict[str, str] | None = None,
                  message: str = "Server Error", method: str | None = None) -> None:
        """Answer the next ``count`` requests (of ``method``) with ``status`` (e.g. 502, 403 + Retry-After)."""
        for _ in range(count):
            self.respond_next(status, {"message": message, "documentation_url": DOCS}, headers=headers, method=method)

    def respond_next(self, status: int, body: Any, *, headers: dict[str, str] | None = None,
                     method: str | None = None) -> None:
        """Queue an arbitrary response for the next request (of ``method``)."""
        with self._lock:
            self._canned.append(Canned(status, body, dict(headers or {}), method))

    def add_run_artifact(self, repo: str, run: dict[str, Any], name: str, content: bytes, *,
                         expired: bool = False) -> int:
        """Store ``content`` (zip bytes) as artifact ``name`` of workflow run ``run`` (a run object with ``id``)."""
        with self._lock:
            self._next_id += 1
            artifact_id = self._next_id
            self.runs[run["id"]] = run
            self.blobs[artifact_id] = (f"sig{artifact_id}x{len(content)}", content)
            self.run_artifacts.setdefault(run["id"], []).append({
                "id": artifact_id, "name": name, "size_in_bytes": len(content), "expired": expired,
                "created_at": _now(), "digest": "sha256:" + hashlib.sha256(content).hexdigest(),
                "archive_download_url": f"{self.url}/repos/{repo}/actions/artifacts/{artifact_id}/zip",
                "workflow_run": {"id": run["id"], "head_branch": run.get("head_branch"),
                                 "head_sha": run.get("head_sha")},
            })
            return artifact_id

    def add_pull(self, repo: str, number: int, *, head_sha: str, head_label: str, state: str = "open") -> None:
        """Seed a pull request whose head is ``head_label`` (``owner:branch``) at ``head_sha``."""
        owner, _, branch = head_label.partition(":")
        with self._lock:
            self.pulls.append({"number": number, "state": state, "base": {"repo": {"full_name": repo}},
                               "head": {"sha": head_sha, "ref": branch, "label": head_label,
                                        "repo": {"full_name": f"{owner}/{repo.split('/')[1]}"}}})

    def requests(self, method: str | None = None) -> list[Recorded]:
        return [r for r in self.log if method is None or r.method == method]

    # -- request handling (called from the server thread) -------------------------------------

    def handle(self, method: str, raw_path: str, headers: dict[str, str], raw_body: bytes) -> tuple[int, Any, dict]:
        parts = urlsplit(raw_path)
        query = parse_qs(parts.query)
        body = _decode(raw_body)
        with self._lock:
            self.log.append(Recorded(method, parts.path, query, headers, body))
            canned = self._take_canned(method)
            if canned is not None:
                return canned.status, canned.body, canned.headers
            if parts.path.startswith("/_blob/"):
                return self._blob(parts.path, query)
            if headers.get("authorization") != f"Bearer {self.token}":
                return bad_credentials(DOCS)
            if parts.path == "/user" and method == "GET":
                if self.user_login is None:
                    return not_accessible(DOCS)
                return 200, {"login": self.user_login, "id": 7, "type": "User"}, {}
            return self._route(method, parts.path, query, body)

    def _take_canned(self, method: str) -> Canned | None:
        for canned in self._canned:
            if canned.method in (None, method):
                self._canned.remove(canned)
                return canned
        return None

    def _route(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> tuple[int, Any, dict]:
        segments = path.strip("/").split("/")
        if len(segments) == 6 and segments[0] == "repos" and segments[3] == "issues" and segments[5] == "comments":
            repo, issue = f"{segments[1]}/{segments[2]}", segments[4]
            if not issue.isdigit():
                return not_found(DOCS)
            if method == "GET":
                return self._list(repo, int(issue), query, path)
            if method == "POST":
                return self._write(body, lambda text: (201, self._create(repo, int(issue), text, login=self.bot_login)))
        is_comment = len(segments) == 6 and segments[0] == "repos" and segments[3:5] == ["issues", "comments"]
        if is_comment and method == "PATCH" and segments[5].isdigit():
            return self._write(body, lambda text: self._update(int(segments[5]), text))
        if is_comment and method in ("GET", "DELETE") and segments[5].isdigit():
            cid = int(segments[5])
            if cid not in self.comments:
                return not_found(DOCS)
            if method == "GET":
                return 200, self.comments[cid], {}
            if self.read_only:
                return not_accessible(DOCS)
            del self.comments[cid]
            del self._issue_of[cid]
            return 204, None, {}
        if method == "GET" and len(segments) >= 4 and segments[0] == "repos":
            return self._read(f"{segments[1]}/{segments[2]}", segments[3:], query)
        return not_found(DOCS)

    def _read(self, repo: str, rest: list[str], query: dict[str, list[str]]) -> tuple[int, Any, dict]:
        if rest[:2] == ["actions", "runs"] and len(rest) >= 3 and rest[2].isdigit():
            run_id = int(rest[2])
            if run_id not in self.runs:
                return not_found(DOCS)
            if len(rest) == 3:
                return 200, self.runs[run_id], {}
            if rest[3:] == ["artifacts"]:
                name = (query.get("name") or [None])[0]
                items = [a for a in self.run_artifacts.get(run_id, []) if name in (None, a["name"])]
                return 200, {"total_count": len(items), "artifacts": items}, {}
        if rest == ["actions", "artifacts"]:  # the repository's artifacts (baseline: auto lists them by name)
            name = (query.get("name") or [None])[0]
            items = [a for listed in self.run_artifacts.values() for a in listed if name in (None, a["name"])]
            return 200, {"total_count": len(items), "artifacts": items}, {}
        if rest[:2] == ["actions", "artifacts"] and len(rest) == 4 and rest[2].isdigit() and rest[3] == "zip":
            artifact_id = int(rest[2])
            if artifact_id not in self.blobs:
                return not_found(DOCS)
            signature = self.blobs[artifact_id][0]
            return 302, None, {"Location": f"{self.url}/_blob/{artifact_id}?sig={signature}"}
        if rest == ["pulls"]:
            head = (query.get("head") or [None])[0]
            state = (query.get("state") or ["open"])[0]
            items = [p for p in self.pulls if (head is None or p["head"]["label"] == head)
                     and state in ("all", p["state"])]
            return 200, items, {}
        if len(rest) == 2 and rest[0] == "pulls" and rest[1].isdigit():
            found = [p for p in self.pulls if p["number"] == int(rest[1])]
            return (200, found[0], {}) if found else not_found(DOCS)
        return not_found(DOCS)

    def _blob(self, path: str, query: dict[str, list[str]]) -> tuple[int, Any, dict]:
        segment = path.rsplit("/", 1)[-1]
        stored = self.blobs.get(int(segment)) if segment.isdigit() else None
        if stored is None or (query.get("sig") or [None])[0] != stored[0]:
            return 403, b"AuthenticationFailed", {"Content-Type": "application/xml"}
        return 200, stored[1], {"Content-Type": "application/zip"}

    def _list(self, repo: str, issue: int, query: dict[str, list[str]], path: str) -> tuple[int, Any, dict]:
        items = [c for cid, c in sorted(self.comments.items()) if self._issue_of[cid] == (repo, issue)]
        chunk, per_page, page, last = paginate(items, query)
        return 200, chunk, {"Link": self._link_header(path, per_page, page, last)} if last > 1 else {}

    def _link_header(self, path: str, per_page: int, page: int, last: int) -> str:
        def ref(n: int, rel: str) -> str:
            return f'<{self.url}{path}?{urlencode({"per_page": per_page, "page": n})}>; rel="{rel}"'

        links = []
        if page > 1:
            links += [ref(page - 1, "prev"), ref(1, "first")]
        if page < last:
            links += [ref(page + 1, "next"), ref(last, "last")]
        return ", ".join(links)

    def _write(self, body: Any, action: Any) -> tuple[int, Any, dict]:
        if self.read_only:
            return not_accessible(DOCS)
        if not isinstance(body, dict) or not isinstance(body.get("body"), str):
            return 422, {"message": "Invalid request.\n\n\"body\" wasn't supplied.", "documentation_url": DOCS}, {}
        text = body["body"]
        if len(text) > MAX_BODY_CHARS:
            return 422, {
                "message": "Validation Failed",
                "errors": [{"resource": "IssueComment", "code": "unprocessable", "field": "data",
                            "message": f"Body is too long (maximum is {MAX_BODY_CHARS} characters)"}],
                "documentation_url": DOCS,
            }, {}
        status, result = action(text)
        return status, result, {}

    def _create(self, repo: str, issue: int, text: str, *, login: str) -> dict[str, Any]:
        self._next_id += 1
        cid = self._next_id
        now = _now()
        bot = login.endswith("[bot]")
        comment = {
            "id": cid,
            "node_id": f"IC_fake{cid}",
            "url": f"{self.url}/repos/{repo}/issues/comments/{cid}",
            "html_url": f"{self.url}/{repo}/pull/{issue}#issuecomment-{cid}",
            "issue_url": f"{self.url}/repos/{repo}/issues/{issue}",
            "body": text,
            "user": {"login": login, "id": 41898282 if bot else 1, "type": "Bot" if bot else "User"},
            "created_at": now,
            "updated_at": now,
            "author_association": "NONE",
        }
        self.comments[cid] = comment
        self._issue_of[cid] = (repo, issue)
        return comment

    def _update(self, cid: int, text: str) -> tuple[int, Any]:
        if cid not in self.comments:
            return not_found(DOCS)[:2]
        self.comments[cid] = {**self.comments[cid], "body": text, "updated_at": _now()}
        return 200, self.comments[cid]


def _make_handler(fake: GitHubFake) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            delay = fake.write_delay() if fake.write_delay and self.command in ("POST", "PATCH", "DELETE") else None
            if delay:
                time.sleep(delay[0])
            status, body, extra = fake.handle(self.command, self.path, headers, raw)
            if delay:
                time.sleep(delay[1])
            data = body if isinstance(body, bytes) else b"" if body is None else json.dumps(body).encode("utf-8")
            self.send_response(status)
            if not isinstance(body, bytes):
                self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("X-GitHub-Api-Version-Selected", "2022-11-28")
            for key, value in extra.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = do_DELETE = _serve

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler


def _decode(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", errors="replace")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
