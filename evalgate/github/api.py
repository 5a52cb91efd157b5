"""A small synchronous GitHub REST client (httpx) with retries and pagination.

* Base URL: ``GITHUB_API_URL`` (default ``https://api.github.com``); headers ``Authorization: Bearer``,
  ``Accept: application/vnd.github+json``, ``X-GitHub-Api-Version: 2022-11-28``.
* Retries: at most ``max_attempts`` (4) attempts in total on 5xx, on secondary rate limits (403/429 with
  ``Retry-After`` or ``x-ratelimit-remaining: 0``) and on transport errors. The wait before attempt
  n+1 is ``Retry-After`` seconds when given, else the time until ``x-ratelimit-reset`` when the
  quota is exhausted, else ``backoff * 2**(n-1)`` seconds. No retry when that wait exceeds
  ``max_wait`` or when elapsed time plus the wait would exceed ``max_total`` seconds.
* Pagination: ``paginate`` follows ``Link: <…>; rel="next"`` and refuses links to another origin,
  so the token is never sent elsewhere.
* The token never appears in exceptions or messages.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from evalgate import __version__
from evalgate.safety.redact import redact, register_secret

DEFAULT_API_URL = "https://api.github.com"
ACCEPT = "application/vnd.github+json"
API_VERSION = "2022-11-28"
RETRY_STATUSES = frozenset({500, 502, 503, 504})


class GitHubAPIError(Exception):
    """A request that did not succeed; ``status`` is None for transport errors."""

    def __init__(self, method: str, url: str, status: int | None, message: str) -> None:
        self.method = method
        self.url = url
        self.status = status
        self.message = message
        where = f"HTTP {status}" if status is not None else "network error"
        super().__init__(redact(f"{method} {url}: {where}: {message}"))


@dataclass
class GitHubAPI:
    """GitHub REST client. Use as a context manager or call ``close()``."""

    token: str | None
    base_url: str = DEFAULT_API_URL
    timeout: float = 30.0
    max_attempts: int = 4
    backoff: float = 1.0
    max_wait: float = 60.0
    max_total: float = 120.0
    transport: httpx.BaseTransport | None = None
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    wall_clock: Callable[[], float] = time.time
    _client: httpx.Client = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        register_secret(self.token)
        self.base_url = (self.base_url or DEFAULT_API_URL).rstrip("/")
        headers = {
            "Accept": ACCEPT,
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": f"evalgate/{__version__}",
        }
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        self._client = httpx.Client(
            headers=headers, timeout=self.timeout, transport=self.transport, follow_redirects=False
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str], token: str | None, **kwargs: Any) -> GitHubAPI:
        """Client for ``GITHUB_API_URL`` (or the public API) with ``token``."""
        return cls(token=token, base_url=env.get("GITHUB_API_URL") or DEFAULT_API_URL, **kwargs)

    def __enter__(self) -> GitHubAPI:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._client.close()

    # -- requests ---------------------------------------------------------------------------

    def url(self, path_or_url: str) -> str:
        """Absolute URL for an API path (``/repos/…``) or an already absolute same-origin URL."""
        if path_or_url.startswith(("http://", "https://")):
            if not same_origin(path_or_url, self.base_url):
                raise GitHubAPIError("GET", _strip_query(path_or_url), None, "refusing a URL on another origin")
            return path_or_url
        return f"{self.base_url}/{path_or_url.lstrip('/')}"

    def request(
        self,
        method: str,
        path_or_url: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
    ) -> httpx.Response:
        """Send with retries; return the final response whatever its status (transport failure raises)."""
        url = self.url(path_or_url)
        started = self.clock()
        for attempt in range(1, self.max_attempts + 1):
            try:
                response = self._client.request(method, url, params=params, json=json)
            except httpx.TransportError as exc:
                wait = self._backoff(attempt)
                if not self._may_retry(attempt, started, wait):
                    raise GitHubAPIError(method, _strip_query(url), None, type(exc).__name__) from None
                self.sleep(wait)
                continue
            delay = retry_delay(response, attempt, self.backoff, self.wall_clock())
            if delay is None or delay > self.max_wait or not self._may_retry(attempt, started, delay):
                return response
            response.close()
            self.sleep(delay)
        raise AssertionError("unreachable: the loop always returns or raises")

    def json(self, method: str, path_or_url: str, **kwargs: Any) -> Any:
        """``request`` that raises ``GitHubAPIError`` on a non-2xx status and returns the JSON body."""
        response = self.request(method, path_or_url, **kwargs)
        if not response.is_success:
            raise GitHubAPIError(method, _strip_query(str(response.url)), response.status_code, error_message(response))
        return response.json() if response.content else None

    def get(self, path: str, **kwargs: Any) -> Any:
        return self.json("GET", path, **kwargs)

    def post(self, path: str, body: Any) -> Any:
        return self.json("POST", path, json=body)

    def patch(self, path: str, body: Any) -> Any:
        return self.json("PATCH", path, json=body)

    def delete(self, path: str) -> bool:
        """DELETE ``path``; False when it was already gone (404), ``GitHubAPIError`` for other failures."""
        response = self.request("DELETE", path)
        if response.status_code == 404:
            return False
        if not response.is_success:
            raise GitHubAPIError("DELETE", _strip_query(str(response.url)), response.status_code,
                                 error_message(response))
        return True

    def paginate(self, path: str, params: Mapping[str, Any] | None = None) -> Iterator[Any]:
        """Yield the items of every page, following ``Link: rel="next"`` until it is absent."""
        url: str | None = self.url(path)
        query: Mapping[str, Any] | None = params
        while url:
            response = self.request("GET", url, params=query)
            if not response.is_success:
                raise GitHubAPIError("GET", _strip_query(url), response.status_code, error_message(response))
            page = response.json()
            if not isinstance(page, list):
                raise GitHubAPIError("GET", _strip_query(url), response.status_code, "expected a JSON array")
            yield from page
            next_url = response.links.get("next", {}).get("url")
            url = self.url(next_url) if next_url else None
            query = None  # the next link carries the query

    # -- retry policy -------------------------------------------------------------------------

    def _backoff(self, attempt: int) -> float:
        return min(self.backoff * 2 ** (attempt - 1), self.max_wait)

    def _may_retry(self, attempt: int, started: float, wait: float) -> bool:
        if attempt >= self.max_attempts:
            return False
        return (self.clock() - started) + wait <= self.max_total


def retry_delay(response: httpx.Response, attempt: int, backoff: float, now: float) -> float | None:
    """Seconds to wait before retrying ``response``, or None when it must not be retried.

    5xx (500/502/503/504) → ``Retry-After`` or ``backoff * 2**(attempt-1)``. 403/429 only when it is a
    rate limit: ``Retry-After`` present, or ``x-ratelimit-remaining: 0`` (wait until
    ``x-ratelimit-reset``, epoch seconds).
    """
    status = response.status_code
    retry_after = parse_retry_after(response.headers.get("retry-after"), now)
    exponential = backoff * 2 ** (attempt - 1)
    if status in RETRY_STATUSES:
        return retry_after if retry_after is not None else exponential
    if status not in (403, 429):
        return None
    if retry_after is not None:
        return retry_after
    if response.headers.get("x-ratelimit-remaining") == "0":
        reset = response.headers.get("x-ratelimit-reset", "")
        return max(0.0, float(reset) - now) if reset.isdigit() else exponential
    return None


def parse_retry_after(value: str | None, now: float) -> float | None:
    """``Retry-After`` as seconds (delta-seconds or an HTTP date); None when absent or invalid."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now)


def error_message(response: httpx.Response) -> str:
    """GitHub's ``message`` (plus the first ``errors[].message``) or the reason phrase."""
    try:
        body = response.json()
    except ValueError:
        return response.reason_phrase or "error"
    if not isinstance(body, dict):
        return response.reason_phrase or "error"
    message = str(body.get("message") or response.reason_phrase or "error")
    errors = body.get("errors")
    if isinstance(errors, list) and errors and isinstance(errors[0], dict) and errors[0].get("message"):
        message += f" ({errors[0]['message']})"
    return redact(message)


def same_origin(url: str, base: str) -> bool:
    """True when scheme, host and port of ``url`` and ``base`` match."""
    a, b = httpx.URL(url), httpx.URL(base)
    return (a.scheme, a.host, a.port) == (b.scheme, b.host, b.port)


def _strip_query(url: str) -> str:
    return str(httpx.URL(url).copy_with(query=None))
