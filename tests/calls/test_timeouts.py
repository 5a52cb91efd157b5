"""Timeouts per attempt, connect and read timeouts, and a timed-out request cancelled on the wire: its
connection is closed (the server sees the client hang up and, if it watches for that, stops working on
the request) before the retry goes out on a fresh connection."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from pathlib import Path

from evalgate.calls.costs import CostLedger, price_table
from evalgate.calls.executor import Executor, RetryPolicy
from evalgate.calls.runtime import Runtime
from evalgate.config.settings import build_settings
from evalgate.model import Answer, Case
from evalgate.runner.run import execute
from evalgate.targets.http import HttpTarget
from tests.servers.agent_server import AgentServer, Fault

CHAT = "/api/agent/chat"


def runtime(policy: RetryPolicy) -> Runtime:
    return Runtime(Executor(policy, concurrency=2), CostLedger(), price_table({}))


def ask(url: str, policy: RetryPolicy, *cases: Case) -> tuple[list[Answer], dict]:
    async def go() -> tuple[list[Answer], dict]:
        shared = runtime(policy)
        target = HttpTarget(url=url, runtime=shared, env={})
        try:
            return [await target.answer(case) for case in cases], shared.executor.metadata()
        finally:
            await target.aclose()
            await shared.aclose()

    return asyncio.run(go())


def disconnects(agent: AgentServer, count: int) -> list:
    """The server's recorded hang-ups once there are ``count`` (it notices within 5 ms; wait up to 5 s)."""
    deadline = time.monotonic() + 5
    while len(agent.disconnects()) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    return agent.disconnects()


def test_attempt_timeout_closes_the_connection_before_the_retry() -> None:
    with AgentServer({"q": "the answer"}, faults=[Fault(delay_ms=3000, times=1)], watch_disconnects=True) as agent:
        answers, calls = ask(agent.base_url + CHAT, RetryPolicy(retries=1, attempt_seconds=0.4, base_delay=0.05),
                             Case(id="a", input="q1"), Case(id="b", input="q2"))
        first, retry, second = agent.requests([CHAT])
        hung_up = disconnects(agent, 1)
    assert [a.error for a in answers] == [None, None]
    assert calls["timeouts"] == 1 and calls["retries"] == 1
    assert [d.seq for d in hung_up] == [first.seq]  # the server saw the timed-out request's client hang up…
    assert hung_up[0].at < retry.timing["received"]  # …before the retry arrived
    assert "answered" not in first.timing  # and stopped working on it
    assert retry.connection != first.connection  # the retry went out on a new connection
    assert second.connection == retry.connection  # a completed call's connection is kept alive and reused


def test_read_timeout_counts_silence_and_is_reported_as_such() -> None:
    policy = RetryPolicy(retries=1, attempt_seconds=30, read_seconds=0.3, base_delay=0.05)
    with AgentServer({"q": "the answer"}, faults=[Fault(delay_ms=5000)], watch_disconnects=True) as agent:
        (answer,), calls = ask(agent.base_url + CHAT, policy, Case(id="a", input="q1"))
        first, retry = agent.requests([CHAT])
        hung_up = disconnects(agent, 2)
    assert answer.error is not None and "read timed out (no data for 0.3s)" in answer.error
    assert "gave up after 2 attempts" in answer.error
    assert calls["timeouts"] == 2
    assert [d.seq for d in hung_up] == [first.seq, retry.seq]
    assert hung_up[0].at < retry.timing["received"] and retry.connection != first.connection


def test_read_timeout_is_not_a_limit_on_a_whole_reply_that_keeps_coming() -> None:
    """A reply whose bytes keep arriving (each gap below the read timeout) is not cut by the read timeout;
    only the attempt's limit bounds it."""
    gaps = 0.15

    async def slow_server(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        body = json.dumps({"response": "x" * 40}).encode()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     + f"Content-Length: {len(body)}\r\n\r\n".encode())
        for start in range(0, len(body), 10):
            await asyncio.sleep(gaps)
            writer.write(body[start:start + 10])
            await writer.drain()
        writer.close()

    async def go() -> Answer:
        server = await asyncio.start_server(slow_server, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        shared = runtime(RetryPolicy(retries=0, attempt_seconds=10, read_seconds=0.5))
        target = HttpTarget(url=f"http://127.0.0.1:{port}/chat", runtime=shared, env={})
        try:
            return await target.answer(Case(id="a", input="q"))
        finally:
            await target.aclose()
            await shared.aclose()
            server.close()
            await server.wait_closed()

    answer = asyncio.run(go())
    assert answer.error is None and answer.output == "x" * 40
    assert answer.latency_ms is not None and answer.latency_ms >= 4 * gaps * 1000  # longer than the read timeout


def test_connect_timeout_is_reported_as_such() -> None:
    """A listener whose backlog is full never completes the handshake: the connect timeout fires."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    try:
        for _ in range(8):  # fill the accept queue and the SYN backlog of a listener that never accepts
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
            fillers.append(filler)
        policy = RetryPolicy(retries=0, attempt_seconds=20, connect_seconds=0.3)
        (answer,), calls = ask(f"http://127.0.0.1:{port}/chat", policy, Case(id="a", input="q"))
    finally:
        for filler in fillers:
            filler.close()
        listener.close()
    assert answer.error is not None and "connect timed out after 0.3s" in answer.error, answer.error
    assert calls["timeouts"] == 1


def test_timeout_settings_reach_the_calls(tmp_path: Path) -> None:
    dataset = tmp_path / "cases.json"
    dataset.write_text(json.dumps([{"id": "a", "input": "q1", "expected_keywords": ["answer"]}]))
    env = {"EVALGATE_READ_TIMEOUT_SECONDS": "0.3", "EVALGATE_CONNECT_TIMEOUT_SECONDS": "2"}
    with AgentServer({"q": "the answer"}, faults=[Fault(delay_ms=2000)], watch_disconnects=True) as agent:
        settings, suite, _ = build_settings(
            cli={"dataset": [str(dataset)], "target": "http", "target_url": agent.base_url + CHAT,
                 "output_dir": str(tmp_path / "out"), "api_retries": 0, "progress": "none"}, env=env)
        outcome = asyncio.run(execute(settings, suite, install_signal_handlers=False))
    (result,) = json.loads(outcome.results_path.read_text())["results"]
    assert "read timed out (no data for 0.3s)" in result["error"]
    policy = outcome.document["metadata"]["calls"]["policy"]
    assert policy["read_seconds"] == 0.3 and policy["connect_seconds"] == 2.0 and policy["attempt_seconds"] == 60
