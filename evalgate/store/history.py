"""History of runs in a results database: seed 001's three SQL questions, for any date.

The queries read only seed 001's tables (``eval_runs``, ``eval_results``), so they also work on a
database written by the seed's own tool; ``eg_runs`` adds each run's status when present.

* **runs over time** — the newest ``limit`` runs with totals and pass rate (seed: ``LIMIT 10``);
* **metric trends** — per UTC day and metric, the mean metric value and the number of rows, over the
  window ``[until − days, until]``. The seed writes ``timestamp_utc >= datetime('now', '-30 days')``,
  which compares ISO strings (``2026-11-22T10:15:00Z``) with SQLite's ``2026-11-22 10:15:00``: ``T``
  sorts after a space, so on the boundary day every run counts as inside the window, and ``now`` ties
  the answer to the wall clock. Here both sides go through ``julianday()`` and ``until`` is a
  parameter (default: now), so the window is exact for any date;
* **most-failing cases** — per case (``test_description``), in how many runs of the window it failed
  out of how many it ran, and which metrics failed (the seed counts failed metric rows instead).

``render_text`` prints them as text tables; ``plot_history`` draws a PNG or SVG with matplotlib,
an optional dependency (``pip install 'evalgate[plot]'``).
"""

from __future__ import annotations

import datetime as dt
import math
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from evalgate.errors import UserError

CASE_PASSED = "case_passed"
"""evalgate's per-case row in ``eval_results`` (1.0 passed, 0.0 not): its daily mean is the pass rate."""
SPARK = "▁▂▃▄▅▆▇█"
SQL_TIME = "%Y-%m-%d %H:%M:%S"
DEFAULT_DAYS = 30
DEFAULT_LIMIT = 10
PLOT_SUFFIXES = (".png", ".svg")
MAX_DEFAULT_PLOT_METRICS = 8


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

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form: trends as the seed's long rows (date, metric, avg_value, test_count)."""
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


def open_history_db(path: Path) -> sqlite3.Connection:
    """Open ``path`` read-only; it must hold seed 001's ``eval_runs`` and ``eval_results`` tables."""
    if not path.is_file():
        raise UserError("results database not found", where=str(path))
    try:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as exc:
        raise UserError(f"not a SQLite database ({exc})", where=str(path)) from None
    missing = {"eval_runs", "eval_results"} - tables
    if missing:
        connection.close()
        raise UserError(f"not an evalgate results database (no table {', '.join(sorted(missing))})", where=str(path))
    return connection


def _has_table(connection: sqlite3.Connection, name: str) -> bool:
    query = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
    return connection.execute(query, (name,)).fetchone() is not None


def query_runs(connection: sqlite3.Connection, limit: int) -> list[RunRow]:
    """Seed question 1: the newest ``limit`` runs, newest first."""
    status = "g.status" if _has_table(connection, "eg_runs") else "NULL"
    join = "LEFT JOIN eg_runs g ON g.run_id = r.run_id" if status != "NULL" else ""
    rows = connection.execute(
        f"SELECT r.run_id, r.timestamp_utc, {status}, r.total_test_cases, r.total_passed, r.total_failed,"
        f" r.pass_rate FROM eval_runs r {join}"
        " ORDER BY julianday(r.timestamp_utc) DESC, r.run_id DESC LIMIT ?",
        (limit,),
    ).fetchall()
    return [RunRow(str(a), str(b), c, int(d), int(e), int(f), float(g)) for a, b, c, d, e, f, g in rows]


def query_metric_trends(connection: sqlite3.Connection, since: str, until: str) -> list[TrendPoint]:
    """Seed question 2 over ``[since, until]``: per UTC day and metric, mean value and row count."""
    rows = connection.execute(
        "SELECT DATE(r.timestamp_utc) AS date, er.metric_name, AVG(er.metric_value) AS avg_value,"
        " COUNT(*) AS test_count"
        " FROM eval_results er JOIN eval_runs r ON er.eval_run_id = r.run_id"
        " WHERE julianday(r.timestamp_utc) BETWEEN julianday(?) AND julianday(?)"
        " GROUP BY DATE(r.timestamp_utc), er.metric_name"
        " ORDER BY date, er.metric_name",
        (since, until),
    ).fetchall()
    return [TrendPoint(str(d), str(m), float(a), int(n)) for d, m, a, n in rows]


def query_failing_cases(connection: sqlite3.Connection, since: str, until: str, limit: int) -> list[FailingCase]:
    """Seed question 3 over ``[since, until]``: cases by the number of runs they failed in."""
    rows = connection.execute(
        "SELECT er.test_description,"
        " COUNT(DISTINCT CASE WHEN er.overall_passed = 0 THEN er.eval_run_id END) AS failed_runs,"
        " COUNT(DISTINCT er.eval_run_id) AS runs,"
        " GROUP_CONCAT(DISTINCT CASE WHEN er.metric_passed = 0 AND er.metric_name != ? THEN er.metric_name END),"
        " MAX(CASE WHEN er.overall_passed = 0 THEN r.timestamp_utc END) AS last_failed"
        " FROM eval_results er JOIN eval_runs r ON er.eval_run_id = r.run_id"
        " WHERE julianday(r.timestamp_utc) BETWEEN julianday(?) AND julianday(?)"
        " GROUP BY er.test_description HAVING failed_runs > 0"
        " ORDER BY failed_runs DESC, CAST(failed_runs AS REAL) / runs DESC, last_failed DESC, er.test_description"
        " LIMIT ?",
        (CASE_PASSED, since, until, limit),
    ).fetchall()
    return [
        FailingCase(str(desc), int(failed), int(runs), tuple(sorted(filter(None, (metrics or "").split(",")))),
                    str(last))
        for desc, failed, runs, metrics, last in rows
    ]


def newest_run_timestamp(connection: sqlite3.Connection) -> str | None:
    row = connection.execute("SELECT timestamp_utc FROM eval_runs ORDER BY julianday(timestamp_utc) DESC LIMIT 1")
    found = row.fetchone()
    return str(found[0]) if found else None


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
    connection = open_history_db(path)
    try:
        return History(
            db=str(path),
            since=since,
            until=until_text,
            days=days,
            runs=query_runs(connection, limit),
            trends=group_trends(query_metric_trends(connection, since, until_text)),
            failing=query_failing_cases(connection, since, until_text, limit),
            newest_run=newest_run_timestamp(connection),
        )
    finally:
        connection.close()


# ---------------------------------------------------------------------------------------------
# text


def sparkline(values: Sequence[float]) -> str:
    """One block character per value, scaled from the smallest (▁) to the largest (█) value."""
    if not values:
        return ""
    low, high = min(values), max(values)
    if high - low <= 1e-12:
        return SPARK[len(SPARK) // 2] * len(values)
    steps = len(SPARK) - 1
    return "".join(SPARK[round((v - low) / (high - low) * steps)] for v in values)


def fmt_value(value: float | None) -> str:
    """Three decimals; thousands separators and no decimals from 1000 up (tokens, milliseconds)."""
    if value is None:
        return "—"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3f}"


def fmt_signed(value: float) -> str:
    text = fmt_value(abs(value))
    return ("−" if value < 0 and text.strip("0.,") else "+") + text


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Iterable[int] = ()) -> list[str]:
    """Fixed-width columns separated by two spaces; columns in ``right`` are right-aligned."""
    aligned = set(right)
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        parts = [c.rjust(w) if i in aligned else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))]
        return "  ".join(parts).rstrip()

    return [line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def render_text(history: History) -> str:
    """The three sections as text tables."""
    out: list[str] = [f"History of {history.db}"]
    out += ["", f"Runs (newest {len(history.runs)})"]
    if history.runs:
        rows = [[r.timestamp, r.run_id, r.status or "—", str(r.total), str(r.passed), str(r.failed),
                 f"{r.pass_rate:.1%}"] for r in history.runs]
        out += text_table(["timestamp (UTC)", "run", "status", "cases", "passed", "failed", "pass rate"], rows,
                          right=(3, 4, 5, 6))
    else:
        out.append("  no runs recorded")
    window_text = f"{history.since} → {history.until} UTC, {history.days:g} days"
    out += ["", f"Metric trends ({window_text}; daily means, {CASE_PASSED} = case pass rate)"]
    if history.trends:
        rows = [[t.metric, str(len(t.points)), fmt_value(t.first), fmt_value(t.last), fmt_signed(t.change),
                 fmt_value(t.low), fmt_value(t.high), sparkline([p.average for p in t.points])]
                for t in history.trends]
        out += text_table(["metric", "days", "first", "last", "change", "min", "max", "trend"], rows,
                          right=(1, 2, 3, 4, 5, 6))
    else:
        newest = f"; newest run {history.newest_run} (use --until)" if history.newest_run else ""
        out.append(f"  no runs in this window{newest}")
    out += ["", f"Most-failing cases ({window_text})"]
    if history.failing:
        rows = [[f.description if len(f.description) <= 70 else f.description[:69] + "…",
                 f"{f.failed_runs}/{f.runs}", f"{f.failure_rate:.0%}", ", ".join(f.failing_metrics) or "—",
                 f.last_failed] for f in history.failing]
        out += text_table(["case", "failed runs", "rate", "failing metrics", "last failed"], rows, right=(1, 2))
    else:
        out.append("  no failing case in this window")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------
# plot (optional dependency)


def plot_history(history: History, destination: Path, metrics: Sequence[str] = ()) -> Path:
    """Draw pass rate per run and the daily means of ``metrics`` (default: up to 8 metrics whose
    values all lie in [0, 1]) to a PNG or SVG chosen by the file suffix."""
    if destination.suffix.lower() not in PLOT_SUFFIXES:
        raise UserError("the plot file must end in .png or .svg", where=f"--plot {destination}")
    pyplot = _pyplot()
    chosen = _plot_metrics(history, metrics)
    figure, (top, bottom) = pyplot.subplots(2, 1, figsize=(10, 7), constrained_layout=True)
    runs = sorted(history.runs, key=lambda r: r.timestamp)
    top.plot([_as_datetime(r.timestamp) for r in runs], [r.pass_rate for r in runs], marker="o")
    top.set_title(f"Pass rate per run (newest {len(runs)})")
    top.set_ylim(-0.02, 1.02)
    top.set_ylabel("pass rate")
    for trend in chosen:
        bottom.plot([dt.date.fromisoformat(p.date) for p in trend.points], [p.average for p in trend.points],
                    marker=".", label=trend.metric)
    bottom.set_title(f"Daily metric means, {history.since[:10]} → {history.until[:10]}")
    if chosen:
        bottom.legend(loc="best", fontsize="small")
    if not metrics:
        bottom.set_ylim(-0.02, 1.02)
    figure.autofmt_xdate()
    destination.parent.mkdir(parents=True, exist_ok=True)
    try:
        figure.savefig(destination)
    except OSError as exc:
        raise UserError(f"cannot write the plot ({exc.strerror})", where=str(destination)) from None
    finally:
        pyplot.close(figure)
    return destination


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise UserError("plotting needs matplotlib: pip install 'evalgate[plot]'", where="--plot") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as pyplot

    return pyplot


def _plot_metrics(history: History, names: Sequence[str]) -> list[MetricTrend]:
    by_name = {t.metric: t for t in history.trends}
    if names:
        unknown = [n for n in names if n not in by_name]
        if unknown:
            known = ", ".join(sorted(by_name)) or "none in this window"
            raise UserError(f"no trend for {', '.join(unknown)} (known: {known})", where="--metric")
        return [by_name[n] for n in names]
    unit = [t for t in history.trends if t.metric != CASE_PASSED and t.low >= 0.0 and t.high <= 1.0]
    unit.sort(key=lambda t: (-sum(p.count for p in t.points), t.metric))
    return sorted(unit[:MAX_DEFAULT_PLOT_METRICS], key=lambda t: t.metric)


def _as_datetime(timestamp: str) -> dt.datetime:
    try:
        return dt.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return dt.datetime.fromisoformat(timestamp[:10])
