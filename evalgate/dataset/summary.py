"""The dry-run view of a dataset (``evalgate validate``, a dialect's ``--dry-run``): what was loaded,
counted along every dimension the reports break results down by."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from evalgate.dataset.load import DatasetFile
from evalgate.model import Case, RiskLevel

NONE_LABEL = "(none)"
DIMENSIONS: tuple[str, ...] = ("suite", "category", "difficulty", "risk_level", "evolution_type", "tag")
MAX_ROWS = 15
MAX_LABEL = 40


def _ordered(counter: Counter[str]) -> dict[str, int]:
    """Counts by descending count, then label; ``(none)`` last."""
    rows = sorted((item for item in counter.items() if item[0] != NONE_LABEL), key=lambda kv: (-kv[1], kv[0]))
    if counter.get(NONE_LABEL):
        rows.append((NONE_LABEL, counter[NONE_LABEL]))
    return dict(rows)


def _label(value: Any) -> str:
    return NONE_LABEL if value is None or value == "" else str(value)


def dataset_summary(cases: Iterable[Case], files: Sequence[DatasetFile] | None = None) -> dict[str, Any]:
    """Counts of ``cases`` by suite, category, difficulty, risk level, evolution type and tag.

    ``counts.tag`` counts each tag once per case (so it may sum to more than the total);
    ``recorded_outputs`` = number of cases whose ``output`` is set (they can run with no target).
    """
    counters: dict[str, Counter[str]] = {name: Counter() for name in DIMENSIONS}
    total = recorded = 0
    for case in cases:
        total += 1
        recorded += case.output is not None
        counters["suite"][_label(case.suite)] += 1
        counters["category"][_label(case.category)] += 1
        counters["difficulty"][_label(case.difficulty)] += 1
        counters["risk_level"][_label(case.risk_level.value)] += 1
        counters["evolution_type"][_label(case.evolution_type)] += 1
        for tag in dict.fromkeys(case.tags) or [None]:
            counters["tag"][_label(tag)] += 1
    counts = {name: _ordered(counter) for name, counter in counters.items()}
    counts["risk_level"] = {level.value: counters["risk_level"][level.value] for level in RiskLevel}
    summary: dict[str, Any] = {"total_cases": total, "recorded_outputs": recorded, "counts": counts}
    if files is not None:
        summary["files"] = [f.as_metadata() | {"suite": f.suite} for f in files]
    return summary


def _clip(text: str, width: int = MAX_LABEL) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _share(count: int, total: int) -> str:
    return f"{100.0 * count / total:5.1f}%" if total else "    –"


def _block(title: str, rows: dict[str, int], total: int, width: int) -> list[str]:
    lines = [title]
    shown = list(rows.items())[:MAX_ROWS]
    for label, count in shown:
        lines.append(f"  {_clip(label):<{width}}  {count:>7}  {_share(count, total)}")
    if len(rows) > len(shown):
        lines.append(f"  … {len(rows) - len(shown)} more")
    return lines


def _informative(name: str, rows: dict[str, int]) -> bool:
    """Skip a dimension whose only value is ``(none)`` (risk level is always shown)."""
    return name == "risk_level" or any(label != NONE_LABEL for label in rows)


def render_summary_text(summary: dict[str, Any]) -> str:
    """A compact plain-text table of ``dataset_summary`` output (percentages are of total cases)."""
    total = int(summary.get("total_cases", 0))
    files = summary.get("files")
    head = f"{total} case{'s' if total != 1 else ''}"
    if files is not None:
        head += f" from {len(files)} file{'s' if len(files) != 1 else ''}"
    head += f", {summary.get('recorded_outputs', 0)} with recorded outputs"
    counts: dict[str, dict[str, int]] = summary.get("counts", {})
    labels = [label for rows in counts.values() for label in rows] + [str(f["path"]) for f in files or []]
    width = min(MAX_LABEL, max((len(label) for label in labels), default=8))
    lines = [head]
    if files:
        lines.append("")
        lines.append("files")
        for entry in files:
            lines.append(f"  {_clip(str(entry['path'])):<{width}}  {entry['cases']:>7}  {str(entry['sha256'])[:12]}")
    for name in DIMENSIONS:
        rows = counts.get(name, {})
        if rows and _informative(name, rows):
            lines.append("")
            lines.extend(_block(name, rows, total, width))
    return "\n".join(lines)
