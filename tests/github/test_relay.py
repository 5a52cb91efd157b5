"""Fork pull requests: the pull_request run evaluates and uploads with a read-only token; the workflow_run
workflow (``mode: publish`` / ``evalgate publish``) downloads that run's artifact and upserts the comment.

Against the stateful GitHub fake on loopback, with a real ``workflow_run`` webhook payload
(@octokit/webhooks-examples) turned into the fork case GitHub sends: ``event: pull_request``, the head
repository a fork, ``pull_requests: []``.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.servers.github_fake import GitHubFake
from tests.support.action import (
    REPO_ROOT,
    TOKEN,
    run_entrypoint,
    workflow_commands,
)
from tests.support.relay import (
    HEAD_SHA,
    PR,
    REPO,
    RUN_ID,
    evaluate_fork_run,
    publish_env,
    workflow_run_event,
)


def test_publish_mode_posts_the_comment_the_fork_run_could_not(tmp_path: Path, github: GitHubFake) -> None:
    data, refused_body = evaluate_fork_run(tmp_path, github)
    run = workflow_run_event()["workflow_run"]
    artifact_id = github.add_run_artifact(REPO, run, "evalgate-results", data)
    github.add_pull(REPO, PR, head_sha=HEAD_SHA, head_label="forker:fix-prompts")
    github.add_pull(REPO, PR + 1, head_sha="c" * 40, head_label="forker:other")
    ws, env = publish_env(tmp_path, github, workflow_run_event())
    done = run_entrypoint(ws, env)
    assert done.returncode == 0, done.stdout + done.stderr
    comments = github.comments_on(REPO, PR)
    assert len(comments) == 1
    body = comments[0]["body"]
    assert body.splitlines()[0] == refused_body.splitlines()[0]  # the same hidden marker: one comment per tag
    expected = refused_body.replace(f"[Workflow run](https://github.com/{REPO}/actions/runs/{RUN_ID})",
                                    f"[Workflow run](https://github.com/{REPO}/actions/runs/{RUN_ID}) · "
                                    f"[Artifacts](https://github.com/{REPO}/actions/runs/{RUN_ID}/artifacts/{artifact_id})")
    assert body == expected
    paths = [r.path for r in github.requests("GET")]
    assert f"/repos/{REPO}/actions/runs/{RUN_ID}/artifacts" in paths and f"/repos/{REPO}/pulls" in paths
    blob = [r for r in github.requests("GET") if r.path.startswith("/_blob/")]
    assert blob and "authorization" not in blob[0].headers  # the token never goes to the storage URL
    outputs = ws.outputs()
    assert outputs["passed"] == "false" and outputs["exit-code"] == "1" and outputs["comment-url"]
    assert (ws.workspace / "evalgate-results" / "results.json").is_file()
    commands = [name for name, _ in workflow_commands(done.stdout)]
    assert "error" not in commands and "notice" in commands
    # a rerun edits the same comment
    assert run_entrypoint(ws, env).returncode == 0
    assert len(github.comments_on(REPO, PR)) == 1


def test_cli_verb_takes_the_run_id_and_a_listed_same_repository_pull_request(tmp_path: Path,
                                                                              github: GitHubFake) -> None:
    data, _ = evaluate_fork_run(tmp_path, github)
    listed = [{"number": PR, "head": {"sha": HEAD_SHA, "ref": "fix-prompts"}}]
    run = workflow_run_event(pull_requests=listed)["workflow_run"]
    github.add_run_artifact(REPO, run, "evalgate-results", data)
    ws, env = publish_env(tmp_path, github, {"action": "requested"})
    env = {k: v for k, v in env.items() if not k.startswith("INPUT_") and k != "GITHUB_ACTIONS"}
    done = subprocess.run([sys.executable, "-m", "evalgate", "publish", "--run-id", str(RUN_ID)],
                          env={**env, "GITHUB_TOKEN": TOKEN}, cwd=ws.workspace, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(github.comments_on(REPO, PR)) == 1
    assert f"/repos/{REPO}/pulls" not in [r.path for r in github.requests("GET")]  # listed PR, no search
    assert TOKEN not in done.stdout.replace(f"::add-mask::{TOKEN}", "")


@pytest.mark.parametrize(("case", "message"), [
    ("moved", "no open pull request has head forker:fix-prompts at 9f1c0a2"),
    ("no-artifact", "artifact 'evalgate-results' of run 30433642 was not uploaded"),
    ("expired", "artifact 'evalgate-results' of run 30433642 has expired"),
])
def test_nothing_is_posted_when_the_run_and_the_pull_request_do_not_match(tmp_path: Path, github: GitHubFake,
                                                                          case: str, message: str) -> None:
    data = zip_of({"results.json": json.dumps({"gate": {"passed": True}})})
    run = workflow_run_event()["workflow_run"]
    if case != "no-artifact":
        github.add_run_artifact(REPO, run, "evalgate-results", data, expired=case == "expired")
    else:
        github.add_run_artifact(REPO, run, "evalgate-results-other", data)
    github.add_pull(REPO, PR, head_sha="d" * 40 if case == "moved" else HEAD_SHA, head_label="forker:fix-prompts")
    ws, env = publish_env(tmp_path, github, workflow_run_event())
    done = run_entrypoint(ws, env)
    assert done.returncode == 1
    errors = [rest for name, rest in workflow_commands(done.stdout) if name == "error"]
    assert len(errors) == 1 and message in errors[0], done.stdout
    assert github.requests("POST") == [] and github.requests("PATCH") == []


def test_a_run_not_triggered_by_a_pull_request_is_a_notice(tmp_path: Path, github: GitHubFake) -> None:
    payload = workflow_run_event()
    payload["workflow_run"]["event"] = "push"
    ws, env = publish_env(tmp_path, github, payload)
    done = run_entrypoint(ws, env)
    assert done.returncode == 0
    assert [name for name, _ in workflow_commands(done.stdout)].count("notice") == 1
    assert github.log == []


def test_the_documented_workflows_never_check_out_the_fork() -> None:
    import yaml

    flow = yaml.safe_load((REPO_ROOT / ".github" / "workflows" / "evals-publish.yml").read_text(encoding="utf-8"))
    job = next(iter(flow["jobs"].values()))
    assert flow[True] == {"workflow_run": {"workflows": ["evals"], "types": ["completed"]}}
    assert job["permissions"] == {"pull-requests": "write", "actions": "read"}
    assert not any("checkout" in str(step.get("uses", "")) for step in job["steps"])
    evals = yaml.safe_load((REPO_ROOT / ".github" / "workflows" / "evals.yml").read_text(encoding="utf-8"))
    assert "pull_request_target" not in evals[True]
    assert evals["permissions"] == {"contents": "read", "actions": "read"}


def zip_of(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()
