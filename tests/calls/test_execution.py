"""The retry layer and the adaptive limiter, against the loopback servers (timing measured server-side)."""

from __future__ import annotations

import asyncio
import email.utils
import itertools
import random
import socket
import time

import httpx
import openai
import pytest

from evalgate.calls.costs import CostLedger, price_table
from evalgate.calls.executor import (
    AdaptiveLimiter,
    CallCancelled,
    CallFailed,
    Executor,
    RetryPolicy,
    StatusError,
    classify,
    parse_retry_after,
)
from evalgate.calls.runtime import Runtime
from evalgate.model import Case
from evalgate.targets.http import HttpTarget
from tests.servers.agent_server import AgentServer, Fault
from tests.servers.openai_server import OpenAIServer, Rule

CHAT = "/api/agent/chat"


def runtime(policy: RetryPolicy, *, concurrency: int = 4, seed: int = 7, stop: asyncio.Event | None = None) -> Runtime:
    executor = Executor(policy, concurrency=concurrency, stop=stop, rng=random.Random(seed))
    return Runtime(executor, CostLedger(), price_table({}))


def target_for(server: AgentServer, rt: Runtime) -> HttpTarget:
    return HttpTarget(url=server.base_url + CHAT, runtime=rt, env={})


def case(text: str = "hello", id_: str = "c1") -> Case:
    return Case(id=id_, input=text)


def request_times(server: AgentServer) -> list[float]:
    return [r.received_at for r in server.requests([CHAT])]


async def answer_with(target: HttpTarget, *cases: Case) -> list:
    try:
        return list(await asyncio.gather(*(target.answer(c) for c in cases)))
    finally:
        await target.aclose()


# --- Retry-After parsing and classification --------------------------------------------------------


def test_retry_after_forms() -> None:
    assert parse_retry_after({"Retry-After": "2"}) == 2.0
    assert parse_retry_after({"retry-after": "0.25"}) == 0.25
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert parse_retry_after({"Retry-After": "-3"}) == 0.0
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({}) is None
    now = time.time()
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert 28 <= parse_retry_after({"Retry-After": date}, now=now) <= 31


@pytest.mark.parametrize(
    ("exc", "retryable", "status"),
    [
        (StatusError(429, "slow down", {"Retry-After": "1"}), True, 429),
        (StatusError(503, "down"), True, 503),
        (StatusError(500, "boom"), True, 500),
        (StatusError(408, "timeout"), True, 408),
        (StatusError(400, "bad"), False, 400),
        (StatusError(404, "missing"), False, 404),
        (httpx.ConnectError("refused"), True, None),
        (httpx.ReadTimeout("slow"), True, None),
        (TimeoutError(), True, None),
        (ValueError("bug"), False, None),
    ],
)
def test_classification(exc: BaseException, retryable: bool, status: int | None) -> None:
    failure = classify(exc)
    assert (failure.retryable, failure.status) == (retryable, status)


def test_retry_after_only_read_for_retryable_statuses() -> None:
    assert classify(StatusError(429, "x", {"Retry-After": "3"})).retry_after == 3.0
    assert classify(StatusError(400, "x", {"Retry-After": "3"})).retry_after is None


def test_backoff_is_exponential_with_equal_jitter_and_capped() -> None:
    policy = RetryPolicy(base_delay=0.5, max_delay=3.0)
    rng = random.Random(1)
    for k in range(8):
        bound = min(3.0, 0.5 * 2**k)
        delay = policy.backoff(k, rng)
        assert bound / 2 <= delay <= bound


def test_call_budget_defaults_to_attempts_times_timeout_plus_max_delay() -> None:
    assert RetryPolicy(retries=2, attempt_seconds=10, max_delay=5).call_budget == 35
    assert RetryPolicy(total_seconds=4).call_budget == 4


# --- retries over loopback --------------------------------------------------------------------------------


def test_500s_are_retried_until_success_with_backoff_timing() -> None:
    policy = RetryPolicy(retries=3, attempt_seconds=5, base_delay=0.2, max_delay=2)
    rt = runtime(policy, seed=11)
    rng = random.Random(11)
    expected = [policy.backoff(0, rng), policy.backoff(1, rng)]
    with AgentServer({"hello": "hi there"}, faults=[Fault(status=500, times=2)]) as server:
        (answer,) = asyncio.run(answer_with(target_for(server, rt), case()))
        times = request_times(server)
    assert answer.error is None and answer.output == "hi there"
    assert len(times) == 3
    gaps = [b - a for a, b in itertools.pairwise(times)]
    for gap, wait in zip(gaps, expected, strict=True):
        assert wait - 0.01 <= gap <= wait + 0.25, (gaps, expected)
    stats = rt.executor.metadata()
    assert (stats["retries"], stats["attempts"], stats["failed"]) == (2, 3, 0)


def test_429_honours_retry_after_and_is_counted() -> None:
    rt = runtime(RetryPolicy(retries=2, attempt_seconds=5, base_delay=0.01))
    with AgentServer({"hello": "ok"}, faults=[Fault(status=429, retry_after=1, times=1)]) as server:
        (answer,) = asyncio.run(answer_with(target_for(server, rt), case()))
        times = request_times(server)
    assert answer.output == "ok"
    assert len(times) == 2
    assert times[1] - times[0] >= 0.99  # waited the Retry-After (a lower bound: a loaded machine only adds)
    meta = rt.executor.metadata()
    assert meta["rate_limited_429"] == 1 and meta["retries"] == 1
    assert meta["providers"]["target"]["concurrency_lowest"] == 2  # 4 halved once


def test_dropped_connection_is_retried() -> None:
    rt = runtime(RetryPolicy(retries=2, attempt_seconds=5, base_delay=0.01))
    with AgentServer({"hello": "ok"}, faults=[Fault(drop=True, times=1)]) as server:
        (answer,) = asyncio.run(answer_with(target_for(server, rt), case()))
        paths = server.stats.snapshot()["paths"][CHAT]
    assert answer.output == "ok"
    assert rt.executor.metadata()["retries"] == 1
    assert paths == {"dropped": 1, "200": 1}


def test_client_errors_are_not_retried() -> None:
    rt = runtime(RetryPolicy(retries=3, base_delay=0.01))
    with AgentServer({"hello": "ok"}, faults=[Fault(status=400)]) as server:
        (answer,) = asyncio.run(answer_with(target_for(server, rt), case()))
        count = len(request_times(server))
    assert count == 1
    assert answer.error is not None and "HTTP 400" in answer.error


def test_attempts_are_capped() -> None:
    rt = runtime(RetryPolicy(retries=2, attempt_seconds=5, base_delay=0.01, max_delay=0.02))
    with AgentServer({"hello": "ok"}, faults=[Fault(status=503)]) as server:
        (answer,) = asyncio.run(answer_with(target_for(server, rt), case()))
        count = len(request_times(server))
    assert count == 3
    assert "HTTP 503" in answer.error and "gave up after 3 attempts" in answer.error
    assert rt.executor.metadata()["failed"] == 1


def test_total_time_cap_refuses_a_wait_that_would_exceed_it() -> None:
    rt = runtime(RetryPolicy(retries=5, attempt_seconds=5, total_seconds=1.0))
    with AgentServer({"hello": "ok"}, faults=[Fault(status=429, retry_after=30)]) as server:
        started = time.monotonic()
        (answer,) = asyncio.run(answer_with(target_for(server, rt), case()))
        elapsed = time.monotonic() - started
        count = len(request_times(server))
    assert count == 1
    assert elapsed < 25  # refused at once: it never sat out the 30 s Retry-After (no speed is asserted)
    assert "would exceed the 1s limit per call" in answer.error


def test_slow_attempt_times_out_and_is_retried() -> None:
    rt = runtime(RetryPolicy(retries=1, attempt_seconds=0.3, base_delay=0.01))
    with AgentServer({"hello": "ok"}, faults=[Fault(delay_ms=1500, times=1)]) as server:
        started = time.monotonic()
        (answer,) = asyncio.run(answer_with(target_for(server, rt), case()))
        elapsed = time.monotonic() - started
    assert answer.output == "ok"
    assert rt.executor.metadata()["timeouts"] == 1  # the 1.5 s attempt was cut at 0.3 s and retried
    assert elapsed < 1.5 + 10  # the retry did not wait for the slow reply (no speed is asserted)


def test_connection_refused_is_a_clear_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    rt = runtime(RetryPolicy(retries=1, attempt_seconds=2, base_delay=0.01))
    target = HttpTarget(url=f"http://127.0.0.1:{port}{CHAT}", runtime=rt, env={})
    (answer,) = asyncio.run(answer_with(target, case()))
    assert "connection error" in answer.error and "gave up after 2 attempts" in answer.error


def test_stop_event_interrupts_a_backoff_wait() -> None:
    async def scenario(server: AgentServer) -> tuple[float, bool]:
        stop = asyncio.Event()
        rt = runtime(RetryPolicy(retries=3, attempt_seconds=5), stop=stop)
        target = target_for(server, rt)
        asyncio.get_running_loop().call_later(0.3, stop.set)
        started = time.monotonic()
        cancelled = False
        try:
            await target.answer(case())
        except CallCancelled:
            cancelled = True
        finally:
            await target.aclose()
        return time.monotonic() - started, cancelled

    with AgentServer({"hello": "ok"}, faults=[Fault(status=503, retry_after=20)]) as server:
        elapsed, cancelled = asyncio.run(scenario(server))
    assert cancelled
    assert elapsed < 15  # woken by the stop, not after the 20 s Retry-After (no speed is asserted)


def test_no_call_starts_after_stop() -> None:
    async def scenario() -> None:
        stop = asyncio.Event()
        stop.set()
        executor = Executor(RetryPolicy(), stop=stop)

        async def never() -> None:
            raise AssertionError("must not be called")

        await executor.call("x", never, what="test")

    with pytest.raises(CallCancelled):
        asyncio.run(scenario())


def test_openai_client_retries_are_off_so_retries_never_multiply() -> None:
    async def scenario(base: str) -> None:
        executor = Executor(RetryPolicy(retries=1, attempt_seconds=5, base_delay=0.01), concurrency=2)
        client = openai.AsyncOpenAI(base_url=base + "/v1", api_key="sk-test-xyz", max_retries=0)
        try:
            await executor.call("openai", lambda: client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]), what="chat")
        finally:
            await client.close()

    with OpenAIServer([Rule(status=500)]) as server:
        with pytest.raises(CallFailed, match="gave up after 2 attempts"):
            asyncio.run(scenario(server.base_url))
        assert len(server.chat_requests()) == 2


# --- the adaptive limiter ------------------------------------------------------------------------------


def test_limiter_halves_on_429_and_recovers_after_successes() -> None:
    limiter = AdaptiveLimiter(8, recover_after=3)
    limiter.rate_limited()
    assert limiter.limit == 4
    limiter.rate_limited()
    limiter.rate_limited()
    limiter.rate_limited()
    assert limiter.limit == 1 and limiter.lowest == 1
    for _ in range(3):
        limiter.succeeded()
    assert limiter.limit == 2
    for _ in range(3 * 10):
        limiter.succeeded()
    assert limiter.limit == 8  # never above the initial value


def test_limiter_bounds_calls_in_flight() -> None:
    async def scenario() -> tuple[int, list[int]]:
        limiter = AdaptiveLimiter(2)
        order: list[int] = []

        async def worker(i: int) -> None:
            await limiter.acquire()
            try:
                order.append(i)
                await asyncio.sleep(0.05)
            finally:
                limiter.release()

        await asyncio.gather(*(worker(i) for i in range(6)))
        return limiter.peak, order

    peak, order = asyncio.run(scenario())
    assert peak == 2
    assert order == list(range(6))  # first come, first served


def test_429s_lower_the_providers_concurrency_during_a_burst() -> None:
    async def scenario(server: AgentServer, rt: Runtime) -> list:
        target = target_for(server, rt)
        return await answer_with(target, *(case("hello", f"c{i}") for i in range(8)))

    rt = runtime(RetryPolicy(retries=4, attempt_seconds=5, base_delay=0.01), concurrency=8)
    with AgentServer({"hello": "ok"}, faults=[Fault(status=429, retry_after=0.05, times=3)]) as server:
        answers = asyncio.run(scenario(server, rt))
    assert all(a.output == "ok" for a in answers)
    provider = rt.executor.metadata()["providers"]["target"]
    assert provider["rate_limited_429"] == 3
    assert provider["concurrency_lowest"] == 1
    assert provider["concurrency_final"] < 8  # recovery needs 10 successes per step
