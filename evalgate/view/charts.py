"""Line charts as inline SVG geometry, computed here and drawn by ``templates/view/trends.html.j2`` (no script, no
library: the numbers below are the whole chart).

x: the run's position among all runs shown (oldest left), so runs of several branches share one axis;
y: the value, scaled linearly between the smallest and largest of the values and the threshold (a flat series
gets ±0.5 around its value, or ±5 % when larger). The threshold is a dashed horizontal line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

WIDTH, HEIGHT = 720, 220
LEFT, RIGHT, TOP, BOTTOM = 56, 16, 14, 30
PALETTE = ("#0969da", "#bf3989", "#1a7f37", "#9a6700", "#8250df", "#cf222e", "#116329", "#953800")
"""Line colours, one per branch in order (the legend names them)."""


def threshold_line(threshold: Any) -> tuple[str, float] | None:
    """A metric threshold as ``(op, value)``: a number is a minimum; ``{min: x}``, ``{max: x}``, ``{op, value}``."""
    if isinstance(threshold, int | float) and not isinstance(threshold, bool):
        return "min", float(threshold)
    if isinstance(threshold, Mapping):
        for op in ("min", "max", "gte", "lte", "gt", "lt", "eq"):
            value = threshold.get(op)
            if isinstance(value, int | float) and not isinstance(value, bool):
                return op, float(value)
        value = threshold.get("value")
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(threshold.get("op") or "min"), float(value)
    return None


def line_chart(series: Sequence[Mapping[str, Any]], positions: int, threshold: float | None,
               labels: tuple[str, str]) -> dict[str, Any] | None:
    """Chart geometry for ``series`` ``[{name, points: [(position, value, title)]}]`` over ``positions`` runs:
    ``{width, height, lines: [{name, colour, points "x,y …", dots: [{x, y, title}]}], threshold_y, ticks,
    x_labels}``; None with no point at all."""
    values = [v for s in series for _, v, _ in s["points"]]
    if not values:
        return None
    low, high = min(values), max(values)
    if threshold is not None:
        low, high = min(low, threshold), max(high, threshold)
    if high - low < 1e-12:
        pad = 0.5 if abs(high) <= 10 else abs(high) * 0.05
        low, high = low - pad, high + pad
    span_x = max(positions - 1, 1)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(position: int) -> float:
        return LEFT + (position / span_x) * plot_w if positions > 1 else LEFT + plot_w / 2

    def y(value: float) -> float:
        return TOP + (1 - (value - low) / (high - low)) * plot_h

    lines = []
    for number, entry in enumerate(series):
        dots = [{"x": round(x(p), 1), "y": round(y(v), 1), "title": title} for p, v, title in entry["points"]]
        lines.append({"name": entry["name"], "colour": entry.get("colour") or PALETTE[number % len(PALETTE)],
                      "points": " ".join(f"{d['x']},{d['y']}" for d in dots), "dots": dots})
    ticks = [{"y": round(y(value), 1), "label": _tick(value)} for value in (low, (low + high) / 2, high)]
    return {"width": WIDTH, "height": HEIGHT, "left": LEFT, "right": WIDTH - RIGHT, "top": TOP,
            "bottom": HEIGHT - BOTTOM, "lines": lines, "ticks": ticks,
            "threshold_y": round(y(threshold), 1) if threshold is not None else None,
            "x_labels": {"first": labels[0], "last": labels[1]}}


def _tick(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
