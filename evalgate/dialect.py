"""The dialect interface: what an in-house framework's dialect may change, and the registry that finds them.

A suite without a ``kind`` gets the generic defaults (``WHEN``: which built-in metric runs on which
case). A dialect's behaviours apply to a case only when:

1. its suite declares the dialect's ``kind:`` (a suite block, or ``kind:`` in evalgate.yaml for every file
   without its own; ``kind: generic`` opts a suite out of every dialect);
2. its file is in the dialect's own format (the dialect's ``detect`` hook: its own field names or wrapper);
3. or the run names the dialect in ``compat`` (``--compat NAME``, or a spelling the dialect recognises).

Generic packages call only this module. The dialects themselves (``evalgate/dialects/``: the five in-house
frameworks) are loaded by name through the same hook an outside dialect uses — an entry point in the
``evalgate.dialects`` group whose object is a ``Dialect`` — so a built-in seed has no privilege a plug-in
lacks. ``BUILTIN`` names the five (the image runs from source, without installed entry points).

Output side: what a dialect's framework wrote and sent — its output documents and console summary
(``report.documents`` writes them for the run's ``compat`` dialects), its request payloads and context
names (the http and command targets consult a dialect only for a case that sets one of its
``request_fields``), its Langfuse score names, judge temperatures, reference fields and metric descriptions.
Descriptions are read while the built-in metrics register, so a dialect module imports no
``evalgate.metrics`` module at import time.
"""

from __future__ import annotations

import importlib
from abc import abstractmethod
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, TypeVar

from evalgate.model import Case, DialectField, DialectFields, use_dialect_fields

GENERIC = "generic"
"""The kind that opts a suite out of every dialect (``kind: generic``)."""

GROUP = "evalgate.dialects"
"""The entry-point group a dialect registers under (value ``module:attribute`` naming a ``Dialect``)."""

BUILTIN: tuple[str, ...] = (
    "evalgate.dialects.seed000:DIALECT",
    "evalgate.dialects.seed001:DIALECT",
    "evalgate.dialects.seed002:DIALECT",
    "evalgate.dialects.seed003:DIALECT",
    "evalgate.dialects.seed004:DIALECT",
)
"""The built-in dialects' entry points (the five in-house frameworks)."""


@dataclass(frozen=True, slots=True)
class Trigger:
    """A metric a dialect runs on the cases where ``applies`` holds, and why (for ``evalgate explain``)."""

    metric: str
    applies: Callable[[Case], bool]
    why: str


Passes = Callable[[], Iterable[Mapping[str, Any]]]
"""A fresh pass over a run's case records in dataset order (index, repeat) at each call: results.json's
``results`` streamed, or a list in memory."""


@dataclass(frozen=True, slots=True)
class OutputDocument:
    """A document a dialect's framework wrote after a run, written beside results.json (``--compat NAME``).

    ``fields(head, passes, include_responses)`` returns the document's fields but its last, per-case list,
    and a generator of that list's entries; ``head`` (results.json without ``results``) is complete once
    the first pass is over, so a builder reads it after taking its totals. Memory: independent of the
    number of records when ``fields`` keeps only totals."""

    file: str
    """Its file name beside results.json."""
    fields: Callable[[Mapping[str, Any], Passes, bool], tuple[dict[str, Any], Iterator[Any]]]
    entries_key: str | None = None
    """The per-case list (the document's last field); None for a document built from ``head`` alone."""
    takes_output: bool = False
    """The framework's own ``--output`` names this document: with several, it is the one copied to
    ``compat_output``."""


@dataclass(frozen=True, slots=True)
class CaseFormat:
    """A dialect's case format: the fields its cases must carry and the values they may hold."""

    label: str
    """Plural noun for messages ("seed cases")."""
    required: tuple[tuple[str, str], ...] = ()
    """(Case field, the dialect's name for it) every case must carry."""
    any_of: tuple[tuple[str, str], ...] = ()
    """At least one of these must be present."""
    valid: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Default value sets (field → allowed values); a suite's ``valid:`` replaces them field by field."""
    checked_when_detected: bool = False
    """Check a case found by ``detect`` (not only one whose suite declares the kind)."""


@dataclass(frozen=True, slots=True)
class ConfigFile:
    """A dialect's own config file, read in place of evalgate.yaml."""

    detect: Callable[[Mapping[str, Any], frozenset[str]], bool]
    """(the file's top level, evalgate's own keys) → is it this dialect's file."""
    read: Callable[[Mapping[str, Any], str, list[str]], tuple[dict[str, Any], dict[str, Any]]]
    """(data, where, notices) → (settings, suite-level keys); a ``UserError`` for an unknown key."""
    origin: str
    """How a setting read from it is named in messages: ``{path} ({origin})``."""


@dataclass(frozen=True, slots=True)
class CliFlag:
    """A command-line flag in a dialect's spelling, added to ``run`` / ``eval`` (and ``validate`` when
    ``validate``) right after the generic flag ``after``."""

    flags: tuple[str, ...]
    after: str
    options: Mapping[str, Any] = field(default_factory=dict)
    """``argparse.add_argument`` keyword arguments (``dest``, ``help``, ``action``, ``nargs`` …)."""
    setting: bool = False
    """Its ``dest`` is a setting (else ``cli_read`` turns it into settings)."""
    validate: bool = True
    """Also on ``evalgate validate`` (the selection flags)."""


CliRead = Callable[[Any, dict[str, Any], dict[str, str], list[str]], None]
"""(parsed arguments, settings from the flags, setting → flag that set it, notices) → None, updating
the three in place."""


@dataclass(frozen=True, slots=True)
class Dialect:
    """What one in-house framework's dialect changes for its cases; every hook is optional."""

    name: str
    label: str
    owns: tuple[str, ...] = ()
    """Built-in metrics that run by their ``applies`` rule only in this dialect (elsewhere only when named)."""
    owned_when: Mapping[str, str] = field(default_factory=dict)
    """Owned metric → what its rule checks, in words (``evalgate explain``, the metrics reference)."""
    triggers: tuple[Trigger, ...] = ()
    """Metrics this dialect adds on conditions of its own."""
    category_metrics: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Category → metrics, used when neither evalgate.yaml nor the case's suite sets ``category_metrics``."""
    thresholds: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    """Default thresholds for runs that include a case of this dialect (below every user setting)."""
    detect: Callable[[Mapping[str, Any], str | None], str | None] | None = None
    """A raw case (and its file's wrapper key) → why it is in this dialect's own format, else None."""
    detect_order: int = 100
    """Detection precedence (lower first) when several dialects' ``detect`` could claim one case."""
    markers: frozenset[str] = frozenset()
    """Fields without which ``detect`` never claims a case (a quick set test before calling it)."""
    elsewhere: str = ""
    """What else the dialect changes, in words (for the docs)."""

    # --- input side ---
    kind_aliases: tuple[str, ...] = ()
    """Other names of the dialect in a suite's ``kind:``."""
    compat_aliases: tuple[str, ...] = ()
    """Other spellings of the dialect's name in ``compat``."""
    case_format: CaseFormat | None = None
    """The fields and values its cases must carry (``evalgate.dataset.kinds``)."""
    value_fields: frozenset[str] = frozenset()
    """Case fields of the dialect's a suite's ``valid:`` may constrain."""
    env_prefix: str = ""
    """The dialect's environment variables' prefix: each one is read by ``env_aliases`` or named as not read."""
    env_aliases: Mapping[str, str] = field(default_factory=dict)
    """The dialect's variable → evalgate's (``EVALGATE_*``) name; evalgate's wins when both are set."""
    env_settings: Callable[[Mapping[str, str], list[str]], dict[str, tuple[Any, str]]] | None = None
    """(environment, notices) → settings from the dialect's own variables ({setting: (value, variable)})."""
    config_file: ConfigFile | None = None
    """The dialect's own config file, read in place of evalgate.yaml."""
    implied: Callable[[dict[str, tuple[Any, str]], Mapping[str, str], list[str]], None] | None = None
    """(merged settings layer, environment, notices): settings the dialect's spellings imply when nothing
    else sets them, updated in place."""
    cli_flags: tuple[CliFlag, ...] = ()
    """Flags in the dialect's spelling."""
    cli_read: CliRead | None = None
    """Turns the dialect's flags into settings."""
    verb: tuple[str, str] | None = None
    """(verb, help): an unlisted alias of ``evalgate run`` that turns the dialect's ``compat`` on."""
    case_fields: tuple[DialectField, ...] = ()
    """The dialect's own case fields, accepted in every suite and kept in ``Case.dialect_data``."""
    field_spellings: Mapping[str, str] = field(default_factory=dict)
    """The dialect's name for a generic case field → that field (``Case`` reads it when the generic name is
    absent)."""
    check_case: Callable[[Case], None] | None = None
    """Checks a loaded case's fields together (a ``ValueError`` names the problem)."""
    # --- output side ---
    document: OutputDocument | None = None
    """The output document of ``--compat NAME`` (``report.documents`` writes it)."""
    console_summary: Callable[[Mapping[str, Any], str], str] | None = None
    """(results document, SQLite path) → the console summary the framework printed after a run."""
    request_context: tuple[str, ...] = ()
    """Case fields sent in a request's context (``targets.http.case_context``) when set."""
    request_names: Mapping[str, str] = field(default_factory=dict)
    """Context key → the name the dialect's system expects it under."""
    request_fields: frozenset[str] = frozenset()
    """Case fields whose presence makes a target consult ``request_body`` / ``request_stdin``."""
    request_body: Callable[[Case, Mapping[str, Any]], dict[str, Any] | None] | None = None
    """(case, context) → the http target's default request body for the case, or None for the generic one."""
    request_stdin: Callable[[Case], Mapping[str, Any]] | None = None
    """A case → fields the command target adds to the case record on stdin."""
    export_names: Mapping[str, str] = field(default_factory=dict)
    """Metric → the score name the framework exported it under (Langfuse)."""
    judge_temperatures: Mapping[str, float] = field(default_factory=dict)
    """Judged metric → the judge temperature the framework used, when not ``judge_temperature`` (0)."""
    reference_fields: Mapping[str, str] = field(default_factory=dict)
    """Judged metric → the case field holding its reference text, when not ``expected_output``."""
    expectations: Mapping[str, str] = field(default_factory=dict)
    """Case field of the dialect's own that a result record shows among the case's expectations → the
    expectation field it follows there."""
    metric_docs: Mapping[str, str] = field(default_factory=dict)
    """Metric → its description as the dialect documents it: ``{}`` stands for the generic description;
    read once, when the metrics are registered."""
    prompt_fields: Mapping[str, str] = field(default_factory=dict)
    """Judge prompt variable → the case field it shows (for variables of the dialect's own templates)."""
    setting_docs: Mapping[str, str] = field(default_factory=dict)
    """Setting → its description as the dialect documents it (its own spelling of the setting), a template
    like ``metric_docs``'s: the settings reference (``tools.docs_reference``) shows it."""


_V = TypeVar("_V")


class _Computed(Mapping[str, _V]):
    """A read-only mapping whose contents ``_all()`` computes when first needed."""

    @abstractmethod
    def _all(self) -> Mapping[str, _V]: ...

    def __getitem__(self, key: str) -> _V:
        return self._all()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


class _Registry(_Computed[Dialect]):
    """Name → Dialect, loaded on first use from ``BUILTIN`` and the ``evalgate.dialects`` entry points."""

    def __init__(self) -> None:
        self._loaded: dict[str, Dialect] | None = None

    def _all(self) -> dict[str, Dialect]:
        if self._loaded is None:
            found: dict[str, Dialect] = {}
            specs = list(BUILTIN) + [ep.value for ep in entry_points(group=GROUP) if ep.value not in BUILTIN]
            for spec in specs:
                module, _, attribute = spec.partition(":")
                dialect = getattr(importlib.import_module(module), attribute or "DIALECT")
                if not isinstance(dialect, Dialect):
                    raise TypeError(f"entry point {spec!r} in group {GROUP} is not an evalgate Dialect")
                found.setdefault(dialect.name, dialect)
            self._loaded = found
        return self._loaded


DIALECTS: Mapping[str, Dialect] = _Registry()


_case_fields: list[DialectFields] = []


def case_fields() -> DialectFields:
    """Every dialect's case fields, spellings and checks (what ``Case`` reads: ``model.use_dialect_fields``)."""
    if not _case_fields:
        fields: dict[str, DialectField] = {}
        spellings: dict[str, str] = {}
        for dialect in DIALECTS.values():
            for own in dialect.case_fields:
                fields.setdefault(own.name, own)
            for spelling, name in dialect.field_spellings.items():
                spellings.setdefault(spelling, name)
        checks = tuple(d.check_case for d in DIALECTS.values() if d.check_case is not None)
        _case_fields.append(DialectFields(tuple(fields.values()), spellings, checks))
    return _case_fields[0]


use_dialect_fields(case_fields)


_DERIVED: dict[str, tuple[tuple[int, ...], Any]] = {}


def _derived(name: str, build: Callable[[tuple[Dialect, ...]], Any]) -> Any:
    """``build(registered dialects)``, computed once per set of registered dialects (a replaced or added
    dialect is seen; lookups on the per-case path cost one tuple of ids, not a rebuild)."""
    registered = tuple(DIALECTS.values())
    key = tuple(id(dialect) for dialect in registered)
    hit = _DERIVED.get(name)
    if hit is None or hit[0] != key:
        hit = _DERIVED[name] = (key, build(registered))
    return hit[1]


class _Owners(_Computed[str]):
    """Metric → the dialect that owns it (computed from ``DIALECTS`` on first use)."""

    def _all(self) -> dict[str, str]:
        return _derived("owners", lambda registered: {metric: dialect.name for dialect in registered
                                                      for metric in dialect.owns})


OWNER: Mapping[str, str] = _Owners()
"""Metric → the dialect that owns it."""


# --- which dialects a case speaks --------------------------------------------------------------------------


def _detectors() -> tuple[Dialect, ...]:
    """The dialects with a ``detect`` hook, in detection order."""
    return _derived("detectors", lambda registered: tuple(sorted(
        (d for d in registered if d.detect is not None), key=lambda d: (d.detect_order, d.name))))


def native_format(data: Mapping[str, Any], wrapper: str | None) -> tuple[str | None, str]:
    """The dialect whose own format a raw case is in, and why; (None, "") for none (each dialect's ``detect``)."""
    for dialect in _detectors():
        if dialect.detect is None or (dialect.markers and dialect.markers.isdisjoint(data)):
            continue
        why = dialect.detect(data, wrapper)
        if why:
            return dialect.name, why
    return None, ""


def case_dialect(declared: str | None, data: Mapping[str, Any], wrapper: str | None) -> str | None:
    """The dialect the loader stamps on a case: its suite's declared kind, else its file's native format."""
    if declared:
        return declared
    return native_format(data, wrapper)[0]


def active_dialects(case: Case, compat: Collection[str] = ()) -> tuple[str, ...]:
    """The dialects whose behaviours apply to ``case``: its own (declared or native) plus the run's
    ``compat`` dialects; none for ``kind: generic``."""
    own = case.dialect
    if own == GENERIC:
        return ()
    names: list[str] = [own] if own is not None and own in DIALECTS else []
    names += [name for name in compat if name in DIALECTS and name not in names]
    return tuple(names)


# --- what the dialects change ---------------------------------------------------------------------------------


def category_map(dialects: Iterable[str]) -> dict[str, list[str]]:
    """The dialects' default category → metrics maps, merged."""
    merged: dict[str, list[str]] = {}
    for name in dialects:
        for category, metrics in DIALECTS[name].category_metrics.items():
            merged.setdefault(category, []).extend(m for m in metrics if m not in merged.get(category, []))
    return merged


def triggered(case: Case, dialects: Iterable[str]) -> dict[str, str]:
    """Metric → why, for the dialects' own triggers that hold for ``case``."""
    found: dict[str, str] = {}
    for name in dialects:
        for trigger in DIALECTS[name].triggers:
            if trigger.metric not in found and trigger.applies(case):
                found[trigger.metric] = f"{DIALECTS[name].label}: {trigger.why}"
    return found


def threshold_layer(dialects: Iterable[str]) -> dict[str, Mapping[str, float]]:
    """The dialects' default thresholds, as one threshold layer (later dialects do not override earlier)."""
    layer: dict[str, Mapping[str, float]] = {}
    for name in sorted(set(dialects)):
        for metric, threshold in DIALECTS.get(name, Dialect(name, name)).thresholds.items():
            layer.setdefault(metric, threshold)
    return layer


def owned_when(metric: str) -> str:
    """What a dialect-owned metric's own rule checks, in its dialect ("" when no dialect owns it)."""
    owner = OWNER.get(metric)
    return DIALECTS[owner].owned_when.get(metric, "") if owner else ""


# --- what the dialects read ------------------------------------------------------------------------------


def kind_aliases() -> dict[str, str]:
    """Other name of a dialect in ``kind:`` → the dialect."""
    return {alias: d.name for d in DIALECTS.values() for alias in d.kind_aliases}


def compat_aliases() -> dict[str, str]:
    """Other spelling of a dialect in ``compat`` → the dialect."""
    return {alias: d.name for d in DIALECTS.values() for alias in d.compat_aliases}


def aliased_environment(env: Mapping[str, str], notices: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """(``env`` plus each set dialect variable under its ``EVALGATE_*`` name unless that one is set: it
    wins; evalgate's name → the dialect variable it came from), one notice per dialect variable read or
    ignored."""
    merged = dict(env)
    for dialect in DIALECTS.values():
        if not dialect.env_prefix:
            continue
        for name in sorted(n for n in env if n.startswith(dialect.env_prefix)):
            value = env[name]
            if not value.strip():
                continue
            target = dialect.env_aliases.get(name)
            if target is None:
                notices.append(f"{name} is not read by evalgate (no equivalent setting); it has no effect")
                continue
            if env.get(target, "").strip():
                notices.append(f"{name} is ignored: {target} is also set and wins")
                continue
            merged[target] = value
            notices.append(f"{name} is read as {target}; rename it to {target}")
    origins = {target: name for dialect in DIALECTS.values() for name, target in dialect.env_aliases.items()
               if merged.get(target) is not None and env.get(target) is None}
    return merged, origins


def environment_settings(env: Mapping[str, str], notices: list[str]) -> dict[str, tuple[Any, str]]:
    """Settings from the dialects' own variables ({setting: (value, variable)})."""
    layer: dict[str, tuple[Any, str]] = {}
    for dialect in DIALECTS.values():
        if dialect.env_settings is not None:
            layer.update(dialect.env_settings(env, notices))
    return layer


def read_config_file(data: Mapping[str, Any], own_keys: frozenset[str], where: str, notices: list[str]
                     ) -> tuple[dict[str, tuple[Any, str]], dict[str, Any]] | None:
    """A config file that is a dialect's own (its ``config_file.detect``) as (settings layer, suite-level
    keys); None for an evalgate.yaml."""
    for dialect in DIALECTS.values():
        reader = dialect.config_file
        if reader is not None and reader.detect(data, own_keys):
            mapped, suite = reader.read(data, where, notices)
            return {name: (value, f"{where} ({reader.origin})") for name, value in mapped.items()}, suite
    return None


def implied_settings(merged: dict[str, tuple[Any, str]], env: Mapping[str, str], notices: list[str]) -> None:
    """The settings the dialects' spellings imply when nothing else sets them (``merged`` updated)."""
    for dialect in DIALECTS.values():
        if dialect.implied is not None:
            dialect.implied(merged, env, notices)


def cli_flags(after: str) -> list[CliFlag]:
    """The dialects' flags that follow the generic flag ``after``."""
    return [flag for dialect in DIALECTS.values() for flag in dialect.cli_flags if flag.after == after]


def cli_destinations() -> frozenset[str]:
    """The ``dest`` of every dialect flag that is not a setting (``cli_read`` reads it)."""
    return frozenset(str(flag.options.get("dest") or flag.flags[0].lstrip("-").replace("-", "_"))
                     for dialect in DIALECTS.values() for flag in dialect.cli_flags if not flag.setting)


def read_cli(args: Any, values: dict[str, Any], origins: dict[str, str], notices: list[str]) -> None:
    """The dialects' flags as settings (``values``, ``origins`` and ``notices`` updated)."""
    for dialect in DIALECTS.values():
        if dialect.cli_read is not None:
            dialect.cli_read(args, values, origins, notices)


def verbs() -> dict[str, str]:
    """Dialect verb (an alias of ``run``) → its dialect."""
    return {dialect.verb[0]: dialect.name for dialect in DIALECTS.values() if dialect.verb}


# --- what the dialects write --------------------------------------------------------------------------------


def field_value(case: Case, name: str) -> Any:
    """A case field's value, a dialect's own field's too (``Case.dialect_value``); None when unset."""
    fields = vars(case)  # a pydantic model keeps its declared fields' values here
    if name in fields:
        return fields[name]
    return case.dialect_value(name)


def output_documents(names: Iterable[str]) -> dict[str, OutputDocument]:
    """Dialect name → its output document, for the ``names`` that have one (in order)."""
    found: dict[str, OutputDocument] = {}
    for name in names:
        dialect = DIALECTS.get(name)
        if dialect is not None and dialect.document is not None:
            found.setdefault(name, dialect.document)
    return found


def output_files() -> tuple[str, ...]:
    """The file names of every dialect's output document (registry order)."""
    return tuple(d.document.file for d in DIALECTS.values() if d.document is not None)


def console_summaries(names: Iterable[str], document: Mapping[str, Any], db_path: str | Path) -> list[str]:
    """The console summaries of the ``names`` dialects that print one, for a run's results ``document``."""
    texts: list[str] = []
    for name in dict.fromkeys(names):
        dialect = DIALECTS.get(name)
        if dialect is not None and dialect.console_summary is not None:
            texts.append(dialect.console_summary(document, str(db_path)))
    return texts


def _consulted(case: Case) -> Iterator[Dialect]:
    """The dialects whose ``request_fields`` the case sets (none for a case without any of them)."""
    for dialect in DIALECTS.values():
        if any(field_value(case, name) is not None for name in dialect.request_fields):
            yield dialect


def request_context_fields() -> tuple[str, ...]:
    """Case fields the dialects send in a request's context, in registry order."""
    return tuple(dict.fromkeys(name for dialect in DIALECTS.values() for name in dialect.request_context))


def request_name(key: str) -> str:
    """The name a request context key is sent under (a dialect's spelling, else ``key``)."""
    for dialect in DIALECTS.values():
        if key in dialect.request_names:
            return dialect.request_names[key]
    return key


def request_body(case: Case, context: Mapping[str, Any]) -> dict[str, Any] | None:
    """A dialect's default http request body for ``case``, or None for the generic one."""
    for dialect in _consulted(case):
        if dialect.request_body is not None:
            body = dialect.request_body(case, context)
            if body is not None:
                return body
    return None


def request_stdin(case: Case) -> dict[str, Any]:
    """Fields the dialects add to a case's record on the command target's stdin."""
    extra: dict[str, Any] = {}
    for dialect in _consulted(case):
        if dialect.request_stdin is not None:
            extra.update(dialect.request_stdin(case))
    return extra


def export_name(metric: str) -> str:
    """The name ``metric``'s score is exported under (a dialect's spelling, else the metric's name)."""
    for dialect in DIALECTS.values():
        if metric in dialect.export_names:
            return dialect.export_names[metric]
    return metric


def describe(metric: str, text: str) -> str:
    """``metric``'s description ``text`` as the dialect it comes from documents it (``metric_docs``; after a
    lead-in such as ``"Origin: {}"`` the text goes on in lower case; before a tail such as ``"{} (origin)."``
    it loses its final full stop: ``_documented``)."""
    for dialect in DIALECTS.values():
        if metric in dialect.metric_docs:
            return _documented(dialect.metric_docs[metric], text)
    return text


def describe_setting(setting: str, text: str) -> str:
    """``setting``'s description ``text`` as the dialects document it (``setting_docs``, in registry order;
    templates as in ``describe``)."""
    for dialect in DIALECTS.values():
        if setting in dialect.setting_docs:
            text = _documented(dialect.setting_docs[setting], text)
    return text


def _documented(template: str, text: str) -> str:
    """``text`` in ``template``'s ``{}``: after a lead-in it goes on in lower case, before a tail it loses its
    final full stop."""
    if not template.endswith("{}"):
        text = text.removesuffix(".")
    return template.format(text if template.startswith("{}") else text[:1].lower() + text[1:])


def expectation_fields(generic: tuple[str, ...]) -> tuple[str, ...]:
    """The expectation fields a result record shows, in order: ``generic`` with each dialect's own
    (``expectations``) placed after the field it follows."""
    dialects = tuple(DIALECTS.values())
    key = (generic, tuple(map(id, dialects)))  # the registry holds the dialects: their ids stay theirs
    found = _ORDERS.get(key)
    if found is None:
        order = list(generic)
        for dialect in dialects:
            for name, after in dialect.expectations.items():
                if name not in order:
                    order.insert(order.index(after) + 1 if after in order else len(order), name)
        found = _ORDERS[key] = tuple(order)
    return found


_ORDERS: dict[tuple[tuple[str, ...], tuple[int, ...]], tuple[str, ...]] = {}


def judge_temperatures() -> dict[str, float]:
    """Judged metric → the temperature its dialect's framework judged it at (the first dialect's wins)."""
    found: dict[str, float] = {}
    for dialect in DIALECTS.values():
        for metric, temperature in dialect.judge_temperatures.items():
            found.setdefault(metric, temperature)
    return found


def reference_field(metric: str) -> str:
    """The case field holding ``metric``'s reference text (a dialect's, else ``expected_output``)."""
    for dialect in DIALECTS.values():
        if metric in dialect.reference_fields:
            return dialect.reference_fields[metric]
    return "expected_output"


def prompt_text(case: Case, variable: str) -> str:
    """The case's text for a dialect's judge prompt ``variable`` ("" when no dialect names it or it is unset)."""
    for dialect in DIALECTS.values():
        if variable in dialect.prompt_fields:
            return field_value(case, dialect.prompt_fields[variable]) or ""
    return ""


# --- the generic defaults -----------------------------------------------------------------------------------

NAMED = "only when named"
"""The ``WHEN`` rule of a metric that runs only where a suite names it (``metrics:``, ``category_metrics:``)."""

_WHEN: dict[str, str] = {
    "rules": "the case has rules:, or its category has category_rules",
    "workflow": "the case has agents_should_* or tools_should_* expectations",
    "workflow_agents": "the case has agents_should_include / agents_should_exclude",
    "workflow_tools": "the case has tools_should_include / tools_should_exclude",
    **dict.fromkeys(("hit_rate", "mrr", "precision_at_k", "recall_at_k"), "the case has expected_sources"),
    "keyword_coverage": "the case has expected_keywords",
    "specialist_match": "the case has {expected_agent}",
    "data_source_match": "the case has expected_data_sources",
    **dict.fromkeys(("mention_precision", "mention_recall", "mention_f1", "brand_coverage"),
                    "the case has expected_my_mentions / expected_competitor_mentions"),
    "rank_accuracy": "the case has expected_ranked_list",
    "false_is_mine_rate": "the case has {own_brands} / {competitor_brands}",
    "num_tokens": "the case has num_tokens (a recorded count)",
    "latency_ms": "the case has latency_ms (a recorded latency)",
    **dict.fromkeys(("answer_quality", "factual_correctness", "completeness"),
                    "the case has expected_answer_criteria (judged, informational)"),
    **dict.fromkeys(("judge_score", "combined_score", "context_mrr", "relevancy", "faithfulness", "groundedness",
                     "localization", "context_precision", "context_recall", "math", "safety", "policy",
                     "actionability", "correctness", "tool_calling", "response_quality", "composite"), NAMED),
    "conversation_turns": "the case is a conversation (turns: or simulated_user:)",
    "goal_completion": "the conversation has a goal (judged)",
    "role_adherence": "the conversation has an assistant_role (judged)",
    "knowledge_retention": NAMED,
    "trajectory": "the case has trajectory: (expected tool calls, checked against the agent's trace or answer)",
}
"""Built-in metric → when it runs on a case of a suite without a kind; ``{role}`` names the dialect field that
plays that role (``DialectField.role``)."""


class _Roles(dict[str, str]):
    def __missing__(self, role: str) -> str:
        return case_fields().role_field(role) or role


class _When(Mapping[str, str]):
    """``_WHEN`` with each ``{role}`` replaced by the name of the dialect field that plays it."""

    def __getitem__(self, name: str) -> str:
        text = _WHEN[name]
        return text.format_map(_Roles()) if "{" in text else text

    def __iter__(self) -> Iterator[str]:
        return iter(_WHEN)

    def __len__(self) -> int:
        return len(_WHEN)


WHEN: Mapping[str, str] = _When()
"""Built-in metric → when it runs on a case of a suite without a kind."""
