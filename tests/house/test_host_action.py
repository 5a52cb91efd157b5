"""host/action.yml (host mode) is generated from action.yml: same inputs and outputs, same entrypoint."""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tools import host_action

ROOT = Path(__file__).resolve().parents[2]


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def test_host_action_is_generated_from_the_current_action_yml() -> None:
    assert host_action.main(["--check"]) == 0, "run: python -m tools.host_action"


def test_same_inputs_defaults_and_outputs_as_the_container_action() -> None:
    container, host = load(ROOT / "action.yml"), load(ROOT / "host" / "action.yml")
    assert set(host["inputs"]) == set(container["inputs"]) | {"python"}
    for name, spec in container["inputs"].items():
        assert host["inputs"][name]["default"] == spec["default"], name
    assert list(host["outputs"]) == list(container["outputs"])
    for name, spec in host["outputs"].items():  # the artifact's outputs only once actions/upload-artifact succeeded
        step = "upload" if name in ("artifact-name", "artifact-id", "artifact-url") else "run"
        assert spec["value"] == f"${{{{ steps.{step}.outputs.{name} }}}}", name


def test_every_input_reaches_the_entrypoint_as_the_runner_would_pass_it() -> None:
    host = load(ROOT / "host" / "action.yml")
    run = next(step for step in host["runs"]["steps"] if step.get("id") == "run")
    assert run["run"] == '"$EVALGATE_VENV/bin/python" -P -m entrypoint.main'
    for name in load(ROOT / "action.yml")["inputs"]:
        expected = '"false"' if name == "upload-artifacts" else f"${{{{ inputs.{name} }}}}"
        assert str(run["env"][f"INPUT_{name.upper()}"]).replace('"', "") == expected.replace('"', ""), name


def test_install_is_pinned_to_the_actions_own_checkout_and_cached() -> None:
    script = (ROOT / "host" / "install.sh").read_text(encoding="utf-8")
    assert 'source_dir=$(cd "$here/.." && pwd)' in script
    assert '--require-hashes --only-binary=:all: -r "$source_dir/requirements.lock"' in script
    assert 'pip install -q --no-deps --force-reinstall "$source_dir"' in script  # this ref's code, every time it changes
    assert 'key="evalgate-host-deps-${os}-py${pyver}-${arch}-${digest}"' in script  # dependencies cached by the lock
    assert "RUNNER_TOOL_CACHE" in script


# -- the script's code paths, run here as each runner would run them ---------------------------------------

SCRIPT = ROOT / "host" / "install.sh"
MAC_TOOLS = ("bash", "uname", "cut", "tr", "dirname", "cat", "shasum", "perl", "env", "sort", "find", "xargs")
"""What a macOS runner offers the plan step: BSD-style tools, shasum, and no sha256sum."""


def run_script(verb: str, tmp_path: Path, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    output = tmp_path / "github_output"
    output.write_text("", encoding="utf-8")
    done = subprocess.run(["bash", str(SCRIPT), verb], capture_output=True, text=True, timeout=60, check=False,
                          env={"GITHUB_OUTPUT": str(output), "RUNNER_TEMP": str(tmp_path), **env})
    values = dict(line.split("=", 1) for line in output.read_text(encoding="utf-8").splitlines() if "=" in line)
    return done, values


def test_plan_keys_the_cache_by_os_full_python_version_cpu_and_lock(tmp_path: Path) -> None:
    done, values = run_script("plan", tmp_path, {"PATH": os.environ["PATH"], "EVALGATE_PYTHON": sys.executable})
    assert done.returncode == 0, done.stdout + done.stderr
    lock = hashlib.sha256((ROOT / "requirements.lock").read_bytes()).hexdigest()[:16]
    full = ".".join(map(str, sys.version_info[:3]))
    assert values["key"] == f"evalgate-host-deps-linux-py{full}-{platform.machine()}-{lock}"
    assert values["venv"] == f"{tmp_path}/evalgate/{values['key']}"


def test_plan_on_macos_tools_uses_shasum(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in MAC_TOOLS:
        found = shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(found)
    (bin_dir / "python3").symlink_to(sys.executable)
    (bin_dir / "uname").unlink()  # Darwin's uname: -s Darwin, -m arm64
    (bin_dir / "uname").write_text('#!/bin/sh\ncase "$1" in -s) echo Darwin;; -m) echo arm64;; *) echo Darwin;; esac\n')
    (bin_dir / "uname").chmod(0o755)
    assert shutil.which("sha256sum", path=str(bin_dir)) is None
    done, values = run_script("plan", tmp_path, {"PATH": str(bin_dir), "RUNNER_OS": "macOS"})
    assert done.returncode == 0, done.stdout + done.stderr
    lock = hashlib.sha256((ROOT / "requirements.lock").read_bytes()).hexdigest()[:16]
    assert values["key"] == f"evalgate-host-deps-darwin-py{'.'.join(map(str, sys.version_info[:3]))}-arm64-{lock}"


def test_windows_stops_with_one_error_line(tmp_path: Path) -> None:
    done, values = run_script("plan", tmp_path, {"PATH": os.environ["PATH"], "RUNNER_OS": "Windows"})
    assert done.returncode == 2 and values == {}
    assert done.stdout.startswith("::error title=evalgate host mode::host mode runs on Linux and macOS runners")
    assert len(done.stdout.strip().splitlines()) == 1


VENV = str(Path(sys.executable).parent.parent)


@pytest.mark.parametrize(("value", "upload"), [("", "true"), ("yes", "true"), ("ON", "true"), ("1", "true"),
                                               ("true", "true"), ("no", "false"), ("off", "false"), ("0", "false")])
def test_upload_artifacts_is_read_as_evalgate_reads_it(tmp_path: Path, value: str, upload: str) -> None:
    done, values = run_script("artifact", tmp_path, {
        "PATH": os.environ["PATH"], "EVALGATE_VENV": VENV, "EVALGATE_UPLOAD": value, "EVALGATE_COMMENT_TAG": "nightly",
        "EVALGATE_RESULTS_DB": "out/results.db", "GITHUB_SERVER_URL": "https://github.com"})
    assert done.returncode == 0, done.stdout + done.stderr
    # the container action uploads the same three files (results.json, results.db, judge-cache.db)
    assert values == {"upload": upload, "name": "evalgate-results-nightly", "judge-cache": "out/judge-cache.db"}


def test_a_bad_upload_value_is_one_error_line(tmp_path: Path) -> None:
    done, _ = run_script("artifact", tmp_path, {"PATH": os.environ["PATH"], "EVALGATE_VENV": VENV,
                                               "EVALGATE_UPLOAD": "sometimes"})
    assert done.returncode == 2
    assert done.stdout.strip() == ("::error title=evalgate host mode::input 'upload-artifacts': "
                                   "expected true or false, got 'sometimes'")


def test_github_enterprise_server_skips_the_upload_with_a_notice(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "EVALGATE_VENV": VENV, "EVALGATE_RESULTS_DB": "r/results.db",
           "EVALGATE_ARTIFACT_NAME": "mine"}
    ghes, values = run_script("artifact", tmp_path, {**env, "GITHUB_SERVER_URL": "https://github.example.com"})
    assert ghes.returncode == 0 and values["upload"] == "false" and values["name"] == "mine"
    assert ghes.stdout.startswith("::notice title=evalgate host mode::GitHub Enterprise Server")
    cloud, values = run_script("artifact", tmp_path, {**env, "GITHUB_SERVER_URL": "https://octo.ghe.com"})
    assert cloud.returncode == 0 and values["upload"] == "true" and cloud.stdout == ""


def source_digest() -> str:
    """What install.sh records for this checkout: sha256 over ``sha256sum``'s lines for every source file,
    in byte order of the paths, first 16 hex digits."""
    roots = ["pyproject.toml", "setup.py", "evalgate", "entrypoint", "datasets"]
    files = []
    for root in roots:
        path = ROOT / root
        found = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
        files += [p.relative_to(ROOT).as_posix() for p in found
                  if "__pycache__" not in p.parts and p.suffix != ".pyc"]
    lines = "".join(f"{hashlib.sha256((ROOT / f).read_bytes()).hexdigest()}  {f}\n"
                    for f in sorted(files, key=lambda f: f.encode()))
    return hashlib.sha256(lines.encode()).hexdigest()[:16]


@pytest.mark.parametrize("tools", ["linux", "macos"])
def test_install_recognises_an_up_to_date_environment_with_either_hash_tool(tmp_path: Path, tools: str) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "evalgate").symlink_to(Path(sys.executable).parent / "evalgate")
    python = venv / "bin" / "python"  # this interpreter, which must never be asked to (re)install anything
    python.write_text(f'#!/bin/sh\ncase "$*" in *pip*) echo "pip must not run: $*"; exit 3;; esac\n'
                      f'exec {sys.executable} "$@"\n', encoding="utf-8")
    python.chmod(0o755)
    (venv / ".evalgate-deps").touch()
    (venv / ".evalgate-source").write_text(source_digest() + "\n", encoding="utf-8")
    path = os.environ["PATH"]
    if tools == "macos":
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        for tool in (*MAC_TOOLS, "date", "python3"):
            (bin_dir / tool).symlink_to(shutil.which(tool) or sys.executable)
        path = str(bin_dir)
    done, _ = run_script("install", tmp_path, {"PATH": path, "EVALGATE_VENV": str(venv), "EVALGATE_PYTHON": sys.executable})
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("evalgate host mode: cached environment (evalgate "), done.stdout
