"""The results database's schema version and migrations (``evalgate.store.schema``): a new file, a file
written by evalgate's previous layout (schema 1, ``tests/fixtures/databases/results-schema-1.db``,
written by the evalgate of 2026-11-23), a file written by seed 001's own tool, and a file from the future."""

from __future__ import annotations

import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from evalgate.cli.main import main as cli_main
from evalgate.store.history import build_history
from evalgate.store.reader import load_results, load_results_sqlite
from evalgate.store.schema import SCHEMA_VERSION, migrate
from evalgate.store.sqlite import SQLiteStore

REPO = Path(__file__).resolve().parents[2]
SCHEMA_1_DB = REPO / "tests" / "fixtures" / "databases" / "results-schema-1.db"
SCHEMA_1_RUN = "20261123T232450Z-4d77e4"

SEED_001_SCHEMA = """
CREATE TABLE eval_runs (
    run_id TEXT PRIMARY KEY,
    timestamp_utc TEXT NOT NULL,
    total_test_cases INTEGER NOT NULL,
    total_passed INTEGER NOT NULL,
    total_failed INTEGER NOT NULL,
    pass_rate REAL NOT NULL,
    summary_json TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (datetime('now'))
);

CREATE INDEX idx_eval_runs_timestamp ON eval_runs(timestamp_utc);
CREATE INDEX idx_eval_runs_pass_rate ON eval_runs(pass_rate);

CREATE TABLE eval_results (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    eval_run_id TEXT NOT NULL,
    test_description TEXT NOT NULL,
    overall_passed INTEGER NOT NULL,
    metric_name TEXT NOT NULL,
    metric_value REAL NOT NULL,
    metric_passed INTEGER NOT NULL,
    metric_details_json TEXT,
    timestamp_utc TEXT NOT NULL,
    FOREIGN KEY (eval_run_id) REFERENCES eval_runs(run_id),
    UNIQUE(eval_run_id, test_description, metric_name)
);

CREATE INDEX idx_eval_results_run_id ON eval_results(eval_run_id);
CREATE INDEX idx_eval_results_metric_name ON eval_results(metric_name);
CREATE INDEX idx_eval_results_passed ON eval_results(overall_passed);
CREATE INDEX idx_eval_results_timestamp ON eval_results(timestamp_utc);
"""
"""Seed 001's "Database Schema" section, copied verbatim (not from evalgate's code)."""


def squeeze(sql: str) -> str:
    return re.sub(r"\s+", " ", sql).strip()


def seed_objects(connection: sqlite3.Connection) -> dict[str, str]:
    names = ("eval_runs", "eval_results", "idx_eval_runs_timestamp", "idx_eval_runs_pass_rate",
             "idx_eval_results_run_id", "idx_eval_results_metric_name", "idx_eval_results_passed",
             "idx_eval_results_timestamp")
    rows = connection.execute(f"SELECT name, sql FROM sqlite_master WHERE name IN ({', '.join('?' * len(names))})",
                              names).fetchall()
    return {name: squeeze(sql) for name, sql in rows}


def expected_seed_objects() -> dict[str, str]:
    statements = [squeeze(s) for s in SEED_001_SCHEMA.split(";") if s.strip()]
    return {re.match(r"CREATE (?:TABLE|INDEX) (\w+)", s).group(1): s for s in statements}  # type: ignore[union-attr]


def finish(store: SQLiteStore, passed: int = 1, total: int = 1) -> None:
    store.finish({"status": "completed", "summary": {"total_test_cases": total, "total_passed": passed,
                                                     "total_failed": total - passed, "total_errored": 0,
                                                     "pass_rate": passed / total}})


def meta(path: Path) -> dict[str, str]:
    with sqlite3.connect(path) as connection:
        return dict(connection.execute("SELECT key, value FROM eg_meta").fetchall())


def test_a_new_database_records_its_schema_version_and_keeps_seed_001_tables_verbatim(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    finish(SQLiteStore(path, "r1", "2026-11-23T10:00:00Z"))
    connection = sqlite3.connect(path)
    assert connection.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,) == (3,)
    assert seed_objects(connection) == expected_seed_objects()
    connection.close()
    recorded = meta(path)
    assert recorded["schema_version"] == "3" and recorded["created_by"].startswith("evalgate ")
    assert "migrated_from" not in recorded


def test_a_database_written_by_the_previous_layout_is_migrated_and_keeps_its_runs(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    shutil.copy(SCHEMA_1_DB, path)
    with sqlite3.connect(path) as old:
        assert old.execute("PRAGMA user_version").fetchone() == (1,)
        assert "eg_meta" not in {r[0] for r in old.execute("SELECT name FROM sqlite_master")}
        before = seed_objects(old)
    old.close()
    previous = load_results(path)  # reading does not migrate
    assert previous["run_id"] == SCHEMA_1_RUN and len(previous["results"]) == 4

    store = SQLiteStore(path, "20261124T000000Z-new000", "2026-11-24T00:00:00Z")
    finish(store, passed=1, total=1)
    connection = sqlite3.connect(path)
    assert connection.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    assert seed_objects(connection) == before == expected_seed_objects()
    assert connection.execute("SELECT COUNT(*) FROM eval_runs").fetchone() == (2,)
    connection.close()
    assert meta(path)["migrated_from"] == "1" and meta(path)["schema_version"] == str(SCHEMA_VERSION)
    assert load_results(path)["run_id"] == "20261124T000000Z-new000"  # the newest finished run
    old_run = load_results_sqlite(path, SCHEMA_1_RUN)
    assert old_run == {**previous, "results": old_run["results"]} and old_run["results"] == previous["results"]
    history = build_history(path, days=3650)
    assert [r.run_id for r in history.runs] == ["20261124T000000Z-new000", SCHEMA_1_RUN]


def test_a_seed_001_database_gains_evalgate_tables_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "eval_results.db"
    with sqlite3.connect(path) as seed:
        seed.executescript(SEED_001_SCHEMA)
        seed.execute("INSERT INTO eval_runs (run_id, timestamp_utc, total_test_cases, total_passed, total_failed,"
                     " pass_rate, summary_json) VALUES ('2025-11-02T10-00-00Z', '2025-11-02T10:00:00Z', 2, 1, 1, 0.5,"
                     " '{}')")
    seed.close()
    finish(SQLiteStore(path, "r-evalgate", "2026-11-23T10:00:00Z"))
    connection = sqlite3.connect(path)
    assert connection.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    assert seed_objects(connection) == expected_seed_objects()
    assert [r[0] for r in connection.execute("SELECT run_id FROM eval_runs ORDER BY run_id")] == [
        "2025-11-02T10-00-00Z", "r-evalgate"]
    connection.close()
    assert meta(path)["migrated_from"] == "0"


def test_migrating_twice_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    shutil.copy(SCHEMA_1_DB, path)
    connection = sqlite3.connect(path, isolation_level=None)
    assert migrate(connection, str(path)) == 1
    schema = connection.execute("SELECT name, sql FROM sqlite_master ORDER BY name").fetchall()
    assert migrate(connection, str(path)) == SCHEMA_VERSION
    assert connection.execute("SELECT name, sql FROM sqlite_master ORDER BY name").fetchall() == schema
    connection.close()


def test_a_database_from_a_newer_evalgate_is_refused_not_rewritten(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "results.db"
    with sqlite3.connect(path) as future:
        future.execute("CREATE TABLE eg_future (x)")
        future.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    future.close()
    code = cli_main(["run", "-d", str(REPO / "datasets" / "failing"), "--first-n", "1", "--db", str(path),
                     "-o", str(tmp_path / "out"), "--progress", "none"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and f"schema version {SCHEMA_VERSION + 1} is newer" in err
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION + 1,)
        assert [r[0] for r in connection.execute("SELECT name FROM sqlite_master")] == ["eg_future"]
    connection.close()
