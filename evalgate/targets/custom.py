"""Custom targets: ``target: "package.module:factory"`` (or ``file://agent.py:factory``) for a system that is
neither an HTTP endpoint, an OpenAI-compatible model nor a command (docs/targets.md).

The factory is called once, with ``target_options`` as keyword arguments, and returns an object with an
``answer(case)`` method (plain or ``async``) that receives a ``CaseView`` (``evalgate.dataset.views``) and
returns an ``evalgate.Answer``, a mapping of its fields, or the answer text; optionally ``aclose()`` /
``close()`` (called once at the end) and ``describe()`` (a mapping shown in the results' metadata). A
reference to an object that already has ``answer`` is used as it is. An exception or a return value of
another type makes that case ``errored`` with a one-line reason, never a crash; a factory that fails is
exit 2 before any case runs. Plain ``answer`` methods run in a worker thread, so ``concurrency`` cases are
answered at once either way.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evalgate.config.references import resolve_reference
from evalgate.dataset.views import CaseView
from evalgate.errors import UserError
from evalgate.model import Answer, Case
from evalgate.targets.base import TargetCall


class CustomTarget:
    """Adapts the user's object to the target interface (``evalgate.targets.base.Target``)."""

    kind = "custom"
    calls_bounded = False
    """Its calls do not go through the run's executor: no spare workers."""

    def __init__(self, system: Any, reference: str) -> None:
        self.system = system
        self.reference = reference
        self._answer = system.answer
        self._asynchronous = inspect.iscoroutinefunction(self._answer)

    @classmethod
    def from_reference(cls, reference: str, options: Mapping[str, Any], base_dir: Path | None) -> CustomTarget:
        made = resolve_reference(reference, base_dir=base_dir, where="target")
        if not callable(getattr(made, "answer", None)):
            if not callable(made):
                raise UserError(f"{reference!r} is neither a factory nor an object with answer(case)", where="target")
            try:
                made = made(**dict(options))
            except Exception as exc:
                raise UserError(f"{reference!r}: the factory raised {_line(exc)}", where="target") from None
        if not callable(getattr(made, "answer", None)):
            raise UserError(f"{reference!r} returned {type(made).__name__}, which has no answer(case) method",
                            where="target")
        return cls(made, reference)

    async def answer(self, case: Case, call: TargetCall | None = None) -> Answer:
        """The system's answer (a conversation's turn: ``case.get("messages")`` is the conversation so far and
        ``case.get("turn")`` the turn, counted from 1); ``latency_ms``, unless the answer reports its own, is the call's time: a
        plain ``answer`` is timed in its worker thread (the wait for a free thread excluded), an
        ``async`` one around its ``await`` on the run's loop (where other cases' work can add to it)."""
        view = CaseView.of(case)
        if call is not None and call.messages is not None:
            view = dataclasses.replace(view, data={**view.data, "messages": call.messages, "turn": call.turn})
        try:
            if self._asynchronous:
                started = time.perf_counter()
                result = await self._answer(view)
                elapsed = (time.perf_counter() - started) * 1000
            else:
                result, elapsed = await asyncio.to_thread(_timed, self._answer, view)
                if inspect.isawaitable(result):
                    started = time.perf_counter()
                    result = await result
                    elapsed += (time.perf_counter() - started) * 1000
        except Exception as exc:
            return Answer(error=f"target {self.reference} raised {_line(exc)}")
        answer = _as_answer(result, self.reference)
        if answer.latency_ms is None and answer.error is None:
            answer.latency_ms = round(elapsed, 3)
        return answer

    async def aclose(self) -> None:
        for name in ("aclose", "close"):
            closer = getattr(self.system, name, None)
            if callable(closer):
                result = closer()
                if inspect.isawaitable(result):
                    await result
                return

    def describe(self) -> dict[str, object]:
        described = getattr(self.system, "describe", None)
        extra: dict[str, object] = {}
        if callable(described):
            try:
                value = described()
                extra = dict(value) if isinstance(value, Mapping) else {"description": str(value)}
            except Exception as exc:
                extra = {"describe_error": _line(exc)}
        return {"kind": self.kind, "reference": self.reference, **extra}


def _timed(function: Any, argument: Any) -> tuple[Any, float]:
    """``function(argument)`` and its duration in milliseconds (run in the worker thread)."""
    started = time.perf_counter()
    result = function(argument)
    return result, (time.perf_counter() - started) * 1000


def _as_answer(result: Any, reference: str) -> Answer:
    if isinstance(result, Answer):
        return result
    if isinstance(result, str):
        return Answer(output=result)
    if isinstance(result, Mapping):
        try:
            return Answer.model_validate(dict(result))
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(part) for part in error["loc"])
            return Answer(error=f"target {reference} returned an invalid answer: {where}: {error['msg']}")
    return Answer(error=f"target {reference} returned {type(result).__name__}; answer(case) returns an "
                        "evalgate.Answer, a mapping of its fields or the answer text")


def _line(exc: BaseException) -> str:
    message = " ".join(str(exc).split())
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return text if len(text) <= 300 else text[:299] + "…"
