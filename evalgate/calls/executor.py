"""The one retry layer and the per-provider adaptive concurrency limiter shared by targets and judges.

Every outbound call (HTTP target, chat model target, judge) goes through ``Executor.call``:

* attempts ≤ ``retries + 1`` and wall time ≤ ``total_seconds`` per call (each attempt is also cut at
  ``attempt_seconds``), so no call retries forever;
* retried: connection errors, timeouts, HTTP 408/425/429 and 5xx, and a successful status whose body is
  unreadable (``MalformedReply``: JSON declared but not parseable, a truncated body); everything else
  fails at once, and so does a failure the caller's ``final`` predicate calls definitive (a judge's
  structured-output request that the server's error message says it does not support, ``judges.output``);
* wait before retry k (k = 0, 1, …): the server's ``Retry-After`` / ``retry-after-ms`` when present,
  else ``min(max_delay, base_delay · 2^k) · U(0.5, 1.0)`` seconds (exponential backoff, equal jitter);
* a 429 halves that provider's concurrency limit (never below 1); every ``recover_after`` consecutive
  successes raise it by one again, up to its initial value;
* a call made with a ``Pace`` (judge and model calls, HTTP targets) is also paced to its provider's rate
  limits, per base URL and key (``calls.ratelimit``): each attempt first waits until the provider's request
  and token budgets have room for it, every reply's ``x-ratelimit-*`` headers and token usage update
  them, and a 429 pauses that provider's calls for its wait;
* once the run's stop event is set no new attempt starts (``CallCancelled``).

The openai SDK's own retries (``chat_client: openai-sdk``) are switched off (``max_retries=0``) so retries never multiply.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import hashlib
import math
import random
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from evalgate.calls.ratelimit import Estimator, Pacer, Ticket
from evalgate.model import counters

if TYPE_CHECKING:
    from evalgate.config.settings import Settings

T = TypeVar("T")

RETRYABLE_STATUS = frozenset({408, 425, 429})
TIMED_OUT = "timed out"
CONNECT_TIMED_OUT = "connect timed out"
READ_TIMED_OUT = "read timed out"
TIMEOUT_REASONS = frozenset({TIMED_OUT, CONNECT_TIMED_OUT, READ_TIMED_OUT})
RECOVER_AFTER = 10
"""Consecutive successes after which a lowered concurrency limit rises by one."""


class CallFailed(Exception):
    """A call that still failed after the retry policy gave up; the message names the last cause."""

    def __init__(self, message: str, *, status: int | None = None, attempts: int = 1) -> None:
        super().__init__(message)
        self.status = status
        self.attempts = attempts


class CallCancelled(BaseException):
    """The run is stopping (Ctrl-C, SIGTERM, budget): no new call starts. A ``BaseException`` so that
    metric and target error handling lets it through and the engine drops the unfinished case."""


class StatusError(Exception):
    """A non-success HTTP status from a target, carrying what the retry layer needs."""

    def __init__(self, status: int, message: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.headers = {k.lower(): v for k, v in (headers or {}).items()}


class MalformedReply(Exception):
    """A successful HTTP status whose body cannot be what it claims to be (``Content-Type`` JSON that does
    not parse, a body cut short): retried like a 5xx, since it is as likely to be a passing fault
    (a proxy's error page, a dropped connection) as a bug."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


# --- classification ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Failure:
    """Why one attempt failed: ``retryable``, the HTTP ``status`` if any, the server's wait hint and the
    reply's headers (lower-case names; for its rate-limit headers)."""

    reason: str
    retryable: bool
    status: int | None = None
    retry_after: float | None = None
    headers: Mapping[str, str] | None = None


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` (milliseconds) or ``Retry-After`` (seconds or an HTTP
    date); None when absent or unreadable. Negative waits become 0."""
    lowered = {k.lower(): v for k, v in headers.items()}
    raw_ms = lowered.get("retry-after-ms")
    if raw_ms is not None:
        with contextlib.suppress(ValueError):
            return max(0.0, float(raw_ms) / 1000.0)
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    with contextlib.suppress(ValueError):
        seconds = float(raw)
        return max(0.0, seconds) if math.isfinite(seconds) else None
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def status_failure(status: int, message: str, headers: Mapping[str, str]) -> Failure:
    retryable = status in RETRYABLE_STATUS or 500 <= status <= 599
    return Failure(f"HTTP {status}: {message}", retryable, status, parse_retry_after(headers) if retryable else None,
                   headers)


def classify(exc: BaseException) -> Failure:
    """Map an exception raised by one attempt to a ``Failure``."""
    if isinstance(exc, StatusError):
        return status_failure(exc.status, str(exc), exc.headers)
    if isinstance(exc, MalformedReply):
        return Failure(f"HTTP {exc.status} with an unreadable body: {exc}", True, exc.status)
    openai = sys.modules.get("openai")  # its errors can only occur once the SDK is in use
    if openai is not None:
        if isinstance(exc, openai.APIStatusError):
            headers = {k.lower(): v for k, v in (getattr(exc.response, "headers", {}) or {}).items()}
            return status_failure(exc.status_code, _openai_message(exc), headers)
        if isinstance(exc, openai.APITimeoutError):
            return Failure(TIMED_OUT, True)
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc
            return Failure(f"connection error: {type(cause).__name__}: {cause}".rstrip(": "), True)
    aiohttp = sys.modules.get("aiohttp")  # the hot-path client (evalgate.calls.http_pool)
    if aiohttp is not None and isinstance(exc, aiohttp.ConnectionTimeoutError):
        return Failure(CONNECT_TIMED_OUT, True)
    if aiohttp is not None and isinstance(exc, aiohttp.SocketTimeoutError):
        return Failure(READ_TIMED_OUT, True)
    if aiohttp is not None and isinstance(exc, aiohttp.ClientError) and not isinstance(exc, TimeoutError):
        retryable = not isinstance(exc, aiohttp.InvalidURL | aiohttp.TooManyRedirects)
        kind = "connection error" if retryable else "request error"
        return Failure(f"{kind}: {type(exc).__name__}: {exc}".rstrip(": "), retryable)
    httpx = sys.modules.get("httpx")  # used by GitHub calls; imported by whoever makes them
    if httpx is not None and isinstance(exc, httpx.ConnectTimeout):
        return Failure(CONNECT_TIMED_OUT, True)
    if httpx is not None and isinstance(exc, httpx.ReadTimeout):
        return Failure(READ_TIMED_OUT, True)
    if isinstance(exc, TimeoutError) or (httpx is not None and isinstance(exc, httpx.TimeoutException)):
        return Failure(TIMED_OUT, True)
    if isinstance(exc, ConnectionError) or (httpx is not None and isinstance(exc, httpx.TransportError)):
        return Failure(f"connection error: {type(exc).__name__}: {exc}".rstrip(": "), True)
    return Failure(f"{type(exc).__name__}: {exc}", False)


def _openai_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and inner.get("message"):
            return str(inner["message"])
    return str(getattr(exc, "message", exc))


# --- policy ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Attempts = ``retries + 1``; per-attempt cap ``attempt_seconds``; per-call cap ``total_seconds``
    (default ``attempt_seconds · (retries + 1) + max_delay``); backoff ``base_delay · 2^k`` capped at
    ``max_delay`` seconds, multiplied by a jitter factor drawn from U(0.5, 1.0). ``connect_seconds`` and
    ``read_seconds`` are the HTTP clients' connect and read (silence) timeouts (None: only the attempt's
    cap applies)."""

    retries: int = 3
    attempt_seconds: float = 60.0
    total_seconds: float | None = None
    base_delay: float = 0.5
    max_delay: float = 20.0
    connect_seconds: float | None = 10.0
    read_seconds: float | None = None

    @property
    def call_budget(self) -> float:
        if self.total_seconds is not None:
            return self.total_seconds
        return self.attempt_seconds * (self.retries + 1) + self.max_delay

    def backoff(self, retry_index: int, rng: random.Random) -> float:
        """Seconds before retry ``retry_index`` (0-based) when the server gave no Retry-After."""
        return min(self.max_delay, self.base_delay * 2**retry_index) * rng.uniform(0.5, 1.0)

    @classmethod
    def from_settings(cls, settings: Settings) -> RetryPolicy:
        return cls(retries=settings.api_retries, attempt_seconds=settings.api_timeout_seconds,
                   connect_seconds=settings.connect_timeout_seconds, read_seconds=settings.read_timeout_seconds)

    def timeout_reason(self, reason: str, attempt_timeout: float) -> str:
        """A timeout's reason with the limit that was hit, e.g. ``read timed out (no data for 30s)``."""
        if reason == CONNECT_TIMED_OUT and self.connect_seconds is not None:
            return f"connect timed out after {self.connect_seconds:g}s"
        if reason == READ_TIMED_OUT and self.read_seconds is not None:
            return f"read timed out (no data for {self.read_seconds:g}s)"
        return f"timed out after {attempt_timeout:.3g}s (the limit per attempt)"


# --- adaptive limiter --------------------------------------------------------------------------------


class AdaptiveLimiter:
    """At most ``limit`` calls in flight; ``limit`` halves on a 429 and recovers by +1 per
    ``recover_after`` consecutive successes, never above ``initial`` nor below 1. Waiters are served
    first come, first served."""

    def __init__(self, initial: int, recover_after: int = RECOVER_AFTER) -> None:
        self.initial = max(1, initial)
        self.limit = self.initial
        self.lowest = self.initial
        self.recover_after = recover_after
        self.in_flight = 0
        self.peak = 0
        self._streak = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def acquire(self) -> None:
        if self.in_flight < self.limit and not self._waiters:
            self._take()
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # the slot was granted just as we were cancelled: hand it on
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
            raise

    def _take(self) -> None:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)

    def release(self) -> None:
        self.in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.in_flight < self.limit:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self._take()
                waiter.set_result(None)

    def rate_limited(self) -> None:
        self.limit = max(1, math.ceil(self.limit / 2))
        self.lowest = min(self.lowest, self.limit)
        self._streak = 0

    def succeeded(self) -> None:
        self._streak += 1
        if self._streak >= self.recover_after and self.limit < self.initial:
            self.limit += 1
            self._streak = 0
            self._wake()


# --- statistics ----------------------------------------------------------------------------------------


CALL_COUNTERS = ("calls", "attempts", "retries", "rate_limited_429", "failed", "timeouts")
"""The call totals of a run's ``metadata.calls`` (``Executor.metadata``); a merged run sums its shards'."""


@dataclass(slots=True)
class ProviderStats:
    """One provider's call counters: ``metadata.calls.providers.<name>`` of results.json, in field order,
    ``rate_limited`` as ``rate_limited_429`` and ``waited_seconds`` as ``backoff_seconds`` (3 decimals)."""

    calls: int = 0
    """Calls started (``Executor.call``), each of up to ``retries + 1`` attempts (the policy's ``retries``)."""
    attempts: int = 0
    """Attempts sent: ``calls`` + ``retries``, less the calls that ran out of time before their next attempt
    (or were stopped)."""
    retries: int = 0
    """Retryable failures (connection error, timeout, HTTP 408/425/429/5xx, a malformed reply) followed by a
    wait to try again."""
    rate_limited: int = 0
    """Attempts answered HTTP 429."""
    failed: int = 0
    """Calls that gave up (``CallFailed``): a final failure, retries used up or no time left."""
    timeouts: int = 0
    """Attempts that timed out: the attempt's limit, or the HTTP client's connect or read timeout."""
    waited_seconds: float = 0.0
    """Seconds slept between attempts: Σ of each retry's delay (``Retry-After``, else the policy's backoff)."""

    def as_dict(self) -> dict[str, Any]:
        return counters(self, 3, {"rate_limited": "rate_limited_429", "waited_seconds": "backoff_seconds"})


@dataclass(slots=True)
class CallStats:
    providers: dict[str, ProviderStats] = field(default_factory=dict)

    def of(self, provider: str) -> ProviderStats:
        return self.providers.setdefault(provider, ProviderStats())

    def total(self, name: str) -> int:
        return sum(getattr(stats, name) for stats in self.providers.values())


# --- executor ----------------------------------------------------------------------------------------


Observed = tuple[Mapping[str, str] | None, int | None, int | None]
"""What a successful attempt's result tells the pacer: its reply's headers, its total tokens and its
prompt tokens (None where unknown)."""


@dataclass(frozen=True, slots=True)
class Pace:
    """How a call is paced (``calls.ratelimit``): ``key`` names its provider (base URL + key, hashed),
    ``name`` is how reports show it, ``estimate`` gives its token cost before it is made (None: it has
    none), ``observe`` reads a result; ``rpm`` / ``tpm`` are configured caps."""

    key: str
    name: str
    estimate: Estimator | None = None
    observe: Callable[[Any], Observed] | None = None
    rpm: float | None = None
    tpm: float | None = None


def pace_key(base_url: str, secret: str | None) -> str:
    """A provider's identity for pacing: sha256 of the base URL (scheme and host lower-cased, no trailing
    ``/``) and of its key, never the key itself."""
    url = base_url.strip().rstrip("/")
    scheme, sep, rest = url.partition("://")
    host, slash, path = rest.partition("/")
    canonical = f"{scheme.lower()}{sep}{host.lower()}{slash}{path}"
    digest = hashlib.sha256(canonical.encode()).hexdigest()[:16]
    return f"{digest}:{hashlib.sha256((secret or '').encode()).hexdigest()[:12]}"


@dataclass(frozen=True, slots=True)
class RetryNotice:
    """A retry about to happen, for whoever reports progress: ``attempt`` failed (1-based) of
    ``attempts``, the next starts after ``delay`` seconds."""

    provider: str
    what: str
    attempt: int
    attempts: int
    reason: str
    delay: float
    status: int | None = None


class Executor:
    """Runs calls with the retry policy, a shared bound on calls in flight (``concurrency``), one
    adaptive limiter per provider and one pacer per paced provider (``Pace``)."""

    def __init__(
        self,
        policy: RetryPolicy | None = None,
        *,
        concurrency: int = 8,
        stop: asyncio.Event | None = None,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.policy = policy or RetryPolicy()
        self.concurrency = concurrency
        self.stop = stop or asyncio.Event()
        self.rng = rng or random.Random()
        self.clock = clock
        self.stats = CallStats()
        self.limiters: dict[str, AdaptiveLimiter] = {}
        self.pacers: dict[str, Pacer] = {}
        self._shared: asyncio.Semaphore | None = None
        self.in_flight = 0
        """Attempts running now (and command-target programs, see ``track``)."""
        self.listeners: list[Callable[[RetryNotice], None]] = []
        """Called with a ``RetryNotice`` before each retry's wait (progress reporting)."""

    @contextlib.contextmanager
    def track(self) -> Iterator[None]:
        """Count a call made outside ``call`` (a command target's program) as in flight."""
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1

    @classmethod
    def from_settings(cls, settings: Settings, stop: asyncio.Event | None = None) -> Executor:
        return cls(RetryPolicy.from_settings(settings), concurrency=settings.concurrency, stop=stop)

    def limiter(self, provider: str) -> AdaptiveLimiter:
        return self.limiters.setdefault(provider, AdaptiveLimiter(self.concurrency))

    def pacer(self, pace: Pace) -> Pacer:
        """The pacer of ``pace``'s provider; caps configured by several callers of one provider combine
        (the smaller applies)."""
        pacer = self.pacers.get(pace.key)
        if pacer is None:
            pacer = self.pacers[pace.key] = Pacer(pace.name, rpm=pace.rpm, tpm=pace.tpm, clock=self.clock)
        elif (pace.rpm and pace.rpm != pacer.rpm) or (pace.tpm and pace.tpm != pacer.tpm):
            pacer.set_caps(pace.rpm, pace.tpm)
        return pacer

    def pacing_status(self) -> list[str]:
        """One phrase per provider whose budget made calls wait in the last seconds, e.g.
        ``judge openai: paced by tokens/min: 148k of 150k`` (for progress lines)."""
        return [f"{pacer.name}: {status.describe()}" for pacer in self.pacers.values()
                if (status := pacer.status()) is not None]

    def check_stop(self) -> None:
        if self.stop.is_set():
            raise CallCancelled("the run is stopping; no new call starts")

    async def call(self, provider: str, operation: Callable[[], Awaitable[T]], *, what: str,
                   pace: Pace | None = None, final: Callable[[Failure], bool] | None = None) -> T:
        """``await operation()`` under the retry policy (and ``pace``'s rate limits); raises ``CallFailed``
        or ``CallCancelled``. ``final``: failures not to retry whatever their status."""
        stats = self.stats.of(provider)
        stats.calls += 1
        deadline = self.clock() + self.policy.call_budget
        attempts = self.policy.retries + 1
        for attempt in range(attempts):
            self.check_stop()
            ticket = None
            if pace is not None:  # the budget first; time waiting for it is not the call's own time
                queued = self.clock()
                ticket = await self._admit(pace)
                deadline += self.clock() - queued
            remaining = deadline - self.clock()
            if remaining <= 0:
                if pace is not None and ticket is not None:
                    self.pacer(pace).cancel(ticket)
                break
            outcome = await self._attempt(provider, operation, min(self.policy.attempt_seconds, remaining), pace,
                                          ticket)
            if not isinstance(outcome, Failure):
                return outcome
            failure = outcome
            if not failure.retryable or attempt == attempts - 1 or (final is not None and final(failure)):
                stats.failed += 1
                raise CallFailed(_gave_up(what, failure, attempt + 1), status=failure.status, attempts=attempt + 1)
            delay = failure.retry_after if failure.retry_after is not None else self.policy.backoff(attempt, self.rng)
            if failure.status == 429 and pace is not None:
                self.pacer(pace).rate_limited(delay, failure.headers)
            if self.clock() + delay > deadline:
                stats.failed += 1
                raise CallFailed(
                    f"{what}: {failure.reason}; gave up after {attempt + 1} attempt(s): waiting {delay:.3g}s more "
                    f"would exceed the {self.policy.call_budget:g}s limit per call",
                    status=failure.status, attempts=attempt + 1,
                )
            stats.retries += 1
            stats.waited_seconds += delay
            self._notify(RetryNotice(provider, what, attempt + 1, attempts, failure.reason, delay, failure.status))
            await self._sleep(delay)
        stats.failed += 1
        raise CallFailed(f"{what}: no time left within the {self.policy.call_budget:g}s limit per call")

    async def _admit(self, pace: Pace) -> Ticket:
        """Wait until ``pace``'s provider has budget for one more attempt (before taking any call slot, so
        a call that waits for its budget holds nothing other providers' calls could use)."""
        pacer = self.pacer(pace)
        ticket = pacer.try_admit(pace.estimate)
        if ticket is None:
            ticket = await pacer.admit(pace.estimate, self.stop)
            if ticket is None:
                raise CallCancelled("the run is stopping; no new call starts")
        return ticket

    async def _attempt(self, provider: str, operation: Callable[[], Awaitable[T]], timeout: float,
                       pace: Pace | None = None, ticket: Ticket | None = None) -> T | Failure:
        if pace is None or ticket is None:
            return await self._slotted_attempt(provider, operation, timeout)
        pacer = self.pacer(pace)
        try:
            outcome = await self._slotted_attempt(provider, operation, timeout)
        except BaseException:
            pacer.cancel(ticket)
            raise
        if isinstance(outcome, Failure):
            pacer.settle(ticket, outcome.headers, refused=outcome.status == 429)
        elif pace.observe is not None:
            headers, total, prompt = pace.observe(outcome)
            pacer.settle(ticket, headers, total_tokens=total, prompt_tokens=prompt)
        else:
            pacer.settle(ticket, None)
        return outcome

    async def _slotted_attempt(self, provider: str, operation: Callable[[], Awaitable[T]], timeout: float
                               ) -> T | Failure:
        stats = self.stats.of(provider)
        limiter = self.limiter(provider)
        shared = self._shared_semaphore()
        await limiter.acquire()
        try:
            async with shared:
                self.check_stop()
                stats.attempts += 1
                self.in_flight += 1
                try:
                    async with asyncio.timeout(timeout):  # no extra task per call, unlike wait_for on 3.11
                        result = await operation()
                finally:
                    self.in_flight -= 1
        except (asyncio.CancelledError, CallCancelled):
            raise
        except Exception as exc:
            failure = classify(exc)
            if failure.reason in TIMEOUT_REASONS:
                stats.timeouts += 1
                failure = Failure(self.policy.timeout_reason(failure.reason, timeout), True)
            if failure.status == 429:
                stats.rate_limited += 1
                limiter.rate_limited()
            return failure
        finally:
            limiter.release()
        limiter.succeeded()
        return result

    def _notify(self, notice: RetryNotice) -> None:
        for listener in self.listeners:
            with contextlib.suppress(Exception):  # reporting never breaks a call
                listener(notice)

    def _shared_semaphore(self) -> asyncio.Semaphore:
        if self._shared is None:
            self._shared = asyncio.Semaphore(self.concurrency)
        return self._shared

    async def _sleep(self, seconds: float) -> None:
        """Sleep, but wake up (and cancel the call) as soon as the run's stop event is set."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stop.wait(), timeout=seconds)
        self.check_stop()

    def metadata(self) -> dict[str, Any]:
        """Call counters for results metadata: totals and per provider (with concurrency limits)."""
        providers = {}
        for name, stats in sorted(self.stats.providers.items()):
            limiter = self.limiters.get(name)
            providers[name] = stats.as_dict() | (
                {"concurrency_initial": limiter.initial, "concurrency_lowest": limiter.lowest,
                 "concurrency_final": limiter.limit, "peak_in_flight": limiter.peak} if limiter else {}
            )
        totals = {key: self.stats.total("rate_limited" if key == "rate_limited_429" else key) for key in CALL_COUNTERS}
        pacing = {pacer.name: pacer.metadata() for pacer in self.pacers.values() if pacer.engaged}
        return {**totals, **({"pacing": pacing} if pacing else {}),
                "policy": {"retries": self.policy.retries, "attempt_seconds": self.policy.attempt_seconds,
                           "connect_seconds": self.policy.connect_seconds,
                           "read_seconds": self.policy.read_seconds,
                           "call_seconds": self.policy.call_budget}, "providers": providers}


def _gave_up(what: str, failure: Failure, attempts: int) -> str:
    if not failure.retryable:
        return f"{what}: {failure.reason}"
    return f"{what}: {failure.reason} (gave up after {attempts} attempt{'s' if attempts != 1 else ''})"
