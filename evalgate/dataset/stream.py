"""Selected cases that do not have to live in memory.

``scan`` reads the datasets once: it validates every case, records file metadata and suite blocks,
and applies the selection to light ``CaseRef`` records (id, index, category, tags). The result,
``SelectedCases``, is iterable any number of times: small datasets are kept in memory, large ones
(more than ``KEEP_IN_MEMORY`` cases, 5,000) are streamed from their files again on each iteration, so a
100,000-case run holds only the cases in flight.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from evalgate.dataset.load import DatasetFile, DatasetStream, _gc_paused
from evalgate.dataset.models import Case
from evalgate.dataset.select import select_cases
from evalgate.dataset.suite import SuiteConfig

KEEP_IN_MEMORY = 5_000
"""Up to this many cases are kept after the scan; beyond it the files are re-read when iterated
(re-reading costs ~30 µs a case; keeping costs ~3 KB a case)."""


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

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[Case]:
        if self.kept is not None:
            return iter(self.kept)
        return self._stream()

    def _stream(self) -> Iterator[Case]:
        for case in DatasetStream(self.paths, self.base_dir, fail_fast=True):
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


def scan(
    paths: Sequence[str],
    base_dir: Path,
    *,
    select: Callable[[list[CaseRef]], list[CaseRef]] | None = None,
    keep_in_memory: int = KEEP_IN_MEMORY,
) -> Scan:
    """Validate every case once and select; all problems raise one ``DatasetError`` (≤ 20 listed)."""
    stream = DatasetStream(list(paths), base_dir, fail_fast=False)
    refs: list[CaseRef] = []
    kept: list[Case] | None = []
    case_metrics: list[tuple[str, list[str]]] = []
    with _gc_paused():
        for case in stream:
            refs.append(CaseRef(case.id, case.index, case.category, case.tags))
            if case.metrics:
                case_metrics.append((f"{case.location}: case {case.id!r} metrics", list(case.metrics)))
            if kept is not None:
                kept.append(case)
                if len(kept) > keep_in_memory:
                    kept = None
    chosen = select(refs) if select else refs
    indexes = None if len(chosen) == len(refs) else frozenset(ref.index for ref in chosen)
    if kept is not None and indexes is not None:
        kept = [case for case in kept if case.index in indexes]
    selected = SelectedCases(list(paths), base_dir, len(chosen), indexes, kept)
    return Scan(selected, stream.files, stream.suites, len(refs), case_metrics)


def selector(
    *,
    case_ids: Sequence[str] | None,
    first_n: int | None,
    categories: Sequence[str] | None,
    tags: Sequence[str] | None,
    shard: tuple[int, int] | None,
) -> Callable[[list[CaseRef]], list[CaseRef]]:
    """``select_cases`` over light references (it reads only id, category and tags)."""

    def choose(refs: list[CaseRef]) -> list[CaseRef]:
        return select_cases(refs, case_ids=case_ids, first_n=first_n, categories=categories, tags=tags,  # type: ignore[arg-type]
                            shard=shard)

    return choose
