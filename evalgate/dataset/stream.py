"""Selected cases that do not have to live in memory.

``scan`` reads the datasets once: it validates every case, records file metadata and suite blocks,
and applies the selection to light ``CaseRef`` records (id, index, category, tags). The result,
``SelectedCases``, is iterable any number of times: small datasets are kept in memory; large ones
(more than ``KEEP_IN_MEMORY`` cases, 5,000) are packed into a temporary file as they are validated
(``evalgate.dataset.compact``) and read back from it on each iteration, so a 100,000-case run holds
only the cases in flight and validates each case once. A dataset with values that do not pack is
streamed from its files again instead.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from evalgate.config.suite import SuiteConfig
from evalgate.dataset.compact import pack_case, read_packed, write_packed
from evalgate.dataset.load import DatasetFile, DatasetStream, gc_paused
from evalgate.dataset.select import select_cases
from evalgate.model import Case

KEEP_IN_MEMORY = 5_000
"""Up to this many cases are kept after the scan; beyond it they are packed into a temporary file
(a kept case costs memory, a packed one a little disk and an unpacking)."""
PACK_BUFFER = 1 << 20


@dataclass(frozen=True, slots=True)
class CaseRef:
    """What selection needs to know about a case."""

    id: str
    index: int
    category: str | None
    tags: list[str]


@dataclass
class SelectedCases:
    """The selected cases, in dataset order; ``len()`` is known without iterating."""

    paths: list[str]
    base_dir: Path
    count: int
    indexes: frozenset[int] | None
    """Dataset indexes that were selected; None when every case was."""
    kept: list[Case] | None = None
    packed: IO[bytes] | None = None
    """Temporary file holding every scanned case, packed, in order (when not ``kept``)."""

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[Case]:
        if self.kept is not None:
            return iter(self.kept)
        if self.packed is not None:
            return self._selected(read_packed(self.packed.fileno()))
        return self._selected(DatasetStream(self.paths, self.base_dir, fail_fast=True, checked=True))

    def _selected(self, cases: Iterator[Case] | DatasetStream) -> Iterator[Case]:
        for case in cases:
            if self.indexes is None or case.index in self.indexes:
                yield case


@dataclass
class Scan:
    cases: SelectedCases
    files: list[DatasetFile]
    suites: dict[str, SuiteConfig]
    total: int
    case_metrics: list[tuple[str, list[str]]] = field(default_factory=list)
    """(where, names) for every case that lists its own metrics, to validate against the registry."""
    suite_where: dict[str, str] = field(default_factory=dict)
    """Suite name → ``file:line`` of the suite block that configured it."""
    dialects: set[str] = field(default_factory=set)
    """The dialects (``evalgate.dialects``) the scanned cases speak."""


def scan(
    paths: Sequence[str],
    base_dir: Path,
    *,
    select: Callable[[list[CaseRef]], list[CaseRef]] | None = None,
    keep_in_memory: int = KEEP_IN_MEMORY,
    base: SuiteConfig | None = None,
) -> Scan:
    """Validate every case once and select; all problems raise one ``DatasetError`` (≤ 20 listed).

    Without ``select`` every case is selected and no per-case reference is kept.

    ``base``: evalgate.yaml's suite-level keys (its ``kind`` / ``valid`` apply to files without their own)."""
    stream = DatasetStream(list(paths), base_dir, fail_fast=False, base=base)
    refs: list[CaseRef] | None = [] if select else None
    kept: list[Case] | None = []
    packer = _Packer()
    case_metrics: list[tuple[str, list[str]]] = []
    total = 0
    dialects: set[str] = set()
    with gc_paused():
        for case in stream:
            total += 1
            if case.dialect is not None:
                dialects.add(case.dialect)
            if refs is not None:
                refs.append(CaseRef(case.id, case.index, case.category, case.tags))
            if case.metrics or case.assertions or case.turns:
                case_metrics.append((f"{case.location}: case {case.id!r} metrics", case.requested_metrics))
            if kept is not None:
                kept.append(case)
                if len(kept) > keep_in_memory:
                    packer.start(kept)
                    kept = None
            else:
                packer.add(case)
    chosen = select(refs) if select and refs is not None else None
    count = total if chosen is None else len(chosen)
    indexes = None if chosen is None or len(chosen) == total else frozenset(ref.index for ref in chosen)
    if kept is not None and indexes is not None:
        kept = [case for case in kept if case.index in indexes]
    selected = SelectedCases(list(paths), base_dir, count, indexes, kept, packer.finish())
    return Scan(selected, stream.files, stream.suites, total, case_metrics, dict(stream.suite_where), dialects)


class _Packer:
    """Packs the scanned cases into an anonymous temporary file; gives up (the files are read again)
    at the first case that does not pack."""

    def __init__(self) -> None:
        self.file: IO[bytes] | None = None

    def start(self, cases: list[Case]) -> None:
        self.file = tempfile.TemporaryFile(buffering=PACK_BUFFER)  # noqa: SIM115 - kept by SelectedCases
        for case in cases:
            self.add(case)

    def add(self, case: Case) -> None:
        if self.file is None:
            return
        data = pack_case(case)
        if data is None:
            self.file.close()
            self.file = None
            return
        write_packed(self.file, data)

    def finish(self) -> IO[bytes] | None:
        if self.file is not None:
            self.file.flush()
        return self.file


def selector(
    *,
    case_ids: Sequence[str] | None,
    first_n: int | None,
    categories: Sequence[str] | None,
    tags: Sequence[str] | None,
    shard: tuple[int, int] | None,
) -> Callable[[list[CaseRef]], list[CaseRef]] | None:
    """``select_cases`` over light references (it reads only id, category and tags); None when no filter
    is set (every case is selected, so ``scan`` keeps no references)."""
    if not case_ids and first_n is None and not categories and not tags and not shard:
        return None

    def choose(refs: list[CaseRef]) -> list[CaseRef]:
        return select_cases(refs, case_ids=case_ids, first_n=first_n, categories=categories, tags=tags, shard=shard)

    return choose
