"""The run's OTLP/HTTP trace receiver and the per-case span collector.

``POST /v1/traces`` takes OTLP/protobuf (``application/x-protobuf``) and OTLP/JSON (``application/json``),
optionally gzip-compressed, and answers as OTLP/HTTP says (an empty ``ExportTraceServiceResponse`` in the
request's encoding; 400 for a body that does not decode, 413 over ``max_request_bytes`` — compressed or
not —, 415 for another Content-Type). It listens on ``traces_host`` (default 127.0.0.1: loopback) and
``traces_port`` (default 4318, OTLP/HTTP's usual port, so an exporter's default endpoint finds it).

The ``Collector`` keeps spans only for the trace ids the run handed out (``CaseTrace.new_call``) and only
until their case is finished (``release``): spans of other traces are counted and dropped, a case keeps
at most ``max_spans_per_case`` spans (the rest are counted), so memory stays flat in the number of cases.
Dropped spans are told apart: ``late_spans`` carry the trace id of a case already released (they came after
its grace time; the last ``REMEMBERED_TRACES`` released trace ids are remembered), ``failed_attempt_spans``
belong to an attempt that failed and was retried with a fresh trace id, the rest (``ignored_spans`` minus
``late_spans``) carry a trace id evalgate never sent (an agent that did not continue the ``traceparent``).

Waiting for batching exporters (``settle``): after the target answered, the case waits until each of its
calls' traces has a top-level span (one whose parent is the span id evalgate sent, or none: the agent's
request handler, which ends last and so is exported last), at most ``grace`` seconds. A call whose trace
shows no such span by then is scored with what arrived.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
import zlib
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalgate.errors import UserError
from evalgate.model import counters
from evalgate.traces.context import CaseTrace
from evalgate.traces.spans import Span, SpanDecodeError, parse_json, parse_protobuf

PATH = "/v1/traces"
DEFAULT_PORT = 4318
DEFAULT_MAX_REQUEST_BYTES = 8 * 1024 * 1024
DEFAULT_MAX_SPANS_PER_CASE = 2_000
PROTOBUF = "application/x-protobuf"
JSON = "application/json"
REMEMBERED_TRACES = 50_000
"""Released trace ids remembered to tell a late span from a foreign one (≈ 100 bytes each)."""


@dataclass(slots=True)
class _Call:
    parent_span_id: str
    spans: list[Span] = field(default_factory=list)
    top_seen: bool = False
    dropped: int = 0
    failed: bool = False
    """The attempt failed (a retry followed): its spans are counted, never kept."""
    failed_spans: int = 0


@dataclass(slots=True)
class CollectorStats:
    """The receiver's counters: ``metadata.traces`` of results.json after its ``endpoint``, in field order, the
    seconds rounded to 4 decimals."""

    requests: int = 0
    """``POST /v1/traces`` requests received (each an export batch of any number of spans)."""
    spans: int = 0
    """Spans kept for a case of this run."""
    ignored_spans: int = 0
    """Spans of trace ids that are not this run's (an agent that did not continue the ``traceparent``), or
    whose case was already scored (``late_spans``)."""
    late_spans: int = 0
    """Of ``ignored_spans``: spans of a case already released (they arrived after its grace time)."""
    failed_attempt_spans: int = 0
    """Spans of target-call attempts that failed and were retried (never scored)."""
    dropped_spans: int = 0
    """Spans over a case's cap."""
    rejected_requests: int = 0
    """Requests answered 400, 413 or 415 (their spans are not counted), and ``EVALGATE_TRACE_FILE`` files too
    large or not OTLP/JSON."""
    seconds: float = 0.0
    """Seconds spent decoding and sorting spans (the receiver's cost on the run's event loop)."""
    summary_seconds: float = 0.0
    """Seconds spent summarising the cases' spans (``traces.summary``), also on the event loop."""

    def as_dict(self) -> dict[str, Any]:
        return counters(self, 4)


class Collector:
    """Spans by trace id, for the run's open cases only (see the module docstring)."""

    def __init__(self, *, max_spans_per_case: int = DEFAULT_MAX_SPANS_PER_CASE, spool: Path | None = None) -> None:
        self.max_spans = max_spans_per_case
        self.spool = spool
        self.stats = CollectorStats()
        self._calls: dict[str, _Call] = {}
        self._released: OrderedDict[str, None] = OrderedDict()
        self._changed: asyncio.Event | None = None

    @property
    def open_traces(self) -> int:
        return len(self._calls)

    def open_case(self) -> CaseTrace:
        return CaseTrace(self._register, self.spool, self._discard)

    def _register(self, trace_id: str, parent_span_id: str) -> None:
        self._calls[trace_id] = _Call(parent_span_id)

    def _discard(self, trace_id: str) -> None:
        """The attempt of ``trace_id`` failed: its spans so far (and any arriving later) are counted, not kept."""
        call = self._calls.get(trace_id)
        if call is None or call.failed:
            return
        call.failed = True
        count = len(call.spans)
        call.failed_spans += count
        self.stats.failed_attempt_spans += count
        self.stats.spans -= count
        call.spans = []

    def add(self, spans: list[Span]) -> None:
        """Keep the spans of open traces (up to the per-case cap); count the rest."""
        kept = False
        for span in spans:
            call = self._calls.get(span.trace_id)
            if call is None:
                self.stats.ignored_spans += 1
                if span.trace_id in self._released:
                    self.stats.late_spans += 1
                continue
            if call.failed:
                call.failed_spans += 1
                self.stats.failed_attempt_spans += 1
                continue
            if len(call.spans) >= self.max_spans:
                call.dropped += 1
                self.stats.dropped_spans += 1
                continue
            call.spans.append(span)
            self.stats.spans += 1
            kept = True
            if not span.parent_id or span.parent_id == call.parent_span_id:
                call.top_seen = True
        if kept and self._changed is not None:
            self._changed.set()

    def ingest_file(self, path: Path, max_bytes: int) -> None:
        """Spans a program wrote to its ``EVALGATE_TRACE_FILE`` (OTLP/JSON), then the file is removed."""
        try:
            if not path.is_file():
                return
            if path.stat().st_size > max_bytes:
                self.stats.rejected_requests += 1
                return
            body = path.read_bytes()
        except OSError:
            return
        finally:
            with contextlib.suppress(OSError):
                path.unlink()
        try:
            self.add(parse_json(body))
        except SpanDecodeError:
            self.stats.rejected_requests += 1

    def ready(self, scope: CaseTrace) -> bool:
        return all((call := self._calls.get(trace_id)) is None or call.top_seen for trace_id, _ in scope.calls)

    async def settle(self, scope: CaseTrace, grace: float) -> None:
        """Wait until every call of ``scope`` has its top-level span, at most ``grace`` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        while not self.ready(scope):
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            if self._changed is None:
                self._changed = asyncio.Event()
            changed = self._changed
            changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), timeout=min(remaining, 0.25))

    def release(self, scope: CaseTrace) -> tuple[list[Span], int]:
        """The case's spans and the number dropped over the cap; the case's traces are forgotten (later
        spans of them are ignored)."""
        spans: list[Span] = []
        dropped = 0
        for trace_id, _ in scope.calls:
            call = self._calls.pop(trace_id, None)
            self._remember(trace_id)
            if call is not None:
                spans.extend(call.spans)
                dropped += call.dropped
        for trace_id in scope.failed:
            call = self._calls.pop(trace_id, None)
            if call is not None:
                scope.failed_spans += call.failed_spans
        return spans, dropped

    def _remember(self, trace_id: str) -> None:
        released = self._released
        released[trace_id] = None
        if len(released) > REMEMBERED_TRACES:
            released.popitem(last=False)

    def why_no_spans(self, grace: float, endpoint: str | None = None) -> tuple[str, str]:
        """(cause, one line) for a case that received no span, from what the receiver saw so far:
        ``no_export`` — no span reached the receiver at all; ``untraced`` — spans arrived, but none carried
        a trace id evalgate sent (the agent did not continue the ``traceparent``), with their count;
        ``late`` — spans do arrive, but this case's not within ``grace`` seconds."""
        stats = self.stats
        foreign = stats.ignored_spans - stats.late_spans
        received = stats.spans + stats.ignored_spans + stats.dropped_spans + stats.failed_attempt_spans
        if not received:
            where = f" at {endpoint}" if endpoint else ""
            how = (f"{stats.rejected_requests} export request(s) were rejected" if stats.rejected_requests
                   else "nothing was exported to it")
            return "no_export", (f"no span was exported: the receiver{where} got none during the run so far "
                                 f"({how}; waited traces_grace_seconds={grace:g}); is the agent's "
                                 "OTEL_EXPORTER_OTLP_ENDPOINT pointing there?")
        if foreign:
            return "untraced", (f"{foreign:,} span(s) arrived without a trace id evalgate sent, none with this "
                                "case's: the agent does not continue the traceparent header (W3C trace context) "
                                "of the request")
        late = (f"; {stats.late_spans:,} span(s) of earlier cases arrived after their case was scored"
                if stats.late_spans else "")
        return "late", (f"no span of this case arrived within traces_grace_seconds={grace:g}{late}: the agent's "
                        "exporter sends later (raise traces_grace_seconds or shorten its batch delay)")


def decode(body: bytes, content_type: str, content_encoding: str, max_bytes: int) -> list[Span]:
    """The spans of one OTLP/HTTP request body; ``SpanDecodeError`` (400), ``TooLarge`` (413) or
    ``Unsupported`` (415)."""
    encoding = content_encoding.strip().lower()
    if encoding == "gzip":
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            body = inflater.decompress(body, max_bytes + 1)
        except zlib.error as exc:
            raise SpanDecodeError(f"invalid gzip body: {exc}") from None
        if len(body) > max_bytes or inflater.unconsumed_tail:
            raise TooLarge(f"the decompressed body is larger than {max_bytes:,} bytes")
    elif encoding not in ("", "identity"):
        raise Unsupported(f"Content-Encoding {encoding!r} is not supported (gzip or none)")
    kind = content_type.split(";", 1)[0].strip().lower()
    if kind in (PROTOBUF, "application/protobuf"):
        return parse_protobuf(body)
    if kind == JSON:
        return parse_json(body)
    raise Unsupported(f"Content-Type {kind or '(none)'!r}: send {PROTOBUF} or {JSON}")


class TooLarge(ValueError):
    pass


class Unsupported(ValueError):
    pass


class Receiver:
    """The aiohttp server of ``POST /v1/traces`` on the run's event loop (see the module docstring)."""

    def __init__(self, collector: Collector, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
                 max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> None:
        self.collector = collector
        self.host = host
        self.port = port
        self.max_request_bytes = max_request_bytes
        self._runner: Any = None

    @property
    def endpoint(self) -> str:
        """The base URL an exporter is given (``OTEL_EXPORTER_OTLP_ENDPOINT``), e.g. http://127.0.0.1:4318."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        # the protobuf classes are imported now, not by the first export (≈ 60 ms that would hold the loop)
        import opentelemetry.proto.collector.trace.v1.trace_service_pb2  # noqa: F401  # lazy: protobuf, only when traces are received
        from aiohttp import web  # lazy: aiohttp (~0.1 s) only when traces are received

        app = web.Application(client_max_size=self.max_request_bytes)
        app.router.add_post(PATH, self._handle)
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        try:
            sock = socket.create_server((self.host, self.port), family=family, reuse_port=False)
        except OSError as exc:
            raise UserError(f"cannot listen for traces on {self.host}:{self.port}: {exc.strerror or exc} "
                            "(choose another traces_port, or 0 for any free port)", where="traces_port") from None
        self.port = sock.getsockname()[1]
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        await web.SockSite(runner, sock).start()
        self._runner = runner

    async def _handle(self, request: Any) -> Any:
        from aiohttp import web  # lazy: aiohttp (~0.1 s) only when traces are received

        stats = self.collector.stats
        stats.requests += 1
        if request.content_length is not None and request.content_length > self.max_request_bytes:
            stats.rejected_requests += 1
            return web.Response(status=413, text=f"body larger than {self.max_request_bytes:,} bytes")
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            stats.rejected_requests += 1
            return web.Response(status=413, text=f"body larger than {self.max_request_bytes:,} bytes")
        started = time.perf_counter()
        content_type = request.headers.get("Content-Type", "")
        try:
            spans = decode(body, content_type, request.headers.get("Content-Encoding", ""), self.max_request_bytes)
        except (SpanDecodeError, TooLarge, Unsupported) as exc:
            stats.rejected_requests += 1
            status = 413 if isinstance(exc, TooLarge) else 415 if isinstance(exc, Unsupported) else 400
            stats.seconds += time.perf_counter() - started
            return web.Response(status=status, text=str(exc))
        self.collector.add(spans)
        stats.seconds += time.perf_counter() - started
        if content_type.split(";", 1)[0].strip().lower() in (PROTOBUF, "application/protobuf"):
            return web.Response(body=b"", content_type=PROTOBUF)
        return web.Response(text="{}", content_type=JSON)

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            with contextlib.suppress(Exception):
                await runner.cleanup()
