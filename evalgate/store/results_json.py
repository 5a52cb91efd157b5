"""results.json, written without holding every case in memory.

Each finished case is appended to a spool file (``.cases.jsonl`` in the output directory) as it
completes; ``write_results`` then streams the spool back in dataset order into ``results.json``
(through a temporary file and an atomic rename), so a crash or cancel can always be finalised into
a valid document from what was already computed.
"""

from __future__ import annotations

import json
import os
from array import array
from pathlib import Path
from typing import IO, Any

SCHEMA_VERSION = 1
SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schemas" / "results.schema.json"


class CaseSpool:
    """Append-only JSONL spool of case records plus an in-memory index (order key → offset)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[bytes] = open(path, "wb")  # noqa: SIM115 - closed in close()
        # compact columns (8 bytes a value) instead of a list of tuples: ~24 MB less at 100k cases
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
        ends = [*self._offsets[1:], self._offset]
        order = sorted(range(len(self._offsets)), key=lambda i: (self._cases[i], self._repeats[i]))
        with open(self.path, "rb") as reader:
            for i in order:
                reader.seek(self._offsets[i])
                yield reader.read(ends[i] - self._offsets[i]).rstrip(b"\n")


def write_results(path: Path, document: dict[str, Any], spool: CaseSpool) -> None:
    """Write ``document`` with ``results`` streamed from ``spool``; atomic replace of ``path``."""
    tmp = path.with_name(path.name + ".tmp")
    head = json.dumps(document, indent=2, ensure_ascii=False, default=str)
    if not head.endswith("}"):
        raise ValueError("document must be a JSON object")
    with open(tmp, "wb") as out:
        out.write(head[:-1].rstrip().encode("utf-8"))
        out.write(b',\n  "results": [')
        first = True
        for record in spool.iter_records_in_order():
            out.write(b"\n    " if first else b",\n    ")
            out.write(record)
            first = False
        out.write(b"\n  ]\n}\n")
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


def read_results(path: Path) -> dict[str, Any]:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)
