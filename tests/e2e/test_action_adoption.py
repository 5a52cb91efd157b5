"""The Action where a team adopts it: pull_request_target with the pull request's code checked out runs none
of that code unless allowed, links point at the commit evaluated, GitHub Enterprise Server degrades with
notices, and the artifact outputs are set only after an upload. The entrypoint runs as the runner runs it
(tests/e2e/test_entrypoint.py's helpers) against the loopback GitHub fake."""

from __future__ import annotations

from pathlib import Path

from evalgate.github.checkout import checked_out_commit, untrusted_checkout
from evalgate.github.context import ActionContext
from evalgate.github.enterprise import is_enterprise_server
from tests.servers.github_fake import GitHubFake
from tests.support.action import (
    BASE_SHA,
    PASSING,
    commit_workspace,
    git,
    make_workspace,
    needs_examples,
    run_entrypoint,
    runner_env,
    webhook_example,
    workflow_commands,
)


def test_checked_out_commit_reads_detached_branch_and_packed_heads(tmp_path: Path) -> None:
    assert checked_out_commit(tmp_path) is None
    (tmp_path / "f").write_text("x", encoding="utf-8")
    sha = commit_workspace(tmp_path)
    assert checked_out_commit(tmp_path) == sha  # on a branch: refs/heads/feature
    git(tmp_path, "pack-refs", "--all")
    assert not (tmp_path / ".git" / "refs" / "heads" / "feature").exists()
    assert checked_out_commit(tmp_path) == sha  # packed-refs
    git(tmp_path, "checkout", "-q", "--detach")
    assert checked_out_commit(tmp_path) == sha  # detached, as actions/checkout leaves a pull request
    worktree = tmp_path / "wt"
    git(tmp_path, "worktree", "add", "-q", "--detach", str(worktree))
    assert checked_out_commit(worktree) == sha  # .git is a file pointing elsewhere


def test_only_pull_request_target_with_other_code_checked_out_is_untrusted() -> None:
    head = "b" * 40
    target = ActionContext(event_name="pull_request_target", sha=BASE_SHA, head_sha=head)
    assert untrusted_checkout(target, BASE_SHA) is None  # the default checkout: the base branch's code
    assert "the pull request's head checked out" in (untrusted_checkout(target, head) or "")
    assert "no .git" in (untrusted_checkout(target, None) or "")
    assert untrusted_checkout(ActionContext(event_name="pull_request", sha=BASE_SHA, head_sha=head), head) is None
    # links: the commit evaluated; under pull_request_target without a readable checkout, the base commit
    assert ActionContext(event_name="pull_request_target", sha=BASE_SHA, head_sha=head).blob_sha == BASE_SHA
    assert ActionContext(event_name="pull_request", sha="m" * 40, head_sha=head, evaluated_sha="c" * 40).blob_sha == "c" * 40


def pr_target_env(ws, github: GitHubFake, inputs: dict[str, str]) -> dict[str, str]:
    payload = webhook_example("pull_request", "opened")
    return runner_env(ws, event_name="pull_request_target", payload=payload, api_url=github.url,
                      inputs={"dataset": "datasets/brand-mentions", "baseline": "none", "upload-artifacts": "false",
                              **inputs})


@needs_examples
def test_pull_request_target_refuses_the_checkouts_code_and_says_why(tmp_path: Path, github: GitHubFake) -> None:
    ws = make_workspace(tmp_path, PASSING)
    marker = tmp_path / "ran"
    (ws.workspace / "checks.py").write_text(
        "from pathlib import Path\n"
        f"Path({str(marker)!r}).write_text('the PR code ran')\n"
        "def always(case, answer, *_):\n    return 0.0  # every case fails: the comment links each one\n", encoding="utf-8")
    (ws.workspace / "evalgate.yaml").write_text("metrics:\n  - file://checks.py:always\n", encoding="utf-8")
    head = commit_workspace(ws.workspace)
    refused = run_entrypoint(ws, pr_target_env(ws, github, {"config": "evalgate.yaml"}))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    errors = [rest for name, rest in workflow_commands(refused.stdout) if name == "error"]
    assert len(errors) == 1 and "'file://checks.py:always' not loaded: pull_request_target with" in errors[0], errors
    assert "allow-pr-code: true" in errors[0] and not marker.exists()
    command = run_entrypoint(ws, pr_target_env(ws, github, {"target": "command"}))
    assert command.returncode == 2 and "command target not run: pull_request_target" in command.stdout
    assert github.requests("POST") == []
    allowed = run_entrypoint(ws, pr_target_env(ws, github, {"config": "evalgate.yaml", "allow-pr-code": "yes"}))
    assert allowed.returncode == 1, allowed.stdout + allowed.stderr
    assert marker.read_text(encoding="utf-8") == "the PR code ran"
    assert any(name == "warning" and "allow-pr-code: true" in rest for name, rest in workflow_commands(allowed.stdout))
    body = github.comments_on("Codertocat/Hello-World", 2)[0]["body"]
    assert f"/blob/{head}/datasets/brand-mentions/fixtures.yaml#L" in body  # the commit evaluated
    assert f"/blob/{BASE_SHA}/" not in body


@needs_examples
def test_enterprise_server_degrades_with_notices_and_never_fails(tmp_path: Path, github: GitHubFake) -> None:
    ws = make_workspace(tmp_path, PASSING)
    env = runner_env(ws, event_name="pull_request", payload=webhook_example("pull_request", "opened"),
                     api_url=github.url, inputs={"dataset": "datasets/brand-mentions", "baseline": "auto"},
                     extra={"GITHUB_SERVER_URL": "https://github.example.com"})
    done = run_entrypoint(ws, env)
    assert done.returncode == 0, done.stdout + done.stderr
    commands = workflow_commands(done.stdout)
    assert [name for name, _ in commands if name in ("warning", "error")] == []
    notices = [rest for name, rest in commands if name == "notice" and "Enterprise Server" in rest]
    assert len(notices) == 2 and "not uploaded" in notices[0] and "no baseline" in notices[1]
    outputs = ws.outputs()
    assert (outputs["artifact-name"], outputs["artifact-id"], outputs["artifact-url"]) == ("", "", "")
    assert outputs["passed"] == "true" and len(github.comments_on("Codertocat/Hello-World", 2)) == 1
    assert is_enterprise_server("https://github.example.com") and not is_enterprise_server("https://octo.ghe.com")
    assert not is_enterprise_server("https://github.com")
