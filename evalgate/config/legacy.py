"""The in-house frameworks' own spellings, read as evalgate settings (each with a one-line notice).

* Seed 002 (FanVise): ``FANVISE_*`` variables are aliases of their ``EVALGATE_*`` names
  (``FANVISE_ALIASES``); the ``EVALGATE_*`` name wins when both are set. Any other ``FANVISE_*`` variable
  gets a notice saying evalgate does not read it (never silently ignored).
* Seed 004 (golden dataset): ``EVAL_JUDGE_API_KEY`` is the judge's API key (provider ``openai`` unless
  one is configured), ``EVAL_API_KEY`` the agent's bearer token, and the runner's ``eval_config.yaml``
  is read key by key (``map_eval_config``); an unknown key is still an error.
* Langfuse's own variables (``LANGFUSE_PUBLIC_KEY``, ``LANGFUSE_SECRET_KEY``, ``LANGFUSE_HOST`` /
  ``LANGFUSE_BASE_URL``) feed the ``langfuse_*`` settings.

Only this module and ``settings`` know these names; nothing below ``config`` reads the environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evalgate.config.suite import did_you_mean, show_value
from evalgate.errors import UserError

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

LANGFUSE_VARIABLES: dict[str, str] = {
    "LANGFUSE_PUBLIC_KEY": "langfuse_public_key",
    "LANGFUSE_SECRET_KEY": "langfuse_secret_key",
    "LANGFUSE_HOST": "langfuse_host",
    "LANGFUSE_BASE_URL": "langfuse_host",
}


def fanvise_environment(env: Mapping[str, str], notices: list[str]) -> dict[str, str]:
    """``env`` plus each set ``FANVISE_*`` variable under its ``EVALGATE_*`` name (unless that one is set:
    it wins); one notice per variable read or ignored."""
    merged = dict(env)
    for name in sorted(n for n in env if n.startswith("FANVISE_")):
        value = env[name]
        if not value.strip():
            continue
        target = FANVISE_ALIASES.get(name)
        if target is None:
            notices.append(f"{name} is not read by evalgate (no equivalent setting); it has no effect")
            continue
        if env.get(target, "").strip():
            notices.append(f"{name} is ignored: {target} is also set and wins")
            continue
        merged[target] = value
        notices.append(f"{name} is read as {target}; rename it to {target}")
    return merged


def seed004_environment(env: Mapping[str, str], notices: list[str]) -> dict[str, tuple[Any, str]]:
    """Settings from seed 004's variables: ``EVAL_JUDGE_API_KEY`` → ``judge_api_key``."""
    layer: dict[str, tuple[Any, str]] = {}
    key = env.get("EVAL_JUDGE_API_KEY", "").strip()
    if key and not env.get("EVALGATE_JUDGE_API_KEY", "").strip():
        layer["judge_api_key"] = (key, "EVAL_JUDGE_API_KEY")
        notices.append("EVAL_JUDGE_API_KEY is read as the judge's API key (judge provider openai unless "
                       "EVALGATE_JUDGE_PROVIDER says otherwise); evalgate's name is OPENAI_API_KEY")
    return layer


def langfuse_environment(env: Mapping[str, str]) -> dict[str, tuple[Any, str]]:
    """Settings from Langfuse's own variables (``LANGFUSE_HOST`` wins over ``LANGFUSE_BASE_URL``)."""
    layer: dict[str, tuple[Any, str]] = {}
    for variable in ("LANGFUSE_BASE_URL", "LANGFUSE_HOST", "LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY"):
        value = env.get(variable, "").strip()
        if value:
            layer[LANGFUSE_VARIABLES[variable]] = (value, variable)
    return layer


# --- seed 004's eval_config.yaml ----------------------------------------------------------------------

EVAL_CONFIG_SECTIONS: dict[str, frozenset[str]] = {
    "api": frozenset({"url", "api_key", "tenant_id", "user_id", "timeout_seconds", "request_delay_seconds"}),
    "scoring": frozenset({"weights", "thresholds"}),
    "llm_judge": frozenset({"api_key", "api_base", "model", "temperature", "max_tokens", "rubric"}),
    "output": frozenset({"default_path", "include_responses"}),
}
"""The sections and keys of seed 004's ``eval_config.yaml`` (API access, scoring thresholds and weights,
the LLM judge, the output file)."""
EVAL_CONFIG_WEIGHTS = ("specialist_match", "keyword_coverage", "data_source_match", "response_quality")
EVAL_CONFIG_THRESHOLDS: dict[str, str] = {
    "specialist_accuracy_min": "specialist_match",
    "keyword_coverage_min": "keyword_coverage",
    "data_source_accuracy_min": "data_source_match",
    "response_quality_min": "response_quality",
    "composite_score_min": "composite",
}
"""Seed 004's threshold names → evalgate metrics (each a minimum: value ≥ threshold)."""
SEED004_CHAT_PATH = "/chat"
"""Seed 004's runner posts ``{"message": query}`` to ``{api-url}/chat``."""


def is_eval_config(data: Mapping[str, Any], evalgate_keys: frozenset[str] = frozenset()) -> bool:
    """True when a config file's top level is seed 004's ``eval_config.yaml``: it has one of that file's
    sections and no evalgate key (``evalgate_keys``), so a misspelt section is reported as such."""
    keys = {str(key) for key in data}
    return bool(keys & set(EVAL_CONFIG_SECTIONS)) and not keys & evalgate_keys


def chat_url(api_url: str) -> str:
    """The URL seed 004's runner calls for ``api_url``: ``{api_url}/chat``."""
    return api_url.rstrip("/") + SEED004_CHAT_PATH


def map_eval_config(data: Mapping[str, Any], where: str, notices: list[str]
                    ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Seed 004's ``eval_config.yaml`` as (settings, suite-level keys), key by key.

    api.url → target http at ``{url}/chat``; api.api_key → ``Authorization: Bearer``; api.tenant_id /
    api.user_id → ``X-Tenant-ID`` / ``X-User-ID`` headers; api.timeout_seconds → api_timeout_seconds;
    scoring.weights → options.composite_weights; scoring.thresholds.*_min → thresholds (minimums);
    llm_judge.api_key / api_base / model → the judge (provider openai); llm_judge.temperature → the
    response_quality judge's temperature; llm_judge.rubric → options.response_quality_rubric;
    output.default_path → compat_output (seed 004's results document); output.include_responses →
    compat_include_responses. api.request_delay_seconds and llm_judge.max_tokens are accepted with a
    notice (evalgate bounds calls with ``concurrency`` and sizes judge replies itself). Unknown keys raise
    ``UserError`` naming the key.
    """
    settings: dict[str, Any] = {"compat": ["seed004"]}
    suite: dict[str, Any] = {}
    headers: dict[str, str] = {}
    for section in data:
        if str(section) not in EVAL_CONFIG_SECTIONS:
            raise UserError(f"unknown key {section!r}{did_you_mean(str(section), EVAL_CONFIG_SECTIONS)}; seed 004's "
                            f"eval_config.yaml has {', '.join(EVAL_CONFIG_SECTIONS)}", where=where)
    for section, body in data.items():
        body = body or {}
        if not isinstance(body, Mapping):
            raise UserError(f"{section}: must be a mapping (got {show_value(body)})", where=where)
        allowed = EVAL_CONFIG_SECTIONS[str(section)]
        for key in body:
            if str(key) not in allowed:
                raise UserError(f"unknown key '{section}.{key}'{did_you_mean(str(key), allowed)}; "
                                f"{section} takes {', '.join(sorted(allowed))}", where=where)
    api = data.get("api") or {}
    if api.get("url"):
        settings["target"] = "http"
        settings["target_url"] = chat_url(str(api["url"]))
    if api.get("api_key"):
        headers["Authorization"] = f"Bearer {api['api_key']}"
    if api.get("tenant_id") is not None:
        headers["X-Tenant-ID"] = str(api["tenant_id"])
    if api.get("user_id") is not None:
        headers["X-User-ID"] = str(api["user_id"])
    if headers:
        settings["target_headers"] = headers
    if api.get("timeout_seconds") is not None:
        settings["api_timeout_seconds"] = api["timeout_seconds"]
    if api.get("request_delay_seconds") is not None:
        notices.append(f"{where}: api.request_delay_seconds is not used: evalgate bounds calls in flight with "
                       "concurrency (set concurrency: 1 for one request at a time)")
    scoring = data.get("scoring") or {}
    weights = scoring.get("weights")
    if weights is not None:
        if not isinstance(weights, Mapping):
            raise UserError(f"scoring.weights: must be a mapping (got {show_value(weights)})", where=where)
        for key in weights:
            if key not in EVAL_CONFIG_WEIGHTS:
                raise UserError(f"unknown key 'scoring.weights.{key}'{did_you_mean(str(key), EVAL_CONFIG_WEIGHTS)}",
                                where=where)
        suite.setdefault("options", {})["composite_weights"] = dict(weights)
    thresholds = scoring.get("thresholds")
    if thresholds is not None:
        if not isinstance(thresholds, Mapping):
            raise UserError(f"scoring.thresholds: must be a mapping (got {show_value(thresholds)})", where=where)
        mapped: dict[str, Any] = {}
        for key, value in thresholds.items():
            metric = EVAL_CONFIG_THRESHOLDS.get(str(key))
            if metric is None:
                raise UserError(f"unknown key 'scoring.thresholds.{key}'"
                                f"{did_you_mean(str(key), EVAL_CONFIG_THRESHOLDS)}; takes "
                                f"{', '.join(EVAL_CONFIG_THRESHOLDS)}", where=where)
            mapped[metric] = {"min": value} if not isinstance(value, Mapping) else value
        suite["thresholds"] = mapped
    judge = data.get("llm_judge") or {}
    if judge.get("api_key"):
        settings["judge_api_key"] = str(judge["api_key"])
    if judge.get("api_base"):
        settings["judge_base_url"] = str(judge["api_base"])
    if judge.get("model"):
        settings["judge_model"] = str(judge["model"])
    if judge.get("temperature") is not None:
        settings["judge_temperatures"] = {"response_quality": judge["temperature"]}
    if judge.get("max_tokens") is not None:
        notices.append(f"{where}: llm_judge.max_tokens is not used: evalgate sizes each judge reply itself")
    if judge.get("rubric"):
        suite.setdefault("options", {})["response_quality_rubric"] = str(judge["rubric"])
    output = data.get("output") or {}
    if output.get("default_path"):
        settings["compat_output"] = str(output["default_path"])
    if output.get("include_responses") is not None:
        settings["compat_include_responses"] = output["include_responses"]
    notices.append(f"{where} is seed 004's eval_config.yaml: read key by key (see docs/migrating.md)")
    return settings, suite
