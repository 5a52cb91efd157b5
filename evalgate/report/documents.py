"""The dialects' output documents (``--compat NAME``), built from a results document and written beside it.

Each dialect with an output document (``evalgate.dialect.OutputDocument``, its ``document`` hook) builds
it from two passes over the run's case records (the totals, then the entries one at a time), so
``write_document`` writes it from a results.json of any size in bounded memory, byte for byte what
``json.dumps(build_document(...), indent=2, ensure_ascii=False)`` gives. This module holds what every such
document shares: the record readers, the running averages and the streamed writer. The documents
themselves, and which file each is written to, live in the dialects' modules.

With repeats, each case's first repeat is used. A dialect's ``passes`` hand it the records as stored (the
plug-in hook's contract, ``evalgate.dialect.Passes``); the readers here (``totals``, ``chosen``) read each
through its type, one at a time (``store.reader.read_case``), so the builders take ``CaseResult`` s.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from pydantic import ValidationError

from evalgate.dialect import DIALECTS, OutputDocument, Passes
from evalgate.model import STATUS_TEXT, CaseResult, Threshold
from evalgate.store.reader import read_case
from evalgate.store.results_json import StreamedDocument

OPERATORS = {"min": ">=", "max": "<=", "gt": ">", "lt": "<"}


# --- helpers ----------------------------------------------------------------------------------------


def read_all(records: Iterable[Any]) -> Iterator[CaseResult]:
    """``records`` read one at a time through their type (``read_case``: what is not a case record is skipped)."""
    for position, record in enumerate(records):
        case = read_case(record, position)
        if case is not None:
            yield case


def ordered(document: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A document's records (in memory, as stored) in dataset order, the order results.json is written in."""
    records = [r for r in document.get("results") or [] if isinstance(r, Mapping)]
    return sorted(records, key=_order)


def _order(record: Mapping[str, Any]) -> tuple[int, int]:
    case = read_case(record)
    return (case.index, case.repeat) if case is not None else (0, 0)


def first_of_each(records: Iterable[CaseResult]) -> Iterator[CaseResult]:
    """One record per case (its lowest repeat) from ``records`` in dataset order (a case's repeats are
    adjacent, lowest first): the record whose id differs from the one before it. Memory: one id."""
    previous: str | None = None
    for record in records:
        key = record.id
        if key != previous:
            previous = key
            yield record


def first_records(document: Mapping[str, Any]) -> list[CaseResult]:
    """One record per case (its lowest repeat), in dataset order."""
    return list(first_of_each(read_all(ordered(document))))


class Average:
    """``mean`` of the values added, kept as a running sum and count: the same float as summing the list
    left to right (``sum``), so a streamed document equals the in-memory one."""

    def __init__(self) -> None:
        self.total: float = 0
        self.count = 0

    def add(self, value: float | None) -> None:
        if value is not None:
            self.total += value
            self.count += 1

    @property
    def value(self) -> float | None:
        return round(self.total / self.count, 6) if self.count else None


def metric_value(record: CaseResult, name: str) -> float | None:
    """The metric's value on the case, or None when it did not produce one."""
    metric = record.metrics.get(name)
    if metric is None or STATUS_TEXT[metric.status] not in ("passed", "failed", "advisory"):
        return None
    return metric.value


def metric_details(record: CaseResult, name: str) -> Mapping[str, Any]:
    metric = record.metrics.get(name)
    return metric.details if metric is not None else {}


def mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(sum(present) / len(present), 6) if present else None


def _has_any(record: CaseResult, names: tuple[str, ...]) -> bool:
    return any(name in record.metrics for name in names)


def totals(passes: Passes, names: tuple[str, ...], make: Callable[[], Any]) -> tuple[Any, bool]:
    """One pass over the first records: totals (``make()``, ``.add(record)``) over every one and over those
    on which any of ``names`` ran; returns the latter and True when any did, else the former and False."""
    every, narrow, narrowed = make(), make(), False
    for record in first_of_each(read_all(passes())):
        every.add(record)
        if _has_any(record, names):
            narrowed = True
            narrow.add(record)
    return (narrow if narrowed else every), narrowed


def chosen(passes: Passes, names: tuple[str, ...], narrowed: bool) -> Iterator[CaseResult]:
    """A pass over the first records the totals were taken over (``totals``)."""
    return (r for r in first_of_each(read_all(passes())) if not narrowed or _has_any(r, names))


def file_of(source: Any) -> str:
    """A record's dataset file (its ``source`` without the ``:line``)."""
    text = str(source or "")
    head, sep, tail = text.rpartition(":")
    return head if sep and tail.isdigit() else text


def admits(threshold: Any, value: float) -> bool | None:
    """``threshold`` (a results.json ``{op: x}`` mapping) applied to ``value`` (``Threshold.admits``); None
    without one."""
    if not isinstance(threshold, Mapping) or len(threshold) != 1:
        return None
    try:
        return Threshold.model_validate(dict(threshold)).admits(value)
    except ValidationError:
        return None


def template(folder: Path, name: str) -> Any:
    """The jinja2 template ``name`` in ``folder`` (plain text: no autoescape, undefined names an error)."""
    import jinja2  # lazy: jinja2 (~30 ms) only for a dialect's templated output document

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(folder)), undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True, autoescape=False, keep_trailing_newline=True)
    return env.get_template(name)


# --- the documents ----------------------------------------------------------------------------------


def shape_of(name: str) -> OutputDocument:
    """Dialect ``name``'s output document (``ValueError`` naming those that have one)."""
    dialect = DIALECTS.get(name)
    if dialect is None or dialect.document is None:
        shaped = [n for n, d in DIALECTS.items() if d.document is not None]
        raise ValueError(f"no output shape for {name!r}; choose one of {', '.join(shaped)}")
    return dialect.document


def build_document(name: str, document: Mapping[str, Any], include_responses: bool = True) -> dict[str, Any]:
    """Dialect ``name``'s output document for a results ``document`` in memory."""
    shape = shape_of(name)
    records = ordered(document)
    fields, entries = shape.fields(document, lambda: records, include_responses)
    return {**fields, shape.entries_key: list(entries)} if shape.entries_key else fields


def write_document(name: str, results_path: Path, out: IO[str], include_responses: bool = True,
                   clean: Callable[[str], str] = lambda text: text) -> None:
    """Dialect ``name``'s output document for the results.json at ``results_path``, written to ``out`` as
    ``json.dumps(build_document(...), indent=2, ensure_ascii=False) + "\\n"`` would be, in bounded memory:
    the records are streamed (``StreamedDocument``, two passes: the totals, with the document's fields, then
    the entries), each entry is written as it is made and passed through ``clean`` (redaction) on its own."""
    shape = shape_of(name)
    if shape.entries_key is None:
        fields, _ = shape.fields(StreamedDocument(results_path).read_head(), lambda: (), include_responses)
        out.write(clean(json.dumps(fields, indent=2, ensure_ascii=False) + "\n"))
        return
    streams = [StreamedDocument(results_path)]
    head = streams[0].head  # complete once the first pass has read the whole file

    def passes() -> Iterator[Mapping[str, Any]]:
        stream = streams.pop() if streams else StreamedDocument(results_path)
        return (r for r in stream.records() if isinstance(r, Mapping))

    fields, entries = shape.fields(head, passes, include_responses)
    dump_with_list(fields, shape.entries_key, entries, out, clean)


def dump_with_list(fields: Mapping[str, Any], key: str, entries: Iterable[Any], out: IO[str],
                   clean: Callable[[str], str]) -> None:
    """``{**fields, key: list(entries)}`` as ``json.dumps(indent=2, ensure_ascii=False)`` plus a newline,
    written one entry at a time (the list is the document's last field)."""
    text = json.dumps({**fields, key: []}, indent=2, ensure_ascii=False)
    cut = text.rindex("[]")
    lead, empty = text[:cut] + "[\n", True
    for entry in entries:
        lines = json.dumps(entry, indent=2, ensure_ascii=False).split("\n")
        out.write(clean(lead + "\n".join("    " + line for line in lines)))
        lead, empty = ",\n", False
    out.write(clean(text + "\n") if empty else "\n  ]\n}\n")
