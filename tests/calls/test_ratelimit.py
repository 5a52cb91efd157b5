"""Reading providers' rate-limit headers and the pacer's budgets (``evalgate.calls.ratelimit``), checked
against hand-computed values with a fake clock; the loopback servers' token buckets (``tests.servers.limits``)."""

from __future__ import annotations

import asyncio
import datetime as dt
import email.utils

import httpx
import pytest

from evalgate.calls.ratelimit import (
    Budget,
    HeaderBucket,
    Pacer,
    RateHeaders,
    TokenEstimate,
    Window,
    format_duration,
    parse_duration,
    read_rate_headers,
)
from tests.servers.limits import Bucket, RateLimits, go_duration
from tests.servers.openai_server import OpenAIServer

OPENAI_EXAMPLE = {  # the example in OpenAI's rate-limit guide
    "x-ratelimit-limit-requests": "60",
    "x-ratelimit-limit-tokens": "150000",
    "x-ratelimit-remaining-requests": "59",
    "x-ratelimit-remaining-tokens": "149984",
    "x-ratelimit-reset-requests": "1s",
    "x-ratelimit-reset-tokens": "6m0s",
}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(("text", "seconds"), [
    ("6m0s", 360.0), ("1.2s", 1.2), ("20ms", 0.02), ("1m30.951s", 90.951), ("1h2m3.5s", 3723.5), ("0s", 0.0),
    ("250us", 0.00025), ("30", 30.0), ("0.5", 0.5), (" 2s ", 2.0), ("1d", 86400.0),
])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "soon", "6 minutes", "-1s", "1x", "nan", "inf", "m", "1.2.3s"])
def test_unreadable_durations_are_none(text: str) -> None:
    assert parse_duration(text) is None


def test_a_reset_moment_is_read_as_the_seconds_until_it() -> None:
    now = dt.datetime(2027, 1, 15, 8, 0, 0, tzinfo=dt.UTC).timestamp()
    assert parse_duration("2027-01-15T08:00:30Z", now=now) == pytest.approx(30.0)
    assert parse_duration("2027-01-15T09:00:30+01:00", now=now) == pytest.approx(30.0)
    assert parse_duration(email.utils.formatdate(now + 42, usegmt=True), now=now) == pytest.approx(42.0)
    assert parse_duration("2020-01-01T00:00:00+00:00", now=now) == 0.0  # in the past: no wait


def test_all_six_headers() -> None:
    assert read_rate_headers(OPENAI_EXAMPLE) == RateHeaders(Budget(60, 59, 1.0), Budget(150_000, 149_984, 360.0))


def test_partial_and_missing_headers() -> None:
    assert read_rate_headers({"content-type": "application/json"}) is None
    only_tokens = read_rate_headers({"x-ratelimit-remaining-tokens": "12", "x-ratelimit-reset-tokens": "20ms"})
    assert only_tokens == RateHeaders(None, Budget(None, 12, 0.02))
    garbled = read_rate_headers({"x-ratelimit-limit-requests": "many", "x-ratelimit-remaining-requests": "-3"})
    assert garbled == RateHeaders(Budget(None, None, None), None)


def test_format_duration_round_trips() -> None:
    for seconds in (0.02, 0.5, 1.2, 59.999, 360.0, 90.5, 3723.5):
        assert parse_duration(format_duration(seconds)) == pytest.approx(seconds, abs=0.001)
        assert parse_duration(go_duration(seconds)) == pytest.approx(seconds, abs=0.001)
    assert (format_duration(360), format_duration(0.02), format_duration(1.2)) == ("6m0s", "20ms", "1.2s")


# --- the budgets ------------------------------------------------------------------------------------------


def test_header_bucket_follows_the_reply_and_derives_the_refill_rate() -> None:
    bucket = HeaderBucket(600, now=0.0)
    assert bucket.rate == 10.0  # 600 per minute
    bucket.sync(Budget(600, 300, 60.0), now=0.0, in_flight=0)  # a per-day style budget: 300 short, whole in 60 s
    assert bucket.rate == 5.0 and bucket.available(0.0) == 300
    bucket.sync(Budget(600, 0, 30.0), now=10.0, in_flight=4)  # 4 calls still in flight are counted again
    assert bucket.rate == 20.0 and bucket.available(10.0) == -4
    assert bucket.wait(1, 10.0) == pytest.approx(5 / 20)  # level −4 → +1 needs 5 at 20 per s
    bucket.take(1, 10.25)
    assert bucket.available(10.25) == pytest.approx(0.0)
    assert bucket.available(1000.0) == 600  # never above the limit
    small = HeaderBucket(600, now=0.0)
    small.sync(Budget(600, 599, 0.006), now=0.0, in_flight=0)  # a 1-request deficit is too small to derive from
    assert small.rate == 10.0


def test_window_cap_never_lets_more_than_the_cap_into_any_minute() -> None:
    window = Window(cap=100)
    for t in range(10):
        assert window.wait(10, float(t)) == 0
        window.add(10, float(t))
    assert window.wait(10, 10.0) == pytest.approx(50.0)  # the oldest 10 leave at t = 60
    assert window.wait(25, 10.0) == pytest.approx(52.0)  # 25 needs the first three entries gone
    entry = window.add(0, 10.0)
    window.amend(entry, 0)
    assert window.wait(500, 70.0) == 0  # bigger than the cap: waits for an empty window, then goes alone


def pace_estimate() -> TokenEstimate:
    return TokenEstimate(prompt=100, max_tokens=50)


def test_the_first_call_goes_alone_until_its_reply_tells_the_budgets() -> None:
    clock = Clock()
    pacer = Pacer("judge", clock=clock)
    first = pacer.try_admit(pace_estimate)
    assert first is not None and first.probe
    assert pacer.try_admit(pace_estimate) is None  # waits for the first reply
    refused = first
    pacer.settle(refused, {}, refused=True)  # a 429: the next call goes alone too
    first = pacer.try_admit(pace_estimate)
    assert first is not None and first.probe and pacer.try_admit(pace_estimate) is None
    pacer.settle(first, {})
    assert not pacer.engaged  # no headers, no caps, no 429: never paced again
    assert pacer.try_admit(pace_estimate) is not None and pacer.try_admit(pace_estimate) is not None


def test_a_first_call_that_is_not_refused_at_once_lets_the_others_go() -> None:
    clock = Clock()
    pacer = Pacer("judge", clock=clock)
    first = pacer.try_admit(None)
    assert first is not None and pacer.try_admit(None) is None
    clock.now += 0.31  # no 429 within 0.3 s: the provider is answering, not refusing
    second = pacer.try_admit(None)
    assert second is not None and not second.probe
    pacer.settle(first, {})
    pacer.settle(second, {})
    assert not pacer.engaged and not pacer.probing


def test_headers_make_calls_wait_for_the_token_budget() -> None:
    clock = Clock()
    pacer = Pacer("judge", clock=clock)
    probe = pacer.try_admit(pace_estimate)
    assert probe is not None and probe.tokens == 0  # nothing known about tokens yet
    pacer.settle(probe, {"x-ratelimit-limit-tokens": "6000", "x-ratelimit-remaining-tokens": "400",
                         "x-ratelimit-reset-tokens": "56s"}, total_tokens=120, prompt_tokens=100)
    # rate = (6000 − 400) / 56 s = 100 tokens/s; a call is estimated at ⌈100 · ratio(1) · 1.1⌉ + 16 + 50 = 176
    assert pacer.tokens is not None and pacer.tokens.rate == pytest.approx(100.0)
    first, second = pacer.try_admit(pace_estimate), pacer.try_admit(pace_estimate)
    assert first is not None and second is not None and first.tokens == 176
    assert pacer.try_admit(pace_estimate) is None  # 400 − 2 × 176 = 48 left, 176 needed: 1.28 s
    clock.now += 1.2
    assert pacer.try_admit(pace_estimate) is None
    clock.now += 0.1
    third = pacer.try_admit(pace_estimate)
    assert third is not None
    # the first's reply: 40 tokens really used, 80 of them prompt; 500 left with two others in flight
    pacer.settle(first, {"x-ratelimit-limit-tokens": "6000", "x-ratelimit-remaining-tokens": "500",
                         "x-ratelimit-reset-tokens": "55s"}, total_tokens=40, prompt_tokens=80)
    assert pacer.tokens.available(clock.now) == pytest.approx(500 - 2 * 176)
    assert pacer.ratio == pytest.approx(0.8)  # the provider counts 80 where we counted 100: later estimates shrink
    assert pacer._cost(pace_estimate) == (88 + 16 + 50, 100)
    assert pacer.metadata()["tokens_per_minute"] == 6000


def test_a_429_pauses_every_call_for_its_retry_after() -> None:
    clock = Clock()
    pacer = Pacer("judge", clock=clock)
    probe = pacer.try_admit(None)
    assert probe is not None
    pacer.settle(probe, {})
    ticket = pacer.try_admit(None)
    assert ticket is not None
    pacer.settle(ticket, {})
    pacer.rate_limited(2.0)
    assert pacer.engaged and pacer.try_admit(None) is None
    clock.now += 2.0
    assert pacer.try_admit(None) is not None


def test_configured_caps_pace_a_provider_without_headers() -> None:
    clock = Clock()
    pacer = Pacer("judge", rpm=3, tpm=400, clock=clock)
    probe = pacer.try_admit(pace_estimate)
    assert probe is not None and probe.tokens == 176
    pacer.settle(probe, {}, total_tokens=150)
    admitted = [pacer.try_admit(pace_estimate) for _ in range(3)]
    assert admitted[0] is not None and admitted[1] is None  # 150 + 150 + 150 > 400 tokens in one minute
    clock.now += 60.0
    assert pacer.try_admit(pace_estimate) is not None


def test_admit_waits_in_arrival_order_and_wakes_on_a_reply() -> None:
    async def scenario() -> list[int]:
        pacer = Pacer("judge", rpm=None)
        stop = asyncio.Event()
        order: list[int] = []
        probe = pacer.try_admit(None)
        assert probe is not None

        async def call(index: int) -> None:
            ticket = await pacer.admit(None, stop)
            assert ticket is not None
            order.append(index)
            pacer.settle(ticket, {})

        tasks = [asyncio.ensure_future(call(i)) for i in range(5)]
        await asyncio.sleep(0.01)
        assert order == []  # all wait for the first reply
        pacer.settle(probe, {})
        await asyncio.wait_for(asyncio.gather(*tasks), 2)
        return order

    assert asyncio.run(scenario()) == [0, 1, 2, 3, 4]


def test_admit_gives_up_when_the_run_stops() -> None:
    async def scenario() -> object:
        pacer = Pacer("judge")
        stop = asyncio.Event()
        pacer.try_admit(None)  # the probe stays out: everyone else waits
        waiting = asyncio.ensure_future(pacer.admit(None, stop))
        await asyncio.sleep(0.01)
        stop.set()
        return await asyncio.wait_for(waiting, 2)

    assert asyncio.run(scenario()) is None


def test_status_line_names_the_budget_that_binds() -> None:
    clock = Clock()
    pacer = Pacer("judge", tpm=150_000, clock=clock)
    pacer.sent_tokens.add(148_000, clock.now)
    pacer.last_bound = ("tokens", clock.now)
    status = pacer.status()
    assert status is not None and status.describe() == "paced by tokens/min: 148k of 150k"
    clock.now += 11
    assert pacer.status() is None


# --- the loopback servers' buckets ----------------------------------------------------------------------


def test_server_bucket_refills_and_reports_like_openai() -> None:
    clock = Clock()
    bucket = Bucket(600, clock=clock)
    assert bucket.shortfall_seconds(1, clock.now) == 0
    bucket.take(600)
    assert bucket.shortfall_seconds(1, clock.now) == pytest.approx(0.1)
    clock.now += 30
    assert bucket.headers("requests", clock.now) == {"x-ratelimit-limit-requests": "600",
                                                    "x-ratelimit-remaining-requests": "300",
                                                    "x-ratelimit-reset-requests": "30s"}


def test_server_answers_429_with_retry_after_and_counts() -> None:
    clock = Clock()
    with OpenAIServer(default_reply="ok", limits=RateLimits(rpm=60, tpm=1000, start="empty", clock=clock)) as server:
        body = {"model": "m", "messages": [{"role": "user", "content": "x" * 400}], "max_tokens": 50}
        with httpx.Client() as client:
            refused = client.post(server.base_url + "/v1/chat/completions", json=body)
            clock.now += 10  # 10 requests and 166 tokens refilled: 100 + 50 reserved fits
            admitted = client.post(server.base_url + "/v1/chat/completions", json=body)
            stats = client.get(server.base_url + "/_stats").json()
    assert refused.status_code == 429 and refused.headers["retry-after-ms"] == "9000"
    assert refused.headers["retry-after"] == "9" and refused.headers["x-ratelimit-remaining-tokens"] == "0"
    assert refused.json()["error"]["code"] == "rate_limit_exceeded"
    assert admitted.status_code == 200
    used = admitted.json()["usage"]["total_tokens"]
    assert admitted.headers["x-ratelimit-remaining-tokens"] == str(166 - used)
    assert admitted.headers["x-ratelimit-remaining-requests"] == "9"
    assert stats["limits"]["admitted"] == 1 and stats["limits"]["rate_limited_429"] == 1
    assert stats["limits"]["tokens"] == used and stats["paths"]["/v1/chat/completions"] == {"200": 1, "429": 1}
