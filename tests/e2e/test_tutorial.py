"""docs/tutorial.md as a new user follows it: its files written as shown, its agent started, the demo judge
on loopback, `evalgate init` then `evalgate run` green; the broken agent fails the gate on the critical case
with its reason. Ports are ephemeral (the tutorial's 8000/8012 are replaced through the settings' variables)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from evalgate.cli.main import main as cli_main
from evalgate.demo.judge import judge_server

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "tutorial.md"
BLOCK = re.compile(r"```(?:python|yaml)\n# file: (?P<path>\S+)\n(?P<body>.*?)```", re.S)


def tutorial_files() -> dict[str, str]:
    return {m["path"]: m["body"] for m in BLOCK.finditer(TUTORIAL.read_text(encoding="utf-8"))}


OUTPUT = re.compile(r"```text\n(?P<body>.*?)```", re.S)


def shown_outputs() -> list[list[str]]:
    """The tutorial's output blocks (```text), each a list of lines."""
    return [m["body"].rstrip("\n").splitlines() for m in OUTPUT.finditer(TUTORIAL.read_text(encoding="utf-8"))]


def line_pattern(shown: str) -> re.Pattern[str]:
    """A shown line as a whole-line pattern: "…" stands for what changes between runs (a run id, a key)."""
    return re.compile("^" + ".*".join(re.escape(part) for part in shown.split("…")) + "$")


def unmatched(block: list[str], real: str) -> list[str]:
    """The shown lines that are not, whole, a line of the real output (in the same order)."""
    lines = real.splitlines()
    missing, at = [], 0
    for shown in block:
        pattern = line_pattern(shown)
        found = next((i for i in range(at, len(lines)) if pattern.match(lines[i])), None)
        if found is None:
            missing.append(shown)
        else:
            at = found + 1
    return missing


def start_agent(directory: Path) -> tuple[subprocess.Popen[str], str]:
    agent = subprocess.Popen([sys.executable, "agent.py"], cwd=directory, env={**os.environ, "PORT": "0"},
                             stdout=subprocess.PIPE, text=True)
    assert agent.stdout is not None
    line = agent.stdout.readline()
    url = re.search(r"http://\S+", line)
    assert url, line
    return agent, url.group(0)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.startswith(("EVALGATE_", "INPUT_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("EVALGATE_JUDGE_SHARED_CACHE", "none")  # the user-level shared judge cache stays out of tests
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_tutorial_runs_green_then_fails_on_the_broken_agent(
        project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["init"]) == 0 and cli_main(["run", "--progress", "none"]) == 0  # step 2
    (project / "evals" / "starter.yaml").unlink()
    files = tutorial_files()
    assert set(files) == {"agent.py", "evals/helpdesk.yaml", "evalgate.yaml"}
    for path, body in files.items():
        (project / path).write_text(body, encoding="utf-8")
    monkeypatch.setenv("LOCAL_JUDGE_API_KEY", "demo")
    agent, url = start_agent(project)
    try:
        monkeypatch.setenv("EVALGATE_TARGET_URL", url)
        with judge_server() as judge:
            assert cli_main(["validate", "--explain"]) == 0
            explained = capsys.readouterr().out
            assert "matches_expected_output" in explained and "keyword_coverage" in explained
            blocks = shown_outputs()
            assert len(blocks) == 3
            assert unmatched(blocks[0], explained) == [], explained
            code = cli_main(["run", "--progress", "none", "--judge-provider", "local",
                             "--judge-base-url", judge.base_url + "/v1"])
            green = capsys.readouterr()
            assert unmatched(blocks[1], green.err + green.out) == [], green.err + green.out  # stderr comes first
            document = json.loads((project / "evalgate-results" / "results.json").read_text())
            assert code == 0, document["gate"]
            assert document["summary"]["total_passed"] == 3
            assert all(r["metrics"]["matches_expected_output"]["status"] == "passed" for r in document["results"])
            gating = document["calibration"]["metrics"]["matches_expected_output"]  # gates from the first run
            assert gating["gating"] is True and gating["evidence"] == "controls", gating
            agent.terminate()
            agent.wait(10)
            broken = files["agent.py"].replace("Open a P1 ticket and call 555-0100: the on-call engineer answers "
                                               "within 15 minutes.", "Try again later.")
            assert broken != files["agent.py"]
            (project / "agent.py").write_text(broken, encoding="utf-8")
            agent, url = start_agent(project)
            monkeypatch.setenv("EVALGATE_TARGET_URL", url)
            code = cli_main(["run", "--progress", "none", "--judge-provider", "local",
                             "--judge-base-url", judge.base_url + "/v1"])
        out = capsys.readouterr().out
    finally:
        agent.terminate()
        agent.wait(10)
    assert code == 1
    shown = next((line for line in out.splitlines() if "critical case vpn-outage failed" in line), None)
    assert shown, out
    assert unmatched(blocks[2], out) == [], out  # the tutorial shows the verdict as the run prints it, line for line
    assert "rules: contains:P1: missing 'P1'" in shown  # every failing metric, the rule first
