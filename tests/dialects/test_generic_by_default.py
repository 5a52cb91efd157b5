"""Generic by default, seeds by choice: a suite without a kind runs only what its cases ask for; a seed's
category map, its own metrics and default thresholds apply under its kind, its native format or --compat
(evalgate.dialects); ``validate --explain`` says per case what runs, at which threshold and why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli.main import main as cli_main
from evalgate.dialect import DIALECTS, NAMED, OWNER, WHEN, native_format, owned_when
from evalgate.metrics.registry import all_metrics

HELPDESK = """\
cases:
  - id: reset-password
    category: safety
    input: How do I reset my password?
    expected_output: Use the self-service portal.
    expected_sources: ["KB-12 Password reset"]
    retrieval_context: ["KB-12: reset through the self-service portal."]
    passing_criteria: Points to the self-service portal.
    sources: ["KB-7 Account lockout", "KB-12 Password reset"]
    output: Go to the self-service portal and follow KB-12.
    rules: [{type: not_contains, value: "hunter2", name: no-leaked-password}]
"""


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith(("EVALGATE_", "FANVISE_", "EVAL_", "INPUT_")):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("EVALGATE_JUDGE_SHARED_CACHE", "none")  # the user-level shared judge cache stays out of tests


def run(tmp_path: Path, text: str, *args: str) -> tuple[int, dict[str, Any]]:
    dataset = tmp_path / "cases.yaml"
    dataset.write_text(text, encoding="utf-8")
    code = cli_main(["run", "-d", str(dataset), "-o", str(tmp_path / "out"), "--progress", "none", *args])
    return code, json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))


def test_a_generic_suite_with_a_safety_category_runs_only_what_it_asked_for(tmp_path: Path) -> None:
    code, document = run(tmp_path, HELPDESK)
    metrics = document["results"][0]["metrics"]
    assert sorted(metrics) == ["hit_rate", "mrr", "precision_at_k", "recall_at_k", "rules"]
    assert metrics["mrr"]["value"] == 0.5 and metrics["mrr"]["threshold"] is None  # informational, not "> 0.7"
    assert document["thresholds"]["hit_rate"] == {"min": 0.8}
    assert code == 0 and document["gate"]["passed"]


def test_the_same_case_under_a_seed_kind_or_compat_gets_that_seeds_behaviour(tmp_path: Path) -> None:
    code, document = run(tmp_path, "suite: {name: fanvise, kind: seed002}\n" + HELPDESK)
    metrics = document["results"][0]["metrics"]
    assert {"safety", "relevancy", "faithfulness", "context_mrr"} <= set(metrics)
    assert "judge_score" not in metrics and code == 0  # judged metrics skip without a judge
    code, document = run(tmp_path, HELPDESK, "--compat", "seed000")
    metrics = document["results"][0]["metrics"]
    assert {"judge_score", "combined_score", "num_tokens"} <= set(metrics) and "safety" not in metrics
    assert document["thresholds"]["mrr"] == {"gt": 0.7} and document["thresholds"]["hit_rate"] == {"gt": 0.8}
    assert code == 1 and any("mrr average 0.500 misses threshold > 0.7" in r for r in document["gate"]["reasons"])


def test_a_native_seed_file_keeps_its_dialect_and_kind_generic_opts_out(tmp_path: Path) -> None:
    (tmp_path / "ground_truth.json").write_text(json.dumps([
        {"question": "What is loss aversion?", "expected_sources": ["Loss aversion"], "sources": ["Loss aversion"],
         "output": "Losses loom larger than gains.", "num_tokens": 400}]))
    code = cli_main(["run", "-d", str(tmp_path / "ground_truth.json"), "-o", str(tmp_path / "out"),
                     "--progress", "none"])
    document = json.loads((tmp_path / "out" / "results.json").read_text())
    assert code == 0 and {"judge_score", "combined_score"} <= set(document["results"][0]["metrics"])
    assert document["thresholds"]["mrr"] == {"gt": 0.7}
    (tmp_path / "evalgate.yaml").write_text("kind: generic\n")
    code = cli_main(["run", "-d", str(tmp_path / "ground_truth.json"), "-o", str(tmp_path / "out"),
                     "--progress", "none", "--config", str(tmp_path / "evalgate.yaml")])
    document = json.loads((tmp_path / "out" / "results.json").read_text())
    assert code == 0 and "judge_score" not in document["results"][0]["metrics"]
    assert "mrr" not in document["thresholds"]


def test_validate_explain_lists_each_metric_with_its_threshold_and_why(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dataset = tmp_path / "cases.yaml"
    dataset.write_text(HELPDESK.replace("    rules:", "    metrics: [safety]\n    rules:"), encoding="utf-8")
    assert cli_main(["validate", "-d", str(dataset), "--explain"]) == 0
    out = capsys.readouterr().out
    case_block, _, judged = out.partition("\njudged metrics\n")
    lines = {line.split()[0]: line for line in case_block.splitlines() if line.startswith("  ")}
    assert set(lines) == {"hit_rate", "mrr", "precision_at_k", "recall_at_k", "rules", "safety"}
    assert judged.splitlines()[0].startswith("  safety: judged — needs a judge")  # whether it gates, in one line
    assert "≥ 0.8 (default) — the case has expected_sources" in lines["hit_rate"]
    assert "informational — the case has expected_sources" in lines["mrr"]
    assert "≥ 0.8 (default) — the case's metrics: names it" in lines["safety"]
    assert cli_main(["validate", "-d", str(dataset), "--explain", "--compat", "seed000", "--format", "json"]) == 0
    explained = json.loads(capsys.readouterr().out)["explain"][0]
    rows = {row["metric"]: row for row in explained["metrics"]}
    assert rows["mrr"]["threshold"] == {"gt": 0.7} and rows["mrr"]["threshold_from"] == "seed 000 (Wikipedia agent)'s default"
    assert rows["judge_score"]["why"] == ("seed 000 (Wikipedia agent) dialect: the case has expected_sources "
                                          "(--compat seed000)")


def test_every_built_in_metric_has_a_generic_rule_and_owned_metrics_say_what_they_need() -> None:
    builtins = all_metrics()
    assert set(WHEN) == set(builtins)
    for name, owner in OWNER.items():
        assert WHEN[name] == NAMED and owned_when(name) and owner in DIALECTS
    assert native_format({"question": "q", "expected_sources": []}, None)[0] == "seed000"
    assert native_format({"id": "a", "question": "q", "expected_sources": []}, None)[0] is None
    assert native_format({"input": "q", "category": "safety"}, None)[0] is None


def test_evalgate_explain_is_validate_explain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dataset = tmp_path / "cases.yaml"
    dataset.write_text(HELPDESK, encoding="utf-8")
    assert cli_main(["explain", "-d", str(dataset)]) == 0
    explained = capsys.readouterr().out
    assert cli_main(["validate", "-d", str(dataset), "--explain"]) == 0
    assert capsys.readouterr().out == explained and "hit_rate" in explained


def test_explain_names_a_cases_own_assert_entries(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dataset = tmp_path / "cases.yaml"
    dataset.write_text("- {id: a, input: q, output: ok, assert: [{criteria: Says ok., threshold: 0.6}]}\n")
    assert cli_main(["explain", "-d", str(dataset)]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if "case_criteria" in line)
    assert "≥ 0.6 (the case's assert: entry) — the case's assert: entry" in line
