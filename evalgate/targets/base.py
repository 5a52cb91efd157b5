"""The target interface: how a case's answer is obtained.

A target is an object with ``async answer(case) -> Answer`` and ``async aclose()``. It never raises
for a failed call: it returns ``Answer(error=...)`` so the case is ``errored`` and the run goes on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from evalgate.model import Answer, Case


class Target(Protocol):
    kind: str

    async def answer(self, case: Case) -> Answer: ...

    async def aclose(self) -> None: ...

    def describe(self) -> dict[str, object]: ...
