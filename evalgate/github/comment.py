"""Create or update evalgate's single PR comment (issue-comment REST endpoints).

The comment is found by its hidden first line ``<!-- evalgate:comment tag=<tag> -->``: all existing
comments are listed (``per_page=100``, following ``Link: rel="next"``); the newest marked one is
updated (PATCH), otherwise one is created (POST). Distinct tags keep distinct comments. Failures
(403 from a read-only fork token, 404, network) never raise: the result says ``failed`` and carries
a one-line warning for the caller to print as ``::warning``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from evalgate.github.api import GitHubAPI, GitHubAPIError
from evalgate.report.escape import cut_utf16, utf16_len
from evalgate.report.markdown import comment_marker
from evalgate.safety.redact import redact

MAX_COMMENT_CHARS = 65536
TRUNCATION_NOTE = "\n\n… comment truncated by evalgate ({omitted} characters omitted); see the job summary.\n"

Action = Literal["created", "updated", "skipped", "failed"]


@dataclass(frozen=True)
class CommentResult:
    """Outcome of ``upsert_comment``; ``warning`` is set for ``failed`` (and explains ``skipped``)."""

    action: Action
    url: str | None = None
    warning: str | None = None
    comment_id: int | None = None


def upsert_comment(api: GitHubAPI, repo: str, pr_number: int | None, body: str, tag: str) -> CommentResult:
    """Create evalgate's comment on ``repo`` PR ``pr_number``, or edit the existing one for ``tag``."""
    if not pr_number:
        return CommentResult("skipped", warning="no pull request number: PR comment skipped")
    if not repo or repo.count("/") != 1:
        return CommentResult("skipped", warning=f"invalid repository {repo!r}: PR comment skipped")
    marker = comment_marker(tag)
    body = enforce_limit(with_marker(body, marker))
    try:
        existing = find_marked_comment(api, repo, pr_number, marker)
        if existing is None:
            created = api.post(f"/repos/{repo}/issues/{pr_number}/comments", {"body": body})
            return CommentResult("created", url=_url(created), comment_id=_id(created))
        if existing.get("body") == body:
            return CommentResult("skipped", url=_url(existing), comment_id=_id(existing), warning=None)
        updated = api.patch(f"/repos/{repo}/issues/comments/{existing['id']}", {"body": body})
        return CommentResult("updated", url=_url(updated), comment_id=_id(updated))
    except GitHubAPIError as exc:
        return CommentResult("failed", warning=failure_warning(repo, pr_number, exc.status, exc.message))
    except Exception as exc:  # publishing must never crash the run
        return CommentResult("failed", warning=failure_warning(repo, pr_number, None, type(exc).__name__))


def find_marked_comment(api: GitHubAPI, repo: str, pr_number: int, marker: str) -> dict[str, Any] | None:
    """The newest (highest id) comment whose first line is ``marker``, or None."""
    newest: dict[str, Any] | None = None
    for comment in api.paginate(f"/repos/{repo}/issues/{pr_number}/comments", {"per_page": 100}):
        marked = isinstance(comment, dict) and has_marker(comment.get("body"), marker)
        if marked and (newest is None or int(comment["id"]) > int(newest["id"])):
            newest = comment
    return newest


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
