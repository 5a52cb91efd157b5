"""The README's two first-screen commands, exactly as written, on a stock Debian Python: Debian's own
``python3`` and ``python3-pip`` (pip refuses system installs: ``externally-managed-environment``), no
``python3-venv``. Runs in a container built from the local Debian bookworm stand-in (docker-local).

The first command must run the bundled demo offline and exit 0; the second is run up to its test
command, which is narrowed to one quick test module (the full suite has its own CI job)."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.act import repository_copy
from tests.support.docker import REPO_ROOT, docker_available

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(1500)]
IMAGE = "evalgate-stock-debian:local"
DOCKERFILE = """FROM python:3.12-slim
# the stand-in's own CPython goes: what remains is Debian's python3, as on a stock machine
RUN rm -rf /usr/local/bin/python* /usr/local/bin/pip* /usr/local/lib/python3.* /etc/pip.conf \\
 && apt-get update -qq \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 python3-pip >/dev/null \\
 && rm -rf /var/lib/apt/lists/*
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt
"""
PIP_CACHE = "evalgate-stock-debian-pip-cache"


def readme_commands() -> list[str]:
    """The shell lines of the README's first code block."""
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert block, "README has no bash block"
    return [line for line in block.group(1).splitlines() if line.strip()]


@pytest.fixture(scope="module")
def image() -> str:
    reason = docker_available()
    if reason:
        pytest.skip(reason)
    done = subprocess.run(["docker", "build", "-q", "-t", IMAGE, "-"], input=DOCKERFILE, capture_output=True,
                          text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return IMAGE


def in_container(image: str, repo: Path, script: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", "run", "--rm", "-v", f"{repo}:/src", "-w", "/src",
                           "-v", f"{PIP_CACHE}:/root/.cache/pip", image, "bash", "-c", script],
                          capture_output=True, text=True, timeout=timeout, check=False)


def test_readme_has_exactly_two_setup_commands() -> None:
    demo, tests = readme_commands()
    assert demo.split("#")[0].rstrip().endswith("evalgate run")
    assert "pytest" in tests


def test_the_first_two_commands_work_on_a_stock_debian_python(image: str, tmp_path: Path) -> None:
    demo, tests = readme_commands()
    repo = repository_copy(tmp_path / "repo")
    refused = in_container(image, repo, "python3 -m pip install --dry-run pyyaml")
    assert refused.returncode != 0 and "externally-managed-environment" in refused.stderr, refused.stderr
    assert in_container(image, repo, "python3 -c 'import ensurepip'").returncode != 0  # no python3-venv
    started = time.perf_counter()
    first = in_container(image, repo, demo)
    seconds = time.perf_counter() - started
    assert first.returncode == 0, (first.stdout + first.stderr)[-3000:]
    assert "PASSED" in first.stdout and "Cases: 71" in first.stdout
    assert (repo / "evalgate-results" / "results.json").is_file()
    narrowed = tests.replace("python -m pytest", "python -m pytest -q -p no:cacheprovider tests/house/test_release.py")
    assert narrowed != tests
    second = in_container(image, repo, narrowed)
    assert second.returncode == 0, (second.stdout + second.stderr)[-3000:]
    assert " passed" in second.stdout
    print(f"README demo command on stock Debian: {seconds:.1f} s")
