"""SQLite results store, appended run after run to one file.

The history tables ``eval_runs`` and ``eval_results`` and their indexes are created exactly as the
brand-mention dialect's own tool defines them, so its trend queries work unchanged (the schema and its
migrations: ``store.schema``).
evalgate adds:

* ``eg_runs(run_id, timestamp, status, document)``: the results.json document without ``results``;
* ``eg_cases(run_id, case_id, repeat, idx, status, passed, risk_level, source, record)``: each case's
  record exactly as in results.json.

``eval_results`` gets one row per computed metric plus one ``case_passed`` row per case (1.0/0.0), so
errored cases show up in the tool's "find failing tests" query too. ``test_description`` is the case's
``description`` as written in the dataset (the tool's queries group by it), or its id when it has none;
``#r<repeat>`` is appended for repeats > 0, and `` [id]`` when another case of the run already used the
same text (the table's ``UNIQUE(eval_run_id, test_description, metric_name)`` would otherwise drop rows).
Rows are written as each case finishes and committed in small batches (every 500 cases or every
second).
"""

from __future__ import annotations

import json
import sqlite3
import time
from itertools import chain
from pathlib import Path
from typing import Any

from evalgate.errors import UserError
from evalgate.model import STATUS_TEXT, CaseResult, MetricStatus
from evalgate.safety.redact import redact
from evalgate.store.outdir import holder_alive
from evalgate.store.safe import RESULTS_TABLES, check_results_file, harden, set_aside
from evalgate.store.schema import migrate

COMMIT_EVERY_CASES = 500
"""Rows are buffered in memory and written with one executemany per batch: results reach disk at
least every second, so a crash loses at most the last second of work."""
COMMIT_EVERY_SECONDS = 1.0

INSERT_RESULT = (
    "INSERT OR REPLACE INTO eval_results (eval_run_id, test_description, overall_passed, metric_name,"
    " metric_value, metric_passed, metric_details_json, timestamp_utc) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
INSERT_CASE = (
    "INSERT OR REPLACE INTO eg_cases (run_id, case_id, repeat, idx, status, passed, risk_level, source,"
    " record) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


ROWS_PER_STATEMENT = 100
"""Rows per multi-row INSERT (≤ 900 parameters, under SQLite's oldest limit of 999). One statement
for many rows costs much less than one per row: fewer executions, and ``AUTOINCREMENT`` updates
``sqlite_sequence`` once per statement, not once per row. Rows, ids and order are the same."""


def insert_rows(connection: sqlite3.Connection, statement: str, rows: list[tuple[Any, ...]]) -> None:
    """``connection.executemany(statement, rows)`` for an ``INSERT … VALUES (?, …)`` statement, sent as
    multi-row INSERTs of ``ROWS_PER_STATEMENT`` rows."""
    if not rows:
        return
    head, _, one = statement.rpartition(" VALUES ")
    for start in range(0, len(rows), ROWS_PER_STATEMENT):
        chunk = rows[start:start + ROWS_PER_STATEMENT]
        sql = _MULTI_ROW.get((statement, len(chunk)))
        if sql is None:
            sql = _MULTI_ROW[(statement, len(chunk))] = f"{head} VALUES {', '.join([one] * len(chunk))}"
        connection.execute(sql, list(chain.from_iterable(chunk)))


_MULTI_ROW: dict[tuple[str, int], str] = {}


def open_database(path: Path, notices: list[str] | None = None, tag: str = "") -> sqlite3.Connection:
    """Open (creating if needed) a results database at the current schema version (``store.schema``).

    An existing file is first checked as a file evalgate did not create (``store.safe``): one whose
    schema holds triggers, views or tables evalgate cannot use is renamed to ``<name>.rejected-<tag>``
    (a line in ``notices`` says so) and a fresh database is written in its place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    problem = check_results_file(path)
    return _open_checked_database(path, problem, notices, tag)


def _open_checked_database(path: Path, problem: str | None, notices: list[str] | None, tag: str,
                           retried: bool = False) -> sqlite3.Connection:
    """``open_database`` once the existing file was checked (``problem``: why it is set aside). A file that
    passed the check but still lacks what a writer uses (``writer_problem``) is set aside too, once."""
    if problem is not None:
        try:
            aside = set_aside(path, tag or str(int(time.time())))
        except OSError as exc:
            raise UserError(f"the existing file cannot be used ({problem}) nor moved aside ({exc.strerror}); "
                            "remove it or give --db another path", where=str(path)) from None
        if notices is not None:
            notices.append(f"{path}: not used ({problem}); moved to {aside.name}, a fresh results database is "
                           "written")
    connection = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    try:
        harden(connection, read_only=False)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")
        migrate(connection, str(path))
        late = writer_problem(connection)
    except sqlite3.DatabaseError as exc:
        connection.close()
        raise UserError(f"cannot open the results database ({exc})", where=str(path)) from None
    except BaseException:
        connection.close()
        raise
    if late is not None:
        connection.close()
        if retried:
            raise UserError(f"cannot open the results database ({late})", where=str(path))
        return _open_checked_database(path, late, notices, tag, retried=True)
    return connection


def writer_problem(connection: sqlite3.Connection) -> str | None:
    """Why a migrated results database cannot take this run's rows (a table evalgate writes is missing or
    lacks a column), or None: every table of ``store.safe.RESULTS_TABLES`` is read with ``LIMIT 0``."""
    for table, columns in RESULTS_TABLES.items():
        try:
            connection.execute(f"SELECT {', '.join(sorted(columns))} FROM {table} LIMIT 0")
        except sqlite3.OperationalError as exc:
            return f"{exc}; evalgate did not write it"
    return None


def description_of(result: CaseResult) -> str:
    """``test_description`` of a case: its description (else its id), plus ``#r<repeat>`` for repeats."""
    text = result.description or result.id
    return text if result.repeat == 0 else f"{text} #r{result.repeat}"


class Descriptions:
    """Hands out each case's ``test_description`` for one run, keeping them distinct: a text already
    taken by another case id gets `` [id]`` appended (ids are unique, so the result is too)."""

    def __init__(self) -> None:
        self._owner: dict[str, str] = {}

    def __call__(self, result: CaseResult) -> str:
        text = description_of(result)
        owner = self._owner.setdefault(text, result.id)
        if owner == result.id:
            return text
        text = f"{text} [{result.id}]"
        self._owner.setdefault(text, result.id)
        return text


def details_json(details: Any) -> str:
    """``json.dumps(details, default=str)``, byte for byte, without building a ``JSONEncoder`` per call
    (six or more calls a case)."""
    return encode_details(details, str)


def encode_details(details: Any, default: Any) -> str:
    """``json.dumps(details, default=default)`` through the C encoder directly."""
    if _c_make_encoder is None:  # pragma: no cover - CPython always has the C encoder
        return json.dumps(details, default=default)
    encode = _c_make_encoder({}, default, _encode_ascii, None, ": ", ", ", False, False, True)
    return "".join(encode(details, 0))


_c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
_encode_ascii = json.encoder.encode_basestring_ascii
_VALUED = (MetricStatus.passed, MetricStatus.failed, MetricStatus.advisory)


def metric_rows(result: CaseResult, run_id: str, timestamp: str, description: str | None = None) -> list[tuple[Any, ...]]:
    """``eval_results`` rows for one case, in ``INSERT_RESULT`` column order: every metric with a value, plus
    ``case_passed``. Metrics sharing one details mapping (a metric family) encode it once; known secrets
    are redacted from the details text (the database is uploaded as an artifact). ``description``: the
    row's ``test_description`` (default ``description_of(result)``)."""
    if description is None:
        description = description_of(result)
    overall = int(result.passed)
    rows: list[tuple[Any, ...]] = []
    encoded: dict[int, str] = {}
    for name, metric in result.metrics.items():
        if metric.value is None or metric.status not in _VALUED:
            continue
        details = metric.details
        text = None
        if details:
            text = encoded.get(id(details))
            if text is None:
                text = encoded[id(details)] = redact(details_json(details))
        rows.append((run_id, description, overall, name, metric.value, int(bool(metric.passed)), text, timestamp))
    rows.append((run_id, description, overall, "case_passed", float(overall), overall,
                 case_passed_json(STATUS_TEXT[result.status], result.error), timestamp))
    return rows


def case_row(result: CaseResult, run_id: str, record_json: str) -> tuple[Any, ...]:
    """The ``eg_cases`` row of one case, in ``INSERT_CASE`` column order."""
    return (run_id, result.id, result.repeat, result.index, STATUS_TEXT[result.status], int(result.passed),
            result.risk_level, result.source, record_json)


def case_passed_json(status: str, error: str | None) -> str:
    """``json.dumps({"status": status, "error": error})`` for text values, without the encoder setup."""
    if type(status) is not str or (error is not None and type(error) is not str):
        return json.dumps({"status": status, "error": error})
    return f'{{"status": {_encode_ascii(status)}, "error": {"null" if error is None else _encode_ascii(error)}}}'


def mark_incomplete(connection: sqlite3.Connection) -> int:
    """Rewrite the ``running`` rows of runs that no longer hold their lock (``store.outdir.holder_alive``:
    killed) as ``incomplete``, with the cases they stored; returns how many."""
    changed = 0
    for run_id, text in connection.execute("SELECT run_id, document FROM eg_runs WHERE status = 'running'").fetchall():
        try:
            marker = json.loads(text)
        except ValueError:
            continue
        if holder_alive(marker, str(run_id)) is not False:
            continue
        stored, passed = connection.execute(
            "SELECT count(*), coalesce(sum(passed), 0) FROM eg_cases WHERE run_id = ?", (run_id,)).fetchone()
        document = {"status": "incomplete", "cases_stored": stored,
                    "reason": "the run ended without finishing (killed); its stored cases are kept"}
        connection.execute("UPDATE eg_runs SET status = 'incomplete', document = ? WHERE run_id = ?",
                           (json.dumps(document), run_id))
        connection.execute("UPDATE eval_runs SET total_test_cases = ?, total_passed = ?, total_failed = ?,"
                           " pass_rate = ? WHERE run_id = ?",
                           (stored, passed, stored - passed, passed / stored if stored else 0.0, run_id))
        changed += 1
    return changed


class SQLiteStore:
    """Appends one run to the database while it happens; ``finish`` writes the run summary."""

    def __init__(self, path: Path, run_id: str, timestamp: str, *, marker: dict[str, Any] | None = None) -> None:
        self.path = path
        self.notices: list[str] = []
        self.run_id = run_id
        self.timestamp = timestamp
        self._pending = 0
        self._last_commit = time.monotonic()
        self._metric_rows: list[tuple[Any, ...]] = []
        self._case_rows: list[tuple[Any, ...]] = []
        self.descriptions = Descriptions()
        self._conn = open_database(path, self.notices, run_id)
        mark_incomplete(self._conn)
        self._conn.execute("BEGIN")
        self._write_run_row("running", {"status": "running", **(marker or {})}, totals=(0, 0, 0, 0.0))
        self._commit()

    def add(self, result: CaseResult, record_json: str) -> None:
        """Queue one case's rows; they are written in batches (every 500 cases or every second)."""
        self._metric_rows.extend(metric_rows(result, self.run_id, self.timestamp, self.descriptions(result)))
        self._case_rows.append(case_row(result, self.run_id, record_json))
        self._pending += 1
        if self._pending >= COMMIT_EVERY_CASES or time.monotonic() - self._last_commit > COMMIT_EVERY_SECONDS:
            self._commit()

    def _flush_rows(self) -> None:
        insert_rows(self._conn, INSERT_RESULT, self._metric_rows)
        insert_rows(self._conn, INSERT_CASE, self._case_rows)
        self._metric_rows, self._case_rows = [], []

    def _commit(self) -> None:
        self._flush_rows()
        self._conn.execute("COMMIT")
        self._conn.execute("BEGIN")
        self._pending = 0
        self._last_commit = time.monotonic()

    def _write_run_row(self, status: str, document: dict[str, Any], totals: tuple[int, int, int, float]) -> None:
        total, passed, failed, pass_rate = totals
        summary_json = json.dumps(document.get("summary", {"status": status}), default=str)
        self._conn.execute(
            "INSERT INTO eval_runs (run_id, timestamp_utc, total_test_cases, total_passed, total_failed, pass_rate,"
            " summary_json) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(run_id) DO UPDATE SET"
            " total_test_cases=excluded.total_test_cases, total_passed=excluded.total_passed,"
            " total_failed=excluded.total_failed, pass_rate=excluded.pass_rate, summary_json=excluded.summary_json",
            (self.run_id, self.timestamp, total, passed, failed, pass_rate, summary_json),
        )
        self._conn.execute(
            "INSERT OR REPLACE INTO eg_runs (run_id, timestamp, status, document) VALUES (?, ?, ?, ?)",
            (self.run_id, self.timestamp, status, json.dumps(document, default=str)),
        )

    def finish(self, document_without_results: dict[str, Any]) -> None:
        """Write the run's summary rows (``eval_runs`` and ``eg_runs``) and close."""
        self._flush_rows()
        summary = document_without_results["summary"]
        failed = summary["total_failed"] + summary["total_errored"]
        self._write_run_row(
            document_without_results.get("status", "completed"),
            document_without_results,
            totals=(summary["total_test_cases"], summary["total_passed"], failed, summary["pass_rate"]),
        )
        self._conn.execute("COMMIT")
        self._conn.close()
