"""``install.py``'s promise to CI: with no built wheel cached, ``--if-cached`` and ``--status`` exit 3 at once
and build nothing. Needs no model."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from . import install

SCRIPT = Path(install.__file__)


def test_if_cached_without_a_wheel_exits_3_and_builds_nothing(tmp_path: Path) -> None:
    env = {**os.environ, "EVALGATE_REALMODEL_VENV": str(tmp_path / "venv"),
           "EVALGATE_REALMODEL_WHEELS": str(tmp_path / "wheels"), "PIP_CACHE_DIR": str(tmp_path / "pip-cache")}
    for mode in ("--if-cached", "--status"):
        started = time.monotonic()
        done = subprocess.run([sys.executable, str(SCRIPT), mode], env=env, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == install.EXIT_NOT_CACHED, done.stdout + done.stderr
        assert time.monotonic() - started < 30
    assert not (tmp_path / "venv").exists() and not (tmp_path / "wheels").exists()


def test_only_wheels_of_the_pinned_version_for_this_interpreter_count() -> None:
    version = install.LLAMA_VERSION
    here = sys.platform == "linux" and platform.machine() == "x86_64"
    assert install._compatible(f"llama_cpp_python-{version}-py3-none-linux_x86_64.whl") == here
    assert not install._compatible("llama_cpp_python-0.0.1-py3-none-linux_x86_64.whl")
    assert not install._compatible(f"llama_cpp_python-{version}-cp27-cp27m-win32.whl")
    assert not install._compatible(f"other-{version}-py3-none-any.whl")
