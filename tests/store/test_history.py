"""``evalgate history``: seed 001's three questions over a results database, for any date."""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import sqlite3
import sys
from pathlib import Path

import pytest

from evalgate.cli.main import main as cli_main
from evalgate.errors import UserError
from evalgate.model import CaseResult, CaseStatus, MetricResult, MetricStatus, Threshold
from evalgate.report.history import plot_history, render_text, sparkline
from evalgate.store.history import build_history, parse_until, window
from evalgate.store.schema import HISTORY_DDL as SEED_001_DDL
from evalgate.store.sqlite import SQLiteStore

UNTIL = "2020-03-03T12:00:00Z"


def case(case_id: str, index: int, value: float, tokens: float, *, passed: bool) -> CaseResult:
    """A case with metric ``score`` (threshold ≥ 0.5, so ``passed`` must agree) and ``num_tokens``."""
    threshold = Threshold(op="min", value=0.5)
    assert (value >= 0.5) == passed
    status = MetricStatus.passed if passed else MetricStatus.failed
    return CaseResult(
        id=case_id, index=index, status=CaseStatus.passed if passed else CaseStatus.failed, passed=passed,
        description=f"case {case_id}",
        metrics={
            "score": MetricResult(value=value, threshold=threshold, passed=passed, status=status,
                                  reason=None if passed else "below 0.5"),
            "num_tokens": MetricResult(value=tokens, passed=True, status=MetricStatus.passed),
        },
    )


def store_run(db: Path, run_id: str, timestamp: str, cases: list[CaseResult]) -> None:
    store = SQLiteStore(db, run_id, timestamp)
    for result in cases:
        store.add(result, result.model_dump_json())
    passed = sum(c.passed for c in cases)
    store.finish({"status": "completed", "summary": {
        "total_test_cases": len(cases), "total_passed": passed, "total_failed": len(cases) - passed,
        "total_errored": 0, "pass_rate": passed / len(cases)}})


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """Four runs: one old, one just before the 2-day window ending at UNTIL, two inside it."""
    path = tmp_path / "results.db"
    store_run(path, "r0-old", "2020-01-01T10:00:00Z",
              [case("a", 0, 0.9, 100, passed=True), case("b", 1, 0.1, 100, passed=False)])
    store_run(path, "r1-before", "2020-03-01T09:00:00Z",
              [case("a", 0, 0.2, 100, passed=False), case("b", 1, 0.2, 100, passed=False)])
    store_run(path, "r2-day1", "2020-03-02T23:30:00Z",
              [case("a", 0, 1.0, 200, passed=True), case("b", 1, 0.4, 400, passed=False)])
    store_run(path, "r3-day2", "2020-03-03T00:10:00Z",
              [case("a", 0, 0.8, 300, passed=True), case("b", 1, 0.6, 500, passed=True)])
    return path


def history_of(db: Path, **kwargs: object) -> object:
    return build_history(db, days=2, until=parse_until(UNTIL), **kwargs)  # type: ignore[arg-type]


def test_window_is_exact_where_the_seed_query_is_not(db: Path) -> None:
    since, until = window(parse_until(UNTIL), 2)
    assert (since, until) == ("2020-03-01 12:00:00", "2020-03-03 12:00:00")
    with contextlib.closing(sqlite3.connect(db)) as conn:
        # seed 001 compares ISO 'T' strings with SQLite's 'YYYY-MM-DD HH:MM:SS': r1 at 09:00 sneaks in
        seed_style = conn.execute("SELECT run_id FROM eval_runs WHERE timestamp_utc >= ? ORDER BY run_id",
                                  (since,)).fetchall()
    assert [r[0] for r in seed_style] == ["r1-before", "r2-day1", "r3-day2"]
    history = history_of(db)
    dates = sorted({p.date for t in history.trends for p in t.points})
    assert dates == ["2020-03-02", "2020-03-03"]  # r1 (09:00 < 12:00 on 03-01) is outside


def test_metric_trends_are_daily_means(db: Path) -> None:
    history = history_of(db)
    trends = {t.metric: t for t in history.trends}
    assert sorted(trends) == ["case_passed", "num_tokens", "score"]
    score = trends["score"]
    assert [(p.date, p.average, p.count) for p in score.points] == [
        ("2020-03-02", pytest.approx(0.7), 2), ("2020-03-03", pytest.approx(0.7), 2)]
    tokens = trends["num_tokens"]
    assert [p.average for p in tokens.points] == [300.0, 400.0]
    assert tokens.change == 100.0 and tokens.low == 300.0 and tokens.high == 400.0
    assert [p.average for p in trends["case_passed"].points] == [0.5, 1.0]


def test_runs_are_listed_newest_first_with_status(db: Path) -> None:
    history = history_of(db, limit=3)
    assert [r.run_id for r in history.runs] == ["r3-day2", "r2-day1", "r1-before"]
    newest = history.runs[0]
    assert (newest.status, newest.total, newest.passed, newest.failed, newest.pass_rate) == ("completed", 2, 2, 0, 1.0)
    assert history.newest_run == "2020-03-03T00:10:00Z"


def test_most_failing_cases_count_runs_in_the_window(db: Path) -> None:
    failing = history_of(db).failing
    assert [(f.description, f.failed_runs, f.runs) for f in failing] == [("case b", 1, 2)]
    assert failing[0].failing_metrics == ("score",)
    assert failing[0].failure_rate == 0.5
    assert failing[0].last_failed == "2020-03-02T23:30:00Z"
    wide = build_history(db, days=90, until=parse_until(UNTIL)).failing
    assert [(f.description, f.failed_runs, f.runs) for f in wide] == [("case b", 3, 4), ("case a", 1, 4)]


def test_text_report_has_all_three_sections(db: Path) -> None:
    text = render_text(history_of(db))
    assert "Runs (newest 4)" in text and "r3-day2" in text and "100.0%" in text
    assert "Metric trends (2020-03-01 12:00:00 → 2020-03-03 12:00:00 UTC, 2 days" in text
    score_line = next(line for line in text.splitlines() if line.startswith("score "))
    assert score_line.split()[1:6] == ["2", "0.700", "0.700", "+0.000", "0.700"]
    tokens_line = next(line for line in text.splitlines() if line.startswith("num_tokens "))
    assert tokens_line.split()[1:5] == ["2", "300.000", "400.000", "+100.000"]
    assert tokens_line.endswith("▁█")
    assert "case b" in text and "1/2" in text


def test_empty_window_points_at_the_newest_run(db: Path) -> None:
    text = render_text(build_history(db, days=1, until=parse_until("2021-06-01")))
    assert "no runs in this window; newest run 2020-03-03T00:10:00Z (use --until)" in text
    assert "no failing case in this window" in text


def test_seed_001_database_without_evalgate_tables(tmp_path: Path) -> None:
    path = tmp_path / "seed.db"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.executescript(SEED_001_DDL)
        conn.execute("INSERT INTO eval_runs (run_id, timestamp_utc, total_test_cases, total_passed, total_failed,"
                     " pass_rate, summary_json) VALUES ('2025-11-02T10-00-00Z', '2025-11-02T10:00:00Z', 2, 1, 1, 0.5, '{}')")
        conn.executemany(
            "INSERT INTO eval_results (eval_run_id, test_description, overall_passed, metric_name, metric_value,"
            " metric_passed, timestamp_utc) VALUES ('2025-11-02T10-00-00Z', ?, ?, ?, ?, ?, '2025-11-02T10:00:00Z')",
            [("HubSpot mention", 1, "mention_precision", 1.0, 1), ("Word boundary", 0, "mention_precision", 0.5, 0),
             ("Word boundary", 0, "mention_recall", 1.0, 1)],
        )
        conn.commit()
    history = build_history(path, days=30, until=parse_until("2025-11-05"))
    assert [(r.run_id, r.status, r.pass_rate) for r in history.runs] == [("2025-11-02T10-00-00Z", None, 0.5)]
    assert {t.metric: t.last for t in history.trends} == {"mention_precision": 0.75, "mention_recall": 1.0}
    assert [(f.description, f.failing_metrics) for f in history.failing] == [("Word boundary", ("mention_precision",))]


def test_cli_json_output(db: Path) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli_main(["history", "--db", str(db), "--days", "2", "--until", UNTIL, "--format", "json"])
    assert code == 0
    data = json.loads(out.getvalue())
    assert data["window"] == {"since": "2020-03-01 12:00:00", "until": "2020-03-03 12:00:00", "days": 2.0}
    rows = [r for r in data["metric_trends"] if r["metric_name"] == "num_tokens"]
    assert rows == [{"date": "2020-03-02", "metric_name": "num_tokens", "avg_value": 300.0, "test_count": 2},
                    {"date": "2020-03-03", "metric_name": "num_tokens", "avg_value": 400.0, "test_count": 2}]
    assert [r["run_id"] for r in data["runs"]] == ["r3-day2", "r2-day1", "r1-before", "r0-old"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--until", "yesterday"], "--until: not an ISO date or date-time: 'yesterday'"),
        (["--days", "0"], "--days: must be a positive number of days"),
        (["--limit", "0"], "--limit: must be at least 1"),
        (["--plot", "chart.gif"], "the plot file must end in .png or .svg"),
    ],
)
def test_cli_user_errors(db: Path, argv: list[str], message: str) -> None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli_main(["history", "--db", str(db), *argv])
    assert code == 2
    assert message in err.getvalue()


def test_not_a_results_database(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="results database not found"):
        build_history(tmp_path / "missing.db")
    text = tmp_path / "notes.db"
    text.write_text("hello, not sqlite " * 20)
    with pytest.raises(UserError, match="not a SQLite database"):
        build_history(text)
    other = tmp_path / "other.db"
    with contextlib.closing(sqlite3.connect(other)) as conn:
        conn.execute("CREATE TABLE eval_runs (x)")
    with pytest.raises(UserError, match=r"not an evalgate results database \(no table eval_results"):
        build_history(other)


def test_parse_until_forms() -> None:
    assert parse_until("2020-03-03") == dt.datetime(2020, 3, 3, 23, 59, 59, tzinfo=dt.UTC)
    assert parse_until("2020-03-03T12:00:00+02:00") == dt.datetime(2020, 3, 3, 10, 0, tzinfo=dt.UTC)
    assert parse_until("2020-03-03 12:00") == dt.datetime(2020, 3, 3, 12, 0, tzinfo=dt.UTC)
    fixed = dt.datetime(2030, 1, 2, 3, 4, 5, 678, tzinfo=dt.UTC)
    assert parse_until(None, now=fixed) == fixed.replace(microsecond=0)


def test_sparkline_scales_to_the_range() -> None:
    assert sparkline([0.0, 0.5, 1.0]) == "▁▅█"
    assert sparkline([3.0, 3.0]) == "▅▅"
    assert sparkline([]) == ""


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_plot_files(db: Path, tmp_path: Path, suffix: str) -> None:
    pytest.importorskip("matplotlib", reason="matplotlib (the 'plot' extra) is not installed")
    path = plot_history(history_of(db), tmp_path / f"history{suffix}")
    data = path.read_bytes()
    if suffix == ".png":
        assert data.startswith(b"\x89PNG\r\n\x1a\n")
    else:
        assert b"<svg" in data and b"score" in data  # the legend names the plotted metric


def test_plot_unknown_metric(db: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="matplotlib (the 'plot' extra) is not installed")
    with pytest.raises(UserError, match=r"--metric: no trend for nope \(known: case_passed, num_tokens, score\)"):
        plot_history(history_of(db), tmp_path / "x.png", ["nope"])


def test_plot_without_matplotlib_says_how_to_install(db: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes ``import matplotlib`` raise ImportError
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli_main(["history", "--db", str(db), "--plot", str(tmp_path / "h.png")])
    assert code == 2
    assert "plotting needs matplotlib: pip install 'evalgate-action[plot]'" in err.getvalue()
    assert not (tmp_path / "h.png").exists()


def test_the_chart_has_real_time_axes_with_labels(tmp_path: Path) -> None:
    """Runs minutes apart get a minutes axis (not 2025–2029), and both x axes keep their tick labels."""
    pytest.importorskip("matplotlib", reason="matplotlib (the 'plot' extra) is not installed")
    from evalgate.report.history import _pyplot, history_figure

    path = tmp_path / "minutes.db"
    store_run(path, "m1", "2020-03-03T10:00:00Z", [case("a", 0, 0.9, 100, passed=True)])
    store_run(path, "m2", "2020-03-03T10:04:00Z", [case("a", 0, 0.3, 100, passed=False)])
    pyplot = _pyplot()
    figure = history_figure(history_of(path), (), pyplot)
    try:
        figure.canvas.draw()
        top, bottom = figure.axes
        low, high = top.get_xlim()  # matplotlib dates: days since the epoch
        assert 4 / 1440 < high - low < 1 / 24  # the 4 minutes, padded, well under an hour
        assert top.get_xlabel() == "run time (UTC)" and bottom.get_xlabel() == "day (UTC)"
        for axis in (top, bottom):
            assert [t.get_text() for t in axis.get_xticklabels() if t.get_text()], axis.get_xlabel()
        assert "10:0" in " ".join(t.get_text() for t in top.get_xticklabels())
    finally:
        pyplot.close(figure)
