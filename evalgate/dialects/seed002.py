"""Seed 002 (a black-box agent behind one chat endpoint, judged with GEval-style metrics) as a dialect.

Adds its category → judged metrics map (``safety`` → "no drastic advice on rumours", ``math`` → numeric
equivalence, …), the judged metrics it ran on its dataset v3 fields (``passing_criteria`` → relevancy,
``retrieval_context`` → faithfulness, groundedness, context precision and recall, ``language`` →
localization) and its diagnostic keyword-overlap MRR over ``debug_context`` (``context_mrr``; its word
tokenisation and its 0.0 without a ``debug_context`` are the metric's, its overlap the suite option
``context_mrr_min_overlap``). Its deterministic rule checks are ``metrics.rules`` (a case's ``rules:``)
and its ``CASE_IDS`` overriding ``FIRST_N`` is the generic selection order (``dataset.select``).
In a generic suite each of these runs only when named (``metrics:``, ``category_metrics:``).

Its ``FANVISE_*`` variables are aliases of their ``EVALGATE_*`` names (``FANVISE_ALIASES``; the
``EVALGATE_*`` name wins when both are set; any other ``FANVISE_*`` variable gets a notice saying evalgate
does not read it) and turn this dialect on for cases without a kind.
Its agent reads the user's team and league from the request context: a case's ``active_team_id``,
``active_league_id`` and ``team_name`` (and ``EVALGATE_EVAL_*`` defaults of those names) are sent in its
camelCase (``activeTeamId``, ``activeLeagueId``, ``teamName``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evalgate.dialect import CaseFormat, Dialect
from evalgate.model import DialectField

NAME = "seed002"
ENV_PREFIX = "FANVISE_"

FANVISE_ALIASES: dict[str, str] = {
    "FANVISE_JUDGE_PROVIDER": "EVALGATE_JUDGE_PROVIDER",
    "FANVISE_JUDGE_MODEL": "EVALGATE_JUDGE_MODEL",
    "FANVISE_JUDGE_BASE_URL": "EVALGATE_JUDGE_BASE_URL",
    "FANVISE_STRICT_METRICS": "EVALGATE_STRICT_METRICS",
    "FANVISE_FAIL_ON_CRITICAL": "EVALGATE_FAIL_ON_CRITICAL",
    "FANVISE_API_RETRIES": "EVALGATE_API_RETRIES",
    "FANVISE_API_TIMEOUT_SECONDS": "EVALGATE_API_TIMEOUT_SECONDS",
    "FANVISE_METRIC_THRESHOLDS": "EVALGATE_METRIC_THRESHOLDS",
    "FANVISE_EVAL_FIRST_N": "EVALGATE_FIRST_N",
    "FANVISE_EVAL_CASE_IDS": "EVALGATE_CASE_IDS",
    "FANVISE_EVAL_ACTIVE_TEAM_ID": "EVALGATE_EVAL_ACTIVE_TEAM_ID",
    "FANVISE_EVAL_ACTIVE_LEAGUE_ID": "EVALGATE_EVAL_ACTIVE_LEAGUE_ID",
    "FANVISE_EVAL_TEAM_NAME": "EVALGATE_EVAL_TEAM_NAME",
    "FANVISE_EVAL_LANGUAGE": "EVALGATE_EVAL_LANGUAGE",
    "FANVISE_API_URL": "EVALGATE_TARGET_URL",
}
"""Seed 002's variables → evalgate's names (every variable its documentation lists, plus the API URL its
evaluator reads). ``FANVISE_API_URL`` also selects the ``http`` target unless a target is configured."""


CASE_FIELDS = (
    DialectField("active_team_id", str | int | None, after="assertions", aliases=("activeTeamId",)),
    DialectField("active_league_id", str | int | None, after="active_team_id", aliases=("activeLeagueId",)),
    DialectField("team_name", str | None, after="active_league_id", aliases=("teamName",)),
)
"""Seed 002's per-case context (its agent's request carries them)."""


def _implied(merged: dict[str, tuple[Any, str]], env: Mapping[str, str], notices: list[str]) -> None:
    """``FANVISE_*`` variables turn this dialect on for cases without a kind; ``FANVISE_API_URL`` selects the
    http target unless a target is configured."""
    if any(origin.startswith(ENV_PREFIX) for _, origin in merged.values()):
        value, origin = merged.get("compat", ([], "FANVISE_* variables"))
        seeds = value if isinstance(value, list) else [v.strip() for v in str(value).split(",") if v.strip()]
        if NAME not in seeds and "002" not in seeds:
            merged["compat"] = ([*seeds, NAME], origin)
            notices.append("FANVISE_* variables: seed 002's dialect is on for cases without a kind "
                           "(its category → metric map; see docs/migrating.md)")
    url_origin = merged.get("target_url", (None, ""))[1]
    if url_origin == "FANVISE_API_URL" and "target" not in merged:
        merged["target"] = ("http", "FANVISE_API_URL")

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
    name=NAME,
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
    kind_aliases=("002", "blackbox-agent"),
    compat_aliases=("002", "2"),
    case_format=CaseFormat("seed 002 cases", (("id", "id"), ("category", "category"), ("input", "input"))),
    env_prefix=ENV_PREFIX,
    env_aliases=FANVISE_ALIASES,
    implied=_implied,
    case_fields=CASE_FIELDS,
    metric_docs={**{name: "Seed 002 GEval: {}" for name in GEVAL},
                 **{name: "Seed 002: {}" for name in ("relevancy", "faithfulness", "context_precision",
                                                      "context_recall")},
                 "context_mrr": "Seed 002's MRR, {}"},
    request_context=("active_team_id", "active_league_id", "team_name"),
    request_names=CAMEL_CASE,
    elsewhere="FANVISE_* variables (they turn this dialect on)",
)
