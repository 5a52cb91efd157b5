"""Item 3 of issue #12: in the Action every path stays inside the workspace or the runner's temp directory,
and nothing is ever written onto the runner's own files.

Each hostile setting comes from an input or from a pull request's ``evalgate.yaml``; each must stop the
step with exit 2 and an ``::error`` naming the setting, before anything is written (the runner's files keep
their bytes, apart from the step outputs the runner expects)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from evalgate.cli.action import run_action
from tests.hostile.helpers import write_cases

CASES = [{"id": "a", "input": "q", "output": "an answer", "expected_keywords": ["answer"]}]


@pytest.fixture
def job(tmp_path: Path) -> dict[str, str]:
    """A job's directories: the workspace (with a dataset), the runner temp with its file-command files."""
    workspace, temp = tmp_path / "work" / "repo", tmp_path / "work" / "_temp"
    commands = temp / "_runner_file_commands"
    commands.mkdir(parents=True)
    for name in ("set_output_1", "set_env_1", "step_summary_1"):
        (commands / name).write_text("")
    write_cases(workspace / "evals" / "cases.json", CASES)
    return {"GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(workspace), "RUNNER_TEMP": str(temp),
            "GITHUB_OUTPUT": str(commands / "set_output_1"), "GITHUB_ENV": str(commands / "set_env_1"),
            "GITHUB_STEP_SUMMARY": str(commands / "step_summary_1"), "GITHUB_EVENT_NAME": "push",
            "GITHUB_REPOSITORY": "o/r", "INPUT_DATASET": "evals", "INPUT_UPLOAD-ARTIFACTS": "false",
            "INPUT_COMMENT": "never", "INPUT_BASELINE": "none", "INPUT_PROGRESS": "none"}


def step(env: dict[str, str]) -> tuple[int, list[str]]:
    lines: list[str] = []
    return run_action(env, emit=lines.append), lines


def refused(env: dict[str, str], setting: str) -> str:
    """Run the step; it must exit 2 with one ``::error`` naming ``setting``; returns that line."""
    before = {name: Path(env[name]).read_bytes() for name in ("GITHUB_ENV", "GITHUB_STEP_SUMMARY")}
    code, lines = step(env)
    errors = [line for line in lines if line.startswith("::error")]
    assert code == 2 and len(errors) == 1, lines
    assert setting in errors[0], errors[0]
    assert {name: Path(env[name]).read_bytes() for name in before} == before  # nothing written there
    outputs = Path(env["GITHUB_OUTPUT"]).read_text()
    assert "exit-code" in outputs and "SQLite" not in outputs  # only the outputs the runner expects
    assert not (Path(env["GITHUB_WORKSPACE"]).parent / "x").exists()
    return errors[0]


def test_output_dir_above_the_workspace_is_refused(job: dict[str, str]) -> None:
    refused({**job, "INPUT_OUTPUT-DIR": "../x"}, "input 'output-dir'")


def test_output_dir_from_a_pull_requests_config_is_refused(job: dict[str, str]) -> None:
    workspace = Path(job["GITHUB_WORKSPACE"])
    (workspace / "evalgate.yaml").write_text("output_dir: ../x\n")
    refused(job, "evalgate.yaml: output_dir")


def test_db_on_the_step_output_file_is_refused(job: dict[str, str]) -> None:
    line = refused({**job, "INPUT_DB": job["GITHUB_OUTPUT"]}, "input 'db'")
    assert "runner's own file" in line


def test_db_relative_path_into_the_file_command_directory_is_refused(job: dict[str, str]) -> None:
    refused({**job, "INPUT_DB": "../_temp/_runner_file_commands/results.db"}, "input 'db'")


def test_absolute_paths_elsewhere_are_refused(job: dict[str, str], tmp_path: Path) -> None:
    refused({**job, "INPUT_DB": str(tmp_path / "elsewhere.db")}, "input 'db'")
    outside = write_cases(tmp_path / "outside.json", CASES)
    refused({**job, "INPUT_DATASET": str(outside)}, "input 'dataset'")
    refused({**job, "INPUT_OUTPUTS-FILE": str(outside)}, "input 'outputs-file'")
    refused({**job, "INPUT_BASELINE": str(tmp_path / "results.json")}, "input 'baseline'")
    template = tmp_path / "comment.md.j2"
    template.write_text("{{ verdict }}")
    refused({**job, "INPUT_COMMENT-TEMPLATE": str(template)}, "input 'comment-template'")


def test_links_out_of_the_workspace_are_refused(job: dict[str, str], tmp_path: Path) -> None:
    workspace = Path(job["GITHUB_WORKSPACE"])
    results = workspace / "evalgate-results"
    results.mkdir()
    os.symlink(job["GITHUB_OUTPUT"], results / "results.json")  # a link committed in the pull request
    refused(job, "output_dir")
    (results / "results.json").unlink()
    write_cases(tmp_path / "secret-cases.json", CASES)
    os.symlink(tmp_path / "secret-cases.json", workspace / "evals" / "linked.json")  # a dataset file linked out
    refused(job, "input 'dataset'")


def test_a_glob_climbing_out_after_a_wildcard_is_refused(job: dict[str, str], tmp_path: Path) -> None:
    write_cases(tmp_path / "work" / "other.json", CASES)
    refused({**job, "INPUT_DATASET": "ev*/../../other.json"}, "input 'dataset'")


def test_the_workspace_and_the_runner_temp_directory_are_allowed(job: dict[str, str]) -> None:
    code, lines = step({**job, "INPUT_OUTPUT-DIR": os.path.join(job["RUNNER_TEMP"], "evalgate"),
                        "INPUT_DB": "results/history.db"})
    assert code == 0, lines
    assert json.loads((Path(job["RUNNER_TEMP"]) / "evalgate" / "results.json").read_text())["gate"]["passed"]
    assert (Path(job["GITHUB_WORKSPACE"]) / "results" / "history.db").is_file()


def test_a_symlinked_default_config_is_refused_before_it_is_read(job: dict[str, str], tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #22: ``./evalgate.yaml`` committed as a link to a file outside the workspace is never opened."""
    secret = tmp_path / "outside.yaml"
    secret.write_text("dataset: evals\n")
    workspace = Path(job["GITHUB_WORKSPACE"])
    (workspace / "evalgate.yaml").symlink_to(secret)
    opened: list[str] = []
    real_open = Path.open

    def watch(self: Path, *args: object, **kwargs: object) -> object:
        opened.append(os.path.realpath(self))
        return real_open(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "open", watch)
    line = refused(job, "evalgate.yaml in the workspace")
    assert "outside" in line and str(secret) not in opened


def test_a_judge_cache_outside_the_workspace_is_refused(job: dict[str, str], tmp_path: Path) -> None:
    refused({**job, "INPUT_JUDGE-CACHE": str(tmp_path)}, "input 'judge-cache'")
