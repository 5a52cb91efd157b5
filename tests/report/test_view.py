"""The view models shared by the Markdown and HTML reports (evalgate/report/view.py): pure functions over
a results document, checked on constructed documents."""

from __future__ import annotations

from typing import Any

import pytest

from evalgate.model import CaseResult
from evalgate.report import view
from evalgate.store.reader import read_case


def raw(case_id: str, *, status: str | None = "failed", risk: str | None = "medium", index: int = 0,
        repeat: int = 0, **extra: Any) -> dict[str, Any]:
    return {"id": case_id, "status": status, "passed": status == "passed", "risk_level": risk, "index": index,
            "repeat": repeat, "source": f"d.yaml:{index + 1}", "reasons": [f"reason {case_id}"], **extra}


def record(case_id: str, **kwargs: Any) -> CaseResult:
    """A hand-written record as the readers take it (``read_case``)."""
    case = read_case(raw(case_id, **kwargs))
    assert case is not None
    return case


CASES = [
    record("low-0", risk="low", index=0),
    record("ok-1", status="passed", index=1),
    record("crit-2", risk="critical", index=2),
    record("flag-3", risk="high", index=3, critical=True),
    record("err-4", status="errored", risk="high", index=4),
    record("unknown-5", risk="weird", index=5),
    record("skip-6", status="skipped", index=6),
    record("crit-2", risk="critical", index=2, repeat=1, status="errored"),
]


def test_importance_orders_critical_then_risk_then_dataset_order() -> None:
    ordered = [(c.id, c.repeat) for c in view.failing_by_importance(CASES)]
    assert ordered == [("crit-2", 0), ("crit-2", 1), ("flag-3", 0), ("err-4", 0), ("low-0", 0), ("unknown-5", 0)]


def test_failing_first_keeps_every_case_and_puts_the_rest_in_dataset_order() -> None:
    ordered = [c.id for c in view.failing_first(list(reversed(CASES)))]
    assert ordered == ["crit-2", "crit-2", "flag-3", "err-4", "low-0", "unknown-5", "ok-1", "skip-6"]
    repeats = [c.repeat for c in view.failing_first(list(reversed(CASES)))][:2]
    assert repeats == [0, 1]


def test_critical_refs_follow_the_given_order_and_carry_links() -> None:
    refs = view.critical_refs(CASES, lambda source: f"https://x/{source}")
    assert [(r["id"], r["status"], r["link"]) for r in refs] == [
        ("crit-2", "failed", "https://x/d.yaml:3"), ("flag-3", "failed", "https://x/d.yaml:4"),
        ("crit-2", "errored", "https://x/d.yaml:3")]
    unstated = raw("a", status=None)
    assert view.case_ref(record("a", status=None))["status"] == "failed"  # its passed: false (read_case)
    del unstated["passed"]
    assert read_case(unstated) is None  # neither a status nor passed: not a case record
    assert view.case_ref(record("a"))["link"] is None


@pytest.mark.parametrize(("delta", "unchanged", "arrow"), [(0.1, "=", "▲"), (-0.1, "=", "▼"), (0.0, "＝", "＝"),
                                                           (0, "", "")])
def test_trend_arrow(delta: float, unchanged: str, arrow: str) -> None:
    assert view.trend_arrow(delta, unchanged) == arrow


def test_metric_rows_with_thresholds_results_and_deltas() -> None:
    results = {
        "metrics": {
            "f1": {"average": 0.8, "threshold": {"min": 0.85}, "passed": False, "count": 4, "skipped": 1,
                   "unavailable": 2, "errored": 3, "min": 0.5, "max": 1.0, "kind": "judged"},
            "tokens": {"average": 120.0, "threshold": None, "direction": "lower"},
            "judge": {"average": None, "threshold": {"max": 0.2}},
        },
        "comparison": {"metrics": {"f1": {"base": 0.9, "head": 0.8, "delta": -0.1, "significant": True,
                                          "regression": True},
                                   "tokens": {"delta": None}}},
    }
    rows = {r["name"]: r for r in view.metric_rows(results, unchanged="＝")}
    f1 = rows["f1"]
    assert (f1["threshold"], f1["result"], f1["not_run"], f1["kind"], f1["direction"]) == \
        ("≥ 0.85", "failed", 6, "judged", "higher")
    assert f1["vs_base"] is not None
    assert (f1["vs_base"]["arrow"], f1["vs_base"]["delta"], f1["vs_base"]["regression"]) == ("▼", -0.1, True)
    assert (rows["tokens"]["result"], rows["tokens"]["vs_base"]) == ("none", None)
    assert (rows["judge"]["result"], rows["judge"]["threshold"]) == ("skipped", "≤ 0.2")


def test_comparison_view_skips_malformed_entries_and_sorts_regressions() -> None:
    comparison = {
        "baseline": "not a mapping",
        "pass_rate": [0.5],
        "metrics": {"a": {"delta": 0.0}, "b": {"delta": "x"}},
        "cases": {"regressions": [{"id": "low", "risk_level": "low", "base_status": "passed", "head_status": "failed"},
                                  7, {"id": "crit", "risk_level": "critical"}],
                  "fixes": [None, {"id": "fixed"}], "new": ["n"], "removed": []},
    }
    shown = view.comparison_view(comparison, unchanged="＝")
    assert shown is not None
    assert shown["baseline_source"] is None and shown["pass_rate"] is None
    assert [(m["name"], m["arrow"]) for m in shown["metrics"]] == [("a", "＝")]
    assert [r["id"] for r in shown["regressions"]] == ["crit", "low"]
    assert shown["regressions"][1]["head_status"] == "failed"
    assert [r["id"] for r in shown["fixes"]] == ["fixed"]
    assert (shown["new"], shown["removed"]) == (1, 0)
    assert view.comparison_view(None) is None


def test_flaky_from_records_needs_disagreeing_repeats() -> None:
    cases = [record("f", status="failed", repeat=2), record("f", status="passed", repeat=0),
             record("f", status="failed", repeat=1), record("same", status="failed"),
             record("same", status="failed", repeat=1), record("once", status="passed")]
    (flaky,) = view.flaky_from_records(cases)
    assert (flaky["id"], flaky["passes"], flaky["repeats"], flaky["outcomes"]) == ("f", 1, 3, ["pass", "fail", "fail"])
    assert flaky["pass_fraction"] == pytest.approx(1 / 3)


def test_case_metrics_filters_by_status_and_formats_thresholds() -> None:
    case = record("m", metrics={"a": {"value": 0.2, "threshold": {"min": 0.5}, "status": "failed", "reason": "low",
                                      "details": {"reasoning": "the answer\n  is vague"}},
                                "b": {"value": 1.0, "threshold": 0.5, "status": "passed"},
                                "c": "not a metric"})
    assert view.case_metrics(case, ("failed",)) == [
        {"name": "a", "value": 0.2, "threshold": "≥ 0.5", "status": "failed", "reason": "low",
         "explanation": "the answer is vague"}]
    assert [m["name"] for m in view.case_metrics(case)] == ["a", "b"]


def test_notes_repeats_intervals_and_run() -> None:
    assert view.baseline_note({"baseline": {"found": False, "warning": "no baseline: none on main"}}) == \
        {"title": "No baseline", "reason": "none on main"}
    assert view.baseline_note({"baseline": {"found": True}}) == \
        {"title": "No comparison", "reason": "the comparison with the baseline failed"}
    assert view.baseline_note({"baseline": {"found": True}, "comparison": {}}) is None
    assert view.repeats_view({"summary": {"repeats": {"repeat": 3}}}) == \
        {"repeat": 3, "cases": 0, "flaky_cases": 0, "incomplete_cases": 0, "rule": "majority"}
    intervals = view.intervals_view({"summary": {"confidence_intervals": {
        "confidence": 0.9, "pass_rate": None, "metrics": {"m": {"mean": 0.5, "low": 0.4, "high": 0.6, "cases": 3}}}}})
    assert intervals == {"level": "90%", "rows": [{"name": "m", "rate": False, "mean": 0.5, "low": 0.4, "high": 0.6,
                                                    "cases": 3, "within_case_stdev": None, "method": None}]}
    run = view.run_view({"run_id": "r", "metadata": {"judge": {"provider": "openai", "model": "gpt-4o-mini"},
                                                      "target": {"kind": "http"}}})
    assert (run["judge"], run["target"], run["version"]) == ("openai (gpt-4o-mini)", "http", None)


@pytest.mark.parametrize(("fn", "value", "text"), [
    (view.format_number, 0.12345, "0.123"), (view.format_number, True, "—"), (view.format_number, None, "—"),
    (view.format_signed, -0.0301, "−0.030"), (view.format_signed, -0.0001, "+0.000"), (view.format_signed, 0.5, "+0.500"),
    (view.format_percent, 0.8, "80.0%"), (view.format_usd, 0.01234, "$0.0123"),
    (view.format_threshold, {"op": "max", "value": 2}, "≤ 2"), (view.format_threshold, 0.9, "≥ 0.9"),
])
def test_formatting(fn: Any, value: Any, text: str) -> None:
    assert fn(value) == text
