"""Pacing calls to a provider's rate limits: read them from its replies and stay within them.

**Headers** (OpenAI's names, read on every reply, 429s included; names lower-case):

| header | meaning |
|---|---|
| ``x-ratelimit-limit-requests`` / ``-tokens`` | the budget: requests / tokens per minute |
| ``x-ratelimit-remaining-requests`` / ``-tokens`` | what is left of it now |
| ``x-ratelimit-reset-requests`` / ``-tokens`` | time until the budget is whole again |

A reset is a Go-style duration (``6m0s``, ``1.2s``, ``20ms``, ``1h2m3.5s``), plain seconds (``30``,
``0.5``) or a moment (RFC 3339 ``2026-11-24T10:00:00Z`` or an HTTP date), read as the seconds until it.

**One header budget** is modelled as the token bucket the provider describes: capacity L = the limit;
refill rate r = L / 60 s, or (L − remaining) / reset once a reply shows a deficit of at least 2 % of L
(a budget per day then refills at its own pace); after every reply the level is set to
``remaining − (estimated cost of the other calls still in flight)`` (the provider may have counted them
already: counting them twice delays calls by their cost, it never exceeds the budget), and between
replies level(t) = min(L, level + r · (t − t_reply)).

**Configured caps** (``judge_rpm`` / ``judge_tpm`` / ``target_rpm`` / ``target_tpm``) for providers that send
no headers: a sliding window, at most ``rpm`` requests and ``tpm`` tokens sent in any 60 s. With headers
too, both apply.

**Token cost of a call**, estimated before it: prompt tokens counted locally × the provider's ratio
(``usage.prompt_tokens`` / local count, a moving average over its replies) + ``max_tokens``; replaced by the
reply's ``usage`` total once that is known.

**Scheduling**: calls wait first come, first served until every budget has room for their cost, then
take it. The first call to a provider goes alone for up to ``PROBE_SECONDS`` (0.3 s): a provider whose budget is
already spent (another job on the same key) refuses it at once, with its budgets in the headers, so that
costs one 429 instead of one per call in flight; a reply that is not a 429, or no reply within 0.3 s (a
provider generating an answer is not refusing), lets the others go. A refused first call hands the role
on to the next. A 429's wait (``Retry-After``)
pauses every call to that provider until it has passed. A provider that sends no headers, has no caps and
never answered 429 is not paced at all (one dictionary lookup per reply).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import email.utils
import math
import re
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

WINDOW_SECONDS = 60.0
"""Budgets are per minute."""
DERIVE_MIN_FRACTION = 0.02
"""A reply's refill rate (L − remaining) / reset is used once the deficit is at least 2 % of L."""
PROBE_SECONDS = 0.3
"""How long the other calls wait for a provider's first reply (see the module doc)."""
MAX_NAP = 0.25
"""Longest single wait of a paced call before it looks again (seconds): replies can free budget earlier."""
PROMPT_MARGIN, PROMPT_SLACK = 1.1, 16
"""A call's prompt tokens are estimated as local count × ratio × 1.1 + 16 (as the cost budget does)."""
RATIO_WEIGHT = 0.2
"""Weight of the newest reply in the moving average of the provider's prompt-token ratio."""
BOUND_SHOWN_SECONDS = 10.0
"""The progress line names the budget that made calls wait within the last 10 s."""

REQUESTS = "requests"
TOKENS = "tokens"
_HEADER_NAMES = {kind: (f"x-ratelimit-limit-{kind}", f"x-ratelimit-remaining-{kind}", f"x-ratelimit-reset-{kind}")
                 for kind in (REQUESTS, TOKENS)}
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0,
          "d": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h|d)")
_DURATION = re.compile(r"(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|μs|ms|s|m|h|d))+")


# --- reading the headers -------------------------------------------------------------------------------


def parse_duration(text: str, now: float | None = None) -> float | None:
    """Seconds in a reset value: a Go-style duration (``6m0s`` = 360, ``1.2s``, ``20ms`` = 0.02), plain
    seconds, or a moment (RFC 3339, HTTP date) as the seconds from ``now`` (epoch seconds, default the
    current time) until it, at least 0. None when unreadable."""
    value = text.strip()
    if not value:
        return None
    with contextlib.suppress(ValueError):
        seconds = float(value)
        return max(0.0, seconds) if math.isfinite(seconds) else None
    compact = value.replace(" ", "")
    if _DURATION.fullmatch(compact):
        return sum(float(number) * _UNITS[unit] for number, unit in _PART.findall(compact))
    moment = _moment(value)
    if moment is None:
        return None
    return max(0.0, moment - (time.time() if now is None else now))


def _moment(value: str) -> float | None:
    """Epoch seconds of an RFC 3339 timestamp or an HTTP date; None when it is neither."""
    with contextlib.suppress(ValueError):
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=dt.UTC)
        return parsed.timestamp()
    try:
        return email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


@dataclass(frozen=True, slots=True)
class Budget:
    """One budget as a reply reported it: ``limit`` per minute, ``remaining`` now, ``reset_seconds`` until
    whole again (each None when absent or unreadable)."""

    limit: float | None
    remaining: float | None
    reset_seconds: float | None


@dataclass(frozen=True, slots=True)
class RateHeaders:
    """The request and token budgets of one reply (None: the reply did not report that budget)."""

    requests: Budget | None
    tokens: Budget | None


def read_rate_headers(headers: Mapping[str, str], now: float | None = None) -> RateHeaders | None:
    """The six ``x-ratelimit-*`` headers of a reply (lower-case names), or None when it has none of them."""
    found: dict[str, Budget | None] = {}
    for kind, (limit, remaining, reset) in _HEADER_NAMES.items():
        raw = (headers.get(limit), headers.get(remaining), headers.get(reset))
        if raw == (None, None, None):
            found[kind] = None
            continue
        found[kind] = Budget(_number(raw[0]), _number(raw[1]), None if raw[2] is None else parse_duration(raw[2], now))
    if found[REQUESTS] is None and found[TOKENS] is None:
        return None
    return RateHeaders(found[REQUESTS], found[TOKENS])


def format_duration(seconds: float) -> str:
    """Seconds as OpenAI writes them: ``20ms``, ``1.2s``, ``6m0s``, ``1h0m0s`` (milliseconds below 1 s)."""
    seconds = max(0.0, seconds)
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{secs:.3f}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{int(hours)}h{int(minutes)}m{text}"
    return f"{int(minutes)}m{text}" if minutes else text


# --- budgets -------------------------------------------------------------------------------------------


class HeaderBucket:
    """A provider's budget as its headers describe it (module doc): level(t) = min(limit, level + rate·(t − at))."""

    __slots__ = ("at", "level", "limit", "rate")

    def __init__(self, limit: float, now: float) -> None:
        self.limit = max(1.0, limit)
        self.rate = self.limit / WINDOW_SECONDS
        self.level = self.limit
        self.at = now

    def available(self, now: float) -> float:
        return min(self.limit, self.level + self.rate * max(0.0, now - self.at))

    def wait(self, amount: float, now: float) -> float:
        """Seconds until ``amount`` (at most the whole budget) is available."""
        short = min(amount, self.limit) - self.available(now)
        return 0.0 if short <= 0 else short / self.rate

    def take(self, amount: float, now: float) -> None:
        self.level, self.at = self.available(now) - amount, now

    def give(self, amount: float, now: float) -> None:
        self.level, self.at = self.available(now) + amount, now

    def sync(self, budget: Budget, now: float, in_flight: float) -> None:
        """Adopt a reply's report; ``in_flight`` is the estimated cost of the other calls still in flight."""
        if budget.limit:
            self.limit = budget.limit
            if budget.remaining is None or budget.reset_seconds is None:
                self.rate = self.limit / WINDOW_SECONDS
        if budget.remaining is None:
            return
        deficit = self.limit - budget.remaining
        if budget.reset_seconds and deficit >= max(1.0, DERIVE_MIN_FRACTION * self.limit):
            self.rate = deficit / budget.reset_seconds
        self.level, self.at = min(self.limit, budget.remaining) - in_flight, now


class _Entry:
    __slots__ = ("amount", "at", "live")

    def __init__(self, at: float, amount: float) -> None:
        self.at, self.amount, self.live = at, amount, True


class Window:
    """What was sent in the last ``span`` seconds; with a ``cap``, the sliding-window limit on it."""

    __slots__ = ("_entries", "cap", "span", "total")

    def __init__(self, cap: float | None = None, span: float = WINDOW_SECONDS) -> None:
        self.cap = cap
        self.span = span
        self.total = 0.0
        self._entries: deque[_Entry] = deque()

    def trim(self, now: float) -> None:
        entries = self._entries
        while entries and entries[0].at <= now - self.span:
            entry = entries.popleft()
            entry.live = False
            self.total -= entry.amount
        if not entries:
            self.total = 0.0  # no drift from float sums

    def wait(self, amount: float, now: float) -> float:
        """Seconds until ``amount`` (at most the cap) fits under the cap; 0 without a cap."""
        if self.cap is None:
            return 0.0
        self.trim(now)
        excess = self.total + min(amount, self.cap) - self.cap
        if excess <= 1e-9:
            return 0.0
        freed = 0.0
        for entry in self._entries:
            freed += entry.amount
            if freed >= excess - 1e-9:
                return max(0.0, entry.at + self.span - now)
        return self.span

    def add(self, amount: float, now: float) -> _Entry:
        self.trim(now)
        entry = _Entry(now, amount)
        self._entries.append(entry)
        self.total += amount
        return entry

    def amend(self, entry: _Entry | None, amount: float) -> None:
        """Replace an entry's estimate with what it really cost (no effect once it left the window)."""
        if entry is not None and entry.live:
            self.total += amount - entry.amount
            entry.amount = amount


# --- the pacer -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TokenEstimate:
    """What a call will cost in tokens: ``prompt`` counted locally, plus ``max_tokens`` of completion."""

    prompt: int
    max_tokens: int


Estimator = Callable[[], TokenEstimate]
"""Computes a call's token estimate; only called when its provider keeps a token budget."""


@dataclass(slots=True)
class Ticket:
    """One admitted attempt: what it was estimated to cost and the window entries to correct."""

    tokens: float = 0.0
    local_prompt: int = 0
    probe: bool = False
    request_entry: _Entry | None = None
    token_entry: _Entry | None = None


@dataclass(frozen=True, slots=True)
class PaceStatus:
    """The budget that made calls wait most recently: ``used`` of ``limit`` in the last minute."""

    provider: str
    budget: str
    used: float
    limit: float

    def describe(self) -> str:
        """``paced by tokens/min: 148k of 150k``."""
        return f"paced by {self.budget}/min: {_short(self.used)} of {_short(self.limit)}"


def _short(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:.3g}M"
    if value >= 10_000:
        return f"{value / 1000:.0f}k"
    if value >= 1000:
        return f"{value / 1000:.1f}k"
    return f"{value:.0f}"


class Pacer:
    """Schedules the calls to one provider (one base URL + key) within its budgets (module doc)."""

    window_seconds = WINDOW_SECONDS
    """The span of configured caps (a minute; tests shorten it)."""

    def __init__(self, name: str, *, rpm: float | None = None, tpm: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self.clock = clock
        self.rpm, self.tpm = rpm, tpm
        self.requests: HeaderBucket | None = None
        self.tokens: HeaderBucket | None = None
        self.sent_requests = Window(rpm, self.window_seconds)
        self.sent_tokens = Window(tpm, self.window_seconds)
        self.probing = True
        self._probe_out = False
        self._probe_until = 0.0
        self.paused_until = 0.0
        self.engaged = rpm is not None or tpm is not None
        """Whether calls are paced at all (module doc: a provider without headers, caps or 429s is not)."""
        self.in_flight = 0
        """Attempts admitted whose reply has not settled yet."""
        self.in_flight_tokens = 0.0
        """Tokens those attempts were estimated to cost (``_cost``), handed back as each settles."""
        self.ratio = 1.0
        """The provider's prompt tokens per locally counted one: a moving average (weight ``RATIO_WEIGHT``) of
        the replies' ``prompt_tokens`` / local count, 1 until a reply reports it."""
        self._ratio_known = False
        self.waited_seconds = 0.0
        self.calls_waited = 0
        self.bound: Counter[str] = Counter()
        self.pauses = 0
        self.last_bound: tuple[str, float] | None = None
        self.headers_seen = False
        self._lock: asyncio.Lock | None = None
        self._nappers: list[asyncio.Future[None]] = []

    def set_caps(self, rpm: float | None, tpm: float | None) -> None:
        """Another caller's caps for the same provider: the smaller of each applies."""
        if rpm:
            self.rpm = min(rpm, self.rpm or rpm)
            self.sent_requests.cap = self.rpm
        if tpm:
            self.tpm = min(tpm, self.tpm or tpm)
            self.sent_tokens.cap = self.tpm
        self.engaged = self.engaged or bool(rpm or tpm)

    # -- admission -------------------------------------------------------------------------------------

    @property
    def counts_tokens(self) -> bool:
        return self.tokens is not None or self.tpm is not None

    def try_admit(self, estimate: Estimator | None) -> Ticket | None:
        """A ticket when the call may start now (no one waiting ahead of it); None: ``await admit``."""
        if not self.engaged and not self.probing:
            self.in_flight += 1
            return Ticket()
        if self._lock is not None and self._lock.locked():
            return None
        now = self.clock()
        cost = self._cost(estimate)
        if self._wait(cost[0], now)[0] > 0:
            return None
        return self._take(cost, now)

    async def admit(self, estimate: Estimator | None, stop: asyncio.Event) -> Ticket | None:
        """Wait (first come, first served) until the call fits every budget; None when ``stop`` is set."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        started = self.clock()
        waited = False
        async with self._lock:
            while not stop.is_set():
                now = self.clock()
                cost = self._cost(estimate)
                wait, reason = self._wait(cost[0], now)
                if wait <= 0:
                    if waited:
                        self.waited_seconds += now - started
                        self.calls_waited += 1
                    return self._take(cost, now)
                if not waited:
                    self.bound[reason] += 1
                waited = True
                if reason in (REQUESTS, TOKENS):
                    self.last_bound = (reason, now)
                await self._nap(min(wait, MAX_NAP))
        return None

    def _cost(self, estimate: Estimator | None) -> tuple[float, int]:
        """(tokens, local prompt count) of the next call: ⌈prompt · ratio · 1.1⌉ + 16 + max_tokens (the margin
        covers tokenizers counting differently from call to call); (0, 0) when no token budget is kept."""
        if estimate is None or not self.counts_tokens:
            return 0.0, 0
        guess = estimate()
        prompt = math.ceil(guess.prompt * self.ratio * PROMPT_MARGIN - 1e-9)
        return prompt + PROMPT_SLACK + guess.max_tokens, guess.prompt

    def _wait(self, tokens: float, now: float) -> tuple[float, str]:
        """Seconds to wait before a call costing ``tokens`` may start, and which limit says so."""
        waits = [(self.paused_until - now, "retry-after")]
        if self.probing and self._probe_out:
            if now < self._probe_until:
                waits.append((self._probe_until - now, "first reply"))
            else:  # the first call is not being refused: the rest need not wait for its reply
                self.probing = self._probe_out = False
        if self.requests is not None:
            waits.append((self.requests.wait(1, now), REQUESTS))
        waits.append((self.sent_requests.wait(1, now), REQUESTS))
        if tokens:
            if self.tokens is not None:
                waits.append((self.tokens.wait(tokens, now), TOKENS))
            waits.append((self.sent_tokens.wait(tokens, now), TOKENS))
        wait, reason = max(waits)
        return (wait, reason) if wait > 0 else (0.0, "")

    def _take(self, cost: tuple[float, int], now: float) -> Ticket:
        tokens, local = cost
        ticket = Ticket(tokens, local)
        if self.probing:
            ticket.probe = self._probe_out = True
            self._probe_until = now + PROBE_SECONDS
        if self.requests is not None:
            self.requests.take(1, now)
        if self.tokens is not None and tokens:
            self.tokens.take(tokens, now)
        ticket.request_entry = self.sent_requests.add(1, now)
        if tokens or self.counts_tokens:
            ticket.token_entry = self.sent_tokens.add(tokens, now)
        self.in_flight += 1
        self.in_flight_tokens += tokens
        return ticket

    async def _nap(self, seconds: float) -> None:
        """Sleep ``seconds``, or less when a reply arrives (it may have freed budget)."""
        loop = asyncio.get_running_loop()
        napper: asyncio.Future[None] = loop.create_future()
        handle = loop.call_later(seconds, _resolve, napper)
        self._nappers.append(napper)
        try:
            await napper
        finally:
            handle.cancel()
            with contextlib.suppress(ValueError):
                self._nappers.remove(napper)

    def _wake(self) -> None:
        for napper in self._nappers:
            _resolve(napper)

    # -- replies ---------------------------------------------------------------------------------------------

    def settle(self, ticket: Ticket, headers: Mapping[str, str] | None, *, total_tokens: int | None = None,
               prompt_tokens: int | None = None, refused: bool = False) -> None:
        """The attempt of ``ticket`` ended (``refused``: with a 429): adopt the reply's headers (if any) and
        its real token usage."""
        self.in_flight -= 1
        self.in_flight_tokens = max(0.0, self.in_flight_tokens - ticket.tokens)
        if ticket.probe and self._probe_out:  # a refused first call hands the role on: the next goes alone too
            self._probe_out = False
            self.probing = refused
        report = read_rate_headers(headers) if headers else None
        now = self.clock()
        if report is not None:
            self._adopt(report, now)
        if total_tokens is not None:
            self.sent_tokens.amend(ticket.token_entry, total_tokens)
            if self.tokens is not None and (report is None or report.tokens is None) and ticket.tokens:
                self.tokens.give(ticket.tokens - total_tokens, now)  # the estimate's excess comes back
        if prompt_tokens and ticket.local_prompt:
            observed = prompt_tokens / ticket.local_prompt
            self.ratio = observed if not self._ratio_known else (
                (1 - RATIO_WEIGHT) * self.ratio + RATIO_WEIGHT * observed)
            self._ratio_known = True
        if ticket.probe or report is not None or self._nappers:
            self._wake()

    def _adopt(self, report: RateHeaders, now: float) -> None:
        self.headers_seen = self.engaged = True
        for kind, budget in ((REQUESTS, report.requests), (TOKENS, report.tokens)):
            if budget is None or (budget.limit is None and budget.remaining is None):
                continue
            bucket = self.requests if kind == REQUESTS else self.tokens
            if bucket is None:
                limit = budget.limit or budget.remaining or 1.0
                bucket = HeaderBucket(limit, now)
                if kind == REQUESTS:
                    self.requests = bucket
                else:
                    self.tokens = bucket
            bucket.sync(budget, now, self.in_flight if kind == REQUESTS else self.in_flight_tokens)

    def rate_limited(self, wait: float, headers: Mapping[str, str] | None = None) -> None:
        """A 429 (call after ``settle``): every call to this provider waits ``wait`` seconds (the reply's
        Retry-After, else the retry's backoff) from now; budgets the reply did not report are taken as empty."""
        self.engaged = True
        self.pauses += 1
        now = self.clock()
        self.paused_until = max(self.paused_until, now + wait)
        report = read_rate_headers(headers) if headers else None
        for kind, bucket in ((REQUESTS, self.requests), (TOKENS, self.tokens)):
            reported = report is not None and getattr(report, kind) is not None
            if bucket is not None and not reported:
                bucket.level, bucket.at = min(bucket.available(now), 0.0), now
        self._wake()

    def cancel(self, ticket: Ticket) -> None:
        """The attempt never reached the provider's reply (cancelled): only its place in flight is freed."""
        self.settle(ticket, None)

    # -- reporting -------------------------------------------------------------------------------------------

    def limit_of(self, kind: str) -> float | None:
        """The budget per minute that applies: the headers' and the cap's smaller."""
        bucket = self.requests if kind == REQUESTS else self.tokens
        cap = self.rpm if kind == REQUESTS else self.tpm
        found = [value for value in (bucket.limit if bucket else None, cap) if value]
        return min(found) if found else None

    def status(self) -> PaceStatus | None:
        """The budget that made calls wait in the last ``BOUND_SHOWN_SECONDS``, with its use this minute."""
        if self.last_bound is None:
            return None
        kind, when = self.last_bound
        now = self.clock()
        if now - when > BOUND_SHOWN_SECONDS:
            return None
        limit = self.limit_of(kind)
        if limit is None:
            return None
        window = self.sent_requests if kind == REQUESTS else self.sent_tokens
        window.trim(now)
        return PaceStatus(self.name, kind, window.total, limit)

    def metadata(self) -> dict[str, Any]:
        return {
            "paced": self.engaged,
            "headers_seen": self.headers_seen,
            "requests_per_minute": self.limit_of(REQUESTS),
            "tokens_per_minute": self.limit_of(TOKENS),
            "caps": {"rpm": self.rpm, "tpm": self.tpm},
            "calls_waited": self.calls_waited,
            "waited_seconds": round(self.waited_seconds, 3),
            "waits_by_reason": dict(sorted(self.bound.items())),
            "pauses_429": self.pauses,
            "prompt_token_ratio": round(self.ratio, 4) if self._ratio_known else None,
        }


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
