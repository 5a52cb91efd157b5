"""Issue #22, item 1: nothing in a pull request's checkout stands in for evidence, and no database it
commits runs code in evalgate's process.

A forged judge cache (made by one run against a judge that always says 1.0) is committed in the output
directory and named by the pull request's ``evalgate.yaml``; the real judge scores every answer 0.1
against a 0.7 threshold. Through the Action's entry module (Actions-like environment, ``pull_request``
event) and the CLI in a pull-request job, the live judge is called for every case and the gate fails.
Committed results databases with triggers, views or no tables, and a directory named results.json, end
in normal time with the verdict or one clear error — never ``internal error``."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli.action import run_action
from tests.hostile.helpers import write_cases
from tests.servers.openai_server import Judge, OpenAIServer

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-trust-test-key-0123456789"
CRITERIA = "The answer names the topic of the question and gives a next step."
VERDICT = {"score": 1.0}


def judged_cases() -> list[dict[str, Any]]:
    return [{"id": f"case-{i}", "input": f"Question {i}: how do I rotate the key?",
             "output": f"Answer {i}: open the settings page.", "passing_criteria": CRITERIA,
             "metrics": ["relevancy"]} for i in range(6)]


@pytest.fixture
def judge() -> Iterator[OpenAIServer]:
    with OpenAIServer(api_key=KEY, judge=Judge(score=lambda prompt: VERDICT["score"])) as server:
        yield server


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_", "EVALGATE_"))}
    return {**env, "PYTHONPATH": str(REPO), "NO_COLOR": "1", "LOCAL_JUDGE_API_KEY": KEY,
            "EVALGATE_CALIBRATION": "trust", "EVALGATE_JUDGE_SHARED_CACHE": "none", **extra}  # the judge gates (as before calibration), so a forged cache could matter


def forge_cache(judge: OpenAIServer, tmp_path: Path) -> Path:
    """A real judge-cache.db holding 1.0 for every case: one run against the always-1.0 judge."""
    VERDICT["score"] = 1.0
    data = write_cases(tmp_path / "forge" / "evals" / "cases.json", judged_cases())
    out = tmp_path / "forge" / "out"
    done = subprocess.run([sys.executable, "-m", "evalgate", "run", "-d", str(data), "-o", str(out),
                           "--judge-provider", "local", "--judge-base-url", judge.base_url + "/v1",
                           "--progress", "none"], env=cli_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    judge.reset()
    VERDICT["score"] = 0.1
    return out / "judge-cache.db"


def pull_request_checkout(tmp_path: Path, forged: Path) -> Path:
    """The checkout of a PR that commits the forged cache where the run writes its own and names a copy."""
    workspace = tmp_path / "ws"
    write_cases(workspace / "evals" / "cases.json", judged_cases())
    (workspace / "evalgate-results").mkdir(parents=True)
    shutil.copyfile(forged, workspace / "evalgate-results" / "judge-cache.db")
    (workspace / "forged").mkdir()
    shutil.copyfile(forged, workspace / "forged" / "judge-cache.db")
    (workspace / "evalgate.yaml").write_text("judge_cache: forged/judge-cache.db\n"
                                             "metric_thresholds:\n  relevancy: {min: 0.7}\n")
    return workspace


def actions_env(tmp_path: Path, workspace: Path, event: str = "pull_request", **inputs: str) -> dict[str, str]:
    temp = tmp_path / "runner-temp"
    commands = temp / "_runner_file_commands"
    commands.mkdir(parents=True, exist_ok=True)
    for name in ("set_output_1", "step_summary_1"):
        (commands / name).write_text("")
    env = {"GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(workspace), "RUNNER_TEMP": str(temp),
           "GITHUB_OUTPUT": str(commands / "set_output_1"), "GITHUB_STEP_SUMMARY": str(commands / "step_summary_1"),
           "GITHUB_EVENT_NAME": event, "GITHUB_REPOSITORY": "o/r", "INPUT_DATASET": "evals",
           "INPUT_UPLOAD-ARTIFACTS": "false", "INPUT_COMMENT": "never", "INPUT_BASELINE": "none",
           "INPUT_PROGRESS": "none", "LOCAL_JUDGE_API_KEY": KEY, "EVALGATE_CALIBRATION": "trust"}
    env.update({f"INPUT_{name.upper().replace('_', '-')}": value for name, value in inputs.items()})
    return env


def outputs(env: dict[str, str]) -> str:
    return Path(env["GITHUB_OUTPUT"]).read_text(encoding="utf-8")


# --- forged judge caches -------------------------------------------------------------------------------


def test_a_forged_cache_committed_and_named_never_passes_the_actions_gate(tmp_path: Path, judge: OpenAIServer,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    workspace = pull_request_checkout(tmp_path, forge_cache(judge, tmp_path))
    env = actions_env(tmp_path, workspace, judge_provider="local", judge_base_url=judge.base_url + "/v1")
    monkeypatch.chdir(workspace)
    lines: list[str] = []
    code = run_action(env, emit=lines.append)
    assert code == 1, lines
    assert len(judge.chat_requests()) == 6  # the live judge gave every verdict
    document = json.loads((workspace / "evalgate-results" / "results.json").read_text())
    assert document["gate"]["passed"] is False
    assert document["summary"]["judge_calls"]["made"] == 6 and "base_cache" not in document["summary"]["judge_calls"]
    assert {r["metrics"]["relevancy"]["value"] for r in document["results"]} == {0.1}
    notices = "\n".join(line for line in lines if line.startswith("::notice"))
    assert "forged/judge-cache.db: named by" in notices and "a file of the pull request; not used" in notices
    assert "was in the checkout before this pull request run" in notices
    assert list((workspace / "evalgate-results").glob("judge-cache.db.rejected-*"))  # kept aside, not deleted
    assert re.search(r"^passed<<(\S+)\nfalse\n\1$", outputs(env), re.M)


def test_a_forged_cache_is_not_used_by_the_cli_in_a_pull_request_job(tmp_path: Path, judge: OpenAIServer) -> None:
    workspace = pull_request_checkout(tmp_path, forge_cache(judge, tmp_path))
    done = subprocess.run([sys.executable, "-m", "evalgate", "run", "-d", "evals", "--judge-provider", "local",
                           "--judge-base-url", judge.base_url + "/v1", "--progress", "none"], cwd=workspace,
                          env=cli_env(GITHUB_ACTIONS="true", GITHUB_EVENT_NAME="pull_request"),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert len(judge.chat_requests()) == 6
    assert "a file of the pull request; not used" in done.stderr + done.stdout


def test_the_workflows_judge_cache_input_is_still_used(tmp_path: Path, judge: OpenAIServer,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``judge-cache`` input is the workflow author's choice (e.g. restored by actions/cache)."""
    forged = forge_cache(judge, tmp_path)
    workspace = tmp_path / "ws"
    write_cases(workspace / "evals" / "cases.json", judged_cases())
    restored = tmp_path / "runner-temp" / "cache"
    restored.mkdir(parents=True)
    shutil.copyfile(forged, restored / "judge-cache.db")
    env = actions_env(tmp_path, workspace, judge_provider="local", judge_base_url=judge.base_url + "/v1",
                      judge_cache=str(restored))
    monkeypatch.chdir(workspace)
    lines: list[str] = []
    assert run_action(env, emit=lines.append) == 0, lines
    assert judge.chat_requests() == []


# --- committed databases ----------------------------------------------------------------------------


CASES = [{"id": "good", "input": "q", "output": "an answer", "expected_keywords": ["answer"]},
         {"id": "bad", "input": "q", "output": "nothing useful", "expected_keywords": ["answer"]}]

SLOW = ("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300000000) "
        "SELECT count(*) FROM n")


def evalgate_schema(conn: sqlite3.Connection) -> None:
    from evalgate.store.schema import migrate

    migrate(conn, "test")


def slow_trigger(conn: sqlite3.Connection) -> None:
    evalgate_schema(conn)
    conn.execute(f"CREATE TRIGGER slow AFTER INSERT ON eg_cases BEGIN SELECT ({SLOW}); END")
    conn.execute(f"CREATE TRIGGER slow_runs AFTER INSERT ON eg_runs BEGIN SELECT ({SLOW}); END")


def rewriting_trigger(conn: sqlite3.Connection) -> None:
    evalgate_schema(conn)
    conn.execute("CREATE TRIGGER lie AFTER INSERT ON eg_cases BEGIN UPDATE eg_cases SET passed = 1, status = 'passed'"
                 " WHERE rowid = new.rowid; END")


def no_tables(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA user_version = 2")


def runs_view(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE t (x)")
    conn.execute("CREATE VIEW eg_runs AS SELECT x AS run_id, x AS timestamp, x AS status, x AS document FROM t")


def generated_column(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE eg_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL, "
                 "slow INTEGER GENERATED ALWAYS AS (length(key)) VIRTUAL)")


def current_version_no_tables(conn: sqlite3.Connection) -> None:
    """Committed with this evalgate's schema version and no table (was "internal error: no such table")."""
    from evalgate.store.schema import SCHEMA_VERSION

    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def tables_without_calibrations(conn: sqlite3.Connection) -> None:
    """Version 2's tables under the current version number (eg_calibrations missing)."""
    from evalgate.store.schema import MIGRATIONS, SCHEMA_VERSION

    for migration in MIGRATIONS[:2]:
        for statement in migration.statements():
            conn.execute(statement)
    conn.execute(f"INSERT INTO eg_meta VALUES ('schema_version', '{SCHEMA_VERSION}')")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def version_not_recorded(conn: sqlite3.Connection) -> None:
    """Every table, but the version in eg_meta is not the one evalgate would have written."""
    from evalgate.store.schema import MIGRATIONS, SCHEMA_VERSION

    for migration in MIGRATIONS:
        for statement in migration.statements():
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


@pytest.mark.parametrize("build", [slow_trigger, rewriting_trigger, no_tables, runs_view, generated_column,
                                   current_version_no_tables, tables_without_calibrations, version_not_recorded],
                         ids=lambda f: f.__name__)
def test_a_committed_results_db_never_runs_its_code(tmp_path: Path, build: Any) -> None:
    workspace = tmp_path / "ws"
    write_cases(workspace / "evals" / "cases.json", CASES)
    db = workspace / "evalgate-results" / "results.db"
    db.parent.mkdir(parents=True)
    with closing(sqlite3.connect(db, isolation_level=None)) as conn:
        build(conn)
    env = actions_env(tmp_path, workspace)
    lines: list[str] = []
    started = time.monotonic()
    code = run_action(env, emit=lines.append)
    assert time.monotonic() - started < 30
    assert code == 1, lines  # the verdict: "bad" fails
    assert not any("internal error" in line for line in lines), lines
    notices = [line for line in lines if line.startswith("::notice") and "not used" in line]
    assert len(notices) == 1 and "rejected-" in notices[0], lines
    with closing(sqlite3.connect(db)) as conn:
        stored = dict(conn.execute("SELECT case_id, status FROM eg_cases").fetchall())
        kinds = {row[0] for row in conn.execute("SELECT type FROM sqlite_master")}
    assert stored == {"good": "passed", "bad": "failed"}
    assert not kinds & {"trigger", "view"}


@pytest.mark.parametrize("kind", ["not-sqlite", "directory"])
def test_a_committed_results_db_that_is_no_evalgate_database_is_set_aside(tmp_path: Path, kind: str) -> None:
    workspace = tmp_path / "ws"
    write_cases(workspace / "evals" / "cases.json", CASES)
    db = workspace / "evalgate-results" / "results.db"
    db.parent.mkdir(parents=True)
    if kind == "not-sqlite":
        db.write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)
    else:
        db.mkdir()
    lines: list[str] = []
    code = run_action(actions_env(tmp_path, workspace), emit=lines.append)
    assert code == 1, lines
    assert not any("internal error" in line for line in lines), lines
    notices = [line for line in lines if line.startswith("::notice") and "not used" in line]
    assert len(notices) == 1 and "rejected-" in notices[0], lines
    with closing(sqlite3.connect(db)) as conn:
        assert dict(conn.execute("SELECT case_id, status FROM eg_cases").fetchall()) == {"good": "passed",
                                                                                          "bad": "failed"}


@pytest.mark.parametrize("build", [current_version_no_tables, "symlink"], ids=["no-tables", "symlink"])
def test_the_cli_sets_a_foreign_results_db_aside_with_one_notice(tmp_path: Path, build: Any) -> None:
    """``evalgate run -o DIR`` (no Action path checks): a results.db evalgate did not write is set aside."""
    write_cases(tmp_path / "cases.json", CASES)
    db = tmp_path / "out" / "results.db"
    db.parent.mkdir()
    elsewhere = tmp_path / "elsewhere.db"
    if build == "symlink":
        from evalgate.store.sqlite import open_database

        open_database(elsewhere).close()  # a real evalgate database elsewhere
        db.symlink_to(elsewhere)
    else:
        with closing(sqlite3.connect(db, isolation_level=None)) as conn:
            build(conn)
    done = subprocess.run([sys.executable, "-m", "evalgate", "run", "-d", "cases.json", "-o", "out", "--progress",
                           "none"], cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "internal error" not in done.stderr
    notices = [line for line in done.stderr.splitlines() if "not used" in line]
    assert len(notices) == 1 and "rejected-" in notices[0], done.stderr
    assert db.is_file() and not db.is_symlink()
    if build == "symlink":
        with closing(sqlite3.connect(elsewhere)) as conn:
            assert conn.execute("SELECT COUNT(*) FROM eg_cases").fetchone()[0] == 0  # nothing written there


def test_a_directory_named_results_json_is_one_clear_error(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    write_cases(workspace / "evals" / "cases.json", CASES)
    (workspace / "evalgate-results" / "results.json").mkdir(parents=True)
    env = actions_env(tmp_path, workspace)
    lines: list[str] = []
    assert run_action(env, emit=lines.append) == 2
    errors = [line for line in lines if line.startswith("::error")]
    assert len(errors) == 1 and "results.json is in the way" in errors[0], lines


def test_a_judge_cache_with_a_trigger_is_set_aside_in_a_trusted_run(tmp_path: Path, judge: OpenAIServer) -> None:
    """On a push the output directory's cache is the repository's own, but a trigger in it still never runs."""
    forged = forge_cache(judge, tmp_path)
    with closing(sqlite3.connect(forged, isolation_level=None)) as conn:
        conn.execute(f"CREATE TRIGGER slow BEFORE INSERT ON judge_cache BEGIN SELECT ({SLOW}); END")
    out = forged.parent
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "evalgate", "run", "-d", str(tmp_path / "forge" / "evals"),
                           "-o", str(out), "--judge-provider", "local", "--judge-base-url", judge.base_url + "/v1",
                           "--progress", "none", "--no-cache"], env=cli_env(), capture_output=True, text=True,
                          timeout=120)
    assert time.monotonic() - started < 60
    assert done.returncode == 1, done.stderr
    assert "holds a trigger" in done.stderr and len(judge.chat_requests()) == 6


@pytest.mark.parametrize("verb", [["history", "--db"], ["report"], ["compare"]],
                         ids=["history", "report", "compare"])
def test_a_database_named_on_the_command_line_with_code_in_it_is_one_error(tmp_path: Path, verb: list[str]) -> None:
    db = tmp_path / "results.db"
    with closing(sqlite3.connect(db, isolation_level=None)) as conn:
        slow_trigger(conn)
        conn.execute("CREATE VIEW v AS SELECT 1")
    args = [*verb, str(db)] if verb[0] != "compare" else ["compare", str(db), str(db)]
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "evalgate", *args], env=cli_env(), capture_output=True, text=True,
                          timeout=60)
    assert time.monotonic() - started < 30
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert str(db) in lines[0] and ("holds a trigger" in lines[0] or "holds a view" in lines[0])
