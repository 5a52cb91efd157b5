"""What the workspace has checked out, and whether its code may run.

``checked_out_commit`` reads the commit from the workspace's ``.git`` (a detached ``HEAD``, a branch ref,
``packed-refs``; a ``.git`` file pointing elsewhere), without running git. Comment and summary links use
it: the commit that was evaluated (``ActionContext.evaluated_sha``).

Under ``pull_request_target`` and ``workflow_run`` the workflow runs with the base repository's secrets and a
write token. When other code than the base commit is checked out (the pull request's), running it (``command``
targets, ``package.module:attr`` and ``file://`` metrics or targets, a ``comment-template``) would hand both to
whoever opened the pull request, so the Action refuses unless the ``allow-pr-code`` input says the pull request
is trusted; and the checkout's files may not choose where a secret is sent (``secrets_reason``,
``config.trust.refuse_checkout_redirects``). A workflow marks any other run so with ``untrusted-checkout: true``
(the CLI: ``EVALGATE_UNTRUSTED_CHECKOUT=true``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from evalgate.config.trust import marked_untrusted
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


SECRET_EVENTS = ("pull_request_target", "workflow_run")
"""Events whose workflow holds the base repository's secrets and write token whatever code it checks out."""


def untrusted_checkout(ctx: ActionContext, evaluated: str | None, *, marked: bool = False) -> str | None:
    """Why code from the workspace must not run (``pull_request_target`` or ``workflow_run`` with anything but
    the base commit checked out, or ``marked`` by the workflow's ``untrusted-checkout: true``), or None."""
    what = untrusted_what(ctx, evaluated, marked=marked)
    if what is None:
        return None
    return (f"{what}: this workflow holds the base repository's secrets "
            "and write token, so evalgate runs no code from the checkout (command targets, package.module:attr "
            "and file:// metrics or targets, comment-template); set the input allow-pr-code: true only for "
            "pull requests you trust (docs/fork-pull-requests.md)")


def secrets_reason(ctx: ActionContext, evaluated: str | None, *, marked: bool = False) -> str | None:
    """Why the checkout's files may not choose where a secret is sent (``config.trust.refuse_checkout_redirects``),
    or None: the same runs as ``untrusted_checkout``."""
    what = untrusted_what(ctx, evaluated, marked=marked)
    return None if what is None else f"{what}: only the workflow chooses where its secrets are sent"


def untrusted_what(ctx: ActionContext, evaluated: str | None, *, marked: bool = False) -> str | None:
    """``pull_request_target with the pull request's head checked out`` (what makes the checkout untrusted), or
    None for a checkout of the base commit, another event, and no mark."""
    event = ctx.event_name or ""
    if event in SECRET_EVENTS and not (evaluated and evaluated == ctx.sha):
        if evaluated and evaluated == ctx.head_sha:
            what = "the pull request's head"
        elif evaluated:
            what = f"commit {evaluated[:12]} (not the base branch's {(ctx.sha or '?')[:12]})"
        else:
            what = "files whose commit cannot be read (no .git in the workspace)"
        return f"{event} with {what} checked out"
    if marked:
        return "the workflow marks this checkout untrusted (untrusted-checkout: true)"
    return None


def env_secrets_reason(env: Mapping[str, str], workspace: Path) -> str | None:
    """``secrets_reason`` for the CLI inside a workflow step: the event and ``GITHUB_SHA`` from the environment,
    the checked-out commit from ``workspace``, the mark from ``EVALGATE_UNTRUSTED_CHECKOUT`` (true)."""
    marked = marked_untrusted(env)
    in_actions = env.get("GITHUB_ACTIONS", "").strip().lower() == "true"
    ctx = ActionContext(event_name=env.get("GITHUB_EVENT_NAME") if in_actions else None, sha=env.get("GITHUB_SHA"))
    if not marked and ctx.event_name not in SECRET_EVENTS:
        return None
    reason = secrets_reason(ctx, checked_out_commit(workspace), marked=marked)
    return reason.replace("(untrusted-checkout: true)", "(EVALGATE_UNTRUSTED_CHECKOUT)") if reason else None
