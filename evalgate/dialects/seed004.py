"""Seed 004 (golden dataset routed to specialists) as a dialect.

Adds its 1–5 ``response_quality`` (judge, or its heuristic without one; gated ≥ 3.5) and its weighted
``composite`` (0.30 specialist + 0.25 keywords + 0.20 data sources + 0.25 quality/5; gated ≥ 0.75) on its
golden cases. It reads seed 004's ``eval_config.yaml`` key by key (``map_eval_config``), its
``EVAL_JUDGE_API_KEY`` (the judge's API key, provider ``openai`` unless one is configured) and
``EVAL_API_KEY`` (the agent's bearer token for ``--api-url`` / ``api.url``), and its runner's flags
(``--ids``, ``--api-url``, ``--output``: ``CLI_FLAGS``), all in this module; its results document is
below too (``parts``). Its rag / sap / mes indicator vocabularies and composite weights are the generic
defaults of the suite options ``data_source_indicators`` and ``composite_weights``
(``config.options``); its ``llm_judge.rubric`` is ``response_quality_rubric``; its ``--dry-run`` is
``evalgate validate``'s dataset summary (``dataset.summary``).

Its ``response_quality`` judge is shown the case's ``verified_answer_summary`` (the ``summary`` of its
prompt), and that summary is the reference a positive calibration control answers with
(``prompt_fields``, ``reference_fields``); a suite's ``llm_judge.rubric`` replaces the template's rubric.

Its output document (``--compat seed004``) is its ``results.json``: ``metadata`` (``timestamp``,
``total_queries``, ``errors``), ``aggregate`` (``total_queries``, ``specialist_accuracy``,
``avg_keyword_coverage``, ``avg_data_source_match``, ``avg_response_quality``, ``composite_score``,
``pass_verdict``, ``by_category``, ``by_difficulty``) and ``per_query`` (scores, ``keywords_found`` /
``keywords_missing``, ``data_sources_found``, …). Aggregates are over the queries that did not error, as
seed 004 computes them; the composite is the weighted sum of those averages; ``pass_verdict`` applies the
run's thresholds for the five metrics. Its runner's ``--output`` names this document
(``compat_output``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from evalgate.config.suite import did_you_mean, show_value
from evalgate.dialect import CaseFormat, CliFlag, ConfigFile, Dialect, OutputDocument, Passes
from evalgate.errors import UserError
from evalgate.model import STATUS_TEXT, CaseResult, DialectField
from evalgate.report.documents import Average, admits, build_document, chosen, metric_details, metric_value, totals
from evalgate.safety.redact import register_secret

NAME = "seed004"

METRICS = ("specialist_match", "keyword_coverage", "data_source_match", "response_quality", "composite")
WEIGHTS = {"specialist_match": 0.30, "keyword_coverage": 0.25, "data_source_match": 0.20, "response_quality": 0.25}
RESPONSE_TEXT_CHARS = 2000
"""Seed 004 truncates each per_query response_text to this many characters."""


def _detect(data: Mapping[str, Any], wrapper: str | None) -> str | None:
    """Seed 004's spellings: ``expected_specialist`` with ``query``."""
    return "it uses seed 004's field names" if "expected_specialist" in data and "query" in data else None


def _environment(env: Mapping[str, str], notices: list[str]) -> dict[str, tuple[Any, str]]:
    """Settings from seed 004's variables: ``EVAL_JUDGE_API_KEY`` → ``judge_api_key``."""
    layer: dict[str, tuple[Any, str]] = {}
    key = env.get("EVAL_JUDGE_API_KEY", "").strip()
    if key and not env.get("EVALGATE_JUDGE_API_KEY", "").strip():
        layer["judge_api_key"] = (key, "EVAL_JUDGE_API_KEY")
        notices.append("EVAL_JUDGE_API_KEY is read as the judge's API key (judge provider openai unless "
                       "EVALGATE_JUDGE_PROVIDER says otherwise); evalgate's name is OPENAI_API_KEY")
    return layer


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


API_ORIGINS = ("--api-url", "seed 004 eval_config")
"""Where seed 004's agent URL came from when ``EVAL_API_KEY`` is its bearer token."""


def _implied(merged: dict[str, tuple[Any, str]], env: Mapping[str, str], notices: list[str]) -> None:
    """Seed 004's API (``--api-url`` or eval_config ``api.url``) takes ``EVAL_API_KEY`` as its bearer token."""
    url_origin = merged.get("target_url", (None, ""))[1]
    agent_key = env.get("EVAL_API_KEY", "").strip()
    if agent_key and any(origin in url_origin for origin in API_ORIGINS):
        headers = dict(merged.get("target_headers", ({}, ""))[0] or {})
        if not any(name.lower() == "authorization" for name in headers):
            headers["Authorization"] = f"Bearer {agent_key}"
            register_secret(agent_key)
            merged["target_headers"] = (headers, "EVAL_API_KEY")
            notices.append("EVAL_API_KEY is sent as the agent's bearer token (seed 004); evalgate's setting is "
                           "target_headers")


def _read_cli(args: Any, values: dict[str, Any], origins: dict[str, str], notices: list[str]) -> None:
    """``--ids A B`` → case_ids; ``--api-url URL`` → target http at URL/chat; ``--output FILE`` → seed 004's
    results document there (compat seed004)."""
    ids = getattr(args, "ids", None)
    if ids:
        if values.get("case_ids"):
            raise UserError("give case ids with --case-ids or --ids, not both", where="--ids")
        values["case_ids"] = [part.strip() for item in ids for part in item.split(",") if part.strip()]
        origins["case_ids"] = "--ids"
        notices.append(f"--ids {' '.join(ids)} is read as --case-ids {','.join(values['case_ids'])}")
    api_url = getattr(args, "api_url", None)
    if api_url:
        if values.get("target_url"):
            raise UserError("give the agent's URL with --target-url or --api-url, not both", where="--api-url")
        values.setdefault("target", "http")
        values["target_url"] = chat_url(api_url)
        origins["target_url"] = "--api-url"
        notices.append(f"--api-url {api_url} is read as --target http --target-url {values['target_url']} "
                       "(seed 004's runner posts {\"message\": query} to URL/chat)")
    if values.get("compat_output"):
        compat = [part for part in str(values.get("compat") or "").split(",") if part.strip()]
        if NAME not in compat and "004" not in compat:
            values["compat"] = ",".join([*compat, NAME])
        origins["compat_output"] = "--output"
        notices.append(f"--output {values['compat_output']}: seed 004's results document is written there; "
                       "evalgate's own results.json and results.db stay in --output-dir")


CLI_FLAGS = (
    CliFlag(("--ids",), after="--case-ids",
            options={"nargs": "+", "metavar": "ID", "help": "space-separated case ids (seed 004's spelling of --case-ids)"}),
    CliFlag(("--output",), after="--compat", setting=True, validate=False,
            options={"dest": "compat_output", "metavar": "FILE",
                     "help": "seed 004's --output: write seed 004's results document to FILE too"}),
    CliFlag(("--api-url",), after="--target-url", validate=False,
            options={"metavar": "URL", "help": "seed 004's agent API: --target http --target-url URL/chat"}),
)
"""Seed 004's runner flags."""

VALID: dict[str, tuple[str, ...]] = {
    "expected_specialist": ("procedure_expert", "quality_inspector", "maintenance_advisor", "data_analyst",
                            "document_analyst"),
    "difficulty": ("simple", "medium", "complex"),
    "category": ("procedure", "quality", "maintenance", "data", "document"),
    "expected_data_sources": ("rag", "sap", "mes"),
}
"""Seed 004's documented value sets: its five specialists, difficulties, categories and data sources."""

CASE_FIELDS = (
    DialectField("expected_specialist", str | None, after="expected_keywords", turn_after="expected_sources",
                 role="expected_agent"),
    DialectField("verified_answer_summary", str | None, after="expected_data_sources", criteria=True,
                 role="reference_answer"),
)
"""Seed 004's golden fields: the specialist the query should be routed to, and the verified answer."""

CASE_FORMAT = CaseFormat(
    "seed 004 golden dataset",
    (("id", "id"), ("input", "query"), ("expected_specialist", "expected_specialist"),
     ("expected_keywords", "expected_keywords"), ("expected_data_sources", "expected_data_sources"),
     ("difficulty", "difficulty"), ("category", "category"),
     ("verified_answer_summary", "verified_answer_summary")),
    valid=VALID, checked_when_detected=True)
class _Group:
    """One ``by_category`` / ``by_difficulty`` row, accumulated."""

    def __init__(self) -> None:
        self.count = 0
        self.averages = {name: Average() for name in ("specialist_match", "keyword_coverage", "response_quality",
                                                      "latency_ms")}

    def add(self, record: CaseResult) -> None:
        self.count += 1
        for name in ("specialist_match", "keyword_coverage", "response_quality"):
            self.averages[name].add(metric_value(record, name))
        self.averages["latency_ms"].add(record.latency_ms)

    def row(self) -> dict[str, Any]:
        return {"count": self.count, "specialist_accuracy": self.averages["specialist_match"].value,
                "avg_keyword_coverage": self.averages["keyword_coverage"].value,
                "avg_response_quality": self.averages["response_quality"].value,
                "avg_latency_ms": self.averages["latency_ms"].value}


def _golden_weights(record: CaseResult) -> dict[str, float] | None:
    """The composite weights the run used, from a composite's details (None when this record has none)."""
    weights = metric_details(record, "composite").get("weights")
    if isinstance(weights, Mapping) and set(weights) == set(WEIGHTS):
        return {name: float(weights[name]) for name in WEIGHTS}
    return None


def _per_query(record: CaseResult, include_responses: bool) -> dict[str, Any]:
    keywords = metric_details(record, "keyword_coverage")
    sources = metric_details(record, "data_source_match")
    specialist = metric_details(record, "specialist_match")
    expected = record.expected
    answer = record.answer
    match = metric_value(record, "specialist_match")
    coverage = metric_value(record, "keyword_coverage")
    source_match = metric_value(record, "data_source_match")
    quality = metric_value(record, "response_quality")
    output = record.output
    latency = record.latency_ms
    entry: dict[str, Any] = {
        "id": record.id,
        "query": record.input,
        "category": record.category,
        "difficulty": record.difficulty,
        "expected_specialist": expected.get("expected_specialist", specialist.get("expected")),
        "actual_specialist": answer.get("agent_id", specialist.get("actual")),
        "specialist_match": None if match is None else match == 1.0,
        "keyword_coverage": None if coverage is None else round(coverage, 3),
        "keywords_found": list(keywords.get("found") or []),
        "keywords_missing": list(keywords.get("missing") or []),
        "data_source_match": None if source_match is None else round(source_match, 3),
        "data_sources_found": list(sources.get("used") or []),
        "response_quality": None if quality is None else round(quality, 2),
        "response_length": len(output) if isinstance(output, str) else 0,
        "latency_ms": int(latency) if latency is not None else 0,
        "error": record.error,
    }
    if include_responses and isinstance(output, str) and output:
        entry["response_text"] = output[:RESPONSE_TEXT_CHARS]
    return entry


class _Totals:
    def __init__(self) -> None:
        self.averages = {name: Average() for name in METRICS[:4]}
        self.weights: dict[str, float] | None = None
        self.total = self.errors = 0
        self.groups: dict[str, dict[str, _Group]] = {"category": {}, "difficulty": {}}

    def add(self, record: CaseResult) -> None:
        self.total += 1
        self.weights = self.weights or _golden_weights(record)
        if STATUS_TEXT[record.status] == "errored":
            self.errors += 1
            return
        for name, average in self.averages.items():
            average.add(metric_value(record, name))
        for field, rows in self.groups.items():
            rows.setdefault(str(getattr(record, field)), _Group()).add(record)


def parts(head: Mapping[str, Any], passes: Passes, include_responses: bool = True
          ) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """Its results.json (keys in the module docstring) as its fields but ``per_query`` and a generator of
    ``per_query``'s entries: two passes over the records, memory independent of their number (one row per
    category and difficulty). ``head`` is read after the first pass."""
    found, narrowed = totals(passes, METRICS, _Totals)
    weights = found.weights or dict(WEIGHTS)
    means = {name: average.value for name, average in found.averages.items()}
    composite = None
    if all(means[name] is not None for name in WEIGHTS):
        scaled = {name: float(means[name] or 0.0) for name in WEIGHTS}
        scaled["response_quality"] /= 5.0
        composite = round(sum(weights[name] * scaled[name] for name in WEIGHTS), 6)
    thresholds = head.get("thresholds") or {}
    checks = [admits(thresholds.get(name), value) for name, value in (
        ("specialist_match", means["specialist_match"]), ("keyword_coverage", means["keyword_coverage"]),
        ("data_source_match", means["data_source_match"]), ("response_quality", means["response_quality"]),
        ("composite", composite)) if value is not None]
    all_present = composite is not None
    document = {
        "metadata": {"timestamp": head.get("timestamp"), "total_queries": found.total, "errors": found.errors},
        "aggregate": {
            "total_queries": found.total,
            "specialist_accuracy": means["specialist_match"],
            "avg_keyword_coverage": means["keyword_coverage"],
            "avg_data_source_match": means["data_source_match"],
            "avg_response_quality": means["response_quality"],
            "composite_score": composite,
            "pass_verdict": bool(all_present and all(check is not False for check in checks)),
            "by_category": {label: group.row() for label, group in found.groups["category"].items()},
            "by_difficulty": {label: group.row() for label, group in found.groups["difficulty"].items()},
        },
    }
    return document, (_per_query(record, include_responses) for record in chosen(passes, METRICS, narrowed))


def results_json(document: Mapping[str, Any], include_responses: bool = True) -> dict[str, Any]:
    """Its results.json for a results ``document`` in memory (keys in the module docstring)."""
    return build_document(DIALECT.name, document, include_responses)


DIALECT = Dialect(
    name=NAME,
    label="seed 004 (golden dataset)",
    owns=("response_quality", "composite"),
    owned_when={"response_quality": "the case has expected_specialist or verified_answer_summary",
                "composite": "the case has expected_specialist or verified_answer_summary"},
    detect=_detect,
    detect_order=20,
    markers=frozenset({"expected_specialist"}),
    kind_aliases=("004", "golden-dataset"),
    compat_aliases=("004", "4"),
    case_format=CASE_FORMAT,
    value_fields=frozenset({"expected_specialist"}),
    env_settings=_environment,
    config_file=ConfigFile(is_eval_config, map_eval_config, "seed 004 eval_config"),
    implied=_implied,
    cli_flags=CLI_FLAGS,
    cli_read=_read_cli,
    case_fields=CASE_FIELDS,
    elsewhere="eval_config.yaml and EVAL_JUDGE_API_KEY, its output document "
              "seed004-results.json",
    document=OutputDocument("seed004-results.json", parts, "per_query", takes_output=True),
    expectations={"expected_specialist": "expected_keywords", "verified_answer_summary": "expected_data_sources"},
    reference_fields={"response_quality": "verified_answer_summary"},
    prompt_fields={"summary": "verified_answer_summary"},
    metric_docs={"composite": "Seed 004's {}",
                 "specialist_match": "{}. The agent the case expects is its expected_specialist."},
    setting_docs={"compat_output": "{}: seed 004's ``--output results.json``.",
                  "compat_include_responses": "Seed 004's ``output.include_responses``: {}",
                  "judge_api_key": "{} (seed 004: ``EVAL_JUDGE_API_KEY`` / ``llm_judge.api_key``)."},
)
