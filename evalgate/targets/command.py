"""The ``command`` target: run a local program once per case, without a shell.

``target_command`` is the argv (a JSON list, or comma-separated). The program gets the case as one JSON
object on stdin (every case field, plus ``context``: the merged ``eval_context`` and case context as the
http target sends it; the fields a dialect adds, ``evalgate.dialect.request_stdin``; a conversation's turn
also carries ``messages``, the conversation so far ending with this turn's user message, and ``turn``,
counted from 1) and must print one
JSON object on stdout with the answer fields (read with the http target's response mapping, so
``output``/``answer``/``response``, ``sources``, ``tools_used`` … all work) or a JSON string (the answer
text). An extractor may print only ``mentions`` (objects with ``brand``, ``is_mine``, ``rank``)
and/or ``ranked_list``: those are scored instead of the built-in detector. With ``target_response_format:
text`` the program's whole stdout (surrounding whitespace stripped) is the answer text instead. A non-zero
exit status, invalid JSON, more than ``16 × max_answer_chars`` bytes on stdout, or running longer than
``api_timeout_seconds`` makes the case ``errored``; on timeout or excess output the program and its
process group are killed. Commands are not retried: a local program's failure is not transient.

Latency is the time from starting the program to having read all its output and seen it exit: it
includes the program's own start-up (e.g. an interpreter importing its modules), not evalgate's
scoring. The program is started, fed and waited for on the run's wire thread (``calls.wire``), so the
run's other work does not delay the timestamps.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from evalgate.config.settings import DEFAULT_MAX_ANSWER_CHARS
from evalgate.dialect import request_stdin
from evalgate.errors import UserError
from evalgate.model import Answer
from evalgate.safety.redact import redact
from evalgate.targets.http import REPLY_BYTES_PER_ANSWER_CHAR, case_context
from evalgate.targets.mapping import ResponseMap
from evalgate.traces.context import trace_env

if TYPE_CHECKING:
    from evalgate.calls.runtime import Runtime
    from evalgate.config.settings import Settings
    from evalgate.model import Case
    from evalgate.targets.base import TargetCall

STDERR_TAIL_CHARS = 500
STDERR_KEPT_BYTES = 64 * 1024
"""Bytes of the end of stderr kept while the program runs (its last line is reported on failure)."""


class _TooMuchOutput(Exception):
    pass


def resolve_program(argv: Sequence[str]) -> list[str]:
    """``argv`` with its program checked: on PATH or an executable file; else ``UserError``."""
    if not argv or not str(argv[0]).strip():
        raise UserError("target 'command' needs target_command (a JSON list of program and arguments)",
                        where="target_command")
    program = str(argv[0])
    found = shutil.which(program)
    if found is None:
        raise UserError(f"program {program!r} not found or not executable", where="target_command")
    return [program, *map(str, argv[1:])]


class CommandTarget:
    kind = "command"
    calls_bounded = False
    """Whether the run's bound on calls in flight covers this target (its processes run outside the Executor: the cases in progress are the bound)."""

    def __init__(self, argv: Sequence[str], *, timeout: float, runtime: Runtime | None = None,
                 eval_context: Mapping[str, Any] | None = None, response_map: Mapping[str, str] | None = None,
                 response_format: str = "auto", max_answer_chars: int = DEFAULT_MAX_ANSWER_CHARS,
                 env: Mapping[str, str] | None = None) -> None:
        self.argv = resolve_program(argv)
        self.env = env
        """The program's environment when a call adds variables (its ``TRACEPARENT``); else it inherits ours."""
        self.timeout = timeout
        self.runtime = runtime
        self.eval_context = dict(eval_context or {})
        self.response_map = ResponseMap.build(response_map)
        self.response_format = response_format
        self.max_output_bytes = REPLY_BYTES_PER_ANSWER_CHAR * max_answer_chars

    @classmethod
    def from_settings(cls, settings: Settings, runtime: Runtime | None = None) -> CommandTarget:
        return cls(settings.target_command, timeout=settings.api_timeout_seconds, runtime=runtime,
                   eval_context=settings.eval_context, response_map=settings.target_response_map,
                   response_format=settings.target_response_format, max_answer_chars=settings.max_answer_chars,
                   env=settings.environment)

    def stdin_for(self, case: Case, call: TargetCall | None = None) -> bytes:
        record = case.model_dump(mode="json", exclude_none=True)
        record["context"] = case_context(case, self.eval_context)
        if call is not None and call.messages is not None:  # a conversation's turn
            record["messages"] = call.messages
            record["turn"] = call.turn
            if call.conversation_id is not None:
                record["conversation_id"] = call.conversation_id
        record.update(request_stdin(case))
        return json.dumps(record, ensure_ascii=False).encode("utf-8")

    async def answer(self, case: Case, call: TargetCall | None = None) -> Answer:
        if self.runtime is not None:
            self.runtime.executor.check_stop()
        stdin = self.stdin_for(case, call)
        traced = trace_env()  # TRACEPARENT (and EVALGATE_TRACE_FILE) when the run receives traces
        if self.runtime is not None:
            with self.runtime.executor.track():
                outcome = await self.runtime.wire.call(lambda: self._run(stdin, traced))
        else:
            outcome = await self._run(stdin, traced)
        if isinstance(outcome, Answer):
            return outcome
        returncode, stdout, stderr, latency = outcome
        if returncode != 0:
            return Answer(error=redact(f"command exited with status {returncode}: {_tail(stderr)}"))
        return self._read(stdout, latency)

    async def _run(self, stdin: bytes, traced: Mapping[str, str] | None = None) -> tuple[int, bytes, bytes, float] | Answer:
        """Start the program, feed it ``stdin``, read its output and wait for it: (exit status, stdout,
        stderr, milliseconds from start to exit), or the error ``Answer``. ``traced``: variables added to
        the program's environment (the call's ``TRACEPARENT``)."""
        started = time.perf_counter()
        try:
            process = await asyncio.create_subprocess_exec(
                *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, start_new_session=True,
                env={**(self.env or {}), **traced} if traced else None,
            )
        except OSError as exc:
            return Answer(error=f"cannot start {self.argv[0]!r}: {exc.strerror or exc}")
        try:
            stdout, stderr = await asyncio.wait_for(_exchange(process, stdin, self.max_output_bytes),
                                                    timeout=self.timeout)
            latency = round((time.perf_counter() - started) * 1000, 3)
        except TimeoutError:
            return Answer(error=f"command timed out after {self.timeout:g}s and was killed")
        except _TooMuchOutput:
            return Answer(error=f"command printed more than {self.max_output_bytes:,} bytes "
                                "(16 × max_answer_chars) and was killed")
        finally:
            await _reap(process)
        return process.returncode or 0, stdout, stderr, latency

    def _read(self, stdout: bytes, latency_ms: float) -> Answer:
        text = stdout.decode("utf-8", errors="replace").strip()
        if self.response_format == "text":
            return Answer(output=text, latency_ms=latency_ms)
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            return Answer(error=f"command printed invalid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
                                "set target_response_format: text if it prints plain text")
        except RecursionError:
            return Answer(error="command printed JSON nested too deeply to read")
        if isinstance(data, str):
            return Answer(output=data, latency_ms=latency_ms)
        if not isinstance(data, dict):
            return Answer(error=f"command printed JSON {type(data).__name__}, expected an object or a string")
        try:
            answer = Answer(**self.response_map.apply(data), latency_ms=latency_ms)
        except (ValueError, ValidationError) as exc:
            return Answer(error=redact(f"command printed an unusable answer: {str(exc).splitlines()[0]}"))
        if answer.output is None and answer.mentions is None and answer.ranked_list is None:
            return Answer(error="command printed no answer text ('output', 'answer' or 'response') "
                                "and no extraction ('mentions', 'ranked_list')")
        return answer

    async def aclose(self) -> None:
        return None

    def describe(self) -> dict[str, object]:
        return {"kind": self.kind, "command": self.argv, "timeout_seconds": self.timeout}


async def _exchange(process: asyncio.subprocess.Process, data: bytes, limit: int) -> tuple[bytes, bytes]:
    """Write ``data`` to the program's stdin and read its stdout (at most ``limit`` bytes, else
    ``_TooMuchOutput``) and the end of its stderr, all at once (so no pipe fills up and blocks it)."""
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    stdin, stdout, stderr = process.stdin, process.stdout, process.stderr

    async def feed() -> None:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            stdin.write(data)
            await stdin.drain()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            stdin.close()

    async def collect() -> bytes:
        chunks: list[bytes] = []
        size = 0
        while chunk := await stdout.read(1 << 16):
            size += len(chunk)
            if size > limit:
                raise _TooMuchOutput
            chunks.append(chunk)
        return b"".join(chunks)

    async def tail() -> bytes:
        kept = b""
        while chunk := await stderr.read(1 << 16):
            kept = (kept + chunk)[-STDERR_KEPT_BYTES:]
        return kept

    tasks = [asyncio.ensure_future(feed()), asyncio.ensure_future(collect()), asyncio.ensure_future(tail())]
    try:
        await asyncio.gather(*tasks)
    except BaseException:  # too much output, the timeout or the run stopping: stop reading
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    await process.wait()
    return tasks[1].result() or b"", tasks[2].result() or b""


async def _reap(process: asyncio.subprocess.Process) -> None:
    """Kill the program's process group if it is still running, then wait for it."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            process.kill()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(process.wait(), timeout=5)


def _tail(stderr: bytes) -> str:
    """The last non-blank line the program wrote to stderr, at most 500 characters."""
    lines = [line for line in stderr.decode("utf-8", errors="replace").splitlines() if line.strip()]
    if not lines:
        return "(no stderr output)"
    last = lines[-1].strip()
    return last if len(last) <= STDERR_TAIL_CHARS else "…" + last[-STDERR_TAIL_CHARS:]
