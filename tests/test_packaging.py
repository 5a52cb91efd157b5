"""Any install runs the demo: the wheel carries the demo suites from ``datasets/`` (one copy, at the
repository root) as ``evalgate/demo/datasets``, and an installed evalgate runs them from any directory."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                           "-w", str(out), str(ROOT)], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    (found,) = out.glob("evalgate_action-*.whl")
    return found


def test_the_wheel_carries_every_demo_suite_byte_for_byte(wheel: Path) -> None:
    prefix = "evalgate/demo/datasets/"
    with zipfile.ZipFile(wheel) as archive:
        shipped = {name.removeprefix(prefix): archive.read(name) for name in archive.namelist()
                   if name.startswith(prefix) and not name.endswith("/")}
        assert "LICENSE" in " ".join(archive.namelist())
    source = {p.relative_to(ROOT / "datasets").as_posix(): p.read_bytes()
              for p in (ROOT / "datasets").rglob("*") if p.is_file() and "evalgate-results" not in p.parts}
    assert shipped == source


def test_an_installed_wheel_runs_the_demo_from_any_directory(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True, timeout=300)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target)}
    where = subprocess.run([sys.executable, "-P", "-c", "import evalgate, evalgate.runner.setup as s; "
                            "print(evalgate.__file__); print(s.demo_dir())"], cwd=elsewhere, env=env,
                           capture_output=True, text=True, timeout=60, check=True).stdout.split()
    assert where == [str(target / "evalgate" / "__init__.py"), str(target / "evalgate" / "demo" / "datasets")]
    done = subprocess.run([sys.executable, "-P", "-m", "evalgate", "run", "--output-dir", str(tmp_path / "out")],
                          cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Cases: 71" in done.stdout
