"""Run one child process and measure it: wall time, CPU time and peak resident memory.

The command is started through ``bench/launch.py`` (a ~8 MB stdlib-only process that forks, execs,
``wait4``s and reports), because Linux carries the pre-``exec`` memory high-water mark of whoever
forked into the child's ``ru_maxrss``: forking from the harness itself would report the harness's peak.

* wall time: from just before ``fork`` to ``wait4`` returning, in the launcher, in seconds;
* CPU time: ``ru_utime + ru_stime`` of the command and every descendant it waited for;
* peak RSS: the larger of the command's ``ru_maxrss`` (its largest single process) and, while two or
  more processes of its tree run at once, the peak of their summed proportional set size (PSS, so pages
  shared after a fork count once) sampled from ``/proc`` every ``poll_seconds``. Reported in MiB (2^20
  bytes).

The launcher runs in its own session so a timeout kills the whole tree. psutil is deliberately not used.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

LAUNCHER = Path(__file__).resolve().parent / "launch.py"
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ProcessRun:
    """What one measured child run produced."""

    argv: tuple[str, ...]
    returncode: int
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    stdout_path: Path
    stderr_path: Path
    timed_out: bool = False

    def stderr_tail(self, chars: int = 600) -> str:
        return _tail(self.stderr_path, chars)

    def stdout_tail(self, chars: int = 600) -> str:
        return _tail(self.stdout_path, chars)


def _tail(path: Path, chars: int) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-chars:].decode("utf-8", errors="replace")


def children_of(pid: int) -> list[int]:
    """Direct children of ``pid`` from ``/proc/<pid>/task/*/children`` (empty when unavailable)."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as handle:
                found.extend(int(token) for token in handle.read().split())
        except (OSError, ValueError):
            continue
    return found


def process_tree(root: int) -> list[int]:
    """``root`` and all its live descendants."""
    tree, frontier = [root], [root]
    while frontier:
        kids = [kid for pid in frontier for kid in children_of(pid)]
        tree.extend(kids)
        frontier = kids
    return tree


def memory_bytes(pid: int) -> int:
    """Proportional set size of one process (``Pss`` of ``/proc/<pid>/smaps_rollup``, KiB → bytes): pages
    shared with other processes count once in a sum over the tree, so a fork sharing its parent's pages
    until ``exec`` does not double the total. Falls back to RSS (``statm`` field 2) without smaps_rollup;
    0 once the process is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as handle:
            return int(handle.read().split()[1]) * PAGE_SIZE
    except (OSError, ValueError, IndexError):
        return 0


def high_water_bytes(pid: int) -> int:
    """``VmHWM`` of ``/proc/<pid>/status`` (KiB → bytes): the process's peak RSS since exec; 0 if gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


class TreeSampler(threading.Thread):
    """Samples a process tree until stopped; ``peak`` (bytes) = max(summed PSS, largest VmHWM)."""

    def __init__(self, root: int, poll_seconds: float) -> None:
        super().__init__(name=f"rss-{root}", daemon=True)
        self.root = root
        self.poll_seconds = poll_seconds
        self.peak = 0
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            self.sample()
            self._done.wait(self.poll_seconds)

    def sample(self) -> None:
        """Only trees of two or more processes are sampled: a single process's peak is exactly its
        ``ru_maxrss``, and reading ``smaps_rollup`` walks the page tables under the process's memory lock,
        which would slow the process being measured."""
        pids = [pid for pid in process_tree(self.root)[1:] if _exec_done(pid)]  # [0] is the launcher
        if len(pids) < 2:
            return
        total = sum(memory_bytes(pid) for pid in pids)
        largest = max((high_water_bytes(pid) for pid in pids), default=0)
        self.peak = max(self.peak, total, largest)

    def stop(self) -> None:
        self._done.set()
        self.join()


def _cmdline(pid: int) -> bytes | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read()
    except OSError:
        return None


def _exec_done(pid: int) -> bool:
    """False while ``pid`` is still the forked copy of this harness (same command line, before ``exec``)."""
    line = _cmdline(pid)
    return line is not None and line != _SELF_CMDLINE


_SELF_CMDLINE = _cmdline(os.getpid())


def run_measured(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    log_dir: Path,
    name: str,
    timeout_s: float = 900.0,
    poll_seconds: float = 0.05,
) -> ProcessRun:
    """Run ``argv`` to completion (or ``timeout_s``) through ``bench/launch.py`` and measure it;
    stdout/stderr go to files in ``log_dir`` named after ``name``."""
    log_dir.mkdir(parents=True, exist_ok=True)
    stdout_path, stderr_path = log_dir / f"{name}.stdout", log_dir / f"{name}.stderr"
    report_path = log_dir / f"{name}.launch.json"
    report_path.unlink(missing_ok=True)
    command = [sys.executable, "-I", "-S", str(LAUNCHER), str(report_path), *argv]
    with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL, stdout=out,
                                   stderr=err, start_new_session=True)
        sampler = TreeSampler(process.pid, poll_seconds)
        sampler.start()
        killed = threading.Event()
        killer = threading.Timer(timeout_s, _kill_group, (process.pid, killed))
        killer.start()
        try:
            process.wait()
        finally:
            killer.cancel()
            sampler.stop()
        outer_wall = time.perf_counter() - started
    try:
        inner = json.loads(report_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # killed before it could write: fall back to what the harness saw
        inner = {"wall_s": outer_wall, "cpu_s": 0.0, "maxrss_kb": 0, "status": process.returncode}
    peak = max(inner["maxrss_kb"] * 1024, sampler.peak)
    return ProcessRun(
        argv=tuple(argv), returncode=int(inner["status"]), wall_s=float(inner["wall_s"]), cpu_s=float(inner["cpu_s"]),
        peak_rss_mb=peak / MIB, stdout_path=stdout_path, stderr_path=stderr_path, timed_out=killed.is_set(),
    )


def _kill_group(pid: int, killed: threading.Event) -> None:
    killed.set()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
