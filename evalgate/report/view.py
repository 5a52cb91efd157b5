"""View models shared by the reports: pure functions from a results document (docs/results.md)
to plain values, with nothing escaped.

The Markdown report (``markdown.py``) escapes at its edge through template filters; the HTML report
(``html.py``) lets jinja2 autoescape. Each renderer composes these sections into its own view and keeps
only what differs (excerpt lengths, source links, size budget, case selection).

Case records are read through their type (``CaseResult``, ``store.reader.read_case``: the one lenient
reader, whose "not recorded" rule decides what a hand-edited or foreign record shows); the document's own
summaries (comparison, flaky and critical entries) stay mappings (``entry_ref``).

Case order ("importance"): critical first (``risk_level: critical`` or ``critical: true``), then by risk
(critical, high, medium, low, unknown), then dataset order (``index``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from evalgate.model import STATUS_TEXT, THRESHOLD_SYMBOLS, CaseResult, MetricResult, Threshold
from evalgate.report.escape import truncate
from evalgate.store.reader import read_case, read_metrics, recorded
from evalgate.text.numbers import score
from evalgate.verdict.gate import reason_rank

RISK_ORDER = {"critical": 0, "high": 1, "medium": 2, "low": 3}
FAILED_STATUSES = ("failed", "errored")

Link = Callable[[str | None], str | None]
"""Turns a case ``source`` (``path:line``) into a URL, or None."""


def no_link(source: str | None) -> None:
    """The ``Link`` of a report without source links."""
    return None


# ---------------------------------------------------------------------------------------------
# cases: importance and references (case records read through their type: ``store.reader.read_case``)


def is_critical(case: CaseResult) -> bool:
    """True for ``risk_level: critical`` (as recorded, or a legacy ``critical: true``: ``read_case``)."""
    return case.risk_level.lower() == "critical"


def risk_rank(case: CaseResult) -> int:
    """0 for critical … 3 for low, 4 for unknown or unrecorded risk levels (sorts most important first)."""
    return entry_risk_rank(recorded(case, "risk_level"))


def entry_risk_rank(risk_level: Any) -> int:
    """``risk_rank`` of a risk level as a document lists it (a comparison or flaky entry)."""
    return RISK_ORDER.get(str(risk_level or "").lower(), len(RISK_ORDER))


def is_failing(case: CaseResult) -> bool:
    """True for a ``failed`` or ``errored`` case record."""
    return STATUS_TEXT[case.status] in FAILED_STATUSES


def importance(case: CaseResult) -> tuple[bool, int, int]:
    """Sort key, most important first: (not critical, risk rank, dataset index)."""
    return not is_critical(case), risk_rank(case), case.index


def failing_by_importance(cases: Iterable[CaseResult]) -> list[CaseResult]:
    """Failed/errored cases only, most important first."""
    return sorted((c for c in cases if is_failing(c)), key=importance)


def failing_first(cases: Sequence[CaseResult]) -> list[CaseResult]:
    """Every case: failed/errored by importance, then the rest in dataset order; repeats in order within."""
    failing = sorted((c for c in cases if is_failing(c)), key=lambda c: (*importance(c), c.repeat))
    rest = sorted((c for c in cases if not is_failing(c)), key=lambda c: (c.index, c.repeat))
    return failing + rest


def case_records(results: Mapping[str, Any]) -> list[CaseResult]:
    """The case records of ``results`` (a digest's, or a whole document's held in memory), each read through
    its type (``read_case``: what is not a case record is left out)."""
    read = (read_case(c, position) for position, c in enumerate(results.get("results") or []))
    return [case for case in read if case is not None]


def case_ref(case: CaseResult, link: Link = no_link) -> dict[str, Any]:
    """What every case mention shows: id, status, source and its link, risk (as recorded), reasons, repeat."""
    return _ref(case.id, STATUS_TEXT[case.status], recorded(case, "source"), recorded(case, "risk_level"),
                is_critical(case), case.reasons, case.repeat, link)


def entry_ref(entry: Mapping[str, Any], link: Link = no_link) -> dict[str, Any]:
    """``case_ref`` of a case as a document lists it (comparison, flaky and critical entries: the document's
    own summaries, not case records; ``critical: true`` counts as critical)."""
    critical = bool(entry.get("critical")) or str(entry.get("risk_level") or "").lower() == "critical"
    return _ref(str(entry.get("id")), entry.get("status"), entry.get("source"), entry.get("risk_level"), critical,
                entry.get("reasons") or [], entry.get("repeat") or 0, link)


def _ref(case_id: str, status: Any, source: Any, risk_level: Any, critical: bool, reasons: Iterable[Any],
         repeat: Any, link: Link) -> dict[str, Any]:
    return {"id": case_id, "status": status, "source": source, "link": link(source), "risk_level": risk_level,
            "critical": critical, "reasons": [str(r) for r in reasons], "repeat": repeat}


def critical_refs(cases: Iterable[CaseResult], link: Link = no_link) -> list[dict[str, Any]]:
    """References to the failed/errored critical cases, in the order given."""
    return [case_ref(c, link) for c in cases if is_critical(c) and is_failing(c)]


def case_metrics(case: CaseResult, statuses: Collection[str] | None = None) -> list[dict[str, Any]]:
    """A case's metric rows ``{name, value, threshold (formatted), status, reason, explanation}`` as recorded; with
    ``statuses``, only the metrics whose status is one of them. A metric computed without a threshold reads
    ``informational``: it passed nothing."""
    rows = []
    for name, m in case.metrics.items():
        status = STATUS_TEXT[m.status]
        if statuses is None or status in statuses:
            rows.append({"name": str(name), "value": m.value, "threshold": format_threshold(m.threshold),
                         "status": "informational" if status == "passed" and m.threshold is None else status,
                         "reason": m.reason, "explanation": explanation(m.details)})
    return rows


def explanation(details: Any) -> str | None:
    """Why a metric scored what it did, in its own words (from its ``details``): the judge's ``reasoning`` or a
    code check's ``reason``, else None."""
    if not isinstance(details, Mapping):
        return None
    text = details.get("reasoning") or details.get("reason")
    return " ".join(str(text).split()) if text else None


# ---------------------------------------------------------------------------------------------
# suite sections


def verdict_view(results: Mapping[str, Any]) -> dict[str, Any]:
    """The gate: passed, exit code, run status (``completed`` when absent) and reasons."""
    gate = results.get("gate") or {}
    return {
        "passed": bool(gate.get("passed")),
        "exit_code": gate.get("exit_code"),
        "status": str(results.get("status") or "completed"),
        "reasons": [str(r) for r in gate.get("reasons") or []],
        "no_gate": str(gate["no_gate"]) if gate.get("no_gate") else None,
    }


def totals_view(results: Mapping[str, Any]) -> dict[str, Any]:
    """Case counts and pass rates (fractions in [0, 1]) from ``summary``."""
    summary = results.get("summary") or {}
    return {
        "total": summary.get("total_test_cases", 0),
        "passed": summary.get("total_passed", 0),
        "failed": summary.get("total_failed", 0),
        "errored": summary.get("total_errored", 0),
        "skipped": summary.get("total_skipped", 0),
        "critical_failures": summary.get("critical_failures", 0),
        "pass_rate": summary.get("pass_rate"),
        "weighted_pass_rate": summary.get("weighted_pass_rate"),
    }


def usage_view(results: Mapping[str, Any]) -> dict[str, Any]:
    """Token counts (total, average per case, judge prompt/completion) and the run's cost in USD."""
    summary = results.get("summary") or {}
    tokens = summary.get("tokens") or {}
    return picked(tokens, {"tokens_total": "total", "tokens_average": "average", "judge_prompt": "judge_prompt",
                           "judge_completion": "judge_completion"}) | {"cost_usd": summary.get("cost_usd")}


def picked(source: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    """``{name: source.get(key)}`` for each ``name: key`` of ``names``, in that order (a document's fields
    under a view's names; None where ``source`` lacks the key)."""
    return {name: source.get(key) for name, key in names.items()}


def metric_result(info: Mapping[str, Any]) -> str:
    """``passed``/``failed`` against the threshold (``judge_missing`` instead of ``passed`` when the judge left
    some of its verdicts missing: the average then rests partly on the heuristic or on fewer cases); with no
    value at all ``unavailable`` (some case should have scored it: unavailable or errored) or ``skipped`` (not
    run by design); else ``none`` (informational)."""
    if info.get("average") is None:
        return "unavailable" if int(info.get("unavailable") or 0) + int(info.get("errored") or 0) else "skipped"
    if info.get("threshold") is None:
        return "none"
    if info.get("passed") and info.get("judge_unavailable"):
        return "judge_missing"
    return "passed" if info.get("passed") else "failed"


def not_run(info: Mapping[str, Any]) -> int:
    """Cases where a metric produced no value: skipped + unavailable + errored."""
    return sum(int(info.get(key) or 0) for key in ("skipped", "unavailable", "errored"))


def metric_rows(results: Mapping[str, Any], *, unchanged: str = "=") -> list[dict[str, Any]]:
    """One row per suite metric: summary (a user metric's criteria or docstring, first line), average, min,
    max, formatted threshold, direction, kind, result, counts,
    and ``vs_base`` (``delta_view`` of the comparison's entry, or None)."""
    compared = (results.get("comparison") or {}).get("metrics") or {}
    rows = []
    for name, info in (results.get("metrics") or {}).items():
        info = info or {}
        rows.append({
            "name": str(name),
            "summary": info.get("summary"),
            "average": info.get("average"),
            "min": info.get("min"),
            "max": info.get("max"),
            "threshold": format_threshold(info.get("threshold")),
            "direction": info.get("direction") or "higher",
            "kind": info.get("kind") or "deterministic",
            "result": metric_result(info),
            "count": info.get("count", 0),
            "failed": info.get("failed", 0),
            "skipped": info.get("skipped", 0),
            "unavailable": info.get("unavailable", 0),
            "errored": info.get("errored", 0),
            "judge_unavailable": int(info.get("judge_unavailable") or 0),
            "judge_verdicts": info.get("judge_verdicts"),
            "not_run": not_run(info),
            "vs_base": delta_view(compared.get(name), unchanged=unchanged),
            "calibration": calibration_label(info),
        })
        calibration = info.get("calibration")
        if isinstance(calibration, Mapping) and calibration.get("gating") is False and calibration.get("threshold"):
            rows[-1]["threshold"] = f"{format_threshold(calibration['threshold'])} (not gating)"
    return rows


def calibration_label(info: Mapping[str, Any]) -> str | None:
    """A judged metric's calibration beside its average: ``κ 0.81 · n 32 · 2026-11-26``, ``not calibrated``,
    ``stale calibration`` or ``κ 0.21 · n 40 · below floor``; None for a metric without one."""
    calibration = info.get("calibration")
    if not isinstance(calibration, Mapping):
        return None
    status = calibration.get("status")
    controls = calibration.get("controls")
    if calibration.get("evidence") == "controls" and isinstance(controls, Mapping):
        kappa = controls.get("kappa")
        text = f"controls κ {format_number(kappa, 2) if kappa is not None else '—'} · n {controls.get('n')}"
        return text + ("" if calibration.get("gating") else f" · {controls.get('status')}")
    if status in ("missing", None):
        return "not calibrated"
    if status == "stale":
        return "stale calibration"
    if status == "depends":
        return "reads an uncalibrated judge"
    kappa, n = calibration.get("kappa"), calibration.get("n")
    text = f"κ {format_number(kappa, 2) if kappa is not None else '—'} · n {n}"
    if calibration.get("created"):
        text += f" · {str(calibration['created'])[:10]}"
    return text + (" · below floor" if status == "below_floor" else "")


def judge_view(results: Mapping[str, Any]) -> dict[str, Any] | None:
    """The judge's standing: gate notes (judged metrics that do not gate, and why), judge health per metric
    ``{name, verdicts, unusable, causes: "placeholder_reasoning 3, parse_failure 1"}`` with the run's total, and
    the pairwise comparison with the base (one line per metric); None when there is none of these."""
    notes = [str(n) for n in (results.get("gate") or {}).get("notes") or []]
    calibrated = ((results.get("calibration") or {}).get("metrics") or {})
    missing = sorted(str(name) for name, entry in calibrated.items()
                     if isinstance(entry, Mapping) and entry.get("status") == "missing" and entry.get("gating") is False
                     and entry.get("evidence", "none") == "none")  # no labels and no controls: nothing more to say
    if len(missing) > 1:  # one line for every metric never calibrated; below-floor and stale ones keep their own
        notes = [note for note in notes if not any(note.startswith(f"{name}: ") for name in missing)]
        notes.insert(0, f"judge not calibrated for {', '.join(missing)} — verdicts shown, not gating "
                        "(`evalgate calibrate`, docs/judges.md)")
    health_rows = []
    for name, info in (results.get("metrics") or {}).items():
        health = info.get("judge_health") if isinstance(info, Mapping) else None
        if not isinstance(health, Mapping):
            continue
        health_rows.append(_health_row(str(name), health))
    total = (results.get("summary") or {}).get("judge_health")
    pairwise = results.get("pairwise") if isinstance(results.get("pairwise"), Mapping) else None
    pair_health = (pairwise or {}).get("health")
    for name, health in ((pair_health or {}).get("metrics") or {}).items() if isinstance(pair_health, Mapping) else ():
        if isinstance(health, Mapping):
            health_rows.append({**_health_row(f"pairwise {name}", health), "what": "replies"})
    pairs = [f"{name} {row.get('wins', 0)} better, {row.get('losses', 0)} worse, {row.get('ties', 0)} tie(s)"
             + (f", {row['unavailable']} unavailable" if row.get("unavailable") else "")
             + f" (sign test p {format_number(row.get('p_worse'), 3)}"
             + (f", adjusted p {_p_value(row['p_adjusted'])} over {row.get('family_size')} tests)"
                if row.get("p_adjusted") is not None else ", not gating)")
             for name, row in ((pairwise or {}).get("metrics") or {}).items() if isinstance(row, Mapping)]
    if not notes and not health_rows and not pairs:
        return None
    pair_total = (pair_health or {}).get("total") if isinstance(pair_health, Mapping) else None
    return {"notes": notes, "health": health_rows, "total": total if isinstance(total, Mapping) else None,
            "pairwise": pairs, "pairwise_cases": (pairwise or {}).get("compared_cases"),
            "pairwise_health": pair_total if isinstance(pair_total, Mapping) else None}


HEALTH_COUNTS = ("verdicts", "replies", "usable", "unusable")


def _health_row(name: str, health: Mapping[str, Any]) -> dict[str, Any]:
    """One judge-health line: ``{name, verdicts, unusable, causes: "fence echo 3, json debris 1", examples}``
    (examples: ``{cause, case, text}`` of unusable replies, untrusted text the renderers escape)."""
    causes = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in health.items()
                       if k not in HEALTH_COUNTS and isinstance(v, int) and not isinstance(v, bool) and v)
    examples = [{"cause": str(e.get("cause") or "").replace("_", " "), "case": str(e.get("case") or ""),
                 "text": str(e.get("text") or "")}
                for e in health.get("examples") or () if isinstance(e, Mapping)][:3]
    return {"name": name, "verdicts": health.get("verdicts", health.get("replies", 0)),
            "unusable": health.get("unusable", 0), "causes": causes, "examples": examples, "what": "verdicts"}


def not_scored_view(results: Mapping[str, Any]) -> dict[str, Any]:
    """What was not scored, unavailable apart from skipped, with counts and first reasons:

    * ``judge``: ``{missing, verdicts, first}`` when the judge left verdicts missing (``summary.judged_*``);
    * ``unavailable``: metrics some case should have scored but could not, ``{name, count (unavailable +
      errored), judge_missing, judge_verdicts, heuristic (judge verdicts missing but scored by the heuristic),
      reason}``;
    * ``skipped``: metrics not run by design on some cases, ``{name, count, reason}``.
    """
    summary = results.get("summary") or {}
    unavailable, skipped = [], []
    for name, info in (results.get("metrics") or {}).items():
        info = info if isinstance(info, Mapping) else {}
        recorded = info.get("first_reason")
        first: Mapping[str, Any] = recorded if isinstance(recorded, Mapping) else {}
        count = int(info.get("unavailable") or 0) + int(info.get("errored") or 0)
        missing = int(info.get("judge_unavailable") or 0)
        if count or missing:
            reason = info.get("judge_unavailable_first") or first.get("unavailable") or first.get("errored") \
                or _first_reason(info)
            unavailable.append({"name": str(name), "count": count, "judge_missing": missing,
                                "judge_verdicts": info.get("judge_verdicts"), "heuristic": max(0, missing - count),
                                "reason": _cut(reason)})
        if info.get("skipped"):
            reason = first.get("skipped") or _first_reason(info)
            skipped.append({"name": str(name), "count": int(info.get("skipped") or 0), "reason": _cut(reason)})
    missing = int(summary.get("judged_unavailable") or 0)
    judge = {"missing": missing, "verdicts": summary.get("judged_verdicts"),
             "first": _cut(summary.get("judged_unavailable_first"))} if missing else None
    return {"judge": judge, "unavailable": unavailable, "skipped": skipped}


REASON_CHARS = 400
"""Longest reason ``not_scored_view`` keeps (a judge's error message can be long)."""


def _cut(text: Any) -> str | None:
    if text is None:
        return None
    text = str(text)
    return text if len(text) <= REASON_CHARS else text[:REASON_CHARS] + "…"


def _first_reason(info: Mapping[str, Any]) -> str | None:
    """The most frequent recorded reason (results written before ``first_reason`` existed)."""
    reasons = info.get("reasons")
    if isinstance(reasons, Mapping) and reasons:
        return str(max(reasons.items(), key=lambda kv: kv[1] if isinstance(kv[1], int) else 0)[0])
    return None


def trend_arrow(delta: float, unchanged: str = "=") -> str:
    """``▲`` for delta > 0, ``▼`` for delta < 0, else ``unchanged``."""
    return "▲" if delta > 0 else "▼" if delta < 0 else unchanged


def delta_view(entry: Any, *, unchanged: str = "=") -> dict[str, Any] | None:
    """A metric's base-vs-head entry (delta = head − base, its confidence interval, significance), or None
    when there is no numeric delta."""
    if not isinstance(entry, Mapping) or not isinstance(entry.get("delta"), int | float):
        return None
    delta = float(entry["delta"])
    return {
        "delta": delta,
        "arrow": trend_arrow(delta, unchanged),
        "base": entry.get("base"),
        "head": entry.get("head"),
        "ci_low": entry.get("ci_low"),
        "ci_high": entry.get("ci_high"),
        "significant": bool(entry.get("significant")),
        "regression": bool(entry.get("regression")),
        "improvement": bool(entry.get("improvement")),
        "n_paired": entry.get("n_paired"),
        "change": str(entry.get("verdict") or
                      ("regression" if entry.get("regression") else "improvement" if entry.get("improvement")
                       else "not significant" if delta else "no change")),
        "ci_method": entry.get("ci_method"),
        "test": entry.get("test"),
        "p_value": entry.get("p_value"),
        "p_adjusted": (entry.get("p_improvement_adjusted") if entry.get("improvement")
                       else entry.get("p_adjusted")),
        "detectable": entry.get("detectable"),
        "tolerance": entry.get("tolerance"),
        "gated": entry.get("gated", True),
    }


QUIET_ORDER = ("no meaningful change", "inconclusive", "not significant", "no change")


def others_line(rows: Sequence[Mapping[str, Any]]) -> str | None:
    """One line on the metric rows without a significant change, grouped by verdict; an inconclusive one
    names the change its n could detect. None when every row is significant."""
    groups: dict[str, list[str]] = {}
    for row in rows:
        if not row.get("significant"):
            name = str(row["name"])
            if row.get("change") == "inconclusive" and isinstance(row.get("detectable"), int | float):
                name += f" (n={row.get('n_paired')} too small to detect below {score(float(row['detectable']))})"
            groups.setdefault(str(row.get("change") or "not significant"), []).append(name)
    parts = [f"{verdict}: {', '.join(groups[verdict])}" for verdict in QUIET_ORDER if groups.get(verdict)]
    parts += [f"{verdict}: {', '.join(names)}" for verdict, names in groups.items() if verdict not in QUIET_ORDER]
    return "; ".join(parts) or None


def comparison_view(comparison: Any, link: Link = no_link, *, unchanged: str = "=") -> dict[str, Any] | None:
    """The ``comparison`` block: baseline, summary, pass-rate test, per-metric deltas, regressed cases (most
    important first) and fixed cases (as flips: case refs + base/head status), new/removed counts."""
    if not isinstance(comparison, Mapping):
        return None
    cases = comparison.get("cases") or {}
    baseline = comparison.get("baseline") or {}
    regressions = sorted((e for e in cases.get("regressions") or [] if isinstance(e, Mapping)),
                         key=lambda e: (not (ref := entry_ref(e))["critical"], entry_risk_rank(ref["risk_level"])))
    metrics = [
        {"name": str(name), **view}
        for name, entry in (comparison.get("metrics") or {}).items()
        if (view := delta_view(entry, unchanged=unchanged)) is not None
    ]
    critical = comparison.get("critical")
    raw_family = comparison.get("family")
    family: Mapping[str, Any] = raw_family if isinstance(raw_family, Mapping) else {}
    return {
        "baseline_source": baseline.get("source") if isinstance(baseline, Mapping) else None,
        "summary": comparison.get("summary"),
        "regression": bool(comparison.get("regression")),
        "significance_level": comparison.get("significance_level"),
        "confidence": confidence_label(comparison.get("significance_level")),
        "pass_rate": comparison.get("pass_rate") if isinstance(comparison.get("pass_rate"), Mapping) else None,
        "metrics": metrics,
        "significant_metrics": [m for m in metrics if m["significant"]],
        "others": others_line(metrics),
        "family": {"procedure": family.get("procedure"), "size": family.get("size"), "alpha": family.get("alpha")},
        "critical": ({"note": critical.get("note"), "test": critical.get("test"), "p_value": critical.get("p_value"),
                      "p_adjusted": critical.get("p_adjusted"), "regression": bool(critical.get("regression")),
                      "repeats": critical.get("repeats"),
                      "flaky_on_base": [flip_view(e, link) for e in critical.get("flaky_on_base") or []
                                        if isinstance(e, Mapping)]}
                     if isinstance(critical, Mapping) else None),
        "regressions": [flip_view(e, link) for e in regressions],
        "verdict": str(comparison.get("verdict") or ("regression" if comparison.get("regression") else "")) or None,
        "inconclusive": inconclusive_view(comparison.get("inconclusive")),
        "fixes": [flip_view(e, link) for e in cases.get("fixes") or [] if isinstance(e, Mapping)],
        "new": len(cases.get("new") or []),
        "removed": len(cases.get("removed") or []),
    }


INCONCLUSIVE_LISTED = 20


def inconclusive_view(entries: Any) -> list[dict[str, Any]]:
    """The comparison's inconclusive members: name, why, and what would resolve it (raw text: templates escape)."""
    if not isinstance(entries, list):
        return []
    return [{"name": str(e.get("name") or ""), "why": str(e.get("why") or ""),
             "resolve": [str(r) for r in e.get("resolve") or []]}
            for e in entries[:INCONCLUSIVE_LISTED] if isinstance(e, Mapping)]


ADAPTIVE_LISTED = 20
"""Re-tried cases listed in reports (most trials first; the rest counted)."""


def adaptive_view(results: Mapping[str, Any]) -> dict[str, Any] | None:
    """``repeat: adaptive``: rounds, re-trials, budget, the comparison's looks and decision, and the re-tried
    cases with their trials (critical ones with their SPRT decision), most trials first."""
    block = results.get("adaptive")
    if not isinstance(block, Mapping):
        return None
    raw_trials, raw_critical = block.get("trials"), block.get("critical")
    trials: Mapping[str, Any] = raw_trials if isinstance(raw_trials, Mapping) else {}
    critical: Mapping[str, Any] = raw_critical if isinstance(raw_critical, Mapping) else {}
    rows = []
    for case_id, count in sorted(trials.items(), key=lambda item: (-int(item[1] or 0), str(item[0]))):
        entry = critical.get(case_id) if isinstance(critical.get(case_id), Mapping) else None
        rows.append({"id": str(case_id), "trials": int(count or 0),
                     "passes": entry.get("passes") if entry else None,
                     "decision": (entry.get("status") or entry.get("decision")) if entry else "re-tried"})
    looks = [lk for lk in block.get("looks") or [] if isinstance(lk, Mapping)]
    return {"rounds": block.get("rounds"), "retrials": block.get("retrials"), "budget": block.get("budget"),
            "budget_spent": bool(block.get("budget_spent")), "decision": block.get("decision"), "looks": looks,
            "cases": rows[:ADAPTIVE_LISTED], "omitted": max(0, len(rows) - ADAPTIVE_LISTED),
            "known_flaky": [str(i) for i in block.get("known_flaky_critical") or []][:ADAPTIVE_LISTED]}


def confidence_label(alpha: Any) -> str:
    """The confidence level of intervals at significance level ``alpha``: ``(1 − α)·100`` as ``"95%"``."""
    level = 0.05 if not is_number(alpha) else float(alpha)
    return f"{(1 - level) * 100:g}%"


def flip_view(entry: Mapping[str, Any], link: Link = no_link) -> dict[str, Any]:
    """A case whose verdict changed against the baseline: its ref plus ``base_status`` and ``head_status``."""
    return {**entry_ref(entry, link), "base_status": entry.get("base_status"), "head_status": entry.get("head_status")}


GATE_CHANGES_LISTED = 10
"""Loosenings listed in reports (the rest counted)."""
GATE_CHANGE_CHARS = 300
"""Longest loosening line shown (it quotes metric names and case ids from the pull request's files)."""


def gate_changes_view(results: Mapping[str, Any]) -> dict[str, Any] | None:
    """What the pull request loosened against its base run (``gate.loosened``, ``verdict.policy``):
    ``{items[] (one line each, truncated), omitted, mode, approved_by, note, dataset}`` (``dataset``: the cases
    added, edited and removed against the base run, ``gate.dataset_changes``); None when nothing was loosened
    and there is nothing to say."""
    gate = results.get("gate")
    if not isinstance(gate, Mapping):
        return None
    raw = gate.get("loosened")
    loosened: list[Any] = raw if isinstance(raw, list) else []
    note = str(gate.get("policy_note") or "").strip()
    changes = gate.get("dataset_changes")
    dataset = str(changes.get("text") or "").strip() if isinstance(changes, Mapping) else ""
    if not loosened and not note and not dataset:
        return None
    items = [truncate(str(item.get("text") or ""), GATE_CHANGE_CHARS) for item in loosened[:GATE_CHANGES_LISTED]
             if isinstance(item, Mapping)]
    return {"items": items, "omitted": max(0, len(loosened) - len(items)), "mode": str(gate.get("gate_changes") or ""),
            "approved_by": gate.get("approved_by"), "note": truncate(note, GATE_CHANGE_CHARS) if note else None,
            "dataset": truncate(dataset, GATE_CHANGE_CHARS * 2) if dataset else None}


def baseline_note(results: Mapping[str, Any]) -> dict[str, str] | None:
    """Why there is no comparison although a baseline was asked for: ``{"title", "reason"}``, else None."""
    baseline = results.get("baseline")
    if not isinstance(baseline, Mapping) or isinstance(results.get("comparison"), Mapping):
        return None
    warning = str(baseline.get("warning") or "").strip()
    if baseline.get("found"):
        reason = warning.removeprefix("no comparison:").strip()
        return {"title": "No comparison", "reason": reason or "the comparison with the baseline failed"}
    return {"title": "No baseline", "reason": warning.removeprefix("no baseline:").strip() or "none found"}


def group_row(name: Any, group: Mapping[str, Any]) -> dict[str, Any]:
    """One breakdown group: counts, pass rate and its metric averages as sorted ``(name, value)`` pairs."""
    return {
        "name": str(name),
        "total": group.get("total", 0),
        "passed": group.get("passed", 0),
        "failed": group.get("failed", 0),
        "errored": group.get("errored", 0),
        "pass_rate": group.get("pass_rate"),
        "averages": sorted((group.get("average_scores") or {}).items()),
    }


def repeats_view(results: Mapping[str, Any]) -> dict[str, Any] | None:
    """``summary.repeats``: repeats per case, cases, flaky and incomplete cases (0 when absent), the rule."""
    repeats = (results.get("summary") or {}).get("repeats")
    if not isinstance(repeats, Mapping):
        return None
    counts = {key: repeats.get(key) or 0 for key in ("repeat", "cases", "flaky_cases", "incomplete_cases")}
    return counts | {"rule": str(repeats.get("rule") or "majority")}


def flaky_view(entry: Mapping[str, Any], link: Link = no_link) -> dict[str, Any]:
    """One listed flaky case (results.json ``flaky``): passes / repeats and each repeat's status in order."""
    return {
        **entry_ref(entry, link),
        "passes": entry.get("passes", 0),
        "repeats": entry.get("repeats", 0),
        "pass_fraction": entry.get("pass_fraction"),
        "outcomes": [str(o) for o in entry.get("outcomes") or []],
    }


def flaky_from_records(cases: Sequence[CaseResult]) -> list[dict[str, Any]]:
    """Cases recorded more than once whose repeats disagree on pass/fail, from the case records themselves;
    pass fraction = passing repeats / repeats; outcomes ``pass``/``fail`` in repeat order. Most important
    first, then by pass fraction and id."""
    by_id: dict[str, list[CaseResult]] = {}
    for case in cases:
        by_id.setdefault(case.id, []).append(case)
    flaky = []
    for case_id, runs in by_id.items():
        outcomes = [r.passed for r in sorted(runs, key=lambda r: r.repeat)]
        if len(outcomes) > 1 and 0 < sum(outcomes) < len(outcomes):
            flaky.append({
                **case_ref(runs[0]),
                "id": case_id,
                "repeats": len(outcomes),
                "passes": sum(outcomes),
                "pass_fraction": sum(outcomes) / len(outcomes),
                "outcomes": ["pass" if ok else "fail" for ok in outcomes],
            })
    return sorted(flaky, key=lambda f: (not f["critical"], entry_risk_rank(f["risk_level"]), f["pass_fraction"],
                                        f["id"]))


def intervals_view(results: Mapping[str, Any]) -> dict[str, Any] | None:
    """Suite averages with their bootstrap confidence interval (``summary.confidence_intervals``):
    ``{level ("95%"), rows[{name, rate, mean, low, high, cases, within_case_stdev}]}``, pass rate first."""
    intervals = (results.get("summary") or {}).get("confidence_intervals")
    if not isinstance(intervals, Mapping):
        return None
    rows = [_interval_row("pass rate", intervals.get("pass_rate"), rate=True)]
    rows += [_interval_row(str(name), row, rate=False) for name, row in (intervals.get("metrics") or {}).items()]
    kept = [row for row in rows if row is not None]
    if not kept:
        return None
    confidence = intervals.get("confidence")
    level = confidence * 100 if isinstance(confidence, int | float) and 0 < confidence < 1 else 95
    return {"level": f"{level:g}%", "rows": kept}


def _interval_row(name: str, row: Any, *, rate: bool) -> dict[str, Any] | None:
    if not isinstance(row, Mapping):
        return None
    return {"name": name, "rate": rate, "mean": row.get("mean"), "low": row.get("low"), "high": row.get("high"),
            "cases": row.get("cases", 0), "within_case_stdev": row.get("within_case_stdev"),
            "method": row.get("method")}


def judge_stability_view(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per judged metric sampled K > 1 times: spread of the samples (``summary.judge_stability``)."""
    stability = (results.get("summary") or {}).get("judge_stability") or {}
    return [
        {"name": str(name), "samples": row.get("samples", 0), "answers": row.get("answers", 0),
         "mean_stdev": row.get("mean_stdev"), "max_stdev": row.get("max_stdev"),
         "straddling": row.get("straddling_threshold", 0)}
        for name, row in stability.items()
        if isinstance(row, Mapping)
    ]


def run_view(results: Mapping[str, Any]) -> dict[str, Any]:
    """Run id, timestamp, judge (``provider (model)``), target kind and evalgate version."""
    metadata = results.get("metadata") or {}
    judge = metadata.get("judge") or {}
    judge_text = str(judge.get("provider") or "none") + (f" ({judge['model']})" if judge.get("model") else "")
    return {
        "run_id": results.get("run_id"),
        "timestamp": results.get("timestamp"),
        "judge": judge_text,
        "target": (metadata.get("target") or {}).get("kind"),
        "version": (metadata.get("versions") or {}).get("evalgate"),
    }


# ---------------------------------------------------------------------------------------------
# formatting (the renderers register these as template filters)


def compact_json(value: Any) -> str:
    """One-line JSON with ``", "`` / ``": "`` separators; non-JSON values via ``str``."""
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str, sort_keys=False)


def format_threshold(threshold: Any) -> str | None:
    """``{"min": 0.9}`` → ``≥ 0.9``; ``{"max": 0.2}`` → ``≤ 0.2``; ``{"gt": 0.8}`` → ``> 0.8``;
    ``{"lt": 1}`` → ``< 1``; a bare number counts as min."""
    if threshold is None:
        return None
    if isinstance(threshold, Threshold):
        return f"{THRESHOLD_SYMBOLS.get(threshold.op, '?')} {threshold.value:g}"
    if isinstance(threshold, int | float):
        return f"≥ {threshold:g}"
    if isinstance(threshold, Mapping):
        for op, symbol in THRESHOLD_SYMBOLS.items():
            if op in threshold:
                return f"{symbol} {float(threshold[op]):g}"
        if "op" in threshold and "value" in threshold:
            return f"{THRESHOLD_SYMBOLS.get(str(threshold['op']), '?')} {float(threshold['value']):g}"
    return str(threshold)


def _p_value(value: float) -> str:
    """An adjusted p-value as the comparison prints it: two decimals from 0.1 up, else two significant digits."""
    return f"{value:.2f}" if value >= 0.1 else f"{value:.2g}"


def format_number(value: Any, digits: int = 3) -> str:
    """The report number format (:func:`evalgate.text.numbers.score`): ``digits`` decimals below 1000, a
    thousands-separated whole number above; ``—`` for None or non-numbers."""
    return score(value, digits)


def format_count(value: Any) -> str:
    """A whole count with thousands separators (``12,345``), the report's one format for counts; ``—`` for
    None or non-numbers."""
    if not is_number(value):
        return "—"
    return f"{round(value):,}"


def format_p(value: Any) -> str:
    """A p-value as the decision used it: two significant digits below 0.1 (``0.0015``, ``0.047``: never ``0.05``
    beside α = 0.05 for a p just under it), else two decimals; ``—`` for None."""
    if not is_number(value):
        return "—"
    p = float(value)
    return f"{p:.2f}" if p >= 0.1 else f"{p:.2g}"


def format_signed(value: Any, digits: int = 3) -> str:
    """A delta with explicit sign (``+0.012`` / ``−0.030``, typographic minus)."""
    if not is_number(value):
        return "—"
    text = f"{abs(value):.{digits}f}"
    return ("−" if value < 0 and float(text) != 0 else "+") + text


def format_percent(value: Any) -> str:
    """A fraction in [0, 1] as ``80.0%``."""
    if not is_number(value):
        return "—"
    return f"{value * 100:.1f}%"


def format_usd(value: Any) -> str:
    """A cost in US dollars: ``$0.0123``."""
    if not is_number(value):
        return "—"
    return f"${value:.4f}"


def is_number(value: Any) -> bool:
    """True for an int or float that is not a bool."""
    return isinstance(value, int | float) and not isinstance(value, bool)


# ── why a case failed, in one line per metric ────────────────────────────────────────────────────

WHY_MAX_CHARS = 240
WHY_LIST = 5
WHY_STATUSES = ("failed", "errored", "unavailable")


def _names(values: Any, limit: int = WHY_LIST) -> str:
    items = [str(v) for v in values or [] if str(v)]
    shown = ", ".join(items[:limit])
    return shown + (f" (+{len(items) - limit} more)" if len(items) > limit else "")


def why_detail(name: str, details: Any) -> str | None:
    """What a metric's details say went wrong, in words: the rule that failed, the keywords missing,
    the mentions missed or invented, the judge's reasoning … (None when the details say nothing)."""
    if not isinstance(details, Mapping):
        return None
    parts: list[str] = []
    checks = details.get("checks")
    if isinstance(checks, list):
        failed = [c for c in checks if isinstance(c, Mapping) and c.get("passed") is False]
        parts += [f"rule {c.get('label') or c.get('type')}: {c.get('reason') or 'failed'}" for c in failed[:3]]
        if len(failed) > 3:
            parts.append(f"+{len(failed) - 3} more rules")
    if details.get("missing") and name in ("keyword_coverage", "data_source_match"):
        noun = "keywords" if name == "keyword_coverage" else "data sources"
        parts.append(f"missing {noun}: {_names(details['missing'])}")
    if details.get("false_negatives"):
        parts.append(f"missed mentions: {_names(details['false_negatives'])}")
    if details.get("false_positives"):
        parts.append(f"unexpected mentions: {_names(details['false_positives'])}")
    if details.get("false_is_mine"):
        parts.append(f"wrongly flagged as ours: {_names(details['false_is_mine'])}")
    if name == "specialist_match" and "expected" in details:
        parts.append(f"routed to {details.get('actual') or 'nobody'}, expected {details.get('expected')}")
    if name == "rank_accuracy" and details.get("expected") is not None:
        parts.append(f"order {_names(details.get('actual'))}, expected {_names(details.get('expected'))}")
    if name in ("hit_rate", "mrr") and "returned" in details and not details.get("matched"):
        parts.append(f"no expected source among the {len(details.get('returned') or [])} returned")
    elif name == "mrr" and details.get("first_rank"):
        parts.append(f"first expected source at rank {details['first_rank']}")
    if details.get("method") == "heuristic" and details.get("overlap_missing"):
        parts.append(f"heuristic score (no judge); the answer lacks: {_names(details['overlap_missing'])}")
    for side in ("agents", "tools"):
        block = details.get(side)
        if isinstance(block, Mapping):
            if block.get("missing"):
                parts.append(f"{side} not called: {_names(block['missing'])}")
            if block.get("unexpected"):
                parts.append(f"{side} that should not be called: {_names(block['unexpected'])}")
    text = details.get("reasoning") or (details.get("reason") if not parts else None)
    if text:
        parts.append(" ".join(str(text).split()))
    return "; ".join(parts) or None


def why_line(name: str, value: Any, threshold: str | None, status: Any, details: Any = None,
             reason: Any = None) -> str:
    """``metric value (needs ≥ x): why`` — one line (at most ``WHY_MAX_CHARS`` characters)."""
    state = str(getattr(status, "value", status) or "")
    head = name if state in ("failed", "passed") else f"{name} {state}"
    if state in ("failed", "passed") and is_number(value):
        head += f" {format_number(value)}" + (f" (needs {threshold})" if threshold else "")
    generic = reason is not None and "misses threshold" in str(reason)
    detail = why_detail(name, details) or (str(reason) if reason and not generic else None)
    line = f"{head}: {detail}" if detail else head
    line = " ".join(line.split())
    return line if len(line) <= WHY_MAX_CHARS else line[: WHY_MAX_CHARS - 1] + "…"


def case_why(case: CaseResult, statuses: Collection[str] = WHY_STATUSES, *, error: bool = True) -> list[str]:
    """One ``why_line`` per problem metric of a case record (``metrics_why``); a conversation's failed turn, in
    words, instead of the turns' share; the error first when it errored (``error``: the caller shows it)."""
    lines = metrics_why(case.metrics, statuses)
    turn_line = failed_turn_line(case)
    if turn_line is not None:  # a conversation: the failed turn, in words, instead of the turns' share
        lines = [turn_line, *(line for line in lines if not line.startswith("conversation_turns"))]
    if error and case.error:
        lines.insert(0, "error: " + " ".join(str(case.error).split())[: WHY_MAX_CHARS])
    return lines


def metrics_why(metrics: Mapping[str, MetricResult], statuses: Collection[str] = WHY_STATUSES) -> list[str]:
    """One ``why_line`` per metric whose status is one of ``statuses``, failed metrics first (rules and safety
    before quality scores, latency last: ``verdict.gate.reason_rank``)."""
    rows = []
    for name, m in metrics.items():
        status = STATUS_TEXT[m.status]
        if status in statuses:
            rows.append(((status != "failed", reason_rank(str(name))),
                         why_line(str(name), m.value, format_threshold(m.threshold) or None, status, m.details,
                                  m.reason)))
    return [line for _, line in sorted(rows, key=lambda r: r[0])]


# ── conversations (docs/conversations.md) ───────────────────────────────────────────────────────

TURN_QUOTE_CHARS = 60


def failed_turn_line(case: CaseResult) -> str | None:
    """``turn N “message…”: why`` for a conversation whose turn N failed or errored (None otherwise)."""
    conversation = case.conversation
    if not isinstance(conversation, Mapping) or not conversation.get("failed_turn"):
        return None
    number = conversation["failed_turn"]
    turn = next((t for t in conversation.get("turns") or [] if isinstance(t, Mapping) and t.get("turn") == number), None)
    if turn is None:
        return f"turn {number} failed"
    said = " ".join(str(turn.get("input") or "").split())
    quote = said if len(said) <= TURN_QUOTE_CHARS else said[: TURN_QUOTE_CHARS - 1] + "…"
    if turn.get("error"):
        why = "error: " + " ".join(str(turn["error"]).split())
    else:
        why = "; ".join(metrics_why(read_metrics(turn.get("metrics")))[:2]) or "; ".join(turn.get("reasons") or [])
    line = f"turn {number} “{quote}” {turn.get('status') or 'failed'}" + (f": {why}" if why else "")
    stopped = conversation.get("stopped")
    planned = conversation.get("planned_turns")
    if stopped and planned:
        line += f" (conversation stopped; {int(planned) - len(conversation.get('turns') or [])} turn(s) not sent)"
    line = " ".join(line.split())
    return line if len(line) <= WHY_MAX_CHARS else line[: WHY_MAX_CHARS - 1] + "…"


def transcript_view(case: CaseResult, limit: int | None = None) -> list[dict[str, Any]] | None:
    """A conversation's turns for the reports: ``[{turn, user, assistant, status, why, replayed}]`` with each
    text cut to ``limit`` characters (None: a single-turn case)."""
    conversation = case.conversation
    if not isinstance(conversation, Mapping):
        return None

    def cut(text: Any) -> str | None:
        if text is None:
            return None
        text = str(text)
        return text if limit is None or len(text) <= limit else text[:limit] + f"… ({len(text):,} characters)"

    rows = []
    for turn in conversation.get("turns") or []:
        if not isinstance(turn, Mapping):
            continue
        status = str(turn.get("status") or "")
        why = None
        if status != "passed":
            why = ("error: " + str(turn["error"])) if turn.get("error") else \
                "; ".join(metrics_why(read_metrics(turn.get("metrics")))[:3]) or None
        rows.append({"turn": turn.get("turn"), "user": cut(turn.get("input")), "assistant": cut(turn.get("output")),
                     "status": status, "why": cut(why), "replayed": bool(turn.get("replayed"))})
    return rows


def transcript_text(rows: Sequence[Mapping[str, Any]]) -> str:
    """The transcript as plain text: ``[turn N · status] user: …`` / ``assistant: …`` lines."""
    lines: list[str] = []
    for row in rows:
        mark = f"[turn {row['turn']} · {row['status']}{' · replayed' if row.get('replayed') else ''}]"
        lines.append(f"{mark} user: {row['user']}")
        if row.get("assistant") is not None:
            lines.append(f"{' ' * len(mark)} assistant: {row['assistant']}")
        if row.get("why"):
            lines.append(f"{' ' * len(mark)} ✗ {row['why']}")
    return "\n".join(lines)


# ── the sections of a report a reviewer reads first ───────────────────────────────────────────────

CRITICAL_NAMED = 5


def reasons_view(results: Mapping[str, Any]) -> dict[str, Any]:
    """The verdict's reasons, each once and compact: ``metrics`` that miss their threshold
    ``[{name, average, threshold}]``, ``critical`` ``{count, ids (first few)}`` and ``other`` reasons
    (errored cases, pass rate, regressions, strict mode …) as recorded."""
    gate = results.get("gate") or {}
    reasons = [str(r) for r in gate.get("reasons") or []]
    missed = [{"name": str(name), "average": info.get("average"), "threshold": format_threshold(info.get("threshold"))}
              for name, info in (results.get("metrics") or {}).items()
              if isinstance(info, Mapping) and info.get("threshold") is not None and info.get("passed") is False
              and info.get("average") is not None]
    prefixes = tuple(f"{m['name']} average " for m in missed)
    critical = [r for r in reasons if r.startswith("critical case ")]
    failures = [c for c in results.get("critical_failures") or [] if isinstance(c, Mapping)]
    ids = [str(c.get("id")) for c in failures] or [r.split()[2] for r in critical]
    other = [r for r in reasons if not r.startswith(prefixes) and not r.startswith("critical case ")]
    count = max(len(critical), len(ids))
    return {"metrics": missed, "critical": {"count": count, "ids": ids[:CRITICAL_NAMED]} if count else None,
            "other": other}


def failed_case_view(case: CaseResult, link: Link = no_link) -> dict[str, Any]:
    """A failed case for the list: its reference and the one-line reasons (``case_why``)."""
    return {**case_ref(case, link), "why": case_why(case)}


def metric_groups(results: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The metric rows that ran (a value in at least one case), grouped by the suite they ran in:
    ``[{suite, rows}]`` in suite order; a metric of several suites goes to a group naming them."""
    suites = (results.get("breakdowns") or {}).get("suite") or {}
    ran_in = {str(name): [str(s) for s, g in suites.items()
                          if isinstance(g, Mapping) and name in (g.get("average_scores") or {})]
              for name in (results.get("metrics") or {})}
    order = [str(s) for s in suites]
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        if row["average"] is None:  # did not run: skipped (one line per reason) or unavailable (listed above)
            continue
        where = ran_in.get(row["name"]) or []
        label = where[0] if len(where) == 1 else ("several suites: " + ", ".join(where) if where else "")
        groups.setdefault(label, []).append(row)
    ordered = sorted(groups, key=lambda g: (order.index(g) if g in order else len(order), g))
    return [{"suite": label, "rows": groups[label]} for label in ordered]


def skipped_metrics(results: Mapping[str, Any]) -> list[str]:
    """One line per reason for the metrics that were skipped everywhere, e.g. ``16 judged metrics skipped:
    no judge configured (judge_provider none)``; up to 5 metrics are named: ``1 judged metric skipped
    (math): …``."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for name, info in (results.get("metrics") or {}).items():
        if not isinstance(info, Mapping) or info.get("average") is not None or not info.get("skipped"):
            continue  # unavailable metrics (a problem, not a choice) are listed by not_scored_view
        reasons = info.get("reasons") or {}
        reason = max(reasons, key=lambda r: reasons[r]) if isinstance(reasons, Mapping) and reasons else \
            "no case needed it"
        grouped.setdefault((str(info.get("kind") or "deterministic"), str(reason)), []).append(str(name))
    lines = []
    for (kind, reason), names in sorted(grouped.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        n = len(names)
        named = f" ({', '.join(names)})" if n <= 5 else ""
        lines.append(f"{n} {kind} metric{'' if n == 1 else 's'} skipped{named}: {reason}")
    return lines
