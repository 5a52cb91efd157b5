"""The judge cache: table ``judge_cache`` in ``judge-cache.db`` next to the results database
(``cache_path``). It is a separate file because the results store keeps a write transaction open while
cases stream in; sharing its file would make the two writers wait on each other.

Key: (provider, endpoint, model, template version, rendered prompt hash, repeat index, sample index).
``endpoint`` = first 32 hex digits of sha256 of the provider's base URL (scheme and host lower-cased, no
trailing ``/``), so two servers serving a model of the same name never share replies, and a base URL
carrying credentials is not written to disk. The prompt hash covers the messages and the request
parameters that change a reply (temperature, seed, response format, max_tokens), so an unchanged case
rerun with the same judge costs no call. A cache file written before the endpoint was part of the key is
emptied when opened (its replies cannot be attributed to a server). Only replies that
parsed into a valid verdict are stored. ``no_cache`` skips the lookup (every call is made) but still
stores the fresh replies.

Table ``judge_output_mode`` remembers the structured-output mode an endpoint took (``judges.output``), keyed
by (provider, endpoint, model) with the endpoint hashed as above: one row per judge, written when a run had
to move down the chain (a server that refused ``json_schema``). The next run starts from that mode, so a
refusal costs its call once, not once per run. A row is trusted for ``MODE_MEMORY_DAYS`` (after that the
better mode is tried again, in case the server learnt it); it holds the mode names only, never the error.
Read from the run's own cache, else the base cache (copied into the run's own, as replies are): the worst a
planted row can do is start lower in the provider's own chain, which costs readable verdicts, never a pass.

A **base cache** (``base``: the base branch's ``judge-cache.db``, restored from its results artifact or
given as a path) is a second, read-only file consulted after the run's own: a reply found there counts in
``base_hits`` (with its tokens, so the report can say what it saved) and is copied into the run's own
cache, so the run's artifact carries every verdict it used. The key decides reuse: a changed judge
model, provider endpoint, template (its version hashes the source) or rendered prompt (rubric, criteria,
case or answer text, request parameters) finds nothing. A base file that cannot be read is ignored
(``base_error``). Writes are batched: new replies wait in memory (where lookups see them) and go
to disk in one transaction per ``FLUSH_ROWS`` replies or ``FLUSH_SECONDS``, whichever comes first, and on
close; a crash can lose at most those, which only costs their calls again. A cache that cannot be read or written (locked, corrupt, read-only disk) is
counted in ``errors`` and otherwise ignored: it only ever saves calls. Every cache file evalgate did not
create in this run is checked first (``store.safe``): one holding triggers, views or generated columns is
renamed aside (the run's own) or ignored (a base cache, a shard's), never opened for use.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import logging
import sqlite3
import threading
import time
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from evalgate.store.safe import CACHE_TABLES, check_file, harden, open_checked, set_aside

logger = logging.getLogger(__name__)
CACHE_FILE = "judge-cache.db"
BUSY_TIMEOUT_S = 5.0
FLUSH_ROWS = 64
FLUSH_SECONDS = 2.0

DDL = """
CREATE TABLE IF NOT EXISTS judge_cache (
    provider TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    model TEXT NOT NULL,
    template_version TEXT NOT NULL,
    prompt_hash TEXT NOT NULL,
    repeat_index INTEGER NOT NULL,
    sample_index INTEGER NOT NULL,
    reply TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    created_utc TEXT NOT NULL,
    PRIMARY KEY (provider, endpoint, model, template_version, prompt_hash, repeat_index, sample_index)
)
"""


DDL_MODES = """
CREATE TABLE IF NOT EXISTS judge_output_mode (
    provider TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    model TEXT NOT NULL,
    mode TEXT NOT NULL,
    refused TEXT NOT NULL,
    created_utc TEXT NOT NULL,
    PRIMARY KEY (provider, endpoint, model)
)
"""
MODE_MEMORY_DAYS = 30
"""How long a remembered output mode is used before the better modes are tried again."""
SELECT_MODE = ("SELECT mode, refused, created_utc FROM judge_output_mode WHERE provider=? AND endpoint=? AND model=? "
               "AND created_utc >= ?")


def cache_path(db_path: Path) -> Path:
    """``judge-cache.db`` in the directory of the results database."""
    return db_path.parent / CACHE_FILE


@functools.lru_cache(maxsize=64)
def endpoint_id(base_url: str) -> str:
    """The cache's name for a provider base URL: sha256 (first 32 hex digits) of the URL with scheme and
    host lower-cased and trailing ``/`` removed (``HTTP://Host:8080/v1/`` ≡ ``http://host:8080/v1``)."""
    parts = urlsplit(base_url.strip())
    canonical = urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path.rstrip("/"), parts.query, ""))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class CacheKey:
    provider: str
    base_url: str
    model: str
    template_version: str
    prompt_hash: str
    repeat: int = 0
    sample: int = 0

    def row(self) -> tuple[str, str, str, str, str, int, int]:
        return (self.provider, endpoint_id(self.base_url), self.model, self.template_version, self.prompt_hash,
                self.repeat, self.sample)


@dataclass(frozen=True, slots=True)
class RememberedMode:
    """The output mode a judge endpoint took on an earlier run, the modes it refused, and when."""

    mode: str
    refused: tuple[str, ...]
    since: str
    from_base: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "refused": list(self.refused), "since": self.since,
                **({"source": "base cache"} if self.from_base else {})}


@dataclass(frozen=True, slots=True)
class BaseCache:
    """A restored base cache: the file and where it came from (``main @ abc1234``, a path)."""

    path: Path
    label: str


@dataclass(frozen=True, slots=True)
class CachedReply:
    reply: str
    prompt_tokens: int
    completion_tokens: int
    from_base: bool = field(default=False, compare=False)
    """Found in the base cache (not the run's own)."""


SELECT_REPLY = ("SELECT reply, prompt_tokens, completion_tokens FROM judge_cache WHERE provider=? AND endpoint=? "
                "AND model=? AND template_version=? AND prompt_hash=? AND repeat_index=? AND sample_index=?")
"""One reply by ``CacheKey.row()`` (the run's own cache and the base cache)."""


def _create_table(db: sqlite3.Connection) -> None:
    """Create ``judge_cache``; a table from before ``endpoint`` joined the key is dropped first."""
    db.execute("BEGIN IMMEDIATE")
    try:
        columns = {row[1] for row in db.execute("PRAGMA table_info(judge_cache)")}
        if columns and "endpoint" not in columns:
            logger.info("judge cache: emptying a cache written without provider endpoints")
            db.execute("DROP TABLE judge_cache")
        db.execute(DDL)
        db.execute(DDL_MODES)
    except sqlite3.Error:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


class JudgeCache:
    """A small synchronous store (one row per reply); safe to share between the run's tasks."""

    def __init__(self, path: Path | None, *, read: bool = True, base: Path | None = None,
                 base_label: str | None = None) -> None:
        self.path = path
        self.read = read
        self.enabled = path is not None
        self.hits = 0
        self.misses = 0
        self.writes = 0
        self.errors = 0
        self.base_label = base_label
        self.base_rows = 0
        self.base_hits = 0
        self.base_prompt_tokens = 0
        self.base_completion_tokens = 0
        self.base_error: str | None = None
        self._base: sqlite3.Connection | None = self._open_base(base) if base is not None and read else None
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._pending: dict[tuple[str, str, str, str, str, int, int], tuple[str, int, int, str]] = {}
        self._flushed_at = time.monotonic()
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                self._set_aside_unusable(path)
                self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False,
                                           timeout=BUSY_TIMEOUT_S)
                harden(self._db, read_only=False)
                self._db.execute("PRAGMA journal_mode=WAL")
                # each put is its own transaction: NORMAL skips the fsync per commit (WAL keeps the file
                # consistent; a power cut may only lose the newest replies, which a cache can afford)
                self._db.execute("PRAGMA synchronous=NORMAL")
                _create_table(self._db)
            except (OSError, sqlite3.Error) as exc:
                self._failed("open", exc)
                self.enabled = False

    def _set_aside_unusable(self, path: Path) -> None:
        """An existing cache file whose schema evalgate must not use (``store.safe``) is renamed aside,
        with a notice: a fresh cache is written."""
        problem = check_file(path, {"judge_cache": frozenset(), "judge_output_mode": frozenset()})  # an old layout
        # of judge_cache is emptied by _create_table
        if problem is not None:
            set_aside_cache(path, problem)

    def _open_base(self, path: Path) -> sqlite3.Connection | None:
        """The base cache, read-only (``immutable``: no journal files are created beside it)."""
        try:
            db = open_checked(path, CACHE_TABLES, ("judge_cache",), immutable=True, check_same_thread=False)
            try:
                self.base_rows = int(db.execute("SELECT count(*) FROM judge_cache").fetchone()[0])
            except sqlite3.Error:
                db.close()
                raise
        except sqlite3.Error as exc:
            self.base_error = f"{exc}"
            logger.warning("judge cache: the base cache %s cannot be read (%s); it is not used", path, exc)
            return None
        return db

    def _failed(self, action: str, exc: Exception) -> None:
        self.errors += 1
        logger.warning("judge cache %s failed (%s): %s; continuing without it", action, self.path, exc)

    def get(self, key: CacheKey) -> CachedReply | None:
        row: tuple[Any, ...] | None = None
        if self._db is not None and self.read:
            try:
                with self._lock:
                    row = self._pending.get(key.row()) or self._db.execute(SELECT_REPLY, key.row()).fetchone()
            except sqlite3.Error as exc:
                self._failed("read", exc)
        if row is None and self._base is not None:
            return self._from_base(key)
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        return CachedReply(str(row[0]), int(row[1]), int(row[2]))  # a stored row or a pending one

    def _from_base(self, key: CacheKey) -> CachedReply | None:
        """The base cache's reply for ``key`` (copied into the run's own cache), or None (a miss)."""
        assert self._base is not None
        try:
            with self._lock:
                row = self._base.execute(SELECT_REPLY, key.row()).fetchone()
        except sqlite3.Error as exc:
            self.base_error = str(exc)
            row = None
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        self.base_hits += 1
        reply = CachedReply(str(row[0]), int(row[1]), int(row[2]), from_base=True)
        self.base_prompt_tokens += reply.prompt_tokens
        self.base_completion_tokens += reply.completion_tokens
        self.put(key, reply)
        return reply

    def output_mode(self, provider: str, base_url: str, model: str) -> RememberedMode | None:
        """The output mode remembered for this judge (own cache first, then the base cache), or None: none
        remembered, older than ``MODE_MEMORY_DAYS``, or the cache cannot be read."""
        key = (provider, endpoint_id(base_url), model)
        oldest = (dt.datetime.now(dt.UTC) - dt.timedelta(days=MODE_MEMORY_DAYS)).strftime("%Y-%m-%dT%H:%M:%SZ")
        for db, from_base in ((self._db, False), (self._base, True)):
            if db is None:
                continue
            try:
                with self._lock:
                    row = db.execute(SELECT_MODE, (*key, oldest)).fetchone()
            except sqlite3.Error:  # an older file without the table, or unreadable: nothing remembered
                continue
            if row is not None:
                found = RememberedMode(str(row[0]), tuple(m for m in str(row[1]).split(",") if m), str(row[2]),
                                       from_base)
                if from_base:
                    self.remember_output_mode(provider, base_url, model, found.mode, found.refused, found.since)
                return found
        return None

    def remember_output_mode(self, provider: str, base_url: str, model: str, mode: str, refused: tuple[str, ...],
                             since: str | None = None) -> None:
        """Store the mode this judge endpoint took after refusing ``refused`` (written at once: one row a run)."""
        if self._db is None:
            return
        when = since or dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        try:
            with self._lock:
                self._db.execute("INSERT OR REPLACE INTO judge_output_mode VALUES (?, ?, ?, ?, ?, ?)",
                                 (provider, endpoint_id(base_url), model, mode, ",".join(refused), when))
        except sqlite3.Error as exc:
            self._failed("write", exc)

    def put(self, key: CacheKey, reply: CachedReply) -> None:
        """Queue ``reply``; the queue is written when it holds ``FLUSH_ROWS`` or is ``FLUSH_SECONDS`` old."""
        if self._db is None:
            return
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        with self._lock:
            self._pending[key.row()] = (reply.reply, reply.prompt_tokens, reply.completion_tokens, now)
            if len(self._pending) >= FLUSH_ROWS or time.monotonic() - self._flushed_at >= FLUSH_SECONDS:
                self._flush()

    def flush(self) -> None:
        """Write the queued replies now."""
        with self._lock:
            self._flush()

    def _flush(self) -> None:
        """One transaction for every queued reply (the caller holds the lock)."""
        self._flushed_at = time.monotonic()
        if not self._pending or self._db is None:
            return
        rows = [(*key, *value) for key, value in self._pending.items()]
        self._pending.clear()
        try:
            self._db.execute("BEGIN")
            try:
                self._db.executemany("INSERT OR REPLACE INTO judge_cache VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
            except sqlite3.Error:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            self._failed("write", exc)
            return
        self.writes += len(rows)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._flush()
                self._db.close()
                self._db = None
            if self._base is not None:
                self._base.close()
                self._base = None

    @property
    def lookups(self) -> int:
        return self.hits + self.misses

    def metadata(self) -> dict[str, object]:
        data: dict[str, object] = {
            "enabled": self.enabled, "read": self.read, "hits": self.hits, "misses": self.misses,
            "writes": self.writes, "errors": self.errors, "path": str(self.path) if self.path else None}
        if self.base_label is not None:
            data["base"] = {"source": self.base_label, "rows": self.base_rows, "hits": self.base_hits,
                            "prompt_tokens": self.base_prompt_tokens,
                            "completion_tokens": self.base_completion_tokens, "error": self.base_error}
        return data


def set_aside_cache(path: Path, reason: str) -> str | None:
    """Rename an existing cache file (and its journal files) to ``<name>.rejected-<time>`` so the run
    writes a fresh one; returns the notice (None: there was no file)."""
    if not (path.exists() or path.is_symlink()):
        return None
    aside = set_aside(path, time.strftime("%Y%m%dT%H%M%S"))
    text = f"judge cache {path}: not used ({reason}); moved to {aside.name}, every verdict is judged afresh"
    logger.warning("%s", text)
    return text


def merge_cache_files(sources: list[Path], destination: Path) -> int:
    """Add every reply of the judge caches at ``sources`` (shards' ``judge-cache.db``) to the one at
    ``destination`` (a reply already there is kept); returns the replies added. A source that is missing
    or not a judge cache is skipped: a cache only saves calls."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    added = 0
    problem = check_file(destination, CACHE_TABLES)
    if problem is not None:
        set_aside(destination, time.strftime("%Y%m%dT%H%M%S"))
        logger.warning("judge cache %s: not used (%s); a fresh one is written", destination, problem)
    with closing(sqlite3.connect(str(destination), isolation_level=None, timeout=BUSY_TIMEOUT_S)) as db:
        harden(db, read_only=False)
        _create_table(db)
        for number, source in enumerate(sources):
            if not source.is_file() or source.resolve() == destination.resolve():
                continue
            problem = check_file(source, CACHE_TABLES, ("judge_cache",))
            if problem is not None:
                logger.warning("judge cache %s cannot be merged: %s", source, problem)
                continue
            alias = f"shard{number}"
            try:
                db.execute(f"ATTACH DATABASE ? AS {alias}", (f"{source.resolve().as_uri()}?mode=ro",))
            except sqlite3.Error as exc:
                logger.warning("judge cache %s cannot be merged: %s", source, exc)
                continue
            try:
                columns = {row[1] for row in db.execute(f"PRAGMA {alias}.table_info(judge_cache)")}
                if "endpoint" in columns:
                    names = ", ".join(row[1] for row in db.execute("PRAGMA main.table_info(judge_cache)"))
                    before = db.total_changes
                    db.execute(f"INSERT OR IGNORE INTO main.judge_cache ({names}) SELECT {names} FROM {alias}.judge_cache")
                    added += db.total_changes - before
                if {row[1] for row in db.execute(f"PRAGMA {alias}.table_info(judge_output_mode)")} >= \
                        CACHE_TABLES["judge_output_mode"]:
                    db.execute("INSERT OR IGNORE INTO main.judge_output_mode (provider, endpoint, model, mode, "
                               "refused, created_utc) SELECT provider, endpoint, model, mode, refused, created_utc "
                               f"FROM {alias}.judge_output_mode")
            except sqlite3.Error as exc:
                logger.warning("judge cache %s cannot be merged: %s", source, exc)
            finally:
                db.execute(f"DETACH DATABASE {alias}")
    return added
