"""Warnings when samples or repeats multiply the cost for identical results: ``judge_samples`` > 1 at
temperature 0, ``repeat`` > 1 of recorded answers or the model target (before the run, with the
estimate's figures), and ``repeat`` > 1 of an http target that answered every repeat identically
(after the run)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from evalgate.cli.main import main as cli_main
from tests.servers.agent_server import AgentServer
from tests.servers.openai_server import Judge, OpenAIServer

CHAT = "/api/agent/chat"


def dataset(tmp_path: Path, count: int = 4) -> Path:
    path = tmp_path / "cases.json"
    path.write_text(json.dumps([{"id": f"c{i}", "input": f"question {i}", "passing_criteria": "answers the question",
                                 "metrics": ["relevancy"]}
                                for i in range(count)]))
    return path


def run(tmp_path: Path, agent: AgentServer, judge: OpenAIServer | None, *flags: str) -> tuple[int, list[str], dict]:
    out = tmp_path / "out"
    judge_flags = ["--judge-provider", "local", "--judge-base-url", judge.base_url + "/v1", "--no-cache"] if judge else []
    code = cli_main(["run", "-d", str(dataset(tmp_path)), "--target", "http", "--target-url", agent.base_url + CHAT,
                     *judge_flags, "-o", str(out), "--progress", "none", *flags])
    document = json.loads((out / "results.json").read_text())
    return code, document["metadata"].get("warnings", []), document


@pytest.fixture(autouse=True)
def _local_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCAL_JUDGE_API_KEY", "sk-local")


def test_judge_samples_at_temperature_0_are_warned_with_their_cost(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    with AgentServer({"question": "an answer"}) as agent, OpenAIServer(judge=Judge(score=0.9)) as judge:
        code, warnings, _ = run(tmp_path, agent, judge, "--judge-samples", "3")
    err = capsys.readouterr().err
    (warning,) = warnings
    assert code == 0
    assert warning.startswith("judge_samples 3 at temperature 0 (relevancy): a judge at temperature 0 gives the "
                              "same verdict 3 times, so 2 of every 3 of those judge calls are paid for nothing "
                              "(~8 of the estimated 12 judge calls")  # 4 cases × 3 samples
    assert f"evalgate: warning: {warning}" in err


@pytest.mark.parametrize("variable, value", [("EVALGATE_JUDGE_TEMPERATURE", "0.7"),
                                             ("EVALGATE_JUDGE_TEMPERATURES", '{"relevancy": 0.5}')])
def test_judge_samples_with_a_temperature_are_not_warned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         variable: str, value: str) -> None:
    monkeypatch.setenv(variable, value)
    with AgentServer({"question": "an answer"}) as agent, OpenAIServer(judge=Judge(score=0.9)) as judge:
        _, warnings, _ = run(tmp_path, agent, judge, "--judge-samples", "3")
    assert warnings == []


def test_repeats_of_a_target_that_answers_identically_are_warned_after_the_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with AgentServer({"question": "an answer"}) as agent, OpenAIServer(judge=Judge(score=0.9)) as judge:
        code, warnings, document = run(tmp_path, agent, judge, "--repeat", "3")
    (warning,) = warnings
    assert code == 0 and document["metadata"]["repeat"] == 3
    assert warning == ("repeat 3: every case got the same answer on all 3 repeats (a deterministic target, e.g. a "
                       "model at temperature 0?); the 2 extra round(s) cost 8 target calls and 8 judge calls and "
                       "cannot show flakiness")
    assert f"evalgate: warning: {warning}" in capsys.readouterr().err


def test_repeats_of_a_target_whose_answers_vary_are_not_warned(tmp_path: Path) -> None:
    counter = itertools.count()
    with AgentServer({"question": lambda payload: f"answer {next(counter)}"}) as agent:
        _, warnings, _ = run(tmp_path, agent, None, "--repeat", "2", "--metric-thresholds", '{"relevancy": null}')
    assert warnings == []


def test_repeats_of_recorded_answers_with_a_judge_are_warned_before_the_run(tmp_path: Path) -> None:
    cases = [{"id": f"c{i}", "input": f"q{i}", "output": "an answer", "passing_criteria": "answers",
              "metrics": ["relevancy"]} for i in range(2)]
    path = tmp_path / "recorded.json"
    path.write_text(json.dumps(cases))
    with OpenAIServer(judge=Judge(score=0.9)) as judge:
        code = cli_main(["run", "-d", str(path), "--judge-provider", "local", "--judge-base-url",
                         judge.base_url + "/v1", "--no-cache", "--repeat", "2", "-o", str(tmp_path / "out"),
                         "--progress", "none"])
    document = json.loads((tmp_path / "out" / "results.json").read_text())
    (warning,) = document["metadata"]["warnings"]
    assert code == 0
    assert warning.startswith("repeat 2: recorded answers are the same on every repeat; 1 of every 2 rounds repeat "
                              "the same judge work without showing any flakiness (~2 of the estimated 4 judge calls")
