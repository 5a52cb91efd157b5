"""The HTTP client of the hot path: every HTTP target call and every judge / model call of a run.

One ``HttpPool`` per endpoint owner wraps an ``aiohttp.ClientSession`` whose keep-alive pool holds
``max(concurrency, MIN_POOL)`` connections, so a run at concurrency C never reconnects between calls.
Why aiohttp and not httpx here: its CPU per call is a fraction of httpx's and of the openai SDK's
(``python -m bench --scenarios clients``; figures in bench/README.md). A judged case makes two calls,
so the client alone decides whether evalgate keeps 64 calls in flight on one core.
httpx stays for everything else (GitHub API, artifacts, baselines).

Behaviour kept from httpx: redirects followed for targets (not for chat endpoints), ``HTTP(S)_PROXY`` /
``NO_PROXY`` honoured (looked up once per URL and pool instead of aiohttp's per-request lookup), TLS verified against the system trust store (``SSL_CERT_FILE`` / ``SSL_CERT_DIR``
honoured). Errors are aiohttp's (``aiohttp.ClientError``, ``TimeoutError``); ``executor.classify`` maps
them to retryable connection errors and timeouts.

Timeouts (seconds, each optional): ``timeout`` cuts the whole attempt (connect, send, wait, read);
``connect_timeout`` the TCP connect and TLS handshake of a new connection; ``read_timeout`` the longest
silence while the reply is awaited: from the request until the first byte of the reply, then between
any two chunks of it. A server that queues a request or generates a whole reply before sending headers
is silent for all that time; one that streams slowly is not (only ``timeout`` bounds it). A request that
is cancelled or times out closes its connection: it is never handed back to the keep-alive pool with a
reply still coming, and the server sees the disconnect.

Timing (``timed=True``, the targets' pools): every ``Reply`` carries ``elapsed_ms``, from the moment the
request is written to a ready connection (connection set-up excluded, reported as ``connect_ms``) until
its last byte was read; untimed pools (judges) skip aiohttp's trace hooks. With ``wire``
(``calls.wire.WireLoop``) the pool lives on that dedicated loop, so the run's other work does not delay
the timestamps.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import aiohttp

    from evalgate.calls.wire import WireLoop

MIN_POOL = 10


class ReplyTooLarge(Exception):
    """The reply body is larger than the caller allows (not retried: the next attempt would be as large)."""


@dataclass(frozen=True, slots=True)
class Reply:
    """A whole HTTP response: status, reason, headers (lower-case names) and the body bytes."""

    status: int
    reason: str
    headers: dict[str, str]
    body: bytes
    charset: str | None = None
    elapsed_ms: float | None = None
    """Milliseconds from writing the request on a ready connection to reading the reply's last byte."""
    connect_ms: float | None = None
    """Milliseconds spent opening a new connection for this request (None: a kept-alive one was reused)."""

    @property
    def text(self) -> str:
        """The body decoded with the declared charset, else UTF-8 (undecodable bytes replaced)."""
        try:
            return self.body.decode(self.charset or "utf-8", "replace")
        except LookupError:  # an unknown charset name
            return self.body.decode("utf-8", "replace")

    def text_start(self, chars: int) -> str:
        """About the first ``chars`` characters of ``text``, decoding only the body's start."""
        head = self.body[: chars * 4]
        try:
            return head.decode(self.charset or "utf-8", "replace")[:chars]
        except LookupError:
            return head.decode("utf-8", "replace")[:chars]

    def json(self) -> Any:
        """The body as JSON (``ValueError`` when it is not)."""
        return json.loads(self.body)


class HttpPool:
    """Keep-alive HTTP/1.1 connections to one or more hosts, for ``concurrency`` calls in flight."""

    def __init__(self, *, timeout: float, concurrency: int, headers: Mapping[str, str] | None = None,
                 follow_redirects: bool = False, connect_timeout: float | None = None,
                 read_timeout: float | None = None, wire: WireLoop | None = None, timed: bool = False) -> None:
        self.timeout = timeout
        self.timed = timed
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.pool_size = max(concurrency, MIN_POOL)
        self.headers = dict(headers or {})
        self.follow_redirects = follow_redirects
        self.wire = wire
        self._session: aiohttp.ClientSession | None = None
        self._proxies: dict[str, tuple[Any, Any]] = {}

    def _open(self) -> aiohttp.ClientSession:
        """The session, created on first use inside the loop that uses it (the wire loop, if any)."""
        import aiohttp  # lazy: aiohttp (~0.1 s) only when a call is made

        traces = None
        if self.timed:
            trace = aiohttp.TraceConfig(trace_config_ctx_factory=_timing_context)  # type: ignore[arg-type]
            trace.on_connection_create_start.append(_connect_started)
            trace.on_connection_create_end.append(_connection_ready)
            trace.on_connection_reuseconn.append(_connection_ready)
            traces = [trace]
        connector = aiohttp.TCPConnector(limit=self.pool_size, ssl=True)
        self._session = aiohttp.ClientSession(
            connector=connector, headers=self.headers, trust_env=False, trace_configs=traces,
            timeout=aiohttp.ClientTimeout(total=self.timeout, sock_connect=self.connect_timeout,
                                          sock_read=self.read_timeout),
        )
        return self._session

    async def request(self, method: str, url: str, *, headers: Mapping[str, str] | None = None,
                      params: Mapping[str, Any] | None = None, body: bytes | None = None,
                      max_bytes: int | None = None) -> Reply:
        """Send one request and read the whole reply (on the wire loop when the pool has one); with
        ``max_bytes`` a longer body raises ``ReplyTooLarge`` as soon as that is known (its
        Content-Length, or the bytes read so far)."""
        if self.wire is not None:
            return await self.wire.call(lambda: self._request(method, url, headers, params, body, max_bytes))
        return await self._request(method, url, headers, params, body, max_bytes)

    async def _request(self, method: str, url: str, headers: Mapping[str, str] | None,
                       params: Mapping[str, Any] | None, body: bytes | None, max_bytes: int | None = None) -> Reply:
        session = self._session or self._open()
        proxy, proxy_auth = self._proxies.get(url) or self._proxy_for(url)
        timing = Timing() if self.timed else None
        async with session.request(method, url, headers=headers, params=_query(params), data=body,
                                   allow_redirects=self.follow_redirects, proxy=proxy,
                                   proxy_auth=proxy_auth, trace_request_ctx=timing) as response:
            if max_bytes is None or (response.content_length is not None and response.content_length <= max_bytes):
                content = await response.read()
            else:
                content = await _read_at_most(response, max_bytes)
            finished = time.perf_counter()
            headers_ = {k.lower(): v for k, v in response.headers.items()}
            if timing is None:
                return Reply(response.status, response.reason or "", headers_, content, response.charset)
            return Reply(response.status, response.reason or "", headers_, content, response.charset,
                         timing.elapsed_ms(finished), timing.connect_ms)

    def _proxy_for(self, url: str) -> tuple[Any, Any]:
        """The environment's proxy (and its credentials) for ``url``, or ``(None, None)``; remembered."""
        from aiohttp.helpers import get_env_proxy_for_url  # lazy: aiohttp (~0.1 s) only when a call is made
        from yarl import URL  # lazy: aiohttp's URL type, only when a call is made

        try:
            found: tuple[Any, Any] = get_env_proxy_for_url(URL(url))
        except LookupError:
            found = (None, None)
        self._proxies[url] = found
        return found

    async def aclose(self) -> None:
        if self._session is None:
            return
        if self.wire is not None and self.wire.running:
            await self.wire.call(self._close)
        else:
            await self._close()

    async def _close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


async def _read_at_most(response: aiohttp.ClientResponse, limit: int) -> bytes:
    """The body of ``response``, or ``ReplyTooLarge`` once it is known to exceed ``limit`` bytes (the
    connection is then closed rather than drained)."""
    if response.content_length is not None and response.content_length > limit:
        response.close()
        raise ReplyTooLarge(f"the reply is {response.content_length:,} bytes, more than the {limit:,} allowed")
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(1 << 16):
        size += len(chunk)
        if size > limit:
            response.close()
            raise ReplyTooLarge(f"the reply is more than the {limit:,} bytes allowed")
        chunks.append(chunk)
    return b"".join(chunks)


class Timing:
    """Timestamps of one request (``time.perf_counter`` seconds), filled by the pool's trace hooks."""

    __slots__ = ("connect_ms", "connecting", "ready", "started")

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.connecting: float | None = None
        self.ready: float | None = None
        self.connect_ms: float | None = None

    def elapsed_ms(self, finished: float) -> float:
        """Milliseconds from the request's connection being ready (the request is written next) to
        ``finished``. A redirect's later hops count from the first hop's start."""
        return (finished - (self.ready if self.ready is not None else self.started)) * 1000


def _timing_context(trace_request_ctx: Any = None) -> Any:
    return trace_request_ctx


async def _connect_started(session: Any, timing: Any, params: Any) -> None:
    if isinstance(timing, Timing):
        timing.connecting = time.perf_counter()


async def _connection_ready(session: Any, timing: Any, params: Any) -> None:
    """The connection the request is written to next is ready; the first hop's time is kept."""
    if isinstance(timing, Timing) and timing.ready is None:
        timing.ready = time.perf_counter()
        if timing.connecting is not None:
            timing.connect_ms = round((timing.ready - timing.connecting) * 1000, 3)


def _query(params: Mapping[str, Any] | None) -> list[tuple[str, str]] | None:
    """Query pairs the way httpx encodes them: ``true``/``false`` for booleans, empty for null, one pair per
    item of a list; objects as JSON text."""
    if not params:
        return None
    return [(str(key), _query_value(item)) for key, value in params.items()
            for item in (value if isinstance(value, list) else [value])]


def _query_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)
