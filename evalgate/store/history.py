"""History of runs in a results database: the brand-mention dialect's three SQL questions, for any date.

The queries read only the history tables (``eval_runs``, ``eval_results``), so they also work on a
database written by that dialect's own tool (``evalgate.dialects``); ``eg_runs`` adds each run's status
when present.

* **runs over time** — the newest ``limit`` runs with totals and pass rate (the tool: ``LIMIT 10``);
* **metric trends** — per UTC day and metric, the mean metric value and the number of rows, over the
  window ``[until − days, until]``. The tool writes ``timestamp_utc >= datetime('now', '-30 days')``,
  which compares ISO strings (``2026-11-22T10:15:00Z``) with SQLite's ``2026-11-22 10:15:00``: ``T``
  sorts after a space, so on the boundary day every run counts as inside the window, and ``now`` ties
  the answer to the wall clock. Here both sides go through ``julianday()`` and ``until`` is a
  parameter (default: now), so the window is exact for any date;
* **most-failing cases** — per case (``test_description``), in how many runs of the window it failed
  out of how many it ran, and which metrics failed (the tool counts failed metric rows instead).

The queries go through sqlite-utils; the text tables and the chart are drawn by ``evalgate.report.history``.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import sqlite3
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalgate.errors import UserError
from evalgate.store.outdir import holder_alive
from evalgate.store.safe import READ_TABLES, UntrustedSchema, open_checked

if TYPE_CHECKING:
    from sqlite_utils import Database

CASE_PASSED = "case_passed"
"""evalgate's per-case row in ``eval_results`` (1.0 passed, 0.0 not): its daily mean is the pass rate."""
SQL_TIME = "%Y-%m-%d %H:%M:%S"
DEFAULT_DAYS = 30
DEFAULT_LIMIT = 10


@dataclass(frozen=True)
class RunRow:
    """One run: ``pass_rate`` = passed / (passed + failed + errored) as stored by the run."""

    run_id: str
    timestamp: str
    status: str | None
    total: int
    passed: int
    failed: int
    pass_rate: float


@dataclass(frozen=True)
class TrendPoint:
    """Mean of ``metric`` over every row of runs on ``date`` (UTC, ``YYYY-MM-DD``); ``count`` rows."""

    date: str
    metric: str
    average: float
    count: int


@dataclass(frozen=True)
class MetricTrend:
    """One metric's daily means in date order; ``change`` = last − first (same units as the metric)."""

    metric: str
    points: tuple[TrendPoint, ...]

    @property
    def first(self) -> float:
        return self.points[0].average

    @property
    def last(self) -> float:
        return self.points[-1].average

    @property
    def change(self) -> float:
        return self.last - self.first

    @property
    def low(self) -> float:
        return min(p.average for p in self.points)

    @property
    def high(self) -> float:
        return max(p.average for p in self.points)


@dataclass(frozen=True)
class FailingCase:
    """A case that failed in ``failed_runs`` of the ``runs`` runs it appeared in (rate = failed/runs)."""

    description: str
    failed_runs: int
    runs: int
    failing_metrics: tuple[str, ...]
    last_failed: str

    @property
    def failure_rate(self) -> float:
        return self.failed_runs / self.runs if self.runs else 0.0


@dataclass(frozen=True)
class FlakyCase:
    """A case whose recorded trials (every repeat of every completed run in the window) both passed and
    failed: ``flake_rate`` = trials disagreeing with the case's majority outcome / trials, with its 95 %
    Wilson interval (``low``, ``high``)."""

    case_id: str
    passes: int
    trials: int
    runs: int

    @property
    def flake_rate(self) -> float:
        return min(self.passes, self.trials - self.passes) / self.trials

    @property
    def interval(self) -> tuple[float, float]:
        """Wilson score interval, z = 1.96: (p̂ + z²/2n ± z·√(p̂(1−p̂)/n + z²/4n²)) / (1 + z²/n)."""
        n, z = self.trials, 1.959963984540054
        p = self.flake_rate
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return max(0.0, centre - half), min(1.0, centre + half)

    def as_dict(self) -> dict[str, Any]:
        low, high = self.interval
        return asdict(self) | {"flake_rate": self.flake_rate, "low": low, "high": high, "method": "Wilson 95%"}


@dataclass
class History:
    """Everything ``evalgate history`` shows for one database and window."""

    db: str
    since: str
    until: str
    days: float
    runs: list[RunRow] = field(default_factory=list)
    trends: list[MetricTrend] = field(default_factory=list)
    failing: list[FailingCase] = field(default_factory=list)
    newest_run: str | None = None
    flaky: list[FlakyCase] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form: trends as the tool's long rows (date, metric, avg_value, test_count)."""
        return {
            "db": self.db,
            "window": {"since": self.since, "until": self.until, "days": self.days},
            "runs": [asdict(r) for r in self.runs],
            "metric_trends": [
                {"date": p.date, "metric_name": p.metric, "avg_value": p.average, "test_count": p.count}
                for trend in self.trends
                for p in trend.points
            ],
            "failing_cases": [asdict(f) | {"failure_rate": f.failure_rate} for f in self.failing],
            "newest_run": self.newest_run,
            "flaky_cases": [f.as_dict() for f in self.flaky],
        }


# ---------------------------------------------------------------------------------------------
# the window


def parse_until(text: str | None, *, now: dt.datetime | None = None) -> dt.datetime:
    """``--until``: an ISO date (end of that UTC day) or date-time (UTC unless it has an offset); None → now."""
    if text is None or not text.strip():
        return (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC).replace(microsecond=0)
    raw = text.strip()
    try:
        if len(raw) == 10:
            day = dt.date.fromisoformat(raw)
            return dt.datetime.combine(day, dt.time(23, 59, 59), tzinfo=dt.UTC)
        moment = dt.datetime.fromisoformat(raw.replace(" ", "T"))
    except ValueError:
        raise UserError(f"not an ISO date or date-time: {raw!r} (e.g. 2026-11-22)", where="--until") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.astimezone(dt.UTC)


def window(until: dt.datetime, days: float) -> tuple[str, str]:
    """``(since, until)`` as SQLite time strings, since = until − ``days`` days."""
    if not math.isfinite(days) or days <= 0:
        raise UserError(f"must be a positive number of days, got {days:g}", where="--days")
    since = until - dt.timedelta(days=days)
    return since.strftime(SQL_TIME), until.strftime(SQL_TIME)


# ---------------------------------------------------------------------------------------------
# queries


def open_history_db(path: Path) -> Database:
    """Open ``path`` read-only; it must hold the history tables ``eval_runs`` and ``eval_results``."""
    from sqlite_utils import Database  # lazy: sqlite-utils (~240 ms) only when a database is read

    if not path.is_file():
        raise UserError("results database not found", where=str(path))
    try:
        db = Database(open_checked(path, READ_TABLES, ("eval_runs", "eval_results")))
        tables = set(db.table_names())
    except sqlite3.DatabaseError as exc:
        kind = "not an evalgate results database" if isinstance(exc, UntrustedSchema) else "not a SQLite database"
        raise UserError(f"{kind} ({exc})", where=str(path)) from None
    missing = {"eval_runs", "eval_results"} - tables
    if missing:
        db.close()
        raise UserError(f"not an evalgate results database (no table {', '.join(sorted(missing))})", where=str(path))
    return db


def query_runs(db: Database, limit: int) -> list[RunRow]:
    """Question 1: the newest ``limit`` runs, newest first (``status`` from ``eg_runs`` when present)."""
    with_status = db["eg_runs"].exists()
    rows = db.query(
        f"SELECT r.run_id, r.timestamp_utc, {'g.status' if with_status else 'NULL'} AS status, r.total_test_cases,"
        f" r.total_passed, r.total_failed, r.pass_rate FROM eval_runs r"
        f"{' LEFT JOIN eg_runs g ON g.run_id = r.run_id' if with_status else ''}"
        " ORDER BY julianday(r.timestamp_utc) DESC, r.run_id DESC LIMIT ?",
        (limit,),
    )
    runs = [RunRow(str(r["run_id"]), str(r["timestamp_utc"]), r["status"], int(r["total_test_cases"]),
                   int(r["total_passed"]), int(r["total_failed"]), float(r["pass_rate"])) for r in rows]
    return [incomplete_row(db, run) if run.status == "running" else run for run in runs]


def incomplete_row(db: Database, run: RunRow) -> RunRow:
    """A ``running`` row whose run no longer holds its output directory's lock (killed: SIGKILL, a lost
    machine) as ``incomplete``, with the cases it stored (``store.outdir.holder_alive``)."""
    found = next(db.query("SELECT document FROM eg_runs WHERE run_id = ?", (run.run_id,)), None)
    try:
        marker = json.loads(found["document"]) if found else None
    except (TypeError, ValueError):
        marker = None
    if holder_alive(marker, run.run_id) is not False:
        return run
    stored, passed = stored_cases(db.conn, run.run_id)
    return RunRow(run.run_id, run.timestamp, "incomplete", stored, passed, stored - passed,
                  passed / stored if stored else 0.0)


def stored_cases(connection: Any, run_id: str) -> tuple[int, int]:
    """(case rows stored, of which passed) of run ``run_id`` in ``eg_cases``."""
    row = connection.execute("SELECT count(*), coalesce(sum(passed), 0) FROM eg_cases WHERE run_id = ?",
                             (run_id,)).fetchone()
    return int(row[0]), int(row[1])


def query_metric_trends(db: Database, since: str, until: str) -> list[TrendPoint]:
    """Question 2 over ``[since, until]``: per UTC day and metric, mean value and row count."""
    rows = db.query(
        "SELECT DATE(r.timestamp_utc) AS date, er.metric_name, AVG(er.metric_value) AS avg_value,"
        " COUNT(*) AS test_count"
        " FROM eval_results er JOIN eval_runs r ON er.eval_run_id = r.run_id"
        " WHERE julianday(r.timestamp_utc) BETWEEN julianday(?) AND julianday(?)"
        " GROUP BY DATE(r.timestamp_utc), er.metric_name"
        " ORDER BY date, er.metric_name",
        (since, until),
    )
    return [TrendPoint(str(r["date"]), str(r["metric_name"]), float(r["avg_value"]), int(r["test_count"]))
            for r in rows]


def query_failing_cases(db: Database, since: str, until: str, limit: int) -> list[FailingCase]:
    """Question 3 over ``[since, until]``: cases by the number of runs they failed in."""
    rows = db.query(
        "SELECT er.test_description,"
        " COUNT(DISTINCT CASE WHEN er.overall_passed = 0 THEN er.eval_run_id END) AS failed_runs,"
        " COUNT(DISTINCT er.eval_run_id) AS runs,"
        " GROUP_CONCAT(DISTINCT CASE WHEN er.metric_passed = 0 AND er.metric_name != ? THEN er.metric_name END)"
        " AS metrics,"
        " MAX(CASE WHEN er.overall_passed = 0 THEN r.timestamp_utc END) AS last_failed"
        " FROM eval_results er JOIN eval_runs r ON er.eval_run_id = r.run_id"
        " WHERE julianday(r.timestamp_utc) BETWEEN julianday(?) AND julianday(?)"
        " GROUP BY er.test_description HAVING failed_runs > 0"
        " ORDER BY failed_runs DESC, CAST(failed_runs AS REAL) / runs DESC, last_failed DESC, er.test_description"
        " LIMIT ?",
        (CASE_PASSED, since, until, limit),
    )
    return [
        FailingCase(str(r["test_description"]), int(r["failed_runs"]), int(r["runs"]),
                    tuple(sorted(filter(None, (r["metrics"] or "").split(",")))), str(r["last_failed"]))
        for r in rows
    ]


def query_flaky_cases(db: Database, since: str, until: str, limit: int) -> list[FlakyCase]:
    """The flakiest cases over ``[since, until]``: per case, its passing trials and trials over every repeat of
    the completed runs (``eg_cases``, skipped trials left out), kept when both outcomes occur; ordered by flake
    rate, then trials, then id. Empty for a database without evalgate's per-case table."""
    if not (db["eg_cases"].exists() and db["eg_runs"].exists()):
        return []
    rows = db.query(
        "SELECT c.case_id, SUM(c.passed) AS passes, COUNT(*) AS trials, COUNT(DISTINCT c.run_id) AS runs"
        " FROM eg_cases c JOIN eg_runs g ON g.run_id = c.run_id JOIN eval_runs r ON r.run_id = c.run_id"
        " WHERE g.status = 'completed' AND c.status != 'skipped'"
        " AND julianday(r.timestamp_utc) BETWEEN julianday(?) AND julianday(?)"
        " GROUP BY c.case_id HAVING passes > 0 AND passes < trials",
        (since, until),
    )
    found = [FlakyCase(str(r["case_id"]), int(r["passes"]), int(r["trials"]), int(r["runs"])) for r in rows]
    found.sort(key=lambda f: (-f.flake_rate, -f.trials, f.case_id))
    return found[:limit]


def flaky_case_ids(path: Path, *, days: float = DEFAULT_DAYS, until: dt.datetime | None = None,
                   limit: int = 100_000) -> frozenset[str]:
    """The ids of the cases flaky in ``path``'s history (``query_flaky_cases``); empty when the file is missing
    or not a results database (history only chooses which cases ``repeat: adaptive`` re-tries)."""
    if not path.is_file():
        return frozenset()
    try:
        db = open_history_db(path)
    except UserError:
        return frozenset()
    try:
        since, until_text = window(until or parse_until(None), days)
        return frozenset(f.case_id for f in query_flaky_cases(db, since, until_text, limit))
    except sqlite3.DatabaseError:
        return frozenset()
    finally:
        db.close()


def newest_run_timestamp(db: Database) -> str | None:
    found = next(db.query("SELECT timestamp_utc FROM eval_runs ORDER BY julianday(timestamp_utc) DESC LIMIT 1"), None)
    return str(found["timestamp_utc"]) if found else None


def group_trends(points: Iterable[TrendPoint]) -> list[MetricTrend]:
    """Daily points → one ``MetricTrend`` per metric (metrics by name, points by date)."""
    by_metric: dict[str, list[TrendPoint]] = {}
    for point in points:
        by_metric.setdefault(point.metric, []).append(point)
    return [
        MetricTrend(metric, tuple(sorted(found, key=lambda p: p.date)))
        for metric, found in sorted(by_metric.items())
    ]


def build_history(
    path: Path, *, days: float = DEFAULT_DAYS, until: dt.datetime | None = None, limit: int = DEFAULT_LIMIT
) -> History:
    """Run the three queries against ``path`` for the window ending at ``until`` (default now)."""
    if limit < 1:
        raise UserError(f"must be at least 1, got {limit}", where="--limit")
    end = until or parse_until(None)
    since, until_text = window(end, days)
    db = open_history_db(path)
    try:
        return History(
            db=str(path),
            since=since,
            until=until_text,
            days=days,
            runs=query_runs(db, limit),
            trends=group_trends(query_metric_trends(db, since, until_text)),
            failing=query_failing_cases(db, since, until_text, limit),
            newest_run=newest_run_timestamp(db),
            flaky=query_flaky_cases(db, since, until_text, limit),
        )
    finally:
        db.close()
