"""``evalgate validate --explain``: per case, the metrics that will run, their thresholds and why each applies."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from evalgate.dialect import DIALECTS, NAMED, OWNER, WHEN, active_dialects, category_map, owned_when, triggered
from evalgate.metrics import registry
from evalgate.model import Case, Threshold


def make_explainer(plan_for: Callable[[Case], Any], thresholds: Mapping[str, Threshold],
                   threshold_origin: Mapping[str, str], global_suite: Any, suites: Mapping[str, Any],
                   compat: Sequence[str], user: Mapping[str, Any]) -> Callable[[Case], list[dict[str, Any]]]:
    """``explain(case)``: one row per planned metric: ``metric``, ``threshold`` (None: informational),
    ``threshold_from`` and ``why``."""

    def explain(case: Case) -> list[dict[str, Any]]:
        plan = plan_for(case)
        planned = [metric.name for metric in plan.metrics]
        active = active_dialects(case, compat)
        suite = suites.get(case.suite) if case.suite else None
        user_maps = [(config, where) for config, where in ((global_suite, "evalgate.yaml"),
                                                           (suite, f"suite {case.suite!r}"))
                     if config is not None and config.category_metrics]
        dialect_map = category_map(active) if active and not user_maps else {}
        fired = triggered(case, active)
        rows: list[dict[str, Any]] = []
        for name in planned:
            own = (plan.thresholds or {})
            if name in own:
                threshold, origin = own[name], "the case's assert: entry"
            else:
                threshold, origin = thresholds.get(name), threshold_origin.get(name, "default")
            why = ("the case's assert: entry" if name in own else
                   _why(name, case, planned, (global_suite, suite), user_maps, dialect_map, fired, active, user))
            rows.append({"metric": name, "threshold": threshold.model_dump() if threshold is not None else None,
                         "threshold_from": origin if threshold is not None else None, "why": why})
        return rows

    return explain


def _why(name: str, case: Case, planned: list[str], configs: tuple[Any, Any], user_maps: list[tuple[Any, str]],
         dialect_map: Mapping[str, list[str]], fired: Mapping[str, str], active: tuple[str, ...],
         user: Mapping[str, Any]) -> str:
    if any((entry.metric or entry.name or entry.check) == name for entry in case.assertions or []):
        return "the case's assert: names it"
    if name in (case.metrics or []):
        return "the case's metrics: names it"
    global_suite, suite = configs
    if suite is not None and name in suite.metric_refs:
        return f"suite {case.suite!r} metrics: names it"
    if global_suite is not None and name in global_suite.metric_refs:
        return "evalgate.yaml metrics: names it"
    for config, where in user_maps:
        if name in config.category_metrics.get(case.category or "", []):
            return f"category {case.category!r} → {where} category_metrics"
    if name in dialect_map.get(case.category or "", []):
        owner = next(d for d in active if name in DIALECTS[d].category_metrics.get(case.category or "", ()))
        return f"{DIALECTS[owner].label} dialect: category {case.category!r} → its category map ({_because(case, owner)})"
    if name in fired:
        owner = next(d for d in active if any(t.metric == name for t in DIALECTS[d].triggers))
        return f"{fired[name]} ({_because(case, owner)})"
    if name in OWNER and OWNER[name] in active:
        return f"{DIALECTS[OWNER[name]].label} dialect: {owned_when(name) or 'its rule'} ({_because(case, OWNER[name])})"
    if name in user:
        info = user[name].info or {}
        return f"your metric ({info.get('origin') or 'declared'}), in scope for this case"
    needed_by = [other for other in planned if other != name and name in _depends(other)]
    when = WHEN.get(name)
    if when and when != NAMED:
        return when
    if needed_by:
        return f"needed by {', '.join(needed_by)}"
    return when or "its applies rule"


def _depends(name: str) -> tuple[str, ...]:
    metric = registry.REGISTRY.get(name)  # read when asked: a test (or a plug-in) may replace the registry
    return metric.depends_on if metric is not None else ()


def _because(case: Case, dialect: str) -> str:
    if case.dialect == dialect:
        return f"kind {dialect}"
    return f"--compat {dialect}"


def render_explanation(rows: Sequence[tuple[Case, list[dict[str, Any]]]], format_threshold: Callable[[Any], str | None]
                       ) -> str:
    """Text for ``validate --explain``: each case, then one line per metric."""
    lines: list[str] = []
    for case, metrics in rows:
        lines.append(f"{case.id}  ({case.location}{', kind ' + case.dialect if case.dialect else ''})")
        if not metrics:
            lines.append("  no metric runs on this case (add expectations, rules, metrics: or assert:)")
        for row in metrics:
            threshold = format_threshold(row["threshold"]) or "informational"
            source = f" ({row['threshold_from']})" if row["threshold_from"] else ""
            lines.append(f"  {row['metric']:<20} {threshold}{source} — {row['why']}")
    return "\n".join(lines)
