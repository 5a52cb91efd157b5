"""``evalgate history`` as text tables and as a chart: the runs, metric trends and most-failing cases that
``evalgate.store.history`` reads from a results database. The chart needs matplotlib, an optional
dependency (``pip install 'evalgate-action[plot]'``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from evalgate.errors import UserError
from evalgate.store.history import CASE_PASSED, History, MetricTrend

SPARK = "▁▂▃▄▅▆▇█"
PLOT_SUFFIXES = (".png", ".svg")
MAX_DEFAULT_PLOT_METRICS = 8


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
    out += ["", f"Flakiest cases ({window_text}; every repeat of every completed run; flake rate = trials "
            "disagreeing with the case's majority / trials, 95% Wilson interval)"]
    if history.flaky:
        rows = [[f.case_id if len(f.case_id) <= 70 else f.case_id[:69] + "…", f"{f.passes}/{f.trials}",
                 str(f.runs), f"{f.flake_rate:.0%}", f"{f.interval[0]:.0%}–{f.interval[1]:.0%}"]
                for f in history.flaky]
        out += text_table(["case", "passed trials", "runs", "flake rate", "95% interval"], rows, right=(1, 2, 3))
    else:
        out.append("  no flaky case in this window")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------
# plot (optional dependency)


def plot_history(history: History, destination: Path, metrics: Sequence[str] = ()) -> Path:
    """Draw pass rate per run and the daily means of ``metrics`` (default: up to 8 metrics whose
    values all lie in [0, 1]) to a PNG or SVG chosen by the file suffix."""
    if destination.suffix.lower() not in PLOT_SUFFIXES:
        raise UserError("the plot file must end in .png or .svg", where=f"--plot {destination}")
    pyplot = _pyplot()
    figure = history_figure(history, metrics, pyplot)
    destination.parent.mkdir(parents=True, exist_ok=True)
    try:
        figure.savefig(destination)
    except OSError as exc:
        raise UserError(f"cannot write the plot ({exc.strerror})", where=str(destination)) from None
    finally:
        pyplot.close(figure)
    return destination


def history_figure(history: History, metrics: Sequence[str], pyplot: Any) -> Any:
    """The chart's figure: pass rate per run on a time axis padded around the runs, daily metric means below;
    both x axes labelled with concise dates."""
    chosen = _plot_metrics(history, metrics)
    figure, (top, bottom) = pyplot.subplots(2, 1, figsize=(10, 7), constrained_layout=True)
    import matplotlib.dates as mdates  # optional: the plot extra (matplotlib)

    runs = sorted(history.runs, key=lambda r: r.timestamp)
    times = [_as_datetime(r.timestamp) for r in runs]
    top.plot(times, [r.pass_rate for r in runs], marker="o")
    if times:  # a real time axis, padded around the runs (runs minutes apart get a minutes axis, not years)
        span = max(times) - min(times)
        pad = max(span * 0.05, dt.timedelta(minutes=1))
        top.set_xlim(min(times) - pad, max(times) + pad)
    top.set_xlabel("run time (UTC)")
    top.set_title(f"Pass rate per run (newest {len(runs)})")
    top.set_ylim(-0.02, 1.02)
    top.set_ylabel("pass rate")
    for trend in chosen:
        bottom.plot([dt.date.fromisoformat(p.date) for p in trend.points], [p.average for p in trend.points],
                    marker=".", label=trend.metric)
    bottom.set_title(f"Daily metric means, {history.since[:10]} → {history.until[:10]}")
    days = [dt.date.fromisoformat(p.date) for trend in chosen for p in trend.points]
    if days:
        bottom.set_xlim(min(days) - dt.timedelta(days=1), max(days) + dt.timedelta(days=1))
    bottom.set_xlabel("day (UTC)")
    bottom.set_ylabel("daily mean")
    for axis in (top, bottom):  # concise dates on both axes (autofmt_xdate would hide the upper one's labels)
        locator = mdates.AutoDateLocator()
        axis.xaxis.set_major_locator(locator)
        axis.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    if chosen:
        bottom.legend(loc="best", fontsize="small")
    if not metrics:
        bottom.set_ylim(-0.02, 1.02)
    return figure


def _pyplot() -> Any:
    try:
        import matplotlib  # optional: the plot extra (matplotlib)
    except ImportError:
        raise UserError("plotting needs matplotlib: pip install 'evalgate-action[plot]'", where="--plot") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as pyplot  # optional: the plot extra (matplotlib)

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
