"""A stateful loopback fake of GitHub's issue-comment REST endpoints.

Endpoints (under ``/repos/{owner}/{repo}``):

* ``GET  /issues/{n}/comments?per_page=&page=`` – ascending ids, ``per_page`` default 30, max 100,
  ``Link`` header with ``next``/``last``/``first``/``prev`` like api.github.com;
* ``POST /issues/{n}/comments`` ``{"body": …}`` → 201;
* ``PATCH /issues/comments/{id}`` ``{"body": …}`` → 200 (404 for an unknown id).

Modes: ``read_only`` answers writes with 403 "Resource not accessible by integration" (a fork PR's
token); bodies over 65,536 characters get GitHub's 422; ``fail_next`` queues canned responses
(5xx, secondary rate limits) for the next requests; a wrong or missing bearer token gets 401.
Every request is recorded in ``log`` (the Authorization header is stored as given).
"""

from __future__ import annotations

import json
import threading
from collections import deque
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
        self.log: list[Recorded] = []
        self.comments: dict[int, dict[str, Any]] = {}
        self._issue_of: dict[int, tuple[str, int]] = {}
        self._canned: deque[Canned] = deque()
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
            if headers.get("authorization") != f"Bearer {self.token}":
                return bad_credentials(DOCS)
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
        return not_found(DOCS)

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
            status, body, extra = fake.handle(self.command, self.path, headers, raw)
            data = json.dumps(body).encode("utf-8")
            self.send_response(status)
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
