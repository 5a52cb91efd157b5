"""A small travel agent instrumented with OpenTelemetry (the example of docs/traces.md).

It answers ``POST /chat {"message": ...}`` by planning tool calls — ``search_flights`` then
``book_flight`` for a booking, ``get_weather`` for the weather — and records what it does as spans in the
OpenTelemetry GenAI semantic conventions: one ``invoke_agent`` span per request (child of the caller's
W3C ``traceparent``), an ``execute_tool`` span per tool with its arguments, and a ``chat`` span per
planning step with its model and token usage. The spans go to ``OTEL_EXPORTER_OTLP_ENDPOINT`` over
OTLP/HTTP (protobuf), which is evalgate's receiver during a run. No model and no network: the planner is
scripted. ``BREAK=order`` books before searching (the mistake the example's gate catches).

    python agent.py --port 0 --port-file PATH
    python agent.py --host 0.0.0.0 --port 8000     # as a `services:` container (tests/e2e/test_act_traces.py)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.propagate import extract
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

# -- the few lines of instrumentation: a tracer provider exporting OTLP/HTTP, in short batches ----------
provider = TracerProvider(resource=Resource.create({"service.name": "travel-agent"}))
ENDPOINT = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "")
if "{peer}" not in ENDPOINT:
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(), schedule_delay_millis=50))
trace.set_tracer_provider(provider)
tracer = trace.get_tracer("travel-agent")

# -- only for a `services:` agent in GitHub Actions: `{peer}` in the endpoint is the address of the first
# caller that sent a traceparent, i.e. the action's container, which has no name a service could export to
# (docs/traces.md, In the Action)
_peer_lock = threading.Lock()
_peer_exporting = False


def export_to_peer(address: str) -> None:
    global _peer_exporting
    with _peer_lock:
        if not _peer_exporting:
            host = f"[{address}]" if ":" in address else address
            url = ENDPOINT.replace("{peer}", host).rstrip("/") + "/v1/traces"
            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=url), schedule_delay_millis=50))
            _peer_exporting = True

MODEL = "scripted-planner-1"


def chat_step(prompt: str) -> None:
    """One planning call of the (scripted) model, recorded as a GenAI ``chat`` span."""
    with tracer.start_as_current_span(f"chat {MODEL}", kind=trace.SpanKind.CLIENT) as span:
        span.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.provider.name": "scripted",
                             "gen_ai.request.model": MODEL, "gen_ai.usage.input_tokens": 20 + len(prompt) // 4,
                             "gen_ai.usage.output_tokens": 12})


def run_tool(name: str, arguments: dict[str, str]) -> str:
    with tracer.start_as_current_span(f"execute_tool {name}") as span:
        span.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                             "gen_ai.tool.call.arguments": json.dumps(arguments)})
        if name == "search_flights":
            return f"flight BA117 from {arguments['origin']} to {arguments['destination']}"
        if name == "book_flight":
            return f"booked {arguments['flight']}"
        return f"sunny in {arguments['city']}"


def answer(message: str) -> str:
    cities = re.findall(r"\b[A-Z][a-z]+\b", message)
    if "weather" in message.lower():
        chat_step(message)
        return run_tool("get_weather", {"city": cities[-1] if cities else "Paris"})
    route = re.search(r"from (\w+) to (\w+)", message)
    origin, destination = route.groups() if route else ("London", "Paris")
    steps = [("search_flights", {"origin": origin, "destination": destination}), ("book_flight", {"flight": "BA117"})]
    if os.environ.get("BREAK") == "order":
        steps.reverse()
    said = []
    for name, arguments in steps:
        chat_step(message)
        said.append(run_tool(name, arguments))
    chat_step(message)
    return "; ".join(said)


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if "{peer}" in ENDPOINT and self.headers.get("traceparent"):
            export_to_peer(self.client_address[0])  # the first traced caller: evalgate, not a health probe
        # the caller's traceparent makes this request's spans part of its trace (evalgate: one per case)
        with tracer.start_as_current_span("invoke_agent travel-agent", context=extract(dict(self.headers)),
                                          kind=trace.SpanKind.SERVER) as span:
            span.set_attributes({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "travel-agent"})
            text = answer(str(body.get("message", "")))
        data = json.dumps({"output": text}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1", help="interface (0.0.0.0 in a container)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--port-file")
    args = parser.parse_args()
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    if args.port_file:
        Path(args.port_file).write_text(str(server.server_port))
    try:
        server.serve_forever()
    finally:
        provider.shutdown()


if __name__ == "__main__":
    main()
