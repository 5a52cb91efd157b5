"""What the workspace has checked out, and whether its code may run.

``checked_out_commit`` reads the commit from the workspace's ``.git`` (a detached ``HEAD``, a branch ref,
``packed-refs``; a ``.git`` file pointing elsewhere), without running git. Comment and summary links use
it: the commit that was evaluated (``ActionContext.evaluated_sha``).

Under ``pull_request_target`` the workflow runs with the base repository's secrets and a write token. When
the pull request's code is checked out, running it (``command`` targets, ``package.module:attr`` and
``file://`` metrics or targets, a ``comment-template``) would hand both to whoever opened the pull request,
so the Action refuses unless the ``allow-pr-code`` input says the pull request is trusted.
"""

from __future__ import annotations

import re
from pathlib import Path

from evalgate.github.context import ActionContext

SHA_RE = re.compile(r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")


def checked_out_commit(workspace: Path) -> str | None:
    """The commit ``HEAD`` names in ``workspace/.git``, or None (no repository, unreadable, unborn branch)."""
    git = workspace / ".git"
    try:
        if git.is_file():  # a worktree or submodule: "gitdir: <path>"
            pointer = git.read_text(encoding="utf-8").strip()
            if not pointer.startswith("gitdir:"):
                return None
            git = (workspace / pointer.removeprefix("gitdir:").strip()).resolve()
        head = (git / "HEAD").read_text(encoding="utf-8").strip()
        if SHA_RE.match(head):
            return head
        if not head.startswith("ref: "):
            return None
        ref = head.removeprefix("ref: ").strip()
        common = git
        if (git / "commondir").is_file():
            common = (git / (git / "commondir").read_text(encoding="utf-8").strip()).resolve()
        for base in (git, common):
            loose = base / ref
            if loose.is_file():
                value = loose.read_text(encoding="utf-8").strip()
                return value if SHA_RE.match(value) else None
        packed = common / "packed-refs"
        if packed.is_file():
            for line in packed.read_text(encoding="utf-8").splitlines():
                sha, _, name = line.partition(" ")
                if name.strip() == ref and SHA_RE.match(sha):
                    return sha
    except (OSError, UnicodeDecodeError):
        return None
    return None


def untrusted_checkout(ctx: ActionContext, evaluated: str | None) -> str | None:
    """Why code from the workspace must not run (``pull_request_target`` with anything but the base commit
    checked out), or None."""
    if ctx.event_name != "pull_request_target" or (evaluated and evaluated == ctx.sha):
        return None
    if evaluated and evaluated == ctx.head_sha:
        what = "the pull request's head"
    elif evaluated:
        what = f"commit {evaluated[:12]} (not the base branch's {(ctx.sha or '?')[:12]})"
    else:
        what = "files whose commit cannot be read (no .git in the workspace)"
    return (f"pull_request_target with {what} checked out: this workflow holds the base repository's secrets "
            "and write token, so evalgate runs no code from the checkout (command targets, package.module:attr "
            "and file:// metrics or targets, comment-template); set the input allow-pr-code: true only for "
            "pull requests you trust (docs/fork-pull-requests.md)")
