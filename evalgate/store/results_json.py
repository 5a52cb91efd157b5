"""results.json, written without holding every case in memory.

Each finished case is appended to a spool file (``.cases.<run id>.jsonl`` in the output directory) as
it completes; ``write_results`` then streams the spool back in dataset order into ``results.json``
(through ``results.json.<run id>.tmp`` and an atomic rename), so a crash or cancel can always be
finalised into a valid document from what was already computed. ``StreamedDocument`` reads a
results.json back one case record at a time (``report.digest``).
"""

from __future__ import annotations

import itertools
import json
import os
import re
from array import array
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from evalgate.errors import UserError

SCHEMA_VERSION = 1
SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schemas" / "results.schema.json"
COPY_CHUNK = 1 << 20


class CaseSpool:
    """Append-only JSONL spool of case records plus an in-memory index (order key → offset)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[bytes] = open(path, "wb", buffering=1 << 16)  # noqa: SIM115 - closed in close()
        # compact columns (8 bytes a value) instead of a list of tuples
        self._cases = array("q")
        self._repeats = array("q")
        self._offsets = array("q")
        self._offset = 0

    def add(self, index: int, repeat: int, record_json: str) -> None:
        data = record_json.encode("utf-8") + b"\n"
        self._file.write(data)
        self._cases.append(index)
        self._repeats.append(repeat)
        self._offsets.append(self._offset)
        self._offset += len(data)

    def __len__(self) -> int:
        return len(self._offsets)

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()

    def iter_records_in_order(self) -> Any:
        """Yield each record's JSON bytes (without newline) sorted by (dataset index, repeat)."""
        self.flush()
        offsets = self._offsets
        ends = offsets[1:]
        ends.append(self._offset)
        with open(self.path, "rb") as reader:
            for i in self._order():
                reader.seek(offsets[i])
                yield reader.read(ends[i] - offsets[i]).rstrip(b"\n")

    def write_in_order(self, out: IO[bytes], first: bytes, between: bytes) -> None:
        """Write every record, sorted as ``iter_records_in_order``, to ``out``: ``first`` before the first
        record, ``between`` between two. When the spool is already in order and every record is one
        line, the file is copied in large chunks with its newlines replaced (same bytes, much faster)."""
        self.flush()
        if self._offsets and self._order() == range(len(self._offsets)) and self._one_line_each():
            out.write(first)
            with open(self.path, "rb") as reader:
                left = self._offset - 1  # all but the last record's newline
                while left > 0:
                    chunk = reader.read(min(COPY_CHUNK, left))
                    left -= len(chunk)
                    out.write(chunk.replace(b"\n", between))
            return
        lead = first
        for record in self.iter_records_in_order():
            out.write(lead)
            out.write(record)
            lead = between

    def _one_line_each(self) -> bool:
        """True when the file holds exactly one newline per record (no record spans lines)."""
        newlines = 0
        with open(self.path, "rb") as reader:
            while chunk := reader.read(COPY_CHUNK):
                newlines += chunk.count(b"\n")
        return newlines == len(self._offsets) and self._offset == self.path.stat().st_size

    def _order(self) -> Iterable[int]:
        """Record positions sorted by (dataset index, repeat); the spool order when already sorted.

        Keys are packed into one integer per record (index · (max repeat + 1) + repeat) so the sort
        holds ints, not tuples."""
        cases, repeats = self._cases, self._repeats
        stride = max(repeats, default=0) + 1
        keys = [index * stride + repeat for index, repeat in zip(cases, repeats, strict=True)]
        if all(a < b for a, b in zip(keys, itertools.islice(keys, 1, None), strict=False)):
            return range(len(keys))
        return sorted(range(len(keys)), key=keys.__getitem__)


def write_results(path: Path, document: dict[str, Any], spool: CaseSpool, run_id: str = "") -> None:
    """Write ``document`` with ``results`` streamed from ``spool``; atomic replace of ``path`` (through
    ``results.json.<run_id>.tmp``, a name no other run uses)."""
    if path.exists() and not path.is_file():
        raise UserError("is not a file (a directory or another kind of file is in the way); remove it or choose "
                        "another output directory", where=str(path))
    tmp = path.with_name(f"{path.name}.{run_id}.tmp" if run_id else path.name + ".tmp")
    head = json.dumps(document, indent=2, ensure_ascii=False, default=str)
    if not head.endswith("}"):
        raise ValueError("document must be a JSON object")
    with open(tmp, "wb") as out:
        out.write(head[:-1].rstrip().encode("utf-8"))
        out.write(b',\n  "results": [')
        spool.write_in_order(out, b"\n    ", b",\n    ")
        out.write(b"\n  ]\n}\n")
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


READ_CHUNK = 1 << 20
MAX_RECORD_CHARS = 256 * 1024 * 1024
"""Largest single value (a case record, or a top-level field) ``stream_document`` holds at once."""
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


class StreamError(ValueError):
    """Malformed JSON met by ``StreamedDocument``: ``reason`` and the character ``offset`` it was met at."""

    def __init__(self, reason: str, offset: int) -> None:
        super().__init__(f"{reason} (at character {offset})")
        self.reason = reason
        self.offset = offset


class StreamedDocument:
    """A results.json read without holding its ``results`` list: ``records()`` yields each case record
    (a dict) in file order while ``head`` fills with every other top-level field (complete once
    ``records()`` is exhausted). Memory: the largest single value, plus one read chunk. Malformed JSON
    raises ``ValueError`` naming the character offset."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.head: dict[str, Any] = {}
        self.count = 0
        self.listed = False
        """True once a ``results`` list was met (a ``results`` that is not a list stays in ``head``)."""

    def read_head(self) -> dict[str, Any]:
        """``head`` complete before any record is used: one pass over the whole file, each record decoded
        and dropped (a later ``records()`` reads the file again; ``count`` holds their number). Also proves
        the whole file is valid JSON.
        For readers that must see every top-level field first (``merge`` checks its inputs before their
        records); memory as ``records()``."""
        for _ in self.records():
            pass
        return self.head

    def records(self) -> Iterator[Any]:
        self.count = 0
        with open(self.path, encoding="utf-8") as handle:
            reader = _Reader(handle)
            reader.expect("{")
            if reader.peek() == "}":
                return
            while True:
                key = reader.value()
                if not isinstance(key, str):
                    raise StreamError("an object key must be a string", reader.offset)
                reader.expect(":")
                if key == "results" and reader.peek() == "[":
                    self.listed = True
                    reader.expect("[")
                    if reader.peek() == "]":
                        reader.expect("]")
                    else:
                        while True:
                            self.count += 1
                            yield reader.value()
                            if reader.peek() == ",":
                                reader.expect(",")
                                continue
                            reader.expect("]")
                            break
                else:
                    self.head[key] = reader.value()
                if reader.peek() == ",":
                    reader.expect(",")
                    continue
                reader.expect("}")
                return


class _Reader:
    """Values of a JSON text read chunk by chunk (``json.JSONDecoder.raw_decode`` on a sliding buffer)."""

    def __init__(self, handle: IO[str]) -> None:
        self.handle = handle
        self.text = ""
        self.pos = 0
        self.consumed = 0
        self.eof = False

    @property
    def offset(self) -> int:
        return self.consumed + self.pos

    def _fill(self, at_least: int = 0) -> bool:
        chunk = self.handle.read(max(READ_CHUNK, at_least))
        if not chunk:
            self.eof = True
            return False
        self.consumed += self.pos
        self.text = self.text[self.pos:] + chunk
        self.pos = 0
        return True

    def peek(self) -> str:
        while True:
            self.pos = _WHITESPACE.match(self.text, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.text):
                return self.text[self.pos]
            if not self._fill():
                raise StreamError("unexpected end of the document", self.offset)

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise StreamError(f"expected {char!r}", self.offset)
        self.pos += 1

    def value(self) -> Any:
        self.peek()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.text, self.pos)
            except json.JSONDecodeError as exc:
                if self.eof or len(self.text) - self.pos > MAX_RECORD_CHARS:
                    raise StreamError(exc.msg, self.consumed + exc.pos) from None
                self._fill(len(self.text) - self.pos)  # the value goes on: read as much again
                continue
            if end >= len(self.text) and not self.eof and self._fill():
                continue  # a number cut by the chunk's end: read on and decode it again
            self.pos = end
            return value
