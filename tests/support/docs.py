"""The documentation site's configuration as the tests read it."""

from __future__ import annotations

from typing import Any


def nav_pages(items: Any) -> list[str]:
    """The pages of an mkdocs ``nav`` (a page, a list, or titled sections, nested), in order."""
    if isinstance(items, str):
        return [items]
    if isinstance(items, list):
        return [page for item in items for page in nav_pages(item)]
    if isinstance(items, dict):
        return [page for value in items.values() for page in nav_pages(value)]
    return []
