"""The gate's own policy under test (issue 22's loosening checks): a hand-written policy snapshot, the
pull-request event that carries the approval label, a workspace's dataset and evalgate.yaml (``Suite``), and
results.json read back against its schema. The ``cli`` fixture (tests/support/fixtures.py) runs ``evalgate``."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from evalgate.store.results_json import SCHEMA_PATH

SCHEMA = json.loads(SCHEMA_PATH.read_text())


def policy(**changes: Any) -> dict[str, Any]:
    """A hand-written snapshot (the shape ``verdict.policy.snapshot`` writes)."""
    base: dict[str, Any] = {
        "version": 1,
        "thresholds": {"hit_rate": {"min": 0.8}, "num_tokens": {"max": 4000.0}, "faithfulness": {"gt": 0.5}},
        "threshold_origins": {"hit_rate": "evalgate.yaml: thresholds"},
        "ungated": ["latency_ms"],
        "gate_changes": "report", "significance_level": 0.05, "fail_on_regression": True, "strict_metrics": True,
        "fail_on_critical": True, "min_pass_rate": 0.9, "max_errored": 0, "repeat_rule": "majority",
        "calibration": "required", "calibration_min_kappa": 0.6, "calibration_min_labels": 30,
        "calibration_floors": {"faithfulness": {"min_kappa": 0.7}},
        "selection": {"case_ids": 0, "first_n": None, "category": [], "tags": []},
        "regression_tolerance": {"latency_ms": {"abs": 50.0, "rel": 0.1}},
        "optional_metrics": {"": ["context_recall"]},
        "origins": {"significance_level": "evalgate.yaml: significance_level"},
        "cases": {"count": 4, "digest": "x", "ids": ["a", "b", "c", "d"],
                  "critical": {"count": 2, "digest": "y", "ids": ["a", "b"]}},
    }
    base.update(changes)
    return base


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


def results(directory: Path) -> dict[str, Any]:
    document = json.loads((directory / "results.json").read_text(encoding="utf-8"))
    jsonschema.validate(document, SCHEMA)
    return document


def pr_event(labels: list[str]) -> dict[str, Any]:
    repo = {"full_name": "octo/evalgate-demo"}
    return {"action": "labeled", "number": 2, "repository": repo,
            "pull_request": {"number": 2, "labels": [{"name": name, "color": "ededed"} for name in labels],
                             "base": {"ref": "main", "repo": repo},
                             "head": {"ref": "loosen", "sha": "ec26c3e57ca3a959ca5aad62de7213c562f8c821",
                                      "repo": repo}}}


PR_ENV = {"GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": "pull_request"}


def ids(n: int) -> list[str]:
    width = max(2, len(str(n)))
    return [f"c{i:0{width}d}" for i in range(1, n + 1)]


def case(case_id: str, *, bad: bool, critical: bool, expected_output: bool = False) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": case_id, "input": f"which document answers {case_id}",
                             "expected_sources": [f"doc-{case_id}"],
                             "output": f"answer for {case_id}",
                             "sources": [f"wrong-{case_id}" if bad else f"doc-{case_id}"]}
    if expected_output:  # the bad answer is the text, its sources stay right
        entry["sources"] = [f"doc-{case_id}"]
        entry["expected_output"] = f"the refund policy for {case_id} allows returns within thirty days"
        entry["output"] = ("bananas grow in warm places" if bad
                           else f"the refund policy for {case_id} allows returns within thirty days")
    if critical:
        entry["risk_level"] = "critical"
    return entry


@dataclass
class Suite:
    """A workspace's dataset and evalgate.yaml, written by ``write``."""

    n: int = 10
    critical: tuple[str, ...] = ("c01",)
    bad: tuple[str, ...] = ()
    config: dict[str, Any] = field(default_factory=lambda: {"thresholds": {"hit_rate": 0.8}})
    expected_output: bool = False
    edit: Callable[[list[dict[str, Any]], Path], None] | None = None
    """The PR's change to its cases (and files beside them)."""

    def write(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        cases = [case(i, bad=i in self.bad, critical=i in self.critical, expected_output=self.expected_output)
                 for i in ids(self.n)]
        if self.edit is not None:
            self.edit(cases, folder)
        (folder / "cases.yaml").write_text(yaml.safe_dump({"suite": {"name": "support"}, "test_cases": cases},
                                                          sort_keys=False), encoding="utf-8")
        (folder / "evalgate.yaml").write_text(yaml.safe_dump(self.config), encoding="utf-8")
        return folder


ENV = {"OPENAI_API_KEY": "sk-test-not-a-secret-0000"}


JUDGE = {"provider": "openai", "model": "strict", "base_url": "https://judge.example", "temperature": 0.0,
         "temperatures": {}, "samples": 1, "seed": 1, "output": "auto"}


def full(**changes: Any) -> dict[str, Any]:
    recorded: dict[str, Any] = {
        "repeat": 3, "answer_source": {"target": "http", "identity": "a"}, "judge": dict(JUDGE), "simulator": "sim-a",
        "metric_definitions": {"exact": {"digest": "d1", "origin": "file://checks.py:exact"}},
        "suites": {"": "s0", "support": "s1"}, "max_answer_chars": 20000, "traces": True, "pairwise": True}
    return policy(**{**recorded, **changes})
