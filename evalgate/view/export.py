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
    """Write the site into ``directory`` (created); returns the number of pages written."""
    links = pages.FileLinks()
    links.runs()
    links.trends()
    links.flaky()
    written: set[str] = set()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create ({exc.strerror})", where=str(directory)) from None
    while len(written) < max_pages:
        pending = [name for name in links.wanted if name not in written]
        if not pending:
            break
        for name in pending[: max_pages - len(written)]:
            kind, params = links.wanted[name]
            written.add(name)
            try:
                html = pages.PAGES[kind](catalog, links, params)
            except pages.NotFound as exc:
                html = pages.render("error.html.j2", links=links, page="", title="Not found", message=str(exc))
            target = directory / name
            try:
                target.write_text(html, encoding="utf-8")
            except OSError as exc:
                raise UserError(f"cannot write ({exc.strerror})", where=str(target)) from None
    for name in links.wanted:  # a link beyond the cap: a page saying so, never a broken link
        if name not in written:
            (directory / name).write_text(pages.render(
                "error.html.j2", links=links, page="", title="Not in this export",
                message=f"This export holds {max_pages} pages; open the results with evalgate view to see this one."),
                encoding="utf-8")
    return len(written)
