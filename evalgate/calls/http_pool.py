"""The HTTP client of the hot path: every HTTP target call and every judge / model call of a run.

One ``HttpPool`` per endpoint owner wraps an ``aiohttp.ClientSession`` whose keep-alive pool holds
``max(concurrency, MIN_POOL)`` connections, so a run at concurrency C never reconnects between calls.
Why aiohttp and not httpx here: its CPU per call is a fraction of httpx's and of the openai SDK's
(``python -m bench --scenarios clients``; figures in bench/README.md). A judged case makes two calls,
so the client alone decides whether evalgate keeps 64 calls in flight on one core.
httpx stays for everything else (GitHub API, artifacts, baselines).

Behaviour kept from httpx: redirects followed for targets (not for chat endpoints), ``HTTP(S)_PROXY`` /
``NO_PROXY`` honoured (looked up once per URL and pool instead of aiohttp's per-request lookup), TLS verified against the system trust store (``SSL_CERT_FILE`` / ``SSL_CERT_DIR``
honoured), each attempt cut at ``timeout`` seconds. Errors are aiohttp's (``aiohttp.ClientError``,
``TimeoutError``); ``executor.classify`` maps them to retryable connection errors and timeouts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import aiohttp

MIN_POOL = 10


@dataclass(frozen=True, slots=True)
class Reply:
    """A whole HTTP response: status, reason, headers (lower-case names) and the body bytes."""

    status: int
    reason: str
    headers: dict[str, str]
    body: bytes
    charset: str | None = None

    @property
    def text(self) -> str:
        """The body decoded with the declared charset, else UTF-8 (undecodable bytes replaced)."""
        try:
            return self.body.decode(self.charset or "utf-8", "replace")
        except LookupError:  # an unknown charset name
            return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        """The body as JSON (``ValueError`` when it is not)."""
        return json.loads(self.body)


class HttpPool:
    """Keep-alive HTTP/1.1 connections to one or more hosts, for ``concurrency`` calls in flight."""

    def __init__(self, *, timeout: float, concurrency: int, headers: Mapping[str, str] | None = None,
                 follow_redirects: bool = False) -> None:
        self.timeout = timeout
        self.pool_size = max(concurrency, MIN_POOL)
        self.headers = dict(headers or {})
        self.follow_redirects = follow_redirects
        self._session: aiohttp.ClientSession | None = None
        self._proxies: dict[str, tuple[Any, Any]] = {}

    def _open(self) -> aiohttp.ClientSession:
        """The session, created on first use inside the running event loop."""
        import aiohttp

        connector = aiohttp.TCPConnector(limit=self.pool_size, ssl=True)
        self._session = aiohttp.ClientSession(
            connector=connector, headers=self.headers, trust_env=False,
            timeout=aiohttp.ClientTimeout(total=self.timeout),
        )
        return self._session

    async def request(self, method: str, url: str, *, headers: Mapping[str, str] | None = None,
                      params: Mapping[str, Any] | None = None, body: bytes | None = None) -> Reply:
        """Send one request and read the whole reply."""
        session = self._session or self._open()
        proxy, proxy_auth = self._proxies.get(url) or self._proxy_for(url)
        async with session.request(method, url, headers=headers, params=_query(params), data=body,
                                   allow_redirects=self.follow_redirects, proxy=proxy,
                                   proxy_auth=proxy_auth) as response:
            content = await response.read()
            return Reply(response.status, response.reason or "", {k.lower(): v for k, v in response.headers.items()},
                         content, response.charset)

    def _proxy_for(self, url: str) -> tuple[Any, Any]:
        """The environment's proxy (and its credentials) for ``url``, or ``(None, None)``; remembered."""
        from aiohttp.helpers import get_env_proxy_for_url
        from yarl import URL

        try:
            found: tuple[Any, Any] = get_env_proxy_for_url(URL(url))
        except LookupError:
            found = (None, None)
        self._proxies[url] = found
        return found

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


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
