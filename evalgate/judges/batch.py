"""Batch judging (``judge_mode: batch``): every judge request of the run through the provider's batch
interface, at its batch price (OpenAI: half, ``calls.costs.BATCH_DISCOUNT``).

How a request travels: ``JudgeClient`` hands a cache miss to ``BatchJudge.complete`` instead of calling the
judge; requests pile up while cases keep starting (the engine keeps ``judge_batch_window`` cases in
progress in batch mode, their target calls still bounded by ``concurrency``, and starts each case's judged
metrics at once), and are sent as one batch when no new one arrived for ``judge_batch_quiet_seconds``
or when ``judge_batch_max_requests`` are waiting:

1. a JSONL file, one line per request (``{"custom_id", "method": "POST", "url": "/v1/chat/completions",
   "body"}``), uploaded with ``files.create(purpose="batch")``;
2. ``batches.create(input_file_id, endpoint="/v1/chat/completions", completion_window="24h")``;
3. ``batches.retrieve`` every ``judge_batch_poll_seconds``, its ``request_counts`` printed as progress;
4. when ``completed``: the output file (``files.content``) gives each request's chat completion, which
   goes through the same parser, judge cache and ledger as a direct reply; a request the batch failed (the
   error file, or a non-2xx ``status_code``) is sent directly instead.

All of it uses the official ``openai`` SDK's async client, so any provider with OpenAI-compatible
``/files`` and ``/batches`` endpoints works.

Re-runs: every batch created is written to ``judge-batch.json`` in the output directory (id, input file,
creation time, its requests' ``custom_id``s; uploaded with the results artifact). A later run of the same
work finds a request's batch there and polls it instead of paying for it again. The ``custom_id`` is
the request's cache key (sha256 of the messages and the parameters that decide the reply, plus the repeat),
so the same request always has the same id.

Deadline: ``judge_batch_deadline_seconds`` after a batch was created (its stored creation time, so a re-run
does not restart the clock) the batch is cancelled and its requests are sent directly, at the direct
price; so are all requests when the batch endpoints are refused (an upload or create that fails).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalgate.calls.chat import ChatReply, choice_text, token_counts
from evalgate.calls.costs import cached_prompt_tokens, usage_from
from evalgate.safety.redact import redact

if TYPE_CHECKING:
    from evalgate.calls.chat import ChatService

STATE_FILE = "judge-batch.json"
ENDPOINT = "/v1/chat/completions"
DONE = frozenset({"completed", "failed", "expired", "cancelled"})
BATCH_PROVIDERS = frozenset({"openai", "gemini", "local"})
"""Providers whose OpenAI-compatible API may offer ``/files`` + ``/batches`` (OpenAI's does; Gemini's
OpenAI-compatible endpoint and local servers may)."""
PR_EVENTS = frozenset({"pull_request", "pull_request_target"})
"""Runs that stay synchronous: a PR waits for its verdict and reuses the base branch's batched ones."""


class BatchFallback(Exception):
    """This request was not answered by a batch: send it directly (the message says why)."""


def batch_refusal(mode: str, provider: str, env: Mapping[str, str], max_cost: float | None = None) -> str | None:
    """Why ``judge_mode`` ``mode`` does not batch here (None: it does): a pull-request event in Actions, a
    provider without a batch interface, or ``max_cost`` (which reserves every call before it is made)."""
    if mode != "batch":
        return "judge_mode is direct"
    event = env.get("GITHUB_EVENT_NAME", "") if env.get("GITHUB_ACTIONS") == "true" else ""
    if event in PR_EVENTS:
        return f"judge_mode batch is for push, schedule and workflow_dispatch runs; this {event} run judges directly"
    if provider not in BATCH_PROVIDERS:
        return f"judge provider {provider!r} has no batch interface: judging directly"
    if max_cost is not None:
        return "max_cost reserves every judge call before it is made, which a batch cannot: judging directly"
    return None


def custom_id(prompt_hash: str, repeat: int) -> str:
    """The batch line id of one request: its cache key's prompt hash and the repeat."""
    return f"eg-{prompt_hash[:40]}-r{repeat}"


@dataclass(slots=True)
class Pending:
    body: dict[str, Any]
    future: asyncio.Future[ChatReply]
    messages: Sequence[Mapping[str, Any]]


@dataclass(slots=True)
class BatchStats:
    """For ``metadata.judge.batch``: batches created or resumed, requests answered by them, sent directly."""

    batches: list[dict[str, Any]] = field(default_factory=list)
    answered: int = 0
    fell_back: int = 0
    fallback_reasons: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"batches": self.batches, "answered": self.answered, "sent_directly": self.fell_back,
                "fallback_reasons": self.fallback_reasons[:5]}


class BatchJudge:
    """Collects judge requests and answers them through OpenAI-compatible batches (see the module docstring)."""

    def __init__(self, service: ChatService, state_dir: Path, *, deadline_s: float, poll_s: float,
                 quiet_s: float = 2.0, max_requests: int = 50_000,
                 progress: Callable[[str], None] | None = None) -> None:
        self.service = service
        self.state_path = state_dir / STATE_FILE
        self.deadline_s = deadline_s
        self.poll_s = poll_s
        self.quiet_s = quiet_s
        self.max_requests = max_requests
        self.progress = progress or _stderr
        self.stats = BatchStats()
        self._pending: dict[str, Pending] = {}
        self._in_flight: dict[str, asyncio.Future[ChatReply]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._client: Any = None
        self._state = self._load_state()

    # --- the judge's side -------------------------------------------------------------------------------

    async def complete(self, request_id: str, messages: Sequence[Mapping[str, Any]], params: Mapping[str, Any],
                       max_tokens: int) -> ChatReply:
        """The reply to one chat request from a batch; ``BatchFallback`` when it must be sent directly."""
        if request_id in self._in_flight:
            return await asyncio.shield(self._in_flight[request_id])
        if request_id in self._pending:
            return await asyncio.shield(self._pending[request_id].future)
        loop = asyncio.get_running_loop()
        body = {"model": self.service.model, "messages": list(messages), **self.service._limit(max_tokens),
                **params}
        future: asyncio.Future[ChatReply] = loop.create_future()
        self._pending[request_id] = Pending(body, future, messages)
        if len(self._pending) >= self.max_requests:
            self._flush_now()
        else:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = loop.call_later(self.quiet_s, self._flush_now)
        return await asyncio.shield(future)

    def _flush_now(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._pending:
            return
        batch, self._pending = self._pending, {}
        for request_id, item in batch.items():
            self._in_flight[request_id] = item.future
        task = asyncio.get_running_loop().create_task(self._run(batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- one flush: resume or create, poll, answer --------------------------------------------------------

    async def _run(self, batch: dict[str, Pending]) -> None:
        try:
            groups = self._resumable(batch)
            fresh = {rid: item for rid, item in batch.items() if not any(rid in ids for _, ids in groups)}
            work = [self._follow(entry, {rid: batch[rid] for rid in ids}) for entry, ids in groups]
            if fresh:
                work.append(self._submit(fresh))
            await asyncio.gather(*work)
        except Exception as exc:  # anything unexpected: nothing is lost, the requests go directly
            self._fail(batch, f"batch judging failed: {type(exc).__name__}: {redact(str(exc))[:200]}")
        finally:
            for request_id in batch:
                self._in_flight.pop(request_id, None)

    def _resumable(self, batch: Mapping[str, Pending]) -> list[tuple[dict[str, Any], set[str]]]:
        """Stored batches (of an earlier, interrupted run) that hold some of these requests and may still
        answer them."""
        found = []
        for entry in self._state["batches"]:
            if entry.get("status") in ("failed", "expired", "cancelled"):
                continue
            ids = set(entry.get("custom_ids", ())) & set(batch)
            if ids:
                found.append((entry, ids))
        return found

    async def _submit(self, batch: dict[str, Pending]) -> None:
        client = self._sdk()
        lines = "".join(json.dumps({"custom_id": rid, "method": "POST", "url": ENDPOINT, "body": item.body},
                                   ensure_ascii=False) + "\n" for rid, item in batch.items())
        try:
            upload = await client.files.create(file=("evalgate-judge-batch.jsonl", lines.encode()), purpose="batch")
            created = await client.batches.create(input_file_id=upload.id, endpoint=ENDPOINT,
                                                  completion_window="24h",
                                                  metadata={"created_by": "evalgate"})
        except Exception as exc:
            self._fail(batch, f"the batch could not be created ({type(exc).__name__}: {redact(str(exc))[:200]})")
            return
        entry = {"id": created.id, "input_file_id": upload.id, "created_at": time.time(),
                 "requests": len(batch), "status": created.status, "custom_ids": sorted(batch)}
        self._state["batches"].append(entry)
        self._save_state()
        self.progress(f"judge batch {created.id}: {len(batch)} request(s) submitted")
        await self._follow(entry, batch)

    async def _follow(self, entry: dict[str, Any], batch: dict[str, Pending]) -> None:
        """Poll ``entry``'s batch until it is done or its deadline passes, then answer every request."""
        client = self._sdk()
        record = {"id": entry["id"], "requests": len(batch), "resumed": entry.get("status") is not None
                  and entry.get("run_pid") != os.getpid()}
        entry["run_pid"] = os.getpid()
        self.stats.batches.append(record)
        shown = None
        while True:
            current = await client.batches.retrieve(entry["id"])
            counts = getattr(current, "request_counts", None)
            line = (f"judge batch {entry['id']}: {current.status}"
                    + (f", {counts.completed + counts.failed}/{counts.total} done" if counts else ""))
            if line != shown:
                self.progress(line)
                shown = line
            if entry.get("status") != current.status:
                entry["status"] = current.status
                self._save_state()
            if current.status in DONE:
                break
            if time.time() - float(entry.get("created_at", time.time())) >= self.deadline_s:
                with contextlib.suppress(Exception):  # best effort: the requests go directly either way
                    await client.batches.cancel(entry["id"])
                entry["status"] = "cancelled"
                self._save_state()
                record["status"] = "deadline"
                self._fail(batch, f"batch {entry['id']} not done {self.deadline_s:g}s after it was created")
                return
            await asyncio.sleep(self.poll_s)
        record["status"] = current.status
        if current.status != "completed":
            self._fail(batch, f"batch {entry['id']} ended {current.status}")
            return
        answered: dict[str, Any] = {}
        for file_id in (current.output_file_id, getattr(current, "error_file_id", None)):
            if file_id:
                content = await client.files.content(file_id)
                for text in content.text.splitlines():
                    if text.strip():
                        row = json.loads(text)
                        answered[str(row.get("custom_id"))] = row
        for request_id, item in batch.items():
            self._answer(item, answered.get(request_id), entry["id"])

    def _answer(self, item: Pending, row: Mapping[str, Any] | None, batch_id: str) -> None:
        if item.future.done():
            return
        response = (row or {}).get("response") or {}
        status = response.get("status_code")
        body = response.get("body")
        if row is None or row.get("error") or not isinstance(status, int) or status >= 300 or not isinstance(body, dict):
            if row is None:
                problem: Any = "no line for it in the output"
            else:
                problem = row.get("error") or (body.get("error") if isinstance(body, dict) else None) or status
            self._fail({"": item}, f"batch {batch_id} did not answer a request: {redact(json.dumps(problem))[:200]}")
            return
        text = choice_text(body.get("choices"))
        raw_usage = body.get("usage")
        prompt, completion = token_counts(raw_usage)
        usage = usage_from(prompt, completion, item.messages, text, cached_prompt_tokens(raw_usage))
        cost = self.service.runtime.ledger.record(self.service.role, usage, self.service.price, batch=True)
        self.stats.answered += 1
        item.future.set_result(ChatReply(text, usage, cost, None))

    def _fail(self, batch: Mapping[str, Pending], reason: str) -> None:
        for item in batch.values():
            if not item.future.done():
                self.stats.fell_back += 1
                item.future.set_exception(BatchFallback(reason))
        if reason not in self.stats.fallback_reasons:
            self.stats.fallback_reasons.append(reason)
            self.progress(f"{reason}: sending directly")

    # --- state, client ------------------------------------------------------------------------------------

    def _sdk(self) -> Any:
        if self._client is None:
            import openai  # lazy: the openai SDK (~0.5 s) only with chat_client: openai-sdk

            provider = self.service.provider
            headers = {"Authorization": provider.authorization} if provider.authorization else None
            self._client = openai.AsyncOpenAI(api_key=provider.api_key, base_url=provider.base_url, max_retries=3,
                                              default_headers=headers)
        return self._client

    def _load_state(self) -> dict[str, Any]:
        try:
            data = json.loads(self.state_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {"batches": []}
        batches = data.get("batches") if isinstance(data, dict) else None
        return {"batches": [b for b in batches if isinstance(b, dict) and isinstance(b.get("id"), str)]
                if isinstance(batches, list) else []}

    def _save_state(self) -> None:
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.state_path.with_suffix(".tmp")
        kept = [{k: v for k, v in b.items() if k != "run_pid"} for b in self._state["batches"]]
        temporary.write_text(json.dumps({"batches": kept}, indent=1), encoding="utf-8")
        temporary.replace(self.state_path)

    def metadata(self) -> dict[str, Any]:
        return {**self.stats.as_dict(), "state_file": STATE_FILE,
                "input_digest": hashlib.sha256(json.dumps(sorted(
                    rid for b in self._state["batches"] for rid in b.get("custom_ids", ()))).encode()).hexdigest()[:12]}

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._client is not None:
            await self._client.close()


def _stderr(text: str) -> None:
    sys.stderr.write(f"evalgate: {text}\n")
    sys.stderr.flush()
