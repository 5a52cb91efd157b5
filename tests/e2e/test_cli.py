"""`evalgate` as a user runs it: each bundled suite end to end, exit codes, results.json against its
JSON Schema, seed 001's SQL queries against the database, and one-line user errors (exit 2)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from evalgate.store.results_json import SCHEMA_PATH

ROOT = Path(__file__).resolve().parents[2]
DEMO_SUITES = sorted(p.name for p in (ROOT / "datasets").iterdir() if p.is_dir() and p.name not in {"failing", "live"})
SCHEMA = json.loads(SCHEMA_PATH.read_text())


def evalgate(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("EVALGATE_")}
    full_env["EVALGATE_JUDGE_SHARED_CACHE"] = "none"  # the user-level shared judge cache stays out of tests
    full_env.update(env or {})
    full_env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "evalgate", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=300)


def check_results(path: Path) -> dict:
    document = json.loads(path.read_text())
    jsonschema.validate(document, SCHEMA)
    return document


@pytest.mark.parametrize("suite", DEMO_SUITES)
def test_each_demo_suite_passes(tmp_path: Path, suite: str) -> None:
    run = evalgate("run", "--dataset", str(ROOT / "datasets" / suite), "--output-dir", str(tmp_path), cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "evalgate ✅ PASSED" in run.stdout
    document = check_results(tmp_path / "results.json")
    assert document["gate"] == {"passed": True, "exit_code": 0, "reasons": []}
    assert document["summary"]["total_test_cases"] == len(document["results"]) >= 10
    assert all(r["source"].split(":")[-1].isdigit() for r in document["results"])
    assert document["metadata"]["datasets"][0]["cases"] >= 10


@pytest.mark.parametrize("failing", sorted(p.name for p in (ROOT / "datasets" / "failing").iterdir()))
def test_each_failing_suite_fails_with_reasons(tmp_path: Path, failing: str) -> None:
    run = evalgate("run", "-d", str(ROOT / "datasets" / "failing" / failing), "-o", str(tmp_path), cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    document = check_results(tmp_path / "results.json")
    assert not document["gate"]["passed"] and document["gate"]["reasons"]
    assert document["summary"]["total_failed"] + document["summary"]["total_errored"] > 0


def test_default_run_is_the_passing_demo_and_sqlite_answers_seed_001_queries(tmp_path: Path) -> None:
    first = evalgate("run", "-o", str(tmp_path), cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    second = evalgate("eval", "--fixtures", str(ROOT / "datasets" / "failing"), "--db", str(tmp_path / "results.db"),
                      "--format", "json", "-o", str(tmp_path / "second"), cwd=tmp_path)
    assert second.returncode == 1
    # `eval` is seed 001's spelling: --format json prints seed 001's document (jq .pass_rate works) and nothing else
    summary = json.loads(second.stdout)
    assert set(summary) == {"run_id", "pass_rate", "total_test_cases", "total_passed", "total_failed",
                            "average_scores", "thresholds_passed"}
    printed = check_results(tmp_path / "second" / "results.json")
    assert printed["run_id"] == summary["run_id"] and printed["summary"]["pass_rate"] == summary["pass_rate"]
    conn = sqlite3.connect(tmp_path / "results.db")
    runs = conn.execute("SELECT run_id, timestamp_utc, pass_rate, total_test_cases, total_passed, total_failed "
                        "FROM eval_runs ORDER BY timestamp_utc DESC LIMIT 10").fetchall()
    assert len(runs) == 2 and {r[0] for r in runs} == {printed["run_id"], check_results(tmp_path / "results.json")["run_id"]}
    failing = conn.execute("SELECT test_description, COUNT(*) as failed_metrics, "
                           "GROUP_CONCAT(metric_name || ':' || metric_value) as details FROM eval_results "
                           "WHERE overall_passed = 0 GROUP BY test_description ORDER BY failed_metrics DESC").fetchall()
    assert len(failing) >= printed["summary"]["total_failed"]
    trend = conn.execute("SELECT er.metric_name, AVG(er.metric_value), COUNT(*) FROM eval_results er "
                         "JOIN eval_runs r ON er.eval_run_id = r.run_id GROUP BY er.metric_name").fetchall()
    assert {"mention_f1", "hit_rate", "workflow", "composite", "case_passed"} <= {row[0] for row in trend}


def test_validate_is_a_dry_run(tmp_path: Path) -> None:
    run = evalgate("validate", cwd=tmp_path, env={"OPENAI_API_KEY": "sk-should-not-be-used", "HTTPS_PROXY": "http://127.0.0.1:9"})
    assert run.returncode == 0, run.stderr
    assert "no network call" in run.stdout
    as_json = json.loads(evalgate("validate", "--format", "json", cwd=tmp_path).stdout)
    assert as_json["thresholds"]["mention_precision"] == {"min": 0.9}


@pytest.mark.parametrize(
    ("args", "env", "fragment"),
    [
        ((), {"EVALGATE_METRIC_THRESHOLDS": "{not json"}, "EVALGATE_METRIC_THRESHOLDS: invalid JSON"),
        ((), {"EVALGATE_METRIC_THRESHOLDS": '{"mention_f2": 0.9}'}, "unknown metric 'mention_f2' (did you mean 'mention_f1'?)"),
        (("--case-ids", "no_such_case"), {}, "no_such_case"),
        (("--dataset", "missing/*.yaml"), {}, "missing/*.yaml"),
        (("--first-n", "0"), {}, "--first-n"),
        (("--judge-provider", "openai"), {"OPENAI_API_KEY": ""}, "OPENAI_API_KEY"),
    ],
)
def test_user_errors_are_one_line_exit_2(tmp_path: Path, args: tuple[str, ...], env: dict[str, str], fragment: str) -> None:
    run = evalgate("run", "-o", str(tmp_path), *args, cwd=tmp_path, env=env)
    assert run.returncode == 2, run.stdout + run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("evalgate: error: "), run.stderr
    assert fragment in lines[0]
    assert "Traceback" not in run.stderr + run.stdout


def test_bad_yaml_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("test_cases:\n  - intent_id: a\n    llm_answer_text: [unclosed\n")
    run = evalgate("run", "-d", str(bad), "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert run.returncode == 2 and "bad.yaml:" in run.stderr and "Traceback" not in run.stderr
    dup = tmp_path / "dup.yaml"
    dup.write_text("- {id: x, input: a, output: b}\n- {id: x, input: c, output: d}\n")
    run = evalgate("run", "-d", str(dup), "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert run.returncode == 2 and "dup.yaml:2" in run.stderr and "duplicate" in run.stderr.lower()


def test_version_and_help(tmp_path: Path) -> None:
    assert evalgate("--version", cwd=tmp_path).stdout.startswith("evalgate ")
    help_text = evalgate("run", "--help", cwd=tmp_path).stdout
    for flag in ("--dataset", "--case-ids", "--first-n", "--metric-thresholds", "--strict-metrics", "--fail-on-critical"):
        assert flag in help_text
