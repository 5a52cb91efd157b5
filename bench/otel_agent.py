"""The instrumented agent of ``bench.otel``: ``POST /chat`` answers after ``--latency-ms`` and, when the
request carries a W3C ``traceparent``, first exports ``--spans`` spans of that trace as one OTLP/protobuf
request to ``--otlp`` (an ``invoke_agent`` span under the caller's span, with ``chat`` and ``execute_tool``
children), as an agent that flushes its spans at the end of each request does; a request without one
(the control run) sends the same spans to the agent's own null ``/v1/traces``. Prints its port.

    python -m bench.otel_agent --port 0 --latency-ms 50 --spans 10 --otlp http://127.0.0.1:4318
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

from aiohttp import ClientSession, web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


def export_body(trace_id: str, parent: str, count: int) -> bytes:
    request = ExportTraceServiceRequest()
    block = request.resource_spans.add()
    item = block.resource.attributes.add()
    item.key, item.value.string_value = "service.name", "bench-agent"
    spans = block.scope_spans.add().spans
    now = time.time_ns()
    root_id = os.urandom(8)
    for index in range(count):
        span = spans.add()
        span.trace_id = bytes.fromhex(trace_id)
        span.span_id = root_id if index == 0 else os.urandom(8)
        span.parent_span_id = bytes.fromhex(parent) if index == 0 else root_id
        span.start_time_unix_nano, span.end_time_unix_nano = now + index, now + 1_000_000 + index
        kind = "invoke_agent" if index == 0 else ("chat" if index % 2 else "execute_tool")
        span.name = f"{kind} step{index}"
        attributes = {"gen_ai.operation.name": kind, "gen_ai.agent.name": "bench",
                      "gen_ai.tool.name": f"tool{index}", "gen_ai.request.model": "m",
                      "gen_ai.provider.name": "openai", "gen_ai.tool.call.arguments": '{"q": "x", "n": 1}'}
        for key, value in attributes.items():
            entry = span.attributes.add()
            entry.key, entry.value.string_value = key, value
        for key, number in (("gen_ai.usage.input_tokens", 120), ("gen_ai.usage.output_tokens", 30)):
            entry = span.attributes.add()
            entry.key, entry.value.int_value = key, number
    return request.SerializeToString()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--spans", type=int, default=10)
    parser.add_argument("--otlp", default="")
    args = parser.parse_args()
    session: ClientSession | None = None
    port = 0

    async def sink(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=b"", content_type="application/x-protobuf")

    async def chat(request: web.Request) -> web.Response:
        nonlocal session
        body = await request.json()
        await asyncio.sleep(args.latency_ms / 1000)
        header = request.headers.get("traceparent")
        if args.otlp:
            # without a traceparent (the control run) the same spans go to this agent's own null sink, so
            # both runs cost the agent the same and the difference is evalgate's
            _, trace_id, parent, _ = header.split("-") if header else ("", os.urandom(16).hex(), os.urandom(8).hex(), "")
            endpoint = args.otlp if header else f"http://127.0.0.1:{port}"
            session = session or ClientSession()
            async with session.post(f"{endpoint}/v1/traces", data=export_body(trace_id, parent, args.spans),
                                    headers={"Content-Type": "application/x-protobuf"}) as reply:
                await reply.read()
        return web.json_response({"output": f"answer to {body.get('message', '')}"})

    async def serve() -> None:
        nonlocal port
        app = web.Application()
        app.router.add_post("/chat", chat)
        app.router.add_post("/v1/traces", sink)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", args.port)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        print(port, flush=True)
        await asyncio.Event().wait()

    asyncio.run(serve())


if __name__ == "__main__":
    main()
