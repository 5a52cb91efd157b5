"""Create or update evalgate's single PR comment (issue-comment REST endpoints), race-safe and its own.

The comment is found by its hidden first line ``<!-- evalgate:comment tag=<tag> -->``; its second line
``<!-- evalgate:run head=<sha> at=<time> run=<id>.<attempt> -->`` (the :class:`Stamp`) records the pull
request head that was evaluated, when the run started and which workflow run (attempt) wrote it.

**Only evalgate's own comments count.** A comment is a candidate for editing or deletion only when its
author is the identity evalgate posts as: the ``comment-author`` input when set, else ``GET /user``'s login
(a personal token), else ``github-actions[bot]`` (``GITHUB_TOKEN``, whose ``GET /user`` is forbidden); once
this call has created a comment, the author GitHub recorded on it. Anyone else's comment carrying the marker
(anyone who can comment can write one, with a stamp from the future) is ignored: never read, copied, edited
or deleted.

**Concurrent runs converge without timing.** GitHub has no conditional write, so an in-place edit by a slow
run could land after a fresher run's and hide it; so no run edits a comment another run wrote:

1. a run for a head the pull request has moved past (``GET /pulls/{n}``) writes nothing;
2. it lists its own marked comments (``per_page=100``, following ``Link: rel="next"``); one whose stamp
   is fresher than its own (later run time, then higher run id, then attempt) → it writes nothing; one
   written by the same workflow run attempt (a re-publish) → edited in place;
3. otherwise it creates its own comment;
4. it lists its own comments again and deletes every one but the freshest (stamp order, then the later
   comment id), its own included when it is not the freshest; again until one is left (``MAX_ROUNDS``).

Every run orders comments the same way, and for any two comments, the run that created the later one
lists after both exist and deletes the staler: the freshest comment is never deleted and every other one
is, whatever the write latency (tests/github/test_comment_race.py: writes delayed 0–3 s). The cost: a new run's
report is a new comment (one notification), at the end of the conversation.

Distinct tags keep distinct comments. Failures (403 from a read-only fork token, 404, network) never
raise: the result says ``failed`` and carries a one-line warning for the caller to print as ``::warning``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from evalgate.github.api import GitHubAPI, GitHubAPIError
from evalgate.report.escape import cut_utf16, utf16_len
from evalgate.report.markdown import comment_marker
from evalgate.safety.redact import redact

MAX_COMMENT_CHARS = 65536
TRUNCATION_NOTE = "\n\n… comment truncated by evalgate ({omitted} characters omitted); see the job summary.\n"
MAX_ROUNDS = 4
DEFAULT_AUTHOR = "github-actions[bot]"
"""Who ``GITHUB_TOKEN`` comments as (its ``GET /user`` is forbidden)."""
STAMP_RE = re.compile(r"^<!-- evalgate:run head=([0-9a-f]{0,64}) at=([0-9TZ:.+-]{0,40})"
                      r"(?: run=([0-9]{0,20})\.([0-9]{0,6}))? -->$")

Action = Literal["created", "updated", "skipped", "failed"]


@dataclass(frozen=True)
class CommentResult:
    """Outcome of ``upsert_comment``; ``warning`` is set for ``failed`` (and explains ``skipped``)."""

    action: Action
    url: str | None = None
    warning: str | None = None
    comment_id: int | None = None
    removed: int = 0
    """Older comments of evalgate's deleted (earlier runs', concurrent runs')."""


@dataclass(frozen=True)
class Stamp:
    """What a comment reports on: the evaluated pull request head SHA, the run's start (ISO 8601 UTC) and the
    workflow run ``<run id>.<attempt>`` that wrote it ("" when unknown)."""

    head: str = ""
    at: str = ""
    run: str = ""

    def line(self) -> str:
        run = _run(self.run)
        return f"<!-- evalgate:run head={_hex(self.head)} at={_time(self.at)}" + (f" run={run}" if run else "") + " -->"

    def order(self) -> tuple[str, int, int]:
        """Freshness: the later run time, then the higher run id, then the higher attempt."""
        run_id, _, attempt = _run(self.run).partition(".")
        return (_time(self.at), int(run_id or 0), int(attempt or 0))


def upsert_comment(api: GitHubAPI, repo: str, pr_number: int | None, body: str, tag: str, *,
                   stamp: Stamp | None = None, author: str | None = None) -> CommentResult:
    """Create evalgate's comment on ``repo`` PR ``pr_number`` for ``tag``, or edit this run's (module docstring).
    ``author``: the login evalgate comments as (the ``comment-author`` input), when known."""
    if not pr_number:
        return CommentResult("skipped", warning="no pull request number: PR comment skipped")
    if not repo or repo.count("/") != 1:
        return CommentResult("skipped", warning=f"invalid repository {repo!r}: PR comment skipped")
    marker = comment_marker(tag)
    body = enforce_limit(with_stamp(with_marker(body, marker), stamp))
    try:
        current_head = pull_head(api, repo, pr_number) if stamp is not None else None
        if stamp is not None and stamp.head and current_head and stamp.head != current_head:
            return CommentResult("skipped", warning=f"PR comment not posted: it reports {stamp.head[:7]}, and the "
                                                    f"pull request's head is now {current_head[:7]}")
        login = author or own_login(api)
        ours = own_comments(api, repo, pr_number, marker, login)
        fresher = [c for c in ours if _key(c) > _stamp_key(stamp)]
        if fresher:
            return _stood_back(fresher[-1], 0)
        same_run = [c for c in ours if _same_run(c, stamp)]
        mine: dict[str, Any] | None = None
        action: Action = "created"
        if same_run:  # this workflow run published before: edit its comment in place (no other run edits it)
            mine = max(same_run, key=_key_and_id)
            if mine.get("body") == body:
                action = "skipped"
            else:
                try:
                    mine = api.patch(f"/repos/{repo}/issues/comments/{mine['id']}", {"body": body}) or mine
                    action = "updated"
                except GitHubAPIError as exc:
                    if exc.status != 404:  # 404: deleted by a fresher run meanwhile — create ours below
                        raise
                    mine = None
        if mine is None:
            mine = api.post(f"/repos/{repo}/issues/{pr_number}/comments", {"body": body}) or {}
            action = "created"
        login = _login_of(mine) or login
        kept, removed = converge(api, repo, pr_number, marker, login, mine)
        if kept.get("id") != mine.get("id"):
            return _stood_back(kept, removed)
        return CommentResult(action, url=_url(mine), comment_id=_id(mine), removed=removed)
    except GitHubAPIError as exc:
        return CommentResult("failed", warning=failure_warning(repo, pr_number, exc.status, exc.message))
    except Exception as exc:  # publishing must never crash the run
        return CommentResult("failed", warning=failure_warning(repo, pr_number, None, type(exc).__name__))


def converge(api: GitHubAPI, repo: str, pr_number: int, marker: str, login: str,
             mine: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """Delete every comment of ``login``'s for ``marker`` but the freshest (``_key_and_id``), until one is left.
    ``mine`` (just written) counts even when the listing does not show it yet. Returns (the freshest, deleted)."""
    removed = 0
    best = mine
    gone: set[int] = set()
    for _ in range(MAX_ROUNDS):
        ours = [c for c in own_comments(api, repo, pr_number, marker, login) if _id(c) not in gone]
        if _id(mine) is not None and _id(mine) not in gone and all(_id(c) != _id(mine) for c in ours):
            ours.append(mine)
        best = max(ours, key=_key_and_id)
        stale = [c for c in ours if _id(c) != _id(best)]
        if not stale:
            break
        for comment in stale:
            api.delete(f"/repos/{repo}/issues/comments/{comment['id']}")  # 404: a concurrent run deleted it
            gone.add(int(comment["id"]))
            removed += 1
    return best, removed


def own_login(api: GitHubAPI) -> str:
    """Who this token comments as: ``GET /user``'s login (a personal token), else ``DEFAULT_AUTHOR``."""
    try:
        user = api.get("/user")
    except GitHubAPIError:
        return DEFAULT_AUTHOR
    login = user.get("login") if isinstance(user, dict) else None
    return login if isinstance(login, str) and login else DEFAULT_AUTHOR


def own_comments(api: GitHubAPI, repo: str, pr_number: int, marker: str, login: str) -> list[dict[str, Any]]:
    """The comments ``login`` wrote whose first line is ``marker``, oldest (lowest id) first."""
    return [c for c in marked_comments(api, repo, pr_number, marker) if _login_of(c) == login]


def _login_of(comment: Any) -> str | None:
    user = comment.get("user") if isinstance(comment, dict) else None
    login = user.get("login") if isinstance(user, dict) else None
    return login if isinstance(login, str) and login else None


def _stamp_key(stamp: Stamp | None) -> tuple[int, tuple[str, int, int]]:
    """A comment without a stamp (an older evalgate's) is the stalest."""
    return (0, ("", 0, 0)) if stamp is None else (1, stamp.order())


def _key(comment: dict[str, Any]) -> tuple[int, tuple[str, int, int]]:
    return _stamp_key(read_stamp(comment.get("body")))


def _key_and_id(comment: dict[str, Any]) -> tuple[tuple[int, tuple[str, int, int]], int]:
    return (_key(comment), int(comment.get("id") or 0))


def _same_run(comment: dict[str, Any], stamp: Stamp | None) -> bool:
    """True for a comment written by this workflow run attempt (both unstamped: a caller without a run)."""
    other = read_stamp(comment.get("body"))
    if stamp is None or other is None:
        return stamp is None and other is None
    return bool(_run(stamp.run)) and _run(other.run) == _run(stamp.run)


def _stood_back(kept: dict[str, Any], removed: int) -> CommentResult:
    other = read_stamp(kept.get("body"))
    return CommentResult("skipped", url=_url(kept), comment_id=_id(kept), removed=removed,
                         warning=f"PR comment left as is: it reports a later run ({other.head[:7] if other else 'unknown'})")


def pull_head(api: GitHubAPI, repo: str, pr_number: int) -> str | None:
    """The pull request's current head SHA, or None when it cannot be read (the time rule then decides)."""
    try:
        pull = api.get(f"/repos/{repo}/pulls/{pr_number}")
    except GitHubAPIError:
        return None
    head = pull.get("head") if isinstance(pull, dict) else None
    sha = head.get("sha") if isinstance(head, dict) else None
    return sha if isinstance(sha, str) else None


def marked_comments(api: GitHubAPI, repo: str, pr_number: int, marker: str) -> list[dict[str, Any]]:
    """Every comment whose first line is ``marker``, oldest (lowest id) first."""
    found = [c for c in api.paginate(f"/repos/{repo}/issues/{pr_number}/comments", {"per_page": 100})
             if isinstance(c, dict) and has_marker(c.get("body"), marker)]
    return sorted(found, key=lambda c: int(c["id"]))


def find_marked_comment(api: GitHubAPI, repo: str, pr_number: int, marker: str,
                        author: str | None = None) -> dict[str, Any] | None:
    """evalgate's newest comment for ``marker`` (written by ``author``, else ``own_login``), or None."""
    found = own_comments(api, repo, pr_number, marker, author or own_login(api))
    return max(found, key=_key_and_id) if found else None


def read_stamp(body: Any) -> Stamp | None:
    """The :class:`Stamp` on a comment's second line, or None (an older evalgate's comment)."""
    if not isinstance(body, str):
        return None
    lines = body.lstrip("\ufeff \t\r\n").split("\n", 2)
    match = STAMP_RE.match(lines[1].strip()) if len(lines) > 1 else None
    if not match:
        return None
    return Stamp(match.group(1), match.group(2), f"{match.group(3)}.{match.group(4)}" if match.group(3) else "")


def with_stamp(body: str, stamp: Stamp | None) -> str:
    """``body`` (marker first) with ``stamp``'s line second, replacing any earlier stamp."""
    if stamp is None:
        return body
    first, _, rest = body.partition("\n")
    if read_stamp(body) is not None:
        rest = rest.split("\n", 1)[1] if "\n" in rest else ""
    return f"{first}\n{stamp.line()}\n{rest}"


def _hex(text: str) -> str:
    return "".join(ch for ch in (text or "").lower() if ch in "0123456789abcdef")[:64]


def _time(text: str) -> str:
    return "".join(ch for ch in (text or "") if ch.isdigit() or ch in "TZ:.+-")[:40]


def _run(text: str) -> str:
    """``<run id>.<attempt>`` digits only ("" when there is no run id)."""
    run_id, _, attempt = (text or "").partition(".")
    run_id = "".join(ch for ch in run_id if ch.isdigit())[:20]
    attempt = "".join(ch for ch in attempt if ch.isdigit())[:6] or "1"
    return f"{run_id}.{attempt}" if run_id else ""


def has_marker(body: Any, marker: str) -> bool:
    """True when the first line of ``body`` is exactly ``marker`` (surrounding blanks ignored)."""
    if not isinstance(body, str):
        return False
    first = body.lstrip("\ufeff \t\r\n").split("\n", 1)[0]
    return first.strip() == marker


def with_marker(body: str, marker: str) -> str:
    """``body`` with ``marker`` as its first line (added once)."""
    return body if has_marker(body, marker) else f"{marker}\n{body}"


def enforce_limit(body: str, limit: int = MAX_COMMENT_CHARS) -> str:
    """Last-resort hard cut to ``limit`` characters (UTF-16 code units), with a note at the end."""
    size = utf16_len(body)
    if size <= limit:
        return body
    note = TRUNCATION_NOTE.format(omitted=size)  # an upper bound on the digits needed
    keep = max(0, limit - utf16_len(note))
    cut = cut_utf16(body, keep)
    return cut_utf16(cut + TRUNCATION_NOTE.format(omitted=size - utf16_len(cut)), limit)


def failure_warning(repo: str, pr_number: int, status: int | None, message: str) -> str:
    """One line explaining why the comment could not be written and what to do."""
    if status == 403:
        hint = (
            "the token cannot write comments (fork pull requests get a read-only GITHUB_TOKEN; "
            "otherwise grant `permissions: pull-requests: write`)"
        )
    elif status == 404:
        hint = "pull request not found or not visible to the token"
    elif status is None:
        hint = "network error"
    else:
        hint = f"HTTP {status}"
    text = f"evalgate: could not post the PR comment on {repo}#{pr_number}: {hint}: {message}. "
    return redact(text + "The report is in the job summary and artifacts.")


def _url(comment: Any) -> str | None:
    return comment.get("html_url") if isinstance(comment, dict) else None


def _id(comment: Any) -> int | None:
    return comment.get("id") if isinstance(comment, dict) else None
