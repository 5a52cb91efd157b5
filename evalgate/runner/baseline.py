"""The baseline stage of a run: the base run it compares with (``load_baseline`` → ``Base``), looked up
before the target is opened, its records slimmed to what the comparison reads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalgate.config.sections import GateSettings
from evalgate.runner.engine import off_loop
from evalgate.runner.finish import compared_record
from evalgate.runner.pairwise import base_outputs
from evalgate.store import reader
from evalgate.store.reader import BaselineLookup


@dataclass(frozen=True)
class Base:
    """The base run the run compares with (``load_baseline``): none, or its results slimmed to what the
    comparison reads, with its simulated conversations to replay and, for ``pairwise``, its answers."""

    lookup: BaselineLookup | None = None
    replay: dict[str, dict[str, Any]] = field(default_factory=dict)
    """case id → the base run's simulated user and turns (``simulated_turns``)."""
    before: dict[str, str] = field(default_factory=dict)
    """case id → the base run's answer (``pairwise``: the judge is asked which is better where one changed)."""


async def load_baseline(gate: GateSettings, loader: Callable[[], BaselineLookup] | None, cwd: Path | None) -> Base:
    """The ``baseline`` (``auto``: ``loader``; a path: read here), looked up in a daemon thread: an interrupted
    lookup is left behind, never waited for at exit. Nothing is looked up for ``none`` (the default)."""
    if gate.baseline_kind == "none":
        return Base()
    lookup = await off_loop(reader.resolve_baseline, gate.baseline, auto=loader, cwd=cwd)
    if lookup is None or lookup.document is None:
        return Base(lookup)
    records = lookup.document["results"]
    replay = simulated_turns(records)
    before = base_outputs(records) if gate.pairwise else {}
    # a baseline file is streamed (store.reader.StoredRecords): slimmed as it is read again, never held
    lookup.document["results"] = records.map(compared_record) if hasattr(records, "map") else \
        [compared_record(r) for r in records]
    return Base(lookup, replay, before)


def simulated_turns(records: Any) -> dict[str, dict[str, Any]]:
    """case id → the user messages and answers of its simulated conversation in the base run (repeat 0), so
    a simulated user replays them while the agent answers as it did (``runner.conversation``)."""
    found: dict[str, dict[str, Any]] = {}
    for record in records or []:
        conversation = record.get("conversation") if isinstance(record, dict) else None
        if not isinstance(conversation, dict) or not conversation.get("simulated") or record.get("repeat"):
            continue
        found[str(record.get("id"))] = {
            "user": conversation.get("user"),
            "turns": [{"input": t.get("input"), "output": t.get("output")}
                      for t in conversation.get("turns") or [] if isinstance(t, dict)]}
    return found
