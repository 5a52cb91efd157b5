"""Issue #31 item 4 against the real model: SmolLM2-135M judging relevancy on six hand-written cases of
``datasets/live`` through ``evalgate run``. Its reasonings start with JSON debris and echo the prompt's fence
markup (tests/fixtures/smollm2_replies holds the same kind of replies); judge health refuses them, every refused
verdict errors its case, the gate fails, and results.json names the causes with examples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from .harness import run_evalgate

REPO = Path(__file__).resolve().parents[2]
NEW_CHECKS = ("fence_echo", "placeholder_reasoning", "copied_prompt", "json_debris", "repeated_reasoning")


@pytest.mark.realmodel
def test_smollm2_relevancy_reasoning_is_refused_and_reported(llama_server: str, tmp_path: Path) -> None:
    labels = yaml.safe_load((REPO / "datasets" / "live" / "correctness.labels.yaml").read_text())["cases"]
    cases = [{"id": e["id"], "input": e["input"], "output": e["output"], "expected_output": e["expected_output"],
              "passing_criteria": "Answers the question that was asked.", "metrics": ["relevancy"]}
             for e in labels[8:14]]
    (tmp_path / "cases.json").write_text(json.dumps(cases), encoding="utf-8")
    run = run_evalgate(["-d", "cases.json"], workdir=tmp_path, judge_url=llama_server)
    assert run.results is not None, run.stderr[-2000:]
    health = run.results["metrics"]["relevancy"]["judge_health"]
    refused = sum(health[name] for name in NEW_CHECKS)
    assert health["verdicts"] == 6 and refused >= 3, health  # the checks before issue #31 accepted these
    assert health["examples"] and all(len(e["text"]) <= 161 for e in health["examples"])
    for case in run.results["results"]:
        metric = case["metrics"]["relevancy"]
        if metric["details"].get("judge_failure") == "unhealthy":
            assert metric["status"] == "unavailable" and case["status"] == "errored"
    assert run.returncode == 1 and run.results["gate"]["exit_code"] == 1  # missing evidence never passes
    assert "Judge health: 6 verdict(s)" in run.stdout
