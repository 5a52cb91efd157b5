"""The fork relay as GitHub drives it: a fork's ``pull_request`` event (read-only token), the run that
evaluates it and keeps its results as upload-artifact would, and the ``workflow_run`` event and environment of
the publishing workflow (``mode: publish``). Real webhook payloads from ``@octokit/webhooks-examples``."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any

from tests.servers.github_fake import GitHubFake
from tests.support.action import FAILING, make_workspace, run_entrypoint, runner_env, webhook_example

REPO = "evalgate/evalgate-demo"
HEAD_SHA = "9f1c0a2b3c4d5e6f708192a3b4c5d6e7f8091a2b"
RUN_ID = 30433642
PR = 77


def fork_pull_request_event() -> dict[str, Any]:
    payload = webhook_example("pull_request", "opened")
    payload["repository"]["full_name"] = REPO
    pr = payload["pull_request"]
    pr["number"] = payload["number"] = PR
    pr["head"]["sha"] = HEAD_SHA
    pr["head"]["repo"]["full_name"] = "forker/evalgate-demo"
    return payload


def workflow_run_event(*, pull_requests: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    payload = webhook_example("workflow_run", "completed")
    payload["repository"]["full_name"] = REPO
    run = payload["workflow_run"]
    run.update({"id": RUN_ID, "event": "pull_request", "head_sha": HEAD_SHA, "head_branch": "fix-prompts",
                "conclusion": "failure", "pull_requests": pull_requests or [],
                "html_url": f"https://github.com/{REPO}/actions/runs/{RUN_ID}"})
    run["head_repository"]["full_name"] = "forker/evalgate-demo"
    run["head_repository"]["owner"]["login"] = "forker"
    return payload


def evaluate_fork_run(tmp_path: Path, github: GitHubFake) -> tuple[bytes, str]:
    """The pull_request run of a fork: read-only token, so the comment is refused; returns the results
    zip as upload-artifact would store it, and the comment body the run tried to post."""
    ws = make_workspace(tmp_path / "pr-run", FAILING)
    github.read_only = True
    env = runner_env(ws, event_name="pull_request", payload=fork_pull_request_event(), api_url=github.url,
                     inputs={"dataset": "datasets/failing", "upload-artifacts": "false", "baseline": "none"},
                     extra={"GITHUB_REPOSITORY": REPO, "GITHUB_RUN_ID": str(RUN_ID), "GITHUB_SHA": HEAD_SHA})
    done = run_entrypoint(ws, env)
    github.read_only = False
    assert done.returncode == 1, done.stdout + done.stderr
    refused = [r.body["body"] for r in github.requests("POST")]
    assert refused, "the fork run should have tried (and failed) to comment"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in ("results.json", "results.db"):
            archive.write(ws.workspace / "evalgate-results" / name, name)
    github.log.clear()
    return buffer.getvalue(), refused[-1]


def publish_env(tmp_path: Path, github: GitHubFake, payload: dict[str, Any], **inputs: str) -> tuple[Any, dict]:
    ws = make_workspace(tmp_path / "publish-run", ())
    env = runner_env(ws, event_name="workflow_run", payload=payload, api_url=github.url,
                     inputs={"mode": "publish", **inputs},
                     extra={"GITHUB_REPOSITORY": REPO, "GITHUB_RUN_ID": "30433999", "GITHUB_SHA": "b" * 40})
    return ws, env
