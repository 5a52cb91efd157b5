"""One Docker engine check and one image build per test session, shared by the image, release and act tests.

The image is built from the repository's Dockerfile exactly as the release workflow builds it, except
for the base: no registry is reachable here, so ``PYTHON_IMAGE`` is the local ``python:3.12-slim``
stand-in that ``../shared/tools/docker-local/setup.sh`` makes, where the release passes the same tag
pinned by digest. It is tagged with the name action.yml runs (``ghcr.io/evalgate/evalgate:<version>``),
so ``act --pull=false`` finds it locally. Docker's layer cache makes a rebuild of unchanged sources take
seconds.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SETUP_CANDIDATES = [base / "shared" / "tools" / "docker-local" / "setup.sh" for base in REPO_ROOT.parents[:2]]
"""``../shared`` beside a CI clone, or ``../../shared`` beside a developer's worktree."""
SETUP_SCRIPT = next((path for path in SETUP_CANDIDATES if path.is_file()), SETUP_CANDIDATES[0])
LOCAL_BASE = "python:3.12-slim"
TEST_TAG = "evalgate:test"
BUILD_SECONDS: dict[str, float] = {}
"""How long the session's builds took (reported by the tests that need them)."""


def docker_available() -> str | None:
    """None when a Docker engine answers (any engine: docker-local's or the developer's own), else why the
    tests skip (docs/development.md, "The Docker and act tests")."""
    if shutil.which("docker") is None:
        how = f"run bash {SETUP_SCRIPT} 3.12" if SETUP_SCRIPT.is_file() else "install Docker"
        return f"docker CLI not installed ({how}; docs/development.md, 'The Docker and act tests')"
    try:
        info = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=30, check=False)
    except subprocess.TimeoutExpired:
        return "docker info timed out"
    if info.returncode != 0:
        how = f"run bash {SETUP_SCRIPT} 3.12" if SETUP_SCRIPT.is_file() else "start a Docker engine"
        return f"docker info failed, no engine running ({how}; docs/development.md, 'The Docker and act tests')"
    return None


def action_image() -> str:
    """The image this version's release publishes, ``ghcr.io/evalgate/evalgate:<version>`` (a release
    commit's action.yml names it by digest; on the development branch action.yml says ``Dockerfile``)."""
    from evalgate import __version__
    from tools.release import IMAGE_REPOSITORY

    return f"{IMAGE_REPOSITORY}:{__version__}"


def release_tags() -> list[str]:
    """The local tags of the built image: the version's and the major tag's (the examples workflow's demo
    agent service runs ``ghcr.io/evalgate/evalgate:<major>``), and ``evalgate:test``."""
    from evalgate import __version__
    from tools.release import IMAGE_REPOSITORY

    return [action_image(), f"{IMAGE_REPOSITORY}:{__version__.split('.')[0]}", TEST_TAG]


@functools.cache
def build_release_image() -> str:
    """Build the Dockerfile as the release does (base: the local stand-in), tagged with the release's image
    names and ``evalgate:test``; returns the version's image name. Raises with the build log on failure."""
    from evalgate import __version__

    image = action_image()
    started = time.perf_counter()
    command = ["docker", "build", "--build-arg", f"PYTHON_IMAGE={LOCAL_BASE}",
               "--label", f"org.opencontainers.image.version={__version__}",
               *[flag for tag in release_tags() for flag in ("-t", tag)], str(REPO_ROOT)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1500, check=False)
    BUILD_SECONDS["release image"] = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError("docker build failed:\n" + (done.stdout + done.stderr)[-4000:])
    return image
