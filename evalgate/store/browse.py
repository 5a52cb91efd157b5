"""Streaming read queries for ``evalgate view`` (docs/viewer.md): every question a page asks of a results
database, answered in SQL with bounded memory (the heavy lifting — counts, averages, grouping — happens in
SQLite; Python only sees the rows a page shows).

The database is opened read-only and hardened (``store.safe.open_checked``: ``mode=ro``, ``query_only``,
``trusted_schema=OFF``, no trigger/view/virtual table): nothing here writes a byte to it.

Sizes: one run's document (``eg_runs.document``, the results document without ``results``) is read whole;
case records (``eg_cases.record``) are read one page or one case at a time, or streamed (``iter_records``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalgate.errors import UserError
from evalgate.store.reader import open_input
from evalgate.store.safe import READ_TABLES, open_checked
from evalgate.store.schema import migrate

Connection = sqlite3.Connection
"""A read-only connection to a results database, as ``open_results`` gives it (for callers outside store/)."""

UNFINISHED = ("running", "incomplete")
"""Run statuses left out of trends and flaky-case counts (a killed or still-running run)."""
CASE_FILTERS = ("all", "not_passed", "failed", "errored", "passed", "skipped")


@dataclass(frozen=True)
class RunSummary:
    """One row of the runs page. ``pass_rate`` in [0, 1]; ``cost_usd`` in US dollars; ``duration_s`` = seconds
    from the run's start (``timestamp``) to ``metadata.finished`` (None when not recorded)."""

    run_id: str
    timestamp: str
    status: str
    branch: str | None
    commit: str | None
    passed: bool | None
    exit_code: int | None
    pass_rate: float | None
    total: int | None
    failed: int | None
    errored: int | None
    cost_usd: float | None
    duration_s: float | None


def open_results(path: Path, *, immutable: bool = False) -> sqlite3.Connection:
    """``path`` opened read-only and hardened, usable from any thread; it must hold evalgate's ``eg_runs`` and
    ``eg_cases``. A ``UserError`` naming the file otherwise. ``immutable``: a finished database nobody writes
    any more (the Action's export): no ``-wal``/``-shm`` files are created beside it."""
    try:
        return open_checked(path, READ_TABLES, ("eg_runs", "eg_cases"), immutable=immutable,
                            check_same_thread=False)
    except sqlite3.DatabaseError as exc:
        raise UserError(f"not an evalgate results database ({exc})", where=str(path)) from None


_RUN_COLUMNS = (
    "run_id, timestamp, status,"
    " json_extract(document, '$.metadata.git.branch'),"
    " json_extract(document, '$.metadata.git.commit'),"
    " json_extract(document, '$.gate.passed'),"
    " json_extract(document, '$.gate.exit_code'),"
    " json_extract(document, '$.summary.pass_rate'),"
    " json_extract(document, '$.summary.total_test_cases'),"
    " json_extract(document, '$.summary.total_failed'),"
    " json_extract(document, '$.summary.total_errored'),"
    " json_extract(document, '$.summary.cost_usd'),"
    " (julianday(json_extract(document, '$.metadata.finished')) - julianday(timestamp)) * 86400.0"
)


def _run_summary(row: tuple[Any, ...]) -> RunSummary:
    def num(value: Any) -> float | None:
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    def whole(value: Any) -> int | None:
        return int(value) if isinstance(value, int) and not isinstance(value, bool) else None

    return RunSummary(
        run_id=str(row[0]), timestamp=str(row[1]), status=str(row[2]),
        branch=str(row[3]) if row[3] is not None else None, commit=str(row[4]) if row[4] is not None else None,
        passed=None if row[5] is None else bool(row[5]), exit_code=whole(row[6]), pass_rate=num(row[7]),
        total=whole(row[8]), failed=whole(row[9]), errored=whole(row[10]), cost_usd=num(row[11]),
        duration_s=num(row[12]))


def list_runs(connection: sqlite3.Connection) -> list[RunSummary]:
    """Every run, newest first (``julianday(timestamp)``, ties: larger run id): one row each, the fields read
    from the stored document by ``json_extract`` (the documents are never loaded into Python)."""
    rows = connection.execute(f"SELECT {_RUN_COLUMNS} FROM eg_runs ORDER BY julianday(timestamp) DESC, run_id DESC")
    return [_run_summary(row) for row in rows]


def run_document(connection: sqlite3.Connection, run_id: str) -> dict[str, Any] | None:
    """The stored results document of ``run_id`` (without ``results``), or None when there is no such run
    or its document is not a JSON object."""
    row = connection.execute("SELECT document FROM eg_runs WHERE run_id = ?", (run_id,)).fetchone()
    if row is None:
        return None
    try:
        document = json.loads(row[0])
    except (TypeError, ValueError, RecursionError):
        return None
    if not isinstance(document, dict):
        return None
    document.setdefault("run_id", run_id)
    return document


def _case_filter(status: str) -> tuple[str, tuple[Any, ...]]:
    if status == "not_passed":
        return " AND status IN ('failed', 'errored')", ()
    if status in ("failed", "errored", "passed", "skipped"):
        return " AND status = ?", (status,)
    return "", ()


def case_counts(connection: sqlite3.Connection, run_id: str) -> dict[str, int]:
    """Case records of ``run_id`` by status (repeats counted), aggregated in SQL."""
    rows = connection.execute("SELECT status, count(*) FROM eg_cases WHERE run_id = ? GROUP BY status", (run_id,))
    return {str(status): int(count) for status, count in rows}


def case_page(connection: sqlite3.Connection, run_id: str, *, status: str = "all", search: str = "",
              offset: int = 0, limit: int = 50) -> tuple[list[dict[str, Any]], int]:
    """One page of ``run_id``'s case records — failed and errored first, then dataset order (index, repeat) —
    as ``{id, repeat, index, status, risk_level, source, reasons}``, and how many match in all. ``status``
    is one of ``CASE_FILTERS``; ``search`` keeps case ids containing it (case-insensitive)."""
    where, params = _case_filter(status)
    if search:
        where += " AND instr(lower(case_id), lower(?)) > 0"
        params += (search,)
    total = connection.execute(f"SELECT count(*) FROM eg_cases WHERE run_id = ?{where}", (run_id, *params)).fetchone()[0]
    rows = connection.execute(
        f"SELECT case_id, repeat, idx, status, risk_level, source, json_extract(record, '$.reasons') FROM eg_cases"
        f" WHERE run_id = ?{where} ORDER BY status NOT IN ('failed', 'errored'), idx, repeat LIMIT ? OFFSET ?",
        (run_id, *params, max(1, limit), max(0, offset)))
    page = []
    for case_id, repeat, idx, state, risk, source, reasons in rows:
        try:
            listed = json.loads(reasons) if reasons else []
        except ValueError:
            listed = []
        page.append({"id": str(case_id), "repeat": int(repeat), "index": int(idx), "status": str(state),
                     "risk_level": risk, "source": source,
                     "reasons": [str(r) for r in listed] if isinstance(listed, list) else []})
    return page, int(total)


def case_records(connection: sqlite3.Connection, run_id: str, case_id: str) -> list[dict[str, Any]]:
    """Every repeat of one case of one run (repeat order), each its results.json record."""
    rows = connection.execute("SELECT record FROM eg_cases WHERE run_id = ? AND case_id = ? ORDER BY repeat",
                              (run_id, case_id))
    return list(_records(rows))


def iter_records(connection: sqlite3.Connection, run_id: str) -> Iterator[dict[str, Any]]:
    """``run_id``'s case records one at a time in dataset order (index, repeat): memory flat in the run's
    size (records that are not JSON objects are skipped)."""
    yield from _records(connection.execute("SELECT record FROM eg_cases WHERE run_id = ? ORDER BY idx, repeat",
                                           (run_id,)))


def _records(rows: Iterable[tuple[Any, ...]]) -> Iterator[dict[str, Any]]:
    """The JSON objects stored in ``rows``' one column (a record that is not one is skipped)."""
    for (text,) in rows:
        try:
            record = json.loads(text)
        except (TypeError, ValueError, RecursionError):
            continue
        if isinstance(record, dict):
            yield record


def metric_history(connection: sqlite3.Connection, limit: int = 100) -> list[dict[str, Any]]:
    """The newest ``limit`` finished runs, oldest first, each ``{run_id, timestamp, branch, pass_rate,
    metrics: {name: {average, threshold, direction}}}`` (from the stored documents' ``metrics`` blocks,
    extracted in SQL)."""
    placeholders = ", ".join("?" * len(UNFINISHED))
    rows = connection.execute(
        "SELECT run_id, timestamp, json_extract(document, '$.metadata.git.branch'),"
        " json_extract(document, '$.summary.pass_rate'), json_extract(document, '$.metrics'),"
        " json_extract(document, '$.gate_policy.min_pass_rate'),"
        " json_extract(document, '$.metadata.config.min_pass_rate')"
        f" FROM eg_runs WHERE status NOT IN ({placeholders})"
        " ORDER BY julianday(timestamp) DESC, run_id DESC LIMIT ?", (*UNFINISHED, max(1, limit))).fetchall()
    history = []
    for run_id, timestamp, branch, pass_rate, metrics_text, policy_rate, config_rate in reversed(rows):
        try:
            metrics = json.loads(metrics_text) if metrics_text else {}
        except ValueError:
            metrics = {}
        picked = {}
        for name, info in (metrics.items() if isinstance(metrics, dict) else ()):
            if isinstance(info, dict) and isinstance(info.get("average"), int | float):
                picked[str(name)] = {"average": float(info["average"]), "threshold": info.get("threshold"),
                                     "direction": info.get("direction") or "higher"}
        min_rate = policy_rate if isinstance(policy_rate, int | float) else config_rate
        history.append({"run_id": str(run_id), "timestamp": str(timestamp),
                        "branch": str(branch) if branch is not None else None,
                        "pass_rate": float(pass_rate) if isinstance(pass_rate, int | float) else None,
                        "min_pass_rate": float(min_rate) if isinstance(min_rate, int | float) else None,
                        "metrics": picked})
    return history


def flaky_cases(connection: sqlite3.Connection, *, runs: int = 30, limit: int = 100) -> tuple[list[dict[str, Any]], int]:
    """Cases whose outcome disagreed over the newest ``runs`` finished runs: some record passed and some
    failed or errored. Aggregated in SQL in two steps (per run and case, then per case) and ranked by the
    minority share ``min(passes, fails) / records`` (1/2: a coin flip), then by runs whose own repeats
    disagreed. Returns ``([{id, runs, records, passes, fails, mixed_runs, share}], runs counted)``."""
    placeholders = ", ".join("?" * len(UNFINISHED))
    recent = [row[0] for row in connection.execute(
        f"SELECT run_id FROM eg_runs WHERE status NOT IN ({placeholders})"
        " ORDER BY julianday(timestamp) DESC, run_id DESC LIMIT ?", (*UNFINISHED, max(1, runs)))]
    if not recent:
        return [], 0
    marks = ", ".join("?" * len(recent))
    rows = connection.execute(
        "WITH per_run AS ("
        " SELECT case_id, run_id, count(*) AS n, sum(passed) AS p,"
        "  sum(status IN ('failed', 'errored')) AS f FROM eg_cases"
        f" WHERE run_id IN ({marks}) AND status != 'skipped' GROUP BY run_id, case_id)"
        " SELECT case_id, count(*) AS runs, sum(n) AS records, sum(p) AS passes, sum(f) AS fails,"
        "  sum(p > 0 AND f > 0) AS mixed"
        " FROM per_run GROUP BY case_id HAVING passes > 0 AND fails > 0"
        " ORDER BY min(passes, fails) * 1.0 / records DESC, mixed DESC, case_id LIMIT ?",
        (*recent, max(1, limit))).fetchall()
    found = [{"id": str(case_id), "runs": int(n_runs), "records": int(records), "passes": int(passes),
              "fails": int(fails), "mixed_runs": int(mixed), "share": min(passes, fails) / records}
             for case_id, n_runs, records, passes, fails, mixed in rows]
    return found, len(recent)


def latest_run_with_case(connection: sqlite3.Connection, case_id: str, run_ids: list[str]) -> str | None:
    """The first of ``run_ids`` (newest first) that holds ``case_id``."""
    for run_id in run_ids:
        if connection.execute("SELECT 1 FROM eg_cases WHERE run_id = ? AND case_id = ? LIMIT 1",
                              (run_id, case_id)).fetchone():
            return run_id
    return None


IMPORT_BATCH = 500


def import_results_json(source: Path, target: Path) -> str:
    """Copy one results.json (streamed, a record at a time: ``results_json.StreamedDocument``) into a new
    results database at ``target`` — a scratch file of the viewer's own, never the user's — so a results.json
    is browsed with the same queries as a database. Returns the run id; ``UserError`` naming ``source`` when
    it is not a results document."""
    run = open_input(source)
    document = run.document
    run_id = str(document.get("run_id") or source.stem)
    timestamp = str(document.get("timestamp") or "1970-01-01T00:00:00Z")
    connection = sqlite3.connect(str(target), isolation_level=None)
    try:
        migrate(connection, str(target))
        connection.execute("BEGIN")
        connection.execute("INSERT OR REPLACE INTO eg_runs (run_id, timestamp, status, document) VALUES (?, ?, ?, ?)",
                           (run_id, timestamp, str(document.get("status") or "completed"),
                            json.dumps(document, default=str)))
        batch: list[tuple[Any, ...]] = []
        for position, text in enumerate(run.records):
            try:
                record = json.loads(text)
            except ValueError:
                continue
            if not isinstance(record, dict):
                continue
            index = record.get("index")
            repeat = record.get("repeat")
            batch.append((run_id, str(record.get("id")), repeat if isinstance(repeat, int) else 0,
                          index if isinstance(index, int) else position, str(record.get("status") or "failed"),
                          int(bool(record.get("passed"))), record.get("risk_level"), record.get("source"), text))
            if len(batch) >= IMPORT_BATCH:
                _insert_cases(connection, batch)
                batch = []
        _insert_cases(connection, batch)
        connection.execute("COMMIT")
    finally:
        connection.close()
    return run_id


def _insert_cases(connection: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
    connection.executemany(
        "INSERT OR REPLACE INTO eg_cases (run_id, case_id, repeat, idx, status, passed, risk_level, source, record)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
