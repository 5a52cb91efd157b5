"""The sections of ``Settings`` each stage of a run reads: load and select, answer, judge, decide (gate),
record and publish.

A section is a frozen view built from a ``Settings`` by its ``of`` class method: the same field names
(so config files, environment variables and CLI flags keep one spelling, ``config.settings``) and the same
values, nothing else. A stage function takes the section it reads, so its signature says which settings can
change what it does. A field may belong to more than one section (``concurrency`` bounds both the answers and
the judge's calls); every field of ``Settings`` belongs to at least one (``tests/config/test_sections.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal, Self

from evalgate.config.settings import BaselineChoice, OutputPlaces, Settings, ShardChoice


@dataclass(frozen=True)
class Section:
    """A frozen view of some ``Settings`` fields; ``origins`` says where each was set (``Settings.origin``)."""

    origins: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False, kw_only=True)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The ``Settings`` fields this section exposes."""
        return tuple(f.name for f in fields(cls) if f.name != "origins")

    @classmethod
    def of(cls, settings: Settings) -> Self:
        """The section's fields of ``settings`` (the same objects: nothing is copied or converted)."""
        names = cls.names()
        return cls(**{name: getattr(settings, name) for name in names},
                   origins={name: settings.origin(name) for name in names})

    def origin(self, name: str) -> str:
        """Where setting ``name`` was set, for messages about it (``Settings.origin``)."""
        return self.origins.get(name, f"default {name}")


@dataclass(frozen=True)
class SelectionSettings(Section, ShardChoice):
    """Load and select: which files, which cases, the thresholds and context the suites start from."""

    dataset: Sequence[str]
    config: str | None
    case_ids: Sequence[str]
    first_n: int | None
    category: Sequence[str]
    tags: Sequence[str]
    shard: str | None
    metric_thresholds: Mapping[str, Any]
    regression_tolerance: Mapping[str, Any]
    compat: Sequence[str]
    target: str
    """``recorded`` (the default) reads the answers from the cases or ``outputs_file``."""
    outputs_file: str | None
    eval_context: Mapping[str, Any]


@dataclass(frozen=True)
class AnswerSettings(Section):
    """Answer (and score each case as it is answered): the system under test, how it is called, how often,
    how many at once, at what cost, with which traces."""

    target: str
    target_options: Mapping[str, Any]
    target_url: str | None
    target_method: str
    target_headers: Mapping[str, str]
    target_body_template: str | None
    target_response_map: Mapping[str, str]
    target_response_format: str
    target_command: Sequence[str]
    target_model: str | None
    target_provider: str | None
    target_system_prompt: str | None
    target_conversation: Literal["history", "id"]
    target_history_field: str
    target_conversation_id_field: str | None
    target_conversation_id_header: str | None
    target_conversation_id_from: str | None
    stop_on_failed_turn: bool
    simulator_model: str | None
    target_rpm: float | None
    target_tpm: float | None
    concurrency: int
    api_timeout_seconds: float
    connect_timeout_seconds: float
    read_timeout_seconds: float | None
    api_retries: int
    repeat: int
    adaptive: bool
    adaptive_budget: str
    max_answer_chars: int
    strict_metrics: bool
    judge_batch_window: int
    max_cost: float | None
    prices: Mapping[str, Mapping[str, float]]
    chat_client: str
    traces: bool
    traces_host: str
    traces_port: int
    traces_grace_seconds: float
    traces_max_request_bytes: int
    traces_max_spans_per_case: int


@dataclass(frozen=True)
class JudgeSettings(Section):
    """The judge: which model, how it is asked, cached and paced, and what proves it may gate (calibration,
    controls, pairwise preferences)."""

    judge_provider: str
    judge_model: str | None
    judge_base_url: str | None
    judge_missing: Literal["auto", "skip", "fail"]
    judge_temperature: float
    judge_temperatures: Mapping[str, float]
    judge_api_key: str | None = field(repr=False)
    judge_seed: int | None
    judge_samples: int
    judge_output: str
    judge_mode: Literal["direct", "batch"]
    judge_batch_deadline_seconds: float
    judge_batch_poll_seconds: float
    judge_batch_quiet_seconds: float
    judge_batch_max_requests: int
    judge_batch_window: int
    no_cache: bool
    judge_cache: str
    judge_shared_cache: str
    judge_shared_cache_max_mb: float
    judge_max_reply_bytes: int
    judge_rpm: float | None
    judge_tpm: float | None
    calibration: Literal["auto", "required", "off", "trust"]
    controls_max_items: int
    calibration_min_kappa: float
    calibration_min_labels: int
    calibration_floors: Mapping[str, Mapping[str, float]]
    calibration_file: str
    pairwise: bool
    concurrency: int


@dataclass(frozen=True)
class GateSettings(Section, BaselineChoice):
    """Decide: the gate's rules, the baseline it compares with and how repeats and regressions count."""

    strict_metrics: bool
    fail_on_critical: bool
    min_pass_rate: float | None
    max_errored: int
    fail_on_regression: bool
    significance_level: float
    regression_tolerance: Mapping[str, Any]
    baseline: str
    gate_changes: Literal["report", "fail"]
    gate_change_label: str
    no_gate: Literal["auto", "pass", "fail"]
    calibration: Literal["auto", "required", "off", "trust"]
    pairwise: bool
    critical_pass_probability: float
    repeat: int
    repeat_rule: Literal["majority", "all", "any"]
    adaptive: bool
    adaptive_budget: str


@dataclass(frozen=True)
class RecordSettings(Section, OutputPlaces):
    """Record: where results.json and the SQLite database go, and whether to wait for another run's lock."""

    output_dir: str
    db: str | None
    wait: bool
    compat_output: str | None


@dataclass(frozen=True)
class PublishSettings(Section):
    """Publish: the console's format and progress, the seed-shaped documents and the Langfuse export."""

    format: Literal["text", "json"]
    compat: Sequence[str]
    compat_output: str | None
    compat_include_responses: bool
    langfuse: bool
    langfuse_host: str
    langfuse_public_key: str | None = field(repr=False)
    langfuse_secret_key: str | None = field(repr=False)
    verbose: bool
    progress: Literal["auto", "rich", "plain", "none"]
    progress_interval_seconds: float


SECTIONS: tuple[type[Section], ...] = (SelectionSettings, AnswerSettings, JudgeSettings, GateSettings,
                                       RecordSettings, PublishSettings)
"""Every section, in the order of the pipeline."""
