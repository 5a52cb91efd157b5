"""Judge only what changed: the base branch's judge cache, restored before the run.

Where it comes from (setting ``judge_cache``, input ``judge-cache``):

* empty (the default): from the baseline, when there is one: with ``baseline: auto`` the
  ``judge-cache.db`` inside the base branch's results artifact (``github.baseline``); with a baseline
  path, the ``judge-cache.db`` beside that file;
* ``none``: never;
* a path: that ``judge-cache.db``, or the ``judge-cache.db`` in that directory (e.g. restored by
  ``actions/cache`` or ``actions/download-artifact``).

In a run whose checkout is a pull request's (``config.trust.untrusted_checkout``) nothing from the
checkout stands in for a verdict: a cache file already at the run's own cache path is set aside (a
fresh one is written), and a ``judge_cache`` path or a ``baseline`` path named by the configuration
file (part of the checkout) brings no cache; the baseline's artifact and the workflow's own inputs do.

With ``no_cache`` nothing is restored. The restored file is only read (``store.judge_cache``): the key
decides what may be reused, so a changed judge model, template or rubric never hits it. A cache that
is missing or unreadable is a notice, never an error: it only saves calls.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalgate.config.trust import from_checkout, untrusted_checkout
from evalgate.store.judge_cache import CACHE_FILE, BaseCache, cache_path, set_aside_cache
from evalgate.store.reader import SQLITE_HEADER

if TYPE_CHECKING:
    from evalgate.config.settings import Settings
    from evalgate.store.reader import BaselineLookup


@dataclass
class Restored:
    """The base cache for the judge (None: none), a notice for the user, and the scratch to remove."""

    cache: BaseCache | None = None
    notice: str | None = None
    _scratch: Path | None = field(default=None, repr=False)

    def close(self) -> None:
        """Remove the copy written from an artifact (nothing else is ever deleted)."""
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None


def restore_base_cache(settings: Settings, baseline: BaselineLookup | None, cwd: Path | None = None) -> Restored:
    """The base cache the run's judge consults (module doc)."""
    choice = settings.judge_cache.strip()
    if settings.judge_provider == "none":
        return Restored()
    untrusted = untrusted_checkout(settings.environment)
    notices: list[str] = []
    if untrusted:  # the run's own cache file, if the checkout holds one, is the pull request's
        own = cache_path(settings.db_path if settings.db_path.is_absolute() or cwd is None
                         else cwd / settings.db_path)
        moved = set_aside_cache(own, "it was in the checkout before this pull request run; files from a pull "
                                     "request are never used as judge verdicts")
        if moved:
            notices.append(moved)
    if settings.no_cache or choice.lower() == "none":
        return _with_notices(Restored(), notices)
    if choice and untrusted and from_checkout(settings.origin("judge_cache"), settings.config):
        notices.append(f"judge cache {choice}: named by {settings.origin('judge_cache')}, a file of the pull "
                       "request; not used (set the workflow's judge-cache input instead); every verdict is judged")
        choice = ""
    if choice:
        return _with_notices(_from_path(choice, cwd), notices)
    if baseline is None or baseline.document is None:
        return _with_notices(Restored(), notices)
    if (untrusted and baseline.judge_cache is None and baseline.judge_cache_file is not None
            and from_checkout(settings.origin("baseline"), settings.config)):
        notices.append(f"judge cache beside the baseline {settings.baseline}: the baseline is named by "
                       f"{settings.origin('baseline')}, a file of the pull request; its judge cache is not used")
        return _with_notices(Restored(), notices)
    return _with_notices(_from_baseline(baseline), notices)


def _with_notices(restored: Restored, notices: list[str]) -> Restored:
    """``restored`` with ``notices`` before its own notice (one line each)."""
    if notices:
        restored.notice = "\n".join([*notices, *([restored.notice] if restored.notice else [])])
    return restored


def _from_baseline(baseline: BaselineLookup) -> Restored:
    label = baseline.label or baseline.source or "the baseline"
    if baseline.judge_cache is not None:
        scratch = Path(tempfile.mkdtemp(prefix="evalgate-base-cache-"))
        target = scratch / CACHE_FILE
        target.write_bytes(baseline.judge_cache)
        return Restored(BaseCache(target, label), _scratch=scratch)
    if baseline.judge_cache_file is not None:
        return Restored(BaseCache(baseline.judge_cache_file, label))
    return Restored(notice=f"judge cache: the baseline ({label}) carries no {CACHE_FILE}; every verdict is judged "
                           "(base runs upload it with their results artifact)")


def _from_path(choice: str, cwd: Path | None) -> Restored:
    path = Path(choice).expanduser()
    if not path.is_absolute() and cwd is not None:
        path = cwd / path
    file = path / CACHE_FILE if path.is_dir() else path
    if not file.is_file():
        return Restored(notice=f"judge cache {choice}: no such file; every verdict is judged")
    try:
        with file.open("rb") as handle:
            header = handle.read(len(SQLITE_HEADER))
    except OSError as exc:
        return Restored(notice=f"judge cache {choice}: cannot be read ({exc.strerror}); every verdict is judged")
    if header != SQLITE_HEADER:
        return Restored(notice=f"judge cache {choice}: not a SQLite file; every verdict is judged")
    return Restored(BaseCache(file, choice))


def add_reuse(summary: dict[str, Any], judge: Any) -> None:
    """``summary.judge_calls.base_cache``: what the restored base cache saved (``JudgeClient.reuse``)."""
    reuse = judge.reuse() if judge is not None and hasattr(judge, "reuse") else None
    if reuse is None:
        return
    summary.setdefault("judge_calls", {"made": 0, "cached": 0, "cost_usd": 0.0})["base_cache"] = reuse
