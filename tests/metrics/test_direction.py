"""Every metric has a direction, and the comparison with a baseline uses it (``evalgate run --baseline
--fail-on-regression``, the CLI in a subprocess): a code check declared in YAML says ``direction: lower``, or
is taken as lower-is-better from a ``max`` threshold with a notice; an error rate rising 0.16 → 0.40 is then a
regression, never an improvement. And where a metric is optional, cases that lose its value against the base
are counted and listed."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

CHECKS = '''
def error_rate(case, answer):
    """Share of the answer's ten sentences flagged as errors (lower is better)."""
    return answer.output.count("ERR") / 10.0
'''


def _write_cases(path: Path, rate: float, seed: int) -> None:
    rng = random.Random(seed)
    lines = ["cases:"]
    for i in range(40):
        errors = sum(rng.random() < rate for _ in range(10))
        lines.append(f"  - {{id: c{i}, input: q{i}, output: '{'ERR ' * errors}ok'}}")
    path.write_text("\n".join(lines) + "\n")


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evalgate", "run", "--progress", "none", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=180, env=dict(os.environ))


def _compare(tmp_path: Path, declaration: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    (tmp_path / "checks.py").write_text(CHECKS)
    (tmp_path / "evalgate.yaml").write_text("metrics:\n  - name: error_rate\n    check: file://checks.py:error_rate\n"
                                            + declaration)
    _write_cases(tmp_path / "base.yaml", 0.162, 1)
    _write_cases(tmp_path / "head.yaml", 0.402, 2)
    base = _run(tmp_path, "-d", "base.yaml", "-o", "base")
    assert base.returncode == 0, base.stdout + base.stderr
    head = _run(tmp_path, "-d", "head.yaml", "-o", "head", "--baseline", "base/results.json", "--fail-on-regression")
    return head, json.loads((tmp_path / "head" / "results.json").read_text())


@pytest.mark.parametrize("declaration", ["    direction: lower\n    threshold: 0.95\n",
                                         "    threshold: {max: 0.95}\n"], ids=["declared", "inferred"])
def test_a_rising_error_rate_is_a_regression(tmp_path: Path, declaration: str) -> None:
    head, document = _compare(tmp_path, declaration)
    row = document["comparison"]["metrics"]["error_rate"]
    assert document["metrics"]["error_rate"]["direction"] == "lower"
    assert row["direction"] == "lower" and row["delta"] > 0.15, row
    assert row["verdict"] == "regression" and not row["improvement"], row
    assert head.returncode == 1, head.stdout + head.stderr
    assert any(reason.startswith("error_rate regressed against the baseline") for reason in document["gate"]["reasons"])
    inferred = "lower values taken as better from its ≤ 0.95 threshold" in head.stderr
    assert inferred == ("direction" not in declaration), head.stderr


def test_direction_is_only_for_a_code_check(tmp_path: Path) -> None:
    (tmp_path / "evalgate.yaml").write_text("metrics:\n  - name: polite\n    criteria: The answer is polite.\n"
                                            "    direction: lower\n")
    (tmp_path / "cases.yaml").write_text("cases:\n  - {id: a, input: q, output: hi}\n")
    done = _run(tmp_path, "-d", "cases.yaml", "-o", "out")
    assert done.returncode == 2 and "'direction' is for a code check" in done.stderr, done.stderr


def test_cases_losing_an_optional_metrics_value_are_counted_and_listed(tmp_path: Path) -> None:
    def cases(lost: int) -> str:
        lines = ["suite: {name: faq, optional_metrics: [hit_rate]}", "cases:"]
        for i in range(8):
            sources = "" if i < lost else ", sources: [doc-1]"
            lines.append(f"  - {{id: c{i}, input: q{i}, output: a{i}, expected_sources: [doc-1]{sources}}}")
        return "\n".join(lines) + "\n"

    (tmp_path / "base.yaml").write_text(cases(0))
    (tmp_path / "head.yaml").write_text(cases(3))
    assert _run(tmp_path, "-d", "base.yaml", "-o", "base").returncode == 0
    head = _run(tmp_path, "-d", "head.yaml", "-o", "head", "--baseline", "base/results.json")
    document = json.loads((tmp_path / "head" / "results.json").read_text())
    lost = document["comparison"]["lost_values"]["hit_rate"]
    assert lost["count"] == 3 and [entry["id"] for entry in lost["cases"]] == ["c0", "c1", "c2"], lost
    assert lost["cases"][0]["source"] == "head.yaml:3"
    assert "hit_rate lost its value on 3 cases that had one on the baseline (c0 (head.yaml:3)" in head.stdout, head.stdout
