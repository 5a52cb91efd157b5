"""Seed 002 (a black-box agent behind one chat endpoint, judged with GEval-style metrics) as a dialect.

Adds its category → judged metrics map (``safety`` → "no drastic advice on rumours", ``math`` → numeric
equivalence, …), the judged metrics it ran on its dataset v3 fields (``passing_criteria`` → relevancy,
``retrieval_context`` → faithfulness, groundedness, context precision and recall, ``language`` →
localization) and its diagnostic keyword-overlap MRR over ``debug_context`` (``context_mrr``).
In a generic suite each of these runs only when named (``metrics:``, ``category_metrics:``).

Its agent reads the user's team and league from the request context: a case's ``active_team_id``,
``active_league_id`` and ``team_name`` (and ``EVALGATE_EVAL_*`` defaults of those names) are sent in its
camelCase (``activeTeamId``, ``activeLeagueId``, ``teamName``).
"""

from __future__ import annotations

from evalgate.dialect import Dialect

CATEGORY_METRICS: dict[str, tuple[str, ...]] = {
    "math": ("math",),
    "arithmetic": ("math",),
    "safety": ("safety",),
    "policy": ("policy",),
    "refusal": ("policy",),
    "localization": ("localization",),
    "hallucination": ("groundedness",),
    "audit": ("correctness",),
    "dialogue": ("correctness",),
    "matchup": ("correctness", "actionability"),
    "waiver": ("correctness", "actionability"),
    "strategy": ("correctness", "actionability"),
    "agentic": ("correctness", "tool_calling"),
    "supervisor": ("tool_calling",),
    "game_log": ("tool_calling",),
    "optimizer": ("actionability",),
}
"""Seed 002's category → judged metrics (correctness on audit, matchup, waiver, dialogue, agentic and
strategy; tool_calling on agentic, supervisor and game_log; the GEval policy metrics on their own
categories)."""

GEVAL = ("math", "safety", "groundedness", "policy", "localization", "actionability", "correctness", "tool_calling")
"""Its GEval metrics (their descriptions say so)."""

CAMEL_CASE = {"active_team_id": "activeTeamId", "active_league_id": "activeLeagueId", "team_name": "teamName"}
"""Request context keys → the names its agent reads."""

DIALECT = Dialect(
    name="seed002",
    label="seed 002 (black-box agent)",
    owns=("relevancy", "faithfulness", "groundedness", "localization", "context_precision", "context_recall",
          "context_mrr"),
    owned_when={
        "context_mrr": "the case has expected_output (MRR over the target's debug_context)",
        "relevancy": "the case has passing_criteria",
        "faithfulness": "the case has retrieval_context",
        "groundedness": "the case has retrieval_context",
        "context_precision": "the case has retrieval_context",
        "context_recall": "the case has retrieval_context and expected_output",
        "localization": "the case has language",
    },
    category_metrics=CATEGORY_METRICS,
    metric_docs={**{name: "Seed 002 GEval: {}" for name in GEVAL},
                 **{name: "Seed 002: {}" for name in ("relevancy", "faithfulness", "context_precision",
                                                      "context_recall")}},
    request_context=("active_team_id", "active_league_id", "team_name"),
    request_names=CAMEL_CASE,
    elsewhere="FANVISE_* variables in config/legacy.py (they turn this dialect on)",
)
