"""Sinks that watch the run as cases finish: the bounded list of failed cases for the console report,
and progress (plain lines for CI logs, a live bar in terminals).

Kept apart from ``report.console`` so a run imports rich only when a terminal shows the live bar; the
rendering modules are loaded after the cases are scored."""

from __future__ import annotations

import sys
import time
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from evalgate.model import CaseResult

MAX_FAILED_LISTED = 25
"""Failed cases the console report lists (the collector keeps four times as many, for merges)."""


_PROBLEMS = ("failed", "errored", "unavailable")


def _explanation(details: dict[str, Any]) -> str | None:
    """A judge's reasoning or a code check's reason, on one line (at most 300 characters)."""
    text = details.get("reasoning") or details.get("reason") if details else None
    if not text:
        return None
    line = " ".join(str(text).split())
    return line if len(line) <= 300 else line[:299] + "…"


def _why(result: CaseResult) -> list[str]:
    """The same one-line reasons as the PR comment (:func:`evalgate.report.view.why_line`)."""
    from evalgate.report.view import format_threshold, why_line

    lines = []
    for name, metric in result.metrics.items():
        status = getattr(metric.status, "value", metric.status)
        if status not in _PROBLEMS:
            continue
        threshold = metric.threshold
        bound = format_threshold({"op": threshold.op, "value": threshold.value} if threshold is not None else None)
        lines.append((status != "failed", why_line(name, metric.value, bound, status, metric.details, metric.reason)))
    ordered = [line for _, line in sorted(lines, key=lambda item: item[0])]
    return ([f"error: {' '.join(str(result.error).split())}"] if result.error else []) + ordered


class FailureCollector:
    """Sink that keeps the first few failed cases (bounded) for the console report."""

    def __init__(self, limit: int = MAX_FAILED_LISTED) -> None:
        self.limit = limit
        self.failures: list[dict[str, Any]] = []

    def add(self, result: CaseResult) -> None:
        if result.passed or len(self.failures) >= self.limit * 4:
            return
        self.failures.append({
            "id": result.id if not result.repeat else f"{result.id}#r{result.repeat}",
            "index": result.index,
            "status": result.status.value,
            "risk_level": result.risk_level,
            "source": result.source,
            "reasons": result.reasons or ([result.error] if result.error else []),
            "explanations": [(name, text) for name, metric in result.metrics.items()
                             if metric.status in _PROBLEMS and (text := _explanation(metric.details))],
            "why": _why(result),
        })


class PlainProgress:
    """Progress as plain lines for CI logs: nothing for runs shorter than ``quiet_seconds``, then at
    most one line every ``every_seconds`` and a final line."""

    def __init__(self, total: int, stream: IO[str] | None = None, *, quiet_seconds: float = 3.0,
                 every_seconds: float = 10.0) -> None:
        self.total = total
        self.stream = stream or sys.stderr
        self.done = 0
        self.failed = 0
        self.started = time.monotonic()
        self.quiet_until = self.started + quiet_seconds
        self.every_seconds = every_seconds
        self.last = 0.0
        self.printed = False

    def add(self, result: CaseResult) -> None:
        self.done += 1
        self.failed += 0 if result.passed else 1
        now = time.monotonic()
        if now >= self.quiet_until and now - self.last >= self.every_seconds:
            self._line(now)

    def _line(self, now: float) -> None:
        self.last, self.printed = now, True
        percent = self.done / self.total if self.total else 1.0
        print(f"[evalgate] {self.done}/{self.total} cases ({percent:.0%}), {self.failed} not passed,"
              f" {now - self.started:.0f}s", file=self.stream, flush=True)

    def close(self) -> None:
        if self.printed and self.last and self.done:
            self._line(time.monotonic())


class RichProgress:
    """A live progress bar for terminals."""

    def __init__(self, total: int, console: Console) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(TextColumn("evaluating"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                 TextColumn("{task.fields[failed]} not passed"), console=console, transient=True)
        self.task = self.progress.add_task("cases", total=total, failed=0)
        self.failed = 0
        self.progress.start()

    def add(self, result: CaseResult) -> None:
        self.failed += 0 if result.passed else 1
        self.progress.update(self.task, advance=1, failed=self.failed)

    def close(self) -> None:
        self.progress.stop()


def make_progress(mode: str, total: int, quiet: bool = False) -> PlainProgress | RichProgress | None:
    if mode == "none" or quiet:
        return None
    tty = sys.stderr.isatty()
    if mode == "rich" or (mode == "auto" and tty):
        from rich.console import Console

        return RichProgress(total, Console(file=sys.stderr))
    return PlainProgress(total)
