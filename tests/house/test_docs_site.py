"""The documentation site: generated reference pages match the code, every page is in the nav, the README
stays a first screen (≤ 15 KB) whose example dataset validates, and — with mkdocs installed (the ``docs``
extra; .ci/run installs it) — the site builds in strict mode, where a broken link or anchor fails."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from evalgate.cli.main import main as cli_main
from tests.support.docs import nav_pages
from tools import docs_reference

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def test_the_generated_reference_pages_match_the_code() -> None:
    assert docs_reference.main(["--check"]) == 0, "run: python -m tools.docs_reference"
    metrics = (DOCS / "reference" / "metrics.md").read_text(encoding="utf-8")
    assert "| `mrr` | retrieval | deterministic | informational | the case has expected_sources" in metrics
    assert "`hit_rate` > 0.8, `mrr` > 0.7" in metrics  # seed 000's dialect thresholds
    settings = (DOCS / "reference" / "settings.md").read_text(encoding="utf-8")
    assert "| `judge_provider` |" in settings and "`EVALGATE_JUDGE_PROVIDER`" in settings


def test_every_page_is_in_the_nav_and_every_nav_entry_exists() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    listed = nav_pages(config["nav"])
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(set(listed)) == pages
    assert len(listed) == len(set(listed))


def test_the_readme_is_a_first_screen_and_its_dataset_validates(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.encode()) <= 15_000
    assert "pip install evalgate " not in readme and "evalgate-action" in readme
    blocks = re.findall(r"```(\w+)\n(.*?)```", readme, re.S)
    assert blocks[0][0] == "bash" and len(blocks[0][1].strip().splitlines()) == 2  # exactly the two commands
    workflow = next(body for kind, body in blocks if kind == "yaml" and "uses: evalgate/evalgate@v1" in body)
    assert len(workflow.strip().splitlines()) <= 12 and yaml.safe_load(workflow)["jobs"]
    dataset = next(body for kind, body in blocks if kind == "yaml" and "cases:" in body)
    assert len(dataset.strip().splitlines()) <= 22
    (tmp_path / "helpdesk.yaml").write_text(dataset, encoding="utf-8")
    assert cli_main(["validate", "-d", str(tmp_path / "helpdesk.yaml"), "--explain"]) == 0
    explained = capsys.readouterr().out
    assert "correctness" in explained and "keyword_coverage" in explained


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None,
                    reason="mkdocs-material not installed (pip install -e '.[docs]'; .ci/run installs it)")
def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir",
                            str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True, timeout=300,
                           env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert built.returncode == 0, built.stdout + built.stderr
    assert (tmp_path / "site" / "tutorial" / "index.html").is_file()


def test_the_generic_docs_carry_no_seed_domain_words() -> None:
    """One in-house framework's domain (fantasy basketball) belongs to its migration notes only."""
    words = re.compile(r"FanVise|fantasy|Giannis|basketball")
    pages = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
    found = [str(page.relative_to(ROOT)) for page in pages
             if page.name != "migrating.md" and words.search(page.read_text(encoding="utf-8"))]
    assert found == []
