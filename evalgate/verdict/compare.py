"""Baseline-vs-head comparison: the ``comparison`` block of results.json.

Cases are matched by id. A case run several times (``repeat`` 0, 1, …) is collapsed first: each
metric's value is the mean over the repeats that have a finite number, and its outcome is the repeat
verdict (``evalgate.verdict.stats.repeat_verdict``, majority by default) over the repeats not skipped.

* Per metric: pairs are the shared cases with a value in both runs; ``base``/``head`` are the means
  over those pairs, ``delta`` = mean(head − base), ``ci_low``/``ci_high`` its paired-bootstrap
  interval at confidence 1 − α. ``regression``/``improvement`` = significant (``stats.significant``)
  and the interval lies on the worse/better side of 0 (for ``direction: lower`` a rise is worse).
* Pass rate: over the shared cases with an outcome in both runs; ``regressions`` = passed → failed or
  errored, ``fixes`` = the reverse; ``p_value`` = exact McNemar on (regressions, fixes).
* A case is critical when either run rates it ``critical`` (lowering a case's risk in the same PR
  does not hide its failure). Flipped cases are listed critical first, then by source file and line.
* Top-level ``regression`` = a gated metric regressed OR a critical case flipped to fail.

``load_results`` reads results.json or evalgate's SQLite store (``load_results_sqlite``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from evalgate.text.numbers import score
from evalgate.verdict import stats

DEFAULT_ALPHA = 0.05


@dataclass(slots=True)
class _Case:
    """One case of one run with its repeats collapsed."""

    id: str
    source: str
    risk_level: str
    status: str | None
    """``passed``/``failed``/``errored`` from the repeat verdict; None when every repeat was skipped."""
    values: dict[str, float] = field(default_factory=dict)


def compare_runs(
    base: Mapping[str, Any],
    head: Mapping[str, Any],
    *,
    alpha: float = DEFAULT_ALPHA,
    resamples: int = stats.DEFAULT_RESAMPLES,
    seed: int = stats.DEFAULT_SEED,
    gated_metrics: set[str] | None = None,
    baseline_source: str | None = None,
    repeat_rule: stats.RepeatRule = "majority",
) -> dict[str, Any]:
    """Compare a head run with its baseline (both results.json documents); returns the block.

    ``gated_metrics`` overrides which metrics count as gated (default: those with a threshold in
    head). ``baseline_source`` describes where the baseline came from (e.g. the artifact and run).
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be between 0 and 1, got {alpha}")
    if repeat_rule not in stats.REPEAT_RULES:
        raise ValueError(f"repeat rule must be one of {', '.join(stats.REPEAT_RULES)}, got {repeat_rule!r}")
    base_cases = _collapse(base.get("results", []), repeat_rule)
    head_cases = _collapse(head.get("results", []), repeat_rule)
    shared = [case_id for case_id in head_cases if case_id in base_cases]
    gated = _gated_names(head) if gated_metrics is None else set(gated_metrics)
    metrics = {
        name: _metric_block(
            *_paired_values(name, base_cases, head_cases, shared),
            direction=_direction(name, head, base),
            gated=name in gated,
            alpha=alpha,
            resamples=resamples,
            seed=seed,
        )
        for name in _metric_names(base_cases, head_cases, shared)
    }
    pass_rate, regressions, fixes = _compare_outcomes(base_cases, head_cases, shared, alpha)
    cases: dict[str, list[Any]] = {
        "regressions": regressions,
        "fixes": fixes,
        "new": [case_id for case_id in head_cases if case_id not in base_cases],
        "removed": [case_id for case_id in base_cases if case_id not in head_cases],
    }
    regression = any(m["regression"] and m["gated"] for m in metrics.values()) or any(
        flip["critical"] for flip in regressions
    )
    return {
        "baseline": {
            "source": baseline_source or "baseline results",
            "run_id": base.get("run_id"),
            "timestamp": base.get("timestamp"),
        },
        "significance_level": alpha,
        "bootstrap": {"resamples": resamples, "seed": seed},
        "metrics": metrics,
        "pass_rate": pass_rate,
        "cases": cases,
        "regression": regression,
        "summary": _summary(metrics, pass_rate, cases, alpha),
    }


def comparison_gate_reasons(comparison: Mapping[str, Any], fail_on_regression: bool) -> list[str]:
    """Why the gate fails because of the comparison: gated metric regressions and critical cases that
    flipped to fail. Empty unless ``fail_on_regression``."""
    if not fail_on_regression:
        return []
    level = _confidence_label(comparison["significance_level"])
    reasons = [
        f"{name} regressed against the baseline: {_num(m['base'])} → {_num(m['head'])} "
        f"(Δ {_num(m['delta'])}, {level} CI {_num(m['ci_low'])} to {_num(m['ci_high'])}, "
        f"n={m['n_paired']})"
        for name, m in comparison["metrics"].items()
        if m["regression"] and m["gated"]
    ]
    reasons += [
        f"critical case {flip['id']} flipped from {flip['base_status']} to {flip['head_status']} "
        f"against the baseline ({flip['source']})"
        for flip in comparison["cases"]["regressions"]
        if flip["critical"]
    ]
    return reasons


# ── collapsing runs ───────────────────────────────────────────────────────────────────────────


def _collapse(records: Iterable[Mapping[str, Any]], rule: stats.RepeatRule) -> dict[str, _Case]:
    """Group records by id (first-seen order) and collapse their repeats."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for record in records:
        groups.setdefault(str(record["id"]), []).append(record)
    return {case_id: _collapse_case(case_id, group, rule) for case_id, group in groups.items()}


def _collapse_case(case_id: str, repeats: list[Mapping[str, Any]], rule: stats.RepeatRule) -> _Case:
    first = repeats[0]
    return _Case(
        id=case_id,
        source=str(first.get("source") or "<unknown>"),
        risk_level=str(first.get("risk_level") or "medium").lower(),
        status=_outcome([_status(r) for r in repeats], rule),
        values=_record_values(first) if len(repeats) == 1 else _mean_values(repeats),
    )


def _outcome(statuses: list[str], rule: stats.RepeatRule) -> str | None:
    """``passed`` when the repeat verdict over the non-skipped repeats passes, else ``failed`` if any
    repeat failed, else ``errored``; None when every repeat was skipped."""
    counted = [s for s in statuses if s != "skipped"]
    if not counted:
        return None
    if stats.repeat_verdict([s == "passed" for s in counted], rule):
        return "passed"
    return "failed" if "failed" in counted or "errored" not in counted else "errored"


def _status(record: Mapping[str, Any]) -> str:
    status = record.get("status")
    if isinstance(status, str):
        return status
    return "passed" if record.get("passed") else "failed"


def _record_values(record: Mapping[str, Any]) -> dict[str, float]:
    """Finite numeric metric values of one record, except values a heuristic gave because the judge could
    not score the answer (``details.judge_unavailable``): they are not comparable with judge values."""
    values = {}
    for name, result in (record.get("metrics") or {}).items():
        if not isinstance(result, Mapping):
            continue
        value = _number(result.get("value"))
        if value is not None and "judge_unavailable" not in (result.get("details") or {}):
            values[name] = value
    return values


def _mean_values(repeats: list[Mapping[str, Any]]) -> dict[str, float]:
    """Per metric, the mean of the finite numeric values over the repeats that have one."""
    collected: dict[str, list[float]] = {}
    for record in repeats:
        for name, value in _record_values(record).items():
            collected.setdefault(name, []).append(value)
    return {name: math.fsum(values) / len(values) for name, values in collected.items()}


def _number(value: Any) -> float | None:
    """``value`` as a float when it is a finite int or float (not a bool), else None."""
    if type(value) is float or type(value) is int:
        return float(value) if math.isfinite(value) else None
    return None


# ── metrics ───────────────────────────────────────────────────────────────────────────────────


def _metric_names(base: dict[str, _Case], head: dict[str, _Case], shared: list[str]) -> list[str]:
    """Metrics with at least one pair (a value in both runs on the same case), sorted by name."""
    return sorted({name for i in shared for name in head[i].values.keys() & base[i].values.keys()})


def _gated_names(head: Mapping[str, Any]) -> set[str]:
    table = head.get("metrics") or {}
    gated = {name for name, row in table.items() if isinstance(row, Mapping) and row.get("threshold")}
    return gated | set(head.get("thresholds") or {})


def _direction(name: str, *docs: Mapping[str, Any]) -> str:
    """The metric's direction from the first suite table that states one; ``higher`` otherwise."""
    for doc in docs:
        row = (doc.get("metrics") or {}).get(name)
        if isinstance(row, Mapping) and row.get("direction") in ("higher", "lower"):
            return str(row["direction"])
    return "higher"


def _paired_values(
    name: str, base: dict[str, _Case], head: dict[str, _Case], shared: list[str]
) -> tuple[list[float], list[float]]:
    """Values of ``name`` on the shared cases that have one in both runs, as (base, head) lists."""
    ids = [i for i in shared if name in base[i].values and name in head[i].values]
    return [base[i].values[name] for i in ids], [head[i].values[name] for i in ids]


def _metric_block(
    base_values: list[float],
    head_values: list[float],
    *,
    direction: str,
    gated: bool,
    alpha: float,
    resamples: int,
    seed: int,
) -> dict[str, Any]:
    """One row of ``comparison.metrics`` from at least one pair."""
    interval = stats.paired_bootstrap_ci(
        base_values, head_values, resamples=resamples, confidence=1.0 - alpha, seed=seed
    )
    if interval is None:
        raise ValueError("a metric row needs at least one pair")
    delta, low, high = interval
    n = len(base_values)
    significant = stats.significant(low, high, n=n)
    worse_side = high < 0.0 if direction == "higher" else low > 0.0
    return {
        "base": math.fsum(base_values) / n,
        "head": math.fsum(head_values) / n,
        "delta": delta,
        "ci_low": low,
        "ci_high": high,
        "n_paired": n,
        "direction": direction,
        "significant": significant,
        "regression": significant and worse_side,
        "improvement": significant and not worse_side,
        "gated": gated,
    }


# ── case outcomes ─────────────────────────────────────────────────────────────────────────────


def _compare_outcomes(
    base: dict[str, _Case], head: dict[str, _Case], shared: list[str], alpha: float
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    paired = [i for i in shared if base[i].status is not None and head[i].status is not None]
    regressions = [_flip(base[i], head[i]) for i in paired if _passed(base[i]) and not _passed(head[i])]
    fixes = [_flip(base[i], head[i]) for i in paired if not _passed(base[i]) and _passed(head[i])]
    regressions.sort(key=_flip_order)
    fixes.sort(key=_flip_order)
    n = len(paired)
    p_value = stats.mcnemar_exact(len(regressions), len(fixes))
    base_rate = sum(_passed(base[i]) for i in paired) / n if n else None
    head_rate = sum(_passed(head[i]) for i in paired) / n if n else None
    pass_rate = {
        "base": base_rate,
        "head": head_rate,
        "delta": head_rate - base_rate if base_rate is not None and head_rate is not None else None,
        "regressions": len(regressions),
        "fixes": len(fixes),
        "n_paired": n,
        "p_value": p_value,
        "significant": p_value < alpha,
    }
    return pass_rate, regressions, fixes


def _passed(case: _Case) -> bool:
    return case.status == "passed"


def _flip(base: _Case, head: _Case) -> dict[str, Any]:
    return {
        "id": head.id,
        "source": head.source,
        "risk_level": head.risk_level,
        "critical": "critical" in (head.risk_level, base.risk_level),
        "base_status": base.status,
        "head_status": head.status,
    }


def _flip_order(flip: Mapping[str, Any]) -> tuple[bool, str, int, str]:
    """Critical first, then source file, then line number (numeric), then id."""
    path, _, line = str(flip["source"]).rpartition(":")
    if not (path and line.isdigit()):
        path, line = str(flip["source"]), "0"
    return (not flip["critical"], path, int(line), str(flip["id"]))


# ── summary ───────────────────────────────────────────────────────────────────────────────────


def _summary(
    metrics: Mapping[str, Mapping[str, Any]],
    pass_rate: Mapping[str, Any],
    cases: Mapping[str, list[Any]],
    alpha: float,
) -> str:
    """One sentence on the metrics, one on the cases; non-significant changes say so. Sentences may
    start with a metric name, which keeps its case."""
    moved = [name for name, m in metrics.items() if m["delta"] != 0.0]
    if not moved and not any(cases.values()):
        return (
            f"No change against the baseline: {pass_rate['n_paired']} paired cases, "
            "every metric delta is 0 and no case changed outcome."
        )
    return f"{_metric_sentence(metrics, moved, alpha)} {_case_sentence(pass_rate, cases, alpha)}"


def _metric_sentence(metrics: Mapping[str, Mapping[str, Any]], moved: list[str], alpha: float) -> str:
    """Significant regressions and improvements of *gated* metrics (those with a threshold) first: only
    they can fail the gate. Significant moves of ungated metrics are named as such, then the rest."""
    level = _confidence_label(alpha)
    regressions = [n for n in moved if metrics[n]["regression"] and metrics[n].get("gated", True)]
    improvements = [n for n in moved if metrics[n]["improvement"] and metrics[n].get("gated", True)]
    ungated = [n for n in moved if metrics[n]["significant"] and not metrics[n].get("gated", True)]
    quiet = [n for n in moved if not metrics[n]["significant"]]
    parts = []
    for label, names in (("regression", regressions), ("improvement", improvements)):
        if names:
            phrases = "; ".join(_metric_phrase(n, metrics[n], level) for n in names)
            parts.append(f"{_plural(len(names), f'significant {label}')}: {phrases}")
    if ungated:
        phrases = "; ".join(_metric_phrase(n, metrics[n], level) for n in ungated)
        parts.append(f"{_plural(len(ungated), 'significant change')} of ungated metrics (no threshold): {phrases}")
    if quiet and parts:
        parts.append(f"{_plural(len(quiet), 'other metric change')} not significant at α={alpha:g}")
    elif quiet:
        largest = max(quiet, key=lambda n: abs(metrics[n]["delta"]))
        others = " (nor is any other metric change)" if len(quiet) > 1 else ""
        parts.append(f"{_metric_phrase(largest, metrics[largest], level)}: not significant at α={alpha:g}{others}")
    elif not parts:
        parts.append("No metric changed")
    return "; ".join(parts) + "."


def _metric_phrase(name: str, m: Mapping[str, Any], level: str) -> str:
    verb = "rose" if m["delta"] > 0 else "fell"
    lower = "lower is better; " if m["direction"] == "lower" else ""
    return f"{name} {verb} {_num(abs(m['delta']))} ({lower}{level} CI {_num(m['ci_low'])} to {_num(m['ci_high'])})"


def _case_sentence(pass_rate: Mapping[str, Any], cases: Mapping[str, list[Any]], alpha: float) -> str:
    regressions, fixes = cases["regressions"], cases["fixes"]
    if regressions or fixes:
        critical = sum(1 for flip in regressions if flip["critical"])
        note = f" ({critical} critical)" if critical else ""
        verdict = "significant" if pass_rate["significant"] else "not significant"
        sentence = (
            f"{_plural(len(regressions), 'case')} flipped to fail{note} and {len(fixes)} to pass "
            f"(McNemar p={_p(pass_rate['p_value'])}, {verdict} at α={alpha:g})"
        )
    else:
        sentence = "No case changed outcome"
    if cases["new"] or cases["removed"]:
        sentence += f"; {len(cases['new'])} new and {len(cases['removed'])} removed"
    return sentence + "."


def _confidence_label(alpha: float) -> str:
    return f"{(1.0 - alpha) * 100:g}%"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _num(value: float | None) -> str:
    """The report number format (:func:`evalgate.text.numbers.score`); ``n/a`` for None."""
    return "n/a" if value is None else score(value)


def _p(value: float) -> str:
    return f"{value:.2f}" if value >= 0.01 else f"{value:.2g}"
