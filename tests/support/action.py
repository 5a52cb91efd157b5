"""The GitHub Actions runner, emulated for the Action's entry module: the environment a Docker action step gets
(every input of action.yml as ``INPUT_<NAME>``, ``GITHUB_*`` variables, a real webhook payload from
``@octokit/webhooks-examples`` at ``GITHUB_EVENT_PATH``, ``GITHUB_OUTPUT`` / ``GITHUB_STEP_SUMMARY`` files), the
process run as the runner runs it (``python -P -m entrypoint.main``), and the runner's reading of what it printed.
Used by the end-to-end tests of tests/e2e/ and by every test that runs the Action whole.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
ACTION_YML = REPO_ROOT / "action.yml"
NODE_DIR = REPO_ROOT / "tests" / "node"
NODE_MODULES = NODE_DIR / "node_modules"
EXAMPLES = NODE_MODULES / "@octokit" / "webhooks-examples" / "api.github.com" / "index.json"
PASSING = ("brand-mentions/fixtures.yaml",)
FAILING = ("failing/brand-mentions-regressions.yaml",)
CRITICAL_CASE = "fail_004_competitor_flagged_mine"
TOKEN = "ghs_evalgateTestToken0123456789abcdef"
JUDGE_KEY = "sk-test-judge-key-0123456789abcdef"
BASE_SHA = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"  # the GITHUB_SHA of runner_env

needs_examples = pytest.mark.skipif(
    not EXAMPLES.is_file(), reason="needs tests/node/node_modules/@octokit/webhooks-examples: run `npm ci` in tests/node")


def action_inputs() -> dict[str, str]:
    """Every input of action.yml with its default (``""`` when it has none)."""
    meta = yaml.safe_load(ACTION_YML.read_text(encoding="utf-8"))
    return {name: str(spec.get("default", "")) for name, spec in meta["inputs"].items()}


def webhook_example(event: str, action: str | None = None) -> dict[str, Any]:
    """The first ``@octokit/webhooks-examples`` payload of ``event`` (with ``action``)."""
    if not EXAMPLES.is_file():
        pytest.skip("needs @octokit/webhooks-examples: run `npm ci` in tests/node")
    for entry in json.loads(EXAMPLES.read_text(encoding="utf-8")):
        if entry["name"] == event:
            for example in entry["examples"]:
                if action is None or example.get("action") == action:
                    return copy.deepcopy(example)
    raise LookupError(f"no {event}/{action} example")


def parse_file_command(text: str) -> dict[str, str]:
    """Parse a GITHUB_OUTPUT file as the runner does: ``name=value`` or ``name<<DELIM`` … ``DELIM``."""
    values: dict[str, str] = {}
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    index = 0
    while index < len(lines):
        line = lines[index]
        heredoc, equals = line.find("<<"), line.find("=")
        if equals != -1 and (heredoc == -1 or equals < heredoc):
            values[line[:equals]] = line[equals + 1:]
            index += 1
            continue
        assert heredoc > 0, f"invalid output line {line!r}"
        name, delimiter = line[:heredoc], line[heredoc + 2:]
        assert name and delimiter
        end = lines.index(delimiter, index + 1)  # ValueError = "Matching delimiter not found"
        values[name] = "\n".join(lines[index + 1:end])
        index = end + 1
    return values


def workflow_commands(stdout: str) -> list[tuple[str, str]]:
    """(command, rest) for every workflow command the runner would process, honouring stop-commands."""
    found: list[tuple[str, str]] = []
    stop_token: str | None = None
    for raw in stdout.splitlines():
        line = raw.lstrip()
        if stop_token is not None:
            if line == f"::{stop_token}::":
                stop_token = None
            continue
        match = re.match(r"::([A-Za-z-]+)( [^:]*)?::(.*)", line)
        if not match:
            continue
        if match[1] == "stop-commands":
            stop_token = match[3]
            continue
        found.append((match[1], (match[2] or "").strip() + "::" + unescape_data(match[3])))
    return found


def unescape_data(message: str) -> str:
    """The runner's decoding of a command message: ``%0D``, ``%0A``, then ``%25`` last."""
    return message.replace("%0D", "\r").replace("%0A", "\n").replace("%25", "%")


def annotation_props(rest: str) -> dict[str, str]:
    props_text = rest.split("::", 1)[0]
    return dict(item.split("=", 1) for item in props_text.split(",") if "=" in item)


@dataclass
class Workspace:
    """A runner-like layout: workspace, workflow dir (event.json) and file-command files."""

    root: Path

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    @property
    def workflow(self) -> Path:
        return self.root / "workflow"

    @property
    def file_commands(self) -> Path:
        return self.root / "file_commands"

    @property
    def output_file(self) -> Path:
        return self.file_commands / "set_output_6f0c"

    @property
    def summary_file(self) -> Path:
        return self.file_commands / "step_summary_6f0c"

    def outputs(self) -> dict[str, str]:
        return parse_file_command(self.output_file.read_text(encoding="utf-8"))

    def summary(self) -> str:
        return self.summary_file.read_text(encoding="utf-8")

    def reset_files(self) -> None:
        for path in (self.output_file, self.summary_file):
            path.write_text("", encoding="utf-8")


def make_workspace(root: Path, datasets: tuple[str, ...]) -> Workspace:
    """Copy the named files of the repository's ``datasets/`` into ``<workspace>/datasets/``."""
    ws = Workspace(root)
    for directory in (ws.workspace, ws.workflow, ws.file_commands):
        directory.mkdir(parents=True, exist_ok=True)
    for name in datasets:
        target = ws.workspace / "datasets" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO_ROOT / "datasets" / name, target)
    ws.reset_files()
    return ws


def runner_env(ws: Workspace, *, event_name: str, payload: Mapping[str, Any] | None, inputs: Mapping[str, str],
               api_url: str, extra: Mapping[str, str] | None = None,
               paths: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a Docker action step. ``paths`` maps the runner directories to what the process
    sees (container paths for the image test); by default the host paths."""
    paths = dict(paths or {"workspace": str(ws.workspace), "workflow": str(ws.workflow),
                           "file_commands": str(ws.file_commands)})
    if payload is not None:
        (ws.workflow / "event.json").write_text(json.dumps(payload), encoding="utf-8")
    repository = (payload or {}).get("repository", {}).get("full_name", "octo/evalgate-demo")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(ws.root),
        "GITHUB_ACTIONS": "true",
        "CI": "true",
        "GITHUB_WORKSPACE": paths["workspace"],
        "GITHUB_EVENT_NAME": event_name,
        "GITHUB_OUTPUT": f"{paths['file_commands']}/{ws.output_file.name}",
        "GITHUB_STEP_SUMMARY": f"{paths['file_commands']}/{ws.summary_file.name}",
        "GITHUB_REPOSITORY": repository,
        "GITHUB_SHA": BASE_SHA,
        "GITHUB_REF": "refs/pull/2/merge" if event_name.startswith("pull_request") else "refs/heads/main",
        "GITHUB_RUN_ID": "4242",
        "GITHUB_RUN_ATTEMPT": "1",
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_API_URL": api_url,
        "GITHUB_RETENTION_DAYS": "30",
        "PYTHONPATH": str(REPO_ROOT),
    }
    if payload is not None:
        env["GITHUB_EVENT_PATH"] = f"{paths['workflow']}/event.json"
    values = action_inputs()
    values.update(inputs)
    for name, value in values.items():
        if value == "${{ github.token }}":
            value = TOKEN
        env["INPUT_" + name.replace(" ", "_").upper()] = value
    env.update(extra or {})
    return env


def run_entrypoint(ws: Workspace, env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-P", "-m", "entrypoint.main", *args], env=dict(env), cwd=ws.workspace,
                          capture_output=True, text=True, timeout=240, check=False)


def case_lines(path: Path, key: str = "intent_id") -> dict[str, int]:
    """Case id → 1-based line where its list item starts (``  - `` at the top level of the list)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("  - ")]
    found: dict[str, int] = {}
    for position, start in enumerate(starts):
        end = starts[position + 1] if position + 1 < len(starts) else len(lines)
        for line in lines[start:end]:
            match = re.match(rf"\s*-?\s*{key}:\s*\"?([^\"\s]+)", line)
            if match:
                found[match[1]] = start + 1
    return found


def secret_free(text: str, *secrets: str) -> bool:
    """True when no secret appears in ``text`` except on its own ``::add-mask::`` line."""
    for line in text.splitlines():
        if line.startswith("::add-mask::"):
            continue
        if any(secret in line for secret in secrets):
            return False
    return True


def git(cwd: Path, *args: str) -> str:
    """``git *args`` in ``cwd`` (a fixed author); its output, stripped."""
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", *args], cwd=cwd, check=True,
                          capture_output=True, text=True, timeout=60).stdout.strip()


def commit_workspace(workspace: Path) -> str:
    """Make ``workspace`` a git repository with everything in it committed on a branch; the commit's sha."""
    git(workspace, "init", "-q", "-b", "feature")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-qm", "the pull request's code")
    return git(workspace, "rev-parse", "HEAD")


# the workflow commands actions/runner registers (runner_parse reads no other)
REGISTERED = {"error", "warning", "notice", "add-mask", "stop-commands", "set-output", "debug", "group", "echo"}


def unescape_property(text: str) -> str:
    """The runner's decoding of a command property: ``%0D``, ``%0A``, ``%3A``, ``%2C``, then ``%25`` last."""
    for escaped, raw in (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%")):
        text = text.replace(escaped, raw)
    return text


def runner_parse(line: str) -> tuple[str, dict[str, str], str] | None:
    """(command, properties, data) as the runner would see ``line``, or None for plain output."""
    trimmed = line.lstrip()
    if trimmed.startswith("::"):
        end = trimmed.find("::", 2)
        if end >= 0:
            info = trimmed[2:end]
            name, _, props = info.partition(" ")
            if name in REGISTERED:
                properties = {}
                for pair in filter(None, props.strip().split(",")):
                    key, sep, value = pair.partition("=")
                    if sep and key and value:
                        properties[key] = unescape_property(value)
                return name, properties, unescape_data(trimmed[end + 2:])
    start = line.find("##[")
    if start >= 0:
        close = line.find("]", start)
        if close >= 0:
            name = line[start + 3: close].split(" ")[0]
            if name in REGISTERED:
                return name, {}, line[close + 1:]
    return None
