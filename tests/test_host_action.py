"""host/action.yml (host mode) is generated from action.yml: same inputs and outputs, same entrypoint."""

from __future__ import annotations

from pathlib import Path

import yaml

from tools import host_action

ROOT = Path(__file__).resolve().parent.parent


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
    assert all(spec["value"] == f"${{{{ steps.run.outputs.{name} }}}}" for name, spec in host["outputs"].items())


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
    assert 'key="evalgate-host-deps-py${pyver}-${arch}-${digest}"' in script  # dependencies cached by the lock
    assert "RUNNER_TOOL_CACHE" in script
