"""Every reference to this action a user copies resolves: each ``uses: …/evalgate…@REF`` in the Markdown pages,
workflows, examples and templates (all of them, by glob, so new pages are covered) names this repository and
a tag the release of the current version creates (``vX`` or ``vX.Y.Z``), and ``evalgate init`` writes one."""

from __future__ import annotations

from pathlib import Path

import yaml

from evalgate import __version__
from evalgate.cli.init import DEFAULT_ACTION, scaffold
from tools import release

ROOT = Path(__file__).resolve().parents[2]


def test_every_reference_in_docs_workflows_and_templates_is_a_tag_the_release_creates() -> None:
    found = list(release.references())
    assert release.reference_problems() == []
    files = {ref.path for ref in found}
    # the places the issue names are all scanned (a glob covers pages added later)
    assert {"README.md", "host/README.md", ".github/workflows/evals-publish.yml", "docs/sharding.md"} <= files
    assert {ref.ref for ref in found} <= set(release.release_tags(__version__))
    assert len(found) >= 10


def test_the_release_creates_the_major_tag_users_write() -> None:
    exact, major = release.release_tags(__version__)
    assert major == "v1" and exact == f"v{__version__}"
    text = (ROOT / ".github" / "workflows" / "release.yml").read_text(encoding="utf-8")
    assert "read -r exact major < <(python -m tools.release tags)" in text
    assert 'push origin "refs/tags/$exact" "+refs/tags/$major"' in text


def test_evalgate_init_writes_a_reference_that_resolves(tmp_path: Path) -> None:
    assert f"{release.REPOSITORY}@{release.release_tags(__version__)[1]}" == DEFAULT_ACTION
    scaffold(tmp_path)
    workflow = yaml.safe_load((tmp_path / ".github" / "workflows" / "evalgate.yml").read_text(encoding="utf-8"))
    assert workflow["jobs"]["evalgate"]["steps"][-1]["uses"] == DEFAULT_ACTION
    (tmp_path / "evalgate").mkdir()
    (tmp_path / "evalgate" / "__init__.py").write_text(f'__version__ = "{__version__}"\n', encoding="utf-8")
    assert [ref.ref for ref in release.references(tmp_path)] == ["v1"]
    assert release.reference_problems(tmp_path) == []


def test_placeholders_unknown_refs_and_missing_sub_actions_are_rejected(tmp_path: Path) -> None:
    (tmp_path / "evalgate").mkdir()
    (tmp_path / "evalgate" / "__init__.py").write_text('__version__ = "1.4.2"\n', encoding="utf-8")
    (tmp_path / "host").mkdir()
    (tmp_path / "host" / "action.yml").write_text("name: host\n", encoding="utf-8")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text(
        "```yaml\n"
        "- uses: org/evalgate@v1\n"              # the placeholder init used to write
        "- uses: evalgate/evalgate@v0\n"         # a tag no release creates
        "- uses: evalgate/evalgate@main\n"       # a branch: moves under the user
        "- uses: evalgate/evalgate/hots@v1\n"    # no such sub-action
        "- uses: evalgate/evalgate/host@v1.4.2\n"
        "- uses: 'evalgate/evalgate@0123456789abcdef0123456789abcdef01234567'\n"
        "```\n", encoding="utf-8")
    (tmp_path / "tmpl.yml.j2").write_text("      - uses: your-org/evalgate@v1 # copied\n", encoding="utf-8")
    problems = release.reference_problems(tmp_path)
    assert sorted(line.split(": ", 1)[0] for line in problems) == [
        "docs/page.md:2", "docs/page.md:3", "docs/page.md:4", "docs/page.md:5", "tmpl.yml.j2:1"]
    text = "\n".join(problems)
    assert "'org' is a placeholder" in text and "'your-org' is a placeholder" in text
    assert "@v0 is not a tag the release creates (v1 or v1.4.2)" in text and "@main is not a tag" in text
    assert "no action at hots/action.yml" in text


def documented_workflows() -> list[tuple[str, dict]]:
    """Every YAML block in the Markdown pages (and the repository's workflows) that is a workflow using
    this action on pull requests."""
    import re

    found = []
    pages = [p for p in release.scanned_files(ROOT) if p.suffix == ".md"]
    for path in pages:
        for block in re.findall(r"```yaml\n(.*?)```", path.read_text(encoding="utf-8"), re.S):
            try:
                document = yaml.safe_load(block)
            except yaml.YAMLError:
                continue
            if isinstance(document, dict) and "jobs" in document:
                found.append((path.relative_to(ROOT).as_posix(), document))
    for path in sorted((ROOT / ".github" / "workflows").glob("*.yml")):
        found.append((path.relative_to(ROOT).as_posix(), yaml.safe_load(path.read_text(encoding="utf-8"))))
    return [(name, doc) for name, doc in found  # YAML 1.1 reads the key `on` as True
            if "pull_request" in (doc.get(True) or doc.get("on") or {}) and "uses: evalgate/evalgate" in yaml.dump(doc)]


def test_documented_pull_request_workflows_run_one_at_a_time_per_pull_request(tmp_path: Path) -> None:
    workflows = documented_workflows()
    names = {name for name, _ in workflows}
    assert {"README.md", "docs/sharding.md", "docs/fork-pull-requests.md", "docs/action-inputs.md"} <= names
    for name, document in workflows:
        group = str((document.get("concurrency") or {}).get("group", ""))
        assert "github.event.pull_request.number" in group, f"{name}: no per-pull-request concurrency group"
    scaffold(tmp_path)
    written = yaml.safe_load((tmp_path / ".github" / "workflows" / "evalgate.yml").read_text(encoding="utf-8"))
    assert "github.event.pull_request.number" in written["concurrency"]["group"]
    assert "merge_group" in written[True]
