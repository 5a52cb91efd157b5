"""Build the project's Dockerfile and run the image as the Actions runner runs a Docker action step.

``docker run --rm --network host --workdir /github/workspace`` with the workspace, the workflow directory
(event.json) and the file-command directory mounted under ``/github/…``, every ``INPUT_*`` / ``GITHUB_*``
/ ``ACTIONS_*`` variable passed by name (``-e NAME``, as the runner does: hyphenated input names go
through Docker unchanged), and the loopback GitHub fake and artifact service reached over the host
network. Needs a Docker engine: ``../shared/tools/docker-local/setup.sh`` starts one on machines without
a registry (``.ci/run`` calls it); the tests skip when the script is absent or ``docker info`` fails.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from tests.servers.artifact_service import ArtifactService
from tests.servers.github_fake import GitHubFake
from tests.support.action import (
    CRITICAL_CASE,
    FAILING,
    JUDGE_KEY,
    PASSING,
    TOKEN,
    Workspace,
    annotation_props,
    case_lines,
    make_workspace,
    runner_env,
    secret_free,
    webhook_example,
    workflow_commands,
)
from tests.support.artifacts import artifact_env, have_artifact_tools, official_download, running_azurite
from tests.support.docker import REPO_ROOT, build_release_image, docker_available
from tests.support.docker import TEST_TAG as IMAGE

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1800)]  # the first test builds the image

CONTAINER_PATHS = {"workspace": "/github/workspace", "workflow": "/github/workflow",
                   "file_commands": "/github/file_commands"}
PASSED_PREFIXES = ("INPUT_", "GITHUB_", "ACTIONS_")
PASSED_NAMES = ("CI", "OPENAI_API_KEY")
MAX_ADDED_MB = 250


@pytest.fixture(scope="module")
def image() -> str:
    reason = docker_available()
    if reason:
        pytest.skip(reason)
    build_release_image()
    return IMAGE


@pytest.fixture  # not tests/support/fixtures.py's: the image runs without the npm tools too (upload then warns)
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ArtifactService | None]:
    """The artifact service + Azurite when the npm tools are installed, else None (upload then warns)."""
    if not have_artifact_tools():
        yield None
        return
    with running_azurite(tmp_path_factory.mktemp("azurite")) as endpoint:
        service = ArtifactService(blob_endpoint=endpoint, run_backend_id=str(uuid.uuid4()),
                                  job_backend_id=str(uuid.uuid4())).start()
        try:
            yield service
        finally:
            service.stop()


def docker_run(image: str, ws: Workspace, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """``docker run`` as the runner builds it (ContainerActionHandler): mounts, workdir, ``-e NAME`` each."""
    passed = {k: v for k, v in env.items() if k.startswith(PASSED_PREFIXES) or k in PASSED_NAMES}
    command = ["docker", "run", "--rm", "--network", "host", "--workdir", CONTAINER_PATHS["workspace"],
               "-v", f"{ws.workspace}:{CONTAINER_PATHS['workspace']}",
               "-v", f"{ws.workflow}:{CONTAINER_PATHS['workflow']}",
               "-v", f"{ws.file_commands}:{CONTAINER_PATHS['file_commands']}"]
    for name in sorted(passed):
        command += ["-e", name]
    command.append(image)
    return subprocess.run(command, env={**passed, "PATH": "/usr/local/bin:/usr/bin:/bin"}, capture_output=True,
                          text=True, timeout=600, check=False)


def container_env(ws: Workspace, *, event_name: str, payload: dict, inputs: dict[str, str], api_url: str,
                  artifacts: ArtifactService | None) -> dict[str, str]:
    extra = {"OPENAI_API_KEY": JUDGE_KEY, "HOME": "/github/home"}
    if artifacts is not None:
        extra |= artifact_env(artifacts)
    return runner_env(ws, event_name=event_name, payload=payload, inputs=inputs, api_url=api_url, extra=extra,
                      paths=CONTAINER_PATHS)


def test_passing_suite_in_the_container(image: str, tmp_path: Path, github: GitHubFake,
                                        artifacts: ArtifactService | None) -> None:
    ws = make_workspace(tmp_path, PASSING)
    payload = webhook_example("pull_request", "opened")
    env = container_env(ws, event_name="pull_request", payload=payload, api_url=github.url, artifacts=artifacts,
                        inputs={"dataset": "datasets/brand-mentions", "metric-thresholds": '{"mention_f1": 0.9}'})
    done = docker_run(image, ws, env)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert done.stdout.startswith("::add-mask::")
    assert secret_free(done.stdout + done.stderr, TOKEN, JUDGE_KEY)
    outputs = ws.outputs()
    assert (outputs["passed"], outputs["exit-code"], outputs["pass-rate"]) == ("true", "0", "1")
    assert outputs["results-json"] == "evalgate-results/results.json"
    results = json.loads((ws.workspace / outputs["results-json"]).read_text())
    assert results["thresholds"]["mention_f1"]["min"] == 0.9  # the hyphenated input crossed docker run -e
    assert "## ✅ evalgate passed" in ws.summary()
    comments = github.comments_on("Codertocat/Hello-World", payload["number"])
    assert len(comments) == 1 and outputs["comment-url"] == comments[0]["html_url"]
    if artifacts is None:
        assert any("artifacts were not uploaded" in rest for _, rest in workflow_commands(done.stdout))
        return
    downloaded = official_download(artifacts, "evalgate-results", tmp_path / "download")
    assert not downloaded["digestMismatch"]
    for name in ("results.json", "results.db"):
        local = ws.workspace / "evalgate-results" / name
        assert (Path(downloaded["downloadPath"]) / name).read_bytes() == local.read_bytes()


def test_failing_suite_in_the_container(image: str, tmp_path: Path, github: GitHubFake,
                                        artifacts: ArtifactService | None) -> None:
    ws = make_workspace(tmp_path, FAILING)
    payload = webhook_example("pull_request", "synchronize")
    env = container_env(ws, event_name="pull_request", payload=payload, api_url=github.url, artifacts=artifacts,
                        inputs={"dataset": "datasets/failing", "comment-tag": "regressions"})
    done = docker_run(image, ws, env)
    assert done.returncode == 1, (done.stdout + done.stderr)[-4000:]
    lines = case_lines(ws.workspace / "datasets" / FAILING[0])
    errors = [annotation_props(rest) for cmd, rest in workflow_commands(done.stdout) if cmd == "error"]
    critical = [p for p in errors if p.get("file") == "datasets/" + FAILING[0]]
    assert critical and int(critical[0]["line"]) == lines[CRITICAL_CASE]
    outputs = ws.outputs()
    assert (outputs["passed"], outputs["exit-code"], outputs["critical-failures"]) == ("false", "1", "1")
    body = github.comments_on("Codertocat/Hello-World", payload["number"])[0]["body"]
    assert body.startswith("<!-- evalgate:comment tag=regressions -->") and CRITICAL_CASE in body
    if artifacts is not None:
        assert list(artifacts.artifacts) == ["evalgate-results-regressions"]


def test_no_arguments_outside_actions_runs_the_demo_suites(image: str, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run(["docker", "run", "--rm", "-v", f"{work}:/work", "-w", "/work", image], capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    results = json.loads((work / "evalgate-results" / "results.json").read_text())
    suites = {Path(d["path"]).parent.name for d in results["metadata"]["datasets"]}
    assert suites == {p.name for p in (REPO_ROOT / "datasets").iterdir()
                      if p.is_dir() and p.name not in ("failing", "live")}
    assert "::" not in done.stdout


def test_token_counting_works_without_network(image: str) -> None:
    code = ("import os; from evalgate.config.settings import build_settings; build_settings(env=os.environ); "
            "from evalgate.text.tokens import count_tokens; print(count_tokens('hello world'))")  # as a run does
    done = subprocess.run(["docker", "run", "--rm", "--network", "none", "--entrypoint", "python", image, "-c", code],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "(2, 'cl100k_base')"


def test_image_stays_small(image: str) -> None:
    def size(tag: str) -> int:
        out = subprocess.run(["docker", "image", "inspect", "--format", "{{.Size}}", tag], capture_output=True,
                             text=True, timeout=60, check=True).stdout
        return int(out.strip())

    added_mb = (size(image) - size("python:3.12-slim")) / 1e6
    assert added_mb < MAX_ADDED_MB, f"the image adds {added_mb:.0f} MB to its base"
