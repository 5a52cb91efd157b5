"""The run's metrics: the built-in registry plus the user's own (docs/custom-metrics.md), resolved once
before the first case runs, and planned per case.

Where a user metric comes from, by the text of a ``metrics:`` entry:

1. a mapping: a declaration (``criteria`` → a judged metric, ``check`` → a code check);
2. a built-in metric's name;
3. a metric declared in evalgate.yaml or any suite block;
4. ``package.module:function`` or ``file://checks.py:function`` (relative to the file that names it);
5. the name of a function decorated with ``@evalgate.metric`` in code imported so far (the Python API);
6. the name of an installed plug-in (entry-point group ``evalgate.metrics``).

Anything else is exit 2 with a "did you mean". Scope: entries of evalgate.yaml run on every case, those of
a suite block on that suite's cases, a case's ``metrics:`` / ``assert:`` on that case; a declaration's
``categories`` / ``tags`` / ``run: asked`` and a decorated check's ``applies`` narrow it. User metrics are
planned per case (their ``applies`` may read any value), never from the shape-keyed plan cache.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from dataclasses import replace as _replace
from pathlib import Path
from typing import Any

from evalgate.config.references import is_reference, resolve_reference
from evalgate.config.suite import SuiteConfig, did_you_mean
from evalgate.errors import UserError
from evalgate.metrics.checks import (
    USER_METRICS,
    CheckSpec,
    check_metric,
    load_plugin,
    plugin_names,
    qualname,
    reference_base,
    spec_of,
)
from evalgate.metrics.criteria import criteria_metric, declaration_metric, definition_of
from evalgate.metrics.registry import Direction, Metric
from evalgate.model import DEFAULT_CUSTOM_THRESHOLD, Case, CaseAssertion, MetricDeclaration, Threshold

INLINE_CRITERIA = "case_criteria"
"""Name of a case's unnamed one-off ``assert: [{criteria: …}]`` (the second is ``case_criteria_2`` …)."""
_CASE_WHERE = re.compile(r"^(.*?):(\d+): case ")


@dataclass
class Catalog:
    """The run's metrics and where each user metric is in scope."""

    metrics: dict[str, Metric]
    """Built-in and user metrics by name (inline one-off metrics join as cases are planned)."""
    user: dict[str, Metric] = field(default_factory=dict)
    alias: dict[str, str] = field(default_factory=dict)
    """Text of a ``metrics:`` entry (name, reference, plug-in) → the user metric's name."""
    in_config: list[str] = field(default_factory=list)
    in_suite: dict[str, list[str]] = field(default_factory=dict)
    declared_thresholds: dict[str, Any] = field(default_factory=dict)
    """Thresholds the declarations (and decorated checks) give, the lowest layer above the defaults."""
    threshold_where: dict[str, str] = field(default_factory=dict)
    _inline: dict[str, Metric] = field(default_factory=dict)

    def inline_metric(self, case: Case, position: int, entry: CaseAssertion, name: str) -> Metric:
        """The metric of one-off assertion ``entry`` of ``case`` (built once per distinct entry)."""
        key = f"{name}\x00{entry.model_dump_json()}"
        metric = self._inline.get(key)
        if metric is None:
            if entry.criteria is not None:
                metric = criteria_metric(definition_of(name, entry, f"{case.location} assert[{position}]"))
            else:
                base = self.metrics[self.alias[entry.check or ""]]
                metric = _replace(base, name=name)
                if entry.direction is not None:
                    metric = _directed(metric, entry.direction, f"{case.location} assert[{position}]")
            self._inline[key] = metric
            self.metrics.setdefault(name, metric)
        return metric


def build_catalog(builtins: Mapping[str, Metric], global_suite: SuiteConfig, config_where: str,
                  suites: Mapping[str, SuiteConfig], suite_where: Mapping[str, str],
                  case_refs: Iterable[tuple[str, list[str]]], cwd: Path) -> Catalog:
    """Resolve every user metric the configuration, the suites and the cases name (all problems are
    ``UserError``s naming the file and line)."""
    catalog = Catalog(metrics=dict(builtins))
    scopes: list[tuple[str | None, SuiteConfig, str]] = [(None, global_suite, config_where)]
    scopes += [(name, suite, suite_where.get(name, f"suite {name!r}")) for name, suite in suites.items()]
    origins: dict[str, tuple[Any, str]] = {}
    for scope, suite, where in scopes:  # declarations first: entries may name them in any order
        for declaration in suite.declarations:
            _declare(catalog, declaration, where, cwd, origins)
            _in_scope(catalog, scope, declaration.name)
    for scope, suite, where in scopes:
        for entry in suite.metric_refs:
            name = _resolve_entry(catalog, entry, where, cwd)
            if name is not None:
                _in_scope(catalog, scope, name)
    for where, names in case_refs:
        for entry in names:
            _resolve_entry(catalog, entry, where, cwd)
    if INLINE_CRITERIA not in catalog.metrics:  # thresholds and reports may name it; each case has its own
        placeholder = criteria_metric(definition_of(INLINE_CRITERIA, CaseAssertion(criteria="(per case)"), "cases"))
        catalog.metrics[INLINE_CRITERIA] = _replace(placeholder, info=None,
                                                    description="one-off criteria written on each case (assert:)")
    known = list(catalog.metrics)
    for _scope, suite, where in scopes:
        for name in suite.exclude_metrics:
            if name not in catalog.metrics:
                raise UserError(f"exclude_metrics: unknown metric {name!r}{did_you_mean(name, known)}", where=where)
    return catalog


def _in_scope(catalog: Catalog, scope: str | None, name: str) -> None:
    listed = catalog.in_config if scope is None else catalog.in_suite.setdefault(scope, [])
    if name not in listed:
        listed.append(name)


def _base(where: str, cwd: Path) -> Path:
    """The directory ``file://`` references in the file named by ``where`` are relative to."""
    match = _CASE_WHERE.match(where)
    text = match.group(1) if match else where
    base = reference_base(text)
    if base is None:
        return cwd
    return base if base.is_absolute() else cwd / base


def _declare(catalog: Catalog, declaration: MetricDeclaration, where: str, cwd: Path,
             origins: dict[str, tuple[Any, str]]) -> None:
    name = declaration.name
    if name in catalog.metrics and name not in catalog.user:
        raise UserError(f"metric {name!r} is a built-in metric; give your metric another name", where=where)
    fingerprint = declaration.model_dump()
    if name in origins:
        if origins[name][0] != fingerprint:
            raise UserError(f"metric {name!r} is declared differently at {origins[name][1]}", where=where)
        return
    origins[name] = (fingerprint, where)
    categories = tuple(declaration.categories) if declaration.categories is not None else None
    tags = tuple(declaration.tags) if declaration.tags is not None else None
    if declaration.criteria is not None:
        metric = declaration_metric(declaration, where)
        threshold: Any = declaration.threshold if declaration.threshold_given else DEFAULT_CUSTOM_THRESHOLD
    else:
        spec = _spec(declaration.check or "", name, where, cwd)
        metric = check_metric(spec, origin=declaration.check or "", categories=categories, tags=tags,
                              run_on_all=declaration.run == "all", description=declaration.description)
        if declaration.direction is not None:
            metric = _directed(metric, declaration.direction, where)
        threshold = declaration.threshold if declaration.threshold_given else spec.threshold
    _add(catalog, metric, threshold, where)


def infer_directions(catalog: Catalog, thresholds: Mapping[str, Any], origins: Mapping[str, str]) -> list[str]:
    """Every metric has a direction. A code check that did not declare one and is gated by a ``max`` (or
    ``lt``) threshold is taken as lower-is-better (an error rate), and a notice says so and how to declare
    it; the comparison with a baseline then counts a rise as a regression. Returns the notices."""
    notices: list[str] = []
    for name, metric in list(catalog.metrics.items()):
        threshold = thresholds.get(name)
        if metric.direction_declared or threshold is None or getattr(threshold, "op", None) not in ("max", "lt"):
            continue
        directed = _replace(metric, direction="lower", direction_declared=True)
        catalog.metrics[name] = directed
        if name in catalog.user:
            catalog.user[name] = directed
        where = origins.get(name) or "its threshold"
        if where == "metric declarations":
            where = catalog.threshold_where.get(name, where)
        notices.append(f"metric {name!r}: lower values taken as better from its {threshold} threshold ({where}); "
                       "declare direction: lower (or higher) beside its check to say so")
    return notices


def _directed(metric: Metric, direction: Direction, where: str) -> Metric:
    """``metric`` with the ``direction`` its declaration states; a function that says the opposite itself
    (``@evalgate.metric(direction=…)``) is a ``UserError``."""
    if metric.direction_declared and metric.direction != direction:
        raise UserError(f"metric {metric.name!r}: direction {direction!r} here, but its function declares "
                        f"{metric.direction!r}; give one", where=where)
    return _replace(metric, direction=direction, direction_declared=True)


def _add(catalog: Catalog, metric: Metric, threshold: Any, where: str) -> None:
    catalog.metrics[metric.name] = metric
    catalog.user[metric.name] = metric
    catalog.declared_thresholds[metric.name] = threshold.model_dump() if isinstance(threshold, Threshold) else threshold
    catalog.threshold_where[metric.name] = where


def _spec(reference: str, name: str | None, where: str, cwd: Path) -> CheckSpec:
    obj = resolve_reference(reference, base_dir=_base(where, cwd), where=where)
    return spec_of(obj, name=name, where=where)


def _resolve_entry(catalog: Catalog, entry: str, where: str, cwd: Path) -> str | None:
    """The user metric ``entry`` names (resolved and added when new); None for a built-in."""
    if entry in catalog.alias:
        return catalog.alias[entry]
    if entry in catalog.metrics:
        if entry not in catalog.user:
            return None
        name = entry
    elif is_reference(entry):
        spec = _spec(entry, None, where, cwd)
        name = spec.name
        existing = catalog.metrics.get(name)
        if existing is not None and name not in catalog.user:
            raise UserError(f"{entry!r} defines metric {name!r}, a built-in metric's name; rename the function "
                            "or use @evalgate.metric(name=...)", where=where)
        if existing is None:
            _add(catalog, check_metric(spec, origin=entry), spec.threshold, where)
        elif (existing.info or {}).get("function") != qualname(spec.fn):
            raise UserError(f"{entry!r} and {(existing.info or {}).get('origin')!r} both define metric {name!r}",
                            where=where)
    elif entry in USER_METRICS:
        spec = USER_METRICS[entry]
        name = spec.name
        _add(catalog, check_metric(spec, origin=f"@evalgate.metric {qualname(spec.fn)}"), spec.threshold, where)
    else:
        plugin = load_plugin(entry, where)
        if plugin is None:
            known = [*catalog.metrics, *USER_METRICS, *plugin_names()]
            raise UserError(f"unknown metric {entry!r}{did_you_mean(entry, known)}", where=where)
        _add_plugin(catalog, entry, plugin, where)
        name = entry
    catalog.alias[entry] = name
    return name


def _add_plugin(catalog: Catalog, name: str, plugin: Any, where: str) -> None:
    """A plug-in exports a function (a code check) or a mapping (a judged metric declaration)."""
    if isinstance(plugin, Mapping):
        try:
            declaration = MetricDeclaration.model_validate({**plugin, "name": name})
        except Exception as exc:
            raise UserError(f"plug-in metric {name!r} is not a valid declaration: {exc}".splitlines()[0],
                            where=where) from None
        _declare(catalog, declaration, f"plug-in {name}", Path.cwd(), {})
        return
    spec = spec_of(plugin, name=name, where=where)
    _add(catalog, check_metric(spec, origin=f"plug-in {name}"), spec.threshold, where)


# --- per-case planning --------------------------------------------------------------------------------------


def case_assertions(catalog: Catalog, case: Case) -> tuple[list[Metric], dict[str, Threshold | None]]:
    """The metrics ``case``'s ``assert:`` list runs and their per-case thresholds (None: informational)."""
    metrics: list[Metric] = []
    thresholds: dict[str, Threshold | None] = {}
    counts: dict[str, int] = {}
    for position, entry in enumerate(case.assertions or []):
        if entry.metric is not None:
            name = catalog.alias.get(entry.metric, entry.metric)
            metric = catalog.metrics[name]
        else:
            if entry.criteria is not None:
                base = entry.name or INLINE_CRITERIA
            else:
                if (entry.check or "") not in catalog.alias:  # a built-in's name: no code check of the user's
                    raise UserError(f"check {entry.check!r} is a built-in metric, not a code check: write "
                                    f"metric: {entry.check} (a built-in metric's direction is its own)",
                                    where=f"{case.location} assert[{position}]")
                base = entry.name or catalog.alias[entry.check or ""]
            counts[base] = counts.get(base, 0) + 1
            name = base if counts[base] == 1 else f"{base}_{counts[base]}"
            if entry.criteria is None and entry.name is None and counts[base] == 1 and entry.direction is None:
                metric = catalog.metrics[name]
            else:
                metric = catalog.inline_metric(case, position, entry, name)
        metrics.append(metric)
        if entry.threshold_given or (entry.criteria is not None and entry.metric is None):
            raw = entry.threshold if entry.threshold_given else DEFAULT_CUSTOM_THRESHOLD
            thresholds[name] = _threshold(raw, metric.direction)
    return metrics, thresholds


def _threshold(raw: Any, direction: str) -> Threshold | None:
    if raw is None or isinstance(raw, Threshold):
        return raw
    return Threshold(op="min" if direction == "higher" else "max", value=float(raw))
