"""The loopback OpenAI server with the Files and Batch endpoints, as OpenAI documents them.

* ``POST /v1/files`` (multipart: ``purpose``, ``file``) → a File object ``{"id": "file-…", "object": "file",
  "bytes", "created_at", "filename", "purpose"}``; ``GET /v1/files/{id}`` → the File object;
  ``GET /v1/files/{id}/content`` → the file's bytes;
* ``POST /v1/batches`` (``input_file_id``, ``endpoint``, ``completion_window``, ``metadata``) → a Batch object
  (``status: validating``); ``GET /v1/batches/{id}`` → the Batch, which moves ``validating`` →
  ``in_progress`` → ``finalizing`` → ``completed`` one step per retrieve (``steps``, or never with
  ``hold=True``); ``POST /v1/batches/{id}/cancel`` → ``cancelling`` then ``cancelled``.

A completed batch answers each input line ``{"custom_id", "method", "url", "body"}`` as the chat endpoint
would (the same rules, judge and usage estimate): ``{"id": "batch_req_…", "custom_id", "response":
{"status_code", "request_id", "body"}, "error": null}`` in the output file; a line a rule answers with an
HTTP error goes to the error file with that ``status_code`` and OpenAI's error body. ``request_counts``
counts them. ``batch_requests()`` lists the bodies of every batched line (for assertions), and
``/_stats`` counts the batch endpoints under their paths like any route.
"""

from __future__ import annotations

import email.parser
import email.policy
import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any

from tests.servers._http import Outcome, Request, Response, json_response
from tests.servers.openai_server import (
    OpenAIServer,
    completion_body,
    match_text,
    openai_error,
    prompt_text,
    usage_block,
)

STATUS_STEPS = ("validating", "in_progress", "finalizing", "completed")


@dataclass
class StoredFile:
    id: str
    filename: str
    purpose: str
    content: bytes
    created_at: int = field(default_factory=lambda: int(time.time()))

    def public(self) -> dict[str, Any]:
        return {"id": self.id, "object": "file", "bytes": len(self.content), "created_at": self.created_at,
                "filename": self.filename, "purpose": self.purpose, "status": "processed"}


@dataclass
class StoredBatch:
    id: str
    input_file_id: str
    endpoint: str
    completion_window: str
    metadata: dict[str, Any] | None
    created_at: int = field(default_factory=lambda: int(time.time()))
    step: int = 0
    status: str = "validating"
    output_file_id: str | None = None
    error_file_id: str | None = None
    counts: dict[str, int] = field(default_factory=lambda: {"total": 0, "completed": 0, "failed": 0})

    def public(self) -> dict[str, Any]:
        stamp = {f"{name}_at": None for name in ("in_progress", "finalizing", "completed", "failed", "expired",
                                                   "cancelling", "cancelled")}
        if self.status in stamp:
            stamp[f"{self.status}_at"] = int(time.time())
        return {"id": self.id, "object": "batch", "endpoint": self.endpoint, "errors": None,
                "input_file_id": self.input_file_id, "completion_window": self.completion_window,
                "status": self.status, "output_file_id": self.output_file_id, "error_file_id": self.error_file_id,
                "created_at": self.created_at, "expires_at": self.created_at + 86400, **stamp,
                "request_counts": dict(self.counts), "metadata": self.metadata}


class BatchOpenAIServer(OpenAIServer):
    """``OpenAIServer`` plus ``/v1/files`` and ``/v1/batches``. ``steps``: retrieves a batch takes from
    ``validating`` to ``completed`` (one status per retrieve); ``hold``: never completes (a deadline test);
    ``refuse_batches``: ``POST /v1/batches`` answers 404 (a server without the Batch API)."""

    def __init__(self, *args: Any, steps: int = 3, hold: bool = False, refuse_batches: bool = False,
                 **options: Any) -> None:
        super().__init__(*args, **options)
        self.steps = steps
        self.hold = hold
        self.refuse_batches = refuse_batches
        self.files: dict[str, StoredFile] = {}
        self.batches: dict[str, StoredBatch] = {}
        self._ids = itertools.count(1)
        self._batched: list[dict[str, Any]] = []
        self.batch_calls: dict[str, int] = {"files.create": 0, "batches.create": 0, "batches.retrieve": 0,
                                            "batches.cancel": 0, "files.content": 0}

    def batch_requests(self) -> list[dict[str, Any]]:
        """Bodies of every request answered through a batch, in order."""
        return list(self._batched)

    async def dispatch(self, request: Request) -> Outcome:
        path = request.path.removeprefix("/v1")
        if not (path.startswith("/files") or path.startswith("/batches")):
            return await super().dispatch(request)
        self.recorder.add(request)
        if (denied := self._denied(request)) is not None:
            outcome: Outcome = denied
        else:
            outcome = self._files_and_batches(request.method, path.strip("/").split("/"), request)
        self.stats.count(request.path, str(outcome.status) if isinstance(outcome, Response) else "dropped")
        return outcome

    def _files_and_batches(self, method: str, parts: list[str], request: Request) -> Outcome:
        if parts == ["files"] and method == "POST":
            return self._upload(request)
        if parts[0] == "files" and len(parts) in (2, 3) and method == "GET":
            stored = self.files.get(parts[1])
            if stored is None:
                return json_response(openai_error(404, f"No such File object: {parts[1]}"), 404)
            if len(parts) == 3 and parts[2] == "content":
                self.batch_calls["files.content"] += 1
                return Response(200, stored.content, content_type="application/octet-stream")
            return json_response(stored.public())
        if parts == ["batches"] and method == "POST":
            return self._create(request)
        if parts[0] == "batches" and len(parts) >= 2:
            batch = self.batches.get(parts[1])
            if batch is None:
                return json_response(openai_error(404, f"No batch found with id '{parts[1]}'."), 404)
            if len(parts) == 3 and parts[2] == "cancel" and method == "POST":
                self.batch_calls["batches.cancel"] += 1
                if batch.status not in ("completed", "failed", "expired", "cancelled"):
                    batch.status = "cancelling"
                return json_response(batch.public())
            if len(parts) == 2 and method == "GET":
                self.batch_calls["batches.retrieve"] += 1
                self._advance(batch)
                return json_response(batch.public())
        return json_response(openai_error(404, f"no route for {method} /v1/{'/'.join(parts)}"), 404)

    def _upload(self, request: Request) -> Outcome:
        self.batch_calls["files.create"] += 1
        head = f"Content-Type: {request.headers.get('content-type', '')}\r\n\r\n".encode()
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + request.body)
        fields: dict[str, tuple[str | None, bytes]] = {}
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            fields[str(name)] = (part.get_filename(), part.get_payload(decode=True) or b"")
        if "file" not in fields or "purpose" not in fields:
            return json_response(openai_error(400, "'file' and 'purpose' are required."), 400)
        stored = StoredFile(f"file-{next(self._ids):06d}", fields["file"][0] or "upload.jsonl",
                            fields["purpose"][1].decode(), fields["file"][1])
        self.files[stored.id] = stored
        return json_response(stored.public())

    def _create(self, request: Request) -> Outcome:
        self.batch_calls["batches.create"] += 1
        if self.refuse_batches:
            return json_response(openai_error(404, "Invalid URL (POST /v1/batches)"), 404)
        payload = request.json()
        stored = self.files.get(str(payload.get("input_file_id")))
        if stored is None or stored.purpose != "batch":
            return json_response(openai_error(400, "input_file_id must be a file uploaded with purpose batch"), 400)
        if payload.get("endpoint") != "/v1/chat/completions" or payload.get("completion_window") != "24h":
            return json_response(openai_error(400, "endpoint /v1/chat/completions and completion_window 24h"), 400)
        batch = StoredBatch(f"batch_{next(self._ids):06d}", stored.id, payload["endpoint"], "24h",
                            payload.get("metadata"))
        batch.counts["total"] = sum(1 for line in stored.content.splitlines() if line.strip())
        self.batches[batch.id] = batch
        return json_response(batch.public())

    def _advance(self, batch: StoredBatch) -> None:
        if batch.status == "cancelling":
            batch.status = "cancelled"
            return
        if batch.status in ("completed", "cancelled") or self.hold:
            if self.hold and batch.status == "validating":
                batch.status = "in_progress"
            return
        batch.step += 1
        index = min(len(STATUS_STEPS) - 1, batch.step * (len(STATUS_STEPS) - 1) // max(1, self.steps))
        batch.status = STATUS_STEPS[index]
        if batch.status == "completed":
            self._run(batch)

    def _run(self, batch: StoredBatch) -> None:
        """Answer every line as the chat endpoint would; outputs and errors into their files."""
        output: list[str] = []
        errors: list[str] = []
        for number, line in enumerate(self.files[batch.input_file_id].content.splitlines(), start=1):
            if not line.strip():
                continue
            row = json.loads(line)
            body = row["body"]
            self._batched.append(body)
            rule = self.rules.pick(match_text(body), number, body)
            if rule is not None and rule.is_fault() and rule.status is not None:
                errors.append(json.dumps({"id": f"batch_req_{number}", "custom_id": row["custom_id"],
                                          "response": {"status_code": rule.status, "request_id": f"req_{number}",
                                                       "body": openai_error(rule.status)}, "error": None}))
                batch.counts["failed"] += 1
                continue
            content = self._content(rule, body)
            usage = usage_block(prompt_text(body), content, body.get("n", 1), rule.usage if rule else None)
            for name in self._usage:
                self._usage[name] += int(usage.get(name, 0))
            output.append(json.dumps({"id": f"batch_req_{number}", "custom_id": row["custom_id"],
                                      "response": {"status_code": 200, "request_id": f"req_{number}",
                                                   "body": completion_body(body, content, number, usage, "stop")},
                                      "error": None}))
            batch.counts["completed"] += 1
        batch.output_file_id = self._store(f"{batch.id}_output.jsonl", output)
        batch.error_file_id = self._store(f"{batch.id}_error.jsonl", errors) if errors else None

    def _store(self, name: str, lines: list[str]) -> str:
        stored = StoredFile(f"file-{next(self._ids):06d}", name, "batch_output",
                            ("\n".join(lines) + "\n").encode() if lines else b"")
        self.files[stored.id] = stored
        return stored.id

    def on_reset(self) -> None:
        super().on_reset()
        self._batched.clear()
