"""The console script: exit codes and output must be exactly those of ``main``, including large JSON on a
pipe and argparse's own exits."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from evalgate import __version__

REPO = Path(__file__).resolve().parents[2]


def console(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    code = "import sys; from evalgate.cli.main import console_main; sys.argv = ['evalgate', *sys.argv[1:]]; console_main()"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_version_and_argparse_errors_keep_their_exit_codes() -> None:
    version = console("--version")
    assert (version.returncode, version.stdout.strip()) == (0, f"evalgate {__version__}")
    bad = console("run", "--no-such-flag")
    assert bad.returncode == 2 and "unrecognized arguments: --no-such-flag" in bad.stderr


def test_user_error_gate_failure_and_a_flushed_json_document(tmp_path: Path) -> None:
    missing = console("validate", "-d", str(tmp_path / "absent.yaml"))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "absent.yaml" in missing.stderr
    failing = console("run", "-d", "datasets/failing", "--output-dir", str(tmp_path / "f"), "--progress", "none")
    assert failing.returncode == 1
    passing = console("run", "--format", "json", "--output-dir", str(tmp_path / "p"), "--progress", "none")
    assert passing.returncode == 0
    document = json.loads(passing.stdout)  # the whole document reached the pipe
    assert document["summary"]["total_test_cases"] == len(document["results"]) > 50
    assert json.loads((tmp_path / "p" / "results.json").read_text())["run_id"] == document["run_id"]
