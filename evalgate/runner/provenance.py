"""Where a run came from, for ``metadata.git`` (the runs page of ``evalgate view`` lists branch and commit).

In GitHub Actions: the pull request's head branch (``GITHUB_HEAD_REF``) or the pushed ref's name
(``GITHUB_REF_NAME``), and ``GITHUB_SHA``. Elsewhere the checkout in the working directory (or above it) is
read from ``.git/HEAD`` — no subprocess, no ``git`` needed; a detached HEAD has a commit and no branch.
Nothing here ever fails a run: unreadable or absent, the fields are left out.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from pathlib import Path

MAX_REF = 200


def git_identity(env: Mapping[str, str], cwd: Path | None = None) -> dict[str, str]:
    """``{branch, commit}`` (either may be missing) from the Actions variables, else the local checkout."""
    branch = env.get("GITHUB_HEAD_REF") or env.get("GITHUB_REF_NAME") or ""
    commit = env.get("GITHUB_SHA") or ""
    if not branch and not commit:
        branch, commit = _local_checkout(cwd or Path.cwd())
    found = {"branch": branch[:MAX_REF], "commit": commit[:MAX_REF]}
    return {key: value for key, value in found.items() if value}


def _local_checkout(start: Path) -> tuple[str, str]:
    try:
        for folder in (start, *start.parents):
            dot = folder / ".git"
            if dot.is_file():  # a worktree or submodule: "gitdir: PATH"
                text = dot.read_text(encoding="utf-8", errors="replace").strip()
                if not text.startswith("gitdir:"):
                    return "", ""
                gitdir = (folder / text.removeprefix("gitdir:").strip()).resolve()
                return _read_head(gitdir)
            if dot.is_dir():
                return _read_head(dot)
    except OSError:
        pass
    return "", ""


def _read_head(gitdir: Path) -> tuple[str, str]:
    head = (gitdir / "HEAD").read_text(encoding="utf-8", errors="replace").strip()
    if not head.startswith("ref:"):
        return "", head
    ref = head.removeprefix("ref:").strip()
    branch = ref.removeprefix("refs/heads/")
    common = gitdir
    commondir = gitdir / "commondir"
    if commondir.is_file():
        common = (gitdir / commondir.read_text(encoding="utf-8").strip()).resolve()
    for root in (gitdir, common):
        loose = root / ref
        if loose.is_file():
            return branch, loose.read_text(encoding="utf-8", errors="replace").strip()
    packed = common / "packed-refs"
    if packed.is_file():
        for line in packed.read_text(encoding="utf-8", errors="replace").splitlines():
            sha, _, name = line.partition(" ")
            if name == ref:
                return branch, sha
    return branch, ""


def finished_at() -> str:
    """Now, UTC, as results.json writes times (``2026-11-28T12:00:00Z``): ``metadata.finished``."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def provenance(env: Mapping[str, str]) -> dict[str, object]:
    """``{"git": {...}, "finished": ...}`` for ``metadata`` (git left out when nothing is known); ``env``: the
    run's environment (``Settings.environment``, read at the edge)."""
    identity = git_identity(env)
    return ({"git": identity} if identity else {}) | {"finished": finished_at()}
