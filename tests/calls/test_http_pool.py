"""The hot-path HTTP client (evalgate.calls.http_pool) against real loopback servers: keep-alive pool sized to the
concurrency, query encoding like httpx's, charset decoding, proxy variables honoured (looked up once),
and aiohttp's errors classified by the retry layer."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import parse_qs, urlencode

import aiohttp
import httpx
import pytest

from evalgate.calls.executor import classify
from evalgate.calls.http_pool import HttpPool, Reply, _query
from tests.servers.agent_server import AgentServer
from tests.support.ports import free_port

AGENT = "/api/agent/chat"


def run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


def test_concurrent_calls_reuse_at_most_pool_size_connections() -> None:
    async def go(base: str) -> list[Reply]:
        pool = HttpPool(timeout=10, concurrency=16)
        try:
            body = json.dumps({"message": "hello"}).encode()
            return await asyncio.gather(*[pool.request("POST", base + AGENT, body=body,
                                                       headers={"Content-Type": "application/json"})
                                          for _ in range(200)])
        finally:
            await pool.aclose()

    with AgentServer(latency_ms=2) as server:
        replies = run(go(server.base_url))
        stats = server.stats()
    assert [r.status for r in replies] == [200] * 200  # type: ignore[union-attr]
    assert stats["paths"][AGENT] == {"200": 200}
    assert 1 <= stats["connections"] <= 16  # the pool never opens more than its size


def test_query_pairs_match_httpx_encoding() -> None:
    params = {"q": "a b&c", "flag": True, "off": False, "none": None, "n": 3, "many": [1, "x"]}
    ours = parse_qs(urlencode(_query(params) or []), keep_blank_values=True)
    theirs = parse_qs(str(httpx.QueryParams(params)), keep_blank_values=True)
    assert ours == theirs
    assert _query({}) is None


def test_get_sends_query_parameters_to_the_server() -> None:
    async def go(base: str) -> Reply:
        pool = HttpPool(timeout=10, concurrency=2)
        try:
            return await pool.request("GET", base + "/anything", params={"message": "é & ü", "debug": True})
        finally:
            await pool.aclose()

    with AgentServer() as server:
        reply = run(go(server.base_url))
        seen = server.requests()
    assert isinstance(reply, Reply) and reply.status == 404
    assert parse_qs(seen[-1].query) == {"message": ["é & ü"], "debug": ["true"]}


def test_reply_text_uses_the_declared_charset_else_utf8() -> None:
    assert Reply(200, "OK", {}, "café".encode("latin-1"), "iso-8859-1").text == "café"
    assert Reply(200, "OK", {}, "café".encode()).text == "café"
    assert Reply(200, "OK", {}, b"caf\xe9", "no-such-charset").text == "caf\ufffd"
    assert Reply(200, "OK", {}, b'{"a": [1]}').json() == {"a": [1]}
    with pytest.raises(ValueError):
        Reply(200, "OK", {}, b"<html>").json()


@contextmanager
def recording_proxy() -> Iterator[tuple[str, list[str]]]:
    """A loopback HTTP forward proxy stand-in: records each request line and answers it itself."""
    lines: list[str] = []
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, object] = {}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                break
            request_line, *header_lines = head.decode().split("\r\n")
            lines.append(request_line)
            length = next((int(h.split(":", 1)[1]) for h in header_lines if h.lower().startswith("content-length")), 0)
            await reader.readexactly(length)
            body = b'{"answer": "via proxy"}'
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                         + str(len(body)).encode() + b"\r\n\r\n" + body)
            await writer.drain()

    async def serve() -> None:
        stop = asyncio.Event()
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        holder["port"] = server.sockets[0].getsockname()[1]
        holder["stop"] = stop
        ready.set()
        async with server:
            await stop.wait()

    thread = threading.Thread(target=lambda: loop.run_until_complete(serve()), daemon=True)
    thread.start()
    ready.wait(5)
    try:
        yield f"http://127.0.0.1:{holder['port']}", lines
    finally:
        loop.call_soon_threadsafe(holder["stop"].set)  # type: ignore[attr-defined]
        thread.join(5)


def test_proxy_variables_are_honoured_and_no_proxy_bypasses(monkeypatch: pytest.MonkeyPatch) -> None:
    async def post(url: str) -> Reply:
        pool = HttpPool(timeout=10, concurrency=2)
        try:
            body, headers = b'{"message": "hi"}', {"Content-Type": "application/json"}
            first = await pool.request("POST", url, body=body, headers=headers)
            await pool.request("POST", url, body=body, headers=headers)
            return first
        finally:
            await pool.aclose()

    with recording_proxy() as (proxy_url, lines), AgentServer() as direct:
        monkeypatch.setenv("HTTP_PROXY", proxy_url)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        reply = run(post("http://agent.example.invalid/api/agent/chat"))
        assert isinstance(reply, Reply) and reply.json() == {"answer": "via proxy"}
        assert lines == ["POST http://agent.example.invalid/api/agent/chat HTTP/1.1"] * 2  # absolute form
        bypassed = run(post(direct.base_url + AGENT))  # NO_PROXY: straight to the server
        assert isinstance(bypassed, Reply) and bypassed.status == 200 and len(lines) == 2


def test_refused_connection_and_timeouts_are_classified_for_the_retry_layer() -> None:
    async def call(url: str, timeout: float) -> BaseException:
        pool = HttpPool(timeout=timeout, concurrency=1)
        try:
            await pool.request("POST", url, body=b"{}")
        except BaseException as exc:  # the test inspects what escapes
            return exc
        finally:
            await pool.aclose()
        raise AssertionError("the call should have failed")

    refused = run(call(f"http://127.0.0.1:{free_port()}/x", 5))
    assert isinstance(refused, aiohttp.ClientConnectionError)
    failure = classify(refused)  # type: ignore[arg-type]
    assert failure.retryable and failure.reason.startswith("connection error: ClientConnectorError")
    with AgentServer(latency_ms=2000) as slow:
        timed_out = run(call(slow.base_url + AGENT, 0.2))
    failure = classify(timed_out)  # type: ignore[arg-type]
    assert failure.retryable and failure.reason == "timed out"
    invalid = classify(aiohttp.InvalidURL("http://"))
    assert not invalid.retryable and invalid.reason.startswith("request error")
