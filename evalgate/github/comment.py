"""Create or update evalgate's single PR comment (issue-comment REST endpoints), race-safe.

The comment is found by its hidden first line ``<!-- evalgate:comment tag=<tag> -->``; its second line
``<!-- evalgate:run head=<sha> at=<time> -->`` (the :class:`Stamp`) records the pull request head that
was evaluated and when the run started. Two runs on one pull request may publish at the same moment,
and GitHub has no conditional write, so every run converges on one truthful comment:

1. list the marked comments (``per_page=100``, following ``Link: rel="next"``); none → create one (at
   most once per call);
2. **oldest wins**: the lowest id is kept, every other marked comment is deleted;
3. the kept comment shows the **freshest** report among the kept one, the deleted ones and this run's:
   a report for the pull request's current head (``GET /pulls/{n}``) beats one for an older head, then
   the later run time wins; a report without a stamp is the oldest. A run never overwrites a comment
   written for a newer head or by a later run of the same head (``skipped``, with the reason);
4. after any write, wait ``settle`` seconds and start again at 1 (at most ``MAX_ROUNDS``), so a write
   by a concurrent stale run, or a duplicate it created, is undone by the fresher run.

Distinct tags keep distinct comments. Failures (403 from a read-only fork token, 404, network) never
raise: the result says ``failed`` and carries a one-line warning for the caller to print as ``::warning``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from evalgate.github.api import GitHubAPI, GitHubAPIError
from evalgate.report.escape import cut_utf16, utf16_len
from evalgate.report.markdown import comment_marker
from evalgate.safety.redact import redact

MAX_COMMENT_CHARS = 65536
TRUNCATION_NOTE = "\n\n… comment truncated by evalgate ({omitted} characters omitted); see the job summary.\n"
SETTLE_SECONDS = 1.0
"""Wait after a write before checking that no concurrent run wrote too (a GET and a PATCH take ≈ 0.2 s)."""
MAX_ROUNDS = 4
STAMP_RE = re.compile(r"^<!-- evalgate:run head=([0-9a-f]{0,64}) at=([0-9TZ:.+-]{0,40}) -->$")

Action = Literal["created", "updated", "skipped", "failed"]


@dataclass(frozen=True)
class CommentResult:
    """Outcome of ``upsert_comment``; ``warning`` is set for ``failed`` (and explains ``skipped``)."""

    action: Action
    url: str | None = None
    warning: str | None = None
    comment_id: int | None = None
    removed: int = 0
    """Duplicate comments deleted (left by concurrent runs)."""


@dataclass(frozen=True)
class Stamp:
    """What a comment reports on: the evaluated pull request head SHA and the run's start (ISO 8601 UTC)."""

    head: str = ""
    at: str = ""

    def line(self) -> str:
        return f"<!-- evalgate:run head={_hex(self.head)} at={_time(self.at)} -->"


def upsert_comment(api: GitHubAPI, repo: str, pr_number: int | None, body: str, tag: str, *,
                   stamp: Stamp | None = None, settle: float | None = None,
                   sleep: Callable[[float], None] | None = None) -> CommentResult:
    """Create evalgate's comment on ``repo`` PR ``pr_number``, or edit the one for ``tag`` (module docstring)."""
    if not pr_number:
        return CommentResult("skipped", warning="no pull request number: PR comment skipped")
    if not repo or repo.count("/") != 1:
        return CommentResult("skipped", warning=f"invalid repository {repo!r}: PR comment skipped")
    marker = comment_marker(tag)
    body = enforce_limit(with_stamp(with_marker(body, marker), stamp))
    wait = SETTLE_SECONDS if settle is None else settle
    pause = sleep or api.sleep
    try:
        current_head = pull_head(api, repo, pr_number) if stamp is not None else None
        mine = Candidate(None, body, stamp)
        keeper: dict[str, Any] = {}
        created_id: int | None = None
        wrote_any = False
        shows_mine = False
        removed = 0
        for _ in range(MAX_ROUNDS):
            comments = marked_comments(api, repo, pr_number, marker)
            if not comments:
                if created_id is not None:  # ours is not listed yet (or was removed): never post twice
                    break
                keeper = api.post(f"/repos/{repo}/issues/{pr_number}/comments", {"body": body}) or {}
                created_id, wrote_any, shows_mine = _id(keeper), True, True
                pause(wait)
                continue
            keeper, wrote, deleted, shows_mine = converge(api, repo, comments, mine, current_head)
            removed += deleted
            wrote_any = wrote_any or wrote
            if not (wrote or deleted):
                break
            pause(wait)
        return _outcome(keeper, mine, shows_mine, wrote_any, created_id, current_head, removed)
    except GitHubAPIError as exc:
        return CommentResult("failed", warning=failure_warning(repo, pr_number, exc.status, exc.message))
    except Exception as exc:  # publishing must never crash the run
        return CommentResult("failed", warning=failure_warning(repo, pr_number, None, type(exc).__name__))


@dataclass(frozen=True)
class Candidate:
    """A report that could be shown: a listed comment (``comment``) or this run's (``comment`` None)."""

    comment: dict[str, Any] | None
    body: str
    stamp: Stamp | None


def converge(api: GitHubAPI, repo: str, comments: list[dict[str, Any]], mine: Candidate,
             current_head: str | None) -> tuple[dict[str, Any], bool, int, bool]:
    """Keep the oldest marked comment showing the freshest report; delete the others.

    Returns ``(kept comment, whether it was edited, comments deleted, whether it shows this run's report)``."""
    keeper = comments[0]
    candidates = [Candidate(c, str(c.get("body") or ""), read_stamp(c.get("body"))) for c in comments]
    best = mine
    for candidate in candidates:  # ties go to this run's report
        if fresher(candidate.stamp, best.stamp, current_head):
            best = candidate
    deleted = 0
    for extra in comments[1:]:
        api.delete(f"/repos/{repo}/issues/comments/{extra['id']}")  # 404: a concurrent run deleted it
        deleted += 1
    wrote = False
    if keeper.get("body") != best.body:
        if best is mine:  # re-read just before writing: a concurrent run may have written a fresher one
            latest = api.get(f"/repos/{repo}/issues/comments/{keeper['id']}")
            if isinstance(latest, dict) and fresher(read_stamp(latest.get("body")), mine.stamp, current_head):
                return latest, False, deleted, False
        keeper = api.patch(f"/repos/{repo}/issues/comments/{keeper['id']}", {"body": best.body}) or keeper
        wrote = True
    return keeper, wrote, deleted, best is mine


def fresher(a: Stamp | None, b: Stamp | None, current_head: str | None) -> bool:
    """True when report ``a`` is strictly fresher than ``b``: for the pull request's current head when
    only one of them is, else the later run time; no stamp is the oldest."""
    if a is None:
        return False
    if b is None:
        return True
    if current_head:
        a_current, b_current = a.head == current_head, b.head == current_head
        if a_current != b_current:
            return a_current
    return a.at > b.at


def _outcome(keeper: dict[str, Any], mine: Candidate, shows_mine: bool, wrote: bool, created_id: int | None,
             current_head: str | None, removed: int) -> CommentResult:
    """What happened to this run's report: shown (created, updated, or already there), or not (stale)."""
    if shows_mine:
        action: Action = ("created" if created_id is not None and created_id == _id(keeper)
                          else "updated" if wrote else "skipped")
        return CommentResult(action, url=_url(keeper), comment_id=_id(keeper), removed=removed)
    other = read_stamp(keeper.get("body"))
    newer_head = bool(other and current_head and other.head == current_head
                      and (mine.stamp.head if mine.stamp else "") != current_head)
    why = "it reports the pull request's newer head" if newer_head else "it reports a later run"
    return CommentResult("skipped", url=_url(keeper), comment_id=_id(keeper), removed=removed,
                         warning=f"PR comment left as is: {why} ({other.head[:7] if other else 'unknown'})")


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


def find_marked_comment(api: GitHubAPI, repo: str, pr_number: int, marker: str) -> dict[str, Any] | None:
    """The comment that is kept (the oldest marked one), or None."""
    found = marked_comments(api, repo, pr_number, marker)
    return found[0] if found else None


def read_stamp(body: Any) -> Stamp | None:
    """The :class:`Stamp` on a comment's second line, or None (an older evalgate's comment)."""
    if not isinstance(body, str):
        return None
    lines = body.lstrip("\ufeff \t\r\n").split("\n", 2)
    match = STAMP_RE.match(lines[1].strip()) if len(lines) > 1 else None
    return Stamp(match.group(1), match.group(2)) if match else None


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
