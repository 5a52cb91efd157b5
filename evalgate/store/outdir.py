"""One run at a time in an output directory, and what a killed run left behind.

``OutputLock``: ``.evalgate.lock`` in the output directory, held with ``flock`` (exclusive) for the
whole run and holding the holder's run id, process id, host and start time as JSON; removed when the
run ends. The kernel drops
the lock when its process ends, however it ends (SIGKILL included), so a lock is never stale. A second
run in the same directory either stops at once with a ``UserError`` naming the run that holds it (exit 2)
or, with ``wait``, waits until it is free. The run's spool and temporary files are named after its run
id (``spool_path``, ``temporary_results_path``); once the lock is taken, the files a killed run left
(``.cases*.jsonl``, ``results.json*.tmp``) are removed (``clean_stale``).

``holder_alive``: whether the run that wrote a ``running`` history row still holds its lock; the
history readers and the next writer read a row whose holder is gone as ``incomplete``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import json
import os
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from evalgate.config.sections import RecordSettings
from evalgate.errors import UserError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no locking (the container and CI are Linux)
    fcntl = None  # type: ignore[assignment]

LOCK_FILE = ".evalgate.lock"
WAIT_POLL_SECONDS = 0.2
QUICK_TRIES = 5
STALE_PATTERNS = (".cases*.jsonl", ".merge-cases*.jsonl", "results.json*.tmp")
"""What a killed run may leave in its output directory: its spool and its half-written results."""


def spool_path(directory: Path, run_id: str) -> Path:
    """The run's case spool (``store.results_json.CaseSpool``)."""
    return directory / f".cases.{run_id}.jsonl"


def temporary_results_path(results: Path, run_id: str) -> Path:
    """Where the run writes results.json before renaming it into place."""
    return results.with_name(f"{results.name}.{run_id}.tmp")


class OutputLock:
    """The output directory's lock (module docstring)."""

    def __init__(self, directory: Path, run_id: str) -> None:
        self.directory = directory
        self.path = directory / LOCK_FILE
        self.run_id = run_id
        self._file: IO[str] | None = None

    def marker(self) -> dict[str, Any]:
        """What the run's ``running`` history row records about its holder (``holder_alive``)."""
        return {"lock": str(self.path.resolve()), "pid": os.getpid(), "host": socket.gethostname()}

    def acquire(self, *, wait: bool, where: str, check: Callable[[], None] | None = None) -> None:
        """Take the lock; another holder → ``UserError`` naming it, or (``wait``) wait, calling ``check``
        (which may raise to give up, e.g. on a signal) between tries."""
        if fcntl is None:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        told = False
        tries = 0
        while True:
            handle = _open_no_link(self.path)
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                if _same_file(handle, self.path):
                    break
                handle.close()  # the holder removed the file as it released it: lock the new one
                continue
            except BlockingIOError:
                handle.close()
                tries += 1
                if not wait and tries < QUICK_TRIES:  # a reader's ``holder_alive`` holds it for microseconds
                    time.sleep(0.05)
                    continue
                holder = describe_holder(self.path)
                if not wait:
                    raise UserError(f"the output directory {self.directory} is in use by {holder}; wait for it to "
                                    "finish, run with --wait (wait: true), or give another output directory",
                                    where=where) from None
                if not told:
                    print(f"evalgate: waiting for {holder} to release {self.directory}", file=sys.stderr, flush=True)
                    told = True
                if check is not None:
                    check()
                time.sleep(WAIT_POLL_SECONDS)
        handle.seek(0)
        handle.truncate()
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        handle.write(json.dumps({"run_id": self.run_id, "pid": os.getpid(), "host": socket.gethostname(),
                                 "started": now}))
        handle.flush()
        self._file = handle

    def release(self) -> None:
        """Remove the lock file, then let go (a run waiting on the removed file notices and locks a new
        one: ``acquire`` checks that the file it locked is still the one at the path)."""
        if self._file is None:
            return
        with contextlib.suppress(OSError):
            if _same_file(self._file, self.path):
                self.path.unlink()
        self._file.close()  # closing drops the flock
        self._file = None


def _open_no_link(path: Path) -> IO[str]:
    """``path`` opened for reading and appending, created if missing, never through a symbolic link (one
    planted there, e.g. committed by a pull request, is removed first)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0)
    try:
        descriptor = os.open(path, flags, 0o644)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        path.unlink()
        descriptor = os.open(path, flags, 0o644)
    return os.fdopen(descriptor, "a+", encoding="utf-8")


def _same_file(handle: IO[str], path: Path) -> bool:
    """True when ``path`` still names the file open in ``handle``."""
    try:
        return os.path.samestat(os.fstat(handle.fileno()), os.stat(path))
    except OSError:
        return False


def describe_holder(path: Path) -> str:
    """``run <id> (pid N on HOST, since T)`` from a lock file's content, or ``another evalgate run``."""
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "null")
    except (OSError, ValueError):
        data = None
    if not isinstance(data, dict) or not data.get("run_id"):
        return "another evalgate run"
    return (f"run {data.get('run_id')} (pid {data.get('pid')} on {data.get('host')}, since "
            f"{data.get('started')})")


def clean_stale(directory: Path) -> list[Path]:
    """Remove what killed runs left in ``directory`` (``STALE_PATTERNS``); call only with the lock held.
    Returns the paths removed."""
    removed: list[Path] = []
    for pattern in STALE_PATTERNS:
        for path in directory.glob(pattern):
            with contextlib.suppress(OSError):
                if path.is_symlink() or path.is_file():
                    path.unlink()
                    removed.append(path)
    return removed


def holder_alive(marker: Any, run_id: str) -> bool | None:
    """Whether the run ``run_id`` whose ``running`` row recorded ``marker`` (``OutputLock.marker``) still
    holds its lock: False when the lock file is gone, free, or held by another run; None when that
    cannot be told (no marker, another host, no ``flock``)."""
    if fcntl is None or not isinstance(marker, dict) or not marker.get("lock"):
        return None
    if marker.get("host") not in (None, socket.gethostname()):
        return None
    path = Path(str(marker["lock"]))
    try:
        handle = open(path, encoding="utf-8")  # noqa: SIM115 - closed below
    except OSError:
        return False
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                data = json.loads(handle.read() or "null")
            except ValueError:
                data = None
            return isinstance(data, dict) and data.get("run_id") == run_id
        except OSError:
            return None
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        return False


def check_output_paths(settings: RecordSettings, cwd: Path | None) -> None:
    """The output directory is a directory and its results.json, if any, a file; ``compat_output`` (a
    dialect's own ``--output``) must not be one of the files evalgate writes itself."""
    for path, kind in ((settings.output_path, "a directory"), (settings.output_path / "results.json", "a file")):
        exists = path.exists()
        if exists and (not path.is_dir() if kind == "a directory" else not path.is_file()):
            raise UserError(f"{path} is in the way: evalgate writes {kind} there; remove it or choose another "
                            "output directory", where=settings.origin("output_dir"))
    if not settings.compat_output:
        return
    base = cwd or Path.cwd()
    extra = Path(settings.compat_output)
    extra = (extra if extra.is_absolute() else base / extra).resolve()
    output = settings.output_path if settings.output_path.is_absolute() else base / settings.output_path
    own = {(output / "results.json").resolve(), (settings.db_path if settings.db_path.is_absolute()
                                                   else base / settings.db_path).resolve()}
    if extra in own:
        raise UserError(f"{settings.compat_output} is where evalgate writes its own results; give --output another "
                        "path or --output-dir another directory", where="--output (compat_output)")
