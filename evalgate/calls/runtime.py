"""What every target and judge of one run shares (``Runtime``): the executor (``calls.executor``), the
cost ledger and price table (``calls.costs``) and the wire thread (``calls.wire``)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evalgate.calls.costs import CostLedger, Price, price_table
from evalgate.calls.executor import Executor
from evalgate.calls.wire import WireLoop

if TYPE_CHECKING:
    from evalgate.config.settings import Settings


TARGET_REPLY_BYTES_PER_CHAR = 16
"""A model under test's reply body is read up to 16 bytes per allowed answer character (as an HTTP
target's, ``targets.http``)."""


@dataclass
class Runtime:
    """What every target and judge of one run shares: the executor (retries, limits, stop event), the
    cost ledger (budget), the price table and the wire thread on which targets make their timed calls."""

    executor: Executor
    ledger: CostLedger
    prices: dict[str, Price]
    chat_client: str = "direct"
    """``direct`` or ``openai-sdk`` (see ``calls.chat``)."""
    caps: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    """Role (``judge``, ``target``) → configured (requests, tokens) per minute (``calls.ratelimit``)."""
    wire: WireLoop = field(default_factory=lambda: WireLoop())
    """Started by the first target call that uses it; closed by ``aclose``."""
    reply_bytes: dict[str, tuple[int, str]] = field(default_factory=dict)
    """Role → (largest reply body read in bytes, the setting that sets it) for chat calls (``calls.chat``)."""

    async def aclose(self) -> None:
        await self.wire.aclose()

    @property
    def stop(self) -> asyncio.Event:
        return self.executor.stop

    @classmethod
    def from_settings(cls, settings: Settings, stop: asyncio.Event | None = None) -> Runtime:
        return cls(Executor.from_settings(settings, stop), CostLedger(settings.max_cost), price_table(settings.prices),
                   chat_client=settings.chat_client,
                   caps={"judge": (settings.judge_rpm, settings.judge_tpm),
                         "target": (settings.target_rpm, settings.target_tpm)},
                   reply_bytes={"judge": (settings.judge_max_reply_bytes, "judge_max_reply_bytes"),
                                "target": (TARGET_REPLY_BYTES_PER_CHAR * settings.max_answer_chars,
                                           "16 × max_answer_chars")})

    @classmethod
    def default(cls, stop: asyncio.Event | None = None) -> Runtime:
        return cls(Executor(stop=stop), CostLedger(), price_table({}))

    def metadata(self) -> dict[str, Any]:
        return {"calls": self.executor.metadata(), "cost": self.ledger.metadata()}
