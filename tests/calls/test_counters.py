"""The call and cost counters as results.json writes them (``metadata.calls``, ``metadata.cost``): every key, in
its order, with its rounding — the documents readers and merged runs compare byte for byte."""

from __future__ import annotations

import asyncio
import json
import random

import pytest

from evalgate.calls.costs import CostLedger, Price, Usage
from evalgate.calls.executor import CALL_COUNTERS, CallFailed, Executor, ProviderStats, RetryPolicy, StatusError

ROLE_KEYS = ["calls", "cached_calls", "prompt_tokens", "completion_tokens", "cost_usd", "unpriced_calls",
             "cached_prompt_tokens", "cache_saved_usd", "batch_calls", "batch_saved_usd"]
PROVIDER_KEYS = ["calls", "attempts", "retries", "rate_limited_429", "failed", "timeouts", "backoff_seconds"]


def test_a_roles_spend_document_keeps_its_keys_order_and_six_decimals() -> None:
    ledger = CostLedger(max_cost=1.0)
    price = Price(0.15, 0.60, 0.075)
    # (600 · 0.15 + 400 · 0.075 + 200 · 0.60) / 1e6 = 240e-6 USD; the cache saved 400 · 0.075 / 1e6 = 30e-6
    assert ledger.record("judge", Usage(1000, 200, "provider", 400), price) == pytest.approx(240e-6)
    # batch: (2000 · 0.15 + 500 · 0.60) / 1e6 = 600e-6 direct, billed half
    assert ledger.record("judge", Usage(2000, 500, "provider"), price, batch=True) == pytest.approx(300e-6)
    assert ledger.record("judge", Usage(10, 5, "tiktoken"), None) is None
    ledger.record_cached("judge")
    ledger.record("target", Usage(1, 1, "provider"), Price(1 / 3, 0.0))

    roles = ledger.metadata()["roles"]
    assert list(roles) == ["judge", "target"]
    assert list(roles["judge"]) == ROLE_KEYS
    assert roles["judge"] == {"calls": 3, "cached_calls": 1, "prompt_tokens": 3010, "completion_tokens": 705,
                              "cost_usd": 0.00054, "unpriced_calls": 1, "cached_prompt_tokens": 400,
                              "cache_saved_usd": 3e-05, "batch_calls": 1, "batch_saved_usd": 0.0003}
    assert json.dumps(roles["target"]) == (
        '{"calls": 1, "cached_calls": 0, "prompt_tokens": 1, "completion_tokens": 1, "cost_usd": 0.0, '
        '"unpriced_calls": 0, "cached_prompt_tokens": 0, "cache_saved_usd": 0.0, "batch_calls": 0, '
        '"batch_saved_usd": 0.0}')


def test_a_providers_call_document_renames_two_counters_and_rounds_seconds_to_three_decimals() -> None:
    stats = ProviderStats(calls=2, attempts=4, retries=2, rate_limited=1, failed=1, timeouts=1,
                          waited_seconds=1.23456)
    assert json.dumps(stats.as_dict()) == (
        '{"calls": 2, "attempts": 4, "retries": 2, "rate_limited_429": 1, "failed": 1, "timeouts": 1, '
        '"backoff_seconds": 1.235}')
    # the run's totals are the same counters under the same names, in the same order
    assert list(CALL_COUNTERS) == PROVIDER_KEYS[:-1]


def test_the_executors_metadata_counts_a_429_then_a_success_and_a_call_that_gives_up() -> None:
    policy = RetryPolicy(retries=1, base_delay=0.001, max_delay=0.001)
    executor = Executor(policy, rng=random.Random(7))
    script: list[str | Exception] = [StatusError(429, "slow down"), "ok", StatusError(500, "boom"),
                                     StatusError(500, "boom")]
    replies = iter(script)

    async def operation() -> str:
        reply = next(replies)
        if isinstance(reply, Exception):
            raise reply
        return reply

    async def run() -> None:
        assert await executor.call("p", operation, what="first") == "ok"
        with pytest.raises(CallFailed):
            await executor.call("p", operation, what="second")

    asyncio.run(run())
    metadata = executor.metadata()
    provider = metadata["providers"]["p"]
    assert list(provider)[:len(PROVIDER_KEYS)] == PROVIDER_KEYS
    assert {key: provider[key] for key in PROVIDER_KEYS[:-1]} == {
        "calls": 2, "attempts": 4, "retries": 2, "rate_limited_429": 1, "failed": 1, "timeouts": 0}
    assert 0 < provider["backoff_seconds"] <= 0.002
    assert [metadata[key] for key in CALL_COUNTERS] == [2, 4, 2, 1, 1, 0]
