"""Tests for evalgate.verdict.compare on constructed baseline/head results documents."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from evalgate.errors import UserError
from evalgate.store.reader import load_results, load_results_sqlite
from evalgate.verdict.compare import compare_runs, comparison_gate_reasons

RESAMPLES = 4000


def record(
    case_id: str,
    values: dict[str, float | None],
    *,
    status: str = "passed",
    risk: str = "medium",
    line: int = 1,
    repeat: int = 0,
    index: int = 0,
) -> dict[str, Any]:
    """One results.json case record; a None value is a skipped metric."""
    metrics = {
        name: {"value": value, "status": "skipped" if value is None else "passed", "threshold": None,
               "passed": None if value is None else True, "reason": None, "details": {}}
        for name, value in values.items()
    }
    return {"id": case_id, "index": index, "risk_level": risk, "source": f"datasets/a.yaml:{line}",
            "status": status, "passed": status == "passed", "metrics": metrics, "repeat": repeat}


def document(records: list[dict[str, Any]], table: dict[str, dict[str, Any]], run_id: str) -> dict[str, Any]:
    return {"schema_version": 1, "run_id": run_id, "timestamp": f"2026-11-22T10:00:0{len(run_id) % 10}Z",
            "metrics": table, "results": records}


F1_GATED = {"mention_f1": {"direction": "higher", "threshold": {"min": 0.8}}}


def f1_runs(diffs: list[float], *, table: dict[str, dict[str, Any]] | None = None) -> tuple[dict, dict]:
    """30-ish cases whose mention_f1 moves by diffs[i] from base to head."""
    table = F1_GATED if table is None else table
    base_values = [0.55 + 0.4 * ((7 * i) % 11) / 10 for i in range(len(diffs))]
    base = [record(f"c{i}", {"mention_f1": v}, line=i + 1, index=i) for i, v in enumerate(base_values)]
    head = [record(f"c{i}", {"mention_f1": v + d}, line=i + 1, index=i)
            for i, (v, d) in enumerate(zip(base_values, diffs, strict=True))]
    return document(base, table, "base"), document(head, table, "head")


def compare(base: dict, head: dict, **kwargs: Any) -> dict[str, Any]:
    return compare_runs(base, head, resamples=RESAMPLES, **kwargs)


def test_identical_runs_show_no_change() -> None:
    base, _ = f1_runs([0.0] * 30)
    base["results"][3]["status"], base["results"][3]["passed"] = "failed", False
    result = compare(base, json.loads(json.dumps(base)), baseline_source="artifact of run 1 on main")
    f1 = result["metrics"]["mention_f1"]
    assert (f1["delta"], f1["ci_low"], f1["ci_high"]) == (0.0, 0.0, 0.0)
    assert f1["base"] == f1["head"] and f1["n_paired"] == 30
    assert not f1["significant"] and not f1["regression"] and not f1["improvement"] and f1["gated"]
    pr = result["pass_rate"]
    assert {k: pr[k] for k in ("base", "head", "delta", "regressions", "fixes", "n_paired", "p_value",
                               "p_adjusted", "significant", "verdict")} == {
        "base": 29 / 30, "head": 29 / 30, "delta": 0.0, "regressions": 0, "fixes": 0, "n_paired": 30,
        "p_value": 1.0, "p_adjusted": 1.0, "significant": False, "verdict": "no change"}
    assert pr["ci_method"] == "Wilson" and pr["base_ci"] == pytest.approx([0.8333, 0.9941], abs=1e-4)
    assert f1["verdict"] == "no change" and result["family"]["size"] == 2
    assert result["cases"] == {"regressions": [], "fixes": [], "new": [], "removed": []}
    assert result["regression"] is False
    assert result["summary"].startswith("No change against the baseline")
    assert result["baseline"] == {"source": "artifact of run 1 on main", "run_id": "base",
                                  "timestamp": base["timestamp"]}
    assert result["bootstrap"] == {"resamples": RESAMPLES, "seed": 20261122, "method": "BCa bootstrap"}
    assert comparison_gate_reasons(result, fail_on_regression=True) == []
    json.dumps(result)  # plain JSON types only


def test_a_single_critical_flip_is_listed_first_but_is_not_evidence() -> None:
    base, head = f1_runs([0.0] * 30)
    for doc in (base, head):
        doc["results"][20]["risk_level"] = "critical"
    for i in (2, 20):
        head["results"][i]["status"], head["results"][i]["passed"] = "failed", False
    head["results"][9]["status"], head["results"][9]["passed"] = "errored", False
    result = compare(base, head)
    flips = result["cases"]["regressions"]
    assert [f["id"] for f in flips] == ["c20", "c2", "c9"]  # critical first, then by source line
    assert flips[0] == {"id": "c20", "source": "datasets/a.yaml:21", "risk_level": "critical",
                        "critical": True, "base_status": "passed", "head_status": "failed",
                        "base_passes": 1, "base_runs": 1, "head_passes": 0, "head_runs": 1}
    assert flips[2]["head_status"] == "errored"
    assert result["pass_rate"]["regressions"] == 3 and result["pass_rate"]["fixes"] == 0
    assert result["pass_rate"]["p_value"] == pytest.approx(0.125)  # one-sided: C(3,0)/2^3
    assert result["pass_rate"]["delta"] == pytest.approx(-0.1)
    critical = result["critical"]
    assert critical["p_value"] == 0.5 and [e["id"] for e in critical["regressions"]] == ["c20"]
    assert "a single flip of a critical case is not evidence" in critical["note"]
    assert result["regression"] is False  # the head run's own critical gate still fails it
    assert comparison_gate_reasons(result, fail_on_regression=True) == []
    assert result["summary"].startswith(  # weighted Holm: 0.125 / (2/3) = 0.1875
        "3 cases flipped to fail (1 critical) and 0 to pass: pass rate 100.0% → 90.0% (exact McNemar "
        "(one-sided) p=0.12, adjusted p=0.19; not significant at α=0.05)")
    assert "repeat: 3 or more" in result["summary"]


def test_lowering_risk_in_head_does_not_hide_a_critical_flip() -> None:
    base, head = f1_runs([0.0] * 10)
    base["results"][4]["risk_level"] = "critical"
    head["results"][4].update(status="failed", passed=False, risk_level="low")
    result = compare(base, head)
    assert result["cases"]["regressions"][0]["critical"] is True
    assert [e["id"] for e in result["critical"]["regressions"]] == ["c4"]


def test_small_noisy_drop_is_not_significant() -> None:
    diffs = [-0.01 + (0.05 if i % 2 else -0.05) for i in range(30)]  # mean −0.01, sd 0.05
    result = compare(*f1_runs(diffs))
    f1 = result["metrics"]["mention_f1"]
    assert f1["delta"] == pytest.approx(-0.01)
    assert f1["ci_low"] < 0.0 < f1["ci_high"]
    assert not f1["significant"] and not f1["regression"]
    assert result["regression"] is False
    assert f1["verdict"] == "inconclusive" and 0.02 < f1["detectable"] < 0.04
    assert result["summary"] == ("No case changed outcome. metric changes — inconclusive at α=0.05: mention_f1 "
                                 f"fell 0.010 (p={f1['p_value']:.2f}), n=30 too small to detect a change below "
                                 f"{f1['detectable']:.3f}.")
    assert comparison_gate_reasons(result, fail_on_regression=True) == []


def test_large_consistent_drop_is_a_significant_regression() -> None:
    diffs = [-0.1 + (0.02 if i % 2 else -0.02) for i in range(30)]
    base, head = f1_runs(diffs)
    result = compare(base, head)
    f1 = result["metrics"]["mention_f1"]
    assert f1["delta"] == pytest.approx(-0.1)
    assert -0.12 < f1["ci_low"] < f1["ci_high"] < -0.09
    assert f1["significant"] and f1["regression"] and not f1["improvement"] and f1["gated"]
    assert result["regression"] is True
    assert result["summary"].startswith("No case changed outcome. 1 significant regression: mention_f1 fell "
                                        "0.100 (95% BCa bootstrap CI -0.1")
    assert f1["test"] == "paired sign-flip permutation (one-sided, Monte Carlo R=4000)"
    # weighted Holm: the metric carries 1/3 of the weight beside the pass rate (2/3) → p·3
    assert f1["p_value"] == pytest.approx(1 / 4001) and f1["p_adjusted"] == pytest.approx(3 / 4001)
    [reason] = comparison_gate_reasons(result, fail_on_regression=True)
    assert reason.startswith("mention_f1 regressed against the baseline: ")
    assert reason.endswith("n=30; paired sign-flip permutation (one-sided, Monte Carlo R=4000) p=0.00025, "
                           "weighted Holm–Bonferroni-adjusted p=0.00075 ≤ α=0.05 over 2 tests)")
    assert compare(base, head) == result  # fixed seed → same block
    assert json.loads(json.dumps(result)) == result  # plain JSON types only


def test_ungated_metric_regression_does_not_set_regression() -> None:
    diffs = [-0.1] * 30
    ungated = {"mention_f1": {"direction": "higher", "threshold": None}}
    result = compare(*f1_runs(diffs, table=ungated))
    assert result["metrics"]["mention_f1"]["regression"] and not result["metrics"]["mention_f1"]["gated"]
    assert result["regression"] is False
    overridden = compare(*f1_runs(diffs), gated_metrics=set())
    assert overridden["regression"] is False
    assert comparison_gate_reasons(overridden, fail_on_regression=True) == []
    # the headline does not call it a significant regression: it cannot fail the gate
    assert "1 significant change of ungated metrics (no threshold): mention_f1 fell 0.100" in result["summary"]
    assert "significant regression" not in result["summary"]


def test_significant_improvement() -> None:
    result = compare(*f1_runs([0.05 + (0.01 if i % 2 else -0.01) for i in range(30)]))
    f1 = result["metrics"]["mention_f1"]
    assert f1["improvement"] and not f1["regression"] and result["regression"] is False
    assert "1 significant improvement: mention_f1 rose 0.050" in result["summary"]


@pytest.mark.parametrize("name", ["false_is_mine_rate", "num_tokens"])
def test_lower_is_better_metrics(name: str) -> None:
    table = {name: {"direction": "lower", "threshold": {"max": 0.2 if name != "num_tokens" else 3000}}}
    scale = 1.0 if name == "false_is_mine_rate" else 1000.0
    base_values = [scale * (0.1 + 0.01 * (i % 5)) for i in range(20)]

    def runs(shift: float) -> tuple[dict, dict]:
        base = [record(f"c{i}", {name: v}, line=i + 1) for i, v in enumerate(base_values)]
        head = [record(f"c{i}", {name: v + scale * (shift + (0.005 if i % 2 else -0.005))}, line=i + 1)
                for i, v in enumerate(base_values)]
        return document(base, table, "b"), document(head, table, "h")

    worse = compare(*runs(+0.05))
    block = worse["metrics"][name]
    assert block["direction"] == "lower" and block["delta"] > 0
    assert block["regression"] and not block["improvement"] and worse["regression"] is True
    assert "(lower is better; 95% BCa bootstrap CI" in worse["summary"] and f"{name} rose" in worse["summary"]
    better = compare(*runs(-0.05))
    assert better["metrics"][name]["improvement"] and not better["metrics"][name]["regression"]
    assert better["regression"] is False


def test_new_and_removed_cases_are_listed_not_paired() -> None:
    base, head = f1_runs([0.0] * 10)
    base["results"].append(record("gone", {"mention_f1": 0.1}, status="failed", line=50))
    head["results"].insert(0, record("fresh", {"mention_f1": 0.2}, status="failed", line=60))
    result = compare(base, head)
    assert result["cases"]["new"] == ["fresh"] and result["cases"]["removed"] == ["gone"]
    assert result["metrics"]["mention_f1"]["n_paired"] == 10
    assert result["metrics"]["mention_f1"]["delta"] == 0.0
    assert result["pass_rate"]["n_paired"] == 10 and result["pass_rate"]["head"] == 1.0
    assert result["regression"] is False
    assert result["summary"] == ("No case changed outcome; 1 new and 1 removed. No metric changed.")


def test_metric_skipped_in_one_run_is_excluded_from_pairing() -> None:
    base, head = f1_runs([0.0] * 30)
    head["results"][5]["metrics"]["mention_f1"] = {"value": None, "status": "skipped"}
    base["results"][6]["metrics"]["mention_f1"]["value"] = None
    head["results"][6]["metrics"]["mention_f1"]["value"] = 0.0  # would be a large drop if paired
    result = compare(base, head)
    assert result["metrics"]["mention_f1"]["n_paired"] == 28
    assert result["metrics"]["mention_f1"]["delta"] == 0.0
    assert result["pass_rate"]["n_paired"] == 30


def test_metric_only_in_one_run_is_not_compared_and_skipped_cases_have_no_outcome() -> None:
    base, head = f1_runs([0.0] * 8)
    for rec in head["results"]:
        rec["metrics"]["judge_score"] = {"value": 0.5, "status": "passed"}
    head["results"][1].update(status="skipped", passed=False)
    result = compare(base, head)
    assert set(result["metrics"]) == {"mention_f1"}
    assert result["pass_rate"]["n_paired"] == 7 and result["pass_rate"]["regressions"] == 0


def test_repeats_are_averaged_and_judged_by_majority() -> None:
    base = [record("a", {"mention_f1": v}, repeat=r) for r, v in enumerate([0.5, 0.7, 0.9])]
    base += [record("b", {"mention_f1": 0.8}, status=s, repeat=r, line=2)
             for r, s in enumerate(["passed", "passed", "failed"])]
    head = [record("a", {"mention_f1": 0.7})]
    head += [record("b", {"mention_f1": 0.8}, status=s, repeat=r, line=2)
             for r, s in enumerate(["passed", "failed", "errored"])]
    base_doc, head_doc = document(base, F1_GATED, "b"), document(head, F1_GATED, "h")
    result = compare(base_doc, head_doc)
    f1 = result["metrics"]["mention_f1"]
    assert f1["n_paired"] == 2 and f1["base"] == pytest.approx(0.75) and f1["delta"] == pytest.approx(0.0)
    assert [f["id"] for f in result["cases"]["regressions"]] == ["b"]
    assert result["cases"]["regressions"][0]["head_status"] == "failed"
    assert compare(base_doc, head_doc, repeat_rule="any")["cases"]["regressions"] == []


def test_alpha_sets_the_interval_level() -> None:
    diffs = [-0.01 + (0.05 if i % 2 else -0.05) for i in range(30)]
    narrow = compare(*f1_runs(diffs), alpha=0.5)
    wide = compare(*f1_runs(diffs), alpha=0.05)
    n, w = narrow["metrics"]["mention_f1"], wide["metrics"]["mention_f1"]
    assert w["ci_low"] < n["ci_low"] < n["ci_high"] < w["ci_high"]
    assert "50% BCa bootstrap CI" in narrow["summary"] and narrow["significance_level"] == 0.5


# ── loading ──────────────────────────────────────────────────────────────────────────────────


def test_load_results_json_round_trip(tmp_path: Path) -> None:
    base, _ = f1_runs([0.0] * 3)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(base), encoding="utf-8")
    assert load_results(path) == base


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"results": [\n  {"id": "x",}\n]}', ":2: invalid JSON"),
        ('{"summary": {}}', "not an evalgate results document"),
        ('[1, 2]', "not an evalgate results document"),
        ('{"schema_version": 2, "results": []}', "unsupported results schema_version 2"),
        ('{"results": [{"name": "x"}]}', "results[0] is not a case record"),
        ('{"results": [{"id": "x", "metrics": []}]}', "results[0] (x): 'metrics' is not an object"),
    ],
)
def test_load_results_rejects_bad_files(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "baseline.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(UserError) as info:
        load_results(path)
    assert str(info.value).startswith(str(path))
    assert message in str(info.value)


def test_load_results_missing_and_binary_files(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not found") as info:
        load_results(tmp_path / "nope.json")
    assert str(tmp_path / "nope.json") in str(info.value)
    binary = tmp_path / "blob.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(UserError, match="not UTF-8"):
        load_results(binary)


def _store(path: Path, runs: list[dict[str, Any]]) -> None:
    connection = sqlite3.connect(path)
    with connection:
        connection.execute("CREATE TABLE eg_runs (run_id TEXT PRIMARY KEY, timestamp TEXT, document TEXT, "
                           "status TEXT DEFAULT 'completed')")
        connection.execute("CREATE TABLE eg_cases (run_id TEXT, record TEXT)")
        for run in runs:
            summary = {k: v for k, v in run.items() if k != "results"}
            connection.execute("INSERT INTO eg_runs (run_id, timestamp, document) VALUES (?, ?, ?)",
                               (run["run_id"], run["timestamp"], json.dumps(summary)))
            for rec in reversed(run["results"]):  # stored out of order on purpose
                connection.execute("INSERT INTO eg_cases VALUES (?, ?)", (run["run_id"], json.dumps(rec)))
    connection.close()


def test_load_results_from_sqlite_takes_the_latest_run(tmp_path: Path) -> None:
    older, newer = f1_runs([0.0, 0.1, 0.2])
    older["timestamp"], newer["timestamp"] = "2026-11-20T09:00:00Z", "2026-11-21T09:00:00Z"
    path = tmp_path / "evalgate.db"
    _store(path, [newer, older])
    assert load_results(path) == newer  # detected by the SQLite header, records back in index order
    assert load_results_sqlite(path, run_id="base") == older
    with pytest.raises(UserError, match="no run 'missing' in this database"):
        load_results_sqlite(path, run_id="missing")


def test_load_results_from_a_foreign_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "eval_results.db"
    connection = sqlite3.connect(path)
    with connection:
        connection.execute("CREATE TABLE eval_runs (run_id TEXT PRIMARY KEY)")
    connection.close()
    with pytest.raises(UserError, match="not an evalgate store") as info:
        load_results(path)
    assert str(path) in str(info.value)
    empty = tmp_path / "empty.db"
    _store(empty, [])
    with pytest.raises(UserError, match="no finished run in this database"):
        load_results(empty)


def test_many_flips_are_significant_and_quiet_metrics_are_named() -> None:
    diffs = [-0.1 + (0.02 if i % 2 else -0.02) for i in range(30)]
    base, head = f1_runs(diffs)
    for i, (b, h) in enumerate(zip(base["results"], head["results"], strict=True)):
        b["metrics"]["judge_score"] = {"value": 0.6, "status": "passed"}
        h["metrics"]["judge_score"] = {"value": 0.6 + (0.03 if i % 2 else -0.02), "status": "passed"}
    for rec in head["results"][:8]:
        rec.update(status="failed", passed=False)
    result = compare(base, head)
    assert result["pass_rate"]["p_value"] == pytest.approx(1 / 2**8)
    assert result["pass_rate"]["significant"] is True
    assert not result["metrics"]["judge_score"]["significant"]
    assert "; other metric changes — inconclusive at α=0.05: judge_score rose 0.005" in result["summary"]
    assert result["summary"].startswith("8 cases flipped to fail and 0 to pass: pass rate 100.0% → 73.3% (exact "
                                        "McNemar (one-sided) p=0.0039, adjusted p=0.0039; a significant regression "
                                        "at α=0.05)")
