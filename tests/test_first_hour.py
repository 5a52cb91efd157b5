"""First-hour fixes: the exit status never depends on stdout being read."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def closed_stdout_status(args: list[str], cwd: Path) -> tuple[int, str]:
    """Run ``evalgate ARGS`` with a stdout pipe whose reader has gone (as ``| head -1`` leaves it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVALGATE_", "INPUT_", "GITHUB_"))}
    child = subprocess.Popen([sys.executable, "-m", "evalgate", *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()  # nobody reads: every write to stdout is EPIPE
    err = child.stderr.read()
    return child.wait(timeout=120), err


@pytest.mark.parametrize("verb", [["run", "--progress", "none"], ["run", "--progress", "none", "--format", "json"],
                                  ["validate"]])
def test_a_pass_exits_0_when_nobody_reads_stdout(tmp_path: Path, verb: list[str]) -> None:
    dataset = tmp_path / "cases.yaml"
    dataset.write_text("- {id: a, input: q, output: ok, rules: [{type: contains, value: ok}]}\n")
    code, err = closed_stdout_status([*verb, "-d", str(dataset), *(["-o", str(tmp_path / "out")]
                                                                     if verb[0] == "run" else [])], tmp_path)
    assert code == 0, err
    assert "Traceback" not in err


def test_a_failure_still_exits_1_when_nobody_reads_stdout(tmp_path: Path) -> None:
    code, err = closed_stdout_status(["run", "--progress", "none", "-d", str(ROOT / "datasets" / "failing"),
                                      "-o", str(tmp_path / "out")], tmp_path)
    assert code == 1, err
