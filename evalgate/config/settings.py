"""One ``Settings`` object, merged in rising precedence from: defaults → evalgate.yaml → ``EVALGATE_*``
environment variables → GitHub Action inputs → CLI flags.

Every setting has the same name everywhere: ``first_n`` is ``first_n:`` in evalgate.yaml,
``EVALGATE_FIRST_N`` in the environment, ``first-n`` as an action input and ``--first-n`` on the CLI.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from evalgate import dialect
from evalgate.config.budget import parse_budget
from evalgate.config.references import is_reference
from evalgate.config.suite import SUITE_KEYS, did_you_mean, yaml_line
from evalgate.errors import UserError
from evalgate.safety.redact import register_environment, register_mapping_secrets, register_secret, split_credentials
from evalgate.safety.structure import StructureError, load_yaml
from evalgate.text.tokens import configure as configure_tokenizer

JudgeProvider = Literal["none", "openai", "gemini", "ollama", "local"]
TARGET_KINDS: tuple[str, ...] = ("recorded", "http", "openai", "command")


CREDENTIAL_URLS = ("target_url", "judge_base_url", "langfuse_host")
"""URL settings that may carry ``user:password@`` (sent as ``Authorization: Basic``, never stored)."""


def _split_list(value: Any) -> Any:
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


DEFAULT_MAX_ANSWER_CHARS = 1_000_000
"""Default of ``max_answer_chars``: longer answers are cut to this many characters (docs/security.md, "Size caps")."""

DEFAULT_JUDGE_REPLY_BYTES = 1 << 20
"""Default of ``judge_max_reply_bytes``: 1 MiB, hundreds of times a verdict's size (docs/security.md)."""


def db_path(output_dir: str, db: str | None) -> Path:
    """The SQLite file: ``db`` when set, else OUTPUT_DIR/results.db."""
    return Path(db) if db else Path(output_dir) / "results.db"


class OutputPlaces:
    """Where a run writes, derived from ``output_dir`` and ``db``: one owner for ``Settings`` and its record
    section (``config.sections.RecordSettings``)."""

    if TYPE_CHECKING:
        output_dir: str
        db: str | None

    @property
    def output_path(self) -> Path:
        """OUTPUT_DIR."""
        return Path(self.output_dir)

    @property
    def db_path(self) -> Path:
        """The SQLite file (``db_path``)."""
        return db_path(self.output_dir, self.db)


class BaselineChoice:
    """What ``baseline`` asks for, for ``Settings`` and its gate section (``config.sections.GateSettings``)."""

    if TYPE_CHECKING:
        baseline: str

    @property
    def baseline_kind(self) -> Literal["none", "auto", "path"]:
        """What ``baseline`` asks for: nothing (``none`` or empty), the Actions lookup, or a file."""
        text = self.baseline.strip().lower()
        return "none" if text in ("", "none") else "auto" if text == "auto" else "path"


class ShardChoice:
    """``shard`` as ``(i, n)``, for ``Settings`` and its selection section (``config.sections.SelectionSettings``)."""

    if TYPE_CHECKING:
        shard: str | None

    @property
    def shard_tuple(self) -> tuple[int, int] | None:
        return parse_shard(self.shard) if self.shard else None


class Settings(OutputPlaces, BaselineChoice, ShardChoice, BaseModel):
    """Everything a run can be told. Each field: docs/reference/settings.md."""

    model_config = ConfigDict(extra="forbid", validate_assignment=False)
    _environment: dict[str, str] = PrivateAttr(default_factory=lambda: dict(os.environ))

    @property
    def environment(self) -> Mapping[str, str]:
        """The environment these settings were built from (``build_settings``'s ``env``; for settings made
        directly, the process environment when they were made): provider keys, ``${NAME}`` header values
        and tiktoken's cache directory come from here, so no inner module reads the process environment."""
        return self._environment

    # --- what to evaluate ------------------------------------------------------------------------
    dataset: list[str] = Field(default_factory=list)
    config: str | None = None
    case_ids: list[str] = Field(default_factory=list)
    first_n: int | None = Field(default=None, ge=1)
    category: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    shard: str | None = None

    # --- gate ------------------------------------------------------------------------------------
    metric_thresholds: dict[str, Any] = Field(default_factory=dict)
    strict_metrics: bool = False
    fail_on_critical: bool = True
    min_pass_rate: float | None = Field(default=None, ge=0.0, le=1.0)
    max_errored: int = Field(default=0, ge=0)
    fail_on_regression: bool = False
    significance_level: float = Field(default=0.05, gt=0.0, lt=1.0)
    """The family-wise error rate of the regression decision (docs/trustworthy-verdicts.md)."""
    regression_tolerance: dict[str, Any] = Field(default_factory=dict)
    """Per metric, the smallest change that counts as a regression: a number (absolute) or ``{abs, rel}``
    (``verdict.tolerance``); ``null``/0 removes a default."""
    baseline: str = "none"
    gate_changes: Literal["report", "fail"] = "report"
    """What a pull request that loosens the gate against its base run gets (docs/security.md, "Gate changes"):
    ``report`` lists the loosenings; ``fail`` also fails the gate unless the PR carries ``gate_change_label``.
    In a pull-request run only the workflow (input, ``EVALGATE_GATE_CHANGES``, flag) may relax the base run's value."""
    gate_change_label: str = "evalgate-gate-change-approved"
    """The pull-request label that approves a loosening under ``gate_changes: fail`` (ignored when it comes
    from the PR's own evalgate.yaml in a pull-request run)."""

    # --- outputs ---------------------------------------------------------------------------------
    output_dir: str = "evalgate-results"
    db: str | None = None
    format: Literal["text", "json"] = "text"
    compat: list[str] = Field(default_factory=list)
    """Seeds whose dialects apply to cases without a kind (``evalgate.dialects``) and whose output shapes are
    produced too (``report.documents``: those with an output document, as ``--compat``'s help lists): files
    beside results.json, the seed's console summary, and with ``format: json`` (one seed) the seed's document
    on stdout."""
    compat_output: str | None = None
    """Another path for the (single) compat document."""
    compat_include_responses: bool = True
    """per_query entries carry the response text (≤ 2,000 chars)."""
    langfuse: bool = False
    """Export scores to Langfuse after the run (``LANGFUSE_PUBLIC_KEY`` / ``LANGFUSE_SECRET_KEY``)."""
    langfuse_host: str = "https://cloud.langfuse.com"
    """Langfuse server for ``langfuse`` (``LANGFUSE_HOST`` / ``LANGFUSE_BASE_URL``)."""
    langfuse_public_key: str | None = Field(default=None, exclude=True, repr=False)
    """Langfuse public key (``LANGFUSE_PUBLIC_KEY``); never written to results."""
    langfuse_secret_key: str | None = Field(default=None, exclude=True, repr=False)
    """Langfuse secret key (``LANGFUSE_SECRET_KEY``); masked, never written to results."""
    wait: bool = False
    """When another run holds the output directory: wait for it (default: refuse with exit 2 naming it)."""
    verbose: bool = False
    progress: Literal["auto", "rich", "plain", "none"] = "auto"
    progress_interval_seconds: float = Field(default=10.0, gt=0, le=3600)

    # --- target ----------------------------------------------------------------------------------
    target: str = "recorded"
    """recorded | http | openai | command, or ``package.module:factory`` / ``file://agent.py:factory``."""
    target_options: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments of a custom target's factory."""
    target_url: str | None = None
    target_method: str = "POST"
    """HTTP method of an http target (``GET`` / ``HEAD`` send the body's fields as query parameters)."""
    target_headers: dict[str, str] = Field(default_factory=dict)
    """Request headers of an http target; ``${NAME}`` is replaced by the environment variable (masked)."""
    target_body_template: str | None = None
    """jinja2 template rendering an http target's JSON body (default ``{"message": input, …context}``)."""
    target_response_map: dict[str, str] = Field(default_factory=dict)
    """Answer field → dotted path in an http or command target's JSON reply (overrides the defaults)."""
    target_response_format: Literal["auto", "json", "text"] = "auto"
    """How an http or command target's reply is read: ``auto`` (JSON when it parses; a reply whose
    Content-Type says JSON must parse, else the attempt failed and is retried), ``json`` (every reply must
    be JSON) or ``text`` (the body is the answer text, never parsed)."""
    target_command: list[str] = Field(default_factory=list)
    target_model: str | None = None
    target_provider: Literal["openai", "gemini", "ollama", "local"] | None = None
    target_system_prompt: str | None = None
    """System message of an ``openai`` target (a chat model as the system under test)."""
    # --- conversations (docs/conversations.md) ---------------------------------------------------
    target_conversation: Literal["history", "id"] = "history"
    """How an http target carries a conversation: ``history`` sends every message so far in
    ``target_history_field``; ``id`` sends only the new message and a conversation id the agent keeps
    state under (``target_conversation_id_field`` / ``_header``, or taken from its first reply)."""
    target_history_field: str = Field(default="messages", min_length=1)
    """Body field carrying a conversation's messages so far (``target_conversation: history``)."""
    target_conversation_id_field: str | None = "conversation_id"
    """Body field carrying the conversation id (``target_conversation: id``); null: none."""
    target_conversation_id_header: str | None = None
    """Request header carrying the conversation id (``target_conversation: id``)."""
    target_conversation_id_from: str | None = None
    """A field of the agent's first JSON reply (dotted path) holding the conversation id it assigned."""
    stop_on_failed_turn: bool = True
    """A conversation stops at its first failed turn (later turns are not sent)."""
    simulator_model: str | None = None
    """Model writing simulated users' messages (default: the judge's model, on the judge's provider)."""
    outputs_file: str | None = None
    eval_context: dict[str, Any] = Field(default_factory=dict)
    """Fields merged into an http target's default body (``EVALGATE_EVAL_<NAME>`` variables set them too)."""

    # --- judge -----------------------------------------------------------------------------------
    judge_provider: JudgeProvider = "none"
    judge_model: str | None = None
    judge_base_url: str | None = None
    judge_missing: Literal["auto", "skip", "fail"] = "auto"
    """When the judge provider's API key is absent: ``skip`` reports the judged metrics as not judged (with
    why) and the rest of the gate decides (a run where nothing else could decide fails); ``fail`` stops with
    exit 2 naming the key; ``auto``: skip on pull requests from forks and bots, which get no secrets
    (``config.trust.without_secrets``), fail elsewhere. In a pull-request run the PR's evalgate.yaml cannot set it."""
    judge_temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    """Temperature of judge calls (metrics in ``judge_temperatures`` use their own)."""
    judge_temperatures: dict[str, float] = Field(default_factory=dict)
    """Per judged metric temperature (``judges.factory.default_metric_temperatures``: judge_score 0.1)."""
    judge_api_key: str | None = Field(default=None, exclude=True, repr=False)
    """The judge's API key when given as a setting instead of the provider's own variable; never written
    anywhere."""
    judge_seed: int | None = 20261122
    """Seed sent with judge calls, for providers that honour it; null: none."""
    judge_samples: int = Field(default=1, ge=1, le=20)
    judge_output: Literal["auto", "json_schema", "json_object", "prompt"] = "auto"
    judge_mode: Literal["direct", "batch"] = "direct"
    """``batch``: judge through the provider's batch interface at its batch price (``judges.batch``); pull
    request runs in Actions judge directly whatever this says."""
    judge_batch_deadline_seconds: float = Field(default=5400.0, gt=0)
    """A batch not done this long after it was created is cancelled and its requests are sent directly."""
    judge_batch_poll_seconds: float = Field(default=30.0, gt=0)
    judge_batch_quiet_seconds: float = Field(default=2.0, gt=0)
    """A batch is sent once no new judge request arrived for this long (or ``judge_batch_max_requests`` wait)."""
    judge_batch_max_requests: int = Field(default=50_000, ge=1, le=50_000)
    judge_batch_window: int = Field(default=2000, ge=1)
    """Cases in progress at once in batch mode (their target calls still bounded by ``concurrency``)."""
    no_cache: bool = False
    judge_cache: str = ""
    judge_shared_cache: str = ""
    """The judge cache shared by every output directory on the machine (``store.shared_cache``): empty = the
    user's cache directory (off in GitHub Actions), ``none``, or a file; never read in a pull-request run."""
    judge_shared_cache_max_mb: float = Field(default=256.0, gt=0)
    """The base branch's judge cache to reuse verdicts from (``runner.reuse``): empty = the baseline's,
    ``none``, or a judge-cache.db file or a directory holding one."""
    judge_max_reply_bytes: int = Field(default=DEFAULT_JUDGE_REPLY_BYTES, ge=1024)
    """Largest judge reply body read (bytes); a longer one is cut off there and its verdict is unavailable."""
    judge_rpm: float | None = Field(default=None, gt=0)
    judge_tpm: float | None = Field(default=None, gt=0)
    """Caps (requests / tokens per minute) for a judge provider that sends no rate-limit headers
    (``calls.ratelimit``)."""
    max_cost: float | None = Field(default=None, ge=0.0)
    prices: dict[str, dict[str, float]] = Field(default_factory=dict)
    """Model → ``{input, output}`` USD per 1M tokens, over the built-in price table (cost and max_cost)."""
    chat_client: Literal["direct", "openai-sdk"] = "direct"
    calibration: Literal["auto", "required", "off", "trust"] = "auto"
    """What a judged metric needs to gate (docs/judge-calibration.md, "Calibration"): ``auto`` — human labels passing the κ
    floor, else passing its controls (built from the suite); others are reported without gating; ``required`` —
    the same evidence, and a judge without it fails the run; ``off`` — no labels read: the controls decide (a
    metric without controls gates); ``trust`` — every judge gates, nothing checked."""
    controls_max_items: int = Field(default=60, ge=0)
    """The cap on control items per judged metric (``judges.controls``); 0 builds none."""
    no_gate: Literal["auto", "pass", "fail"] = "auto"
    """A run in which nothing could decide (no gated metric scored): ``fail`` fails it, ``pass`` passes it (the
    verdict line says so either way); ``auto``: ``fail`` under ``calibration: required``, else ``pass``."""
    calibration_min_kappa: float = Field(default=0.6, ge=-1.0, le=1.0)
    calibration_min_labels: int = Field(default=30, ge=1)
    calibration_floors: dict[str, dict[str, float]] = Field(default_factory=dict)
    """Per judged metric ``{min_kappa, min_labels}`` over the two settings above."""
    calibration_file: str = ""
    """The committable calibration file (``evalgate calibrate`` writes it, runs read it); empty:
    ``judge-calibration.json`` beside each suite's labels file."""
    pairwise: bool = False
    """With a baseline: ask the judge which answer is better for cases whose answer changed (both orders)."""

    # --- execution -------------------------------------------------------------------------------
    target_rpm: float | None = Field(default=None, gt=0)
    target_tpm: float | None = Field(default=None, gt=0)
    """Caps for the target (an HTTP agent or a model) when it sends no rate-limit headers."""
    concurrency: int = Field(default=8, ge=1, le=1024)
    api_timeout_seconds: float = Field(default=60.0, gt=0)
    connect_timeout_seconds: float = Field(default=10.0, gt=0)
    read_timeout_seconds: float | None = Field(default=None, gt=0)
    api_retries: int = Field(default=3, ge=0, le=20)
    repeat: int = Field(default=1, ge=1, le=100)
    adaptive: bool = False
    """``repeat: adaptive`` (set by writing that value for ``repeat``): every case runs once, then only the
    uncertain cases are re-tried in rounds until the sequential tests decide or ``adaptive_budget`` is spent
    (docs/trustworthy-verdicts.md)."""
    adaptive_budget: str = "auto"
    """Re-trials ``repeat: adaptive`` may add: ``auto`` (50 % of the cases plus 39 per critical case), a number
    of trials (``120``), a share of the cases (``50%``) or dollars of target + judge spend (``$2.50``)."""
    critical_pass_probability: float = Field(default=0.9, gt=0.5, lt=1.0)
    """Under ``repeat: adaptive``, the pass probability a critical case must have: it is blocked when a
    sequential test shows it lower (docs/trustworthy-verdicts.md)."""
    max_answer_chars: int = Field(default=DEFAULT_MAX_ANSWER_CHARS, ge=1_000)
    """Largest answer kept whole (characters of answer text plus list items). A larger answer is cut to
    this size for storage and reports and its case is errored, unscored and unjudged; the reply body an
    HTTP target reads (and a command's output) is limited to 16 × this many bytes."""
    repeat_rule: Literal["majority", "all", "any"] = "majority"

    # --- traces (docs/traces.md) -----------------------------------------------------------------
    traces: bool = False
    """Receive the agent's OpenTelemetry spans over OTLP/HTTP during the run (each target call carries a
    W3C ``traceparent``); trajectory metrics and the workflow metrics read them."""
    traces_host: str = "127.0.0.1"
    """Interface the receiver listens on (``0.0.0.0`` inside a container, for a ``services:`` agent)."""
    traces_port: int = Field(default=4318, ge=0, le=65535)
    """Port of the receiver (4318, OTLP/HTTP's usual one; 0 for any free port)."""
    traces_grace_seconds: float = Field(default=5.0, ge=0, le=120)
    """Longest wait after a target call for its spans (batching exporters send them late)."""
    traces_max_request_bytes: int = Field(default=8 * 1024 * 1024, ge=1024, le=256 * 1024 * 1024)
    traces_max_spans_per_case: int = Field(default=2_000, ge=1, le=1_000_000)

    _notices: list[str] = PrivateAttr(default_factory=list)
    _credentialed: dict[str, str] = PrivateAttr(default_factory=dict)
    _origins: dict[str, str] = PrivateAttr(default_factory=dict)

    def origin(self, name: str) -> str:
        """Where setting ``name`` was set (``input 'output-dir'``, ``evalgate.yaml: output_dir``,
        ``EVALGATE_OUTPUT_DIR``, ``--output-dir``), else ``default <name>``, for messages about it."""
        return self._origins.get(name, f"default {name}")

    @model_validator(mode="after")
    def _credentials_apart(self) -> Settings:
        """URLs are kept (and so stored and shown) without ``user:password@``: the full URL is only
        handed to the client that sends the credentials (``credentialed_url``), as an Authorization
        header. Every form of the credentials, and secret-named ``eval_context`` values, are registered
        as secrets."""
        for name in CREDENTIAL_URLS:
            url = getattr(self, name)
            if url:
                clean, authorization = split_credentials(url)
                if authorization is not None:
                    self._credentialed[name] = url
                    object.__setattr__(self, name, clean)
        register_mapping_secrets(self.eval_context)
        return self

    def credentialed_url(self, name: str) -> str | None:
        """The URL setting ``name`` as given, credentials included (only for the client that sends them)."""
        value = self._credentialed.get(name) or getattr(self, name)
        return value if value is None else str(value)

    @property
    def notices(self) -> list[str]:
        """One-line notices from reading the settings (old variable names, seed spellings), for the edges
        to print before the run."""
        return self._notices

    @model_validator(mode="before")
    @classmethod
    def _adaptive_repeat(cls, data: Any) -> Any:
        """``repeat: adaptive`` sets ``adaptive`` and runs every case once to start with."""
        if isinstance(data, dict) and isinstance(data.get("repeat"), str) \
                and data["repeat"].strip().lower() == "adaptive":
            data = {**data, "repeat": 1, "adaptive": True}
        return data

    @field_validator("adaptive_budget")
    @classmethod
    def _budget(cls, value: str) -> str:
        parse_budget(value, 1)
        return value.strip()

    @field_validator("compat", mode="before")
    @classmethod
    def _compat_names(cls, value: Any) -> Any:
        value = _split_list(value)
        if isinstance(value, list):
            aliases = dialect.compat_aliases()
            names = list(dict.fromkeys(aliases.get(str(v).strip().lower(), str(v).strip().lower()) for v in value))
            known = list(dialect.DIALECTS)
            for name in names:
                if name not in known:
                    expected = ", ".join(map(repr, known[:-1])) + f" or {known[-1]!r}" if len(known) > 1 else repr(known[0])
                    raise PydanticCustomError("literal_error", "Input should be {expected}", {"expected": expected})
            return names
        return value

    @field_validator("calibration_floors")
    @classmethod
    def _floors(cls, value: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        for name, floor in value.items():
            unknown = set(floor) - {"min_kappa", "min_labels"}
            if unknown:
                raise ValueError(f"calibration floor for {name!r}: unknown key {sorted(unknown)[0]!r} "
                                 "(use min_kappa, min_labels)")
        return value

    @field_validator("judge_temperatures")
    @classmethod
    def _temperatures(cls, value: dict[str, float]) -> dict[str, float]:
        for name, temperature in value.items():
            if not 0.0 <= temperature <= 2.0:
                raise ValueError(f"judge temperature for {name!r} must be between 0 and 2 (got {temperature:g})")
        return value

    @field_validator("dataset", "case_ids", "category", "tags", "target_command", mode="before")
    @classmethod
    def _lists(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().startswith("["):
            try:
                return json.loads(value)
            except json.JSONDecodeError:
                pass
        return _split_list(value)

    @field_validator(
        "metric_thresholds", "target_headers", "target_response_map", "eval_context", "prices", "target_options",
        "judge_temperatures", "regression_tolerance", "calibration_floors", mode="before",
    )
    @classmethod
    def _json_mapping(cls, value: Any) -> Any:
        if isinstance(value, str):
            if not value.strip():
                return {}
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"invalid JSON ({exc.msg} at column {exc.colno})") from None
            if not isinstance(value, dict):
                raise ValueError("must be a JSON object")
        return value

    @field_validator("target")
    @classmethod
    def _target_kind(cls, value: str) -> str:
        value = value.strip()
        if value in TARGET_KINDS or is_reference(value):
            return value
        raise ValueError(f"target must be one of {', '.join(TARGET_KINDS)} or a factory reference "
                         f"'package.module:factory' / 'file://agent.py:factory'; got {value!r}"
                         f"{did_you_mean(value, TARGET_KINDS)}")

    @field_validator("shard")
    @classmethod
    def _shard_form(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        parse_shard(value)
        return value


def parse_shard(value: str) -> tuple[int, int]:
    """``"i/n"`` with 1 ≤ i ≤ n → ``(i, n)``."""
    try:
        index_text, count_text = value.split("/")
        index, count = int(index_text), int(count_text)
    except ValueError:
        raise ValueError(f"shard must look like i/n, e.g. 2/4 (got {value!r})") from None
    if not 1 <= index <= count:
        raise ValueError(f"shard {value!r}: i must be between 1 and n")
    return index, count


FIELD_NAMES = set(Settings.model_fields)
BOOL_TEXT = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}


def env_layer(env: Mapping[str, str], origins: Mapping[str, str] | None = None) -> dict[str, tuple[Any, str]]:
    """``EVALGATE_<FIELD>`` variables → {field: (value, origin)}; empty values count as unset.

    ``origins`` names the variable a value really came from (a dialect's spelling of an
    ``EVALGATE_*`` name), so errors name what the user set."""
    origins = origins or {}
    layer: dict[str, tuple[Any, str]] = {}
    for name in FIELD_NAMES:
        key = f"EVALGATE_{name.upper()}"
        value = env.get(key)
        if value is not None and value.strip() != "":
            layer[name] = (value, origins.get(key, key))
    # the context variables reach the HTTP payload as defaults
    context = {
        name.removeprefix("EVALGATE_EVAL_").lower(): value
        for name, value in env.items()
        if name.startswith("EVALGATE_EVAL_") and value
    }
    if context and "eval_context" not in layer:
        layer["eval_context"] = (context, "EVALGATE_EVAL_*")
    return layer


def inputs_layer(inputs: Mapping[str, str]) -> dict[str, tuple[Any, str]]:
    """GitHub Action inputs (hyphenated names) → {field: (value, origin)}."""
    layer: dict[str, tuple[Any, str]] = {}
    for name, value in inputs.items():
        field = name.replace("-", "_")
        if field in FIELD_NAMES and value is not None and str(value).strip() != "":
            layer[field] = (value, f"input '{name}'")
    return layer


def config_file_layer(path: Path, notices: list[str] | None = None) -> tuple[dict[str, tuple[Any, str]], dict[str, Any]]:
    """Read evalgate.yaml → (settings layer, suite-level keys such as thresholds/metrics/options).

    A dialect's own config file (e.g. an in-house runner's config, recognised by its sections) is read
    key by key by that dialect's ``config_file`` hook (``evalgate.dialect.read_config_file``)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read config file ({exc.strerror})", where=str(path)) from None
    import yaml  # lazy: pyyaml (~25 ms) only when a config file is read

    try:
        data = load_yaml(text) or {}
    except StructureError as exc:
        raise UserError(f"invalid YAML: {exc.message}", where=f"{path}:{exc.line}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise UserError(f"invalid YAML: {getattr(exc, 'problem', None) or exc}", where=where) from None
    if not isinstance(data, dict):
        raise UserError("the config file must be a mapping of settings", where=str(path))
    own = dialect.read_config_file(data, frozenset(FIELD_NAMES) | SUITE_KEYS, str(path),
                                   notices if notices is not None else [])
    if own is not None:
        return own
    settings_part: dict[str, tuple[Any, str]] = {}
    suite_part: dict[str, Any] = {}
    for key, value in data.items():
        field = str(key).replace("-", "_")
        if field in FIELD_NAMES:
            settings_part[field] = (value, f"{path}: {key}")
        else:
            suite_part[str(key)] = value
    return settings_part, suite_part


def build_settings(
    *,
    cli: Mapping[str, Any] | None = None,
    inputs: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    defaults: Mapping[str, Any] | None = None,
    cli_origins: Mapping[str, str] | None = None,
) -> tuple[Settings, dict[str, Any], Path | None]:
    """Merge every layer and validate once. Returns (settings, suite-level config keys, config path).

    ``defaults`` replaces built-in defaults for one context (the Action defaults ``baseline`` to
    ``auto``; a dialect's verb defaults ``compat`` to its dialect) while still yielding to every other layer.
    ``cli_origins`` names the flag a CLI value came from when it is not ``--<field>`` (a dialect's spelling
    of a flag). The dialects' variable names and files are read by their hooks (``evalgate.dialect``); what
    they did is in ``settings.notices``.

    Any invalid value raises ``UserError`` naming the layer it came from (file key, variable, input
    or flag)."""
    env = os.environ if env is None else env
    cwd = cwd or Path.cwd()
    notices: list[str] = []
    cli_layer = {k: (v, f"--{k.replace('_', '-')}") for k, v in (cli or {}).items() if v is not None}
    cli_origins = dict(cli_origins or {})
    for field, origin in cli_origins.items():
        if field in cli_layer:
            cli_layer[field] = (cli_layer[field][0], origin)
    read_env, aliased = dialect.aliased_environment(env, notices)
    env_values = {**dialect.environment_settings(env, notices), **env_layer(read_env, aliased)}
    input_values = inputs_layer(inputs or {})

    config_path = _find_config(env_values, input_values, cli_layer, cwd=cwd)
    file_values: dict[str, tuple[Any, str]] = {}
    suite_config: dict[str, Any] = {}
    if config_path is not None:
        file_values, suite_config = config_file_layer(config_path, notices)

    default_layer = {k: (v, f"default {k}") for k, v in (defaults or {}).items()}
    merged: dict[str, tuple[Any, str]] = {}
    for layer in (default_layer, file_values, env_values, input_values, cli_layer):
        merged.update(layer)
    _apply_implied(merged, env, notices)
    values = {k: _coerce_bool(k, v) for k, (v, _) in merged.items()}
    try:
        settings = Settings.model_validate(values)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = str(error["loc"][0]) if error["loc"] else "settings"
        origin = _with_line(merged.get(field, (None, field))[1])
        message = error["msg"].removeprefix("Value error, ") + _choice_hint(error)
        raise UserError(f"{message}", where=origin) from None
    if config_path is not None:
        settings.config = str(config_path)
    settings._origins = {name: origin for name, (_, origin) in merged.items()}
    settings._environment = dict(env)
    register_environment(env)
    configure_tokenizer(env)  # tiktoken's cache directory (TIKTOKEN_CACHE_DIR) as this environment says
    for secret in (settings.judge_api_key, settings.langfuse_public_key, settings.langfuse_secret_key):
        if secret:
            register_secret(secret)
    settings.notices.extend(notices)
    return settings, suite_config, config_path


def _with_line(origin: str) -> str:
    """``path: key`` (a setting read from a config file) → ``path:line: key``, for messages."""
    found = re.match(r"^(?P<path>.+\.ya?ml): (?P<key>[\w-]+)$", origin)
    if not found or not Path(found["path"]).is_file():
        return origin
    line = yaml_line(Path(found["path"]), [found["key"]])
    return f"{found['path']}:{line}: {found['key']}" if line else origin


def _choice_hint(error: Any) -> str:
    """`` (did you mean 'openai'?)`` for a value that is not one of a setting's choices."""
    if error.get("type") not in ("literal_error", "enum"):
        return ""
    choices = re.findall(r"'([^']*)'", str((error.get("ctx") or {}).get("expected", "")))
    close = difflib.get_close_matches(str(error.get("input", "")), choices, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _apply_implied(merged: dict[str, tuple[Any, str]], env: Mapping[str, str], notices: list[str]) -> None:
    """Settings implied when nothing else sets them: what the dialects' spellings imply
    (``evalgate.dialect.implied_settings``); a judge API key without a provider selects openai."""
    dialect.implied_settings(merged, env, notices)
    if "judge_api_key" in merged and "judge_provider" not in merged:
        merged["judge_provider"] = ("openai", merged["judge_api_key"][1])


def _coerce_bool(field: str, value: Any) -> Any:
    annotation = Settings.model_fields[field].annotation
    if annotation is bool and isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in BOOL_TEXT:
            return BOOL_TEXT[lowered]
    return value


def _find_config(*layers: Mapping[str, tuple[Any, str]], cwd: Path) -> Path | None:
    for layer in reversed(layers):
        if "config" in layer:
            value, origin = layer["config"]
            path = Path(str(value))
            if not path.is_absolute():
                path = cwd / path
            if not path.is_file():
                raise UserError(f"config file not found: {value}", where=origin)
            return path
    default = cwd / "evalgate.yaml"
    return default if default.is_file() else None
