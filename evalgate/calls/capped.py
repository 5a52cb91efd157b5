"""An httpx-style client whose reply bodies are cut at a size: the openai SDK's client when
``chat_client: openai-sdk`` (the direct client caps in ``calls.http_pool``).

Every reply passes through a capped transport: a ``Content-Length`` above the cap, or the bytes read so
far passing it, raise ``ReplyTooLarge`` (the message names the setting) and close the connection, so an
endless reply costs at most the cap in memory. The SDK's own HTTP package (``httpx`` or its successor
``httpx2``, whichever the installed SDK builds on) provides the base classes; the proxy mounts taken from
the environment are wrapped too.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from typing import Any

from evalgate.calls.http_pool import ReplyTooLarge


def capped_async_client(client: Any, limit: int, setting: str) -> Any:
    """``client`` (an ``AsyncClient`` of httpx or httpx2) with its transport and proxy mounts capped."""
    http = sys.modules[type(client).__mro__[1].__module__.split(".")[0]]

    class CappedStream(http.AsyncByteStream):  # type: ignore[name-defined]
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        async def __aiter__(self) -> AsyncIterator[bytes]:
            size = 0
            async for chunk in self.inner:
                size += len(chunk)
                if size > limit:
                    await self.inner.aclose()
                    raise ReplyTooLarge(f"the reply is more than the {limit:,} bytes allowed ({setting})")
                yield chunk

        async def aclose(self) -> None:
            await self.inner.aclose()

    class CappedTransport(http.AsyncBaseTransport):  # type: ignore[name-defined]
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        async def handle_async_request(self, request: Any) -> Any:
            response = await self.inner.handle_async_request(request)
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > limit:
                await response.aclose()
                raise ReplyTooLarge(f"the reply is {int(declared):,} bytes, more than the {limit:,} allowed ({setting})")
            response.stream = CappedStream(response.stream)
            return response

        async def aclose(self) -> None:
            await self.inner.aclose()

    client._transport = CappedTransport(client._transport)
    client._mounts = {pattern: CappedTransport(transport) if transport is not None else None
                      for pattern, transport in client._mounts.items()}
    return client
