"""The span model and the two OTLP encodings evalgate reads.

A ``Span`` keeps what the trajectory metrics and reports need: ids (lower-case hex), name, kind, start
and end (Unix nanoseconds), status (0 unset, 1 ok, 2 error) and its message, and the attributes as plain
Python values (OTLP ``AnyValue``: strings, ints, floats, bools, lists, mappings; bytes as hex).

* ``parse_json(body)``: OTLP/JSON (``ExportTraceServiceRequest`` as the OTLP/HTTP JSON encoding writes
  it: hex trace/span ids, 64-bit integers as strings, enums as numbers or names), one object or JSON
  lines of them (the OpenTelemetry Collector's file exporter).
* ``parse_protobuf(body)``: OTLP/protobuf, decoded with ``opentelemetry-proto`` (the protobuf classes
  the OpenTelemetry project publishes).

Only the attributes evalgate reads are kept (``READ_PREFIXES``): HTTP, database and other instrumentation
attributes, and the prompts instrumentations record (``gen_ai.input.messages``, ``llm.input_messages.*``;
``input.value`` except on OpenInference TOOL spans, where it holds the arguments), are skipped while
decoding, so a buffered span costs only what it tells us.

Both raise ``SpanDecodeError`` with one line saying what is wrong.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

STATUS_UNSET, STATUS_OK, STATUS_ERROR = 0, 1, 2
_STATUS_NAMES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
_KIND_NAMES = {0: "unspecified", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}
MAX_DEPTH = 16
"""Nesting of attribute values read (deeper values are dropped): a hostile body cannot recurse us."""


READ_PREFIXES = ("gen_ai.operation.name", "gen_ai.agent.", "gen_ai.tool.", "gen_ai.request.model",
                 "gen_ai.response.model", "gen_ai.provider.name", "gen_ai.system", "gen_ai.usage.",
                 "gen_ai.output.messages", "llm.model_name", "llm.provider", "llm.system", "llm.token_count.",
                 "llm.output_messages.", "openinference.span.kind", "tool.", "agent.", "input.value", "error.type")
"""Attribute keys (prefixes) read by ``summary``; ``gen_ai.system`` also admits ``gen_ai.system_instructions``,
dropped by ``_kept``."""
_DROPPED = frozenset({"gen_ai.system_instructions"})


def _kept(attributes: dict[str, Any]) -> dict[str, Any]:
    """``attributes`` without what the filter let through but nothing reads: the system instructions, and
    ``input.value`` (a whole prompt on LLM spans) except on OpenInference TOOL spans."""
    for key in _DROPPED & attributes.keys():
        del attributes[key]
    if "input.value" in attributes and attributes.get("openinference.span.kind") != "TOOL":
        del attributes["input.value"]
    return attributes


class SpanDecodeError(ValueError):
    """The body is not an OTLP trace export in the encoding its Content-Type says."""


@dataclass(slots=True)
class Span:
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    kind: str = "internal"
    start_ns: int = 0
    end_ns: int = 0
    status: int = STATUS_UNSET
    status_message: str = ""
    attributes: dict[str, Any] = field(default_factory=dict)
    service: str | None = None
    exception: str | None = None
    """The message of the span's first ``exception`` event (type: message), when it recorded one."""

    @property
    def duration_ms(self) -> float:
        """(end − start) / 10⁶, 0 when either is missing or end precedes start."""
        if not self.start_ns or not self.end_ns or self.end_ns < self.start_ns:
            return 0.0
        return (self.end_ns - self.start_ns) / 1e6

    @property
    def failed(self) -> bool:
        return self.status == STATUS_ERROR


# ------------------------------------------------------------------------------------------ OTLP/JSON


def _int(value: Any) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return 0


def _hex_id(value: Any, size: int) -> str:
    """An OTLP/JSON id: hex (the spec's encoding); base64 (protobuf's JSON mapping, some exporters) is
    accepted too when it decodes to ``size`` bytes."""
    if not isinstance(value, str) or not value:
        return ""
    text = value.strip().lower()
    if len(text) == 2 * size and all(c in "0123456789abcdef" for c in text):
        return text

    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return ""
    return raw.hex() if len(raw) == size else ""


def _json_value(value: Any, depth: int = 0) -> Any:
    """An OTLP ``AnyValue`` (JSON encoding) as a Python value."""
    if not isinstance(value, Mapping) or depth > MAX_DEPTH:
        return None
    if "stringValue" in value:
        return str(value["stringValue"])
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "intValue" in value:
        return _int(value["intValue"])
    if "doubleValue" in value:
        try:
            return float(value["doubleValue"])
        except (TypeError, ValueError):
            return None
    if "arrayValue" in value:
        items = (value["arrayValue"] or {}).get("values") or []
        return [_json_value(item, depth + 1) for item in items if isinstance(item, Mapping)]
    if "kvlistValue" in value:
        return _json_attributes((value["kvlistValue"] or {}).get("values") or [], depth + 1)
    if "bytesValue" in value:
        return str(value["bytesValue"])
    return None


def _json_attributes(items: Any, depth: int = 0, keep: tuple[str, ...] | None = None) -> dict[str, Any]:
    """``[{"key", "value"}, …]`` as a mapping; with ``keep``, only keys starting with one of its prefixes."""
    if not isinstance(items, list):
        return {}
    result: dict[str, Any] = {}
    for item in items:
        if isinstance(item, Mapping) and isinstance(key := item.get("key"), str) and (
                keep is None or key.startswith(keep)):
            result[key] = _json_value(item.get("value"), depth)
    return result


def _json_status(status: Any) -> tuple[int, str]:
    if not isinstance(status, Mapping):
        return STATUS_UNSET, ""
    code = status.get("code", 0)
    number = _STATUS_NAMES.get(code, 0) if isinstance(code, str) else _int(code)
    return (number if number in (0, 1, 2) else 0), str(status.get("message") or "")


def _json_kind(kind: Any) -> str:
    if isinstance(kind, str):
        return kind.removeprefix("SPAN_KIND_").lower() or "unspecified"
    return _KIND_NAMES.get(_int(kind), "unspecified")


def _exception_of(events: Iterable[tuple[str, Mapping[str, Any]]]) -> str | None:
    for name, attributes in events:
        if name == "exception":
            kind = attributes.get("exception.type")
            message = attributes.get("exception.message")
            text = ": ".join(str(part) for part in (kind, message) if part)
            return text or "exception"
    return None


def spans_from_json_request(data: Any) -> Iterator[Span]:
    """The spans of one decoded OTLP/JSON ``ExportTraceServiceRequest``."""
    if not isinstance(data, Mapping):
        raise SpanDecodeError("an OTLP/JSON trace export is an object with 'resourceSpans'")
    resource_spans = data.get("resourceSpans", data.get("resource_spans"))
    if not isinstance(resource_spans, list):
        raise SpanDecodeError("an OTLP/JSON trace export is an object with 'resourceSpans'")
    for block in resource_spans:
        if not isinstance(block, Mapping):
            continue
        resource = _json_attributes((block.get("resource") or {}).get("attributes"))
        service = resource.get("service.name")
        for scope in block.get("scopeSpans", block.get("scope_spans")) or []:
            if not isinstance(scope, Mapping):
                continue
            for raw in scope.get("spans") or []:
                if not isinstance(raw, Mapping):
                    continue
                trace_id = _hex_id(raw.get("traceId", raw.get("trace_id")), 16)
                span_id = _hex_id(raw.get("spanId", raw.get("span_id")), 8)
                if not trace_id or not span_id:
                    continue
                status, message = _json_status(raw.get("status"))
                events = [(str(e.get("name") or ""), _json_attributes(e.get("attributes")))
                          for e in raw.get("events") or [] if isinstance(e, Mapping)]
                yield Span(trace_id=trace_id, span_id=span_id,
                           parent_id=_hex_id(raw.get("parentSpanId", raw.get("parent_span_id")), 8),
                           name=str(raw.get("name") or ""), kind=_json_kind(raw.get("kind", 0)),
                           start_ns=_int(raw.get("startTimeUnixNano", raw.get("start_time_unix_nano"))),
                           end_ns=_int(raw.get("endTimeUnixNano", raw.get("end_time_unix_nano"))),
                           status=status, status_message=message,
                           attributes=_kept(_json_attributes(raw.get("attributes"), keep=READ_PREFIXES)),
                           service=str(service) if service is not None else None, exception=_exception_of(events))


def parse_json(body: bytes | str) -> list[Span]:
    """Spans of an OTLP/JSON body: one export request, or JSON lines of them."""
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    try:
        documents = [json.loads(text)]
    except json.JSONDecodeError:
        documents = []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    documents.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise SpanDecodeError(f"not OTLP/JSON: line {number}: {exc.msg} at column {exc.colno}") from None
    except RecursionError:
        raise SpanDecodeError("not OTLP/JSON: nested too deeply") from None
    spans: list[Span] = []
    for document in documents:
        spans.extend(spans_from_json_request(document))
    return spans


# -------------------------------------------------------------------------------------- OTLP/protobuf


def _proto_value(value: Any, depth: int = 0) -> Any:
    if depth > MAX_DEPTH:
        return None
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [_proto_value(item, depth + 1) for item in value.array_value.values]
    if which == "kvlist_value":
        return _proto_attributes(value.kvlist_value.values, depth + 1)
    if which == "bytes_value":
        return bytes(value.bytes_value).hex()
    return getattr(value, which)


_SCALARS = frozenset({"string_value", "int_value", "bool_value", "double_value"})


def _proto_attributes(items: Any, depth: int = 0, keep: tuple[str, ...] | None = None) -> dict[str, Any]:
    """``KeyValue`` items as a mapping; with ``keep``, only keys starting with one of its prefixes."""
    result: dict[str, Any] = {}
    for item in items:
        key = item.key
        if keep is not None and not key.startswith(keep):
            continue
        value = item.value
        which = value.WhichOneof("value")
        result[key] = getattr(value, which) if which in _SCALARS else _proto_value(value, depth)
    return result


def parse_protobuf(body: bytes) -> list[Span]:
    """Spans of an OTLP/protobuf ``ExportTraceServiceRequest``."""
    from google.protobuf.message import DecodeError  # lazy: protobuf (~60 ms) only when traces are received
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest  # lazy: protobuf

    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except (DecodeError, RecursionError) as exc:
        raise SpanDecodeError(f"not OTLP/protobuf: {exc}") from None
    spans: list[Span] = []
    for block in request.resource_spans:
        service = next((_proto_value(a.value) for a in block.resource.attributes if a.key == "service.name"), None)
        for scope in block.scope_spans:
            for raw in scope.spans:
                if len(raw.trace_id) != 16 or len(raw.span_id) != 8:
                    continue
                events = [(e.name, _proto_attributes(e.attributes)) for e in raw.events if e.name == "exception"]
                spans.append(Span(
                    trace_id=raw.trace_id.hex(), span_id=raw.span_id.hex(),
                    parent_id=raw.parent_span_id.hex() if len(raw.parent_span_id) == 8 else "",
                    name=raw.name, kind=_KIND_NAMES.get(raw.kind, "unspecified"),
                    start_ns=raw.start_time_unix_nano, end_ns=raw.end_time_unix_nano,
                    status=raw.status.code if raw.status.code in (0, 1, 2) else 0,
                    status_message=raw.status.message, attributes=_kept(_proto_attributes(raw.attributes, keep=READ_PREFIXES)),
                    service=str(service) if service is not None else None, exception=_exception_of(events)))
    return spans
