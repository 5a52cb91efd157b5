"""The target wrapper that gives each case its traces: it opens a ``CaseTrace`` around the target's call(s)
(the ``traceparent`` each call sends), waits for the case's spans (``Collector.settle``), and attaches
their summary to the answer as ``Answer.trace``; the spans are then released. The summary also counts the
failed attempts of retried calls (``failed_attempts``, ``failed_attempt_spans``: never scored) and, when no
span arrived, says why (``missing``: ``{cause, reason}``, ``Collector.why_no_spans``).

A recorded case may carry ``trace_file:`` instead: an OTLP/JSON file (relative to its dataset file, inside
the dataset's directory) whose spans are the case's trace, with or without a receiver. A conversation's turn
may carry its own (all its spans are that turn's); a conversation case's ``trace_file`` holds the whole
conversation, one trace per turn as the receiver sees them (``conversation_file_traces``).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalgate.traces.context import CURRENT
from evalgate.traces.spans import Span, SpanDecodeError, parse_json
from evalgate.traces.summary import summarize

if TYPE_CHECKING:
    from evalgate.model import Answer, Case
    from evalgate.traces.receiver import Collector

MAX_TRACE_FILE_BYTES = 16 * 1024 * 1024


class TracedTarget:
    """Wraps a target (``inner``); every other attribute is the inner target's."""

    def __init__(self, inner: Any, collector: Collector | None, *, grace: float, max_file_bytes: int =
                 MAX_TRACE_FILE_BYTES, endpoint: str | None = None) -> None:
        self.inner = inner
        self.endpoint = endpoint
        self._inner_takes_call = _takes_call(inner)
        self.collector = collector
        self.grace = grace
        self.max_file_bytes = max_file_bytes

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _call_inner(self, case: Case, call: Any) -> Awaitable[Answer]:
        return self.inner.answer(case, call) if call is not None and self._inner_takes_call else self.inner.answer(case)

    async def answer(self, case: Case, call: Any = None) -> Answer:
        """The inner target's answer with the case's trace attached. ``call``: the engine's description of
        this call (a conversation's turn), passed on to a target that takes one; its ``turn`` (1-based)
        numbers the spans of the call."""
        trace_file = case.trace_file
        collector = self.collector
        if collector is None:
            answer = await self._call_inner(case, call)
            return self._from_file(case, answer, trace_file, call) if trace_file else answer
        scope = collector.open_case()
        token = CURRENT.set(scope)
        try:
            try:
                answer = await self._call_inner(case, call)
            finally:
                CURRENT.reset(token)
                if scope.spool is not None:
                    for trace_id, _ in scope.calls:
                        path = scope.file_for(trace_id)
                        if path is not None:
                            collector.ingest_file(path, self.max_file_bytes)
            if scope.calls:
                await collector.settle(scope, self.grace)
        finally:  # the case's spans are released whatever happened (a raising target, a cancelled run)
            spans, dropped = collector.release(scope)
        if not scope.calls:
            return self._from_file(case, answer, trace_file, call) if trace_file else answer
        started = time.perf_counter()
        turn = getattr(call, "turn", None)
        turns = scope.turns if not isinstance(turn, int) else {trace_id: turn - 1 for trace_id in scope.turns}
        summary = summarize(spans, turns=turns, dropped=dropped)
        if scope.failed:
            summary["failed_attempts"] = len(scope.failed)
            summary["failed_attempt_spans"] = scope.failed_spans
        if not spans:
            cause, reason = collector.why_no_spans(self.grace, self.endpoint)
            summary["missing"] = {"cause": cause, "reason": reason}
        collector.stats.summary_seconds += time.perf_counter() - started
        return answer.model_copy(update={"trace": summary})

    def _from_file(self, case: Case, answer: Answer, trace_file: Any, call: Any = None) -> Answer:
        """``answer`` with the trace of ``trace_file``: a conversation turn's (``call.turn``) spans are all
        that turn's; a single case's traces are numbered in file order."""
        try:
            spans = read_trace_file(case, trace_file, self.max_file_bytes)
        except ValueError as exc:
            return answer.model_copy(update={"error": str(exc)})
        turn = getattr(call, "turn", None)
        ids = dict.fromkeys(s.trace_id for s in spans)
        turns = {trace_id: (turn - 1 if isinstance(turn, int) else index) for index, trace_id in enumerate(ids)}
        return answer.model_copy(update={"trace": summarize(spans, turns=turns, source="file")})

    def describe(self) -> dict[str, object]:
        described = dict(self.inner.describe())
        if self.collector is not None:
            described["traces"] = True
        return described


def read_trace_file(case: Case, trace_file: Any, max_bytes: int = MAX_TRACE_FILE_BYTES) -> list[Span]:
    """The spans of ``case``'s ``trace_file`` (``ValueError`` naming the file when it cannot be read)."""
    try:
        path = resolve_trace_file(case, trace_file)
        if not path.is_file():  # a FIFO or a device would block or never end
            raise ValueError("not a regular file" if path.exists() else "no such file")
        if path.stat().st_size > max_bytes:
            raise ValueError(f"larger than {max_bytes:,} bytes")
        return parse_json(path.read_bytes())
    except (OSError, ValueError, SpanDecodeError) as exc:
        raise ValueError(f"trace_file {str(trace_file)[:200]!r}: {exc}") from exc


def conversation_file_traces(case: Case, max_bytes: int = MAX_TRACE_FILE_BYTES
                             ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A conversation case's ``trace_file``: (the whole conversation's summary, one summary per trace).

    Trace k (its traces ordered by their first span's start time) is turn k's, as a live run receives
    them (a fresh trace id per turn); the whole summary holds every span, each numbered with its turn.
    ``ValueError`` naming the file when it cannot be read."""
    spans = read_trace_file(case, case.trace_file, max_bytes)
    first: dict[str, int] = {}
    for span in spans:
        first[span.trace_id] = min(first.get(span.trace_id, span.start_ns), span.start_ns)
    ordered = sorted(first, key=lambda trace_id: first[trace_id])
    turn_of = {trace_id: index for index, trace_id in enumerate(ordered)}
    whole = summarize(spans, turns=turn_of, source="file")
    per_turn = [summarize([s for s in spans if s.trace_id == trace_id], turns={trace_id: index}, source="file")
                for index, trace_id in enumerate(ordered)]
    return whole, per_turn


def _takes_call(target: Any) -> bool:
    """Whether ``target.answer`` takes a second positional argument (the engine's per-call description)."""
    try:
        parameters = list(inspect.signature(target.answer).parameters.values())
    except (TypeError, ValueError, AttributeError):
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in parameters)


def resolve_trace_file(case: Case, value: Any) -> Path:
    """``trace_file`` of ``case``: a relative path inside its dataset file's directory (``ValueError``
    otherwise: a dataset names data beside it, not any file of the machine)."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError("must be a relative path to an OTLP/JSON file")
    relative = Path(value)
    base = Path(case.source_file).resolve().parent if case.source_file else Path.cwd()
    path = (base / relative).resolve()
    if relative.is_absolute() or not path.is_relative_to(base):
        raise ValueError("must be a relative path inside the dataset's directory")
    return path
