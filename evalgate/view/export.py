"""``evalgate view --export DIR``: the viewer's pages as a self-contained static site (no script, no network:
every page is one HTML file with inline CSS and inline SVG; links are sibling file names).

Written: the runs page (``index.html``), trends, flaky cases, and every page those link to, breadth first:
each run (its first page of failed and errored cases), the cases listed there, the comparison of each run with
the previous run of its branch and the flipped cases it names — at most ``max_pages`` pages (the rest stays
in the live viewer).
"""

from __future__ import annotations

from pathlib import Path

from evalgate.errors import UserError
from evalgate.view import pages
from evalgate.view.sources import Catalog

MAX_PAGES = 2_000


def export_site(catalog: Catalog, directory: Path, *, max_pages: int = MAX_PAGES) -> int:
    """Write the site into ``directory`` (created); returns the number of pages written. Links are counted as
    they are made: the first ``max_pages`` linked pages are written, later links point to one page saying the
    rest is in the live viewer (``FileLinks.BEYOND``)."""
    links = pages.FileLinks(max(3, max_pages))
    links.runs()
    links.trends()
    links.flaky()
    written: set[str] = set()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create ({exc.strerror})", where=str(directory)) from None
    while pending := [name for name in links.wanted if name not in written]:
        for name in pending:
            kind, params = links.wanted[name]
            written.add(name)
            try:
                html = pages.PAGES[kind](catalog, links, params)
            except pages.NotFound as exc:
                html = pages.render("error.html.j2", links=links, page="", title="Not found", message=str(exc))
            _write(directory / name, html)
    if links.beyond:
        _write(directory / links.BEYOND, pages.render(
            "error.html.j2", links=links, page="", title="Not in this export",
            message=f"This export holds {len(written)} pages; open the results with evalgate view to see the rest."))
    return len(written)


def _write(target: Path, html: str) -> None:
    try:
        target.write_text(html, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write ({exc.strerror})", where=str(target)) from None
