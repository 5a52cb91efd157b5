"""examples/multi-turn/run.sh runs in CI: exit 0 with the agent as it is, exit 1 naming the turn when the
agent forgets earlier turns (BREAK=forget)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "multi-turn"


def run_example(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(EXAMPLE / "run.sh")], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHON": sys.executable, "OUT_DIR": str(tmp_path), **env})


def test_the_example_passes(tmp_path: Path) -> None:
    done = run_example(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads((tmp_path / "results" / "results.json").read_text())
    replan = next(r for r in document["results"] if r["id"] == "replan-after-injury")
    assert [t["output"] for t in replan["conversation"]["turns"]] == ["Start Caruso.", "Start Reid."]
    assert replan["conversation"]["conversation_id"]  # taken from the agent's first reply


@pytest.mark.parametrize("broken", ["forget"])
def test_a_forgetful_agent_fails_naming_the_turn(tmp_path: Path, broken: str) -> None:
    done = run_example(tmp_path, BREAK=broken)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "turn 2 “Caruso is now OUT — replan” failed: keyword_coverage 0.000 (needs ≥ 0.6): missing keywords: " \
           "Reid" in done.stdout
    assert "turn 3 “What is my team called?” failed" in done.stdout
