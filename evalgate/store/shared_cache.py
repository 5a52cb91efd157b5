"""The user's judge cache, shared by every output directory on the machine: never pay twice for a verdict.

The run's own cache (``judge-cache.db`` beside its results) travels with its results artifact; this one lives
in the user's cache directory (``$XDG_CACHE_HOME/evalgate/judge-cache.db``, else
``~/.cache/evalgate/judge-cache.db``; ``judge_shared_cache`` names another file or ``none``), so a second
``--output-dir`` or a fresh clone finds the verdicts local iteration already paid for. Same table, same key
(``store.judge_cache.CacheKey``) as the run's own cache.

Order of lookup: the run's own cache, the base branch's (when restored), then the shared one; a reply found
in the shared cache is copied into the run's own, so the artifact still carries every verdict the run used.
Every fresh reply is written to both. ``no_cache`` reads neither (and still writes both).

Size: after a run the shared file is kept under ``max_bytes`` (default 256 MB) by deleting its oldest
replies (by the time they were written) down to 80 % of the bound, then ``VACUUM``.

Trust: in GitHub Actions the shared cache is off unless a path is set, and never used in a ``pull_request``
or ``pull_request_target`` run, whatever the setting: a PR's verdicts come from its own run or the base
branch's artifact, never from a file on the runner that an earlier job could have written.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Mapping
from contextlib import closing
from pathlib import Path
from typing import Any

from evalgate.store.judge_cache import CACHE_FILE, CachedReply, CacheKey, JudgeCache, RememberedMode

logger = logging.getLogger(__name__)
DEFAULT_MAX_BYTES = 256 * 1024 * 1024
PRUNE_TO = 0.8
PR_EVENTS = frozenset({"pull_request", "pull_request_target"})


def shared_cache_path(setting: str, env: Mapping[str, str]) -> tuple[Path | None, str | None]:
    """(the shared cache file, or None; why not, when it is off for a reason worth saying)."""
    value = (setting or "").strip()
    if value.lower() in ("none", "off", "false", "0"):
        return None, None
    in_actions = env.get("GITHUB_ACTIONS") == "true"
    if in_actions and env.get("GITHUB_EVENT_NAME", "") in PR_EVENTS:
        return None, ("the shared judge cache is never read in a pull request run" if value else None)
    if value:
        return Path(os.path.expanduser(value)), None
    if in_actions:
        return None, None  # Actions: the base branch's artifact is the source
    base = env.get("XDG_CACHE_HOME", "").strip()
    root = Path(base) if base else Path(env.get("HOME") or os.path.expanduser("~")) / ".cache"
    return root / "evalgate" / CACHE_FILE, None


class LayeredJudgeCache(JudgeCache):
    """The run's own ``JudgeCache`` with the shared one behind it (see the module docstring); everything else
    (counters, base cache, metadata) is the own cache's."""

    def __init__(self, own: JudgeCache, shared: JudgeCache, *, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        # not JudgeCache.__init__: this object opens nothing; what it does not define is the own cache's
        self.own = own
        self.shared = shared
        self.max_bytes = max_bytes
        self.shared_hits = 0
        self.pruned = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.own, name)

    def get(self, key: CacheKey) -> CachedReply | None:
        hit = self.own.get(key)
        if hit is not None or not self.own.read:
            return hit
        found = self.shared.get(key)
        if found is None:
            return None
        self.shared_hits += 1
        self.own.misses -= 1  # found after all: a hit of the run's caches
        self.own.hits += 1
        self.own.put(key, found)
        return found

    def put(self, key: CacheKey, reply: CachedReply) -> None:
        self.own.put(key, reply)
        self.shared.put(key, reply)

    def output_mode(self, provider: str, base_url: str, model: str) -> RememberedMode | None:
        """The run's own memory (and base cache) first, then the shared cache's."""
        return self.own.output_mode(provider, base_url, model) or self.shared.output_mode(provider, base_url, model)

    def remember_output_mode(self, provider: str, base_url: str, model: str, mode: str, refused: tuple[str, ...],
                             since: str | None = None) -> None:
        self.own.remember_output_mode(provider, base_url, model, mode, refused, since)
        self.shared.remember_output_mode(provider, base_url, model, mode, refused, since)

    def flush(self) -> None:
        self.own.flush()
        self.shared.flush()

    def close(self) -> None:
        self.own.close()
        self.shared.close()
        if self.shared.path is not None:
            self.pruned = prune(self.shared.path, self.max_bytes)

    def metadata(self) -> dict[str, object]:
        return {**self.own.metadata(), "shared": {"path": str(self.shared.path), "hits": self.shared_hits,
                                                  "writes": self.shared.writes, "errors": self.shared.errors,
                                                  "pruned": self.pruned}}


def prune(path: Path, max_bytes: int) -> int:
    """Delete the oldest replies of the cache at ``path`` until it is under ``PRUNE_TO`` × ``max_bytes``
    (estimated from the average row size), then ``VACUUM``; returns the rows deleted (0 when under the bound
    or on any error: a cache only saves calls)."""
    try:
        size = path.stat().st_size + sum(p.stat().st_size for p in path.parent.glob(path.name + "-wal"))
    except OSError:
        return 0
    if size <= max_bytes:
        return 0
    try:
        with closing(sqlite3.connect(str(path), timeout=5.0)) as db:
            rows = int(db.execute("SELECT count(*) FROM judge_cache").fetchone()[0])
            if not rows:
                return 0
            drop = min(rows, max(1, rows - int(rows * PRUNE_TO * max_bytes / size)))
            db.execute("DELETE FROM judge_cache WHERE rowid IN (SELECT rowid FROM judge_cache "
                       "ORDER BY created_utc, rowid LIMIT ?)", (drop,))
            db.commit()
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            db.execute("VACUUM")
            return drop
    except sqlite3.Error as exc:
        logger.warning("shared judge cache %s: pruning failed (%s)", path, exc)
        return 0
