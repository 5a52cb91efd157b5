"""One judge call for several metrics (suite option ``judge_combine``): against the loopback judge, the
metrics of a case that share their inputs are scored by one call whose verdict carries a score per metric,
with the same values as separate calls; off, every metric has its own call."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli.main import main as cli_main
from evalgate.judges.combined import combined_template
from evalgate.model import Answer, Case
from tests.servers.agent_server import AgentServer
from tests.servers.openai_server import Judge, OpenAIServer

KEY = "sk-combined-test-1357"
CASES = [
    # relevancy (passing_criteria) + actionability (category optimizer): question and answer only
    {"id": "opt-1", "input": "How should I rotate the API key?", "category": "optimizer",
     "passing_criteria": "gives a concrete next step", "metrics": ["relevancy"]},
    # correctness + math (category_metrics below): question, expected output and answer
    {"id": "audit-1", "input": "What is 12 times 4?", "category": "audit", "expected_output": "48"},
    # relevancy alone: nothing to share
    {"id": "plain-1", "input": "Where is the audit log?", "passing_criteria": "names the page", "metrics": ["relevancy"]},
]


def run(tmp_path: Path, combine: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], list[Any]]:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("EVALGATE_CALIBRATION", "trust")  # the cases' calls only (controls: test_judge_controls.py)
    work = tmp_path / ("on" if combine else "off")
    work.mkdir()
    (work / "cases.json").write_text(json.dumps(CASES))
    (work / "evalgate.yaml").write_text(
        f"options:\n  judge_combine: {str(combine).lower()}\ncategory_metrics:\n  audit: [correctness, math]\n"
        "  optimizer: [actionability]\n")
    with AgentServer({"rotate": "Open the key page and rotate it.", "12 times": "48",
                      "audit log": "Settings, then Audit log."}) as agent, \
            OpenAIServer(api_key=KEY, judge=Judge(score=0.95)) as judge, \
            contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = cli_main(["run", "--dataset", str(work / "cases.json"), "--config", str(work / "evalgate.yaml"),
                         "--target", "http", "--target-url", agent.base_url + "/api/agent/chat",
                         "--judge-provider", "openai", "--judge-base-url", judge.base_url + "/v1",
                         "--output-dir", str(work / "out"), "--progress", "none", "--no-cache"])
        requests = judge.chat_requests()
    assert code == 0
    return json.loads((work / "out" / "results.json").read_text()), requests


def values(document: dict[str, Any]) -> dict[str, Any]:
    return {(r["id"], name): (m["value"], m["status"]) for r in document["results"]
            for name, m in r["metrics"].items() if (m.get("details") or {}).get("method") == "judge"}


def test_one_call_per_case_for_metrics_sharing_inputs_with_the_same_verdicts(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    separate, separate_requests = run(tmp_path, False, monkeypatch)
    combined, combined_requests = run(tmp_path, True, monkeypatch)
    assert values(combined) == values(separate) and len(values(separate)) == 5
    assert len(separate_requests) == 5 and len(combined_requests) == 3  # opt-1: 2 → 1, audit-1: 2 → 1
    names = sorted(r["response_format"]["json_schema"]["name"] for r in combined_requests)
    assert names == ["actionability_and_relevancy_verdict", "correctness_and_math_verdict", "relevancy_verdict"]
    shared = next(r for r in combined_requests if "correctness_and_math" in r["response_format"]["json_schema"]["name"])
    assert list(shared["response_format"]["json_schema"]["schema"]["properties"]) == ["reasoning", "correctness", "math"]
    user = shared["messages"][1]["content"]
    assert user.count("<<<UNTRUSTED answer id=") == 1 and user.count("<<<UNTRUSTED expected output id=") == 1
    opt = next(r for r in combined["results"] if r["id"] == "opt-1")["metrics"]
    assert opt["relevancy"]["details"]["template_version"].startswith("combined@")
    tokens = (combined["summary"]["tokens"]["judge_prompt"], separate["summary"]["tokens"]["judge_prompt"])
    assert tokens[0] < tokens[1]


def test_a_combined_prompt_keeps_each_metrics_own_steps() -> None:
    prompt = combined_template(("relevancy", "safety")).render(
        Case(id="c", input="q?", passing_criteria=["be right"]), Answer(output="a"))
    user = prompt.messages[1]["content"]
    assert "relevancy: Relevancy to the question" in user and "safety: Is the advice safe" in user
    assert user.index("Case criteria") > user.index("safety:")  # static rubric first, the case after
    with pytest.raises(ValueError):
        combined_template(("relevancy",))
