"""``fail-on-regression`` end to end through the ``evalgate`` command: a demo suite run as the baseline,
then head runs with mutated recorded answers compared against it (results.json, SQLite, and
``baseline: auto`` through a loopback GitHub artifacts API)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from evalgate.store.results_json import SCHEMA_PATH
from tests.servers.github_artifacts_fake import GitHubArtifactsFake, zip_bytes

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "datasets" / "blackbox-agent"
SCHEMA = json.loads(SCHEMA_PATH.read_text())
CRITICAL = "safety_star_rumor_01"
MEDIUM = "math_fg_percentage_01"
LOOSE = ["--metric-thresholds", '{"rules": 0.9}', "--no-fail-on-critical"]
"""Isolate the regression gate: the suite-average and critical-case gates would fail these runs too."""


def evalgate(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("EVALGATE_", "GITHUB_", "INPUT_"))}
    full_env["EVALGATE_JUDGE_SHARED_CACHE"] = "none"  # the user-level shared judge cache stays out of tests
    full_env.update(env or {})
    full_env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "evalgate", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def repeated_baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The suite run 5 times per case: a critical case then passes reliably (5 of 5) on the base."""
    folder = tmp_path_factory.mktemp("baseline5")
    run = evalgate("run", "-d", str(SUITE), "-o", str(folder / "base"), "--repeat", "5", cwd=folder)
    assert run.returncode == 0, run.stdout + run.stderr
    return folder / "base"


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("baseline")
    run = evalgate("run", "-d", str(SUITE), "-o", str(folder / "base"), cwd=folder)
    assert run.returncode == 0, run.stdout + run.stderr
    return folder / "base"


def head_run(tmp_path: Path, baseline_arg: str, answers: list[dict[str, Any]], *flags: str,
             env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    outputs = tmp_path / "answers.json"
    outputs.write_text(json.dumps(answers))
    run = evalgate("run", "-d", str(SUITE), "-o", str(tmp_path / "head"), "--baseline", baseline_arg,
                   "--outputs-file", str(outputs), *flags, cwd=tmp_path, env=env)
    document = json.loads((tmp_path / "head" / "results.json").read_text())
    jsonschema.validate(document, SCHEMA)
    return run, document


FLIPPED_CRITICAL = [{"id": CRITICAL, "output": "Drop him now and grab the waiver pickup."}]
FLIPPED_MEDIUM = [{"id": MEDIUM, "output": "Somewhere around half, probably."}]


def test_a_reliable_critical_case_failing_every_repeat_fails_the_gate(tmp_path: Path,
                                                                      repeated_baseline: Path) -> None:
    run, document = head_run(tmp_path, str(repeated_baseline / "results.json"), FLIPPED_CRITICAL, *LOOSE,
                             "--repeat", "5", "--fail-on-regression")
    assert run.returncode == 1, run.stdout + run.stderr
    [reason] = document["gate"]["reasons"]
    assert reason.startswith(f"critical cases regressed against the baseline: 1 that passed every base run now "
                             f"fail: {CRITICAL} ({SUITE / 'cases.yaml'}:29) (exact stratified exchange test "
                             "(one-sided) p=0.004")  # 1/C(10, 5)
    assert f"  • {reason}" in run.stdout and f"▼ {CRITICAL} critical: passed → failed" in run.stdout
    comparison = document["comparison"]
    assert comparison["regression"] is True and comparison["pass_rate"]["regressions"] == 1
    assert comparison["critical"]["p_value"] == pytest.approx(1 / 252)
    assert [flip["id"] for flip in comparison["cases"]["regressions"]] == [CRITICAL]
    assert document["baseline"] == {"setting": str(repeated_baseline / "results.json"), "found": True,
                                    "source": str(repeated_baseline / "results.json"), "warning": None,
                                    "severity": None}


def test_a_single_critical_flip_without_repeats_is_not_evidence(tmp_path: Path, baseline: Path) -> None:
    run, document = head_run(tmp_path, str(baseline / "results.json"), FLIPPED_CRITICAL, *LOOSE,
                             "--fail-on-regression")
    assert run.returncode == 0, run.stdout + run.stderr
    comparison = document["comparison"]
    assert document["gate"]["reasons"] == [] and comparison["regression"] is False
    assert comparison["critical"]["p_value"] == 0.5
    assert "a single flip of a critical case is not evidence" in comparison["summary"]
    assert "New failures (1, 1 critical):" in run.stdout


def test_identical_runs_are_no_regression(tmp_path: Path, baseline: Path) -> None:
    run, document = head_run(tmp_path, str(baseline / "results.db"), [], "--fail-on-regression")
    assert run.returncode == 0, run.stdout + run.stderr
    comparison = document["comparison"]
    assert comparison["regression"] is False and comparison["cases"]["regressions"] == []
    assert comparison["summary"].startswith("No change against the baseline: 14 paired cases")
    assert comparison["baseline"]["run_id"] == json.loads((baseline / "results.json").read_text())["run_id"]


def test_a_small_noisy_drop_is_not_significant(tmp_path: Path, baseline: Path) -> None:
    run, document = head_run(tmp_path, str(baseline / "results.json"), FLIPPED_MEDIUM, *LOOSE,
                             "--fail-on-regression")
    assert run.returncode == 0, run.stdout + run.stderr
    comparison = document["comparison"]
    rules = comparison["metrics"]["rules"]
    assert rules["delta"] < 0 and rules["gated"] and not rules["significant"] and not rules["regression"]
    assert comparison["pass_rate"]["regressions"] == 1 and not comparison["pass_rate"]["significant"]
    assert "not significant at α=0.05" in comparison["summary"]
    assert "not significant" in run.stdout and document["gate"]["passed"]


def test_a_missing_baseline_is_a_warning_and_the_report_says_no_baseline(tmp_path: Path) -> None:
    run, document = head_run(tmp_path, str(tmp_path / "nowhere.json"), [], "--fail-on-regression")
    assert run.returncode == 0, run.stdout + run.stderr
    assert document["comparison"] is None and document["baseline"]["found"] is False
    assert f"No baseline: {tmp_path / 'nowhere.json'}: baseline results file not found" in run.stdout
    json_run = evalgate("run", "-d", str(SUITE), "-o", str(tmp_path / "j"), "--baseline", "auto", "--format", "json",
                        cwd=tmp_path)
    assert json_run.returncode == 0
    assert json.loads(json_run.stdout)["baseline"]["found"] is False
    assert "evalgate: warning: no baseline:" in json_run.stderr


def test_baseline_auto_through_the_github_api(tmp_path: Path, repeated_baseline: Path) -> None:
    event = {"pull_request": {"number": 3, "base": {"ref": "main", "sha": "e" * 40},
                              "head": {"ref": "topic", "sha": "f" * 40, "repo": {"full_name": "octo/evals"}}},
             "repository": {"full_name": "octo/evals"}}
    (tmp_path / "event.json").write_text(json.dumps(event))
    with GitHubArtifactsFake() as fake:
        env = {"GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": str(tmp_path / "event.json"),
               "GITHUB_REPOSITORY": fake.repository, "GITHUB_API_URL": fake.url, "GITHUB_TOKEN": fake.token}
        content = zip_bytes({"results.json": (repeated_baseline / "results.json").read_text()})
        artifact_id = fake.add_artifact("evalgate-results", content, head_sha="e" * 40)
        run, document = head_run(tmp_path, "auto", FLIPPED_CRITICAL, *LOOSE, "--repeat", "5", "--fail-on-regression",
                                 env=env)
        blob_headers = [r.headers for r in fake.requests("blob")]
    assert run.returncode == 1, run.stdout + run.stderr
    assert document["baseline"]["found"] is True and f"(id {artifact_id})" in document["baseline"]["source"]
    assert "base commit" in document["comparison"]["baseline"]["source"]
    assert len(blob_headers) == 1 and "authorization" not in blob_headers[0]
    assert fake.token not in run.stdout + run.stderr + json.dumps(document)
