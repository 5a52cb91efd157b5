"""The target interface: how a case's answer is obtained.

A target is an object with ``async answer(case[, call]) -> Answer`` and ``async aclose()``. It never raises
for a failed call: it returns ``Answer(error=...)`` so the case is ``errored`` and the run goes on.

``call`` (a ``TargetCall``) describes the one call being made: the case, the repeat, the turn of a
conversation (None for a single-turn case), the conversation so far and any request headers to add.
The engine passes it to every target whose ``answer`` takes a second parameter (``accepts_call``); the
conversation loop (``runner.conversation``) fills ``messages`` and ``conversation_id``. Hooks that tag a
call (a ``traceparent`` per case and turn) add to ``headers``: the http target sends them.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from evalgate.model import Answer, Case


@dataclass(slots=True)
class TargetCall:
    """One call to the target (see the module docstring)."""

    case_id: str
    repeat: int = 0
    turn: int | None = None
    """1-based turn of a conversation case; None for a single-turn case."""
    messages: list[dict[str, str]] | None = None
    """The conversation so far as chat messages (``role``: user | assistant, ``content``), ending with this
    turn's user message; None for a single-turn case."""
    conversation_id: str | None = None
    """The id the agent keeps the conversation's state under (``target_conversation: id``)."""
    headers: dict[str, str] = field(default_factory=dict)
    """Extra request headers for this call (sent by the http target)."""
    reply: Any = None
    """Set by a target that reads the agent's raw JSON reply (the http target), so a conversation id the
    agent assigns can be taken from its first reply."""


class Target(Protocol):
    kind: str

    async def answer(self, case: Case, call: TargetCall | None = None) -> Answer: ...

    async def aclose(self) -> None: ...

    def describe(self) -> dict[str, object]: ...


def accepts_call(target: Any) -> bool:
    """Whether ``target.answer`` takes a ``TargetCall`` after the case (every built-in target does; a test
    double or an older custom target may not)."""
    try:
        parameters = list(inspect.signature(target.answer).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in parameters)
