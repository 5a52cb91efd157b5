"""The scheduler against loopback servers that enforce and count rate limits (``tests.servers.limits``):
paced by the replies' headers, by configured caps when a provider sends none, and paused by a 429's
Retry-After. A budget is exceeded exactly when the server answers 429, so the 429s counted at the server
are the measure."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest

from evalgate.calls import ratelimit
from evalgate.calls.chat import ChatService
from evalgate.calls.providers import resolve_provider
from evalgate.calls.ratelimit import Pacer
from evalgate.calls.runtime import Runtime
from evalgate.config.settings import Settings
from evalgate.model import Case
from evalgate.targets.http import HttpTarget
from tests.servers.agent_server import AgentServer
from tests.servers.limits import RateLimits
from tests.servers.openai_server import OpenAIServer, Rule

KEY = "sk-pacing-test-key"
MESSAGES = [{"role": "system", "content": "You grade answers."},
            {"role": "user", "content": "Grade this answer about rotating the API key: " + "details " * 20}]


async def chat_calls(server: OpenAIServer, calls: int, settings: Settings) -> tuple[Runtime, list[Any]]:
    runtime = Runtime.from_settings(settings)
    provider = resolve_provider("local", model="m", base_url=server.base_url + "/v1",
                                env={"LOCAL_JUDGE_API_KEY": KEY})
    service = ChatService(provider, runtime, role="judge")
    try:
        replies = await asyncio.gather(*(service.complete(MESSAGES, {}, max_tokens=30, what=f"call {i}")
                                         for i in range(calls)), return_exceptions=True)
    finally:
        await service.aclose()
    return runtime, list(replies)


@pytest.fixture()
def patient_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first call goes alone until its reply (not only its first 0.3 s), so a loaded machine that is slow
    to send it cannot release the others early: these tests are about the budgets, not that timing."""
    monkeypatch.setattr(ratelimit, "PROBE_SECONDS", 30.0)


@pytest.mark.parametrize("client", ["direct", "openai-sdk"])
def test_headers_keep_calls_within_both_budgets(patient_probe: None, client: str) -> None:
    # 1,200 requests and 24,000 tokens per minute (20 requests, 400 tokens per second), both empty at the
    # start: a call reserves ≈ 60 prompt + 30 completion tokens, so tokens bind (≈ 4.4 calls/s)
    limits = RateLimits(rpm=1200, tpm=24_000, start="empty")
    with OpenAIServer(api_key=KEY, default_reply="fine", limits=limits, latency_ms=20) as server:
        runtime, replies = asyncio.run(chat_calls(server, 24, Settings(concurrency=16, api_retries=5,
                                                                        chat_client=client)))
        counted = limits.snapshot()
    assert not [r for r in replies if isinstance(r, BaseException)] and counted["admitted"] == 24
    # the first call goes alone and meets the empty budget at most once; after its reply every call is paced
    assert counted["rate_limited_429"] <= 1
    assert counted["lowest_tokens"] >= 0 and counted["lowest_requests"] >= 0
    pacing = runtime.executor.metadata()["pacing"]["judge local"]
    assert pacing["tokens_per_minute"] == 24_000 and pacing["requests_per_minute"] == 1200
    assert pacing["calls_waited"] > 0 and pacing["waits_by_reason"].get("tokens", 0) > 0
    assert pacing["prompt_token_ratio"] is not None  # the replies' usage corrected the estimates


def test_a_full_budget_is_spent_without_a_single_429() -> None:
    limits = RateLimits(rpm=600, tpm=3_000, start="full")  # 3,000 tokens: about 30 calls, then 50 tokens/s
    with OpenAIServer(api_key=KEY, default_reply="fine", limits=limits) as server:
        _, replies = asyncio.run(chat_calls(server, 36, Settings(concurrency=16, api_retries=5)))
        counted = limits.snapshot()
    assert not [r for r in replies if isinstance(r, BaseException)] and counted["rate_limited_429"] == 0


def test_configured_caps_pace_a_provider_that_sends_no_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Pacer, "window_seconds", 2.0)  # caps per 2 s instead of a minute, to run fast
    limits = RateLimits(rpm=8, start="full", send_headers=False, window=2.0)
    with OpenAIServer(api_key=KEY, default_reply="fine", limits=limits) as server:
        runtime, replies = asyncio.run(chat_calls(server, 20, Settings(concurrency=16, judge_rpm=8)))
        counted = limits.snapshot()
    assert not [r for r in replies if isinstance(r, BaseException)] and counted["rate_limited_429"] == 0
    assert runtime.executor.metadata()["pacing"]["judge local"]["caps"] == {"rpm": 8, "tpm": None}
    with OpenAIServer(api_key=KEY, default_reply="fine", limits=RateLimits(rpm=8, send_headers=False, window=2.0)
                      ) as server:  # the control: without the cap the same calls meet 429s
        asyncio.run(chat_calls(server, 20, Settings(concurrency=16, api_retries=2)))
        assert server.limits is not None and server.limits.snapshot()["rate_limited_429"] > 0


def test_a_429_pauses_every_call_to_that_provider_for_its_retry_after() -> None:
    with OpenAIServer([Rule(status=429, retry_after=0.6, times=1)], api_key=KEY, default_reply="fine",
                      latency_ms=10) as server:
        asyncio.run(chat_calls(server, 12, Settings(concurrency=4)))
        records = server.requests()
    refused = next(r for r in records if r.number == 1)
    later = [r.received_at - refused.received_at for r in records if r.seq > 4]  # sent after the 429 came back
    assert later and min(later) >= 0.55


def test_an_http_agent_is_paced_by_its_own_headers(patient_probe: None) -> None:
    limits = RateLimits(rpm=600, start="empty")  # 10 requests per second
    with AgentServer(default="ok", limits=limits) as agent:
        settings = Settings(target="http", target_url=agent.base_url + "/api/agent/chat", concurrency=8)
        runtime = Runtime.from_settings(settings)

        async def run() -> list[Any]:
            target = HttpTarget.from_settings(settings, runtime, env={})
            try:
                return list(await asyncio.gather(*(target.answer(Case(id=str(i), input=f"question {i}"))
                                                   for i in range(15))))
            finally:
                await target.aclose()

        started = time.monotonic()
        answers = asyncio.run(run())
        elapsed = time.monotonic() - started
        counted = limits.snapshot()
    assert all(a.error is None for a in answers)
    assert counted["admitted"] == 15 and counted["rate_limited_429"] <= 1  # at most the first call, alone
    assert elapsed >= 1.4  # 15 requests at 10 per second from an empty bucket cannot be faster
    assert runtime.executor.metadata()["pacing"]["target"]["requests_per_minute"] == 600


def test_progress_lines_show_the_budget_that_paces_the_run(tmp_path: Path) -> None:
    rows = [{"id": f"c{i}", "input": f"Question {i}: how do I rotate the key?", "output": f"Answer {i}: rotate it.",
             "passing_criteria": "The answer says how.", "metrics": ["relevancy"]} for i in range(12)]
    data = tmp_path / "cases.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    limits = RateLimits(tpm=30_000, start="empty")  # 500 tokens/s; a judge call reserves ≈ 500 (prompt + its 256 cap)
    with OpenAIServer(api_key=KEY, limits=limits) as server:
        done = subprocess.run(
            [sys.executable, "-m", "evalgate", "run", "-d", str(data), "--output-dir", str(tmp_path / "out"),
             "--judge-provider", "local", "--judge-base-url", server.base_url + "/v1", "--progress", "plain",
             "--progress-interval-seconds", "0.3"],
            env={**os.environ, "LOCAL_JUDGE_API_KEY": KEY, "NO_COLOR": "1"}, capture_output=True, text=True,
            timeout=120)
        counted = limits.snapshot()
    assert done.returncode in (0, 1), done.stderr
    assert re.search(r"judge local: paced by tokens/min: [\d.]+k of 30k", done.stderr), done.stderr
    assert counted["admitted"] == 12
    pacing = json.loads((tmp_path / "out" / "results.json").read_text())["metadata"]["calls"]["pacing"]
    assert pacing["judge local"]["tokens_per_minute"] == 30_000


def test_plain_progress_line_names_the_binding_budget() -> None:
    from evalgate.calls.executor import CallStats
    from evalgate.report.progress import PlainProgress

    class Live:
        in_flight = 3
        listeners: ClassVar[list[Any]] = []
        stats = CallStats()

        def pacing_status(self) -> list[str]:
            return ["judge openai: paced by tokens/min: 148k of 150k"]

    progress = PlainProgress(10, clock=lambda: 0.0)
    progress.live = Live()
    assert progress.line() == ("[evalgate] 0/10 cases (0%), 0 not passed · 3 calls in flight · judge openai: paced "
                               "by tokens/min: 148k of 150k · 0 retries · 0s")


def test_a_call_counts_its_prompt_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The budget's worst case and the pacer's token estimate (on every attempt) share one local count."""
    from evalgate.calls import chat

    counted: list[int] = []
    real = chat.count_message_tokens
    monkeypatch.setattr(chat, "count_message_tokens", lambda messages: counted.append(real(messages)) or counted[-1])
    with OpenAIServer([Rule(status=500, times=1)], api_key=KEY, default_reply="fine") as server:
        runtime, replies = asyncio.run(chat_calls(server, 1, Settings(judge_tpm=100_000, max_cost=1.0,
                                                                      api_retries=2)))
        attempts = len(server.chat_requests())
    assert not [r for r in replies if isinstance(r, BaseException)] and attempts == 2
    assert runtime.ledger.max_cost == 1.0 and "judge local" in runtime.executor.metadata()["pacing"]
    assert len(counted) == 1
