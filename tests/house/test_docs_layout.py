"""The documentation is one page per topic: every page is in the mkdocs nav (no orphan), no two pages share a
title, every relative link names a file that exists (and, with an anchor, a heading of that page), and the
generated reference pages are what ``tools.docs_reference`` makes from the code."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tests.support.docs import nav_pages
from tools import docs_reference

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)


def pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def prose(page: Path) -> str:
    """The page without its fenced code blocks (a ``# comment`` in a YAML block is not a heading)."""
    return FENCE.sub("", page.read_text(encoding="utf-8"))


def slug(heading: str) -> str:
    """Python-Markdown's toc slug: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\s-]", "", heading.strip().lower())
    return re.sub(r"[-\s]+", "-", text).strip("-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6} (.+?)\s*$", prose(page), re.M):
        base = slug(re.sub(r"`", "", heading))
        name, n = base, 0
        while name in found:
            n += 1
            name = f"{base}_{n}"
        found.add(name)
    text = page.read_text(encoding="utf-8")
    found.update(re.findall(r'<a (?:id|name)="([^"]+)"', text))  # explicit anchors
    found.update(re.findall(r"\{[^}]*#([\w-]+)[^}]*\}", text))  # attr_list: ## Heading {#id}
    return found


def test_every_page_is_in_the_nav_once_and_every_nav_entry_exists() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = nav_pages(yaml.safe_load("nav:" + config.split("\nnav:", 1)[1])["nav"])
    on_disk = [str(p.relative_to(DOCS)) for p in pages()]
    orphans = sorted(set(on_disk) - set(nav))
    missing = sorted(set(nav) - set(on_disk))
    assert orphans == [], f"pages in docs/ but not in mkdocs.yml's nav: {orphans}"
    assert missing == [], f"nav entries without a page: {missing}"
    assert len(nav) == len(set(nav)), "a page is listed twice in the nav"


def test_no_two_pages_share_a_title() -> None:
    titles: dict[str, list[str]] = {}
    for page in pages():
        first = re.search(r"^# (.+?)\s*$", prose(page), re.M)
        assert first, f"{page.relative_to(ROOT)} has no '# title'"
        titles.setdefault(first.group(1).strip().lower(), []).append(str(page.relative_to(DOCS)))
    shared = {title: where for title, where in titles.items() if len(where) > 1}
    assert shared == {}


def test_every_relative_link_names_an_existing_page_and_heading() -> None:
    broken = []
    sources = [*pages(), ROOT / "README.md", *sorted((ROOT / "examples").glob("*/README.md")),
               ROOT / "host" / "README.md"]
    for page in sources:
        for target in LINK.findall(prose(page)):
            if re.match(r"^[a-z]+:", target):
                continue  # http(s), mailto: not a file
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            if not resolved.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and resolved.suffix == ".md" and resolved.is_relative_to(DOCS) \
                    and anchor not in anchors(resolved):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert broken == []


def test_docs_paths_cited_in_code_and_tests_exist() -> None:
    """A ``docs/x.md`` named in a message, docstring, template, test or tool is a page that exists."""
    cited: set[tuple[str, str]] = set()
    for folder in ("evalgate", "tools", "tests", "bench", "host", "examples", "datasets", "entrypoint"):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in {".py", ".j2", ".sh", ".yaml", ".yml", ".json", ".md", ".toml"} \
                    and "node_modules" not in path.parts:
                text = path.read_text(encoding="utf-8", errors="replace")
                cited.update((str(path.relative_to(ROOT)), m) for m in re.findall(r"\bdocs/([\w/-]+\.md)", text))
    cited.update(("action.yml", m) for m in re.findall(r"\bdocs/([\w/-]+\.md)",
                                                        (ROOT / "action.yml").read_text(encoding="utf-8")))
    for path in (ROOT / "evalgate").rglob("*"):  # site links: DOCS_SITE + "page/" is docs/page.md
        if path.is_file() and path.suffix in {".py", ".j2"}:
            text = path.read_text(encoding="utf-8")
            for link in re.findall(r"(?:DOCS_SITE\}|\{\{ *docs *\}\}|evalgate\.github\.io/evalgate/)([\w/-]+)/", text):
                cited.add((str(path.relative_to(ROOT)), f"{link}.md"))
    examples = {"a/b.md", "x.md", "page.md"}  # placeholders: errors.py (docs path → site URL), a test's sample
    missing = sorted(f"{where}: docs/{page}" for where, page in cited
                     if page not in examples and not (DOCS / page).is_file())
    assert missing == []


SECTION = re.compile(r'docs/([\w/-]+\.md),? \(?\\?"([^"\\]+)\\?"')


def test_a_section_cited_by_name_is_on_the_page_cited() -> None:
    """``docs/judge-calibration.md, "Calibration"`` in a message, comment or test names a heading (or a bold paragraph
    lead) of that page, so a reader sent there finds it."""
    headings: dict[str, list[str]] = {}
    wrong = []
    for folder in ("evalgate", "tools", "tests", "bench", "examples", "datasets", "docs"):
        for path in (ROOT / folder).rglob("*"):
            if not path.is_file() or path.suffix not in {".py", ".j2", ".sh", ".yaml", ".yml", ".md"} \
                    or "node_modules" in path.parts:
                continue
            for page, section in SECTION.findall(path.read_text(encoding="utf-8", errors="replace")):
                if page not in headings:
                    target = DOCS / page
                    text = prose(target) if target.is_file() else ""
                    titles = [*re.findall(r"^#+ (.+)$", text, re.M), *re.findall(r"^\*\*(.+?)\*\*", text, re.M)]
                    headings[page] = [" ".join(re.sub(r"[`*]", "", h).lower().split()) for h in titles]
                wanted = " ".join(re.sub(r"[`#]", "", section).lower().split())
                if not any(h.startswith(wanted) or wanted in h for h in headings[page]):
                    wrong.append(f"{path.relative_to(ROOT)}: docs/{page}, {section!r}")
    assert wrong == []


def test_the_generated_reference_pages_match_the_generator() -> None:
    assert docs_reference.stale_pages() == [], "run: python -m tools.docs_reference"
    for relative in docs_reference.PAGES:
        assert (ROOT / relative).read_text(encoding="utf-8").startswith("<!-- generated by")
