"""Every workflow the README and the docs show, copied as written into a new team's repository and run under
nektos/act (tests/support/act.py) against what ``evalgate init`` writes (evalgate.yaml, evals/starter.yaml).

Each workflow that runs on ``push`` runs first, as the default branch's run that records the baseline (with
a judge: the demo judge over loopback, reached through ``EVALGATE_JUDGE_BASE_URL``, and a key as a secret);
its results artifact is then what GitHub's artifacts API lists for ``main`` (the loopback GitHub fake:
act's own artifact server has no such API). Each workflow that runs on ``pull_request`` runs next with
GitHub's example payload made a fork's (no secrets, so no judge key: ``judge-missing`` skips), must pass,
and must find that baseline. The README's workflow runs by default (it is what most teams copy); the others
need ``EVALGATE_SLOW=1`` (about half a minute each). Marked ``docker`` and ``slow``; skipped with the reason
when docker-local or act is absent.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import time
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from evalgate.cli.init import scaffold
from evalgate.demo.judge import judge_server
from tests.servers.github_fake import GitHubFake
from tests.support.act import RUNNER_IMAGE, TIMINGS, ActRun, act_unavailable, prepare_images, repository_copy
from tests.support.action import TOKEN, webhook_example
from tests.support.docker import action_image
from tests.support.workflow_blocks import Block, documented_blocks

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(1800)]
REPOSITORY = "octo/helpdesk"
FORK = "forker/helpdesk"
JUDGE_KEY = "sk-demo-judge-key-for-the-act-test"
NOT_RUN_HERE = {
    "docs/sharding.md": "tests/e2e/test_act_workflows.py runs it (a matrix and a merge job, one comment)",
    "docs/fork-pull-requests.md": "tests/e2e/test_act_workflows.py runs the same two workflows (evals.yml, "
                                  "evals-publish.yml: workflow_run)",
}
"""Documented workflows another act test already runs as copied (the hygiene test covers every block)."""


def runnable() -> list[Block]:
    return [b for b in documented_blocks() if b.complete and b.where.split(":")[0] not in NOT_RUN_HERE]


def uses_a_judge(block: Block) -> bool:
    """Whether an evalgate step of the workflow sets a judge provider (init's evalgate.yaml has none)."""
    return any(str((step.get("with") or {}).get("judge-provider", "none")) != "none" for _, step in block.steps())


def default_run(block: Block) -> bool:
    return block.where.startswith("README.md")


@pytest.fixture(scope="module")
def action_repository(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """This commit's action, as ``--local-repository evalgate/evalgate@v1`` serves it to the workflows, its
    action.yml naming the locally built image as a release commit names the published one."""
    reason = act_unavailable()
    if reason:
        pytest.skip(reason)
    prepare_images()
    repo = repository_copy(tmp_path_factory.mktemp("action") / "evalgate")
    action = repo / "action.yml"
    action.write_text(action.read_text(encoding="utf-8").replace("  image: Dockerfile",
                                                                 f"  image: docker://{action_image()}"),
                      encoding="utf-8")
    yield repo
    print("\nact timings: " + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in TIMINGS.items()))


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=octo", "-c", "user.email=octo@example.invalid", *args], cwd=cwd,
                          capture_output=True, text=True, check=True, timeout=60).stdout.strip()


def team_repository(root: Path, block: Block) -> Path:
    """A new team's repository: what ``evalgate init`` writes, plus the documented workflow as copied."""
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    scaffold(root)
    (root / ".github" / "workflows" / "documented.yml").write_text(block.text, encoding="utf-8")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "evalgate init and the documented workflow")
    git(root, "remote", "add", "origin", f"https://github.com/{REPOSITORY}.git")
    return root


def act(repo: Path, event: str, payload: Mapping[str, object], action: Path, *, env: Mapping[str, str],
        secrets: Mapping[str, str], artifacts: Path) -> ActRun:
    event_file = repo.parent / f"{event}.json"
    event_file.write_text(json.dumps(payload), encoding="utf-8")
    command = ["act", event, "-W", ".github/workflows/documented.yml", "-e", str(event_file),
               "-P", f"ubuntu-latest={RUNNER_IMAGE}", "--pull=false", "--rebuild=false", "--bind",
               "--action-offline-mode", "--no-cache-server", "--container-daemon-socket", "-", "--rm",
               "--artifact-server-path", str(artifacts),
               "--local-repository", f"evalgate/evalgate@v1={action}"]
    for name, value in env.items():
        command += ["--env", f"{name}={value}"]
    for name in secrets:
        command += ["-s", name]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=repo, capture_output=True, text=True, timeout=900, check=False,
                          env={**os.environ, **secrets})
    TIMINGS[f"act {event} {repo.name}"] = time.perf_counter() - started
    output = "\n".join(line for line in (done.stdout + done.stderr).splitlines() if "unable to get git" not in line)
    return ActRun(done.returncode, output, time.perf_counter() - started)


def zipped(directory: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in ("results.json", "results.db", "judge-cache.db"):
            if (directory / name).is_file():
                archive.write(directory / name, name)
    return buffer.getvalue()


def tail(text: str, lines: int = 120) -> str:
    return "\n".join(text.splitlines()[-lines:])


def push_event(sha: str) -> dict[str, object]:
    payload = webhook_example("push")
    payload.update({"ref": "refs/heads/main", "after": sha})
    payload["repository"].update({"full_name": REPOSITORY, "name": "helpdesk", "default_branch": "main"})
    return payload


def fork_pull_request_event(sha: str) -> dict[str, object]:
    payload = webhook_example("pull_request", "opened")
    payload["repository"].update({"full_name": REPOSITORY, "name": "helpdesk", "default_branch": "main"})
    pr = payload["pull_request"]
    pr["base"]["ref"] = "main"
    pr["base"]["repo"]["full_name"] = REPOSITORY
    pr["head"].update({"sha": sha, "ref": "better-prompts"})
    pr["head"]["repo"]["full_name"] = FORK
    return payload


def results_of(repo: Path) -> dict[str, object]:
    found = sorted(repo.rglob("results.json"), key=lambda p: p.stat().st_mtime)
    assert found, "the run wrote no results.json"
    return json.loads(found[-1].read_text(encoding="utf-8"))


@pytest.mark.parametrize("block", runnable(), ids=lambda b: b.where)
def test_documented_workflow_passes_as_copied(block: Block, action_repository: Path, tmp_path: Path) -> None:
    if not default_run(block) and not os.environ.get("EVALGATE_SLOW"):
        pytest.skip("EVALGATE_SLOW=1 runs every documented workflow under act (the README's runs by default)")
    repo = team_repository(tmp_path / "helpdesk", block)
    sha = git(repo, "rev-parse", "HEAD")
    triggers = block.triggers
    assert "pull_request" in triggers or "push" in triggers, block.where
    judge = judge_server(port=0)
    judge.start()
    try:
        with GitHubFake(token=TOKEN) as github:
            env = {"GITHUB_API_URL": github.url}
            if "push" in triggers:
                pushed = act(repo, "push", push_event(sha), action_repository, artifacts=tmp_path / "artifacts",
                             env={**env, "EVALGATE_JUDGE_BASE_URL": f"{judge.base_url}/v1"},
                             secrets={"GITHUB_TOKEN": TOKEN, "OPENAI_API_KEY": JUDGE_KEY})
                assert pushed.returncode == 0 and "🏁  Job succeeded" in pushed.output, tail(pushed.output)
                base = results_of(repo)
                assert base["gate"]["passed"] is True, base["gate"]
                assert "uploaded artifact 'evalgate-results'" in pushed.output, tail(pushed.output)
                results = next(p.parent for p in repo.rglob("results.json"))
                github.add_run_artifact(REPOSITORY, {"id": 7001, "head_branch": "main", "head_sha": sha},
                                        "evalgate-results", zipped(results))
                shutil.rmtree(results)
            if "pull_request" in triggers:
                payload = fork_pull_request_event(sha)
                pulled = act(repo, "pull_request", payload, action_repository, artifacts=tmp_path / "artifacts",
                             env=env, secrets={"GITHUB_TOKEN": TOKEN})
                assert pulled.returncode == 0 and "🏁  Job succeeded" in pulled.output, tail(pulled.output)
                document = results_of(repo)
                assert document["gate"]["passed"] is True, document["gate"]
                if "push" in triggers:  # the pull request found the default branch's run and compared with it
                    assert document.get("comparison"), document.get("baseline")
                skipped = [m for r in document["results"] for m in r["metrics"].values()
                           if str(m.get("reason") or "").startswith("not judged")]
                if uses_a_judge(block):
                    assert skipped, "the fork's run had no judge key: its judged metrics say so"
    finally:
        judge.stop()
