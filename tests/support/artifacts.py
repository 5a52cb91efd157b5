"""The artifacts v4 service as the Action meets it on a runner: a real Azurite blob service on loopback behind
the Twirp fake (tests/servers/artifact_service.py), the runner's ``ACTIONS_*`` variables, and the official
``@actions/artifact`` client (Node) reading an artifact back."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.servers.artifact_service import ArtifactService
from tests.support.action import NODE_DIR, NODE_MODULES
from tests.support.ports import free_port

AZURITE_BIN = NODE_MODULES / ".bin" / "azurite-blob"
ARTIFACT_PKG = NODE_MODULES / "@actions" / "artifact" / "package.json"
DOWNLOAD_SCRIPT = NODE_DIR / "download_artifact.mjs"


@contextlib.contextmanager
def running_azurite(workdir: Path) -> Iterator[str]:
    """A real Azurite blob service on loopback (data under ``workdir``); yields its endpoint."""
    port = free_port()
    proc = subprocess.Popen([str(AZURITE_BIN), "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location",
                             str(workdir), "--silent", "--skipApiVersionCheck", "--loose", "--disableTelemetry"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("azurite did not start") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def have_artifact_tools() -> bool:
    """Whether node and the npm tools (Azurite, ``@actions/artifact``) are installed (``npm ci`` in tests/node)."""
    return AZURITE_BIN.exists() and ARTIFACT_PKG.exists() and shutil.which("node") is not None


def artifact_env(service: ArtifactService) -> dict[str, str]:
    """The ``ACTIONS_*`` variables the runner gives a step, pointing at ``service``."""
    return {"ACTIONS_RUNTIME_TOKEN": service.token, "ACTIONS_RESULTS_URL": f"{service.url}/results/",
            "ACTIONS_RUNTIME_URL": f"{service.url}/runtime/"}


def official_download(service: ArtifactService, name: str, directory: Path) -> dict[str, Any]:
    """Download and unzip ``name`` with the official ``@actions/artifact`` client (Node)."""
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(directory.parent), "GITHUB_SERVER_URL": "https://github.com",
           **artifact_env(service)}
    done = subprocess.run(["node", str(DOWNLOAD_SCRIPT), name, str(directory)], env=env, cwd=NODE_DIR,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])
