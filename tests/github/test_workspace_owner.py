"""Files the action writes into the workspace belong to the workspace's owner, so a later step running
as that (non-root) user can read and delete them. Needs root to change owners (skipped otherwise)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from evalgate.github.workspace import hand_over, missing_ancestors, owner_of
from tests.servers.github_fake import GitHubFake
from tests.support.action import PASSING, TOKEN, make_workspace, run_entrypoint, runner_env, webhook_example

RUNNER_UID = 1001  # the runner user on GitHub-hosted runners
pytestmark = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                                reason="changing file owners needs root (the container action runs as root)")


def owned_by(path: Path) -> tuple[int, int]:
    info = path.lstat()
    return info.st_uid, info.st_gid


def as_runner(*command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(command), cwd=cwd, user=RUNNER_UID, group=RUNNER_UID, extra_groups=[],
                          capture_output=True, text=True, timeout=60, check=False)


def test_only_new_paths_inside_the_workspace_change_owner(tmp_path: Path) -> None:
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    os.chown(workspace, RUNNER_UID, RUNNER_UID)
    (workspace / "kept.txt").write_text("x")  # root-owned, not ours: left alone
    target = workspace / "a" / "b" / "out"
    created = missing_ancestors([target, outside / "x.db"], workspace)
    assert created == [target, workspace / "a" / "b", workspace / "a"]
    target.mkdir(parents=True)
    (target / "results.json").write_text("{}")
    (outside / "x.db").write_text("")
    changed = hand_over([target, outside / "x.db"], workspace, created)
    assert changed == 4
    for path in (workspace / "a", workspace / "a" / "b", target, target / "results.json"):
        assert owned_by(path) == (RUNNER_UID, RUNNER_UID), path
    assert owned_by(workspace / "kept.txt") == (0, 0)
    assert owned_by(outside / "x.db") == (0, 0)


def test_a_root_owned_workspace_is_left_as_it_is(tmp_path: Path) -> None:
    assert owner_of(tmp_path) is None
    (tmp_path / "out").mkdir()
    assert hand_over([tmp_path / "out"], tmp_path) == 0


def test_a_later_step_as_the_runner_user_reads_and_deletes_the_results(tmp_path: Path) -> None:
    with GitHubFake(token=TOKEN) as github:
        ws = make_workspace(tmp_path, PASSING)
        for path in (tmp_path, *tmp_path.rglob("*")):
            os.chown(path, RUNNER_UID, RUNNER_UID)
        env = runner_env(ws, event_name="push", payload=webhook_example("push"), api_url=github.url,
                         inputs={"dataset": "datasets/brand-mentions", "output-dir": "reports/evalgate"})
        done = run_entrypoint(ws, env)
    assert done.returncode == 0, done.stdout + done.stderr
    out = ws.workspace / "reports" / "evalgate"
    assert sorted(p.name for p in out.iterdir()) == ["evalgate-site", "results.db", "results.json"]
    for path in (ws.workspace / "reports", out, *out.iterdir()):
        assert owned_by(path) == (RUNNER_UID, RUNNER_UID), path
    assert as_runner("cat", "reports/evalgate/results.json", cwd=ws.workspace).returncode == 0
    deleted = as_runner("rm", "-r", "reports", cwd=ws.workspace)
    assert deleted.returncode == 0, deleted.stderr
    assert not (ws.workspace / "reports").exists()
