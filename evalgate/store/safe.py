"""SQLite files evalgate did not just create, opened defensively (docs/security.md).

A results database or judge cache may come from a pull request's checkout: its schema is then data
written by someone else. A trigger runs on every insert evalgate makes (a slow one stalls the job, one
that rewrites rows turns a failed case into a passed one), a view or a generated column runs code on
every read. So before evalgate reads or appends to a file it did not create in this run, the file is
opened read-only (``mode=ro``, ``PRAGMA query_only``), with ``PRAGMA trusted_schema=OFF`` (functions
with side effects are refused in schema code) and, on Python ≥ 3.12, ``SQLITE_DBCONFIG_DEFENSIVE``
(no writes to the schema or to shadow tables), and its schema is checked (``schema_problem``):

* no trigger, no view, no virtual table, no generated column anywhere in the file;
* every table evalgate uses that is present is a plain table with at least the columns evalgate reads;
* the tables a reader needs are present.

A file that fails is not used: readers ignore it with one notice (a cache) or stop with a one-line user
error naming the file (a results file given on the command line); the results writer moves it aside and
writes a fresh database (``store.sqlite.open_database``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path

RESULTS_TABLES: Mapping[str, frozenset[str]] = {
    "eval_runs": frozenset({"run_id", "timestamp_utc", "total_test_cases", "total_passed", "total_failed",
                            "pass_rate", "summary_json"}),
    "eval_results": frozenset({"eval_run_id", "test_description", "overall_passed", "metric_name", "metric_value",
                               "metric_passed", "metric_details_json", "timestamp_utc"}),
    "eg_runs": frozenset({"run_id", "timestamp", "status", "document"}),
    "eg_cases": frozenset({"run_id", "case_id", "repeat", "idx", "status", "passed", "risk_level", "source",
                           "record"}),
    "eg_meta": frozenset({"key", "value"}),
    "eg_calibrations": frozenset({"metric", "key", "created", "judge", "record"}),
}
"""The results database's tables and the columns evalgate reads or writes (``store.schema``)."""

READ_TABLES: Mapping[str, frozenset[str]] = {name: frozenset() for name in RESULTS_TABLES}
"""For readers: the results tables' kinds and generated columns are checked; a missing column makes the
query fail with a one-line error (``store.reader``'s contract needs only a few columns)."""

CACHE_TABLES: Mapping[str, frozenset[str]] = {
    "judge_cache": frozenset({"provider", "endpoint", "model", "template_version", "prompt_hash", "repeat_index",
                              "sample_index", "reply", "prompt_tokens", "completion_tokens", "created_utc"}),
    "judge_output_mode": frozenset({"provider", "endpoint", "model", "mode", "refused", "created_utc"}),
}
"""The judge cache's tables (``store.judge_cache``)."""

SQLITE_DBCONFIG_DEFENSIVE = 1010
"""``SQLITE_DBCONFIG_DEFENSIVE`` from sqlite3.h (``sqlite3.SQLITE_DBCONFIG_DEFENSIVE`` on Python ≥ 3.12)."""


class UntrustedSchema(sqlite3.DatabaseError):
    """The file's schema is not one evalgate reads (the message says why)."""


def harden(connection: sqlite3.Connection, *, read_only: bool) -> None:
    """``trusted_schema`` off, defensive mode where the sqlite3 module can set it, and ``query_only``
    for a read-only connection."""
    connection.execute("PRAGMA trusted_schema=OFF")
    setconfig = getattr(connection, "setconfig", None)
    if setconfig is not None:
        setconfig(getattr(sqlite3, "SQLITE_DBCONFIG_DEFENSIVE", SQLITE_DBCONFIG_DEFENSIVE), True)
    if read_only:
        connection.execute("PRAGMA query_only=ON")


def schema_problem(connection: sqlite3.Connection, tables: Mapping[str, frozenset[str]],
                   required: Iterable[str] = ()) -> str | None:
    """Why the database behind ``connection`` must not be used (module docstring), or None;
    ``sqlite3.DatabaseError`` when it is not a SQLite database at all."""
    objects = connection.execute("SELECT type, name, sql FROM sqlite_master").fetchall()  # not SQLite: raises
    found: dict[str, str] = {}
    for kind, name, sql in objects:
        if kind in ("trigger", "view"):
            return f"it holds a {kind} ({name!r}); evalgate never runs code stored in a database"
        if kind == "table" and str(sql or "").lstrip().upper().startswith("CREATE VIRTUAL"):
            return f"it holds a virtual table ({name!r})"
        if kind == "table":
            found[str(name).lower()] = str(name)
    for name in required:
        if name not in found:
            return f"no table {name}"
    for name, columns in tables.items():
        if name not in found:
            continue
        try:
            info = connection.execute(f'PRAGMA table_xinfo("{found[name]}")').fetchall()
        except sqlite3.Error as exc:
            return f"table {name} cannot be read ({exc})"
        if any(int(row[6]) != 0 for row in info):
            return f"table {name} has generated or hidden columns"
        missing = columns - {str(row[1]) for row in info}
        if missing:
            return f"table {name} lacks column(s) {', '.join(sorted(missing))}"
    return None


def open_checked(path: Path, tables: Mapping[str, frozenset[str]], required: Iterable[str] = (), *,
                 immutable: bool = False, check_same_thread: bool = True) -> sqlite3.Connection:
    """``path`` opened read-only and hardened, its schema checked; ``UntrustedSchema`` (a
    ``sqlite3.DatabaseError``) when it must not be used. ``immutable``: the file is a copy nobody
    writes (no journal files are read or created beside it)."""
    uri = f"{path.resolve().as_uri()}?mode=ro" + ("&immutable=1" if immutable else "")
    connection = sqlite3.connect(uri, uri=True, check_same_thread=check_same_thread)
    try:
        harden(connection, read_only=True)
        problem = schema_problem(connection, tables, required)
    except BaseException:
        connection.close()
        raise
    if problem is not None:
        connection.close()
        raise UntrustedSchema(problem)
    return connection


def check_file(path: Path, tables: Mapping[str, frozenset[str]], required: Iterable[str] = ()) -> str | None:
    """Why the existing file at ``path`` must not be opened for writing, or None (also None when there
    is no file or an empty one: a new database is created there)."""
    try:
        if not path.exists() or (path.is_file() and path.stat().st_size == 0):
            return None
    except OSError as exc:
        return f"it cannot be read ({exc.strerror})"
    if not path.is_file():
        return "it is not a regular file"
    try:
        open_checked(path, tables, required).close()
    except sqlite3.Error as exc:
        return str(exc)
    return None


EVALGATE_TABLES_BY_VERSION = {1: ("eval_runs", "eval_results", "eg_runs", "eg_cases"), 2: ("eg_meta",),
                              3: ("eg_calibrations",)}
"""Tables a results database at each schema version must hold (``store.schema.MIGRATIONS``; a test keeps
the two in step)."""


def check_results_file(path: Path) -> str | None:
    """``check_file`` for a results database, with the tables its recorded schema version promises and
    that version recorded in ``eg_meta`` too (as evalgate writes it); a symbolic link is never written
    through (evalgate never makes one: a committed link would send the rows to a file elsewhere)."""
    if path.is_symlink():
        return "it is a symbolic link; evalgate never writes through one"
    problem = check_file(path, RESULTS_TABLES)
    if problem is not None or not path.is_file() or path.stat().st_size == 0:
        return problem
    try:
        connection = open_checked(path, RESULTS_TABLES)
    except sqlite3.Error as exc:
        return str(exc)
    try:
        version = int(connection.execute("PRAGMA user_version").fetchone()[0])
        if version > max(EVALGATE_TABLES_BY_VERSION):
            return None  # a newer evalgate's file: refused, never rewritten (``store.schema.migrate``)
        required = [name for number, names in EVALGATE_TABLES_BY_VERSION.items() if number <= version for name in names]
        problem = schema_problem(connection, RESULTS_TABLES, required)
        if problem is None and version >= 2:  # evalgate records the version it wrote in eg_meta too
            row = connection.execute("SELECT value FROM eg_meta WHERE key = 'schema_version'").fetchone()
            if row is None or str(row[0]) != str(version):
                problem = (f"its schema version {version} is not recorded in its eg_meta table: evalgate did not "
                           "write it")
        return problem
    except sqlite3.Error as exc:
        return str(exc)
    finally:
        connection.close()


def set_aside(path: Path, tag: str) -> Path:
    """Rename ``path`` and its journal files to ``<name>.rejected-<tag>`` (nothing is deleted); returns
    the new path of the file itself. ``OSError`` when it cannot be renamed."""
    aside = path.with_name(f"{path.name}.rejected-{tag}")
    path.rename(aside)
    for suffix in ("-wal", "-shm", "-journal"):
        sidecar = path.with_name(path.name + suffix)
        if sidecar.exists() or sidecar.is_symlink():
            sidecar.rename(aside.with_name(aside.name + suffix))
    return aside
