"""Each case's expectation digest (``expectation`` in every case record): what the case asks and expects,
so a pull request that edits a case's expectations is seen against the base run (``verdict.compare``,
``dataset_changes``; ``verdict.policy``, "expectations edited").

digest = BLAKE2b-64 over the case's fields as JSON (pydantic's serialiser, defaults left out) minus its
answer (what a recorded target answers: ``output``, ``sources``, ``tools_used`` …, in each turn too) and
its descriptive text (``description``, ``difficulty``, ``evolution_type``) and ``risk_level`` (compared on its
own: ``verdict.compare.dataset_changes``, ``demoted``), then the case's plan: the metrics
that run on it (after its suite's ``metrics``/``exclude_metrics``/``category_metrics`` and its ``assert:``
entries), their per-case thresholds and its metric options. 16 hex characters per case; a plan's part is
computed once per plan.
"""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import BaseModel

from evalgate.model import Case

ANSWER_FIELDS = frozenset({"output", "sources", "agents_called", "tools_used", "agent_id", "data_sources",
                           "mentions", "ranked_list", "num_tokens", "latency_ms", "debug_context", "trace_file"})
"""A case's recorded answer (the ``recorded`` target's): the system's side, never an expectation."""
DESCRIPTIVE_FIELDS = frozenset({"description", "difficulty", "evolution_type", "risk_level"})
"""Left out: descriptive text, and ``risk_level``, which every record holds and the comparison reads itself
(a demotion is listed as one, a promotion to critical is no loosening)."""
_TURN_ANSWER = {name for name in ANSWER_FIELDS if name in {"output", "sources", "agents_called", "tools_used",
                                                           "agent_id", "data_sources", "trace_file"}}
_EXCLUDE: Any = {name: True for name in ANSWER_FIELDS | DESCRIPTIVE_FIELDS} | {
    "turns": {"__all__": {name: True for name in _TURN_ANSWER}}}
PLANS_KEPT = 4096


class ExpectationDigests:
    """``digest(case, plan)``; the plan parts of the last ``PLANS_KEPT`` plans are kept (plans are shared)."""

    def __init__(self) -> None:
        self._plans: dict[int, tuple[Any, bytes]] = {}

    def digest(self, case: Case, plan: Any) -> str:
        text = case.model_dump_json(exclude=_EXCLUDE, exclude_defaults=True).encode()
        return hashlib.blake2b(text + b"\x00" + self._plan_part(plan), digest_size=8).hexdigest()

    def _plan_part(self, plan: Any) -> bytes:
        kept = self._plans.get(id(plan))
        if kept is not None and kept[0] is plan:
            return kept[1]
        if len(self._plans) >= PLANS_KEPT:
            self._plans.clear()
        options = getattr(plan, "options", None)
        thresholds = getattr(plan, "thresholds", None) or {}
        dumped = options.model_dump_json() if isinstance(options, BaseModel) else repr(options)
        text = repr((tuple(getattr(plan, "names", ())), sorted((name, repr(value)) for name, value in thresholds.items()),
                     dumped))
        part = hashlib.blake2b(text.encode(), digest_size=16).digest()
        self._plans[id(plan)] = (plan, part)
        return part
