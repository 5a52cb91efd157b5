"""Loopback servers of the hostile suite: an aiohttp application in a background thread whose every reply
is decided by a plain Python function, so each test scripts exactly the misbehaviour it needs (a 10 MB
answer, an HTML page declared as JSON, an agent that echoes its credentials, a provider whose error
message quotes the key).

``with Loopback(respond) as server:`` listens on 127.0.0.1 (an ephemeral port) until the block ends;
``respond(Seen) -> Out`` gets the method, path, headers and body of each request and returns the reply.
Every request is kept in ``server.seen``.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Self

from aiohttp import web

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class Seen:
    """One request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body or b"null")


@dataclass
class Out:
    """One reply: status, body (bytes, text or a JSON value), Content-Type, delay before answering."""

    body: Any = b""
    status: int = 200
    content_type: str | None = None
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    endless: bool = False
    """Send ``body`` and then 1 MiB chunks of spaces without end (no Content-Length) until the client goes."""

    def encoded(self) -> tuple[bytes, str]:
        if isinstance(self.body, bytes):
            return self.body, self.content_type or "application/octet-stream"
        if isinstance(self.body, str):
            return self.body.encode(), self.content_type or "text/plain; charset=utf-8"
        return json.dumps(self.body).encode(), self.content_type or "application/json"


Respond = Callable[[Seen], Out]


class Loopback:
    """An HTTP server on 127.0.0.1 answering with ``respond`` (see the module docstring)."""

    def __init__(self, respond: Respond) -> None:
        self.respond = respond
        self.seen: list[Seen] = []
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        seen = Seen(request.method, request.path_qs, {k.lower(): v for k, v in request.headers.items()},
                    await request.read())
        with self._lock:
            self.seen.append(seen)
        out = self.respond(seen)
        if out.delay:
            await asyncio.sleep(out.delay)
        body, content_type = out.encoded()
        if out.endless:
            response = web.StreamResponse(status=out.status, headers={"Content-Type": content_type, **out.headers})
            await response.prepare(request)
            await response.write(body)
            chunk = b" " * (1 << 20)
            try:
                while True:
                    await response.write(chunk)
            except (ConnectionError, RuntimeError):  # the client closed the connection
                return response
        return web.Response(status=out.status, body=body, headers={"Content-Type": content_type, **out.headers})

    def __enter__(self) -> Self:
        ready = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            loop = self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            try:
                app = web.Application(client_max_size=64 * 1024 * 1024)
                app.router.add_route("*", "/{tail:.*}", self._handle)
                runner = self._runner = web.AppRunner(app, access_log=None)
                loop.run_until_complete(runner.setup())
                site = web.TCPSite(runner, LOOPBACK, 0)
                loop.run_until_complete(site.start())
                self.port = runner.addresses[0][1]
            except BaseException as exc:  # pragma: no cover - reported to the test
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=serve, name="hostile-loopback", daemon=True)
        self._thread.start()
        ready.wait(10)
        if failure:
            raise failure[0]
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)


def chat_completion(content: str, prompt_tokens: int = 10, completion_tokens: int = 5) -> dict[str, Any]:
    """An OpenAI chat-completions reply carrying ``content``."""
    return {"id": "x", "object": "chat.completion", "model": "hostile-judge",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}
