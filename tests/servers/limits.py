"""Rate limits for the loopback servers: token buckets per minute, reported the way OpenAI reports them.

``RateLimits(rpm=600, tpm=150_000)``: a request bucket and a token bucket, each holding at most one
minute's budget and refilling continuously at limit / 60 per second. On arrival a request needs 1 request
and its reserved tokens (the server's ``request_cost``: the OpenAI server reserves the prompt's tokens plus
``max_tokens`` / ``max_completion_tokens``, as OpenAI does); when a bucket is short it is answered at once
with 429, ``Retry-After`` (whole seconds, rounded up), ``retry-after-ms`` (the exact wait) and the
headers below, and costs nothing. An admitted request takes both; when it is answered (2xx) the
reservation is settled to the tokens its reply's ``usage`` reports, so the token bucket counts real use.

Every admitted reply and every 429 carries (unless ``send_headers`` is off, a provider that sends none):
``x-ratelimit-limit-{requests,tokens}`` (per minute), ``x-ratelimit-remaining-{requests,tokens}`` (whole
units left now) and ``x-ratelimit-reset-{requests,tokens}`` (time until the bucket is full again, written
as OpenAI does: ``20ms``, ``1.2s``, ``6m0s``).

``start="empty"`` starts (and resets) the buckets empty, so the budget binds from the first call and
calls / rpm, tokens / tpm are true lower bounds of a run's time (``start="full"``: a minute's burst first).
``snapshot()`` counts admitted requests, their tokens, 429s, and the lowest level each bucket reached
(never below 0 while every client reserves at least what it uses).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

WINDOW_SECONDS = 60.0


def go_duration(seconds: float) -> str:
    """Seconds as OpenAI writes resets: ``20ms`` below 1 s, else ``1.2s``, ``6m0s``, ``1h0m0s``."""
    seconds = max(0.0, seconds)
    if seconds < 1:
        return f"{math.ceil(seconds * 1000)}ms"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{secs:.3f}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{int(hours)}h{int(minutes)}m{text}"
    return f"{int(minutes)}m{text}" if minutes else text


class Bucket:
    """``limit`` per ``window`` seconds: capacity ``limit``, refill ``limit / window`` per second."""

    def __init__(self, limit: float, *, window: float = WINDOW_SECONDS, full: bool = True,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if limit <= 0:
            raise ValueError("a rate limit must be positive")
        self.limit, self.window, self.clock, self.full_start = float(limit), window, clock, full
        self.rate = self.limit / window
        self.reset()

    def reset(self) -> None:
        self.level = self.limit if self.full_start else 0.0
        self.at = self.clock()
        self.lowest = self.level

    def refill(self, now: float) -> float:
        self.level = min(self.limit, self.level + self.rate * max(0.0, now - self.at))
        self.at = now
        return self.level

    def shortfall_seconds(self, amount: float, now: float) -> float:
        """0 when ``amount`` (at most the capacity) is available now, else the seconds until it is."""
        short = min(amount, self.limit) - self.refill(now)
        return 0.0 if short <= 1e-9 else short / self.rate

    def take(self, amount: float) -> None:
        """Take ``amount`` (a negative amount gives back, never above the capacity)."""
        self.level = min(self.limit, self.level - amount)
        self.lowest = min(self.lowest, self.level)

    def headers(self, kind: str, now: float) -> dict[str, str]:
        level = self.refill(now)
        return {f"x-ratelimit-limit-{kind}": str(int(self.limit)),
                f"x-ratelimit-remaining-{kind}": str(max(0, math.floor(level))),
                f"x-ratelimit-reset-{kind}": go_duration((self.limit - level) / self.rate)}


@dataclass
class RateLimits:
    """The request and token buckets of one server (module doc)."""

    rpm: float | None = None
    tpm: float | None = None
    start: Literal["full", "empty"] = "full"
    send_headers: bool = True
    window: float = WINDOW_SECONDS
    clock: Callable[[], float] = time.monotonic
    requests: Bucket | None = field(init=False, default=None)
    tokens: Bucket | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if self.start not in ("full", "empty"):
            raise ValueError("start must be 'full' or 'empty'")
        full = self.start == "full"
        if self.rpm:
            self.requests = Bucket(self.rpm, window=self.window, full=full, clock=self.clock)
        if self.tpm:
            self.tokens = Bucket(self.tpm, window=self.window, full=full, clock=self.clock)
        self._lock = threading.Lock()
        self._zero()

    def _zero(self) -> None:
        self.admitted = 0
        self.limited = 0
        self.tokens_used = 0
        self.started = self.clock()

    def reset(self) -> None:
        with self._lock:
            for bucket in (self.requests, self.tokens):
                if bucket is not None:
                    bucket.reset()
            self._zero()

    def admit(self, reserved: int) -> tuple[float, dict[str, str]]:
        """(0, headers) and the request's budget taken, or (seconds to wait, headers) for a 429."""
        with self._lock:
            now = self.clock()
            waits = [bucket.shortfall_seconds(amount, now) for bucket, amount in
                     ((self.requests, 1), (self.tokens, reserved)) if bucket is not None]
            wait = max(waits, default=0.0)
            if wait > 0:
                self.limited += 1
                return wait, self._headers(now) | {"retry-after": str(max(1, math.ceil(wait))),
                                                   "retry-after-ms": str(math.ceil(wait * 1000))}
            if self.requests is not None:
                self.requests.take(1)
            if self.tokens is not None:
                self.tokens.take(reserved)
            self.admitted += 1
            return 0.0, self._headers(now)

    def settle(self, reserved: int, used: int | None) -> dict[str, str]:
        """An admitted request was answered: its reservation becomes ``used`` tokens (None: not a
        completion, the reservation is returned). Returns the headers for its reply."""
        with self._lock:
            now = self.clock()
            if self.tokens is not None:
                self.tokens.refill(now)
                self.tokens.take((used or 0) - reserved)
            self.tokens_used += used or 0
            return self._headers(now)

    def _headers(self, now: float) -> dict[str, str]:
        if not self.send_headers:
            return {}
        headers: dict[str, str] = {}
        for kind, bucket in (("requests", self.requests), ("tokens", self.tokens)):
            if bucket is not None:
                headers |= bucket.headers(kind, now)
        return headers

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {"rpm": self.rpm, "tpm": self.tpm, "start": self.start, "headers": self.send_headers,
                    "admitted": self.admitted, "rate_limited_429": self.limited, "tokens": self.tokens_used,
                    "seconds": round(self.clock() - self.started, 3),
                    "lowest_requests": None if self.requests is None else round(self.requests.lowest, 3),
                    "lowest_tokens": None if self.tokens is None else round(self.tokens.lowest, 3)}

    @classmethod
    def from_options(cls, rpm: float | None, tpm: float | None, start: str, send_headers: bool) -> RateLimits | None:
        if not rpm and not tpm:
            return None
        return cls(rpm=rpm, tpm=tpm, start=start, send_headers=send_headers)  # type: ignore[arg-type]
