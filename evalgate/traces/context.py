"""The W3C ``traceparent`` on every target call: a fresh trace id per call (one call per case, or per turn
of a conversation), registered with the run's collector so the spans the agent exports come back tagged
with their case.

The run sets a ``CaseTrace`` for the case being answered (a context variable: each case runs in its own
task); a target asks for ``trace_headers()`` (HTTP and model targets) or ``trace_env()`` (the command
target's environment: ``TRACEPARENT``, which OpenTelemetry SDKs do not read by themselves, and
``EVALGATE_TRACE_FILE``, where a program may write its spans as OTLP/JSON instead of exporting them).
Without a case trace (traces off) both are empty and nothing is sent. The n-th call of a case is its turn n.

A call that is retried (``attempt_headers``: the HTTP and model targets) sends a fresh trace id on every
attempt: a new attempt means the previous one failed, and that attempt's spans are set aside (counted as
``failed_attempt_spans``, never scored); the call's turn keeps its number.

``traceparent`` = ``00-<trace id: 32 hex>-<parent span id: 16 hex>-01`` (version 00, sampled).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from contextvars import ContextVar
from pathlib import Path

TRACE_FILE_ENV = "EVALGATE_TRACE_FILE"


class CaseTrace:
    """The trace ids of one case's target calls, in call order (the index is the turn)."""

    __slots__ = ("_discard", "_register", "calls", "failed", "failed_spans", "spool")

    def __init__(self, register: Callable[[str, str], None] | None = None, spool: Path | None = None,
                 discard: Callable[[str], None] | None = None) -> None:
        self._register = register
        self._discard = discard
        self.spool = spool
        self.calls: list[tuple[str, str]] = []
        """(trace id, the parent span id the call carried), one per call: its latest attempt."""
        self.failed: list[str] = []
        """Trace ids of attempts that failed (a retry followed): their spans are never the case's."""
        self.failed_spans = 0
        """Spans of failed attempts set aside (known once the case is released)."""

    def new_call(self) -> str:
        """A fresh ``traceparent`` for the next call (registered with the collector first)."""
        trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
        if self._register is not None:
            self._register(trace_id, span_id)
        self.calls.append((trace_id, span_id))
        return f"00-{trace_id}-{span_id}-01"

    def retry(self) -> str:
        """A fresh ``traceparent`` for the next attempt of the latest call: the previous attempt failed, so
        its trace id is set aside (its spans, arrived or not, are counted and ignored); same turn."""
        if not self.calls:
            return self.new_call()
        previous, _ = self.calls.pop()
        self.failed.append(previous)
        if self._discard is not None:
            self._discard(previous)
        return self.new_call()

    @property
    def turns(self) -> dict[str, int]:
        return {trace_id: turn for turn, (trace_id, _) in enumerate(self.calls)}

    def file_for(self, trace_id: str) -> Path | None:
        return self.spool / f"{trace_id}.json" if self.spool is not None else None


CURRENT: ContextVar[CaseTrace | None] = ContextVar("evalgate_case_trace", default=None)


def traceparent() -> str | None:
    """A fresh ``traceparent`` for a target call of the current case, or None when traces are off."""
    scope = CURRENT.get()
    return scope.new_call() if scope is not None else None


def trace_headers() -> dict[str, str]:
    """``{"traceparent": …}`` for an HTTP call of the current case ({} when traces are off)."""
    value = traceparent()
    return {"traceparent": value} if value else {}


def attempt_headers() -> Callable[[], dict[str, str]]:
    """For one target call that may be retried: a function giving each attempt's headers — the first
    attempt ``{"traceparent": …}`` of a new call, every later one a fresh trace id for the same call
    (``CaseTrace.retry``). ``{}`` on every attempt when traces are off. Call it inside the attempt."""
    scope = CURRENT.get()
    if scope is None:
        return dict
    started = False

    def headers() -> dict[str, str]:
        nonlocal started
        value = scope.retry() if started else scope.new_call()
        started = True
        return {"traceparent": value}

    return headers


def trace_env() -> dict[str, str]:
    """``TRACEPARENT`` (and ``EVALGATE_TRACE_FILE`` when the run keeps a spool) for a command's
    environment ({} when traces are off)."""
    scope = CURRENT.get()
    if scope is None:
        return {}
    value = scope.new_call()
    env = {"TRACEPARENT": value}
    path = scope.file_for(scope.calls[-1][0])
    if path is not None:
        env[TRACE_FILE_ENV] = str(path)
    return env
