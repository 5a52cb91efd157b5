"""Any install runs the demo: the wheel carries the demo suites from ``datasets/`` (one copy, at the
repository root) as ``evalgate/demo/datasets``, and an installed evalgate runs them from any directory."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(dists: Path) -> Path:
    """The wheel the release builds (from its sdist, by ``python -m build``: ``dists`` below)."""
    (found,) = dists.glob("evalgate_action-*.whl")
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
    where = subprocess.run([sys.executable, "-P", "-c", "import evalgate, evalgate.dataset.selected as s; "
                            "print(evalgate.__file__); print(s.demo_dir())"], cwd=elsewhere, env=env,
                           capture_output=True, text=True, timeout=60, check=True).stdout.split()
    assert where == [str(target / "evalgate" / "__init__.py"), str(target / "evalgate" / "demo" / "datasets")]
    done = subprocess.run([sys.executable, "-P", "-m", "evalgate", "run", "--output-dir", str(tmp_path / "out")],
                          cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Cases: 71" in done.stdout


def source_copy(target: Path) -> Path:
    """The checkout's files (tracked and untracked, not ignored): what the release workflow builds from."""
    import shutil

    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True,
                            check=True, timeout=60).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (ROOT / name).is_file() and not name.startswith("tests/node/node_modules"):
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target / name)
    return target


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``python -m build``, as the release workflow's dist job runs it: the sdist, then the wheel built from it."""
    pytest.importorskip("build", reason="the build frontend comes with the test extra")
    source = source_copy(tmp_path_factory.mktemp("source"))
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(source)], capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return out


def test_the_release_builds_exactly_this_versions_sdist_and_wheel(dists: Path) -> None:
    from tools.release import dist_problems

    assert dist_problems(dists) == []
    assert subprocess.run([sys.executable, "-m", "tools.release", "dist", str(dists)], cwd=ROOT, capture_output=True,
                          timeout=60, check=False).returncode == 0


def test_the_wheel_installs_into_a_fresh_venv_and_runs(dists: Path, tmp_path: Path) -> None:
    """A fresh virtual environment, the wheel the sdist built, and ``evalgate run`` from its own script on a new
    project's ``evalgate init`` starter. With EVALGATE_SLOW=1 pip resolves and installs
    every dependency from the package index as a user's ``pip install evalgate-action`` does (about a minute);
    otherwise the dependencies come from this environment's site-packages, behind the fresh venv's own."""
    import sysconfig

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    (wheel,) = dists.glob("*.whl")
    deps = [] if os.environ.get("EVALGATE_SLOW") else ["--no-deps"]
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", *deps, str(wheel)],
                          capture_output=True, text=True, timeout=900, check=False, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    if deps:
        site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                              capture_output=True, text=True, check=True, timeout=60).stdout.strip()
        (Path(site) / "zz-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n", encoding="utf-8")
    project = tmp_path / "project"
    project.mkdir()
    where = subprocess.run([str(python), "-c", "import evalgate; print(evalgate.__file__)"], cwd=project, env=env,
                           capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    assert where.startswith(str(venv)), where
    evalgate = venv / "bin" / "evalgate"  # (the bundled demo from an installed wheel: the test above)
    assert subprocess.run([str(evalgate), "init"], cwd=project, env=env, capture_output=True, timeout=120,
                          check=False).returncode == 0
    started = subprocess.run([str(evalgate), "run"], cwd=project, env=env, capture_output=True, text=True,
                             timeout=300, check=False)
    assert started.returncode == 0 and "PASSED" in started.stdout, started.stdout[-2000:] + started.stderr[-2000:]
