"""Before the first case runs: validate and select the cases (streamed), resolve thresholds, and plan
each case's metrics (``prepare``)."""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from evalgate.config.options import MetricOptions
from evalgate.config.sections import SelectionSettings
from evalgate.config.settings import Settings
from evalgate.config.suite import SuiteConfig, parse_suite_config, validate_metric_names, yaml_line
from evalgate.dataset.selected import load_selected
from evalgate.dataset.stream import Scan, SelectedCases
from evalgate.dialect import DIALECTS, NAMED, OWNER, WHEN, active_dialects, threshold_layer, triggered
from evalgate.dialect import category_map as dialect_category_map
from evalgate.errors import UserError
from evalgate.metrics.registry import Metric, all_metrics
from evalgate.model import Case, Threshold
from evalgate.runner.catalog import Catalog, build_catalog, case_assertions, infer_directions
from evalgate.runner.conversation import turn_case
from evalgate.runner.engine import CasePlan
from evalgate.runner.explain import make_explainer
from evalgate.verdict.gate import resolve_thresholds
from evalgate.verdict.tolerance import parse_tolerance


@dataclass
class Prepared:
    """Everything decided before the first case runs."""

    cases: SelectedCases
    """Iterable any number of times, with ``len()``; streamed from the files when large."""
    files: list[dict[str, Any]]
    thresholds: dict[str, Threshold]
    plan_for: Callable[[Case], CasePlan]
    metrics: dict[str, Metric]
    notices: list[str] = field(default_factory=list)
    """One-line notices for the edges to print (names that match no selected case in a subset run)."""
    user_metrics: dict[str, Metric] = field(default_factory=dict)
    """The user's own metrics (declared, code checks, plug-ins) by name."""
    explain: Callable[[Case], list[dict[str, Any]]] | None = None
    """Per case: each planned metric, its threshold and why it applies (``runner.explain``)."""
    optional: dict[str | None, frozenset[str]] = field(default_factory=dict)
    """``optional_metrics`` by suite name (None: evalgate.yaml's, which every suite adds to its own)."""
    calibration_sets: list[tuple[Path, str]] = field(default_factory=list)
    """Labelled-example files the suites name (``calibration:``), each with where it was named."""
    seed_kind: bool = False
    """A suite (or evalgate.yaml) declares a seed ``kind``, or ``compat`` asks for a seed's outputs."""
    threshold_origins: dict[str, str] = field(default_factory=dict)
    """Where each metric's threshold was set (``evalgate.yaml:4``, a suite block, a seed's default)."""
    suite_digests: dict[str, str] = field(default_factory=dict)
    """Per suite (``""``: evalgate.yaml's), a digest of the settings that choose and tune its metrics
    (``suite_digest``), recorded in the gate policy."""

    @property
    def used_inline(self) -> set[str]:
        """One-off metrics of cases' ``assert:`` entries planned so far (they join ``metrics`` as planned)."""
        return {name for name, metric in self.metrics.items() if metric.info is not None} - set(self.user_metrics)


def prepare(selection: SelectionSettings | Settings, suite_config: Mapping[str, Any], cwd: Path | None = None
            ) -> Prepared:
    """Validate and select the cases (streamed: large datasets are not held in memory), resolve
    thresholds and the user's own metrics (``evalgate.runner.catalog``), and build each case's plan. Reads
    only the ``SelectionSettings`` (whole ``Settings`` are viewed through that section)."""
    settings = selection if isinstance(selection, SelectionSettings) else SelectionSettings.of(selection)
    cwd = cwd or Path.cwd()
    builtins = all_metrics()
    config_name = settings.config or "evalgate.yaml"
    config_data = dict(suite_config)

    def locate(keys: list[Any]) -> str | None:
        line = yaml_line(Path(config_name), keys) if settings.config else None
        return f"{config_name}:{line}" if line else None

    global_suite = (parse_suite_config(config_data, config_name, label="", locate=locate,
                                       also_known=Settings.model_fields) if config_data else SuiteConfig())
    scanned = load_selected(settings, global_suite, cwd)
    suites = dict(scanned.suites)
    catalog = build_catalog(builtins, global_suite, config_name, suites, scanned.suite_where, scanned.case_metrics,
                            cwd)
    metrics = catalog.metrics
    where_of = suite_locator(scanned.suite_where, cwd)
    _check_metric_names(metrics, global_suite, suites, where_of)
    user_layers = _threshold_layers(global_suite, suites, settings, where_of)
    # what the user set (each name must concern some case of the run), above the declarations and seed defaults
    compat = tuple(settings.compat)
    layers = _default_layers(catalog, {*scanned.dialects, *compat}) + user_layers
    thresholds = resolve_thresholds(metrics, layers)
    origin = {name: where for mapping, where in layers for name in mapping}
    directed = infer_directions(catalog, thresholds, origin)
    plan_for = make_planner(metrics, global_suite, suites, catalog, compat=compat)
    files = [file.as_metadata() for file in scanned.files]
    selected = len(scanned.cases) < scanned.total  # a filter left some out
    notices = directed + check_names_match(scanned.cases, plan_for, user_layers, global_suite, suites,
                                           selected=selected, where_of=where_of)
    optional = _optional_metrics(metrics, global_suite, suites, config_name, where_of)
    _check_tolerances(metrics, settings)
    calibration_sets = _calibration_sets(settings, config_name, global_suite, scanned, cwd, where_of)
    seed_kind = bool(settings.compat) or any(name in DIALECTS for name in scanned.dialects) or any(
        config.kind not in (None, "generic") for config in (global_suite, *suites.values()))
    explain = make_explainer(plan_for, thresholds, origin, global_suite, suites, compat, catalog.user)
    return Prepared(cases=scanned.cases, files=files, thresholds=thresholds, plan_for=plan_for, metrics=metrics,
                    user_metrics=catalog.user, notices=notices, optional=optional, calibration_sets=calibration_sets,
                    seed_kind=seed_kind, explain=explain, threshold_origins=origin,
                    suite_digests={name or "": suite_digest(config)
                                   for name, config in [("", global_suite), *suites.items()]})


def _default_layers(catalog: Catalog, dialects: set[str]) -> list[tuple[dict[str, Any], str]]:
    """The threshold layers below everything the user set: each seed's minimums (for runs that include its cases,
    or that ask for its outputs), then the metric declarations' own thresholds."""
    layers: list[tuple[dict[str, Any], str]] = []
    for dialect in sorted(dialects):
        seed_defaults = threshold_layer([dialect])
        if seed_defaults:
            layers.append((seed_defaults, f"{DIALECTS[dialect].label}'s default"))
    if catalog.declared_thresholds:
        layers.append((catalog.declared_thresholds, "metric declarations"))
    return layers


def _calibration_sets(settings: SelectionSettings, config_name: str, global_suite: SuiteConfig, scanned: Scan,
                      cwd: Path, where_of: Callable[..., str]) -> list[tuple[Path, str]]:
    """The labelled-example files evalgate.yaml's suite and each suite block name (``calibration:``), relative
    to the file that names them, each with where it was named."""
    base = (cwd / settings.config).parent if settings.config else cwd
    calibration_sets = [(base / entry, f"{config_name}: suite calibration") for entry in global_suite.calibration]
    for name, suite in scanned.suites.items():
        display = scanned.suite_where.get(name, "").rpartition(":")[0]
        for entry in suite.calibration:
            calibration_sets.append(((cwd / display).parent / entry if display else cwd / entry,
                                     where_of(name, "calibration")))
    return calibration_sets


SUITE_DIGEST_EXCLUDED = frozenset({"name", "description", "thresholds", "optional_metrics", "calibration"})
"""Suite keys the gate policy records on their own (thresholds, optional_metrics, calibration) or that decide
nothing."""


def suite_digest(config: Any) -> str:
    """BLAKE2b-64 of a suite block's ``metrics``, ``exclude_metrics``, ``options``, ``category_metrics``,
    ``kind`` and ``valid`` (as set; defaults left out)."""
    text = config.model_dump_json(exclude=set(SUITE_DIGEST_EXCLUDED), exclude_defaults=True)
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def _optional_metrics(metrics: Mapping[str, Metric], global_suite: Any, suites: Mapping[str, Any], config_name: str,
                      where_of: Callable[..., str]) -> dict[str | None, frozenset[str]]:
    """Each suite's ``optional_metrics`` plus evalgate.yaml's; an unknown name is a ``UserError``."""
    shared = frozenset(global_suite.optional_metrics or ())
    checked = [(shared, config_name)]
    optional: dict[str | None, frozenset[str]] = {None: shared}
    for name, suite in suites.items():
        own = frozenset(suite.optional_metrics or ())
        checked.append((own, where_of(name, "optional_metrics")))
        optional[name] = shared | own
    for names, where in checked:
        for metric in sorted(names):
            if metric not in metrics:
                close = difflib.get_close_matches(metric, list(metrics), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise UserError(f"optional_metrics: unknown metric {metric!r}{hint}", where=where)
    return optional


def _check_tolerances(metrics: Mapping[str, Metric], settings: SelectionSettings) -> None:
    """``regression_tolerance`` names known metrics and holds numbers or ``{abs, rel}`` (``UserError`` else)."""
    where = "regression_tolerance"
    for name, raw in settings.regression_tolerance.items():
        if name not in metrics:
            close = difflib.get_close_matches(name, list(metrics), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise UserError(f"unknown metric {name!r}{hint}", where=where)
        parse_tolerance(name, raw, where)


def suite_locator(suite_where: Mapping[str, str], cwd: Path) -> Callable[..., str]:
    """``where_of(suite, *keys)``: ``file:line`` of a key inside the ``suite:`` block that configured
    ``suite`` (the block's own line when the key is not found), for messages about its settings."""
    def where_of(name: str, *keys: Any) -> str:
        where = suite_where.get(name)
        if not where:
            return f"suite {name!r} {'.'.join(map(str, keys))}".rstrip()
        display, _, line = where.rpartition(":")
        found = yaml_line(cwd / display, ("suite", *keys)) if keys else None
        return f"{display}:{found or line}"

    return where_of


def check_names_match(cases: Iterable[Case], plan_for: Callable[[Case], CasePlan],
                      layers: list[tuple[Mapping[str, Any], str]], global_suite: Any, suites: Mapping[str, Any],
                      *, selected: bool, where_of: Callable[..., str] | None = None) -> list[str]:
    """Every threshold the user set must concern a metric some case of the run computes, and every
    ``category_metrics`` category must be some case's category: else the setting does nothing, which is
    a ``UserError`` naming where it was set. In a run of selected cases (case ids, first-n, category,
    tags, shard) the names are matched against those cases only and a miss is a notice instead (the
    setting may concern the cases left out). Stops reading cases once everything has matched."""
    wanted: dict[str, str] = {}
    for mapping, where in layers:
        for name, raw in mapping.items():
            if raw is not None:
                wanted.setdefault(name, where)
    categories: dict[str, str] = {}
    scopes: list[tuple[str | None, Any]] = [(None, global_suite), *suites.items()]
    for scope, config in scopes:
        for category in (config.category_metrics or {}) if config is not None else {}:
            if scope is None:
                place = "evalgate.yaml category_metrics"
            elif where_of is not None:
                place = where_of(scope, "category_metrics", category)
            else:
                place = f"suite {scope!r} category_metrics"
            categories.setdefault(str(category), place)
    if not wanted and not categories:
        return []
    names, kinds = set(wanted), set(categories)
    for case in cases:
        if names:
            names.difference_update(metric.name for metric in plan_for(case).metrics)
            for number, turn in enumerate(case.turns or (), start=1):  # a conversation's turns are scored too
                names.difference_update(metric.name for metric in plan_for(turn_case(case, turn, number)).metrics)
        kinds.discard(case.category or "")
        if not names and not kinds:
            return []
    problems = [(f"threshold for {name!r} matches no case: no {'selected ' if selected else ''}case computes "
                 f"{name}{turn_on_hint(name)}", wanted[name]) for name in sorted(names)]
    problems += [(f"category {category!r} matches no {'selected ' if selected else ''}case's category",
                  categories[category]) for category in sorted(kinds)]
    if selected:
        return [f"{where}: {message}" for message, where in problems]
    message, where = problems[0]
    more = len(problems) - 1
    error = UserError(message + (f" (and {more} more)" if more else ""), where=where)
    error.errors = [f"{place}: {text}" for text, place in problems]  # type: ignore[attr-defined]  # validate lists each
    raise error


def turn_on_hint(name: str) -> str:
    """How to make a built-in metric run, for a setting that names it while no case computes it."""
    when = WHEN.get(name)
    if when is None:
        return ""
    if when == NAMED:
        return " (it runs only when named: add it to metrics: in evalgate.yaml, a suite or the cases)"
    return f" (it runs when {when}; to compute it on every case, add it to metrics: in evalgate.yaml or the suite)"


def _threshold_layers(global_suite: Any, suites: Mapping[str, Any], settings: SelectionSettings,
                      where_of: Callable[..., str] | None = None) -> list[tuple[Mapping[str, Any], str]]:
    layers: list[tuple[Mapping[str, Any], str]] = []
    seen: dict[str, tuple[Any, str]] = {}
    for name, suite in suites.items():
        where = where_of(name, "thresholds") if where_of is not None else f"suite {name!r} thresholds"
        for metric, raw in (suite.thresholds or {}).items():
            if metric in seen and seen[metric][0] != raw:
                raise UserError(
                    f"suites disagree on the threshold for {metric!r} ({seen[metric][1]}: {seen[metric][0]}); "
                    "set it once in evalgate.yaml or metric_thresholds",
                    where=where,
                )
            seen[metric] = (raw, where)
        layers.append((suite.thresholds or {}, where))
    layers.append((global_suite.thresholds or {}, f"{settings.config or 'evalgate.yaml'}: thresholds"))
    layers.append((settings.metric_thresholds, "metric_thresholds (EVALGATE_METRIC_THRESHOLDS)"))
    return layers


def _check_metric_names(metrics: Mapping[str, Metric], global_suite: Any, suites: Mapping[str, Any],
                        where_of: Callable[..., str] | None = None) -> None:
    """Category maps may name built-in and declared metrics (the other entries were resolved by the
    catalog)."""
    for name, suite in [(None, global_suite), *suites.items()]:
        for category, names in (suite.category_metrics or {}).items():
            if name is None:
                where = f"config category_metrics.{category}"
            elif where_of is not None:
                where = where_of(name, "category_metrics", category)
            else:
                where = f"suite {name!r} category_metrics.{category}"
            validate_metric_names(names, metrics, where)


def make_planner(metrics: Mapping[str, Metric], global_suite: Any, suites: Mapping[str, Any],
                 catalog: Catalog | None = None, *, compat: Iterable[str] = ()) -> Callable[[Case], CasePlan]:
    """Return ``plan_for(case)``: the metrics that apply to the case, dependencies first.

    Built-in metrics are planned per ``case_shape``: cases of one shape get the same plan (a 100k-case
    suite has a handful of shapes), so their ``applies`` rules run once per shape instead of once per case.
    Metrics marked ``per_case`` (the user's own: their ``applies`` may read any value) never enter that
    cache: they are added for each case by ``catalog`` (``_with_user_metrics``)."""
    shaped = {name: metric for name, metric in metrics.items() if not metric.per_case}
    plan_uncached = make_uncached_planner(shaped, global_suite, suites, compat=compat)
    plans: dict[tuple[Any, ...], CasePlan] = {}

    def plan_shaped(case: Case) -> CasePlan:
        key = case_shape(case)
        plan = plans.get(key)
        if plan is None:
            if len(plans) >= PLAN_CACHE_SHAPES:  # a suite of (nearly) unique shapes: stay bounded
                plans.clear()
            plan = plans[key] = plan_uncached(case)
        return plan

    if catalog is None:
        return plan_shaped
    return _with_user_metrics(plan_shaped, catalog, global_suite, suites)


def _with_user_metrics(plan_shaped: Callable[[Case], CasePlan], catalog: Catalog, global_suite: Any,
                       suites: Mapping[str, Any]) -> Callable[[Case], CasePlan]:
    """``plan_shaped`` plus, per case, the user metrics in its scope whose ``applies`` holds, the ones the
    case names, and its ``assert:`` entries with their per-case thresholds (equal plans are shared)."""
    global_excluded = set(global_suite.exclude_metrics or [])
    merged: dict[tuple[Any, ...], CasePlan] = {}
    in_config, in_suite = catalog.in_config, catalog.in_suite

    def plan_for(case: Case) -> CasePlan:
        base = plan_shaped(case)
        scoped = in_suite.get(case.suite) if in_suite and case.suite else None
        if not in_config and not scoped and not case.metrics and not case.assertions:
            return base  # no user metric can apply: the shape's plan as it is
        suite = suites.get(case.suite) if case.suite else None
        in_scope = [*in_config, *(scoped or ())]
        names = [name for name in in_scope if catalog.user[name].applies_to(case, base.options)]
        names += [catalog.alias[entry] for entry in case.metrics or [] if entry in catalog.alias]
        extra, thresholds = case_assertions(catalog, case)
        excluded = global_excluded | set(suite.exclude_metrics or [] if suite is not None else [])
        chosen = {catalog.metrics[name].name: catalog.metrics[name] for name in names if name not in excluded}
        for metric in extra:
            chosen[metric.name] = metric
        present = {metric.name for metric in base.metrics}
        added = [metric for name, metric in sorted(chosen.items()) if name not in present]
        if not added and not thresholds:
            return base
        key = (id(base), tuple(id(m) for m in added), tuple(sorted(thresholds.items(), key=lambda kv: kv[0])))
        plan = merged.get(key)
        if plan is None:
            if len(merged) >= PLAN_CACHE_SHAPES:
                merged.clear()
            plan = merged[key] = CasePlan(metrics=[*base.metrics, *added], options=base.options,
                                          thresholds=thresholds or None)
        return plan

    return plan_for


def make_uncached_planner(metrics: Mapping[str, Metric], global_suite: Any,
                          suites: Mapping[str, Any], *, compat: Iterable[str] = ()) -> Callable[[Case], CasePlan]:
    """``plan_for(case)`` evaluating every metric's ``applies`` rule for each case (equal plans are
    shared). Entries of ``metrics`` lists that are not in ``metrics`` (the user's own) are left out.

    Generic by default: a metric a seed's dialect owns runs by its ``applies`` rule only on cases of that
    dialect, whose triggers and category map join too (``evalgate.dialects``); elsewhere only when named
    (``metrics:``, ``category_metrics:``)."""
    compat = tuple(compat)
    options_cache: dict[str | None, MetricOptions] = {}
    plan_cache: dict[tuple[Any, ...], CasePlan] = {}

    def options_for(suite_name: str | None) -> MetricOptions:
        if suite_name not in options_cache:
            merged = global_suite.options.model_dump(exclude_unset=True)
            suite = suites.get(suite_name) if suite_name else None
            if suite is not None:
                merged.update(suite.options.model_dump(exclude_unset=True))
            options_cache[suite_name] = MetricOptions.model_validate(merged)
        return options_cache[suite_name]

    def plan_for(case: Case) -> CasePlan:
        suite = suites.get(case.suite) if case.suite else None
        options = options_for(case.suite)
        active = active_dialects(case, compat)
        names = {name for name, metric in metrics.items()
                 if (OWNER.get(name) is None or OWNER[name] in active) and metric.applies_to(case, options)}
        if active:
            names |= set(triggered(case, active))
        excluded: set[str] = set(global_suite.exclude_metrics or [])
        configs = [config for config in (global_suite, suite) if config is not None]
        category_maps = [c.category_metrics for c in configs if c.category_metrics]
        if not category_maps and active:
            category_maps = [dialect_category_map(active)]
        for category_map in category_maps:
            names |= set(category_map.get(case.category or "", []))
        for config in configs:
            names |= set(config.metric_refs)
            excluded |= set(config.exclude_metrics or [])
        names |= set(case.metrics or [])
        names &= set(metrics)
        names -= excluded
        key = (case.suite, frozenset(names))
        if key not in plan_cache:
            plan_cache[key] = CasePlan(metrics=ordered_metrics(names, metrics), options=options)
        return plan_cache[key]

    return plan_for


PLAN_CACHE_SHAPES = 4096
"""Shapes remembered by ``make_planner`` (a few hundred bytes each)."""
SHAPE_IGNORED = frozenset({"id", "index", "source_file", "source_line", "suite", "category", "metrics",
                           "assertions", "dialect", "dialect_data"})
"""Fields outside the filled-or-not part of ``case_shape`` (provenance, or kept whole)."""


def case_shape(case: Case) -> tuple[Any, ...]:
    """What decides a case's plan: suite, category, the case's own ``metrics`` list, its dialect, and for every
    other field set to a value how filled it is (``fill``).

    ``applies`` rules must depend on no more than this (the registry's contract; tests check every
    built-in metric against the uncached planner)."""
    filled: list[Any] = [case.suite, case.category, None if case.metrics is None else tuple(case.metrics),
                         case.dialect]
    for name, value in vars(case).items():
        if value is not None and name not in SHAPE_IGNORED:
            filled.append(name)
            filled.append(fill(value))
    for name, value in case.dialect_data.items():  # the dialects' own fields, each by itself
        if value is not None:
            filled.append(name)
            filled.append(fill(value))
    return tuple(filled)


EMPTY, BLANK, FILLED, ZERO = "empty", "blank", "filled", "zero"
"""``fill`` codes (text, so that none equals a bool kept as it is)."""


def fill(value: Any) -> Any:
    """How filled a value is: ``EMPTY`` (an empty text or collection), ``BLANK`` (text, or a list of
    texts, that is only whitespace), ``ZERO`` (the number 0), else ``FILLED``; bools and enums are
    kept as they are."""
    kind = type(value)
    if kind is str:
        return FILLED if value.strip() else BLANK if value else EMPTY
    if kind is list:
        if not value:
            return EMPTY
        first = value[0]
        if type(first) is not str or first.strip():
            return FILLED
        return FILLED if any(type(item) is not str or item.strip() for item in value) else BLANK
    if kind is bool or isinstance(value, Enum):
        return value
    if kind is int or kind is float:
        return FILLED if value else ZERO
    if isinstance(value, str):
        return fill(str(value))
    if isinstance(value, list | tuple):
        return fill(list(value))
    return FILLED if value else EMPTY


def ordered_metrics(names: set[str], metrics: Mapping[str, Metric]) -> list[Metric]:
    """Topological order over ``depends_on`` (dependencies that apply come first), then by name."""
    ordered: list[Metric] = []
    placed: set[str] = set()

    def place(name: str, trail: tuple[str, ...]) -> None:
        if name in placed or name not in names:
            return
        if name in trail:
            raise UserError(f"metric dependency cycle: {' → '.join((*trail, name))}", where="metrics")
        for dependency in metrics[name].depends_on:
            place(dependency, (*trail, name))
        placed.add(name)
        ordered.append(metrics[name])

    for name in sorted(names):
        place(name, ())
    return ordered
