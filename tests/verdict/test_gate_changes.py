"""A pull request loosening its own gate (issue 22): the policy snapshot in results.json, the pure comparison
with the base run's policy (``verdict.policy``), and ``gate_changes: report|fail`` with the approval label,
through ``evalgate run`` with a baseline file and through the Action's entry module with an Actions-like
environment and a pull_request event payload."""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalgate.report.markdown import render_summary
from evalgate.verdict.policy import (
    CaseSet,
    approval,
    at_least_as_strict,
    effective_gate_changes,
    loosenings,
    unknown,
)
from tests.support.action import make_workspace, run_entrypoint, runner_env
from tests.support.gate import Ran, policy, pr_event, results

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "datasets" / "brand-mentions" / "fixtures.yaml"
CRITICAL = ("test_001_basic_mention", "test_002_word_boundary")
LABEL = "evalgate-gate-change-approved"


# ---- the pure comparison ----------------------------------------------------------------------------------

def kinds(found: list[dict[str, Any]]) -> list[str]:
    return [item["kind"] for item in found]


def test_an_unchanged_policy_loosens_nothing() -> None:
    assert loosenings(policy(), policy()) == []


@pytest.mark.parametrize(("change", "kind", "text"), [
    ({"thresholds": {"hit_rate": {"min": 0.5}, "num_tokens": {"max": 4000.0}, "faithfulness": {"gt": 0.5}}},
     "threshold", "hit_rate min 0.8 → min 0.5 (evalgate.yaml: thresholds)"),
    ({"thresholds": {"hit_rate": {"min": 0.8}, "num_tokens": {"max": 9000.0}, "faithfulness": {"gt": 0.5}}},
     "threshold", "num_tokens max 4000 → max 9000"),
    ({"thresholds": {"hit_rate": {"min": 0.8}, "num_tokens": {"max": 4000.0}, "faithfulness": {"min": 0.5}}},
     "threshold", "faithfulness gt 0.5 → min 0.5"),
    ({"thresholds": {"hit_rate": {"max": 0.8}, "num_tokens": {"max": 4000.0}, "faithfulness": {"gt": 0.5}}},
     "threshold", "hit_rate min 0.8 → max 0.8 (evalgate.yaml: thresholds)"),
    ({"thresholds": {"num_tokens": {"max": 4000.0}, "faithfulness": {"gt": 0.5}}, "ungated": ["hit_rate"]},
     "ungated", "hit_rate no longer gated: was min 0.8, its threshold was removed (evalgate.yaml: thresholds)"),
    ({"thresholds": {"num_tokens": {"max": 4000.0}, "faithfulness": {"gt": 0.5}}},
     "ungated", "hit_rate no longer gated: was min 0.8, no longer computed (evalgate.yaml: thresholds)"),
    ({"thresholds": {"hit_rate": {"min": 0.8}, "num_tokens": {"max": 4000.0}}, "ungated": ["faithfulness"],
      "not_gating": {"faithfulness": "stale: the rubric changed since calibration"}},
     "ungated", "faithfulness no longer gated: was gt 0.5, its judge does not gate (stale: the rubric changed since "
                "calibration)"),
    ({"significance_level": 0.000001}, "significance_level",
     "significance_level (α) 0.05 → 1e-06 (fewer regressions found) (evalgate.yaml: significance_level)"),
    ({"regression_tolerance": {"latency_ms": {"abs": 50.0, "rel": 0.1}, "hit_rate": {"abs": 0.1, "rel": 0.0}}},
     "regression_tolerance", "regression_tolerance of hit_rate widened: abs 0 → 0.1"),
    ({"regression_tolerance": {"latency_ms": {"abs": 50.0, "rel": 0.5}}},
     "regression_tolerance", "regression_tolerance of latency_ms widened: rel 0.1 → 0.5"),
    ({"optional_metrics": {"": ["context_recall"], "support": ["hit_rate"]}},
     "optional_metrics", "optional_metrics adds hit_rate (suite support): cases lacking it no longer error"),
    ({"calibration": "off"}, "calibration", "calibration required → off (human labels not read: a judge gates on its controls, or unchecked where none "
     "can be built)"),
    ({"calibration": "auto"}, "calibration", "calibration required → auto (a judge without human labels gates on its controls)"),
    ({"calibration_min_kappa": 0.2}, "calibration", "calibration_min_kappa 0.6 → 0.2"),
    ({"calibration_floors": {}}, "calibration", "calibration floor faithfulness.min_kappa 0.7 → default"),
    ({"fail_on_regression": False}, "switched_off", "fail_on_regression on → off"),
    ({"strict_metrics": False}, "switched_off", "strict_metrics on → off"),
    ({"fail_on_critical": False}, "switched_off", "fail_on_critical on → off"),
    ({"min_pass_rate": None}, "min_pass_rate", "min_pass_rate 0.9 → none"),
    ({"max_errored": 3}, "max_errored", "max_errored 0 → 3"),
    ({"repeat_rule": "any"}, "repeat_rule", "repeat_rule majority → any"),
    ({"selection": {"case_ids": 0, "first_n": 2, "category": [], "tags": []}}, "selection",
     "cases selected by first_n: 2"),
    ({"cases": {"count": 2, "digest": "z", "ids": ["a", "b"], "critical": {"count": 2, "digest": "y",
                                                                          "ids": ["a", "b"]}}},
     "cases_missing", "2 case(s) of the base run missing from this run: c, d"),
    ({"cases": {"count": 4, "digest": "x", "ids": ["a", "b", "c", "d"],
                "critical": {"count": 1, "digest": "w", "ids": ["b"]}}},
     "critical_demoted", "1 case(s) no longer risk_level critical: a"),
])
def test_each_kind_of_loosening_is_listed_once(change: dict[str, Any], kind: str, text: str) -> None:
    found = loosenings(policy(), policy(**change))
    assert kinds(found) == [kind]
    assert found[0]["text"] == text


def test_the_base_gate_changes_fail_turned_to_report_is_a_loosening() -> None:
    base = policy(gate_changes="fail")
    assert [i["text"] for i in loosenings(base, policy())] == ["gate_changes fail → report"]


@pytest.mark.parametrize("change", [
    {"thresholds": {"hit_rate": {"min": 0.9}, "num_tokens": {"max": 3000.0}, "faithfulness": {"gt": 0.6},
                    "new_metric": {"min": 0.5}}},
    {"thresholds": {"hit_rate": {"gt": 0.8}, "num_tokens": {"lt": 4000.0}, "faithfulness": {"gt": 0.5}}},
    {"significance_level": 0.2, "max_errored": 0, "min_pass_rate": 0.95, "repeat_rule": "all"},
    {"regression_tolerance": {}, "optional_metrics": {}, "calibration_min_kappa": 0.8},
    {"cases": {"count": 6, "digest": "q", "ids": ["a", "b", "c", "d", "e", "f"],
               "critical": {"count": 3, "digest": "r", "ids": ["a", "b", "c"]}}},
    {"gate_changes": "fail"},
])
def test_tightenings_are_not_listed(change: dict[str, Any]) -> None:
    assert loosenings(policy(), policy(**change)) == []


def test_every_change_from_required_calibration_except_to_required_is_listed() -> None:
    auto = policy(calibration="auto")
    assert kinds(loosenings(auto, policy(calibration="off"))) == ["calibration"]
    assert kinds(loosenings(policy(calibration="off"), auto)) == ["calibration"]
    assert loosenings(auto, policy(calibration="required")) == []


def test_more_controls_are_listed_fewer_are_not() -> None:
    """bench.calibration: a judge of true κ 0.4 is admitted 2.1 % of the time on 20 controls, 2.9 % on 60."""
    found = loosenings(policy(controls_max_items=20), policy(controls_max_items=60))
    assert [(f["kind"], f["setting"], f["before"], f["after"]) for f in found] == [
        ("calibration", "controls_max_items", 20, 60)]
    assert loosenings(policy(controls_max_items=60), policy(controls_max_items=20)) == []
    assert loosenings(policy(), policy(controls_max_items=60)) == []  # a base run that did not record it


def test_strictness_of_one_threshold_against_another() -> None:
    assert at_least_as_strict(("min", 0.8), ("min", 0.8))
    assert at_least_as_strict(("min", 0.8), ("gt", 0.8))
    assert not at_least_as_strict(("gt", 0.8), ("min", 0.8))
    assert at_least_as_strict(("max", 10.0), ("lt", 10.0))
    assert not at_least_as_strict(("lt", 10.0), ("max", 10.0))
    assert not at_least_as_strict(("min", 0.8), ("max", 0.9))
    assert at_least_as_strict(("max", 10.0), ("max", 9.0))


def test_removed_cases_from_the_comparison_win_and_are_counted_beyond_five() -> None:
    head = policy(cases={"count": 1, "digest": "z", "ids": None, "critical": {"count": 0, "digest": "", "ids": None}})
    removed = [f"case_{i}" for i in range(12)]
    found = loosenings(policy(), head, removed=removed)
    assert found[0]["text"] == ("12 case(s) of the base run missing from this run: case_0, case_1, case_2, case_3, "
                                "case_4 (+7 more)")
    assert kinds(found) == ["cases_missing", "critical_demoted"]
    assert found[1]["text"] == "critical cases 2 → 0"


def test_without_id_lists_a_changed_case_set_is_still_reported() -> None:
    big = {"count": 5000, "digest": "aa", "ids": None, "critical": {"count": 10, "digest": "c", "ids": None}}
    same_count = {**big, "digest": "bb"}
    found = loosenings(policy(cases=big), policy(cases=same_count))
    assert [i["text"] for i in found] == ["the case set changed: 5000 case(s) in the base run, 5000 here (too many "
                                          "to list which)"]
    assert loosenings(policy(cases=big), policy(cases=dict(big))) == []


def test_a_base_without_a_policy_is_unknown_and_never_crashes() -> None:
    assert unknown(None) and unknown({}) and unknown({"version": 1})
    assert not unknown(policy())
    assert loosenings(None, policy()) == []
    assert loosenings({"thresholds": {"x": "not a bound"}, "cases": "garbage"}, policy()) == []


def test_case_set_stays_bounded_and_its_digest_ignores_order() -> None:
    ids = [f"id-{i}" for i in range(50)]
    one, two = CaseSet(limit=10), CaseSet(limit=100)
    for case_id in ids:
        one.add_id(case_id, case_id.endswith("7"))
    shuffled = ids[:]
    random.Random(3).shuffle(shuffled)
    for case_id in shuffled:
        two.add_id(case_id, case_id.endswith("7"))
    a, b = one.as_dict(), two.as_dict()
    assert a["ids"] is None and b["ids"] == sorted(ids)  # more than the limit: count and digest only
    assert (a["count"], a["digest"]) == (b["count"], b["digest"]) == (50, b["digest"])
    assert a["critical"]["ids"] == ["id-17", "id-27", "id-37", "id-47", "id-7"]
    assert a["critical"]["digest"] == b["critical"]["digest"]


def test_gate_changes_not_from_the_workflow_may_only_tighten_and_labels_match_case_insensitively() -> None:
    assert effective_gate_changes("report", from_workflow=False, untrusted=True, base_value="fail") == "fail"
    assert effective_gate_changes("report", from_workflow=True, untrusted=True, base_value="fail") == "report"
    assert effective_gate_changes("report", from_workflow=False, untrusted=False, base_value="fail") == "report"
    assert effective_gate_changes("fail", from_workflow=False, untrusted=True, base_value="report") == "fail"
    assert effective_gate_changes("report", from_workflow=False, untrusted=True, base_value=None) == "report"
    assert approval(["bug", "Evalgate-Gate-Change-Approved"], LABEL) == LABEL
    assert approval(["bug"], LABEL) is None and approval(["bug"], "") is None


def test_the_report_section_escapes_and_truncates_what_the_pr_wrote(base: Path) -> None:
    document = results(base)
    document["gate"].update(gate_changes="report", loosened=[
        {"kind": "threshold", "setting": "x", "text": "<img src=x onerror=alert(1)> @octocat [link](http://e.vil) "
                                                        + "y" * 1000}])
    text = render_summary(document, run_url=None, artifact_url=None)
    assert "This pull request loosens the gate" in text
    line = next(line for line in text.splitlines() if "onerror" in line)
    assert "<img" not in line and "@octocat" not in line and "](http" not in line
    assert "truncated" in line and len(line) < 600


# ---- through evalgate run -----------------------------------------------------------------------------------

def write_suite(directory: Path, *, drop: tuple[str, ...] = (), demote: tuple[str, ...] = (),
                config: dict[str, Any] | None = None) -> Path:
    """Four cases of the brand-mention fixtures (two critical), minus ``drop``, with ``demote`` made medium;
    ``config`` as evalgate.yaml."""
    data = yaml.safe_load(FIXTURES.read_text(encoding="utf-8"))
    cases = []
    for case in data["test_cases"][:4]:
        if case["intent_id"] in drop:
            continue
        if case["intent_id"] in CRITICAL and case["intent_id"] not in demote:
            case["risk_level"] = "critical"
        cases.append(case)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "cases.yaml").write_text(yaml.safe_dump({"suite": data["suite"], "test_cases": cases}),
                                          encoding="utf-8")
    if config is not None:
        (directory / "evalgate.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    return directory


def evalgate(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``evalgate ARGS`` in a fresh process (the console entry point as a user runs it)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith(("EVALGATE_", "GITHUB_", "INPUT_"))}
    full.update({"EVALGATE_JUDGE_SHARED_CACHE": "none", "PYTHONPATH": str(ROOT), **(env or {})})
    return subprocess.run([sys.executable, "-m", "evalgate", *args], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The base branch's run: default policy, thresholds of evalgate.yaml, 4 cases, 2 critical."""
    folder = write_suite(tmp_path_factory.mktemp("base"), config={"thresholds": {"mention_precision": 0.9}})
    run = evalgate("run", "-d", "cases.yaml", "-o", "out", cwd=folder)
    assert run.returncode == 0, run.stdout + run.stderr
    return folder / "out"


LOOSE_CONFIG = {"thresholds": {"mention_precision": 0.5}, "significance_level": 0.001,
                "regression_tolerance": {"mention_recall": 0.1}, "optional_metrics": ["mention_recall"],
                "calibration": "off", "fail_on_critical": False}


def test_the_policy_is_recorded_in_results_json_and_sqlite(base: Path) -> None:
    document = results(base)
    policy_ = document["gate_policy"]
    assert policy_["thresholds"]["mention_precision"] == {"min": 0.9}
    assert policy_["threshold_origins"]["mention_precision"] == "evalgate.yaml: thresholds"
    assert policy_["cases"]["count"] == 4 and policy_["cases"]["critical"]["ids"] == sorted(CRITICAL)
    assert (policy_["significance_level"], policy_["calibration"], policy_["gate_changes"]) == (0.05, "auto", "report")
    with sqlite3.connect(base / "results.db") as db:
        [(stored,)] = db.execute("SELECT document FROM eg_runs").fetchall()
    assert json.loads(stored)["gate_policy"] == policy_


def test_report_mode_lists_every_loosening_and_passes(tmp_path: Path, base: Path, cli: Callable[..., Ran]) -> None:
    folder = write_suite(tmp_path / "pr", drop=("test_004_aliases",), demote=("test_002_word_boundary",),
                         config=LOOSE_CONFIG)
    run = cli("run", "-d", "cases.yaml", "-o", "out", "--baseline", str(base / "results.json"), cwd=folder)
    assert run.returncode == 0, run.stdout + run.stderr
    gate = results(folder / "out")["gate"]
    assert gate["gate_changes"] == "report" and gate["passed"] is True
    assert {i["kind"] for i in gate["loosened"]} == {"threshold", "significance_level", "regression_tolerance",
                                                      "optional_metrics", "calibration", "switched_off",
                                                      "cases_missing", "critical_demoted"}
    texts = [i["text"] for i in gate["loosened"]]
    assert "mention_precision min 0.9 → min 0.5 (evalgate.yaml: thresholds)" in texts
    assert "1 case(s) of the base run missing from this run: test_004_aliases (cases.yaml:65)" in texts
    assert "1 case(s) no longer risk_level critical: test_002_word_boundary (cases.yaml:33)" in texts
    assert run.stdout.count("⚠ This run loosens the gate against its base: mention_precision min 0.9") == 1
    summary = cli("report", "out/results.json", "--format", "markdown", cwd=folder)
    assert "**This pull request loosens the gate**:" in summary.stdout
    html = cli("report", "out/results.json", "--format", "html", "--output", "report.html", cwd=folder)
    assert html.returncode == 0, html.stdout + html.stderr
    page = (folder / "report.html").read_text(encoding="utf-8")
    assert '<div id="gate-changes"><strong>This pull request loosens the gate</strong>:' in page
    assert "<li>1 case(s) no longer risk_level critical: test_002_word_boundary (cases.yaml:33)</li>" in page


def test_tightening_is_not_reported(tmp_path: Path, base: Path, cli: Callable[..., Ran]) -> None:
    folder = write_suite(tmp_path / "pr", config={"thresholds": {"mention_precision": 0.95},
                                                  "significance_level": 0.2, "calibration": "required"})
    run = cli("run", "-d", "cases.yaml", "-o", "out", "--baseline", str(base / "results.db"),
                   "--gate-changes", "fail", cwd=folder)
    assert run.returncode == 0, run.stdout + run.stderr
    assert results(folder / "out")["gate"]["loosened"] == []
    assert "loosens" not in run.stdout


def test_fail_mode_fails_with_one_reason(tmp_path: Path, base: Path, cli: Callable[..., Ran]) -> None:
    folder = write_suite(tmp_path / "pr", config={"thresholds": {"mention_precision": 0.5}})
    run = cli("run", "-d", "cases.yaml", "-o", "out", "--baseline", str(base / "results.json"), cwd=folder,
                   env={"EVALGATE_GATE_CHANGES": "fail"})
    assert run.returncode == 1, run.stdout + run.stderr
    gate = results(folder / "out")["gate"]
    assert gate["reasons"] == [
        "this pull request loosens the gate (mention_precision min 0.9 → min 0.5 (evalgate.yaml: thresholds)); "
        f"gate_changes is fail: a maintainer can approve with the label '{LABEL}'"]
    assert gate["exit_code"] == 1


def test_a_base_run_without_a_policy_is_said_once(tmp_path: Path, base: Path, cli: Callable[..., Ran]) -> None:
    old = results(base)
    del old["gate_policy"]
    (tmp_path / "old.json").write_text(json.dumps(old), encoding="utf-8")
    folder = write_suite(tmp_path / "pr", config={"thresholds": {"mention_precision": 0.5}})
    run = cli("run", "-d", "cases.yaml", "-o", "out", "--baseline", str(tmp_path / "old.json"),
                   "--gate-changes", "fail", cwd=folder)
    assert run.returncode == 0, run.stdout + run.stderr
    gate = results(folder / "out")["gate"]
    assert gate["loosened"] is None and gate["policy_note"].startswith("gate policy of the base run unknown")
    assert run.stdout.count("gate policy of the base run unknown") == 1


# ---- through the Action's entry module ------------------------------------------------------------------------

def action_run(tmp_path: Path, base: Path, *, config: dict[str, Any], labels: list[str],
               inputs: dict[str, str] | None = None, in_process: pytest.MonkeyPatch | None = None
               ) -> tuple[Ran | subprocess.CompletedProcess[str], dict[str, Any], str]:
    """The Action step on a pull_request event: ``python -m entrypoint.main`` in a fresh process, or (given a
    ``MonkeyPatch``) ``evalgate.cli.action.run_action``, what the entry module calls, in this process."""
    ws = make_workspace(tmp_path / "runner", ())
    write_suite(ws.workspace, config=config)
    (ws.workspace / "base").mkdir()
    for name in ("results.json", "results.db"):
        (ws.workspace / "base" / name).write_bytes((base / name).read_bytes())
    env = runner_env(ws, event_name="pull_request", payload=pr_event(labels), api_url="http://127.0.0.1:9",
                     inputs={"dataset": "cases.yaml", "baseline": "base/results.json", "comment": "never",
                             "upload-artifacts": "false", **(inputs or {})})
    if in_process is None:
        run: Ran | subprocess.CompletedProcess[str] = run_entrypoint(ws, env)
    else:
        from evalgate.cli.action import run_action

        lines: list[str] = []
        with in_process.context() as patch:
            patch.chdir(ws.workspace)
            run = Ran(run_action(env, emit=lines.append), "\n".join(lines), "")
    return run, results(ws.workspace / "evalgate-results"), ws.summary()


LOWERED = {"thresholds": {"mention_precision": 0.5}}


def test_action_fail_input_fails_a_loosening_pr_without_the_label(tmp_path: Path, base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run, document, summary = action_run(tmp_path, base, config=LOWERED, labels=["bug"],
                                        inputs={"gate-changes": "fail"}, in_process=monkeypatch)
    assert run.returncode == 1, run.stdout + run.stderr
    assert document["gate"]["gate_changes"] == "fail"
    assert document["gate"]["reasons"][0].startswith("this pull request loosens the gate (mention_precision")
    assert [line for line in run.stdout.splitlines() if line.startswith("::warning") and "gate changes" in line] == [
        "::warning title=evalgate%3A gate changes::this pull request loosens the gate: mention_precision min 0.9 → "
        "min 0.5 (evalgate.yaml: thresholds)"]
    assert "**This pull request loosens the gate** (gate\\_changes: fail):" in summary or \
        "**This pull request loosens the gate** (gate_changes: fail):" in summary


def test_action_label_approves_the_loosening(tmp_path: Path, base: Path) -> None:
    run, document, summary = action_run(tmp_path, base, config=LOWERED, labels=["bug", LABEL],
                                        inputs={"gate-changes": "fail"})
    assert run.returncode == 0, run.stdout + run.stderr
    assert document["gate"]["approved_by"] == LABEL and document["gate"]["passed"] is True
    assert f"(approved with the label `{LABEL}`)" in summary


def test_the_prs_evalgate_yaml_cannot_turn_fail_into_report(tmp_path: Path, base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run, document, _ = action_run(tmp_path, base, config={**LOWERED, "gate_changes": "report"}, labels=[],
                                  inputs={"gate-changes": "fail"}, in_process=monkeypatch)
    assert run.returncode == 1 and document["gate"]["gate_changes"] == "fail"


def test_the_prs_evalgate_yaml_cannot_undo_the_base_runs_fail_nor_rename_the_label(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, cli: Callable[..., Ran],
        monkeypatch: pytest.MonkeyPatch) -> None:
    folder = write_suite(tmp_path_factory.mktemp("strict-base"),
                         config={"thresholds": {"mention_precision": 0.9}, "gate_changes": "fail"})
    assert cli("run", "-d", "cases.yaml", "-o", "out", cwd=folder).returncode == 0
    config = {**LOWERED, "gate_changes": "report", "gate_change_label": "bug"}
    run, document, _ = action_run(tmp_path, folder / "out", config=config, labels=["bug"], in_process=monkeypatch)
    assert run.returncode == 1, run.stdout + run.stderr
    gate = document["gate"]
    assert gate["gate_changes"] == "fail" and "approved_by" not in gate
    assert "gate_changes fail → report (evalgate.yaml: gate_changes)" in [i["text"] for i in gate["loosened"]]
    assert f"with the label '{LABEL}'" in gate["reasons"][0]
    deleted, document, _ = action_run(tmp_path / "deleted", folder / "out", config=LOWERED, labels=[],
                                      in_process=monkeypatch)  # the line deleted: the default does not relax it
    assert deleted.returncode == 1 and document["gate"]["gate_changes"] == "fail"
    assert "gate_changes fail → report (default)" in [i["text"] for i in document["gate"]["loosened"]]


def test_a_merged_run_records_the_whole_case_set_and_compares_it(tmp_path: Path, base: Path,
                                                                 cli: Callable[..., Ran]) -> None:
    folder = write_suite(tmp_path / "pr", drop=("test_004_aliases",), config=LOWERED)
    for shard in ("1/2", "2/2"):
        run = cli("run", "-d", "cases.yaml", "-o", f"s{shard[0]}", "--shard", shard, "--baseline",
                  str(base / "results.json"), cwd=folder)
        assert run.returncode == 0, run.stdout + run.stderr
        shard_gate = results(folder / f"s{shard[0]}")["gate"]
        assert [i["kind"] for i in shard_gate["loosened"]] == ["threshold"]  # cases are compared once merged
    merged = cli("merge", "s1", "s2", "-o", "merged", "--baseline", str(base / "results.json"), cwd=folder)
    assert merged.returncode == 0, merged.stdout + merged.stderr
    document = results(folder / "merged")
    assert document["gate_policy"]["cases"]["count"] == 3
    assert document["gate_policy"]["cases"]["critical"]["ids"] == sorted(CRITICAL)
    assert [i["text"] for i in document["gate"]["loosened"]] == [
        "mention_precision min 0.9 → min 0.5 (evalgate.yaml: thresholds)",
        "1 case(s) of the base run missing from this run: test_004_aliases (cases.yaml:65)"]


def test_a_baseline_chosen_by_the_prs_evalgate_yaml_is_a_loosening(tmp_path: Path, base: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    run, document, summary = action_run(tmp_path, base, config={"baseline": "none"}, labels=[],
                                        inputs={"gate-changes": "fail", "baseline": ""}, in_process=monkeypatch)
    assert run.returncode == 1, run.stdout + run.stderr
    [item] = document["gate"]["loosened"]
    assert item["text"] == ("baseline none chosen by the pull request's evalgate.yaml: the base run's gate cannot be "
                            "compared with (evalgate.yaml: baseline)")
    assert "baseline none chosen by the pull request" in summary


def test_a_baseline_auto_in_the_prs_evalgate_yaml_is_not_a_loosening(tmp_path: Path, base: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """``baseline: auto`` names the base branch's own artifact, which the PR cannot write: not listed."""
    _, document, _ = action_run(tmp_path, base, config={"baseline": "auto"}, labels=[],
                                  inputs={"gate-changes": "fail", "baseline": ""}, in_process=monkeypatch)
    assert not any(item["kind"] == "baseline" for item in document["gate"].get("loosened") or []), document["gate"]
