"""Workflow hygiene, checked on everything a user copies (tests/support/workflow_blocks.py): the README's and the
docs' workflow blocks, this repository's workflows and the one ``evalgate init`` writes.

* one run per pull request at a time: a ``concurrency`` group keyed by the pull request (or, for a
  ``workflow_run`` workflow, the evaluated run's head branch);
* ``actions/checkout`` with ``persist-credentials: false`` (evalgate needs no git credentials, and a token
  left in .git/config is readable by every later step);
* least privilege per job: a workflow with several jobs grants write access per job, never to all of them;
* every documented workflow passes actionlint (rhysd/actionlint, from the test extra), as copied.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.workflow_blocks import Block, documented_blocks, init_workflow, repository_workflows

PR_TRIGGERS = ("pull_request", "pull_request_target")


def everything(tmp_path: Path) -> list[Block]:
    return [*documented_blocks(), *repository_workflows(), init_workflow(tmp_path)]


def concurrency_problem(block: Block) -> str | None:
    triggers = block.triggers
    group = str((block.document.get("concurrency") or {}).get("group", "")) if isinstance(
        block.document.get("concurrency"), dict) else str(block.document.get("concurrency") or "")
    if not group:
        return "no concurrency group"
    per_pr = "github.event.pull_request.number" in group or "github.ref" in group  # refs/pull/N/merge
    if any(t in triggers for t in PR_TRIGGERS) and not per_pr:
        return f"concurrency group {group!r} is not per pull request (github.event.pull_request.number)"
    if "workflow_run" in triggers and "github.event.workflow_run.head_branch" not in group:
        return f"concurrency group {group!r} is not per evaluated branch (github.event.workflow_run.head_branch)"
    return None


def test_the_documented_workflows_are_all_found() -> None:
    found = {block.where.split(":")[0] for block in documented_blocks()}
    assert {"README.md", "docs/github-action.md", "docs/action-inputs.md", "docs/sharding.md",
            "docs/fork-pull-requests.md", "docs/trustworthy-verdicts.md", "docs/security.md", "docs/judges.md",
            "docs/index.md", "docs/targets.md"} <= found


def test_every_workflow_runs_one_at_a_time_per_pull_request(tmp_path: Path) -> None:
    problems = [f"{b.where}: {why}" for b in everything(tmp_path) if b.complete
                for why in [concurrency_problem(b)] if why]
    assert problems == []


def test_every_checkout_keeps_no_credentials(tmp_path: Path) -> None:
    problems = []
    checkouts = 0
    for block in everything(tmp_path):
        for job, step in block.steps():
            if str(step.get("uses", "")).startswith("actions/checkout@"):
                checkouts += 1
                if (step.get("with") or {}).get("persist-credentials") not in (False, "false"):
                    problems.append(f"{block.where}: job {job}: actions/checkout without persist-credentials: false")
    assert problems == [] and checkouts >= 20


def writes(permissions: object) -> list[str]:
    if permissions == "write-all":
        return ["write-all"]
    if not isinstance(permissions, dict):
        return []
    return sorted(f"{scope}: write" for scope, level in permissions.items() if level == "write")


def test_write_permissions_are_granted_per_job_where_a_workflow_has_several(tmp_path: Path) -> None:
    problems = []
    for block in everything(tmp_path):
        jobs = block.document.get("jobs") or {}
        granted = writes(block.document.get("permissions", "write-all" if block.complete else None))
        if len(jobs) > 1 and granted:
            problems.append(f"{block.where}: workflow-level {', '.join(granted)} reaches all {len(jobs)} jobs")
    assert problems == []


def test_the_checks_fail_on_what_the_issue_found(tmp_path: Path) -> None:
    """The old examples.yml (every job could comment), a README snippet without a push trigger's group, and a
    checkout that keeps the token: each is caught."""
    old = Block("old", "", {"on": {"pull_request": None}, "permissions": {"contents": "read", "pull-requests": "write"},
                            "jobs": {"a": {"steps": [{"uses": "actions/checkout@v6"}]}, "b": {"steps": []}}})
    assert concurrency_problem(old) == "no concurrency group"
    assert writes(old.document["permissions"]) == ["pull-requests: write"]
    publish = Block("p", "", {True: {"workflow_run": {"workflows": ["evals"]}}, "concurrency": {"group": "x"},
                              "jobs": {}})
    assert "head_branch" in str(concurrency_problem(publish))


@pytest.mark.skipif(shutil.which("actionlint") is None, reason="actionlint not installed (pip install -e '.[test]')")
def test_every_documented_workflow_passes_actionlint(tmp_path: Path) -> None:
    blocks = [b for b in documented_blocks() if b.complete]
    workflows = tmp_path / ".github" / "workflows"
    workflows.mkdir(parents=True)
    for i, block in enumerate(blocks):
        (workflows / f"block{i:02d}.yml").write_text(block.text, encoding="utf-8")
    done = subprocess.run(["actionlint", "-no-color", "-shellcheck=", "-pyflakes="], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    names = {f"block{i:02d}.yml": b.where for i, b in enumerate(blocks)}
    report = done.stdout
    for name, where in names.items():
        report = report.replace(f".github/workflows/{name}", where)
    assert done.returncode == 0, report


def test_pull_request_workflows_that_compare_with_a_baseline_keep_one(tmp_path: Path) -> None:
    """``baseline: auto`` (the action's default) reads the base branch's newest results artifact: a workflow
    that runs only on pull requests never makes one, and every comparison says "no baseline"."""
    problems = []
    for block in everything(tmp_path):
        evaluates = [step for _, step in block.steps() if "evalgate/evalgate" in str(step.get("uses", ""))
                     or str(step.get("uses", "")) in ("./", "./host")]
        compares = [s for s in evaluates if str((s.get("with") or {}).get("baseline", "auto")) == "auto"
                    and (s.get("with") or {}).get("mode", "evaluate") in ("evaluate", "merge")
                    and not str((s.get("with") or {}).get("shard", ""))]
        if block.complete and "pull_request" in block.triggers and compares and "push" not in block.triggers:
            problems.append(f"{block.where}: baseline: auto on pull requests, but no push trigger keeps a baseline")
    assert problems == []


def test_images_of_this_action_are_by_digest_or_built_from_the_checkout(tmp_path: Path) -> None:
    """A step, job container or service that runs this repository's image names it by digest (or builds it:
    ``uses: ./``), never by a tag that moves. The one exception is examples.yml's demo-agent services on the
    development branch (the major tag: no digest exists before a release), which the release commit pins by
    digest (``tools.release pin``; tests/house/test_release.py)."""
    import re

    from tools import release

    found = []
    for block in everything(tmp_path):
        for match in re.finditer(r"(?:image:|docker://)\s*(ghcr\.io/evalgate/evalgate\S*)", block.text):
            name = match.group(1)
            if "@sha256:" in name:
                continue
            if block.where == ".github/workflows/examples.yml" and name in release.service_images():
                continue
            found.append(f"{block.where}: {name}")
    assert found == []
    assert release.service_images() and all(name.endswith(":1") for name in release.service_images())
