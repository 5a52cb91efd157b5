"""``evalgate`` in a fresh interpreter that reports its own peak RSS (``VmHWM`` from ``/proc/self/status``),
for the figures of ``bench.hostile`` and ``bench.streaming``."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PEAK_REPORTING = ("import sys\nfrom evalgate.cli.main import main\ncode = main(sys.argv[1:])\n"
                  "peak = [line for line in open('/proc/self/status') if line.startswith('VmHWM')]\n"
                  "sys.stderr.write(peak[0] if peak else 'VmHWM: 0 kB\\n')\nsys.exit(code)")
"""``evalgate ARGS`` reporting its own peak RSS (``VmHWM``; a child's ``ru_maxrss`` counts its parent's)."""


def measured_process(args: list[str], cwd: Path, stdin: int | None = subprocess.DEVNULL) -> dict[str, Any]:
    started = time.monotonic()
    process = subprocess.Popen([sys.executable, "-c", PEAK_REPORTING, *args], cwd=cwd, stdin=stdin,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               env={**os.environ, "PYTHONPATH": str(REPO)})
    assert process.stderr is not None
    err = process.stderr.read().decode()
    _, status, usage = os.wait4(process.pid, 0)
    err, _, peak = err.rpartition("VmHWM:")
    return {"exit": os.waitstatus_to_exitcode(status), "wall_s": round(time.monotonic() - started, 3),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 3), "peak_rss_mb": round(int(peak.split()[0]) / 1024, 1),
            "message": err.strip()[:200]}
