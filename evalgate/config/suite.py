"""Suite configuration: the optional ``suite:`` block of a dataset file and the suite-related top-level
keys of evalgate.yaml.

A suite block looks like::

    suite:
      name: brand-mentions
      description: extraction accuracy of the brand-mention detector
      metrics: [mention_f1]               # run on every case, besides the metrics that apply anyway
      exclude_metrics: [judge_quality]
      thresholds: {mention_precision: 0.9, false_is_mine_rate: {max: 0}}
      options: {k: 3}                     # evalgate.config.options.MetricOptions
      category_metrics: {waiver: [correctness, tool_calling]}

A bare threshold number means ``min`` for a metric whose direction is ``higher`` and ``max`` for a
``lower`` one; the direction comes from the metric registry when ``resolve_thresholds`` is called, so
this module never imports metric modules at import time.

This module also turns pydantic ``ValidationError`` into one readable line
(``format_validation_error``); the dataset loader shares it.
"""

from __future__ import annotations

import difflib
import math
import reprlib
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError, field_validator

from evalgate import dialect
from evalgate.config.options import MetricOptions
from evalgate.errors import UserError
from evalgate.model import THRESHOLD_OPS, MetricDeclaration, Threshold
from evalgate.safety.structure import check_yaml

SUITE_KEYS: frozenset[str] = frozenset(
    {"name", "description", "kind", "valid", "metrics", "exclude_metrics", "thresholds", "options", "category_metrics",
     "optional_metrics", "calibration"}
)
"""Keys a suite block (or evalgate.yaml's suite part) may hold."""

THRESHOLD_FORMS = "{min: x}, {max: x}, {gt: x} or {lt: x}"
"""The explicit threshold forms (gt/lt are strict: value > x, value < x)."""

ThresholdSpec = float | Threshold

VALUE_FIELDS: frozenset[str] = frozenset({
    "category", "difficulty", "evolution_type", "language", "risk_level", "tags",
    "expected_data_sources", "expected_keywords", "expected_sources", "agent_id", "data_sources",
    "agents_should_include", "agents_should_exclude", "tools_should_include", "tools_should_exclude",
})
"""Case fields a suite's ``valid:`` mapping may constrain (text, or lists of text); the dialects add their
own (``value_fields``)."""


def value_fields() -> frozenset[str]:
    """``VALUE_FIELDS`` and the dialects' own value fields."""
    return VALUE_FIELDS.union(*(d.value_fields for d in dialect.DIALECTS.values()))
"""A parsed threshold entry: a bare number (direction resolved later) or an explicit bound."""


def _entry_kind(value: Any) -> str:
    return "MetricDeclaration" if isinstance(value, Mapping | MetricDeclaration) else "str"


MetricEntry = Annotated[
    Annotated[str, Tag("str")] | Annotated[MetricDeclaration, Tag("MetricDeclaration")],
    Discriminator(_entry_kind),
]
"""One ``metrics:`` entry: a metric's name (built-in, declared, plug-in), a code reference
(``package.module:function``, ``file://checks.py:function``) or a declaration (``MetricDeclaration``)."""


class SuiteConfig(BaseModel):
    """Per-suite evaluation settings. Unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    description: str | None = None
    kind: str | None = None
    """The dialect of the suite's cases (``evalgate.dialect.DIALECTS``): its case format's required fields are
    checked and its behaviours apply; ``generic`` opts out of every dialect."""
    valid: dict[str, list[str] | None] = Field(default_factory=dict)
    """Field → allowed values (``null`` switches a kind's default set off), checked on every case."""
    metrics: list[MetricEntry] = Field(default_factory=list)
    exclude_metrics: list[str] = Field(default_factory=list)
    thresholds: dict[str, ThresholdSpec] = Field(default_factory=dict)
    options: MetricOptions = Field(default_factory=MetricOptions)
    category_metrics: dict[str, list[str]] = Field(default_factory=dict)
    optional_metrics: list[str] = Field(default_factory=list)
    """Gated metrics this suite's cases may lack a value for (the answer lacks what they need) without the
    case erroring (``verdict.gate.case_verdict``)."""
    calibration: list[str] = Field(default_factory=list)
    """Files of human-labelled examples for judge calibration (``evalgate.dataset.labels``), relative to the
    file holding this block."""

    @field_validator("thresholds", mode="before")
    @classmethod
    def _parse_thresholds(cls, value: Any) -> Any:
        if not isinstance(value, Mapping):
            return value
        return {name: _threshold_entry(name, raw) for name, raw in value.items()}

    @field_validator("kind", mode="before")
    @classmethod
    def _kind_name(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        aliases = dialect.kind_aliases()
        names = list(dialect.DIALECTS)
        name = aliases.get(value.strip().lower(), value.strip().lower())
        if name not in (*names, dialect.GENERIC):
            raise ValueError(f"unknown kind {value!r}{did_you_mean(value, [*names, dialect.GENERIC, *aliases])}; "
                             f"choose one of {', '.join(names)} or {dialect.GENERIC}")
        return name

    @field_validator("valid", mode="before")
    @classmethod
    def _valid_sets(cls, value: Any) -> Any:
        if not isinstance(value, Mapping):
            return value
        allowed = value_fields()
        for name in value:
            if name not in allowed:
                raise ValueError(f"valid: {name!r} is not a field with a set of values"
                                 f"{did_you_mean(str(name), allowed)}")
        return value

    @field_validator("metrics", "exclude_metrics", "calibration", mode="before")
    @classmethod
    def _name_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @property
    def metric_refs(self) -> list[str]:
        """The ``metrics:`` entries that name a metric (or a code reference), in order."""
        return [entry for entry in self.metrics if isinstance(entry, str)]

    @property
    def declarations(self) -> list[MetricDeclaration]:
        """The metrics this block declares (``metrics:`` entries that are mappings), in order."""
        return [entry for entry in self.metrics if isinstance(entry, MetricDeclaration)]

    def metric_names(self) -> set[str]:
        """Every metric name this suite mentions (for validation against the registry)."""
        names = set(self.metric_refs) | {d.name for d in self.declarations} | set(self.exclude_metrics)
        names |= set(self.thresholds)
        for listed in self.category_metrics.values():
            names.update(listed)
        return names

    def resolve_thresholds(self, directions: Mapping[str, str]) -> dict[str, Threshold]:
        """Thresholds as ``Threshold`` objects; a bare number becomes min (higher) or max (lower).

        ``directions`` maps metric name → ``higher``/``lower`` (the registry's, from the caller).
        """
        where = f"suite {self.name!r}" if self.name else "suite"
        validate_metric_names(self.thresholds, directions, f"{where}: thresholds")
        return {name: resolve_threshold(spec, directions[name]) for name, spec in self.thresholds.items()}


def resolve_threshold(spec: ThresholdSpec, direction: str) -> Threshold:
    """``spec`` as a ``Threshold``: a bare number x → ``min: x`` if direction is higher else ``max: x``."""
    if isinstance(spec, Threshold):
        return spec
    return Threshold(op="min" if direction == "higher" else "max", value=float(spec))


def _threshold_entry(name: Any, raw: Any) -> ThresholdSpec:
    """One thresholds entry parsed: a finite number or ``{min: x}`` / ``{max: x}`` / ``{gt: x}`` / ``{lt: x}``."""
    if isinstance(raw, bool) or not isinstance(raw, int | float | Mapping):
        raise ValueError(f"threshold {name!r} must be a number, {THRESHOLD_FORMS} (got {show_value(raw)})")
    if isinstance(raw, Mapping):
        bound = next((raw[op] for op in THRESHOLD_OPS if op in raw), None)
        if isinstance(bound, bool) or not isinstance(bound, int | float):
            raise ValueError(f"threshold {name!r} must be one of {THRESHOLD_FORMS} with a number x")
        try:
            threshold = Threshold.model_validate(dict(raw))
        except ValidationError as exc:
            raise ValueError(f"threshold {name!r}: {_first_message(exc)}") from None
        value = threshold.value
    else:
        try:
            threshold, value = None, float(raw)
        except OverflowError:
            raise ValueError(f"threshold {name!r} is too large (got {show_value(raw)})") from None
    if not math.isfinite(value):
        raise ValueError(f"threshold {name!r} must be a finite number (got {value})")
    return threshold if threshold is not None else value


def parse_suite_config(data: Any, where: str, label: str = "suite",
                       locate: Callable[[list[Any]], str | None] | None = None,
                       also_known: Iterable[str] = ()) -> SuiteConfig:
    """Validate a suite block; errors become one-line UserErrors ``where: label: problem``.

    ``where`` is ``file:line`` or ``file``; pass ``label=""`` for evalgate.yaml's top level. ``locate``
    turns the path of the first problem (``["metrics", 1, "critera"]``) into a better ``where`` (the
    ``file:line`` of that entry), or None to keep ``where``. ``also_known``: other keys valid where the
    block stands (evalgate.yaml's settings), suggested for an unknown top-level key.
    """
    prefix = f"{label}: " if label else ""
    if data is None:
        return SuiteConfig()
    if not isinstance(data, Mapping):
        raise UserError(f"{label or 'configuration'} must be a mapping (got {show_value(data)})", where=where)
    try:
        return SuiteConfig.model_validate(dict(data))
    except ValidationError as exc:
        path = first_error_path(exc, SuiteConfig)
        found = locate(path) if locate is not None else None
        first = exc.errors()[0]
        if also_known and first.get("type") == "extra_forbidden" and len(path) == 1:
            key = str(path[0])
            raise UserError(f"{prefix}unknown key {key!r}{did_you_mean(key, [*SUITE_KEYS, *also_known])}",
                            where=found or where) from None
        raise UserError(f"{prefix}{format_validation_error(exc, SuiteConfig)}", where=found or where) from None
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        raise UserError(one_line(f"{prefix}invalid ({type(exc).__name__}: {exc})"), where=where) from None


def validate_metric_names(names: Iterable[str], known: Iterable[str], where: str) -> None:
    """Raise a UserError naming every name not in ``known``, with a "did you mean" suggestion."""
    known_list = sorted(known)
    known_set = set(known_list)
    unknown = [name for name in names if name not in known_set]
    if not unknown:
        return
    parts = [f"{name!r}{did_you_mean(name, known_list)}" for name in unknown]
    label = "metric" if len(parts) == 1 else "metrics"
    raise UserError(f"unknown {label} {', '.join(parts)}", where=where)


def one_line(text: str) -> str:
    """``text`` with line breaks replaced by spaces (error messages must stay on one line)."""
    return " ".join(text.splitlines()) if "\n" in text or "\r" in text else text


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest choice (difflib ratio ≥ 0.6), else ``""``."""
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


# --- pydantic ValidationError → one line ------------------------------------------------------------

_REPR = reprlib.Repr()
_REPR.maxstring = 60
_REPR.maxother = 60
_REPR.maxlist = _REPR.maxdict = _REPR.maxtuple = _REPR.maxset = 4
_REPR.maxlevel = 3


def show_value(value: Any) -> str:
    """A short, safe ``repr`` of user input (bounded size, recursion-proof)."""
    return _REPR.repr(value)


def _choices(expected: str) -> str:
    """pydantic's ``"'a', 'b' or 'c'"`` → ``"a, b, c"``."""
    return expected.replace("' or '", "', '").replace("'", "")


_PHRASES: dict[str, str] = {
    "missing": "is required",
    "string_type": "must be text",
    "string_unicode": "must be valid Unicode text",
    "list_type": "must be a list",
    "tuple_type": "must be a list",
    "set_type": "must be a list",
    "dict_type": "must be a mapping",
    "model_type": "must be a mapping",
    "model_attributes_type": "must be a mapping",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be a whole number",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "finite_number": "must be a finite number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "invalid_key": "keys must be text",
    "recursion_loop": "must not refer to itself",
}


def _requirement(error: Mapping[str, Any]) -> str:
    """What one pydantic error asks for, without location or the offending value."""
    kind = error.get("type", "")
    ctx = error.get("ctx") or {}
    if kind in {"enum", "literal_error"} and "expected" in ctx:
        return f"must be one of {_choices(str(ctx['expected']))}"
    if kind in {"value_error", "assertion_error"}:
        return str(ctx.get("error") or error.get("msg", "invalid value"))
    bounds = {
        "greater_than_equal": ("≥", "ge"),
        "greater_than": (">", "gt"),
        "less_than_equal": ("≤", "le"),
        "less_than": ("<", "lt"),
    }
    if kind in bounds:
        symbol, key = bounds[kind]
        return f"must be {symbol} {ctx.get(key)}"
    msg = str(error.get("msg", "invalid value"))
    return _PHRASES.get(kind, msg[:1].lower() + msg[1:])


def _phrase(errors: Sequence[Mapping[str, Any]]) -> str:
    """The requirement(s) of the errors at one location (several for a union), plus the bad value."""
    wants = list(dict.fromkeys(_requirement(e) for e in errors))
    if len(wants) > 1 and all(w.startswith("must be ") for w in wants):
        wants = ["must be " + " or ".join(w.removeprefix("must be ") for w in wants)]
    text = "; ".join(wants)
    first = errors[0]
    if first.get("type") in {"missing", "value_error", "assertion_error"}:
        return text
    return f"{text} (got {show_value(first.get('input'))})"


def _unwrap(annotation: Any) -> Any:
    while typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def _union_members(annotation: Any) -> tuple[Any, ...]:
    annotation = _unwrap(annotation)
    origin = typing.get_origin(annotation)
    if origin is typing.Union or isinstance(annotation, types.UnionType):
        return tuple(_unwrap(a) for a in typing.get_args(annotation) if a is not type(None))
    return (annotation,)


def case_keys(model: type[BaseModel]) -> list[str]:
    """Every key a mapping validated as ``model`` may use: field names and their alias choices."""
    return list(_model_keys(model))


def _model_keys(model: type[BaseModel]) -> dict[str, Any]:
    """Every accepted key of ``model`` (field names and alias choices) → the field's annotation."""
    keys: dict[str, Any] = {}
    extension = getattr(model, "dialect_keys", None)  # the dialects' own case fields and spellings
    for name, field in model.model_fields.items():
        if extension is not None and name == "dialect_data":
            continue  # holds the dialects' fields (filled from their keys), not a key itself
        keys[name] = field.annotation
        alias = field.validation_alias
        choices = getattr(alias, "choices", None) or ([alias] if isinstance(alias, str) else [])
        for choice in choices:
            if isinstance(choice, str):
                keys[choice] = field.annotation
    if extension is not None:
        keys.update(extension())
    return keys


def _walk(model: type[BaseModel], loc: tuple[Any, ...]) -> tuple[list[Any], dict[str, Any] | None]:
    """Clean a pydantic ``loc`` (dropping union-member tags) and return the keys of the model that
    holds its last element (for "did you mean" on unknown keys), or None when unknown."""
    current: Any = model
    path: list[Any] = []
    parent_keys: dict[str, Any] | None = None
    for part in loc:
        members = _union_members(current)
        if len(members) > 1 and isinstance(part, str):
            # pydantic names the union member tried (its class name or tag); it is not a key
            current = next((m for m in members if getattr(m, "__name__", None) == part), Any)
            continue
        current = members[0] if len(members) == 1 else current
        path.append(part)
        parent_keys = None
        if isinstance(current, type) and issubclass(current, BaseModel):
            parent_keys = _model_keys(current)
            current = parent_keys.get(str(part), Any)
        elif typing.get_origin(current) in (list, tuple, set, frozenset):
            current = (typing.get_args(current) or (Any,))[0]
        elif typing.get_origin(current) is dict:
            current = (typing.get_args(current) or (Any, Any))[-1]
        else:
            current = Any
    return path, parent_keys


def first_error_path(exc: ValidationError, model: type[BaseModel]) -> list[Any]:
    """The cleaned location of ``exc``'s first problem (union member names dropped): for an unknown key
    the path ends with that key."""
    errors = exc.errors(include_url=False)
    if not errors:
        return []
    path, _ = _walk(model, tuple(errors[0].get("loc", ())))
    return path


def yaml_line(path: Path, keys: Iterable[Any]) -> int | None:
    """1-based line of the node at ``keys`` (mapping keys and list indexes) in the YAML/JSON file at
    ``path``; the deepest node that exists when the path goes further (a mapping key's own line when the
    last key is there). Read only to point at a problem: None when the file cannot be read."""
    import yaml  # lazy: pyyaml (~25 ms) only to point at a line of a file with a problem

    try:
        text = path.read_text(encoding="utf-8-sig")
        check_yaml(text)  # never compose a document too deep for the C composer's stack
        node = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except Exception:
        return None
    line = node.start_mark.line + 1 if node is not None else None
    for key in keys:
        if isinstance(node, yaml.MappingNode):
            found = next(((k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == str(key)), None)
            if found is None:
                break
            line, node = found[0].start_mark.line + 1, found[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and 0 <= key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            break
    return line


def _dotted(path: list[Any]) -> str:
    """``['rules', 0, 'value']`` → ``rules[0].value``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _locate(error: Mapping[str, Any], model: type[BaseModel]) -> tuple[str, str | None]:
    """(cleaned dotted location, unknown-key message or None) of one pydantic error."""
    path, keys = _walk(model, tuple(error.get("loc", ())))
    if error.get("type") == "extra_forbidden" and path:
        return _dotted(path[:-1]), f"unknown key {path[-1]!r}{did_you_mean(str(path[-1]), keys or {})}"
    return _dotted(path), None


def locate_field(error: Mapping[str, Any], model: type[BaseModel]) -> str:
    """The dotted field one pydantic error is about (``rules[1].type``), as ``format_validation_error`` names it."""
    return _locate(error, model)[0]


def format_validation_error(exc: ValidationError, model: type[BaseModel]) -> str:
    """The first problem of ``exc`` as one line, plus ``(+N more problems)`` for the others.

    Errors at the same location (a union's alternatives) are merged: ``must be text or an integer``.
    """
    groups: dict[tuple[str, str | None], list[Mapping[str, Any]]] = {}
    for error in exc.errors(include_url=False):
        groups.setdefault(_locate(error, model), []).append(error)
    messages: list[str] = []
    for (where, unknown), errors in groups.items():
        if unknown is not None:
            messages.append(f"{where}: {unknown}" if where else unknown)
        else:
            phrase = _phrase(errors)
            messages.append(f"field {where!r}: {phrase}" if where else phrase)
    if not messages:
        return "invalid value"
    extra = len(messages) - 1
    return one_line(messages[0] + (f" (+{extra} more problem{'s' if extra > 1 else ''})" if extra else ""))


def _first_message(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False)
    return _phrase(errors[:1]) if errors else "invalid value"
