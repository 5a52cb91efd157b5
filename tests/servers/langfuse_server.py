"""Loopback Langfuse ingestion endpoint: ``POST /api/public/ingestion`` with HTTP Basic auth.

It checks what Langfuse's public API documents and a client must get right: Basic auth with the public key
as user and the secret key as password (else 401), a JSON body ``{"batch": [event, ...]}`` whose events have
``id``, ``timestamp``, ``type`` and ``body`` (else 400), and answers 207 with ``successes`` / ``errors``
per event the way Langfuse does. Event types other than trace-create and score-create, a score without
``traceId``, ``name`` or a numeric ``value``, or a batch over 3.5 MB are reported as per-event errors.

``srv.events(kind)`` returns the accepted event bodies; ``srv.traces()`` / ``srv.scores()`` shortcut them.
"""

from __future__ import annotations

import base64
from typing import Any

from tests.servers._http import LoopbackServer, Outcome, Request, json_response

INGESTION_PATH = "/api/public/ingestion"
MAX_BATCH_BYTES = 3_500_000
KNOWN_TYPES = frozenset({"trace-create", "score-create"})


class LangfuseServer(LoopbackServer):
    name = "langfuse"

    def __init__(self, public_key: str, secret_key: str, *, fail_events: bool = False, **options: Any) -> None:
        super().__init__(**options)
        self.public_key = public_key
        self.secret_key = secret_key
        self.fail_events = fail_events
        self.accepted: list[dict[str, Any]] = []
        self.add_route("ingestion", [INGESTION_PATH], {"POST"}, self._ingest)

    def on_reset(self) -> None:
        super().on_reset()
        self.accepted.clear()

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.accepted if kind is None or e["type"] == kind]

    def traces(self) -> list[dict[str, Any]]:
        return [e["body"] for e in self.events("trace-create")]

    def scores(self) -> list[dict[str, Any]]:
        return [e["body"] for e in self.events("score-create")]

    def _authorised(self, request: Request) -> bool:
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            user, _, password = base64.b64decode(token).decode("utf-8").partition(":")
        except ValueError:
            return False
        return (user, password) == (self.public_key, self.secret_key)

    async def _ingest(self, request: Request) -> Outcome:
        if not self._authorised(request):
            return json_response({"message": "Invalid credentials"}, 401)
        if len(request.body) > MAX_BATCH_BYTES:
            return json_response({"message": "Batch too large"}, 413)
        try:
            payload = request.json()
        except ValueError:
            return json_response({"message": "Invalid JSON"}, 400)
        batch = payload.get("batch") if isinstance(payload, dict) else None
        if not isinstance(batch, list):
            return json_response({"message": "'batch' must be a list"}, 400)
        successes, errors = [], []
        for event in batch:
            problem = _problem(event)
            if problem is None and self.fail_events:
                problem = "rejected by the test"
            event_id = event.get("id") if isinstance(event, dict) else None
            if problem is None:
                self.accepted.append(event)
                successes.append({"id": event_id, "status": 201})
            else:
                errors.append({"id": event_id, "status": 400, "message": problem})
        return json_response({"successes": successes, "errors": errors}, 207)


def _problem(event: Any) -> str | None:
    if not isinstance(event, dict) or not all(k in event for k in ("id", "timestamp", "type", "body")):
        return "an event needs id, timestamp, type and body"
    if event["type"] not in KNOWN_TYPES:
        return f"unexpected event type {event['type']!r}"
    body = event["body"]
    if not isinstance(body, dict) or not isinstance(body.get("id"), str):
        return "body.id must be a string"
    if event["type"] == "score-create":
        if not isinstance(body.get("traceId"), str) or not isinstance(body.get("name"), str):
            return "a score needs traceId and name"
        if isinstance(body.get("value"), bool) or not isinstance(body.get("value"), int | float):
            return "a NUMERIC score needs a number value"
        if body.get("dataType", "NUMERIC") != "NUMERIC":
            return "dataType must be NUMERIC here"
    return None
