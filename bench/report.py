"""Pure arithmetic and rendering of benchmark results (no I/O).

Definitions used everywhere:

* ideal time (s) = calls × latency_ms / 1000 / C — every allowed connection busy, zero overhead;
* efficiency = ideal time / measured wall time (1.0 is perfect, higher is impossible);
* cases per second = cases / measured wall time;
* ratio (peer / evalgate) = the peer's median wall time / evalgate's median wall time in the same run
  (> 1 means evalgate is faster);
* scale fit: least-squares ``wall = a + b · n`` over the sizes run; ``b`` is in µs per case.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def ideal_seconds(calls: int, latency_ms: float, concurrency: int) -> float:
    """calls × latency / C, in seconds."""
    if concurrency < 1:
        raise ValueError("concurrency must be >= 1")
    return calls * latency_ms / 1000.0 / concurrency


def efficiency(ideal_s: float, wall_s: float | None) -> float | None:
    """ideal / measured; None when nothing was measured."""
    if wall_s is None or wall_s <= 0:
        return None
    return ideal_s / wall_s


def cases_per_second(cases: int, wall_s: float | None) -> float | None:
    if wall_s is None or wall_s <= 0:
        return None
    return cases / wall_s


def ratio(peer_wall_s: float | None, evalgate_wall_s: float | None) -> float | None:
    """peer / evalgate wall time (> 1: evalgate is faster)."""
    if peer_wall_s is None or evalgate_wall_s is None or evalgate_wall_s <= 0:
        return None
    return peer_wall_s / evalgate_wall_s


def linear_fit(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares ``y = a + b·x`` → ``(a, b)``; needs ≥ 2 distinct x."""
    if len({x for x, _ in points}) < 2:
        raise ValueError("a linear fit needs at least two distinct sizes")
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    sxx = sum((x - mean_x) ** 2 for x, _ in points)
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in points)
    slope = sxy / sxx
    return mean_y - slope * mean_x, slope


def max_relative_residual(points: Sequence[tuple[float, float]], fit: tuple[float, float]) -> float:
    """max |y − (a + b·x)| / y over the points: how far from a straight line the measurements are."""
    a, b = fit
    return max(abs(y - (a + b * x)) / y for x, y in points if y > 0)


def summarise_runs(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Medians over the valid repeats of one (scenario, tool): wall, CPU, peak RSS (MiB)."""
    valid = [r for r in runs if not r.get("problems")]
    return {
        "repeats": len(runs),
        "valid_repeats": len(valid),
        "wall_s": median([r["wall_s"] for r in valid]),
        "cpu_s": median([r["cpu_s"] for r in valid]),
        "peak_rss_mb": median([r["peak_rss_mb"] for r in valid]),
        "problems": sorted({p for r in runs for p in r.get("problems", [])}),
    }


def derive(summary: dict[str, Any], *, cases: int, calls: int, latency_ms: float, concurrency: int,
           evalgate_wall_s: float | None) -> dict[str, Any]:
    """Add ideal time, efficiency, cases/s and the ratio to evalgate to a ``summarise_runs`` result."""
    ideal = ideal_seconds(calls, latency_ms, concurrency)
    wall = summary["wall_s"]
    return summary | {
        "ideal_s": ideal,
        "efficiency": efficiency(ideal, wall),
        "cases_per_s": cases_per_second(cases, wall),
        "ratio_to_evalgate": ratio(wall, evalgate_wall_s),
    }


# --- rendering -----------------------------------------------------------------------------------------


def _fmt(value: Any) -> str:
    """None → "—"; floats with 2 decimals, or 3 significant digits below 0.1 (so 0.0019 stays visible)."""
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.3g}" if 0 < abs(value) < 0.1 else f"{value:.2f}"
    return str(value)


def render_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain monospace table: columns padded to their widest cell, numbers right-aligned."""
    cells = [[_fmt(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]

    def line(values: Sequence[str], raw: Sequence[Any] | None = None) -> str:
        parts = []
        for i, text in enumerate(values):
            numeric = raw is not None and (raw[i] is None or (isinstance(raw[i], int | float)
                                                               and not isinstance(raw[i], bool)))
            parts.append(text.rjust(widths[i]) if numeric else text.ljust(widths[i]))
        return "  ".join(parts).rstrip()

    out = [line(list(headers)), "  ".join("-" * w for w in widths)]
    out.extend(line(c, r) for c, r in zip(cells, rows, strict=True))
    return "\n".join(out)


def http_rows(scenarios: Sequence[Mapping[str, Any]]) -> list[list[Any]]:
    """One row per (scenario, tool) for the HTTP scenarios table."""
    rows: list[list[Any]] = []
    for scenario in scenarios:
        for tool, result in scenario["tools"].items():
            if result.get("unavailable"):
                rows.append([scenario["name"], tool, None, None, None, None, None, None,
                             f"not run: {result['unavailable']}"[:70]])
                continue
            note = "; ".join(result.get("problems", []))[:70]
            rows.append([scenario["name"], tool, result["wall_s"], result["cases_per_s"], result["efficiency"],
                         result["peak_rss_mb"], result["cpu_s"], result.get("ratio_to_evalgate"), note])
    return rows


HTTP_HEADERS = ("scenario", "tool", "wall s", "cases/s", "efficiency", "peak MB", "cpu s", "peer/evalgate", "notes")
