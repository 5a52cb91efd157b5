"""A results document reduced to what a report can show, read in bounded memory (docs/security.md).

``evalgate report`` and the Action's publishing read a results.json (or one run of a SQLite file) of any
size: the case records are streamed (``store.results_json.StreamedDocument``; SQLite rows one at a time)
and only these are kept:

* the ``keep_failing`` most important failed or errored records (``view.importance``, then repeat):
  what the comment's failed-case list, details and critical list, the annotations and the HTML report
  show first;
* the ``keep_cases`` first other records in dataset order (the HTML report's case list after the
  failures).

Each record is read through its type as it streams by (``store.reader.read_case``: the kept ones are
``CaseResult`` s; an entry that is not a case record is counted among the cases, never shown as failing).
Everything else is counted. ``document["_digest"]`` holds the counts (``cases``, ``failing``,
``critical_failing``, ``kept_failing``) so the renderers can say how many more exist than they hold
(``beyond``). Memory: O(keep_failing + keep_cases) records plus one record and one read chunk,
whatever the number of cases.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from evalgate.errors import UserError
from evalgate.model import CaseResult
from evalgate.report.view import importance, is_critical, is_failing
from evalgate.store.reader import SQLITE_HEADER, check_document, open_input, read_case, split_run_spec
from evalgate.store.results_json import StreamedDocument

KEEP_FAILING = 2_000
"""Failed/errored records kept (the PR comment shows at most a few hundred; annotations at most 10)."""
DIGEST_KEY = "_digest"


def beyond(results: Mapping[str, Any], what: str) -> int:
    """How many more ``what`` (``failing``, ``critical_failing``, ``cases``) the run has than ``results``
    holds (0 for a whole document)."""
    digest = results.get(DIGEST_KEY)
    if not isinstance(digest, Mapping):
        return 0
    held = {"failing": digest.get("kept_failing", 0), "critical_failing": digest.get("kept_critical_failing", 0),
            "cases": digest.get("kept", 0)}.get(what, 0)
    return max(0, int(digest.get(what, 0) or 0) - int(held or 0))


class Digest:
    """The bounded selection of records (module docstring)."""

    def __init__(self, keep_failing: int = KEEP_FAILING, keep_cases: int = 0) -> None:
        self.keep_failing = max(0, keep_failing)
        self.keep_cases = max(0, keep_cases)
        self.cases = 0
        self.failing = 0
        self.critical_failing = 0
        self._failing: list[tuple[Any, ...]] = []
        self._others: list[tuple[Any, ...]] = []
        self._sequence = itertools.count()

    def add(self, record: Any) -> None:
        case = read_case(record, self.cases) if isinstance(record, Mapping | CaseResult | str) else None
        if case is None and not isinstance(record, Mapping):  # not even an object (or its text): not counted
            return
        self.cases += 1
        if case is None:  # an object that is no case record (neither a status nor passed): counted, not shown
            return
        if is_failing(case):
            self.failing += 1
            self.critical_failing += is_critical(case)
            self._push(self._failing, self.keep_failing, (*importance(case), case.repeat), case)
        else:
            self._push(self._others, self.keep_cases, (case.index, case.repeat), case)

    def _push(self, heap: list[tuple[Any, ...]], limit: int, key: tuple[Any, ...], record: CaseResult) -> None:
        """Keep the ``limit`` smallest keys: a max-heap by negated key (ties: the earlier record wins)."""
        if limit == 0:
            return
        item = (*(-int(part) for part in key), -next(self._sequence), record)
        if len(heap) < limit:
            heapq.heappush(heap, item)
        elif item > heap[0]:
            heapq.heapreplace(heap, item)

    def records(self) -> list[CaseResult]:
        """The kept records: failing ones most important first, then the others in dataset order."""
        failing = [item[-1] for item in sorted(self._failing, reverse=True)]
        others = [item[-1] for item in sorted(self._others, reverse=True)]
        return failing + others

    def counts(self) -> dict[str, int]:
        kept_failing = len(self._failing)
        return {"cases": self.cases, "failing": self.failing, "critical_failing": self.critical_failing,
                "kept": kept_failing + len(self._others), "kept_failing": kept_failing,
                "kept_critical_failing": sum(1 for item in self._failing if is_critical(item[-1]))}


def digest_records(head: dict[str, Any], records: Iterable[Any], *, keep_failing: int = KEEP_FAILING,
                   keep_cases: int = 0) -> dict[str, Any]:
    """``head`` (the document without ``results``) with the digest of ``records`` as ``results``."""
    digest = Digest(keep_failing, keep_cases)
    for record in records:
        digest.add(record)
    return {**head, "results": digest.records(), DIGEST_KEY: digest.counts()}


def load_digest(spec: str | Path, *, keep_failing: int = KEEP_FAILING, keep_cases: int = 0) -> dict[str, Any]:
    """The digest of a results.json file, or of a run of a SQLite file (``FILE#RUN_ID``, else its newest
    finished run), read in bounded memory; a ``UserError`` naming the file for anything unreadable."""
    path, _ = split_run_spec(spec)
    if not path.is_file():
        raise UserError("results file not found", where=str(spec))
    try:
        with open(path, "rb") as handle:
            magic = handle.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise UserError(f"cannot read ({exc.strerror or exc})", where=str(spec)) from None
    if magic == SQLITE_HEADER:
        run = open_input(spec, skip_merged=False)
        return digest_records(run.document, run.records, keep_failing=keep_failing, keep_cases=keep_cases)
    stream = StreamedDocument(path)
    try:
        document = digest_records(stream.head, stream.records(), keep_failing=keep_failing, keep_cases=keep_cases)
    except UnicodeDecodeError:
        raise UserError("not a results.json file (not UTF-8 text)", where=str(spec)) from None
    except (ValueError, RecursionError) as exc:
        raise UserError(f"not valid JSON ({exc})", where=str(spec)) from None
    check_document(document, str(spec))
    return document

