"""GitHub REST conventions shared by the loopback GitHub fakes (``github_fake``, ``github_artifacts_fake``):
error bodies shaped like api.github.com's, and ``per_page`` / ``page`` pagination."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

DEFAULT_PER_PAGE = 30
MAX_PER_PAGE = 100

Reply = tuple[int, Any, dict[str, str]]
"""What a fake's ``handle`` returns: status, JSON body, extra headers."""


def error_reply(status: int, message: str, docs: str, *, with_status: bool = False) -> Reply:
    """``{"message", "documentation_url"}`` (plus ``"status": "<status>"`` when asked), no extra headers."""
    body: dict[str, Any] = {"message": message, "documentation_url": docs}
    if with_status:
        body["status"] = str(status)
    return status, body, {}


def not_found(docs: str) -> Reply:
    """GitHub's 404 for an unknown route or object."""
    return error_reply(404, "Not Found", docs, with_status=True)


def bad_credentials(docs: str) -> Reply:
    """GitHub's 401 for a wrong or missing token."""
    return error_reply(401, "Bad credentials", docs)


def not_accessible(docs: str) -> Reply:
    """GitHub's 403 for a token without the permission (e.g. a fork PR's read-only token)."""
    return error_reply(403, "Resource not accessible by integration", docs, with_status=True)


def query_int(query: Mapping[str, list[str]], key: str, default: int) -> int:
    """The first value of ``key`` in a ``parse_qs`` query when it is all digits, else ``default``."""
    values = query.get(key)
    return int(values[0]) if values and values[0].isdigit() else default


class Page(NamedTuple):
    """One page of a listing: its items, the page size and number, and the number of the last page."""

    items: list[Any]
    per_page: int
    page: int
    last: int


def paginate(items: Sequence[Any], query: Mapping[str, list[str]]) -> Page:
    """Page ``page`` (≥ 1) of ``items`` at ``per_page`` (default 30, clamped to 1–100) items a page;
    last = max(1, ⌈len(items) / per_page⌉); a page past the last is empty."""
    per_page = min(max(query_int(query, "per_page", DEFAULT_PER_PAGE), 1), MAX_PER_PAGE)
    page = max(query_int(query, "page", 1), 1)
    last = max(1, -(-len(items) // per_page))
    return Page(list(items[(page - 1) * per_page: page * per_page]), per_page, page, last)
