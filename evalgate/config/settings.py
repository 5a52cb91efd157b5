"""One ``Settings`` object, merged in rising precedence from: defaults → evalgate.yaml → ``EVALGATE_*``
environment variables → GitHub Action inputs → CLI flags.

Every setting has the same name everywhere: ``first_n`` is ``first_n:`` in evalgate.yaml,
``EVALGATE_FIRST_N`` in the environment, ``first-n`` as an action input and ``--first-n`` on the CLI.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from evalgate.errors import UserError
from evalgate.safety.redact import register_environment

JudgeProvider = Literal["none", "openai", "gemini", "ollama", "local"]
TargetKind = Literal["recorded", "http", "openai", "command"]


def _split_list(value: Any) -> Any:
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


class Settings(BaseModel):
    """Everything a run can be told. See the README's settings table for each field."""

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
    baseline: str = "none"

    # --- outputs ---------------------------------------------------------------------------------
    output_dir: str = "evalgate-results"
    db: str | None = None
    format: Literal["text", "json"] = "text"
    verbose: bool = False
    progress: Literal["auto", "rich", "plain", "none"] = "auto"

    # --- target ----------------------------------------------------------------------------------
    target: TargetKind = "recorded"
    target_url: str | None = None
    target_method: str = "POST"
    target_headers: dict[str, str] = Field(default_factory=dict)
    target_body_template: str | None = None
    target_response_map: dict[str, str] = Field(default_factory=dict)
    target_command: list[str] = Field(default_factory=list)
    target_model: str | None = None
    target_provider: Literal["openai", "gemini", "ollama", "local"] | None = None
    target_system_prompt: str | None = None
    outputs_file: str | None = None
    eval_context: dict[str, Any] = Field(default_factory=dict)

    # --- judge -----------------------------------------------------------------------------------
    judge_provider: JudgeProvider = "none"
    judge_model: str | None = None
    judge_base_url: str | None = None
    judge_temperature: float = 0.0
    judge_seed: int | None = 20261122
    judge_samples: int = Field(default=1, ge=1, le=20)
    no_cache: bool = False
    max_cost: float | None = Field(default=None, ge=0.0)
    prices: dict[str, dict[str, float]] = Field(default_factory=dict)
    chat_client: Literal["direct", "openai-sdk"] = "direct"

    # --- execution -------------------------------------------------------------------------------
    concurrency: int = Field(default=8, ge=1, le=1024)
    api_timeout_seconds: float = Field(default=60.0, gt=0)
    api_retries: int = Field(default=3, ge=0, le=20)
    repeat: int = Field(default=1, ge=1, le=100)
    repeat_rule: Literal["majority", "all", "any"] = "majority"

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
        "metric_thresholds", "target_headers", "target_response_map", "eval_context", "prices", mode="before"
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

    @field_validator("shard")
    @classmethod
    def _shard_form(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        parse_shard(value)
        return value

    @property
    def baseline_kind(self) -> Literal["none", "auto", "path"]:
        """What ``baseline`` asks for: nothing (``none`` or empty), the Actions lookup, or a file."""
        text = self.baseline.strip().lower()
        return "none" if text in ("", "none") else "auto" if text == "auto" else "path"

    @property
    def output_path(self) -> Path:
        return Path(self.output_dir)

    @property
    def db_path(self) -> Path:
        return Path(self.db) if self.db else self.output_path / "results.db"

    @property
    def shard_tuple(self) -> tuple[int, int] | None:
        return parse_shard(self.shard) if self.shard else None


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


def env_layer(env: Mapping[str, str]) -> dict[str, tuple[Any, str]]:
    """``EVALGATE_<FIELD>`` variables → {field: (value, origin)}; empty values count as unset."""
    layer: dict[str, tuple[Any, str]] = {}
    for name in FIELD_NAMES:
        key = f"EVALGATE_{name.upper()}"
        value = env.get(key)
        if value is not None and value.strip() != "":
            layer[name] = (value, key)
    # seed 002's context variables reach the HTTP payload as defaults
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


def config_file_layer(path: Path) -> tuple[dict[str, tuple[Any, str]], dict[str, Any]]:
    """Read evalgate.yaml → (settings layer, suite-level keys such as thresholds/metrics/options)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read config file ({exc.strerror})", where=str(path)) from None
    import yaml

    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise UserError(f"invalid YAML: {getattr(exc, 'problem', exc)}", where=where) from None
    if not isinstance(data, dict):
        raise UserError("the config file must be a mapping of settings", where=str(path))
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
) -> tuple[Settings, dict[str, Any], Path | None]:
    """Merge every layer and validate once. Returns (settings, suite-level config keys, config path).

    ``defaults`` replaces built-in defaults for one context (the Action defaults ``baseline`` to
    ``auto``) while still yielding to every other layer.

    Any invalid value raises ``UserError`` naming the layer it came from (file key, variable, input
    or flag)."""
    env = os.environ if env is None else env
    cwd = cwd or Path.cwd()
    cli_layer = {k: (v, f"--{k.replace('_', '-')}") for k, v in (cli or {}).items() if v is not None}
    env_values = env_layer(env)
    input_values = inputs_layer(inputs or {})

    config_path = _find_config(env_values, input_values, cli_layer, cwd=cwd)
    file_values: dict[str, tuple[Any, str]] = {}
    suite_config: dict[str, Any] = {}
    if config_path is not None:
        file_values, suite_config = config_file_layer(config_path)

    default_layer = {k: (v, f"default {k}") for k, v in (defaults or {}).items()}
    merged: dict[str, tuple[Any, str]] = {}
    for layer in (default_layer, file_values, env_values, input_values, cli_layer):
        merged.update(layer)
    values = {k: _coerce_bool(k, v) for k, (v, _) in merged.items()}
    try:
        settings = Settings.model_validate(values)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = str(error["loc"][0]) if error["loc"] else "settings"
        origin = merged.get(field, (None, field))[1]
        message = error["msg"].removeprefix("Value error, ")
        raise UserError(f"{message}", where=origin) from None
    if config_path is not None:
        settings.config = str(config_path)
    settings._environment = dict(env)
    register_environment(env)
    return settings, suite_config, config_path


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
