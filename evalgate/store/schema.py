"""The results database's schema: the history tables, evalgate's tables, and a numbered migration path.

The schema version is recorded in the database twice: ``PRAGMA user_version`` (read on every open: one
statement) and the ``eg_meta`` table (``schema_version``, and which evalgate created and last migrated
the file), readable with any SQLite client.

Migrations run once each, in order, in one transaction together with the version bump:

1. the history tables ``eval_runs`` and ``eval_results`` with their indexes, in the layout of the brand-mention
   dialect's own tool (``evalgate.dialects``; a database that tool wrote already has them and keeps them as
   they are), and evalgate's
   ``eg_runs`` (one row per run: the results document without ``results``) and ``eg_cases`` (one row
   per case: its results.json record);
2. ``eg_meta(key, value)``;
3. ``eg_calibrations`` (judge calibrations, ``store.calibration``).

A database whose version is newer than this evalgate knows is refused with a ``UserError``, never
rewritten. Schema creation uses sqlite3 directly: every run opens (usually creates) its database, and
importing sqlite-utils (numpy, pluggy and dateutil with it) would lengthen every run's start-up (see
bench/README.md); the readers (``store.reader``, ``store.history``) use sqlite-utils.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from dataclasses import dataclass

from evalgate import __version__
from evalgate.errors import UserError

HISTORY_DDL = """
CREATE TABLE IF NOT EXISTS eval_runs (
    run_id TEXT PRIMARY KEY,
    timestamp_utc TEXT NOT NULL,
    total_test_cases INTEGER NOT NULL,
    total_passed INTEGER NOT NULL,
    total_failed INTEGER NOT NULL,
    pass_rate REAL NOT NULL,
    summary_json TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (datetime('now'))
);

CREATE INDEX IF NOT EXISTS idx_eval_runs_timestamp ON eval_runs(timestamp_utc);
CREATE INDEX IF NOT EXISTS idx_eval_runs_pass_rate ON eval_runs(pass_rate);

CREATE TABLE IF NOT EXISTS eval_results (
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

CREATE INDEX IF NOT EXISTS idx_eval_results_run_id ON eval_results(eval_run_id);
CREATE INDEX IF NOT EXISTS idx_eval_results_metric_name ON eval_results(metric_name);
CREATE INDEX IF NOT EXISTS idx_eval_results_passed ON eval_results(overall_passed);
CREATE INDEX IF NOT EXISTS idx_eval_results_timestamp ON eval_results(timestamp_utc);
"""
"""The history tables and indexes, as the brand-mention dialect's tool defines them (``IF NOT EXISTS`` is not
stored by SQLite)."""

EVALGATE_DDL = """
CREATE TABLE IF NOT EXISTS eg_runs (
    run_id TEXT PRIMARY KEY,
    timestamp TEXT NOT NULL,
    status TEXT NOT NULL,
    document TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS eg_cases (
    run_id TEXT NOT NULL,
    case_id TEXT NOT NULL,
    repeat INTEGER NOT NULL DEFAULT 0,
    idx INTEGER NOT NULL,
    status TEXT NOT NULL,
    passed INTEGER NOT NULL,
    risk_level TEXT,
    source TEXT,
    record TEXT NOT NULL,
    PRIMARY KEY (run_id, case_id, repeat)
);
CREATE INDEX IF NOT EXISTS idx_eg_cases_run ON eg_cases(run_id, idx);
"""

META_DDL = """
CREATE TABLE IF NOT EXISTS eg_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"""

CALIBRATION_DDL = """
CREATE TABLE IF NOT EXISTS eg_calibrations (
    metric TEXT NOT NULL,
    key TEXT NOT NULL,
    created TEXT NOT NULL,
    judge TEXT NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (metric, key, created)
);
CREATE INDEX IF NOT EXISTS idx_eg_calibrations_metric ON eg_calibrations(metric, created);
"""
"""One row per calibration (``store.calibration``): the metric, its judge key (hash of everything that changes a
verdict), when, the judge's label (``model@metric-hash``) and the record as JSON."""


@dataclass(frozen=True)
class Migration:
    """Schema version ``version`` is reached by running ``script`` (statements separated by ``;``)."""

    version: int
    title: str
    script: str

    def statements(self) -> list[str]:
        return [text.strip() for text in self.script.split(";") if text.strip()]


MIGRATIONS = (
    Migration(1, "the history tables eval_runs/eval_results and evalgate's eg_runs/eg_cases",
              HISTORY_DDL + EVALGATE_DDL),
    Migration(2, "eg_meta: the schema version and the evalgate versions that wrote it", META_DDL),
    Migration(3, "eg_calibrations: judge calibrations against human labels", CALIBRATION_DDL),
)
SCHEMA_VERSION = MIGRATIONS[-1].version


def schema_version(connection: sqlite3.Connection) -> int:
    """The version recorded in ``PRAGMA user_version`` (0: none yet)."""
    return int(connection.execute("PRAGMA user_version").fetchone()[0])


def migrate(connection: sqlite3.Connection, where: str) -> int:
    """Bring the database behind ``connection`` (autocommit mode) to ``SCHEMA_VERSION``; returns the
    version it had. A newer version than this evalgate knows is a ``UserError`` naming ``where``."""
    found = schema_version(connection)
    if found == SCHEMA_VERSION:
        return found
    _check_known(found, where)
    connection.execute("BEGIN IMMEDIATE")  # a second writer waits here, then finds the work done
    try:
        found = schema_version(connection)
        _check_known(found, where)
        empty = connection.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] == 0
        for migration in MIGRATIONS:
            if migration.version > found:
                for statement in migration.statements():
                    connection.execute(statement)
        if found < SCHEMA_VERSION:
            _record(connection, None if empty else found)
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    return found


def _check_known(version: int, where: str) -> None:
    if version > SCHEMA_VERSION:
        raise UserError(f"results database schema version {version} is newer than this evalgate's "
                        f"({SCHEMA_VERSION}): use a newer evalgate or another --db file", where=where)


def _record(connection: sqlite3.Connection, previous: int | None) -> None:
    """The ``eg_meta`` rows: the version now, and who created the file (``previous`` None: it was empty)
    or migrated it from ``previous`` (0: a file without a recorded version, such as one the brand-mention dialect's tool wrote)."""
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    rows = [("schema_version", str(SCHEMA_VERSION))]
    if previous is None:
        rows.append(("created_by", f"evalgate {__version__} at {now}"))
    else:
        rows += [("migrated_by", f"evalgate {__version__} at {now}"), ("migrated_from", str(previous))]
    connection.executemany("INSERT OR REPLACE INTO eg_meta (key, value) VALUES (?, ?)", rows)
