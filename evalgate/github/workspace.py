"""Files the action writes into the workspace belong to the workspace's owner.

A Docker action runs as root (GitHub's guidance: no ``USER``), while the runner's own steps run as the
runner user (uid 1001 on GitHub-hosted runners, any uid on self-hosted ones). Files left root-owned
with mode 0755 break a later step that writes or deletes them (``Permission denied``) and the next
job's checkout clean-up on a self-hosted runner. So after the run, when evalgate runs as root and the
workspace belongs to someone else, everything it created under the workspace — the output directory
tree, the SQLite file and judge cache, and any parent directories it had to create — is handed to
the uid:gid of ``GITHUB_WORKSPACE`` (``os.chown``, symlinks not followed). Paths outside the workspace
and files that existed before the run are left alone.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path


def missing_ancestors(paths: Iterable[Path], workspace: Path) -> list[Path]:
    """Directories between ``workspace`` and each path that do not exist yet (the run will create them)."""
    root = workspace.resolve()
    found: list[Path] = []
    for path in paths:
        current = path.resolve() if path.is_absolute() else (root / path).resolve()
        chain = [current, *current.parents]
        for directory in chain:
            if directory == root or root not in directory.parents:
                break
            if not directory.exists() and directory not in found:
                found.append(directory)
    return found


def owner_of(workspace: Path) -> tuple[int, int] | None:
    """``(uid, gid)`` to hand files to: the workspace's, when this process is root and they differ."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None
    try:
        info = workspace.stat()
    except OSError:
        return None
    if (info.st_uid, info.st_gid) == (0, 0):
        return None
    return info.st_uid, info.st_gid


def _tree(path: Path) -> Iterator[Path]:
    yield path
    if path.is_dir() and not path.is_symlink():
        for base, dirs, files in os.walk(path):
            for name in (*dirs, *files):
                yield Path(base) / name


def hand_over(paths: Iterable[Path], workspace: Path, created: Iterable[Path] = ()) -> int:
    """Give ``paths`` (recursively) and ``created`` directories that lie inside ``workspace`` to its
    owner; returns how many entries changed owner. Errors on single files are skipped."""
    owner = owner_of(workspace)
    if owner is None:
        return 0
    root = workspace.resolve()
    changed = 0
    seen: set[Path] = set()
    for start in [*created, *paths]:
        start = Path(start)
        if not start.exists() or (start.resolve() != root and root not in start.resolve().parents):
            continue
        for entry in _tree(start):
            if entry in seen:
                continue
            seen.add(entry)
            try:
                info = entry.lstat()
                if (info.st_uid, info.st_gid) != owner:
                    os.chown(entry, *owner, follow_symlinks=False)
                    changed += 1
            except OSError:
                continue
    return changed
