"""The records every stage shares (a leaf: imports nothing else from evalgate).

* the test case: one pydantic ``Case`` that reads every seed format natively, with ``Mention``,
  ``RuleCheck`` and ``RiskLevel``;
* what flows down the pipeline: an ``Answer`` from a target, a ``Score`` from a metric function (or
  ``MetricSkipped`` / ``MetricUnavailable``), a ``MetricResult`` per metric with its ``Threshold``, and a
  ``CaseResult`` per case. Plain pydantic models and dataclasses, serialised as-is into results.json and SQLite.

Case field aliases (first name is canonical):

* ``id`` / ``case_id`` / generated from the input when absent
* ``input`` / ``question`` / ``query`` / ``message`` / ``prompt``
* ``output`` / ``answer`` / ``response`` / ``actual_output`` — a recorded answer

A dialect (``evalgate.dialect``) may add its own spellings of these and its own fields (``DialectField``):
kept in ``Case.dialect_data`` (read with ``Case.dialect_value``), serialised flat where the dialect places
them, so documents keep their keys and order.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

RISK_WEIGHTS: dict[str, float] = {"critical": 4.0, "high": 2.0, "medium": 1.0, "low": 0.5}
"""Weights of the weighted pass rate: sum(weight·passed) / sum(weight) over cases."""


class RiskLevel(StrEnum):
    critical = "critical"
    high = "high"
    medium = "medium"
    low = "low"


class Mention(BaseModel):
    """One brand mention as a brand-mention extractor reported it (``metrics.mentions``)."""

    model_config = ConfigDict(extra="forbid")
    brand: str
    is_mine: bool = False
    rank: int | None = None


_NEEDS_TEXT = frozenset({"contains", "not_contains", "regex", "not_regex"})
_NEEDS_NUMBER = frozenset({"max_tokens", "max_latency", "min_length", "max_length"})
_REGEX_RULES = frozenset({"regex", "not_regex"})


class RuleCheck(BaseModel):
    """A deterministic hard check (``metrics.rules``) declared by a case or a category.

    ``type``: contains | not_contains | regex | not_regex | is_json | max_tokens | max_latency |
    min_length | max_length. ``value`` is the needle, pattern or limit.
    """

    model_config = ConfigDict(extra="forbid")
    type: Literal[
        "contains",
        "not_contains",
        "regex",
        "not_regex",
        "is_json",
        "max_tokens",
        "max_latency",
        "min_length",
        "max_length",
    ]
    value: str | float | int | list[str] | None = None
    case_sensitive: bool = False
    name: str | None = None

    @model_validator(mode="after")
    def _value_fits_type(self) -> RuleCheck:
        if self.type in _NEEDS_TEXT and not isinstance(self.value, str | list):
            raise ValueError(f"rule {self.type!r} needs a text value")
        if self.type in _NEEDS_NUMBER and (
            isinstance(self.value, bool) or not isinstance(self.value, int | float)
        ):
            raise ValueError(f"rule {self.type!r} needs a number value")
        if self.type in _REGEX_RULES:
            for pattern in self.value if isinstance(self.value, list) else [self.value]:
                try:
                    re.compile(str(pattern))
                except re.error as exc:
                    raise ValueError(f"rule {self.type!r}: invalid regex {pattern!r}: {exc}") from exc
        return self

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        return self.type if self.value is None else f"{self.type}:{self.value}"


class ToolArguments(BaseModel):
    """One expectation on the arguments of a tool call (``trajectory.arguments``): some call of ``tool``
    has every key of ``match`` with an equal value (a subset match: nested mappings compare as subsets
    too) and every key of ``regex`` with a value (as text; JSON for lists and mappings) the pattern
    finds (``re.search``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    tool: str
    match: dict[str, Any] | None = None
    regex: dict[str, str] | None = None

    @model_validator(mode="after")
    def _given(self) -> ToolArguments:
        if not self.tool.strip():
            raise ValueError("an arguments entry needs a 'tool' name")
        if not self.match and not self.regex:
            raise ValueError(f"arguments of {self.tool!r}: give 'match' (values) or 'regex' (patterns)")
        for key, pattern in (self.regex or {}).items():
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"arguments of {self.tool!r}: invalid regex for {key!r}: {exc}") from exc
        return self


class Trajectory(BaseModel):
    """What a case expects of the agent's trajectory, read from its trace (docs/traces.md).

    ``tools`` with ``order``: ``subsequence`` (these tools in this order, others may come between),
    ``exact`` (exactly these calls in this order) or ``any`` (each of them called, in any order);
    ``arguments``: tool-argument expectations; ``max_steps`` (tool calls + LLM calls), ``max_tool_calls``,
    ``max_llm_calls``, ``max_tokens`` (LLM input + output tokens); ``no_failed_tools``: no tool span
    ended with status ERROR."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    tools: list[str] | None = None
    order: Literal["subsequence", "exact", "any"] = "subsequence"
    arguments: list[ToolArguments] | None = None
    max_steps: int | None = Field(default=None, ge=0)
    max_tool_calls: int | None = Field(default=None, ge=0)
    max_llm_calls: int | None = Field(default=None, ge=0)
    max_tokens: int | None = Field(default=None, ge=0)
    no_failed_tools: bool = False

    @model_validator(mode="after")
    def _something(self) -> Trajectory:
        if (self.tools is None and not self.arguments and not self.no_failed_tools
                and all(v is None for v in (self.max_steps, self.max_tool_calls, self.max_llm_calls,
                                            self.max_tokens))):
            raise ValueError("trajectory: give tools, arguments, max_steps, max_tool_calls, max_llm_calls, "
                             "max_tokens or no_failed_tools")
        return self


def _alias(*names: str) -> Any:
    return Field(default=None, validation_alias=AliasChoices(*names))


def counters(record: Any, digits: int, rename: dict[str, str] | None = None) -> dict[str, Any]:
    """A counters dataclass as its metadata mapping: every field in declaration order, those declared
    ``float`` rounded to ``digits`` decimals, a field renamed where ``rename`` says (``calls.costs``,
    ``calls.executor``, ``traces.receiver``)."""
    names = rename or {}
    return {names.get(f.name, f.name): round(getattr(record, f.name), digits) if f.type in ("float", float)
            else getattr(record, f.name) for f in fields(record)}


def _not_blank(value: str, message: str) -> str:
    """``value`` unless it is empty or whitespace (then ``ValueError(message)``)."""
    if not value.strip():
        raise ValueError(message)
    return value


def stable_case_id(text: str) -> str:
    """A case id derived from its input: ``q-`` + first 10 hex digits of sha1(normalised input)."""
    normalised = " ".join(text.split()).lower()
    return "q-" + hashlib.sha1(normalised.encode("utf-8")).hexdigest()[:10]


TURN_EXPECTATIONS: tuple[str, ...] = (
    "expected_output", "expect_empty", "expected_keywords", "expected_sources", "expected_data_sources",
    "passing_criteria", "expected_answer_criteria", "agents_should_include", "agents_should_exclude",
    "tools_should_include", "tools_should_exclude", "rules", "trajectory", "metrics", "assertions")
"""A turn's own expectations (checked on that turn's answer)."""
TURN_RECORDED: tuple[str, ...] = ("output", "sources", "agents_called", "tools_used", "agent_id", "data_sources",
                                  "trace_file")
"""A turn's recorded answer (the ``recorded`` target reads it)."""


# --- the dialects' own case fields -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DialectField:
    """A case field a dialect adds (``Dialect.case_fields``): validated as ``annotation``, kept in
    ``dialect_data`` and serialised flat right after the field ``after`` (documents keep their key order)."""

    name: str
    annotation: Any
    after: str
    """The ``Case`` field (or dialect field) it is serialised after."""
    aliases: tuple[str, ...] = ()
    """Other spellings (the first present wins, like a field's aliases)."""
    turn_after: str = ""
    """A conversation turn may carry it too, serialised after this ``Turn`` field ("": not on turns)."""
    criteria: bool = False
    """Its text is a judge's rubric when the case has no ``passing_criteria`` / ``expected_answer_criteria``."""
    role: str = ""
    """The generic concept a built-in metric reads it as (``Case.role_value``): ``own_brands``,
    ``competitor_brands``, ``expected_agent``, ``reference_answer``."""


@dataclass(frozen=True, slots=True)
class DialectFields:
    """Every dialect's case fields, spellings of generic fields and checks (``evalgate.dialect`` fills it)."""

    fields: tuple[DialectField, ...] = ()
    renames: Mapping[str, str] = field(default_factory=dict)
    """A dialect's spelling of a generic field → that field (applied when the generic name is absent)."""
    checks: tuple[Callable[[Case], None], ...] = ()
    """Checks of a whole case (a ``ValueError`` names the problem)."""
    adapters: dict[str, TypeAdapter[Any]] = field(default_factory=dict)
    orders: dict[str, dict[str, int]] = field(default_factory=dict)
    key_sets: dict[bool, frozenset[str]] = field(default_factory=dict)
    orders_placed: dict[str, tuple[dict[str, int], tuple[DialectField, ...]]] = field(default_factory=dict)

    def role_field(self, role: str) -> str:
        """The field that plays ``role`` ("" when no dialect gives one)."""
        return next((f.name for f in self.fields if f.role == role), "")

    def of(self, turn: bool) -> tuple[DialectField, ...]:
        """The fields a case (or, ``turn``, a conversation turn) may carry."""
        return tuple(f for f in self.fields if f.turn_after) if turn else self.fields

    def placed(self, model: type[BaseModel], turn: bool) -> tuple[dict[str, int], tuple[DialectField, ...]]:
        """(``order``, the fields ``model`` may carry in that order)."""
        rank = self.order(model, turn)
        fields = [f for f in self.fields if f.turn_after or not turn]
        return rank, tuple(sorted(fields, key=lambda f: rank[f.name]))

    def keys(self, turn: bool) -> frozenset[str]:
        """Every key these fields (and, for a case, the renames) take in a raw mapping."""
        found = self.key_sets.get(turn)
        if found is None:
            names = {key for f in self.of(turn) for key in (f.name, *f.aliases)}
            found = self.key_sets[turn] = frozenset(names if turn else names | set(self.renames))
        return found

    def validate(self, f: DialectField, key: str, value: Any) -> Any:
        adapter = self.adapters.get(f.name)
        if adapter is None:
            adapter = self.adapters[f.name] = TypeAdapter(f.annotation)
        try:
            return adapter.validate_python(value)
        except ValidationError as exc:
            details: list[Any] = [{"type": e["type"], "loc": (key, *e["loc"]), "input": e["input"],
                                   **({"ctx": e["ctx"]} if "ctx" in e else {})} for e in exc.errors()]
            raise ValidationError.from_exception_data("Case", details) from None

    def order(self, model: type[BaseModel], turn: bool) -> dict[str, int]:
        """Field → its rank in ``model``'s serialised key order, dialect fields in their places."""
        found = self.orders.get(model.__name__)
        if found is None:
            anchored: dict[str, list[str]] = {}
            for f in (f for f in self.fields if f.turn_after or not turn):
                anchored.setdefault(f.turn_after if turn else f.after, []).append(f.name)
            names: list[str] = []

            def place(name: str) -> None:
                names.append(name)
                for follower in anchored.pop(name, []):
                    place(follower)

            for name in model.model_fields:
                place(name)
            names += [name for rest in anchored.values() for name in rest]
            found = self.orders[model.__name__] = {name: rank for rank, name in enumerate(names)}
        return found


_NO_DIALECT_FIELDS = DialectFields()
_dialect_fields: list[Callable[[], DialectFields]] = []


def use_dialect_fields(provider: Callable[[], DialectFields]) -> None:
    """Install the source of the dialects' case fields (``evalgate.dialect`` does, when imported)."""
    _dialect_fields[:] = [provider]


DIALECT_REGISTRY = "evalgate.dialect"
"""The module that installs the dialects' fields when imported (``use_dialect_fields``)."""


def dialect_fields() -> DialectFields:
    """The dialects' case fields. The registry is loaded by name on first need, like the dialects themselves
    (a plug-in hook, not a layer dependency): a ``Case`` built before anything imported it reads the same
    fields as one the loader built."""
    if not _dialect_fields:
        importlib.import_module(DIALECT_REGISTRY)
    return _dialect_fields[0]() if _dialect_fields else _NO_DIALECT_FIELDS


def _split_dialect_data(data: Any, turn: bool) -> Any:
    """A raw case (or turn) with the dialects' spellings of generic fields renamed and their own fields
    moved, validated, into ``dialect_data``."""
    if not isinstance(data, dict):
        return data
    if turn and "dialect_data" in data:  # a turn in a file: not one of its keys
        raise ValidationError.from_exception_data(
            "Turn", [{"type": "extra_forbidden", "loc": ("dialect_data",), "input": data["dialect_data"]}])
    known = dialect_fields()
    if not known.fields or known.keys(turn).isdisjoint(data):
        return data
    data = dict(data)
    if not turn:
        for spelling, name in known.renames.items():
            if spelling in data and name not in data:
                data[name] = data.pop(spelling)
    extracted = dict(data.get("dialect_data") or {})
    for f in known.of(turn):
        if f.name in data:
            extracted[f.name] = known.validate(f, f.name, data.pop(f.name))
            continue
        for key in f.aliases:  # the first spelling present wins, like a field's aliases
            if key in data:
                extracted[f.name] = known.validate(f, key, data.pop(key))
                break
    data["dialect_data"] = extracted
    return data


def _flat_dialect_data(model: BaseModel, data: Any, info: SerializationInfo, turn: bool) -> Any:
    """``data`` (``model`` serialised) with its ``dialect_data`` as top-level keys in their places."""
    known = dialect_fields()
    values: Mapping[str, Any] = getattr(model, "dialect_data", {})
    skip_none = info.exclude_none or info.exclude_defaults
    if not known.fields or not isinstance(data, dict) or (not values and (skip_none or info.exclude_unset)):
        return data
    placed = known.orders_placed.get(type(model).__name__)
    if placed is None:
        placed = known.orders_placed[type(model).__name__] = known.placed(type(model), turn)
    rank, fields = placed
    exclude = info.exclude if isinstance(info.exclude, set | dict) else ()
    include = info.include if isinstance(info.include, set | dict) else None
    added: list[tuple[int, str, Any]] = []
    for f in fields:
        if f.name in exclude or (include is not None and f.name not in include):
            continue
        if f.name not in values and info.exclude_unset:
            continue
        value = values.get(f.name)
        if value is None and skip_none:
            continue
        added.append((rank[f.name], f.name, value))
    if not added:
        return data
    merged: dict[str, Any] = {}
    at, last = 0, len(added)
    for key, value in data.items():  # both in serialised order: merge them
        position = rank.get(key, len(rank))
        while at < last and added[at][0] < position:
            merged[added[at][1]] = added[at][2]
            at += 1
        merged[key] = value
    for _, name, value in added[at:]:
        merged[name] = value
    return merged


class DialectDataModel(BaseModel):
    """A case or a turn: the dialects' own fields of it live in ``dialect_data`` (which the subclass declares),
    read from and written to the flat document (``_split_dialect_data``, ``_flat_dialect_data``)."""

    dialect_turn: ClassVar[bool] = False
    """A conversation turn (``DialectField.turn_after``; no renames of generic fields), else a whole case."""

    @model_validator(mode="before")
    @classmethod
    def _dialect_fields(cls, data: Any) -> Any:
        return _split_dialect_data(data, turn=cls.dialect_turn)

    @model_serializer(mode="wrap")
    def _flat(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        return _flat_dialect_data(self, handler(self), info, turn=self.dialect_turn)

    @classmethod
    def dialect_keys(cls) -> dict[str, Any]:
        """Every key the dialects add to a raw case or turn (their fields, aliases and, for a case, their
        spellings of generic fields) → its annotation."""
        known = dialect_fields()
        keys = {key: f.annotation for f in known.of(cls.dialect_turn) for key in (f.name, *f.aliases)}
        if not cls.dialect_turn:
            keys.update({spelling: cls.model_fields[name].annotation for spelling, name in known.renames.items()
                         if name in cls.model_fields})
        return keys


class Turn(DialectDataModel):
    """One user message of a conversation case, with the expectations on the answer to it."""

    dialect_turn = True
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    input: str = Field(validation_alias=AliasChoices("input", "user", "message", "content"))
    expected_output: str | None = None
    expect_empty: bool = False
    expected_keywords: list[str] | None = None
    expected_sources: list[str] | None = None
    expected_data_sources: list[str] | None = None
    passing_criteria: str | list[str] | None = None
    expected_answer_criteria: str | None = None
    agents_should_include: list[str] | None = None
    agents_should_exclude: list[str] | None = None
    tools_should_include: list[str] | None = None
    tools_should_exclude: list[str] | None = None
    rules: list[RuleCheck] = Field(default_factory=list)
    trajectory: Trajectory | None = None
    """Expectations on this turn's trace (the spans of this turn's call, or of its ``trace_file``)."""
    metrics: list[str] | None = None
    assertions: list[CaseAssertion] | None = Field(default=None, validation_alias=AliasChoices("assert", "assertions"))
    output: str | None = _alias("output", "answer", "response")
    sources: list[str] | None = None
    agents_called: list[str] | None = None
    tools_used: list[str] | None = None
    agent_id: str | None = None
    data_sources: list[str] | None = None
    trace_file: str | None = None
    """This turn's recorded trace: an OTLP/JSON file, relative to the dataset file."""
    dialect_data: dict[str, Any] = Field(default_factory=dict, exclude=True)
    """The dialects' own fields of this turn (``DialectField.turn_after``)."""

    @field_validator("input")
    @classmethod
    def _said(cls, value: str) -> str:
        return _not_blank(value, "a turn needs the user's message ('input')")


class SimulatedUser(BaseModel):
    """A user played by an LLM: who they are; the case's ``goal`` is what they want."""

    model_config = ConfigDict(extra="forbid")
    persona: str
    max_turns: int = Field(default=5, ge=1, le=50)
    first_message: str | None = None
    """The opening message (else the simulator writes it too)."""

    @field_validator("persona")
    @classmethod
    def _described(cls, value: str) -> str:
        return _not_blank(value, "simulated_user needs a persona")


class Case(DialectDataModel):
    """One test case. Built in code, unknown keys are kept in ``metadata`` so nothing is lost; the dataset
    loader rejects them instead (``evalgate.dataset.load.CASE_KEYS``: a misspelt field must not pass)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, str_strip_whitespace=False)

    id: str = Field(default="", validation_alias=AliasChoices("id", "case_id"))
    input: str | None = _alias("input", "question", "query", "message", "prompt")
    description: str | None = None
    category: str | None = None
    tags: list[str] = Field(default_factory=list)
    risk_level: RiskLevel = RiskLevel.medium
    difficulty: str | None = None
    evolution_type: str | None = None
    language: str | None = None
    suite: str | None = None

    # --- expectations --------------------------------------------------------------------------
    expected_output: str | None = None
    expect_empty: bool = False
    """An empty (or whitespace) answer is the right answer here (a refusal to fill in, a no-op command): its
    text metrics score it. Without it an empty answer is missing evidence: every metric reading the answer
    text is ``unavailable`` (``metrics.registry.reads_answer_text``)."""
    expected_sources: list[str] | None = None
    """Source ids a right answer retrieves, most relevant first (``hit_rate``, ``mrr``, ``precision_at_k``,
    ``recall_at_k`` against the recorded ``sources``)."""
    expected_keywords: list[str] | None = None
    """Words the answer text should contain (``keyword_coverage``: the share found, case-insensitive and
    whole-word)."""
    expected_data_sources: list[str] | None = None
    """Data sources the agent must consult (``data_source_match`` against the recorded ``data_sources``)."""
    expected_answer_criteria: str | None = None
    """What a right answer covers, in prose: the judge's rubric for ``answer_quality``,
    ``factual_correctness`` and ``completeness``."""
    passing_criteria: str | list[str] | None = None
    """What the answer must do to pass, one criterion or a list: turns the judged ``relevancy`` on."""
    agents_should_include: list[str] | None = None
    """Agents the answer must show called (recorded ``agents_called`` or the trace):
    ``workflow_agents``, ``workflow``."""
    agents_should_exclude: list[str] | None = None
    """Agents the answer must not show called (recorded ``agents_called`` or the trace):
    ``workflow_agents``, ``workflow``."""
    tools_should_include: list[str] | None = None
    """Tools the answer must show used (recorded ``tools_used`` or the trace):
    ``workflow_tools``, ``workflow``."""
    tools_should_exclude: list[str] | None = None
    """Tools the answer must not show used (recorded ``tools_used`` or the trace):
    ``workflow_tools``, ``workflow``."""
    expected_my_mentions: list[str] | None = None
    """Own brands the answer mentions (``mention_precision``/``_recall``/``_f1`` against ``mentions``)."""
    expected_competitor_mentions: list[str] | None = None
    """Competitor brands the answer mentions (the same mention metrics)."""
    expected_ranked_list: list[str] | None = None
    """The brands in the order the answer should rank them (``rank_accuracy``: the share of positions that match)."""
    retrieval_context: list[str] | None = None
    """The passages the answer should rest on: the context of ``faithfulness`` and ``groundedness`` when
    the target reports no ``debug_context``."""
    rules: list[RuleCheck] = Field(default_factory=list)
    trajectory: Trajectory | None = None
    """Expectations on the agent's trace: tools in order, their arguments, step and token limits."""
    metrics: list[str] | None = None
    assertions: list[CaseAssertion] | None = Field(default=None, validation_alias=AliasChoices("assert", "assertions"))
    """``assert:`` — metrics run on this case only, with per-case thresholds (see ``CaseAssertion``)."""

    # --- recorded target-side data -------------------------------------------------------------
    output: str | None = _alias("output", "answer", "response", "actual_output")
    """A recorded answer's text (``target: recorded``); a live target's answer replaces it."""
    sources: list[str] | None = None
    """The source ids the answer cited or retrieved, in rank order (read against ``expected_sources``)."""
    agents_called: list[str] | None = None
    """The agents the answer called, in order (read against ``agents_should_include/exclude``)."""
    tools_used: list[str] | None = None
    """The tools the answer used, in order (read against ``tools_should_include/exclude``)."""
    agent_id: str | None = None
    """The agent that answered (read by ``specialist_match``)."""
    data_sources: list[str] | None = None
    """The data sources the answer consulted (read against ``expected_data_sources``)."""
    mentions: list[Mention] | None = None
    ranked_list: list[str] | None = None
    num_tokens: int | None = Field(default=None, ge=0)
    """The answer's length in tokens as the target counted it (else evalgate counts: ``num_tokens``)."""
    latency_ms: float | None = Field(default=None, ge=0)
    """How long the recorded call took, in milliseconds."""
    debug_context: list[str] | None = None
    """The context the target reports it retrieved (the judged grounding metrics' context)."""
    trace_file: str | None = None
    """A recorded case's trace: an OTLP/JSON file, relative to the dataset file (``traces.traced``)."""

    # --- conversations (docs/conversations.md) --------------------------------------------------
    turns: list[Turn] | None = None
    """The user's messages in order, each with its own expectations; the case's own expectations then
    apply to the whole conversation."""
    simulated_user: SimulatedUser | None = None
    """Instead of ``turns``: an LLM plays this user until ``goal`` is met or ``max_turns`` is reached."""
    goal: str | None = None
    """What the user wants from the conversation (judged by ``goal_completion``; a simulated user's aim)."""
    assistant_role: str | None = None
    """The role the assistant must keep throughout (judged by ``role_adherence``)."""

    metadata: dict[str, Any] = Field(default_factory=dict)
    dialect_data: dict[str, Any] = Field(default_factory=dict, exclude=True)
    """The dialects' own fields of this case (``DialectField``; read with ``dialect_value``), serialised flat."""

    # --- provenance (set by the loader, never read from the file) ------------------------------
    source_file: str | None = Field(default=None, exclude=True)
    source_line: int | None = Field(default=None, exclude=True)
    index: int = Field(default=0, exclude=True)
    dialect: str | None = Field(default=None, exclude=True)
    """The in-house framework whose dialect the case speaks (``evalgate.dialects``): its suite's declared
    ``kind`` or its file's native format; ``generic`` for ``kind: generic``; None for neither."""

    def dialect_value(self, name: str, default: Any = None) -> Any:
        """The value of a dialect's own field ``name`` (``default`` when the case does not set it)."""
        extra = self.__pydantic_extra__  # set after validation (``model_copy(update=...)`` skips validators)
        value = extra[name] if extra and name in extra else self.dialect_data.get(name)
        return default if value is None else value

    def role_value(self, role: str, default: Any = None) -> Any:
        """The value of the dialect field that plays ``role`` (``DialectField.role``), else ``default``."""
        name = dialect_fields().role_field(role)
        return self.dialect_value(name, default) if name else default

    @field_validator("risk_level", mode="before")
    @classmethod
    def _risk_lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("tags", mode="before")
    @classmethod
    def _tags_list(cls, value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, str):
            return [t.strip() for t in value.split(",") if t.strip()]
        return value

    @field_validator("retrieval_context", "debug_context", mode="before")
    @classmethod
    def _context_list(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("id", mode="before")
    @classmethod
    def _id_text(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        return value

    @model_validator(mode="after")
    def _finish(self) -> Case:
        extra = self.__pydantic_extra__ or {}
        if extra:
            self.metadata = {**extra, **self.metadata}
            self.__pydantic_extra__ = {}
        if self.turns is not None or self.simulated_user is not None:
            self._check_conversation()
        if not self.id:
            if not self.input:
                spellings = "".join(f" (or {s!r})" for s, n in dialect_fields().renames.items() if n == "id")
                raise ValueError(f"a case needs an 'id'{spellings} or an 'input'/'question'/'query'")
            self.id = stable_case_id(self.input)
        for check in dialect_fields().checks:
            check(self)
        self._check_workflow()
        return self

    def _check_conversation(self) -> None:
        if self.turns is not None and self.simulated_user is not None:
            raise ValueError("a conversation gives 'turns' or 'simulated_user', not both")
        if self.turns is not None and not self.turns:
            raise ValueError("turns: a conversation needs at least one turn")
        if self.simulated_user is not None and not (self.goal or "").strip():
            raise ValueError("simulated_user needs the case's 'goal' (what the simulated user wants)")
        if self.input is not None:
            raise ValueError("a conversation case takes its messages from 'turns' (or 'simulated_user'), "
                             "not 'input'")
        if not self.id:
            seed = [turn.input for turn in self.turns or []] or [self.goal or ""]
            self.id = stable_case_id("\n".join(seed))

    @property
    def is_conversation(self) -> bool:
        return self.turns is not None or self.simulated_user is not None

    def _check_workflow(self) -> None:
        """A name may not be both required and forbidden (compared like the workflow metric: stripped,
        case-folded)."""
        for side, included, excluded in (("agents", self.agents_should_include, self.agents_should_exclude),
                                         ("tools", self.tools_should_include, self.tools_should_exclude)):
            if not included or not excluded:
                continue  # a contradiction needs both lists
            include = {n.strip().casefold(): n for n in included if n.strip()}
            for name in excluded:
                if name.strip() and name.strip().casefold() in include:
                    raise ValueError(f"{side}_should_exclude: {name!r} is also in {side}_should_include "
                                     f"(as {include[name.strip().casefold()]!r})")

    @property
    def location(self) -> str:
        """``file:line`` of the case in its dataset, or ``<memory>``."""
        if not self.source_file:
            return "<memory>"
        return f"{self.source_file}:{self.source_line or 1}"

    @property
    def is_critical(self) -> bool:
        return self.risk_level is RiskLevel.critical

    @property
    def requested_metrics(self) -> list[str]:
        """Metric names (or code references) the case asks for: its ``metrics`` list and the ``metric`` /
        ``check`` of its ``assert:`` entries, and those of its conversation turns."""
        names = list(self.metrics or [])
        for holder in (self, *(self.turns or ())):
            if holder is not self:
                names += holder.metrics or []
            for entry in holder.assertions or []:
                if entry.metric is not None:
                    names.append(entry.metric)
                elif entry.check is not None:
                    names.append(entry.check)
        return names

    @property
    def criteria(self) -> str | None:
        """Rubric text for judges: passing_criteria, expected_answer_criteria or a dialect's criteria field."""
        if isinstance(self.passing_criteria, list):
            return "\n".join(f"- {c}" for c in self.passing_criteria)
        return self.passing_criteria or self.expected_answer_criteria or next(
            (self.dialect_data[f.name] for f in dialect_fields().fields if f.criteria and f.name in self.dialect_data),
            None)


# --- results ----------------------------------------------------------------------------------------


class Answer(BaseModel):
    """What the system under test returned for one case (recorded, HTTP, model or command)."""

    model_config = ConfigDict(extra="forbid")
    output: str | None = None
    sources: list[str] | None = None
    agents_called: list[str] | None = None
    tools_used: list[str] | None = None
    agent_id: str | None = None
    data_sources: list[str] | None = None
    mentions: list[Mention] | None = None
    ranked_list: list[str] | None = None
    debug_context: list[str] | None = None
    num_tokens: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_ms: float | None = None
    cost_usd: float | None = None
    trace: dict[str, Any] | None = None
    """The summary of the case's OpenTelemetry spans (``traces.summary.summarize``), when traces were
    received or read from the case's ``trace_file``."""
    error: str | None = None
    """Set when the target could not produce an answer; the case is then ``errored``."""
    transcript: list[dict[str, str]] | None = None
    """A conversation's messages (``role``: user | assistant, ``content``), for metrics judging it whole."""
    truncated: dict[str, int] | None = None
    """Fields cut to ``max_answer_chars``: field → its size before the cut (characters for ``output`` and
    ``agent_id``, items for lists). Such an answer's case is errored."""


ThresholdOp = Literal["min", "max", "gt", "lt"]
THRESHOLD_OPS: tuple[str, ...] = ("min", "max", "gt", "lt")
THRESHOLD_SYMBOLS: dict[str, str] = {"min": "≥", "max": "≤", "gt": ">", "lt": "<"}


class Threshold(BaseModel):
    """A bound on a metric: ``{"min": x}`` (value ≥ x), ``{"max": x}`` (value ≤ x), or the strict
    ``{"gt": x}`` (value > x) and ``{"lt": x}`` (value < x), for minimums a seed states as "> x"."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    op: ThresholdOp
    value: float

    @model_validator(mode="before")
    @classmethod
    def _from_mapping(cls, data: Any) -> Any:
        if isinstance(data, dict) and "op" not in data:
            keys = set(data)
            if len(keys) == 1 and next(iter(keys)) in THRESHOLD_OPS:
                op = next(iter(keys))
                return {"op": op, "value": data[op]}
            raise ValueError("a threshold is a number, {'min': x}, {'max': x}, {'gt': x} or {'lt': x}; "
                             f"got keys {sorted(map(str, keys))}")
        return data

    @model_serializer
    def _to_mapping(self) -> dict[str, float]:
        return {self.op: self.value}

    def admits(self, value: float) -> bool:
        """True when ``value`` meets the bound (``>=`` min, ``<=`` max, ``>`` gt, ``<`` lt)."""
        op = self.op
        if op == "min":
            return value >= self.value
        if op == "max":
            return value <= self.value
        return value > self.value if op == "gt" else value < self.value

    def __str__(self) -> str:
        return f"{THRESHOLD_SYMBOLS[self.op]} {self.value:g}"


# --- your own metrics: declarations and per-case assertions (docs/custom-metrics.md) ------------------

JUDGE_FIELDS: tuple[str, ...] = ("input", "output", "expected_output", "retrieval_context", "debug_context",
                                 "expected_answer_criteria", "transcript", "goal", "assistant_role")
"""Case and answer fields a custom judged metric may show its judge, besides ``metadata.KEY``."""
DEFAULT_JUDGE_FIELDS: tuple[str, ...] = ("input", "output")
DEFAULT_CUSTOM_THRESHOLD = 0.5
"""Threshold of a declared metric that names none (``threshold: null`` makes it informational)."""
METRIC_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,63}")
MAX_STEPS = 20


class RubricBand(BaseModel):
    """One score band of a rubric: the score a judge gives when ``description`` fits the answer."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    score: float
    description: str

    @field_validator("description")
    @classmethod
    def _text(cls, value: str) -> str:
        return _not_blank(value, "a rubric band needs a description").strip()


def _metric_name(value: str) -> str:
    if not METRIC_NAME.fullmatch(value):
        raise ValueError("a metric name is 1–64 letters, digits, '_', '.' or '-', starting with a letter or '_'")
    return value


def _threshold_or_number(value: Any) -> Any:
    """A threshold entry: a finite number, a ``Threshold`` mapping (``{min|max|gt|lt: x}``), or None
    (informational)."""
    if value is None or isinstance(value, Threshold):
        return value
    if isinstance(value, bool) or not isinstance(value, int | float | dict):
        raise ValueError("threshold must be a number, {min: x}, {max: x}, {gt: x} or {lt: x}")
    if isinstance(value, dict):
        bound = next(iter(value.values()), None) if len(value) == 1 else None
        if isinstance(bound, bool) or not isinstance(bound, int | float | None):
            raise ValueError("threshold must be {min: x}, {max: x}, {gt: x} or {lt: x} with a number x")
        value = Threshold.model_validate(value)  # names the keys it accepts
        number = value.value
    else:
        number = float(value)
    if number != number or number in (float("inf"), float("-inf")):
        raise ValueError("threshold must be a finite number")
    return value


class JudgedParts(BaseModel):
    """What a custom judged metric (or an inline one-off check) is made of."""

    criteria: str | None = None
    """What a good answer does, in plain words (trusted: written by the test author)."""
    evaluation_steps: list[str] | None = None
    """The steps the judge follows; generated once from ``criteria`` by the judge when absent."""
    rubric: list[RubricBand] | None = None
    """Score bands (e.g. 0/0.25/0.5/0.75/1, or 1–5); the judge's score is mapped linearly onto 0–1."""
    fields: list[str] | None = None
    """What the judge sees: JUDGE_FIELDS and ``metadata.KEY`` (default: input, output)."""
    check: str | None = None
    """A code check instead of a judge: ``package.module:function`` or ``file://path.py:function``."""
    direction: Literal["higher", "lower"] | None = None
    """A code check's better direction (``lower`` for an error rate); not given: the function's own
    (``@evalgate.metric(direction=…)``), else ``higher`` — or ``lower`` inferred from a ``max`` threshold, with a
    notice. The comparison with a baseline reads it to tell a regression from an improvement."""
    threshold: float | Threshold | None = None

    @field_validator("criteria", "check")
    @classmethod
    def _filled(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must not be blank")
        return value

    @field_validator("evaluation_steps")
    @classmethod
    def _steps(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        steps = [step.strip() for step in value]
        if not steps or any(not step for step in steps):
            raise ValueError("evaluation_steps must be a non-empty list of non-blank steps")
        if len(steps) > MAX_STEPS:
            raise ValueError(f"at most {MAX_STEPS} evaluation steps")
        return steps

    @field_validator("rubric", mode="before")
    @classmethod
    def _rubric_mapping(cls, value: Any) -> Any:
        if isinstance(value, dict):  # {1.0: "...", 0.5: "..."} is a shorthand of the band list
            return [{"score": score, "description": text} for score, text in value.items()]
        return value

    @field_validator("rubric")
    @classmethod
    def _bands(cls, value: list[RubricBand] | None) -> list[RubricBand] | None:
        if value is None:
            return None
        scores = [band.score for band in value]
        if len(value) < 2:
            raise ValueError("a rubric needs at least two score bands")
        if len(set(scores)) != len(scores):
            raise ValueError("rubric scores must be distinct")
        if any(s != s or s in (float("inf"), float("-inf")) for s in scores):
            raise ValueError("rubric scores must be finite numbers")
        return sorted(value, key=lambda band: -band.score)

    @field_validator("fields")
    @classmethod
    def _fields(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        if not value:
            raise ValueError("fields must name at least one field")
        for name in value:
            if name.startswith("metadata."):
                if not name.removeprefix("metadata.").strip():
                    raise ValueError("metadata.KEY needs a key")
            elif name not in JUDGE_FIELDS:
                close = difflib.get_close_matches(name, [*JUDGE_FIELDS, "metadata.KEY"], n=1, cutoff=0.6)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ValueError(f"unknown field {name!r}{hint}; choose from {', '.join(JUDGE_FIELDS)} or metadata.KEY")
        return list(dict.fromkeys(value))

    @field_validator("threshold", mode="before")
    @classmethod
    def _threshold(cls, value: Any) -> Any:
        return _threshold_or_number(value)

    def _check_kind(self, what: str) -> None:
        if self.direction is not None and self.check is None:
            raise ValueError(f"{what}: 'direction' is for a code check ('check'); a judged metric's higher scores "
                             "are better")
        if self.check is not None:
            extra = [name for name in ("criteria", "evaluation_steps", "rubric", "fields")
                     if getattr(self, name) is not None]
            if extra:
                raise ValueError(f"{what} with 'check' (a code check) takes no {', '.join(extra)}")
        elif self.criteria is None and (self.evaluation_steps or self.rubric or self.fields):
            raise ValueError(f"{what} needs 'criteria' (what a good answer does)")

    @property
    def threshold_given(self) -> bool:
        return "threshold" in self.model_fields_set


class MetricDeclaration(JudgedParts):
    """A metric declared in a suite block or evalgate.yaml ``metrics:``: a judged metric (``criteria``)
    or a code check (``check``), run on every case of its scope (or of its ``categories`` / ``tags``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    description: str | None = None
    categories: list[str] | None = None
    """Run only on cases of these categories."""
    tags: list[str] | None = None
    """Run only on cases with any of these tags."""
    run: Literal["all", "asked"] = "all"
    """``asked``: only on cases that list the metric (``metrics:`` or ``assert:``)."""

    @model_validator(mode="before")
    @classmethod
    def _not_critical(cls, data: Any) -> Any:
        if isinstance(data, dict) and "critical" in data:
            raise ValueError("'critical' is not a metric setting: a case is critical by its own "
                             "risk_level: critical (any failed metric of that case then fails the gate)")
        return data

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _metric_name(value)

    @field_validator("categories", "tags", mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @model_validator(mode="after")
    def _kind(self) -> MetricDeclaration:
        if self.criteria is None and self.check is None:
            raise ValueError(f"metric {self.name!r} needs 'criteria' (a judged metric) or 'check' (a code check)")
        if self.criteria is not None and self.check is not None:
            raise ValueError(f"metric {self.name!r} takes 'criteria' or 'check', not both")
        self._check_kind(f"metric {self.name!r}")
        return self


class CaseAssertion(JudgedParts):
    """One entry of a case's ``assert:`` list: run a metric on this case (``metric``, by name or reference),
    or a one-off judged check (``criteria``) or code check (``check``), with an optional per-case threshold."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    metric: str | None = None
    name: str | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        return value if value is None else _metric_name(value)

    @model_validator(mode="after")
    def _kind(self) -> CaseAssertion:
        given = [key for key in ("metric", "criteria", "check") if getattr(self, key) is not None]
        if len(given) != 1:
            raise ValueError("an assert entry takes exactly one of 'metric' (a metric's name), 'criteria' "
                             "(a one-off judged check) or 'check' (a one-off code check)")
        if self.metric is not None:
            extra = [k for k in ("name", "evaluation_steps", "rubric", "fields") if getattr(self, k) is not None]
            if extra:
                raise ValueError(f"an assert entry naming a metric takes only 'threshold' (not {', '.join(extra)})")
        self._check_kind("an assert entry")
        return self


@dataclass(frozen=True, slots=True)
class Score:
    """A metric's value on one case plus whatever explains it: ``details`` (a JSON-able mapping kept in the
    results) and ``reason`` (one line shown beside a failing value in the reports)."""

    value: float
    details: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None


class MetricSkipped(Exception):
    """The metric does not run in this configuration (e.g. judge provider ``none``)."""


class MetricUnavailable(Exception):
    """The metric should have run but produced no trustworthy value (strict mode fails on this)."""

    def __init__(self, reason: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.details = details or {}


class MetricErrored(Exception):
    """The metric's own code failed (a user check that raised or returned nonsense); the message is the
    one-line reason recorded with the ``errored`` result."""


class MetricStatus(StrEnum):
    passed = "passed"
    failed = "failed"
    errored = "errored"
    skipped = "skipped"
    unavailable = "unavailable"
    advisory = "advisory"
    """A value shown but not gating: its judge is not proven (no calibration, failed controls); ``passed`` null."""


class MetricResult(BaseModel):
    """One metric on one case. ``value`` is None unless status is passed/failed."""

    model_config = ConfigDict(extra="forbid")
    value: float | None = None
    threshold: Threshold | None = None
    passed: bool | None = None
    status: MetricStatus
    reason: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)


class CaseStatus(StrEnum):
    passed = "passed"
    failed = "failed"
    errored = "errored"
    skipped = "skipped"


STATUS_TEXT: dict[Any, str] = {status: status.value for status in (*MetricStatus, *CaseStatus)}
"""``status.value`` of every metric and case status, without the enum property (slow on 3.11)."""


class CaseResult(BaseModel):
    """The record of one case (one repeat): the one type from the engine to the reports.

    Built in one place (``runner.record.case_record``) for single-turn and conversation cases; written by
    store/ as its JSON (``model_dump_json``: a results.json line and the SQLite ``cases.record`` document,
    fields in this order); read back with ``from_stored``."""

    model_config = ConfigDict(extra="forbid")
    id: str
    """The case's id (``Case.id``)."""
    index: int = 0
    """The case's position in the selected dataset (0-based): results are written in this order."""
    suite: str | None = None
    """The suite the case belongs to (its evalgate.yaml), or None."""
    category: str | None = None
    """The case's category, or None."""
    risk_level: str = "medium"
    """low, medium, high or critical (a critical case that fails can fail the gate on its own)."""
    difficulty: str | None = None
    """The case's difficulty label, or None."""
    evolution_type: str | None = None
    """How the case was derived (a generator's label), or None."""
    tags: list[str] = Field(default_factory=list)
    """The case's tags."""
    description: str | None = None
    """The case's one-line description, or None."""
    source: str = "<memory>"
    """Where the case was read: ``file:line``."""
    status: CaseStatus
    """passed, failed, errored or skipped (``verdict.gate.case_verdict``)."""
    passed: bool
    """``status == passed``."""
    error: str | None = None
    """Why the case has no scorable answer (redacted, at most ``runner.record.ERROR_CHARS`` characters)."""
    reasons: list[str] = Field(default_factory=list)
    """Why the case did not pass, one line each (redacted, cut like ``error``)."""
    input: str | None = None
    """The message sent (a conversation: its first turn's)."""
    expected: dict[str, Any] = Field(default_factory=dict)
    """The expectation fields the case sets (``runner.record.expectations_of``)."""
    output: str | None = None
    """The answer's text (a conversation: every answer joined by blank lines)."""
    answer: dict[str, Any] = Field(default_factory=dict)
    """Target-side data other than the text (sources, tools, agents, mentions …)."""
    metrics: dict[str, MetricResult] = Field(default_factory=dict)
    """Each metric's result on the case, in plan order."""
    num_tokens: int | None = None
    """The answer's tokens (the target's count, else the ``num_tokens`` metric's)."""
    latency_ms: float | None = None
    """The target's own measurement of its call, in milliseconds (None when it has none)."""
    cost_usd: float | None = None
    """What the target's call cost, in US dollars (None when unknown)."""
    repeat: int = 0
    """Which repeat of the case this is (0-based, ``repeat:``)."""
    expectation: str | None = None
    """The digest of what the case asks and expects (``runner.expectations``), compared with the base run's."""
    conversation: dict[str, Any] | None = None
    """A conversation case's transcript and turns: ``{"turns": [{"turn", "input", "output", "status",
    "reasons", "metrics", …}], "failed_turn", "stopped", "planned_turns", "simulated", …}``."""

    @classmethod
    def from_stored(cls, record: Mapping[str, Any] | str | bytes) -> CaseResult:
        """The record as stored (a results.json ``results`` entry or SQLite document: parsed JSON or its
        text) as a ``CaseResult``; raises ``pydantic.ValidationError`` for a record of another shape."""
        if isinstance(record, str | bytes):
            return cls.model_validate_json(record)
        return cls.model_validate(record)


Turn.model_rebuild()
Case.model_rebuild()

ModelT = TypeVar("ModelT", bound=BaseModel)


def trusted(cls: type[ModelT], values: dict[str, Any], fields_set: set[str] | None = None) -> ModelT:
    """``cls`` built from ``values`` without validation, for hot paths whose inputs already have exactly
    the declared types (the caller checks what it cannot guarantee and validates otherwise).

    ``values`` must hold every field (it becomes the instance's ``__dict__``); ``fields_set`` is the set
    of fields given explicitly (default: all), as ``cls(**explicit)`` would record it. The result
    equals ``cls(**values)`` and costs a fraction of validating it (or of ``model_construct``).
    """
    if not _TRUSTED_OK:
        return cls.model_validate(values)  # pragma: no cover - only if pydantic's internals changed
    instance = _new(cls)
    _set(instance, "__dict__", values)
    _set(instance, "__pydantic_fields_set__", set(values) if fields_set is None else fields_set)
    _set(instance, "__pydantic_extra__", None)
    _set(instance, "__pydantic_private__", None)
    return instance


_new = object.__new__
_set = object.__setattr__


def _trusted_matches_validation() -> bool:
    """One-time check that ``trusted`` reproduces pydantic's own construction (else it validates)."""
    global _TRUSTED_OK
    _TRUSTED_OK = True
    values: dict[str, Any] = {"value": 0.5, "threshold": Threshold(op="min", value=0.9), "passed": False,
                              "status": MetricStatus.failed, "reason": "r", "details": {"k": [1]}}
    try:
        fast, slow = trusted(MetricResult, dict(values)), MetricResult(**values)
        return (fast == slow and fast.model_fields_set == slow.model_fields_set
                and fast.model_dump_json() == slow.model_dump_json() and fast.model_copy() == slow)
    except Exception:  # pragma: no cover - only if pydantic's internals changed
        return False


_TRUSTED_OK = _trusted_matches_validation()
