"""CPU per call of the HTTP clients evalgate could put on its hot path (the ``clients`` scenario).

``python -m bench.clients KIND BASE_URL CALLS CONCURRENCY`` makes CALLS chat-completions requests (a
judge-sized prompt) with CONCURRENCY in flight against a loopback OpenAI-compatible server, after a
warm-up, and prints ``{"kind", "calls", "wall_s", "cpu_ms_per_call"}`` as JSON. KIND:

* ``httpx``: ``httpx.AsyncClient`` with its default transport, pool sized to the concurrency;
* ``aiohttp``: a bare ``aiohttp.ClientSession``;
* ``evalgate-pool``: ``evalgate.calls.http_pool.HttpPool`` (what HTTP targets use);
* ``evalgate-direct``: ``evalgate.calls.chat.DirectChat`` (the default judge / model client);
* ``openai-sdk``: ``openai.AsyncOpenAI`` (``chat_client: openai-sdk``).

Every kind parses the reply JSON, so the figures compare like with like.
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

KINDS = ("httpx", "aiohttp", "evalgate-pool", "evalgate-direct", "openai-sdk")
WARM_UP_CALLS = 50
BODY: dict[str, Any] = {
    "model": "bench-judge",
    "messages": [{"role": "system", "content": "You are a strict judge. " * 40},
                 {"role": "user", "content": "Question, answer and rubric. " * 80}],
    "temperature": 0,
}
KEY = "sk-bench-loopback-not-a-secret"


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def make_call(kind: str, base_url: str, concurrency: int) -> tuple[Callable[[], Awaitable[Any]],
                                                                          Callable[[], Awaitable[None]]]:
    """The call to repeat for ``kind`` and how to close its client."""
    url = f"{base_url}/v1/chat/completions"
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    if kind == "httpx":
        import httpx

        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        client = httpx.AsyncClient(limits=limits, trust_env=False, timeout=60)

        async def httpx_call() -> Any:
            return (await client.post(url, content=json.dumps(BODY).encode(), headers=headers)).json()

        return httpx_call, client.aclose
    if kind == "aiohttp":
        import aiohttp

        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency), headers=headers)

        async def aiohttp_call() -> Any:
            async with session.post(url, data=json.dumps(BODY).encode()) as response:
                return json.loads(await response.read())

        return aiohttp_call, session.close
    if kind == "evalgate-pool":
        from evalgate.calls.http_pool import HttpPool

        pool = HttpPool(timeout=60, concurrency=concurrency, headers=headers)

        async def pool_call() -> Any:
            return (await pool.request("POST", url, body=json.dumps(BODY).encode())).json()

        return pool_call, pool.aclose
    if kind == "evalgate-direct":
        from evalgate.calls.chat import DirectChat
        from evalgate.calls.providers import resolve_provider

        provider = resolve_provider("local", model="bench-judge", base_url=f"{base_url}/v1",
                                    env={"LOCAL_JUDGE_API_KEY": KEY})
        chat = DirectChat(provider, timeout=60, concurrency=concurrency)
        return (lambda: chat.create(BODY)), chat.aclose
    if kind == "openai-sdk":
        import openai

        sdk = openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key=KEY, max_retries=0, timeout=60)
        return (lambda: sdk.chat.completions.create(**BODY)), sdk.close
    raise SystemExit(f"unknown client kind {kind!r}; choose one of {', '.join(KINDS)}")


async def measure(kind: str, base_url: str, calls: int, concurrency: int) -> dict[str, Any]:
    call, close = await make_call(kind, base_url, concurrency)
    try:
        for _ in range(WARM_UP_CALLS):
            await call()
        remaining = iter(range(calls))

        async def worker() -> None:
            for _ in remaining:
                await call()

        started, cpu = time.perf_counter(), cpu_seconds()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall, used = time.perf_counter() - started, cpu_seconds() - cpu
    finally:
        await close()
    return {"kind": kind, "calls": calls, "wall_s": round(wall, 4), "cpu_ms_per_call": round(used / calls * 1000, 4)}


def main(argv: list[str]) -> int:
    kind, base_url, calls, concurrency = argv[0], argv[1], int(argv[2]), int(argv[3])
    print(json.dumps(asyncio.run(measure(kind, base_url, calls, concurrency))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
