"""Export a run's scores to Langfuse through its public ingestion API (``POST /api/public/ingestion``).

Why the HTTP API and not the ``langfuse`` SDK: the ingestion endpoint takes traces and scores in one
batched JSON request with HTTP Basic auth (public key : secret key), which ``httpx`` (already a
dependency) sends; the SDK would add OpenTelemetry and its exporters to every install for one request.
So the export needs no extra package.

What is sent (``build_events``), all ids derived from the run id so a re-export updates instead of
duplicating (uuid5):

* one trace per case (``name``: the case id, ``sessionId``: the run id, input and output text cut to
  ``TEXT_LIMIT`` characters, metadata: suite, category, risk level, status, dataset line), with one
  NUMERIC score per metric that produced a value, named after the metric — or as a dialect's framework
  logged it (``evalgate.dialect.export_name``, e.g. ``quality_answer_quality``) — plus ``case_passed``
  (1/0);
* one trace for the run (``name``: ``evalgate run <run id>``, same session) with the scores
  ``pass_rate``, ``weighted_pass_rate``, ``gate_passed`` (1/0) and each metric's average.

The keys travel only in the ``Authorization`` header and are registered as secrets; nothing else
carries them (error messages are redacted). A reply other than 2xx, or a 207 listing per-event errors,
is a ``LangfuseError``: the CLI prints it as a warning and the verdict stands.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from evalgate.config.sections import PublishSettings
from evalgate.dialect import export_name
from evalgate.errors import UserError
from evalgate.model import STATUS_TEXT, CaseResult
from evalgate.safety.redact import redact
from evalgate.store.reader import read_case, recorded
from evalgate.store.results_json import StreamedDocument

INGESTION_PATH = "/api/public/ingestion"
TEXT_LIMIT = 4000
BATCH_BYTES = 3_000_000
"""Events per request are kept under this many bytes of JSON (Langfuse accepts up to 3.5 MB a batch)."""
NAMESPACE = uuid.UUID("5b0c8f7e-2f8c-4c47-9a64-0e5a3c6b1d21")
TIMEOUT_SECONDS = 30.0


class LangfuseError(Exception):
    """The export did not go through (the message is safe to print)."""


def require_keys(settings: PublishSettings, where: str) -> None:
    """``UserError`` (exit 2, before the run) when the export is on but a key is missing."""
    if settings.langfuse and not (settings.langfuse_public_key and settings.langfuse_secret_key):
        raise UserError("the Langfuse export needs LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY", where=where)


def score_name(metric: str) -> str:
    """The Langfuse score name of ``metric`` (the name a dialect's framework logged it under, if any)."""
    return export_name(metric)


def _id(*parts: Any) -> str:
    return str(uuid.uuid5(NAMESPACE, "/".join(str(p) for p in parts)))


def _clip(text: Any) -> str | None:
    if not isinstance(text, str):
        return None
    return redact(text if len(text) <= TEXT_LIMIT else text[: TEXT_LIMIT - 1] + "…")


def _event(kind: str, body: dict[str, Any], timestamp: str, *key: Any) -> dict[str, Any]:
    return {"id": _id("event", kind, *key), "timestamp": timestamp, "type": kind, "body": body}


def _score(trace_id: str, name: str, value: float, timestamp: str, comment: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"id": _id("score", trace_id, name), "traceId": trace_id, "name": name,
                            "value": float(value), "dataType": "NUMERIC"}
    if comment:
        body["comment"] = redact(comment)[:500]
    return _event("score-create", body, timestamp, trace_id, name)


def build_events(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ingestion events for a results document (with its ``results``): traces, then their scores."""
    return list(iter_events(document, document.get("results") or []))


def iter_events(head: Mapping[str, Any], records: Iterable[Any]) -> Iterator[dict[str, Any]]:
    """``build_events`` for a document's fields (``head``, read before the records) and its case records
    streamed one at a time, each read through its type (``store.reader.read_case``; what is not a case record
    is not exported): each case's trace and scores as its record arrives, the run's trace last. Memory: one
    record's events."""
    run_id = str(head.get("run_id"))
    timestamp = str(head.get("timestamp"))
    for position, record in enumerate(records):
        case = read_case(record, position)
        if case is not None:
            yield from _case_events(case, run_id, timestamp)
    events: list[dict[str, Any]] = []
    run_trace = _id("run", run_id)
    summary = head.get("summary") or {}
    gate = head.get("gate") or {}
    events.append(_event("trace-create", {
        "id": run_trace, "timestamp": timestamp, "name": f"evalgate run {run_id}", "sessionId": run_id,
        "tags": ["evalgate", "run"],
        "metadata": {"run_id": run_id, "status": head.get("status"), "gate": gate,
                     "total_test_cases": summary.get("total_test_cases")},
    }, timestamp, run_trace))
    for name in ("pass_rate", "weighted_pass_rate"):
        if isinstance(summary.get(name), int | float):
            events.append(_score(run_trace, name, summary[name], timestamp))
    events.append(_score(run_trace, "gate_passed", 1.0 if gate.get("passed") else 0.0, timestamp,
                         "; ".join(gate.get("reasons") or []) or None))
    for metric, row in sorted((head.get("metrics") or {}).items()):
        average = row.get("average") if isinstance(row, Mapping) else None
        if isinstance(average, int | float):
            events.append(_score(run_trace, score_name(metric), average, timestamp))
    yield from events


def _case_events(case: CaseResult, run_id: str, timestamp: str) -> list[dict[str, Any]]:
    """A case's trace, one score per metric that produced a value, and ``case_passed``."""
    trace_id = _id("case", run_id, case.id, case.repeat)
    name = case.id + (f" #r{case.repeat}" if case.repeat else "")
    events = [_event("trace-create", {
        "id": trace_id, "timestamp": timestamp, "name": name, "sessionId": run_id,
        "input": _clip(case.input), "output": _clip(case.output),
        "tags": [t for t in ("evalgate", case.suite, case.category) if t],
        "metadata": {"suite": case.suite, "category": case.category, "risk_level": recorded(case, "risk_level"),
                     "status": STATUS_TEXT[case.status], "source": recorded(case, "source"), "run_id": run_id},
    }, timestamp, trace_id)]
    for metric, result in case.metrics.items():
        if STATUS_TEXT[result.status] in ("passed", "failed", "advisory") and result.value is not None:
            events.append(_score(trace_id, score_name(metric), result.value, timestamp, result.reason))
    events.append(_score(trace_id, "case_passed", 1.0 if case.passed else 0.0, timestamp,
                         "; ".join(case.reasons) or None))
    return events


def batches(events: Iterable[dict[str, Any]], limit: int | None = None) -> Iterator[list[dict[str, Any]]]:
    """``events`` in consecutive groups whose JSON stays under ``limit`` bytes (``BATCH_BYTES`` by default;
    one event per group at least)."""
    limit = BATCH_BYTES if limit is None else limit
    group: list[dict[str, Any]] = []
    size = 0
    for event in events:
        length = len(json.dumps(event, ensure_ascii=False).encode("utf-8")) + 1
        if group and size + length > limit:
            yield group
            group, size = [], 0
        group.append(event)
        size += length
    if group:
        yield group


def send(events: Iterable[dict[str, Any]], *, host: str, public_key: str, secret_key: str,
         transport: Any = None) -> dict[str, int]:
    """POST ``events`` (consumed one batch at a time) to ``host``'s ingestion endpoint in batches; returns
    counts of events accepted."""
    import httpx  # lazy: httpx (~0.2 s) only when something is sent

    url = host.rstrip("/") + INGESTION_PATH
    accepted = 0
    try:
        with httpx.Client(auth=(public_key, secret_key), timeout=TIMEOUT_SECONDS, transport=transport) as client:
            for group in batches(events):
                response = client.post(url, json={"batch": group})
                if response.status_code >= 300 and response.status_code != 207:
                    raise LangfuseError(redact(f"{url} answered HTTP {response.status_code}: "
                                               f"{response.text[:200].strip()}"))
                errors = _errors_of(response)
                if errors:
                    first = errors[0]
                    raise LangfuseError(redact(f"{len(errors)} of {len(group)} events rejected by {url}; first: "
                                               f"{first.get('status')} {first.get('message') or first.get('error')}"))
                accepted += len(group)
    except httpx.HTTPError as exc:
        raise LangfuseError(redact(f"cannot reach {url}: {type(exc).__name__}: {exc}")) from None
    return {"events": accepted}


def _errors_of(response: Any) -> list[dict[str, Any]]:
    try:
        data = response.json()
    except ValueError:
        return []
    errors = data.get("errors") if isinstance(data, dict) else None
    return [e for e in errors if isinstance(e, dict)] if isinstance(errors, list) else []


def export_results(results_path: Path, settings: PublishSettings, transport: Any = None) -> str:
    """Export the run in ``results_path`` with ``settings`` (host, keys); returns a one-line summary."""
    if not settings.langfuse_public_key or not settings.langfuse_secret_key:
        raise LangfuseError("LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY must be set")

    stream = StreamedDocument(Path(results_path))
    try:
        head = stream.read_head()  # every field before the records: memory flat in the number of cases
    except (OSError, ValueError, RecursionError) as exc:
        raise LangfuseError(redact(f"cannot read {results_path}: {exc}")) from None
    kinds: Counter[str] = Counter()

    def counted(events: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for event in events:
            kinds[event["type"]] += 1
            yield event

    counts = send(counted(iter_events(head, stream.records())), host=settings.langfuse_host,
                  public_key=settings.langfuse_public_key, secret_key=settings.langfuse_secret_key,
                  transport=transport)
    return (f"exported {kinds['trace-create']} traces and {kinds['score-create']} scores ({counts['events']} events) "
            f"to {settings.langfuse_host}, session {head.get('run_id')}")
