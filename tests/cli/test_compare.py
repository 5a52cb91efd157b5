"""``evalgate compare BASE HEAD``: text, JSON and Markdown output, exit status with and without
``--fail-on-regression``, SQLite inputs, and one-line errors for unreadable inputs."""

from __future__ import annotations

import copy
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli.main import main
from evalgate.verdict.compare import compare_runs
from tests.support.reports import BASE_VALUES, document


def write(path: Path, doc: dict[str, Any]) -> str:
    path.write_text(json.dumps(doc))
    return str(path)


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["compare", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_identical_runs_report_no_change(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write(tmp_path / "base.json", document("base", BASE_VALUES))
    head = write(tmp_path / "head.json", document("head", BASE_VALUES))
    code, out, err = run_cli(capsys, base, head, "--fail-on-regression")
    assert code == 0 and err == ""
    assert "Compared with " + base in out
    assert "No change against the baseline: 30 paired cases" in out
    assert "0 regressed, 0 fixed; exact McNemar (one-sided) p=1, adjusted p=1 (not significant at α=0.05)" in out
    assert "One decision: 2 test(s), weighted Holm–Bonferroni (pass rate weight 2/3) at family-wise α=0.05" in out


def repeated(doc: dict[str, Any], times: int) -> dict[str, Any]:
    """The document with every case recorded ``times`` times (repeats 0 … times − 1)."""
    doc = copy.deepcopy(doc)
    doc["results"] = [dict(r, repeat=k) for r in doc["results"] for k in range(times)]
    return doc


def test_critical_flip_fails_only_with_the_flag_and_with_repeats(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    base = write(tmp_path / "base.json", document("base", BASE_VALUES, risks={4: "critical"}))
    head = write(tmp_path / "head.json", document("head", BASE_VALUES, risks={4: "critical"}, failed={4}))
    code, out, _ = run_cli(capsys, base, head, "--fail-on-regression")
    assert code == 0  # one run: a single flip is not evidence, and the report says so
    assert "New failures (1, 1 critical):" in out and "▼ case_04 critical: passed → failed (datasets/x.yaml:19)" in out
    assert "a single flip of a critical case is not evidence" in out
    base5 = write(tmp_path / "base5.json", repeated(document("base", BASE_VALUES, risks={4: "critical"}), 5))
    head5 = write(tmp_path / "head5.json",
                  repeated(document("head", BASE_VALUES, risks={4: "critical"}, failed={4}), 5))
    code, out, _ = run_cli(capsys, base5, head5)
    assert code == 0 and "▼ case_04 critical: passed → failed [5/5 → 0/5 passing runs] (datasets/x.yaml:19)" in out
    code, _, err = run_cli(capsys, base5, head5, "--fail-on-regression")
    assert code == 1
    assert ("evalgate: regression: critical cases regressed against the baseline: 1 that passed every base run now "
            "fail: case_04 (datasets/x.yaml:19) (exact stratified exchange test (one-sided) p=0.004") in err


def test_a_consistent_metric_drop_is_significant_and_a_noisy_one_is_not(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    base = write(tmp_path / "base.json", document("base", BASE_VALUES))
    dropped = write(tmp_path / "dropped.json", document("dropped", [v - 0.05 for v in BASE_VALUES]))
    code, out, err = run_cli(capsys, base, dropped, "--fail-on-regression")
    assert code == 1 and "score regressed against the baseline" in err
    assert "significant regression" in out and "regression" in out.split("score")[-1]
    noisy_values = list(BASE_VALUES)
    noisy_values[3] -= 0.06
    noisy_values[11] += 0.02
    noisy = write(tmp_path / "noisy.json", document("noisy", noisy_values))
    code, out, err = run_cli(capsys, base, noisy, "--fail-on-regression")
    assert code == 0 and err == ""
    assert "score fell 0.001" in out and "inconclusive at α=0.05" in out


def test_json_format_is_the_comparison_block(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base_doc = document("base", BASE_VALUES, risks={4: "critical"})
    head_doc = document("head", [v - 0.01 for v in BASE_VALUES], risks={4: "critical"}, failed={4, 9})
    head_doc["metadata"]["config"] = {"significance_level": 0.1}
    base = write(tmp_path / "base.json", base_doc)
    head = write(tmp_path / "head.json", head_doc)
    code, out, _ = run_cli(capsys, base, head, "--format", "json")
    assert code == 0
    assert json.loads(out) == compare_runs(base_doc, head_doc, alpha=0.1, baseline_source=base)
    code, out, _ = run_cli(capsys, base, head, "--format", "json", "--alpha", "0.01")
    assert json.loads(out)["significance_level"] == 0.01


def test_markdown_format_marks_significance_and_escapes_dataset_text(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    base_doc = document("base", BASE_VALUES, risks={2: "critical"})
    head_doc = document("head", [v - 0.05 for v in BASE_VALUES], risks={2: "critical"}, failed={2})
    for doc in (base_doc, head_doc):
        doc["results"][2]["id"] = "evil|`id` @octocat <b>"
    base = write(tmp_path / "base.json", base_doc)
    head = write(tmp_path / "head.json", head_doc)
    code, out, _ = run_cli(capsys, base, head, "--format", "markdown")
    assert code == 0
    assert out.startswith(f"### evalgate: compared with `{base}`")
    assert "| Metric | Base | Head | Δ | 95% CI | p (adjusted) | n | Change |" in out
    score_row = next(line for line in out.splitlines() if line.startswith("| `score`"))
    assert "**▼ −0.050**" in score_row and "(BCa bootstrap)" in score_row and score_row.endswith("| 30 | regression |")
    # new failures lead, then significant metric changes
    assert out.index("| Regressed case |") < out.index("| Metric |")
    # the same section the PR comment shows (one renderer: report/templates/comparison.md.j2)
    assert "| Regressed case | Source | Risk | Base → head |" in out
    assert "| ``evil\\|`id` @octocat <b>`` 🚨 | `datasets/x.yaml:11` | critical | passed → failed |" in out
    assert "Pass rate 100.0% → 96.7% · McNemar p=0.50, not significant · 0 new · 0 removed case(s)" in out


def sqlite_store(path: Path, doc: dict[str, Any]) -> str:
    body = copy.deepcopy(doc)
    records = body.pop("results")
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE eg_runs (run_id TEXT, timestamp TEXT, status TEXT, document TEXT)")
        connection.execute("CREATE TABLE eg_cases (run_id TEXT, record TEXT)")
        connection.execute("INSERT INTO eg_runs VALUES (?, ?, ?, ?)",
                           (body["run_id"], body["timestamp"], "completed", json.dumps(body)))
        connection.executemany("INSERT INTO eg_cases VALUES (?, ?)", [(body["run_id"], json.dumps(r)) for r in records])
    connection.close()
    return str(path)


def test_sqlite_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = sqlite_store(tmp_path / "base.db", document("base", BASE_VALUES, risks={4: "critical"}))
    head = write(tmp_path / "head.json", document("head", [v - 0.05 for v in BASE_VALUES], risks={4: "critical"},
                                                  failed={4}))
    code, out, _ = run_cli(capsys, base, head, "--format", "json", "--fail-on-regression")
    assert code == 1
    comparison = json.loads(out)
    assert comparison["baseline"]["run_id"] == "base"
    assert [flip["id"] for flip in comparison["cases"]["regressions"]] == ["case_04"]


def test_unreadable_inputs_and_a_bad_alpha_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = write(tmp_path / "good.json", document("good", BASE_VALUES))
    code, out, err = run_cli(capsys, str(tmp_path / "missing.json"), good)
    assert code == 2 and out == ""
    assert err.strip() == f"evalgate: error: {tmp_path / 'missing.json'}: baseline results file not found"
    (tmp_path / "broken.json").write_text('{"results": [\n  {"id": 1,}\n]}')
    code, _, err = run_cli(capsys, good, str(tmp_path / "broken.json"))
    assert code == 2 and f"{tmp_path / 'broken.json'}:2" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli(capsys, good, good, "--alpha", "1.5")
    assert code == 2 and "--alpha" in err and "between 0 and 1" in err


def with_policy(doc: dict[str, Any], threshold: float, critical: int) -> dict[str, Any]:
    ids = [r["id"] for r in doc["results"]]
    doc["gate_policy"] = {"version": 1, "thresholds": {"score": {"min": threshold}},
                          "threshold_origins": {"score": "evalgate.yaml: thresholds"}, "ungated": [],
                          "cases": {"count": len(ids), "digest": "d", "ids": ids,
                                    "critical": {"count": critical, "digest": f"c{critical}",
                                                 "ids": ids[:critical]}}}
    return doc


def test_compare_lists_how_head_loosens_the_gate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write(tmp_path / "base.json", with_policy(document("base", BASE_VALUES), 0.5, 2))
    head = write(tmp_path / "head.json", with_policy(document("head", BASE_VALUES), 0.3, 1))
    code, out, _ = run_cli(capsys, base, head, "--fail-on-regression")
    assert code == 0  # listed, never an exit status of compare
    assert "gate loosened: score min 0.5 → min 0.3 (evalgate.yaml: thresholds)" in out
    assert "gate loosened: 1 case(s) no longer risk_level critical: case_01" in out
    _, out, _ = run_cli(capsys, base, head, "--format", "json")
    assert [item["kind"] for item in json.loads(out)["gate_loosened"]] == ["threshold", "critical_demoted"]
    _, out, _ = run_cli(capsys, base, head, "--format", "markdown")
    assert "**HEAD loosens the gate:**\n\n- score min 0.5 → min 0.3 (evalgate.yaml: thresholds)\n" in out
    _, out, _ = run_cli(capsys, head, base)  # the other way round: a tightening, nothing listed
    assert "gate loosened" not in out


def test_compare_without_recorded_policies_lists_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write(tmp_path / "base.json", document("base", BASE_VALUES))
    head = write(tmp_path / "head.json", with_policy(document("head", BASE_VALUES), 0.3, 0))
    _, out, _ = run_cli(capsys, base, head, "--format", "json")
    assert "gate_loosened" not in json.loads(out)  # the comparison block as it is
