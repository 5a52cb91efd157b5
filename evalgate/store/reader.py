"""Reading results back: results.json files and runs stored in evalgate's SQLite database.

One rule picks "the latest run" of a database everywhere (baselines, ``compare``, ``report``, ``merge``):
the newest run by ``julianday(timestamp)`` (ties: the larger run id) whose status is not ``running`` or ``incomplete`` (a killed run);
``merge`` also skips runs that are themselves merges. ``FILE#RUN_ID`` names a run explicitly.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from evalgate.errors import UserError
from evalgate.model import CaseResult, CaseStatus, MetricResult
from evalgate.safety.redact import redact
from evalgate.store.judge_cache import CACHE_FILE as JUDGE_CACHE_FILE
from evalgate.store.results_json import SCHEMA_VERSION, StreamedDocument, StreamError
from evalgate.store.safe import READ_TABLES, open_checked

if TYPE_CHECKING:
    from sqlite_utils import Database

SQLITE_HEADER = b"SQLite format 3\x00"
RESULTS_KEYS = ("schema_version", "run_id", "summary", "gate", "metrics", "results")
MAX_BASELINE_RECORDS = 1_000_000
"""Most case records a baseline held in memory may hold (an artifact's bytes, ``validate_results``); a baseline
file (``load_results``) is streamed and read at any size."""


@dataclass
class ShardRun:
    """One input run: where it came from, its document (without ``results``) and its records."""

    label: str
    document: dict[str, Any]
    records: Iterator[str]
    shard: tuple[int, int] | None = None
    cases: int = 0

    def case_records(self) -> Iterator[tuple[str, CaseResult, str]]:
        """The run's records read back through their type, one at a time: ``(where, record, text)`` with
        ``where`` its place (``label: results[i]``) and ``text`` the JSON as stored; a record of another shape
        is a ``UserError`` naming its place and first invalid field."""
        for position, text in enumerate(self.records):
            where = f"{self.label}: results[{position}]"
            try:
                record = CaseResult.from_stored(text)
            except ValidationError as exc:
                error = exc.errors()[0]
                raise UserError(f"invalid case record: {'.'.join(map(str, error['loc']))}: {error['msg']}",
                                where=where) from None
            yield where, record, text


def read_case(record: object, position: int = 0) -> CaseResult | None:
    """A per-case record as the readers (report/, github/, export/, view/) take it: a ``CaseResult``, or None
    for what is not a case record. The one lenient reader, for records from older runs, other tools'
    databases and hand-edited files: ``record`` parsed, or its JSON text (``ValueError`` when that is not
    JSON); ``position`` is the record's place in its document (0-based).

    The "not recorded" rule: a value ``read_case`` supplies instead of reading it is left out of
    ``model_fields_set``. The readers decide on the value itself (``report.view.is_critical``) and list a case
    under its id and status, supplied or not; every other field they show only as recorded (``recorded``: a
    default ``risk_level`` "medium" or ``source`` "<memory>" is not evidence). What it supplies:

    * no ``id`` (or null): the stand-in ``(no id, index N)`` (N: the record's ``index``, else ``position``) —
      the record is still read, never dropped; an ``id`` that is not text: its text (``str``);
    * a legacy ``critical: true`` (any true value): ``risk_level`` ``critical``, never lower (left out of
      ``model_fields_set`` when the record has no ``risk_level`` of its own, as it showed none);
    * ``risk_level``, ``source`` and the other defaults: not recorded unless the record has them;
    * a ``status`` that is missing or not a case status: read from a boolean ``passed`` (true: passed, false:
      failed — a record that says it did not pass is never hidden);
    * a ``passed`` that is missing or not a boolean: ``status == passed``, as ``CaseResult`` defines it.

    Dropped: a record that is not an object, or that has neither a case status nor a boolean ``passed``
    (None: not a case record; the readers count it, never show it); a ``metrics`` entry that is not a valid
    ``MetricResult``; any other invalid field (it reads as not recorded) and undeclared keys.

    A valid record (every record evalgate writes) is read exactly as ``CaseResult.from_stored`` reads it."""
    if isinstance(record, CaseResult):
        return record
    if isinstance(record, str | bytes):  # a SQLite document: validated from its text (no dict built first)
        try:
            return CaseResult.from_stored(record)
        except ValidationError:
            record = json.loads(record)
    if not isinstance(record, Mapping):
        return None
    try:
        return CaseResult.from_stored(record)
    except ValidationError:
        pass
    values = {name: record[name] for name in CaseResult.model_fields if name in record}
    supplied = _supply(values, record, position)
    if "status" in supplied and not isinstance(values.get("passed"), bool):
        return None
    if "metrics" in values:
        values["metrics"] = read_metrics(values["metrics"])
    if not isinstance(values.get("passed"), bool):
        values["passed"] = values["status"] == CaseStatus.passed
    for _ in range(len(CaseResult.model_fields)):
        try:
            case = CaseResult.model_validate(values)
        except ValidationError as exc:
            bad = {str(error["loc"][0]) for error in exc.errors() if error["loc"]} - {"id", "status", "passed"}
            if not bad:  # pragma: no cover - id, status and passed are valid by construction
                return None
            for name in bad:
                values.pop(name, None)
                supplied.discard(name)
            continue
        if not supplied:
            return case
        return CaseResult.model_construct(_fields_set=case.model_fields_set - supplied, **case.__dict__)
    return None  # pragma: no cover - every pass drops at least one field


STAND_IN_ID = "(no id, index {})"
"""The id ``read_case`` gives a record without one (its ``index``, else its position in the document)."""


def _supply(values: dict[str, Any], record: Mapping[str, Any], position: int) -> set[str]:
    """Fill in ``values`` what ``read_case`` supplies (its docstring); returns the fields supplied."""
    supplied: set[str] = set()
    status = values.get("status")
    if not isinstance(status, str) or status not in CaseStatus.__members__:
        values["status"] = CaseStatus.passed if values.get("passed") is True else CaseStatus.failed
        supplied.add("status")
    if values.get("id") is None:
        index = record.get("index")
        values["id"] = STAND_IN_ID.format(index if isinstance(index, int) and not isinstance(index, bool)
                                          else position)
        supplied.add("id")
    elif not isinstance(values["id"], str):
        values["id"] = str(values["id"])
    if record.get("critical"):  # a legacy flag: never read lower than critical
        if "risk_level" not in values:
            supplied.add("risk_level")
        values["risk_level"] = "critical"
    return supplied


def recorded(case: CaseResult, name: str) -> Any:
    """``case``'s field ``name`` as recorded, or None when ``read_case`` supplied it (``read_case``)."""
    return getattr(case, name) if name in case.model_fields_set else None


def read_metrics(metrics: object) -> dict[str, MetricResult]:
    """A record's (or a conversation turn's) ``metrics`` as ``MetricResult`` s, leniently as ``read_case``: an
    entry that is not one (not an object, an unknown status …) is dropped, the others kept; a bare-number
    ``threshold`` reads as ``{"min": x}``, as the reports always showed it."""
    if not isinstance(metrics, Mapping):
        return {}
    out: dict[str, MetricResult] = {}
    for name, entry in metrics.items():
        if isinstance(entry, MetricResult):
            out[str(name)] = entry
            continue
        if not isinstance(entry, Mapping):
            continue
        threshold = entry.get("threshold")
        if isinstance(threshold, int | float) and not isinstance(threshold, bool):
            entry = {**entry, "threshold": {"min": threshold}}
        try:
            out[str(name)] = MetricResult.model_validate(entry)
        except ValidationError:
            continue
    return out


# ---------------------------------------------------------------------------------------------
# reading inputs


RESULT_NAMES = ("results.json", "results.db")


def expand_inputs(specs: Sequence[str | Path], *, exclude: Path | None = None) -> list[str]:
    """Files to merge: files as given; a directory stands for every run under it, as
    ``actions/download-artifact`` lays them out (``DIR/<artifact>/results.json``, or the files directly in
    ``DIR``). Per directory ``results.json`` is taken, else ``results.db``; ``exclude`` (the merge's own
    output directory) is skipped. A directory with neither is a ``UserError``."""
    found: list[str] = []
    for spec in specs:
        path = Path(spec)
        if not path.is_dir():
            found.append(str(spec))
            continue
        picked = []
        for folder in sorted({p.parent for name in RESULT_NAMES for p in path.rglob(name)}):
            if exclude is not None and (folder.resolve() == exclude.resolve() or exclude.resolve() in folder.resolve().parents):
                continue
            name = next(n for n in RESULT_NAMES if (folder / n).is_file())
            picked.append(str(folder / name))
        if not picked:
            raise UserError("no results.json or results.db in this directory or below it", where=str(spec))
        found += picked
    return found


def split_run_spec(spec: str | Path) -> tuple[Path, str | None]:
    """``FILE#RUN_ID`` → (FILE, RUN_ID); a spec naming an existing path, or without ``#``, → (it, None)."""
    text = str(spec)
    path = Path(text)
    if not path.exists() and "#" in text:
        head, _, run_id = text.rpartition("#")
        return Path(head), run_id
    return path, None


def open_input(spec: str | Path, *, skip_merged: bool = True) -> ShardRun:
    """A results.json file or a SQLite file as a ``ShardRun``. In a SQLite file ``FILE#RUN_ID`` picks a
    run; otherwise the newest finished one is taken (not a ``merged`` one when ``skip_merged``)."""
    text = str(spec)
    path, run_id = split_run_spec(text)
    if not path.is_file():
        raise UserError("shard results not found", where=text)
    try:
        with open(path, "rb") as handle:
            magic = handle.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise UserError(f"cannot read ({exc.strerror})", where=text) from None
    if magic == SQLITE_HEADER:
        return _open_sqlite(path, run_id, skip_merged)
    if run_id is not None:
        raise UserError("#RUN_ID selects a run in a SQLite file; this is not one", where=text)
    return _open_json(path)


def _open_json(path: Path) -> ShardRun:
    """A results.json as a ``ShardRun`` in bounded memory: its fields other than ``results`` read first (one
    pass that also proves the file is valid JSON), then its records streamed one at a time
    (``StreamedDocument``: the one reader of results.json files)."""
    stream = StreamedDocument(path)
    try:
        head = stream.read_head()
    except OSError as exc:
        raise UserError(f"cannot read ({exc.strerror})", where=str(path)) from None
    except UnicodeDecodeError:
        raise UserError("not valid JSON (not UTF-8 text)", where=str(path)) from None
    except (ValueError, RecursionError) as exc:
        raise UserError(f"not valid JSON ({exc})", where=str(path)) from None
    _check_document({**head, "results": []} if stream.listed and "results" not in head else head, str(path))
    if "results" in head:  # a "results" that is not a list stays among the fields
        raise UserError("'results' must be a list of case records", where=str(path))
    return ShardRun(label=str(path), document=dict(head),
                    records=(json.dumps(r, ensure_ascii=False) for r in stream.records()))


def _open_sqlite(path: Path, run_id: str | None, skip_merged: bool) -> ShardRun:
    label = f"{path}#{run_id}" if run_id else str(path)
    db = open_readonly(path, label)
    try:
        chosen, document_text = _pick_run(db, run_id, label, skip_merged)
    except sqlite3.DatabaseError as exc:
        db.close()
        raise UserError(f"cannot read the results database ({exc})", where=label) from None
    except UserError:
        db.close()
        raise
    try:
        document = json.loads(document_text)
    except json.JSONDecodeError as exc:
        db.close()
        raise UserError(f"run {chosen}: stored document is not valid JSON ({exc.msg})", where=label) from None
    document.pop("results", None)
    _check_document({**document, "results": []}, f"{path}#{chosen}")
    return ShardRun(label=f"{path}#{chosen}", document=document, records=_sqlite_records(db, chosen))


def open_readonly(path: Path, where: str) -> Database:
    """``path`` opened read-only through sqlite-utils (a read never creates, migrates or locks for writing).
    sqlite-utils is imported here, not with this module: a run that reads a results.json baseline never
    pays for it."""
    from sqlite_utils import Database  # lazy: sqlite-utils (~1 s) only when a database is read


    try:
        return Database(open_checked(path, READ_TABLES))
    except sqlite3.Error as exc:
        raise UserError(f"cannot open SQLite store: {exc}", where=where) from None


def _pick_run(db: Database, run_id: str | None, label: str, skip_merged: bool) -> tuple[str, str]:
    """The run ``run_id``, else the latest run (module docstring): ``(run_id, document JSON)``."""
    if not {"eg_runs", "eg_cases"} <= set(db.table_names()):
        raise UserError("not an evalgate store: no evalgate runs in this database (tables eg_runs/eg_cases missing)",
                        where=label)
    if run_id:
        row = next(db.query("SELECT run_id, document FROM eg_runs WHERE run_id = ?", (run_id,)), None)
        if row is None:
            raise UserError(f"no run {run_id!r} in this database", where=label)
        return str(row["run_id"]), str(row["document"])
    skipped = ("running", "incomplete", "merged") if skip_merged else ("running", "incomplete")
    row = next(db.query(
        f"SELECT run_id, document FROM eg_runs WHERE status NOT IN ({', '.join('?' * len(skipped))})"
        " ORDER BY julianday(timestamp) DESC, run_id DESC LIMIT 1",
        skipped,
    ), None)
    if row is None:
        raise UserError("no finished run in this database (name one with FILE#RUN_ID)", where=label)
    return str(row["run_id"]), str(row["document"])


def _sqlite_records(db: Database, run_id: str) -> Iterator[str]:
    """The run's case records in dataset order (index, repeat); closes ``db`` when done."""
    try:
        for row in db.query("SELECT record FROM eg_cases WHERE run_id = ? ORDER BY idx, repeat", (run_id,)):
            yield str(row["record"])
    finally:
        db.close()


def _check_document(document: Any, where: str) -> None:
    if not isinstance(document, dict) or any(key not in document for key in RESULTS_KEYS):
        raise UserError(f"not an evalgate results document (needs {', '.join(RESULTS_KEYS)})", where=where)
    if document["schema_version"] != SCHEMA_VERSION:
        raise UserError(f"schema_version {document['schema_version']!r} is not {SCHEMA_VERSION}", where=where)


check_document = _check_document
"""Raise ``UserError`` naming ``where`` unless ``document`` is an evalgate results document."""


def load_document(spec: str | Path) -> dict[str, Any]:
    """A whole results document (with ``results``) from a results.json or SQLite file: ``FILE#RUN_ID``,
    else its newest finished run (merged runs included)."""
    run = open_input(spec, skip_merged=False)
    records: list[Any] = []
    for position, text in enumerate(run.records):
        try:
            records.append(json.loads(text))
        except json.JSONDecodeError as exc:
            raise UserError(f"case record is not valid JSON ({exc.msg})",
                            where=f"{run.label}: results[{position}]") from None
    return {**run.document, "results": records}


# ── whole documents for comparison ───────────────────────────────────────────────────────────────────────────────────


class StoredRecords:
    """A run's case records (dicts) read again from their file on every iteration and never held: memory
    is one record at a time whatever the run's size. ``len()`` is the number counted when the file was
    checked; equal to a list holding the same records."""

    def __init__(self, read: Callable[[], Iterator[Any]], count: int) -> None:
        self._read = read
        self.count = count

    def __iter__(self) -> Iterator[Any]:
        return self._read()

    def __len__(self) -> int:
        return self.count

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StoredRecords | list):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def map(self, change: Callable[[Any], Any]) -> StoredRecords:
        """These records with ``change`` applied to each as it is read."""
        return StoredRecords(lambda: (change(record) for record in self._read()), self.count)


def load_results(path: str | Path) -> dict[str, Any]:
    """Read a results document from results.json or from evalgate's SQLite store (latest run), at any size
    in flat memory: every record is checked in one streamed pass, and ``results`` is a ``StoredRecords``
    that reads them again from the file when iterated."""
    file = Path(path)
    try:
        with file.open("rb") as handle:
            header = handle.read(len(SQLITE_HEADER))
    except FileNotFoundError:
        raise UserError("baseline results file not found", where=str(file)) from None
    except OSError as exc:
        raise UserError(f"cannot read baseline results: {exc.strerror}", where=str(file)) from None
    if header == SQLITE_HEADER:
        return _stream_sqlite(file)
    stream = StreamedDocument(file)
    first = _first_character(file)
    if first is not None and first != "{":  # valid or not, not an object: not a results document
        raise UserError("not an evalgate results document (no 'results' list)", where=str(file))
    count = 0
    try:
        for record in stream.records():
            _check_record(record, count, str(file))
            count += 1
    except UnicodeDecodeError:
        raise UserError("not a results.json file (not UTF-8 text)", where=str(file)) from None
    except StreamError as exc:
        line, column = _line_column(file, exc.offset)
        raise UserError(f"invalid JSON: {exc.reason} (column {column})", where=f"{file}:{line}") from None
    except RecursionError:
        raise UserError("invalid JSON: nested too deeply", where=str(file)) from None
    if not stream.listed:
        raise UserError("not an evalgate results document (no 'results' list)", where=str(file))
    document = dict(stream.head)
    _check_version(document, str(file))

    def read() -> Iterator[Any]:
        return StreamedDocument(file).records()

    document["results"] = StoredRecords(read, count)
    return document


def _first_character(file: Path) -> str | None:
    """The first character of ``file`` that is not JSON whitespace (None: empty, or not UTF-8 there)."""
    try:
        with open(file, encoding="utf-8") as handle:
            while chunk := handle.read(1 << 16):
                stripped = chunk.lstrip(" \t\r\n")
                if stripped:
                    return stripped[0]
    except UnicodeDecodeError:
        return None
    return None


def _line_column(file: Path, offset: int) -> tuple[int, int]:
    """1-based line and column of character ``offset`` of ``file`` (read in chunks)."""
    line, column, seen = 1, 1, 0
    with open(file, encoding="utf-8", errors="replace") as handle:
        while seen < offset and (chunk := handle.read(min(1 << 20, offset - seen))):
            newlines = chunk.count("\n")
            if newlines:
                line += newlines
                column = len(chunk) - chunk.rfind("\n")
            else:
                column += len(chunk)
            seen += len(chunk)
    return line, column


def _stream_sqlite(file: Path) -> dict[str, Any]:
    """The latest finished run of a SQLite store with its records streamed (``StoredRecords``)."""
    db = open_readonly(file, str(file))
    try:
        run, document_text = _pick_run(db, None, str(file), skip_merged=False)
        count = 0
        for position, row in enumerate(db.query(_RECORDS_IN_ORDER, (run,))):
            _check_record(_json_column(row["record"], f"{file}: eg_cases.record of run {run}"), position, str(file))
            count += 1
    except sqlite3.Error as exc:
        raise UserError(f"not an evalgate store (tables eg_runs, eg_cases): {exc}", where=str(file)) from None
    finally:
        db.close()
    document = _json_column(document_text, f"{file}: eg_runs.document of run {run}")
    if not isinstance(document, dict):
        raise UserError("not an evalgate results document (no 'results' list)", where=str(file))
    document.setdefault("run_id", run)
    document.pop("results", None)
    _check_version(document, str(file))

    def read() -> Iterator[Any]:
        store = open_readonly(file, str(file))
        try:
            for row in store.query(_RECORDS_IN_ORDER, (run,)):
                yield _json_column(row["record"], f"{file}: eg_cases.record of run {run}")
        finally:
            store.close()

    document["results"] = StoredRecords(read, count)
    return document


_RECORDS_IN_ORDER = (  # the records' own index and repeat (``_record_order``), sorted by SQLite (spills to disk)
    "SELECT record FROM eg_cases WHERE run_id = ? ORDER BY"
    " CASE WHEN json_valid(record) AND json_type(record, '$.index') = 'integer' THEN json_extract(record, '$.index') ELSE 0 END,"
    " CASE WHEN json_valid(record) AND json_type(record, '$.repeat') = 'integer' THEN json_extract(record, '$.repeat') ELSE 0 END,"
    " rowid")


def load_results_sqlite(path: str | Path, run_id: str | None = None) -> dict[str, Any]:
    """Read one run (the latest finished one, see the module docstring, unless ``run_id``) from evalgate's
    SQLite store.

    Contract: ``eg_runs(run_id TEXT, timestamp TEXT, document TEXT)`` where ``document`` is the
    results.json document without ``results``, and ``eg_cases(run_id TEXT, record TEXT)`` where
    ``record`` is one entry of ``results`` exactly as in results.json.
    """
    file = Path(path)
    if not file.is_file():
        raise UserError("baseline SQLite store not found", where=str(file))
    db = open_readonly(file, str(file))
    try:
        run, document_text = _pick_run(db, run_id, str(file), skip_merged=False)
        count = db.execute("SELECT count(*) FROM eg_cases WHERE run_id = ?", (run,)).fetchone()[0]
        if count > MAX_BASELINE_RECORDS:
            raise UserError(f"run {run} holds {count:,} case records, more than the {MAX_BASELINE_RECORDS:,} read",
                            where=str(file))
        record_texts = [row["record"] for row in db.query("SELECT record FROM eg_cases WHERE run_id = ?", (run,))]
    except sqlite3.Error as exc:
        raise UserError(f"not an evalgate store (tables eg_runs, eg_cases): {exc}", where=str(file)) from None
    finally:
        db.close()
    document = _json_column(document_text, f"{file}: eg_runs.document of run {run}")
    records = [_json_column(text, f"{file}: eg_cases.record of run {run}") for text in record_texts]
    if isinstance(document, dict):
        document.setdefault("run_id", run)
        document["results"] = sorted(records, key=_record_order)
    return validate_results(document, str(file))


def _json_column(text: Any, where: str) -> Any:
    try:
        return json.loads(text)
    except (TypeError, json.JSONDecodeError) as exc:
        raise UserError(f"invalid JSON: {exc}", where=where) from None
    except RecursionError:
        raise UserError("invalid JSON: nested too deeply", where=where) from None


def _record_order(record: Any) -> tuple[int, int]:
    if not isinstance(record, dict):
        return (0, 0)
    index, repeat = record.get("index", 0), record.get("repeat", 0)
    return (index if isinstance(index, int) else 0, repeat if isinstance(repeat, int) else 0)


def validate_results(document: Any, where: str) -> dict[str, Any]:
    """Check the shape compare_runs relies on; UserError naming ``where`` otherwise."""
    if not isinstance(document, dict) or not isinstance(document.get("results"), list):
        raise UserError("not an evalgate results document (no 'results' list)", where=where)
    _check_version(document, where)
    if len(document["results"]) > MAX_BASELINE_RECORDS:
        raise UserError(f"{len(document['results']):,} case records, more than the {MAX_BASELINE_RECORDS:,} read",
                        where=where)
    for position, record in enumerate(document["results"]):
        _check_record(record, position, where)
    return document


def _check_version(document: Mapping[str, Any], where: str) -> None:
    version = document.get("schema_version", 1)
    if version != 1:
        raise UserError(f"unsupported results schema_version {version!r} (this evalgate reads 1)", where=where)


def _check_record(record: Any, position: int, where: str) -> None:
    if not isinstance(record, dict) or not isinstance(record.get("id"), str | int):
        raise UserError(f"results[{position}] is not a case record with an 'id'", where=where)
    if not isinstance(record.get("metrics", {}), dict):
        raise UserError(f"results[{position}] ({record['id']}): 'metrics' is not an object", where=where)


# ── baselines ──


@dataclass(frozen=True)
class BaselineLookup:
    """A baseline document and where it came from, or why there is none; with the base run's judge cache
    when it has one (``judge_cache``: the file's bytes from an artifact; ``judge_cache_file``: the
    ``judge-cache.db`` beside a results file)."""

    document: dict[str, Any] | None
    source: str | None = None
    warning: str | None = None
    severity: str = "warning"
    """``notice`` when having no baseline is expected (a push, the first pull request, no runs on the base
    branch yet), ``warning`` when something is wrong (no permission, unreadable artifact, network)."""
    label: str | None = None
    """Short name of the base run for reports: ``main @ abc1234`` or the path."""
    judge_cache: bytes | None = field(default=None, repr=False)
    judge_cache_file: Path | None = None

    @property
    def found(self) -> bool:
        return self.document is not None


def resolve_baseline(
    setting: str | None,
    *,
    auto: Callable[[], BaselineLookup] | None = None,
    cwd: Path | None = None,
) -> BaselineLookup | None:
    """The baseline for ``setting``: None for ``none``; ``auto`` calls ``auto``; else a file path
    (results.json or SQLite, relative to ``cwd``). Never raises: problems become the warning."""
    text = (setting or "").strip()
    if text.lower() in ("", "none"):
        return None
    if text.lower() == "auto":
        if auto is None:
            return BaselineLookup(None, warning="no baseline: baseline auto needs the GitHub Actions context "
                                                "(pull request, repository and token)")
        try:
            return auto()
        except Exception as exc:  # a baseline problem must never stop the run
            return BaselineLookup(None, warning=f"no baseline: {type(exc).__name__}: {redact(str(exc))}")
    path = Path(text)
    if not path.is_absolute() and cwd is not None:
        path = cwd / path
    try:
        document = load_results(path)
    except UserError as exc:
        return BaselineLookup(None, warning=f"no baseline: {redact(str(exc))}")
    beside = path.parent / JUDGE_CACHE_FILE
    return BaselineLookup(document, source=text, label=text, judge_cache_file=beside if beside.is_file() else None)
