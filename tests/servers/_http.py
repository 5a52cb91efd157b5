"""Shared plumbing for the loopback test servers.

A small asyncio HTTP/1.1 server (keep-alive, pipelining in order, ``Content-Length`` and chunked request
bodies, ``Expect: 100-continue``) with request recording, ``GET /_stats`` / ``POST /_reset``, latency with
seeded jitter (``asyncio.sleep``, never blocking) and scripted faults (HTTP errors with ``Retry-After``,
dropped connections, raw bodies). A server runs in a background thread (``with Server(...) as srv``) or as
its own process (``python -m tests.servers.<module> --port 0 --print-port``, see :class:`SubprocessServer`).

It is hand-written rather than Starlette + uvicorn because it served 2-4x the requests per second of
uvicorn (h11) + Starlette in side-by-side loopback runs at concurrency 64, and because closing a socket
without any response needs direct access to the transport.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from email.utils import formatdate
from http import HTTPStatus
from pathlib import Path
from typing import IO, Any, Self

import httpx

from tests.servers.limits import RateLimits

LOOPBACK = "127.0.0.1"
MAX_HEAD_BYTES = 64 * 1024
MAX_BODY_BYTES = 64 * 1024 * 1024
RECORD_LIMIT = 1000
ADMIN_PATHS = frozenset({"/_stats", "/_reset", "/_requests"})
AUTH_HEADERS = frozenset({"authorization", "api-key", "x-api-key"})
REPO_ROOT = Path(__file__).resolve().parents[2]
DROPPED = "dropped"
DISCONNECTED = "client hung up"


class BadRequest(Exception):
    """The bytes on the wire are not an HTTP/1.x request we accept; carries the status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        super().__init__(message)


@dataclass(frozen=True)
class Request:
    """One parsed request. ``number`` is its 1-based position on its route since start or reset."""

    method: str
    path: str
    query: str
    version: str
    headers: Mapping[str, str]
    body: bytes = b""
    number: int = 0
    connection: int = 0
    """The 1-based serial number of the connection it arrived on (since start)."""
    timing: dict[str, float] = field(default_factory=dict, compare=False)
    """``time.perf_counter()`` stamps: ``received`` (the whole request read), ``answered`` (the response
    handed to the socket); shared with the request's ``Recorded``."""

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body parsed as JSON; raises ``ValueError`` when it is not JSON."""
        return json.loads(self.body)

    def keep_alive(self) -> bool:
        """HTTP/1.1 keeps the connection unless ``Connection: close``; HTTP/1.0 only on ``keep-alive``."""
        tokens = {t.strip().lower() for t in self.headers.get("connection", "").split(",")}
        if self.version == "HTTP/1.0":
            return "keep-alive" in tokens
        return "close" not in tokens


@dataclass(frozen=True)
class Response:
    status: int = 200
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    content_type: str = "application/json"


class Drop:
    """Returned by a handler to close the socket without sending any response."""

    def __repr__(self) -> str:
        return "DROP"


DROP = Drop()
Outcome = Response | Drop
Handler = Callable[[Request], Awaitable[Outcome]]


def json_response(data: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    return Response(status, json.dumps(data).encode(), dict(headers or {}))


def text_response(text: str, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    return Response(status, text.encode(), dict(headers or {}), "text/plain; charset=utf-8")


def estimate_tokens(text: str) -> int:
    """Rough token count: ceil(len(text) / 4) characters per token."""
    return (len(text) + 3) // 4


def format_seconds(seconds: float) -> str:
    """``2.0`` → ``"2"``, ``0.25`` → ``"0.25"`` (the form used in ``Retry-After``)."""
    return str(int(seconds)) if float(seconds).is_integer() else f"{seconds:g}"


def bearer_token(headers: Mapping[str, str]) -> str | None:
    value = headers.get("authorization", "")
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


# --------------------------------------------------------------------------------------------- wire format


def parse_head(head: bytes) -> Request:
    """Parse the request line and headers (everything up to and including the blank line)."""
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError as exc:  # pragma: no cover - latin-1 decodes every byte
        raise BadRequest(400, "undecodable request head") from exc
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise BadRequest(400, f"malformed request line {lines[0][:80]!r}")
    method, target, version = parts
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise BadRequest(400, f"malformed header line {line[:80]!r}")
        key = name.lower()
        headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
    path, _, query = target.partition("?")
    return Request(method.upper(), normalise_path(path), query, version, headers)


def normalise_path(path: str) -> str:
    """Drop a trailing slash (except for ``/``) so ``/api/query/`` routes like ``/api/query``."""
    return path.rstrip("/") or "/"


async def read_body(reader: asyncio.StreamReader, headers: Mapping[str, str]) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return await read_chunked(reader)
    raw = headers.get("content-length", "0").strip() or "0"
    if not raw.isdigit():
        raise BadRequest(400, f"bad Content-Length {raw!r}")
    length = int(raw)
    if length > MAX_BODY_BYTES:
        raise BadRequest(413, f"body of {length} bytes exceeds {MAX_BODY_BYTES}")
    return await reader.readexactly(length) if length else b""


async def read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        size_line = await reader.readuntil(b"\r\n")
        try:
            size = int(size_line.split(b";", 1)[0].strip(), 16)
        except ValueError as exc:
            raise BadRequest(400, "bad chunk size") from exc
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":  # skip trailers
                pass
            return b"".join(parts)
        total += size
        if total > MAX_BODY_BYTES:
            raise BadRequest(413, f"chunked body exceeds {MAX_BODY_BYTES} bytes")
        parts.append(await reader.readexactly(size))
        if await reader.readexactly(2) != b"\r\n":
            raise BadRequest(400, "chunk not terminated by CRLF")


class _DateCache:
    """``Date`` header value, recomputed at most once a second."""

    def __init__(self) -> None:
        self._second = -1
        self._value = ""

    def now(self) -> str:
        second = int(time.time())
        if second != self._second:
            self._second, self._value = second, formatdate(second, usegmt=True)
        return self._value


_DATE = _DateCache()


def render_response(response: Response, keep_alive: bool) -> bytes:
    try:
        reason = HTTPStatus(response.status).phrase
    except ValueError:
        reason = "Status"
    lines = [
        f"HTTP/1.1 {response.status} {reason}",
        f"Content-Type: {response.content_type}",
        f"Content-Length: {len(response.body)}",
        f"Date: {_DATE.now()}",
        "Server: evalgate-loopback",
    ]
    if not keep_alive:
        lines.append("Connection: close")
    lines.extend(f"{name}: {value}" for name, value in response.headers.items())
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + response.body


# --------------------------------------------------------------------------------- scripting building blocks


def reject_unknown(data: Mapping[str, Any], known: Collection[str], what: str) -> None:
    """Raise ``ValueError("unknown <what> settings: [...]")`` when ``data`` has keys outside ``known``."""
    unknown = set(data) - set(known)
    if unknown:
        raise ValueError(f"unknown {what} settings: {sorted(unknown)}")


@dataclass(frozen=True, kw_only=True)
class Script:
    """Match criteria and fault behaviour shared by OpenAI rules and agent faults.

    A script entry matches when every criterion given holds: ``contains`` (case-insensitive substring of the
    request's text), ``request_numbers`` (1-based numbers on the route since start/reset) and ``where``
    (a predicate on the parsed JSON body). With ``times=N`` it applies to the first N matching requests only,
    after which later entries are considered. Fault fields: ``delay_ms`` (extra latency), ``status`` (an error
    response), ``retry_after`` (seconds, sent as ``Retry-After``), ``drop`` (close the socket without a
    response) and ``body`` (sent verbatim as text/plain with ``status`` or 200).
    """

    contains: str | None = None
    request_numbers: Collection[int] | None = None
    where: Callable[[Any], bool] | None = None
    times: int | None = None
    delay_ms: float = 0.0
    status: int | None = None
    retry_after: float | None = None
    drop: bool = False
    body: str | None = None

    def __post_init__(self) -> None:
        if self.times is not None and self.times < 0:
            raise ValueError(f"times must be >= 0, got {self.times}")
        if self.delay_ms < 0:
            raise ValueError(f"delay_ms must be >= 0, got {self.delay_ms}")
        if self.status is not None and not 100 <= self.status <= 599:
            raise ValueError(f"status must be an HTTP status code, got {self.status}")
        if self.drop and (self.status is not None or self.body is not None):
            raise ValueError("drop closes the connection, it cannot be combined with status or body")

    def matches(self, text: str, number: int, payload: Any) -> bool:
        if self.contains is not None and self.contains.lower() not in text.lower():
            return False
        if self.request_numbers is not None and number not in self.request_numbers:
            return False
        return self.where is None or bool(self.where(payload))

    def is_fault(self) -> bool:
        return self.drop or self.status is not None or self.body is not None

    @classmethod
    def options_from_json(cls, data: Mapping[str, Any], what: str,
                          callables: Collection[str] = ()) -> dict[str, Any]:
        """Keyword arguments for ``cls`` from a JSON object: unknown keys and the fields that take callables
        (``where`` and ``callables``) are rejected; ``request_numbers`` becomes a frozenset."""
        reject_unknown(data, {f.name for f in fields(cls)} - {"where", *callables}, what)
        options = dict(data)
        if options.get("request_numbers") is not None:
            options["request_numbers"] = frozenset(options["request_numbers"])
        return options

    def fault(self, error_body: Callable[[int], Any]) -> Outcome:
        """The scripted failure: DROP, a raw body, or ``error_body(status)`` as JSON (call when is_fault())."""
        if self.drop:
            return DROP
        headers = {"Retry-After": format_seconds(self.retry_after)} if self.retry_after is not None else {}
        status = self.status if self.status is not None else 200
        if self.body is not None:
            return text_response(self.body, status, headers)
        return json_response(error_body(status), status, headers)


class ScriptBook:
    """An ordered list of script entries with per-entry use counters (entries themselves stay immutable)."""

    def __init__(self, entries: Sequence[Script]) -> None:
        self.entries = tuple(entries)
        self._used = [0] * len(self.entries)

    def pick(self, text: str, number: int, payload: Any,
             accept: Callable[[Any], bool] | None = None) -> Any:
        """First entry that ``accept`` allows (all, if None), is not used up and matches; counts one use."""
        for index, entry in enumerate(self.entries):
            if entry.times is not None and self._used[index] >= entry.times:
                continue
            if (accept is None or accept(entry)) and entry.matches(text, number, payload):
                self._used[index] += 1
                return entry
        return None

    def reset(self) -> None:
        self._used = [0] * len(self.entries)


async def scripted_outcome(entry: Script | None, error_body: Callable[[int], Any]) -> Outcome | None:
    """Apply a picked script entry: wait its ``delay_ms``, then its fault when it is one; None otherwise
    (also for no entry), and the handler answers normally."""
    if entry is None:
        return None
    if entry.delay_ms:
        await asyncio.sleep(entry.delay_ms / 1000)
    return entry.fault(error_body) if entry.is_fault() else None


class Latency:
    """Per-request delay in seconds: max(0, latency_ms + U(-jitter_ms, +jitter_ms)) / 1000, seeded."""

    def __init__(self, latency_ms: float = 0.0, jitter_ms: float = 0.0, seed: int = 0) -> None:
        if latency_ms < 0 or jitter_ms < 0:
            raise ValueError("latency_ms and jitter_ms must be >= 0")
        self.latency_ms, self.jitter_ms, self.seed = latency_ms, jitter_ms, seed
        self._rng = random.Random(seed)

    def next_delay(self) -> float:
        jitter = self._rng.uniform(-self.jitter_ms, self.jitter_ms) if self.jitter_ms else 0.0
        return max(0.0, self.latency_ms + jitter) / 1000.0

    def reseed(self) -> None:
        self._rng = random.Random(self.seed)


# ------------------------------------------------------------------------------------ stats and recordings


class Stats:
    """Thread-safe counts of responses by (path, status); a dropped connection counts as ``dropped``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, str]] = Counter()
        self._connections = 0
        self._in_flight = 0
        self._peak_in_flight = 0

    def count(self, path: str, status: str) -> None:
        with self._lock:
            self._counts[(path, status)] += 1

    def __call__(self) -> dict[str, Any]:
        """``srv.stats()`` is ``srv.stats.snapshot()``, matching ``SubprocessServer.stats()``."""
        return self.snapshot()

    def call_started(self) -> None:
        """An API request was read and is being answered (latency included)."""
        with self._lock:
            self._in_flight += 1
            self._peak_in_flight = max(self._peak_in_flight, self._in_flight)

    def call_finished(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def connection_opened(self) -> None:
        with self._lock:
            self._connections += 1

    def snapshot(self) -> dict[str, Any]:
        """``{"total": n, "connections": opened, "peak_in_flight": most API calls answered at once,
        "paths": {path: {status: n}}}``."""
        with self._lock:
            paths: dict[str, dict[str, int]] = {}
            for (path, status), n in sorted(self._counts.items()):
                paths.setdefault(path, {})[status] = n
            return {"total": sum(self._counts.values()), "connections": self._connections,
                    "peak_in_flight": self._peak_in_flight, "paths": paths}

    def clear(self) -> None:
        with self._lock:
            self._counts.clear()
            self._connections = 0
            self._peak_in_flight = self._in_flight


@dataclass(frozen=True)
class Recorded:
    """A request as the server saw it: ``seq`` counts all API requests since start/reset (1-based)."""

    seq: int
    number: int
    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    body: str
    received_at: float
    connection: int = 0
    timing: Mapping[str, float] = field(default_factory=dict, compare=False)

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def handled_ms(self) -> float | None:
        """The server's own time for this request in milliseconds: from having read the whole request to
        handing the whole response to the socket (None until answered, or when it was not)."""
        if "received" not in self.timing or "answered" not in self.timing:
            return None
        return (self.timing["answered"] - self.timing["received"]) * 1000


@dataclass(frozen=True)
class Disconnect:
    """A client that closed its connection while the server was still working on its request."""

    connection: int
    seq: int
    path: str
    at: float
    """``time.perf_counter()`` when the server noticed."""


class Recorder:
    """Bounded, thread-safe ring buffer of the last ``limit`` requests."""

    def __init__(self, limit: int = RECORD_LIMIT) -> None:
        self._lock = threading.Lock()
        self._items: deque[Recorded] = deque(maxlen=limit)
        self._seq = 0

    def add(self, request: Request) -> None:
        with self._lock:
            self._seq += 1
            self._items.append(
                Recorded(self._seq, request.number, request.method, request.path, request.query,
                         dict(request.headers), request.text(), time.time(), request.connection, request.timing)
            )
            request.timing["seq"] = self._seq

    def items(self, paths: Collection[str] | None = None) -> list[Recorded]:
        with self._lock:
            return [r for r in self._items if paths is None or r.path in paths]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._seq = 0


def secret_leaks(records: Sequence[Recorded], secret: str) -> list[str]:
    """Where ``secret`` appears in recorded requests outside the auth headers (empty list: nowhere)."""
    if not secret:
        raise ValueError("secret must be non-empty")
    places: list[str] = []
    for r in records:
        where = f"request #{r.seq} {r.method} {r.path}"
        if secret in r.body:
            places.append(f"{where}: body")
        if secret in r.query or secret in r.path:
            places.append(f"{where}: URL")
        places.extend(f"{where}: header {name}" for name, value in r.headers.items()
                      if name not in AUTH_HEADERS and secret in value)
    return places


# ----------------------------------------------------------------------------------------------- the server


@dataclass(frozen=True)
class Route:
    name: str
    methods: frozenset[str]
    handler: Handler


class LoopbackServer:
    """Base class: routing, admin endpoints, latency, recording, and the thread / process lifecycles.

    Subclasses register routes with :meth:`add_route` and may extend :meth:`on_reset`.
    """

    name = "loopback"

    def __init__(self, *, host: str = LOOPBACK, port: int = 0, latency_ms: float = 0.0,
                 jitter_ms: float = 0.0, seed: int = 0, record_limit: int = RECORD_LIMIT,
                 watch_disconnects: bool = False, limits: RateLimits | None = None) -> None:
        self.host = host
        self.watch_disconnects = watch_disconnects
        """Notice a client that hangs up while its request is being answered: the handler is cancelled
        (as a server that watches for disconnects stops generating) and a ``Disconnect`` is recorded (``disconnects()``)."""
        self._disconnects: list[Disconnect] = []
        self._connection_count = 0
        self.limits = limits
        """Request and token budgets enforced with 429s (``tests.servers.limits``); None: unlimited."""
        self.requested_port = port
        self.latency = Latency(latency_ms, jitter_ms, seed)
        self.stats = Stats()
        self.recorder = Recorder(record_limit)
        self._routes: dict[str, Route] = {}
        self._numbers: Counter[str] = Counter()
        self._port: int | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    # --------------------------------------------------------------------------------------- routing

    def add_route(self, name: str, paths: Sequence[str], methods: Collection[str], handler: Handler) -> None:
        route = Route(name, frozenset(m.upper() for m in methods), handler)
        for path in paths:
            self._routes[normalise_path(path)] = route

    async def dispatch(self, request: Request) -> Outcome:
        """Answer one request: admin endpoints directly, API routes after latency; count the outcome."""
        if request.path in ADMIN_PATHS:
            return self._admin(request)
        route = self._routes.get(request.path)
        if route is not None:
            self._numbers[route.name] += 1
            request = replace(request, number=self._numbers[route.name])
        self.recorder.add(request)
        if route is None:
            outcome: Outcome = json_response({"error": f"no route for {request.path}"}, 404)
        elif request.method not in route.methods:
            outcome = json_response({"error": f"{request.method} not allowed on {request.path}"}, 405,
                                    {"Allow": ", ".join(sorted(route.methods))})
        else:
            self.stats.call_started()
            try:
                outcome = await self._call(route, request)
            finally:
                self.stats.call_finished()
        self.stats.count(request.path, DROPPED if isinstance(outcome, Drop) else str(outcome.status))
        return outcome

    async def _call(self, route: Route, request: Request) -> Outcome:
        """Answer within ``limits`` (``tests.servers.limits``): a 429 at once when a bucket is short,
        else the answer with the rate-limit headers of the moment it is sent."""
        limits = self.limits
        if limits is None:
            return await self._answer(route, request)
        reserved = self.request_cost(request)
        wait, headers = limits.admit(reserved)
        if wait > 0:
            return json_response(self.error_body(429), 429, headers)
        outcome = await self._answer(route, request)
        used = self.reply_cost(outcome) if isinstance(outcome, Response) and outcome.status < 300 else None
        headers = limits.settle(reserved, used)
        return replace(outcome, headers={**outcome.headers, **headers}) if isinstance(outcome, Response) else outcome

    def extra_stats(self) -> dict[str, Any]:
        """What ``GET /_stats`` adds to the counts: ``limits`` (when enforced); subclasses add their own."""
        return {"limits": self.limits.snapshot()} if self.limits is not None else {}

    def request_cost(self, request: Request) -> int:
        """Tokens a request reserves from the token budget on arrival (servers that count tokens override)."""
        return 0

    def reply_cost(self, response: Response) -> int | None:
        """Tokens a 2xx reply really used (None: the reservation is returned)."""
        return None

    def error_body(self, status: int) -> Any:
        return {"error": HTTPStatus(status).phrase}

    async def _answer(self, route: Route, request: Request) -> Outcome:
        delay = self.latency.next_delay()
        if delay:
            await asyncio.sleep(delay)
        try:
            return await route.handler(request)
        except Exception as exc:  # a bug in a scripted callable: answer 500 and show it on stderr
            traceback.print_exc(file=sys.stderr)
            return json_response({"error": f"loopback handler raised {type(exc).__name__}"}, 500)

    def _admin(self, request: Request) -> Outcome:
        if request.path == "/_stats" and request.method == "GET":
            return json_response(self.stats.snapshot() | self.extra_stats())
        if request.path == "/_reset" and request.method == "POST":
            self.on_reset()
            return json_response({"reset": True})
        if request.path == "/_requests" and request.method == "GET":
            return json_response([{"seq": r.seq, "path": r.path, "connection": r.connection, "body": r.body,
                                   "handled_ms": r.handled_ms, "received": r.timing.get("received"),
                                   "answered": r.timing.get("answered")} for r in self.recorder.items()])
        return json_response({"error": f"{request.method} not allowed on {request.path}"}, 405)

    def on_reset(self) -> None:
        """Clear stats, recordings, route numbering, and reseed the jitter (subclasses add their state)."""
        self._disconnects.clear()
        self.stats.clear()
        self.recorder.clear()
        self._numbers.clear()
        self.latency.reseed()
        if self.limits is not None:
            self.limits.reset()

    def reset(self) -> None:
        """Same as ``POST /_reset``; runs on the server's loop when the server is running."""
        loop = self._loop
        if loop is not None and loop.is_running() and threading.current_thread() is not self._thread:
            done = threading.Event()

            def run() -> None:
                try:
                    self.on_reset()
                finally:
                    done.set()

            loop.call_soon_threadsafe(run)
            done.wait(10)
        else:
            self.on_reset()

    def requests(self, paths: Collection[str] | None = None) -> list[Recorded]:
        """Recorded API requests (the last ``record_limit``), optionally only those on ``paths``."""
        return self.recorder.items(paths)

    def json_bodies(self, paths: Collection[str] | None = None) -> list[Any]:
        """Parsed bodies of the recorded requests (optionally only on ``paths``) that were JSON."""
        bodies = []
        for record in self.requests(paths):
            try:
                bodies.append(record.json())
            except ValueError:
                continue
        return bodies

    def secret_leaks(self, secret: str) -> list[str]:
        """Places (bodies, URLs, non-auth headers) where ``secret`` was sent to this server."""
        return secret_leaks(self.recorder.items(), secret)

    def assert_secret_not_sent(self, secret: str) -> None:
        """Fail (without printing the secret) if it appears anywhere but an auth header."""
        places = self.secret_leaks(secret)
        if places:
            raise AssertionError("secret sent outside the auth header: " + "; ".join(places))

    # ------------------------------------------------------------------------------------ connections

    def disconnects(self) -> list[Disconnect]:
        """Clients that hung up while their request was being answered (with ``watch_disconnects``)."""
        return list(self._disconnects)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.stats.connection_opened()
        self._connection_count += 1
        serial = self._connection_count
        self._writers.add(writer)
        try:
            while await self._exchange(reader, writer, serial):
                pass
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Run each connection in a task we own (cancelled at shutdown; a coroutine callback would hit
        CPython 3.11's ``task.exception()`` on a cancelled task in asyncio.streams)."""
        task = asyncio.get_running_loop().create_task(self._connection(reader, writer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, serial: int = 0) -> bool:
        """Serve one request on the connection; True when the connection stays open for the next."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False
        except asyncio.LimitOverrunError:
            writer.write(render_response(json_response({"error": "request head too large"}, 431), False))
            return False
        try:
            request = parse_head(head)
            if request.headers.get("expect", "").lower() == "100-continue":
                writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            request = replace(request, body=await read_body(reader, request.headers), connection=serial)
        except BadRequest as exc:
            writer.write(render_response(json_response({"error": str(exc)}, exc.status), False))
            return False
        request.timing["received"] = time.perf_counter()
        if self.watch_disconnects:
            answered = await self._dispatch_watching(request, reader)
            if answered is None:
                return False
            outcome = answered
        else:
            outcome = await self.dispatch(request)
        if isinstance(outcome, Drop):
            writer.transport.abort()
            return False
        keep_alive = request.keep_alive()
        response = render_response(outcome, keep_alive)
        request.timing["answered"] = time.perf_counter()  # before the bytes can leave: never after the client has them
        writer.write(response)
        await writer.drain()
        return keep_alive

    async def _dispatch_watching(self, request: Request, reader: asyncio.StreamReader) -> Outcome | None:
        """``dispatch(request)``, cancelled when the client hangs up first (polled every 5 ms); None then."""
        task = asyncio.ensure_future(self.dispatch(request))
        while not task.done():
            await asyncio.wait({task}, timeout=0.005)
            if not task.done() and reader.at_eof():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                self._disconnects.append(Disconnect(request.connection, int(request.timing.get("seq", 0)),
                                                    request.path, time.perf_counter()))
                self.stats.count(request.path, DISCONNECTED)
                return None
        return task.result()

    # -------------------------------------------------------------------------------------- lifecycle

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError(f"{self.name} server is not running")
        return self._port

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>`` (no trailing slash, no ``/v1``)."""
        return f"http://{self.host}:{self.port}"

    async def serve(self, on_ready: Callable[[int], None]) -> None:
        """Bind, call ``on_ready(port)``, serve until :meth:`stop` (or a signal in CLI mode), then close."""
        self._loop = asyncio.get_running_loop()
        self._stop_event = asyncio.Event()
        server = await asyncio.start_server(self._on_connect, self.host, self.requested_port,
                                            limit=MAX_HEAD_BYTES, reuse_address=True)
        self._port = server.sockets[0].getsockname()[1]
        try:
            on_ready(self._port)
            await self._stop_event.wait()
        finally:
            server.close()
            for writer in list(self._writers):
                writer.transport.abort()
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await server.wait_closed()
            self._port = None

    def start(self, timeout: float = 10.0) -> Self:
        """Serve from a daemon thread with its own event loop; returns once the port is bound."""
        if self._thread is not None:
            raise RuntimeError(f"{self.name} server already started")
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            try:
                asyncio.run(self.serve(lambda _port: ready.set()))
            except BaseException as exc:
                failure.append(exc)
                ready.set()

        self._thread = threading.Thread(target=run, name=f"{self.name}-server", daemon=True)
        self._thread.start()
        if not ready.wait(timeout) or failure:
            self._thread.join(timeout)
            self._thread = None
            cause = failure[0] if failure else None
            raise RuntimeError(f"{self.name} server failed to start on {self.host}:{self.requested_port}") \
                from cause
        return self

    def stop(self, timeout: float = 10.0) -> None:
        thread, loop, event = self._thread, self._loop, self._stop_event
        if thread is None:
            return
        if loop is not None and event is not None:
            with contextlib.suppress(RuntimeError):  # the loop already closed
                loop.call_soon_threadsafe(event.set)
        thread.join(timeout)
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def run_cli(self, print_port: bool) -> None:
        """Serve in the foreground until SIGTERM/SIGINT; optionally print the bound port as line 1."""

        def ready(port: int) -> None:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self.stop_from_loop)
            if print_port:
                print(port, flush=True)
            print(f"{self.name} server listening on http://{self.host}:{port}", file=sys.stderr, flush=True)

        asyncio.run(self.serve(ready))

    def stop_from_loop(self) -> None:
        if self._stop_event is not None:
            self._stop_event.set()


# ------------------------------------------------------------------------------------------ command line


def cli_parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--host", default=LOOPBACK)
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--jitter-ms", type=float, default=0.0, help="uniform ± jitter added to the latency")
    parser.add_argument("--seed", type=int, default=0, help="seed for the jitter")
    parser.add_argument("--print-port", action="store_true", help="print the bound port as stdout line 1")
    parser.add_argument("--api-key-env", metavar="VAR", help="require the API key held in this env variable")
    parser.add_argument("--script", type=Path, help="JSON file with the server's scripted behaviour")
    parser.add_argument("--record-limit", type=int, default=RECORD_LIMIT)
    parser.add_argument("--rpm", type=float, help="requests per minute (token bucket; 429 when empty)")
    parser.add_argument("--tpm", type=float, help="tokens per minute (token bucket; 429 when short)")
    parser.add_argument("--limits-start", choices=("full", "empty"), default="full",
                        help="buckets full (a minute's burst first) or empty at start and after /_reset")
    parser.add_argument("--no-limit-headers", action="store_true", help="enforce the limits without x-ratelimit-*")
    return parser


def common_options(args: argparse.Namespace) -> dict[str, Any]:
    return {"host": args.host, "port": args.port, "latency_ms": args.latency_ms, "jitter_ms": args.jitter_ms,
            "seed": args.seed, "record_limit": args.record_limit,
            "limits": RateLimits.from_options(args.rpm, args.tpm, args.limits_start, not args.no_limit_headers)}


def api_key_from_env(args: argparse.Namespace) -> str | None:
    if not args.api_key_env:
        return None
    value = os.environ.get(args.api_key_env)
    if not value:
        raise SystemExit(f"--api-key-env: environment variable {args.api_key_env} is not set")
    return value


def script_main(description: str, build: Callable[[Mapping[str, Any], dict[str, Any]], LoopbackServer],
                argv: Sequence[str] | None = None) -> None:
    """Command line of a scriptable server: parse the common options, ``build(script, options)`` the server
    (``options`` include ``api_key``), serve until a signal. A bad script exits with one line."""
    args = cli_parser(description).parse_args(argv)
    options = common_options(args) | {"api_key": api_key_from_env(args)}
    try:
        server = build(load_script(args.script), options)
    except (TypeError, ValueError) as exc:
        raise SystemExit(f"{args.script}: {exc}") from exc
    server.run_cli(args.print_port)


def load_script(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SystemExit(f"{path}: cannot read script: {exc}") from exc
    if not isinstance(data, dict):
        raise SystemExit(f"{path}: script must be a JSON object")
    return data


# ------------------------------------------------------------------------------------- subprocess runner


def wait_ready(base_url: str, timeout: float = 10.0) -> None:
    """Poll ``GET /_stats`` until the server answers 200."""
    deadline = time.monotonic() + timeout
    with httpx.Client(trust_env=False, timeout=1.0) as client:
        while True:
            try:
                if client.get(f"{base_url}/_stats").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{base_url} not ready after {timeout}s")
            time.sleep(0.02)


def read_first_line(stream: IO[bytes], timeout: float) -> bytes:
    """The first line of a subprocess pipe, or b"" if none arrives within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    buffer = b""
    fd = stream.fileno()
    while b"\n" not in buffer:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            return b""
        chunk = os.read(fd, 256)
        if not chunk:
            return buffer
        buffer += chunk
    return buffer.split(b"\n", 1)[0]


class SubprocessServer:
    """Run ``python -m <module> --port 0 --print-port <args>`` and talk to it over loopback."""

    def __init__(self, module: str, args: Sequence[str] = (), *, env: Mapping[str, str] | None = None,
                 host: str = LOOPBACK, startup_timeout: float = 20.0) -> None:
        self.module, self.args, self.host = module, list(args), host
        self.env = dict(os.environ if env is None else env)
        self.startup_timeout = startup_timeout
        self.process: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._port: int | None = None

    def start(self) -> Self:
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in __exit__
        command = [sys.executable, "-m", self.module, "--host", self.host, "--port", "0", "--print-port",
                   *self.args]
        self.process = subprocess.Popen(command, cwd=REPO_ROOT, env=self.env, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.PIPE, stderr=self._stderr)
        assert self.process.stdout is not None
        line = read_first_line(self.process.stdout, self.startup_timeout).strip()
        if not line.isdigit():
            self.stop()
            raise RuntimeError(f"{self.module} did not print its port (got {line!r}); stderr: {self.stderr()}")
        self._port = int(line)
        wait_ready(self.base_url, self.startup_timeout)
        return self

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError(f"{self.module} is not running")
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def stats(self) -> dict[str, Any]:
        with httpx.Client(trust_env=False, timeout=10.0) as client:
            return client.get(f"{self.base_url}/_stats").raise_for_status().json()

    def reset(self) -> None:
        with httpx.Client(trust_env=False, timeout=10.0) as client:
            client.post(f"{self.base_url}/_reset").raise_for_status()

    def requests(self) -> list[dict[str, Any]]:
        """``GET /_requests``: the recorded requests (seq, path, connection, body, handled_ms)."""
        with httpx.Client(trust_env=False, timeout=10.0) as client:
            return client.get(f"{self.base_url}/_requests").raise_for_status().json()

    def stderr(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        return self._stderr.read().decode("utf-8", errors="replace")[-4000:]

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM, wait, SIGKILL if needed; returns the exit code."""
        process = self.process
        if process is None:
            return None
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout)
        if process.stdout is not None:
            process.stdout.close()
        self._port = None
        return process.returncode

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None


def iter_text_parts(content: Any) -> Iterator[str]:
    """Text of an OpenAI message ``content`` (a string or a list of ``{"type": "text", "text": ...}``)."""
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                yield part["text"]


def compile_marker(marker: str | re.Pattern[str]) -> re.Pattern[str]:
    return marker if isinstance(marker, re.Pattern) else re.compile(re.escape(marker))
