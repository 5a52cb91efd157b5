"""Plain progress on schedule against a slow loopback agent: a first line soon after the start, one every
interval while calls are outstanding (cases done, calls in flight, retries, 429s, elapsed), retries as
they happen (rate-limited), and the final line exactly once. Intervals are shortened through the
``progress_interval_seconds`` setting so the tests stay fast."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from evalgate.calls.executor import CallStats, RetryNotice
from evalgate.config.settings import build_settings
from evalgate.report.progress import RETRY_LINES_PER_INTERVAL, PlainProgress
from evalgate.runner.run import execute
from tests.servers.agent_server import AgentServer, Fault

REPO = Path(__file__).resolve().parents[2]
CHAT = "/api/agent/chat"


class TimedLines:
    """A text stream that keeps each line with the ``time.monotonic()`` it was written at."""

    def __init__(self) -> None:
        self.lines: list[tuple[float, str]] = []

    def write(self, text: str) -> int:
        for line in text.splitlines():
            if line:
                self.lines.append((time.monotonic(), line))
        return len(text)

    def flush(self) -> None:
        return None

    def texts(self) -> list[str]:
        return [line for _, line in self.lines]


def dataset(tmp_path: Path, count: int) -> Path:
    path = tmp_path / "cases.json"
    path.write_text(json.dumps([{"id": f"c{i}", "input": f"question {i}", "expected_keywords": ["answer"]}
                                for i in range(count)]))
    return path


def test_lines_come_on_schedule_while_calls_are_outstanding(tmp_path: Path) -> None:
    stream = TimedLines()
    interval = 0.3

    async def scenario(url: str) -> float:
        settings, suite, _ = build_settings(cli={"dataset": [str(dataset(tmp_path, 4))], "target": "http",
                                                 "target_url": url, "output_dir": str(tmp_path / "out"),
                                                 "concurrency": 2}, env={})
        started = time.monotonic()
        await execute(settings, suite, install_signal_handlers=False,
                      progress_for=lambda total: PlainProgress(total, stream, every_seconds=interval))
        return started

    with AgentServer({"question": "the answer"}, latency_ms=1200) as agent:  # 2 rounds of 1.2 s: ≈ 2.4 s
        started = asyncio.run(scenario(agent.base_url + CHAT))
    times = [at for at, _ in stream.lines]
    texts = stream.texts()
    assert texts[-1].startswith("[evalgate] done: 4/4 cases (100%), 0 not passed · 0 retries · ")
    assert sum(text.startswith("[evalgate] done:") for text in texts) == 1  # the final line exactly once
    assert sum("4/4 cases" in text for text in texts) == 1
    periodic = [(at, text) for at, text in stream.lines if not text.startswith("[evalgate] done:")]
    assert len(periodic) >= 4  # ≈ 2.4 s / 0.3 s lines; far fewer would mean a stalled timer
    assert periodic[0][0] - started < interval + 1.0  # the first line soon after the start
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert max(gaps) < interval + 1.0  # never a long silence while calls are outstanding
    # (the first call to a provider goes alone for its first 0.3 s: calls.ratelimit)
    assert re.fullmatch(r"\[evalgate\] 0/4 cases \(0%\), 0 not passed · (1 call|2 calls) in flight · 0 retries · \d+s",
                        periodic[0][1]), periodic[0][1]
    assert any("· 2 calls in flight ·" in text for _, text in periodic)


def test_no_scheduled_line_once_every_case_is_in() -> None:
    """Between the last case and the end of the run (results being written) the timer stays quiet: the
    next line is the final one, so '4/4 cases' is never printed twice."""
    stream = TimedLines()

    async def scenario() -> None:
        progress = PlainProgress(2, stream, every_seconds=0.01)
        progress.start()
        await asyncio.sleep(0.05)  # scheduled lines while a case is outstanding
        progress.add(SimpleNamespace(passed=True))  # type: ignore[arg-type]
        progress.add(SimpleNamespace(passed=False))  # type: ignore[arg-type]
        before = len(stream.lines)
        await asyncio.sleep(0.05)  # several ticks with every case in
        assert len(stream.lines) == before
        progress.close()

    asyncio.run(scenario())
    texts = stream.texts()
    assert any(text.startswith("[evalgate] 0/2 cases") for text in texts)
    assert sum("2/2 cases" in text for text in texts) == 1
    assert texts[-1].startswith("[evalgate] done: 2/2 cases (100%), 1 not passed")


def test_retries_are_reported_as_they_happen(tmp_path: Path) -> None:
    stream = TimedLines()

    async def scenario(url: str) -> None:
        settings, suite, _ = build_settings(cli={"dataset": [str(dataset(tmp_path, 1))], "target": "http",
                                                 "target_url": url, "output_dir": str(tmp_path / "out"),
                                                 "concurrency": 1}, env={})
        await execute(settings, suite, install_signal_handlers=False,
                      progress_for=lambda total: PlainProgress(total, stream, every_seconds=5))

    faults = [Fault(status=503, times=1), Fault(status=429, retry_after=0.05, times=1)]
    with AgentServer({"question": "the answer"}, faults=faults) as agent:
        asyncio.run(scenario(agent.base_url + CHAT))
    texts = stream.texts()
    retries = [text for text in texts if text.startswith("[evalgate] retry")]
    assert len(retries) == 2
    assert re.fullmatch(r"\[evalgate\] retry 1/3 in [\d.e-]+s: POST http://127\.0\.0\.1:\d+/api/agent/chat: "
                        r"HTTP 503: .*Service unavailable.*", retries[0]), retries[0]
    assert retries[1].startswith("[evalgate] retry 2/3 in 0.05s: ") and "HTTP 429" in retries[1]
    assert texts[-1].startswith("[evalgate] done: 1/1 cases (100%), 0 not passed · 2 retries (1 × 429) · ")


def test_a_storm_of_retries_is_rate_limited() -> None:
    stream = TimedLines()
    stats = CallStats()
    live = SimpleNamespace(in_flight=3, listeners=[], stats=stats)
    progress = PlainProgress(10, stream, every_seconds=10)

    async def storm() -> None:
        progress.start(live)  # type: ignore[arg-type]
        for n in range(40):
            stats.of("target").retries += 1
            for listener in live.listeners:
                listener(RetryNotice("target", "POST http://x", 1, 4, f"HTTP 503: busy {n}", 0.5, 503))
        progress.close()

    asyncio.run(storm())
    texts = stream.texts()
    assert sum(text.startswith("[evalgate] retry") for text in texts) == RETRY_LINES_PER_INTERVAL
    assert texts[-1].startswith("[evalgate] done: 0/10 cases (0%), 0 not passed · 40 retries · "
                                f"{40 - RETRY_LINES_PER_INTERVAL} retry line(s) not shown")
    assert live.listeners == []  # detached at close


def test_the_cli_prints_progress_from_the_setting(tmp_path: Path) -> None:
    with AgentServer({"question": "the answer"}, latency_ms=700) as agent:
        done = subprocess.run(
            [sys.executable, "-m", "evalgate", "run", "-d", str(dataset(tmp_path, 2)), "--target", "http",
             "--target-url", agent.base_url + CHAT, "--concurrency", "1", "--output-dir", str(tmp_path / "out"),
             "--progress", "plain"], cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
            env={**__import__("os").environ, "EVALGATE_PROGRESS_INTERVAL_SECONDS": "0.25"})
    lines = [line for line in done.stderr.splitlines() if line.startswith("[evalgate]")]
    assert done.returncode == 0, done.stderr
    assert len(lines) >= 3 and lines[-1].startswith("[evalgate] done: 2/2 cases")
    assert all("call in flight" in line or "calls in flight" in line for line in lines[:-1])


def test_the_rich_bar_shows_calls_in_flight_retries_and_429s() -> None:
    import io

    from rich.console import Console

    from evalgate.report.progress import RichProgress

    stats = CallStats()
    live = SimpleNamespace(in_flight=5, listeners=[], stats=stats)
    buffer = io.StringIO()
    bar = RichProgress(10, Console(file=buffer, force_terminal=True, width=160))
    bar.start(live)  # type: ignore[arg-type]
    stats.of("target").retries += 2
    stats.of("target").rate_limited += 1
    assert bar.status() == "· 5 in flight · 2 retries (1 × 429)"
    for listener in live.listeners:
        listener(RetryNotice("target", "POST http://x/chat", 1, 4, "HTTP 429: slow down", 1.5, 429))
    bar.close()
    assert "[evalgate] retry 1/3 in 1.5s: POST http://x/chat: HTTP 429: slow down" in buffer.getvalue()
    assert live.listeners == []
