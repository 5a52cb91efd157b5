"""Scanning one large JSONL dataset with two processes.

A JSONL file of ``PARALLEL_MIN_BYTES`` or more is split at a line end; a helper process (``python -c
… evalgate.dataset.parallel``) validates and packs the last ``HELPER_SHARE`` of it while this process
does the rest, so the scan takes about 60 % of the time on a machine with a second core.

Only a dataset without a single problem is scanned this way: at the first problem in either half,
or an id found in both halves, the result is None and the caller scans the whole dataset the usual
way, which reports every problem exactly as always. The cases, their provenance (file, line, index,
suite) and the file's metadata (sha256, count) are the same as the usual scan's.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import marshal
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from evalgate.dataset.compact import pack_case, write_packed
from evalgate.dataset.load import (
    DatasetFile,
    DatasetSource,
    _gc_paused,
    _jsonl_lines,
    _NoDigest,
    _Problem,
    _RawCase,
    _validate_case,
    resolve_paths,
)
from evalgate.model import Case

PARALLEL_MIN_BYTES = 8 << 20
"""Smaller files are scanned in one process (the helper's start-up, ~0.3 s of CPU, would not pay)."""
PACK_BUFFER = 1 << 20
HELPER_SHARE = 0.4
"""Fraction of the file (bytes) the helper takes: less than half, as it first spends ~0.4 s importing."""


@dataclass
class RangeScan:
    """What validating one byte range of a JSONL file found (all of it valid)."""

    count: int = 0
    ids: list[str] = field(default_factory=list)
    case_metrics: list[tuple[str, list[str]]] = field(default_factory=list)


def scan_range(path: Path, display: str, suite: str, start: int, stop: int | None, first_line: int,
               first_index: int, packed: IO[bytes]) -> RangeScan | None:
    """Validate the cases in bytes ``[start, stop)`` of ``path`` (line ``first_line`` begins at
    ``start``; the first case gets index ``first_index``), packing each into ``packed``. None at the
    first problem: a line that is not a valid case, a repeated id, or a case that does not pack."""
    found = RangeScan()
    seen: set[str] = set()
    with open(path, "rb") as handle:
        handle.seek(start)
        limit = None if stop is None else stop - start
        for item in _jsonl_lines(handle, _NoDigest(), first_line, limit):
            case = _admit(item, display, suite, first_index + found.count)
            if case is None or case.id in seen:
                return None
            data = pack_case(case)
            if data is None:
                return None
            write_packed(packed, data)
            seen.add(case.id)
            found.ids.append(case.id)
            found.count += 1
            if case.metrics or case.assertions:
                found.case_metrics.append((f"{case.location}: case {case.id!r} metrics", case.requested_metrics))
    packed.flush()
    return found


def _admit(item: _RawCase | _Problem, display: str, suite: str, index: int) -> Case | None:
    """``DatasetStream._admit`` for a range known to hold no problem (None when it does)."""
    if isinstance(item, _Problem):
        return None
    try:
        case = _validate_case(item, item.line)
    except _Problem:
        return None
    fields = vars(case)
    fields.update(source_file=display, source_line=item.line, index=index)
    if fields["suite"] is None:
        fields["suite"] = suite
        case.__pydantic_fields_set__.add("suite")
    return case


@dataclass
class ParallelScan:
    count: int
    files: list[DatasetFile]
    case_metrics: list[tuple[str, list[str]]]
    packed: list[IO[bytes]]


def parallel_scan(paths: list[str], base_dir: Path) -> ParallelScan | None:
    """Scan ``paths`` with two processes when they name one large JSONL file; None when they do not,
    when the machine has one core, or when the dataset has any problem (scan it the usual way)."""
    source = _single_large_jsonl(paths, base_dir)
    if source is None:
        return None
    split, first_line, first_index = _split_point(source.path)
    if split is None:
        return None
    suite = source.default_suite()
    second = tempfile.TemporaryFile(buffering=PACK_BUFFER)  # noqa: SIM115 - returned to the caller
    helper = _start_helper(source, suite, split, first_line, first_index, second)
    if helper is None:
        second.close()
        return None
    first = tempfile.TemporaryFile(buffering=PACK_BUFFER)  # noqa: SIM115 - returned to the caller
    try:
        with _gc_paused():
            mine = scan_range(source.path, source.display, suite, 0, split, 1, 0, first)
        sha256 = _file_sha256(source.path) if mine is not None else ""  # while the helper finishes
        theirs = _finish_helper(helper, abandon=mine is None)
        if mine is None or theirs is None or not set(mine.ids).isdisjoint(theirs.ids) \
                or mine.count != first_index or not mine.count + theirs.count:
            raise LookupError("not scanned in parallel")
    except BaseException as exc:
        if helper.returncode is None:
            _finish_helper(helper, abandon=True)
        first.close()
        second.close()
        if isinstance(exc, LookupError | OSError):
            return None
        raise
    count = mine.count + theirs.count
    return ParallelScan(count, [DatasetFile(source.display, sha256, count, suite)],
                        mine.case_metrics + theirs.case_metrics, [first, second])


def _single_large_jsonl(paths: list[str], base_dir: Path) -> DatasetSource | None:
    if not sys.executable or _usable_cores() < 2:
        return None
    try:
        sources = resolve_paths(paths, base_dir)
    except Exception:  # the usual scan reports it
        return None
    if len(sources) != 1 or sources[0].path.suffix.lower() != ".jsonl":
        return None
    try:
        size = sources[0].path.stat().st_size
    except OSError:
        return None
    return sources[0] if size >= PARALLEL_MIN_BYTES else None


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _split_point(path: Path) -> tuple[int | None, int, int]:
    """(byte offset of the first line starting at or after ``1 - HELPER_SHARE`` of the file, its line
    number, the number of non-blank lines before it); offset None when there is no such line."""
    middle = int(path.stat().st_size * (1 - HELPER_SHARE))
    offset = lines = cases = 0
    with open(path, "rb") as handle:
        for raw in handle:
            if offset >= middle:
                return offset, lines + 1, cases
            offset += len(raw)
            lines += 1
            if _is_case_line(raw, lines):
                cases += 1
    return None, 0, 0


def _is_case_line(raw: bytes, number: int) -> bool:
    """Whether ``_jsonl_lines`` reads this line as a case (not blank); undecodable lines count (they
    fail validation, which sends the scan the usual way)."""
    try:
        text = raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        return True
    if number == 1:
        text = text.removeprefix("\ufeff")
    return bool(text.strip())


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(PACK_BUFFER):
            digest.update(chunk)
    return digest.hexdigest()


def _start_helper(source: DatasetSource, suite: str, split: int, first_line: int, first_index: int,
                  packed: IO[bytes]) -> subprocess.Popen[bytes] | None:
    argv = [sys.executable, "-c", "import sys, json; sys.path[:] = json.loads(sys.argv[1]); "
            "from evalgate.dataset.parallel import main; sys.exit(main(sys.argv[2:]))",
            json.dumps(sys.path), str(source.path), source.display, suite, str(split), str(first_line),
            str(first_index), str(packed.fileno())]
    try:
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                pass_fds=(packed.fileno(),), process_group=0)
    except OSError:
        return None


def _finish_helper(helper: subprocess.Popen[bytes], *, abandon: bool) -> RangeScan | None:
    """The helper's result (None when it found a problem, failed, or is abandoned)."""
    if abandon:
        helper.kill()
        helper.communicate()
        return None
    out, _ = helper.communicate()
    if helper.returncode != 0 or not out:
        return None
    with contextlib.suppress(ValueError, EOFError, TypeError):
        count, ids, case_metrics = marshal.loads(out)
        return RangeScan(count, ids, case_metrics)
    return None


def read_packed_files(files: list[IO[bytes]]) -> Iterator[Case]:
    from evalgate.dataset.compact import read_packed

    for packed in files:
        yield from read_packed(packed.fileno())


def main(argv: list[str]) -> int:
    """Helper entry: ``PATH DISPLAY SUITE START FIRST_LINE FIRST_INDEX FD``; prints marshal of
    ``(count, ids, case_metrics)`` on stdout, or exits 1 at the first problem."""
    import gc

    path, display, suite, start, first_line, first_index, fd = argv
    gc.disable()  # many acyclic objects, a short-lived process
    with open(int(fd), "wb", buffering=PACK_BUFFER, closefd=False) as packed:
        found = scan_range(Path(path), display, suite, int(start), None, int(first_line), int(first_index), packed)
    if found is None:
        return 1
    sys.stdout.buffer.write(marshal.dumps((found.count, found.ids, found.case_metrics)))
    return 0
