"""Recording each finished case: its results.json record (spool line) and its SQLite rows.

``InlineRecorder`` does it in the run's own process. ``ProcessRecorder`` (large runs on a machine with
a second core) hands each case as plain data to a recorder process (``main`` below, started with this
interpreter and ``sys.path``), which rebuilds the ``CaseResult`` and serialises it with the same code,
so the record JSON (~17 µs a case), the details JSON of the seed-001 rows (~11 µs), the spool write and
the SQLite inserts (~30 µs) run beside the run instead of inside it. The output is byte for byte the
same:

* a case travels as ``marshal`` data, which takes exact builtin types only: they rebuild into equal
  objects of the same types (dict order kept), so pydantic and ``json`` write the same text. Sets
  (their order may differ in another process) and code objects (their text holds an address) are
  looked for in the metric details, the only free-form values; a case with those, or with a value
  ``marshal`` refuses, is serialised here and travels as finished text;
* redaction uses this process's secrets, sent along whenever they change (in the order ``redact``
  applies them).

The process runs in its own process group and ignores SIGINT and SIGTERM: the run decides when to stop
and closes the pipe. Every batch it received is written and committed, also when the run crashes or
is killed; end of input ends it.
Protocol on stdin: ``size`` (8 bytes, little-endian) + ``marshal`` of a batch, a list of items
``("secrets", ordered secrets)``, ``("case", plain_case, test_description)`` or ``("text", record_json,
metric_rows, case_row)``; the run's process decides every ``test_description`` (``sqlite.Descriptions``).
"""

from __future__ import annotations

import contextlib
import gc
import json
import marshal
import os
import signal
import sqlite3
import struct
import subprocess
import sys
import time
from itertools import compress
from typing import IO, Any

from evalgate.model import STATUS_TEXT, CaseResult, CaseStatus, MetricResult, MetricStatus, Threshold, trusted
from evalgate.safety.redact import MASK, _longest_first, known_secrets, redact
from evalgate.store.results_json import CaseSpool
from evalgate.store.sqlite import (
    COMMIT_EVERY_CASES,
    COMMIT_EVERY_SECONDS,
    INSERT_CASE,
    INSERT_RESULT,
    SQLiteStore,
    case_row,
    insert_rows,
    metric_rows,
)

HEADER = struct.Struct("<Q")
CASE_FIELDS = tuple(CaseResult.model_fields)
PIPE_BYTES = 1 << 20
"""Pipe buffer asked for (Linux): a whole batch fits, so the run rarely waits for the recorder."""


# --- case ⇄ plain data ------------------------------------------------------------------------------


def plain_case(result: CaseResult) -> tuple[Any, ...]:
    """``result`` as builtin values (``CASE_FIELDS`` order; enums as their values; each metric as
    ``(name, value, threshold op, threshold value, passed, status, reason, details)``).

    Whether the details hold a set (it may come back in another order) or a code object (its text
    holds an address) is for the caller to check (``holds_unstable``, batch by batch); ``marshal``
    itself refuses every other non-builtin type."""
    fields = vars(result)
    metrics = []
    for name, metric in fields["metrics"].items():
        threshold = metric.threshold
        metrics.append((name, metric.value, None if threshold is None else threshold.op,
                        None if threshold is None else threshold.value, metric.passed, STATUS_TEXT[metric.status],
                        metric.reason, metric.details))
    values = [fields[name] for name in CASE_FIELDS]
    values[_STATUS] = STATUS_TEXT[fields["status"]]
    values[_METRICS] = tuple(metrics)
    return tuple(values)


_STATUS = CASE_FIELDS.index("status")
_METRICS = CASE_FIELDS.index("metrics")
_CONTAINERS = {dict, list, tuple}
_UNSTABLE = {set, frozenset, type(plain_case.__code__)}
MAX_DEPTH = 64


def holds_unstable(roots: list[Any]) -> bool:
    """True when a set, frozenset or code object is among ``roots`` or inside them (dicts, lists and
    tuples, breadth first with ``gc.get_referents``: one C call per level); also True past
    ``MAX_DEPTH`` levels."""
    level = roots
    for _ in range(MAX_DEPTH):
        kinds = list(map(type, level))
        if not _UNSTABLE.isdisjoint(kinds):
            return True
        containers = list(compress(level, map(_CONTAINERS.__contains__, kinds)))  # all C-level
        if not containers:
            return False
        level = gc.get_referents(*containers)
    return True


_CASE_STATUS = {status.value: status for status in CaseStatus}
_METRIC_STATUS = {status.value: status for status in MetricStatus}


class CaseRebuilder:
    """Rebuilds ``CaseResult`` objects from ``plain_case`` data (thresholds shared, not re-validated)."""

    def __init__(self) -> None:
        self._thresholds: dict[tuple[str, float], Threshold] = {}

    def threshold(self, op: str | None, value: float | None) -> Threshold | None:
        if op is None or value is None:
            return None
        key = (op, value)
        found = self._thresholds.get(key)
        if found is None:
            found = self._thresholds[key] = Threshold(op=op, value=value)  # type: ignore[arg-type]
        return found

    def case(self, plain: tuple[Any, ...]) -> CaseResult:
        fields = dict(zip(CASE_FIELDS, plain, strict=True))
        fields["status"] = _CASE_STATUS[fields["status"]]
        fields["metrics"] = {
            name: trusted(MetricResult, {"value": value, "threshold": self.threshold(op, bound), "passed": passed,
                                         "status": _METRIC_STATUS[status], "reason": reason, "details": details})
            for name, value, op, bound, passed, status, reason, details in fields["metrics"]
        }
        return trusted(CaseResult, fields)


def redact_with(secrets: tuple[str, ...], text: str) -> str:
    """``evalgate.safety.redact.redact`` with a given, ordered set of secrets."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def ordered_secrets() -> tuple[str, ...]:
    """The secrets ``redact`` replaces right now, in the order it replaces them (longest first; the
    same cached tuple ``redact`` uses)."""
    return _longest_first(frozenset(known_secrets()))


# --- the recorders ----------------------------------------------------------------------------------


class InlineRecorder:
    """Serialises each result once and writes it to the spool and the database, in this process."""

    def __init__(self, spool: CaseSpool, store: SQLiteStore) -> None:
        self.spool = spool
        self.store = store

    def add(self, result: CaseResult) -> None:
        record = redact(result.model_dump_json())
        self.spool.add(result.index, result.repeat, record)
        self.store.add(result, record)

    def close(self) -> None:
        return None


class ProcessRecorder:
    """Hands each result to the recorder process; ``close`` waits until all are written and indexes
    the spool. A failure of the process is raised (not as a pipe error) from ``add`` or ``close``."""

    def __init__(self, spool: CaseSpool, store: SQLiteStore) -> None:
        self.spool = spool
        self.store = store
        spool.flush()
        argv = [sys.executable, "-c", "import sys, json; sys.path[:] = json.loads(sys.argv[1]); "
                "from evalgate.store.recorder import main; sys.exit(main(sys.argv[2:]))",
                json.dumps(sys.path), str(store.path), str(spool.path), store.run_id, store.timestamp]
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, process_group=0)  # Ctrl-C: the run decides
        self._stdin: IO[bytes] = self.process.stdin  # type: ignore[assignment]
        with contextlib.suppress(AttributeError, OSError):  # a bigger pipe where the OS allows it
            import fcntl

            fcntl.fcntl(self._stdin.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        self._batch: list[tuple[Any, ...]] = []
        self._results: list[tuple[CaseResult, tuple[str, ...]]] = []
        self._secrets: tuple[str, ...] | None = None
        self._last_send = time.monotonic()
        self._closed = False

    def add(self, result: CaseResult) -> None:
        secrets = ordered_secrets()
        if secrets is not self._secrets:
            self._secrets = secrets
            self._batch.append(("secrets", secrets))
        self._batch.append(("case", plain_case(result), self.store.descriptions(result)))
        self._results.append((result, secrets))
        self.spool.expect(result.index, result.repeat)
        if len(self._results) >= COMMIT_EVERY_CASES or time.monotonic() - self._last_send > COMMIT_EVERY_SECONDS:
            self._send()

    def _text_item(self, result: CaseResult, secrets: tuple[str, ...], description: str) -> tuple[Any, ...]:
        """The case serialised here (for values that do not travel as plain data)."""
        record = redact_with(secrets, result.model_dump_json())
        rows = metric_rows(result, self.store.run_id, self.store.timestamp, description)
        return ("text", record, rows, case_row(result, self.store.run_id, record))

    def _send(self) -> None:
        batch, results = self._batch, self._results
        self._batch, self._results = [], []
        self._last_send = time.monotonic()
        if not batch:
            return
        details = [metric.details for result, _ in results for metric in result.metrics.values() if metric.details]
        try:
            if holds_unstable(details):  # one C-level sweep over the whole batch; rarely true
                raise ValueError("unstable values in details")
            data = marshal.dumps(batch)
        except ValueError:  # a set or a non-builtin value somewhere: serialise those cases here
            data = marshal.dumps(self._checked(batch, results))
        try:
            self._stdin.write(HEADER.pack(len(data)))
            self._stdin.write(data)
            self._stdin.flush()
        except (BrokenPipeError, ValueError):
            raise self._failure() from None

    def _checked(self, batch: list[tuple[Any, ...]],
                 results: list[tuple[CaseResult, tuple[str, ...]]]) -> list[tuple[Any, ...]]:
        """``batch`` with each case that would not travel unchanged serialised here."""
        checked: list[tuple[Any, ...]] = []
        cases = iter(results)
        for item in batch:
            if item[0] == "secrets":
                checked.append(item)
                continue
            result, secrets = next(cases)
            try:
                if holds_unstable([m.details for m in result.metrics.values() if m.details]):
                    raise ValueError("unstable values in details")
                marshal.dumps(item)
                checked.append(item)
            except ValueError:
                checked.append(self._text_item(result, secrets, item[2]))
        return checked

    def close(self) -> None:
        """Send what is left, wait until the process has written and committed everything, index the
        spool (also after a failure: the records written so far stay usable); raise on failure."""
        if self._closed:
            return
        self._closed = True
        failure: Exception | None = None
        try:
            self._send()
        except Exception as exc:
            failure = exc
        with contextlib.suppress(BrokenPipeError, ValueError):
            self._stdin.close()
        code = self.process.wait()
        self.spool.index_appended()
        if failure is None and code != 0:
            failure = self._failure()
        if failure is not None:
            raise failure

    def _failure(self) -> Exception:
        self.process.wait()
        stderr = self.process.stderr.read().decode("utf-8", "replace").strip() if self.process.stderr else ""
        kind_name, _, message = stderr.partition("\n")
        kind = getattr(sqlite3, kind_name, None)
        if not (isinstance(kind, type) and issubclass(kind, Exception)):
            kind, message = OSError, stderr
        return kind(f"case recorder process failed (exit {self.process.returncode}): {message or 'no message'}")


def recorder_for(spool: CaseSpool, store: SQLiteStore, cases: int) -> InlineRecorder | ProcessRecorder:
    """A ``ProcessRecorder`` for ``cases`` ≥ ``PROCESS_MIN_CASES`` on a machine with two or more usable
    cores (and an interpreter to start), else an ``InlineRecorder``."""
    if cases >= PROCESS_MIN_CASES and usable_cores() >= 2 and sys.executable:
        try:
            return ProcessRecorder(spool, store)
        except OSError:
            pass
    return InlineRecorder(spool, store)


PROCESS_MIN_CASES = 5_000
"""Below this the process's start-up (~0.3 s of CPU) would cost about what it saves."""


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


# --- the recorder process ---------------------------------------------------------------------------


def read_batch(source: IO[bytes]) -> list[tuple[Any, ...]] | None:
    """The next complete batch, or None at end of input (a truncated batch counts as the end)."""
    header = source.read(HEADER.size)
    if len(header) < HEADER.size:
        return None
    (size,) = HEADER.unpack(header)
    data = source.read(size)
    if len(data) < size:
        return None
    return marshal.loads(data)


def record_batches(source: IO[bytes], db_path: str, spool_path: str, run_id: str, timestamp: str) -> int:
    """Write every batch from ``source``: records appended to the spool, rows committed to the
    database, one transaction per batch. Returns the number of cases written."""
    rebuild = CaseRebuilder()
    secrets: tuple[str, ...] = ()
    written = 0
    connection = sqlite3.connect(db_path, isolation_level=None, timeout=60.0)
    try:
        connection.execute("PRAGMA synchronous=NORMAL")
        with open(spool_path, "ab", buffering=PIPE_BYTES) as spool:
            while (batch := read_batch(source)) is not None:
                results: list[Any] = []
                cases: list[Any] = []
                for item in batch:
                    kind = item[0]
                    if kind == "secrets":
                        secrets = item[1]
                        continue
                    if kind == "case":
                        result = rebuild.case(item[1])
                        record = redact_with(secrets, result.model_dump_json())
                        rows = metric_rows(result, run_id, timestamp, item[2])
                        case = case_row(result, run_id, record)
                    else:
                        _, record, rows, case = item
                    spool.write(record.encode("utf-8") + b"\n")
                    results.extend(rows)
                    cases.append(case)
                spool.flush()
                connection.execute("BEGIN")
                insert_rows(connection, INSERT_RESULT, results)
                insert_rows(connection, INSERT_CASE, cases)
                connection.execute("COMMIT")
                written += len(cases)
    finally:
        connection.close()
    return written


def main(argv: list[str]) -> int:
    """``DB_PATH SPOOL_PATH RUN_ID TIMESTAMP``; batches on stdin (module docstring)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    gc.freeze()  # the imported modules: collections then scan only the batch being written …
    gc.set_threshold(100_000, 10, 10)  # … and rarely: the batch's objects are acyclic and short-lived
    db_path, spool_path, run_id, timestamp = argv
    try:
        record_batches(sys.stdin.buffer, db_path, spool_path, run_id, timestamp)
    except Exception as exc:
        print(f"{type(exc).__name__}\n{exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
