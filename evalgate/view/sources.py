"""What ``evalgate view`` browses: results databases, results.json files, downloaded artifacts (a zip or its
unpacked folder) or a folder of any of them, resolved into read-only SQLite files.

* a results database is used where it is (opened read-only for every query: ``store.browse``);
* a results.json is copied, streamed, into a scratch database in a private temporary directory
  (``store.browse.import_results_json``) — the user's files are never written;
* a zip (an artifact as GitHub's "Download" gives it) has its ``results.db`` / ``results.json`` members
  extracted into that directory (at most ``MAX_MEMBER_BYTES`` each), then treated as above;
* a folder is searched below for all of these; in one folder ``results.db`` is taken over ``results.json``
  (the database holds that run and its history).

Runs are identified by run id; a run found in several inputs is taken from the first.
"""

from __future__ import annotations

import shutil
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from evalgate.errors import UserError
from evalgate.store import browse
from evalgate.store.reader import SQLITE_HEADER

MAX_MEMBER_BYTES = 2 * 1024 * 1024 * 1024
RESULT_FILES = ("results.db", "results.json")


@dataclass
class Catalog:
    """The databases being browsed and which holds each run (``runs``: run id → database index)."""

    databases: list[Path]
    labels: list[str]
    runs: dict[str, int] = field(default_factory=dict)
    scratch: Path | None = None
    immutable: bool = False
    """The databases are finished and written by nobody (``browse.open_results``)."""

    @contextmanager
    def connect(self, index: int) -> Iterator[browse.Connection]:
        """A fresh read-only connection to database ``index`` (one per request: no connection is shared
        between threads)."""
        connection = browse.open_results(self.databases[index], immutable=self.immutable)
        try:
            yield connection
        finally:
            connection.close()

    def run_summaries(self) -> list[tuple[int, browse.RunSummary]]:
        """Every run of every database (first database wins a duplicated run id), newest first."""
        found: list[tuple[int, browse.RunSummary]] = []
        seen: set[str] = set()
        for index in range(len(self.databases)):
            with self.connect(index) as connection:
                for run in browse.list_runs(connection):
                    if run.run_id not in seen:
                        seen.add(run.run_id)
                        found.append((index, run))
        found.sort(key=lambda item: (item[1].timestamp, item[1].run_id), reverse=True)
        return found

    def close(self) -> None:
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None


def open_catalog(inputs: Sequence[str | Path], *, immutable: bool = False) -> Catalog:
    """Resolve ``inputs`` (module docstring) into a ``Catalog``; a ``UserError`` naming the input that is
    missing or holds no results. ``immutable``: the inputs are finished databases (``Catalog.immutable``)."""
    scratch = Path(tempfile.mkdtemp(prefix="evalgate-view-"))
    catalog = Catalog([], [], scratch=scratch, immutable=immutable)
    try:
        for spec in inputs:
            path = Path(spec)
            if not path.exists():
                raise UserError("not found", where=str(spec))
            files = _result_files(path)
            if not files:
                raise UserError("no results.db, results.json or artifact zip here", where=str(spec))
            for file in files:
                _add(catalog, file)
        for index in range(len(catalog.databases)):
            with catalog.connect(index) as connection:
                for run in browse.list_runs(connection):
                    catalog.runs.setdefault(run.run_id, index)
        if not catalog.runs:
            raise UserError("no runs recorded in " + ", ".join(catalog.labels), where=str(inputs[0]))
    except BaseException:
        catalog.close()
        raise
    return catalog


def _result_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    found: list[Path] = []
    for folder in sorted({p.parent for name in (*RESULT_FILES, "*.zip") for p in path.rglob(name)}):
        names = [name for name in RESULT_FILES if (folder / name).is_file()]
        if names:
            found.append(folder / names[0])
        found += sorted(folder.glob("*.zip"))
    return found


def _is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError as exc:
        raise UserError(f"cannot read ({exc.strerror})", where=str(path)) from None


def _add(catalog: Catalog, file: Path, label: str | None = None) -> None:
    assert catalog.scratch is not None
    label = label or str(file)
    if zipfile.is_zipfile(file):
        _add_zip(catalog, file)
    elif _is_sqlite(file):
        browse.open_results(file, immutable=catalog.immutable).close()  # checked now: a bad file is one line naming it, not a broken page
        catalog.databases.append(file)
        catalog.labels.append(label)
    else:
        target = catalog.scratch / f"{len(catalog.databases)}.db"
        browse.import_results_json(file, target)
        catalog.databases.append(target)
        catalog.labels.append(label)


def _add_zip(catalog: Catalog, file: Path) -> None:
    assert catalog.scratch is not None
    try:
        archive = zipfile.ZipFile(file)
    except (OSError, zipfile.BadZipFile) as exc:
        raise UserError(f"not a readable zip ({exc})", where=str(file)) from None
    with archive:
        members = [m for m in archive.infolist() if Path(m.filename).name in RESULT_FILES and not m.is_dir()]
        by_folder: dict[str, zipfile.ZipInfo] = {}
        for member in sorted(members, key=lambda m: (str(Path(m.filename).parent), RESULT_FILES.index(Path(m.filename).name))):
            by_folder.setdefault(str(Path(member.filename).parent), member)
        if not by_folder:
            raise UserError("this zip holds no results.db or results.json", where=str(file))
        for _, member in sorted(by_folder.items()):
            if member.file_size > MAX_MEMBER_BYTES:
                raise UserError(f"{member.filename} is {member.file_size:,} bytes, more than the "
                                f"{MAX_MEMBER_BYTES:,} read", where=str(file))
            target = catalog.scratch / f"zip{len(catalog.databases)}-{Path(member.filename).name}"
            with archive.open(member) as source, open(target, "wb") as out:
                shutil.copyfileobj(source, out, 1 << 20)
            _add(catalog, target, label=f"{file}:{member.filename}")
