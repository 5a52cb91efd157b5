"""Sinks that watch the run as cases finish: the bounded list of failed cases for the console report,
and progress (plain lines for CI logs, a live bar in terminals), which also watches the run's calls
(in flight, retries, 429s) through the executor.

Kept apart from ``report.console`` so a run imports rich only when a terminal shows the live bar; the
rendering modules are loaded after the cases are scored."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any, Protocol

from evalgate.report.view import case_why
from evalgate.safety.redact import redact

if TYPE_CHECKING:
    from rich.console import Console

    from evalgate.model import CaseResult

MAX_FAILED_LISTED = 25
"""Failed cases the console report lists (the collector keeps four times as many, for merges)."""


def _why(result: CaseResult) -> list[str]:
    """The same one-line reasons as the PR comment (:func:`evalgate.report.view.case_why`, read from the
    metric results without dumping the whole case), the case's error first and whole."""
    error = [f"error: {' '.join(str(result.error).split())}"] if result.error else []
    return error + case_why(result, error=False)


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
            "why": _why(result),
        })


class Live(Protocol):
    """What progress reads from the run's executor (``calls.executor.Executor``)."""

    in_flight: int
    listeners: list[Callable[[Any], None]]
    stats: Any


RETRY_LINES_PER_INTERVAL = 5
"""Retry lines printed per progress interval; more are counted and summed up in the next line."""
FIRST_LINE_SECONDS = 3.0
"""The first plain progress line comes this long after the start (or after the interval, if shorter)."""


class PlainProgress:
    """Progress as plain lines for CI logs: a line ``min(3 s, every_seconds)`` after the start, then one
    every ``every_seconds`` while cases are outstanding, whether or not a case finished (cases done/total,
    calls in flight, retries and 429s so far, elapsed), one line per retry as it happens (at most
    ``RETRY_LINES_PER_INTERVAL`` per interval; the rest are counted), and one final line at ``close``.
    The timer runs on the event loop (``start``); ``clock`` is injectable for tests."""

    def __init__(self, total: int, stream: IO[str] | None = None, *, every_seconds: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.total = total
        self.stream = stream or sys.stderr
        self.clock = clock
        self.done = 0
        self.failed = 0
        self.started = clock()
        self.every_seconds = every_seconds
        self.first_seconds = min(FIRST_LINE_SECONDS, every_seconds)
        self.live: Live | None = None
        self.closed = False
        self.retry_lines = 0
        self.retries_unshown = 0
        self._ticker: asyncio.Task[None] | None = None

    def add(self, result: CaseResult) -> None:
        self.done += 1
        self.failed += 0 if result.passed else 1

    def start(self, live: Live | None = None) -> None:
        """Watch ``live`` (retries, calls in flight) and print on schedule from the running loop."""
        self.live = live
        if live is not None:
            live.listeners.append(self.retry)
        self._ticker = asyncio.get_running_loop().create_task(self._tick())

    async def _tick(self) -> None:
        await asyncio.sleep(self.first_seconds)
        while not self.closed:
            if self.done < self.total:  # once every case is in, the next line is the final one (close)
                self._print(self.line())
            self.retry_lines = 0
            await asyncio.sleep(self.every_seconds)

    def line(self, final: bool = False) -> str:
        """``[evalgate] 12/40 cases (30%), 1 not passed · 8 calls in flight · judge openai: paced by tokens/min:
        148k of 150k · 3 retries (1 × 429) · 14s`` (the pacing part only while a budget binds)."""
        percent = self.done / self.total if self.total else 1.0
        parts = [f"{self.done}/{self.total} cases ({percent:.0%}), {self.failed} not passed"]
        if self.live is not None:
            if not final:
                parts.append(f"{self.live.in_flight} call{'s' if self.live.in_flight != 1 else ''} in flight")
                parts.extend(pacing(self.live))
            parts.append(_retries(self.live.stats))
        if self.retries_unshown:
            parts.append(f"{self.retries_unshown} retry line(s) not shown")
            self.retries_unshown = 0
        parts.append(f"{self.clock() - self.started:.0f}s")
        return f"[evalgate] {'done: ' if final else ''}{' · '.join(parts)}"

    def retry(self, notice: Any) -> None:
        """One line per retry as it happens, at most ``RETRY_LINES_PER_INTERVAL`` per interval."""
        if self.retry_lines >= RETRY_LINES_PER_INTERVAL:
            self.retries_unshown += 1
            return
        self.retry_lines += 1
        self._print(retry_line(notice))

    def _print(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def close(self) -> None:
        """Stop the timer and print the final line (once)."""
        if self.closed:
            return
        self.closed = True
        if self._ticker is not None:
            self._ticker.cancel()
        if self.live is not None and self.retry in self.live.listeners:
            self.live.listeners.remove(self.retry)
        self._print(self.line(final=True))


def retry_line(notice: Any) -> str:
    """``[evalgate] retry 1/3 in 0.8s: POST http://…: HTTP 503: Service unavailable`` (redacted, one line)."""
    reason = " ".join(str(notice.reason).split())[:RETRY_REASON_CHARS]
    return redact(f"[evalgate] retry {notice.attempt}/{notice.attempts - 1} in {notice.delay:.2g}s: "
                  f"{notice.what}: {reason}")


RETRY_REASON_CHARS = 200


def pacing(live: Any) -> list[str]:
    """The providers whose rate limits are making calls wait, e.g. ``judge openai: paced by tokens/min: 148k
    of 150k`` (``Executor.pacing_status``; nothing when no budget binds)."""
    status = getattr(live, "pacing_status", None)
    return list(status()) if callable(status) else []


def _retries(stats: Any) -> str:
    retries, limited = stats.total("retries"), stats.total("rate_limited")
    text = f"{retries} retr{'y' if retries == 1 else 'ies'}"
    return f"{text} ({limited} × 429)" if limited else text


class RichProgress:
    """A live progress bar for terminals: cases done/total, elapsed, not passed, calls in flight,
    retries and 429s so far; retries are printed above the bar as they happen (rate-limited like the
    plain lines)."""

    def __init__(self, total: int, console: Console) -> None:
        from rich.progress import (  # lazy: rich's live display only on a terminal
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.live: Live | None = None
        self.progress = Progress(TextColumn("evaluating"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                 TextColumn("{task.fields[failed]} not passed"), live_column(self), console=console,
                                 transient=True)
        self.task = self.progress.add_task("cases", total=total, failed=0)
        self.failed = 0
        self.retry_lines = 0
        self.window_started = time.monotonic()
        self.progress.start()

    def start(self, live: Live | None = None) -> None:
        self.live = live
        if live is not None:
            live.listeners.append(self.retry)

    def add(self, result: CaseResult) -> None:
        self.failed += 0 if result.passed else 1
        self.progress.update(self.task, advance=1, failed=self.failed)

    def retry(self, notice: Any) -> None:
        now = time.monotonic()
        if now - self.window_started >= 10.0:
            self.window_started, self.retry_lines = now, 0
        if self.retry_lines < RETRY_LINES_PER_INTERVAL:
            self.retry_lines += 1
            self.progress.console.print(retry_line(notice), markup=False, highlight=False)

    def status(self) -> str:
        if self.live is None:
            return ""
        paced = "".join(f" · {text}" for text in pacing(self.live))
        return f"· {self.live.in_flight} in flight{paced} · {_retries(self.live.stats)}"

    def close(self) -> None:
        if self.live is not None and self.retry in self.live.listeners:
            self.live.listeners.remove(self.retry)
        self.progress.stop()


def live_column(owner: RichProgress) -> Any:
    """A rich column showing ``owner.status()`` (read at every refresh)."""
    from rich.progress import ProgressColumn  # lazy: rich's live display only on a terminal
    from rich.text import Text  # lazy: rich's live display only on a terminal

    class LiveColumn(ProgressColumn):
        def render(self, task: Any) -> Text:
            return Text(owner.status())

    return LiveColumn()


def make_progress(mode: str, total: int, quiet: bool = False, every_seconds: float = 10.0
                  ) -> PlainProgress | RichProgress | None:
    if mode == "none" or quiet:
        return None
    tty = sys.stderr.isatty()
    if mode == "rich" or (mode == "auto" and tty):
        from rich.console import Console  # lazy: rich's live display only on a terminal

        return RichProgress(total, Console(file=sys.stderr))
    return PlainProgress(total, every_seconds=every_seconds)
