"""Tiny launcher: fork + exec one command, wait for it, and write its own measurements as JSON.

Run as ``python -I -S bench/launch.py RESULT.json COMMAND...`` (stdlib only, ~8 MB resident). Linux
carries the pre-``exec`` memory high-water mark into a process's ``ru_maxrss``; forking from this small
process instead of the harness keeps that contamination to the launcher's own few MB. Writes
``{"wall_s", "cpu_s", "maxrss_kb", "status"}``: wall from just before ``fork`` to ``wait4`` returning,
CPU = user + system of the command and every descendant it waited for. Exits with the command's status.
"""

import json
import os
import sys
import time


def main() -> int:
    result_path, argv = sys.argv[1], sys.argv[2:]
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    with open(result_path, "w", encoding="utf-8") as handle:
        json.dump({"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "maxrss_kb": usage.ru_maxrss,
                   "status": code}, handle)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
