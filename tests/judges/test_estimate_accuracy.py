"""The pre-run cost estimate (results.json ``metadata.estimate``) against what the run then spent (the call
ledger: ``summary.judge_calls`` and ``summary.tokens``), through the CLI, with the scripted demo judge over
loopback: a judged suite of recorded answers with a recorded conversation, and the multi-turn example's
conversations plus a simulated user against the example's agent.

The judge is reached as an ``openai`` provider with an unpriced model, so both sides count tokens as
ceil(characters / 4) (the demo judge's ``usage``; the estimate's tokenizer-free count). The bounds asserted
here are the ones docs/judges.md states."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalgate.cli.main import main as cli_main
from evalgate.demo.judge import judge_server

REPO = Path(__file__).resolve().parents[2]

JUDGED = textwrap.dedent("""\
    - id: steals
      input: Who is the best waiver pickup for steals this week?
      output: Pick up Alex Caruso. He averages 1.7 steals and plays four games this week.
      expected_output: Pick up Alex Caruso; he averages 1.7 steals and plays four games this week.
      passing_criteria: Recommends Alex Caruso for steals.
      metrics: [judge_score]
    - id: maxey
      input: How many points did Tyrese Maxey average over his last five games?
      output: Tyrese Maxey averaged 28.4 points. He scored 31 in his last game.
      expected_output: Tyrese Maxey averaged 28.4 points over his last five games.
      retrieval_context:
        - "Tyrese Maxey last five games: 31, 27, 25, 30 and 29 points (28.4 points average)."
        - "76ers schedule: four games this week, two at home."
      metrics: [faithfulness, context_precision, context_recall]
    - id: replan
      metrics: [knowledge_retention]
      turns:
        - user: "Who should I start tonight: Caruso or Reid?"
          output: Start Caruso, he is healthy.
          assert: [{criteria: Recommends one of the two players the user named.}]
        - user: "Caruso is now OUT — replan"
          output: Caruso is out, so start Reid.
          assert: [{criteria: "Recommends a healthy player from the two the user named, not Caruso."}]
    """)

PROMPT_BOUND = 0.05
"""Recorded answers: estimated prompt tokens within ±5 % of the judge's count."""
COMPLETION_BOUND = (1.0, 4.0)
"""Completion tokens: estimate / actual in [1, 4]: the estimate is a verdict with its reasoning at the
300-character cap; the demo judge writes about a third of that."""


def judge_settings(root: Path, judge_url: str, **settings: Any) -> Path:
    path = root / "evalgate.yaml"
    path.write_text(json.dumps({"judge_provider": "openai", "judge_model": "demo-judge",
                                "judge_base_url": judge_url + "/v1", **settings}))
    return path


def run(root: Path, config: Path, dataset: Path, out: str, *extra: str) -> dict[str, Any]:
    cli_main(["run", "--config", str(config), "--dataset", str(dataset), "--output-dir", str(root / out),
              "--progress", "none", *extra])
    return json.loads((root / out / "results.json").read_text())


def spent(document: dict[str, Any]) -> tuple[int, int, int]:
    """(calls, prompt tokens, completion tokens) the judge's model served (the simulator's calls included)."""
    tokens = document["summary"]["tokens"]
    return document["summary"]["judge_calls"]["made"], tokens["judge_prompt"], tokens["judge_completion"]


def estimated(document: dict[str, Any]) -> tuple[int, int, int]:
    estimate = document["metadata"]["estimate"]
    assert estimate["target_calls"] == 0 and not estimate["tokens_counted"]
    return (estimate["judge_calls"] + estimate["simulator_calls"], estimate["prompt_tokens"],
            estimate["completion_tokens"])


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-demo")
    monkeypatch.setenv("EVALGATE_CALIBRATION", "trust")


def test_a_judged_suite_of_recorded_answers_is_estimated_exactly(tmp_path: Path, env: None) -> None:
    (tmp_path / "cases.yaml").write_text(JUDGED)
    with judge_server() as judge:
        config = judge_settings(tmp_path, judge.base_url, target="recorded", judge_samples=2, repeat=2,
                                judge_temperature=0.7, stop_on_failed_turn=False)
        document = run(tmp_path, config, tmp_path / "cases.yaml", "out")
    calls, prompt, completion = spent(document)
    estimate = estimated(document)
    print("recorded judged suite: estimated", estimate, "actual", (calls, prompt, completion))
    # 2 repeats × 2 samples × (judge_score 1 + faithfulness, context_precision, context_recall 3 + turn criteria 2 +
    # knowledge_retention 1) + a step-writing call for each criteria text (declared without steps)
    assert calls == 2 * 2 * 7 + 2 and estimate[0] == calls
    assert abs(estimate[1] - prompt) <= PROMPT_BOUND * prompt
    assert COMPLETION_BOUND[0] * completion <= estimate[2] <= COMPLETION_BOUND[1] * completion


@pytest.fixture
def example_agent(tmp_path: Path) -> Iterator[str]:
    port_file = tmp_path / "agent.port"
    with port_file.open("w") as out:
        agent = subprocess.Popen([sys.executable, str(REPO / "examples" / "multi-turn" / "agent.py"), "--port", "0"],
                                 stdout=out)
    try:
        deadline = time.monotonic() + 30
        while not port_file.read_text().strip() and time.monotonic() < deadline:
            assert agent.poll() is None, "the example agent exited"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port_file.read_text().split()[0]}/chat"
    finally:
        agent.terminate()
        agent.wait(timeout=30)


SIMULATED = {"id": "simulated-name", "goal": "My name is Ana Lisboa. What is my name?",
             "simulated_user": {"persona": "A new user who introduces herself, then checks she is remembered.",
                                "max_turns": 2}}


def test_the_multi_turn_example_with_judged_turns_and_a_simulated_user(tmp_path: Path, env: None,
                                                                       example_agent: str) -> None:
    """The example's conversations, each turn with a judged check and the conversation with
    knowledge_retention, plus a simulated user: judge and simulator calls exact (every turn is sent, and the
    simulated user runs to its last turn); prompt tokens an upper bound (the agent's live answers are
    shorter than the estimate's assumed 300-token answers)."""
    cases = yaml.safe_load((REPO / "examples" / "multi-turn" / "conversations.yaml").read_text())
    for case in cases:
        case["metrics"] = ["knowledge_retention"]
        for turn in case["turns"]:
            turn["assert"] = [{"criteria": "Answers the user's message."}]
    (tmp_path / "cases.yaml").write_text(yaml.safe_dump([*cases, SIMULATED]))
    example = yaml.safe_load((REPO / "examples" / "multi-turn" / "evalgate.yaml").read_text())
    with judge_server() as judge:
        config = judge_settings(tmp_path, judge.base_url, **example, target_url=example_agent,
                                stop_on_failed_turn=False)
        document = run(tmp_path, config, tmp_path / "cases.yaml", "out")
    calls, prompt, completion = spent(document)
    estimate = estimated(document)
    print("multi-turn example + simulated user: estimated", estimate, "actual", (calls, prompt, completion))
    turns = sum(len(case["turns"]) for case in cases)
    simulated = next(r for r in document["results"] if r["id"] == "simulated-name")["conversation"]
    assert len(simulated["turns"]) == 2 and all(t["status"] == "passed" for t in simulated["turns"])
    # per turn one criteria call, per conversation one knowledge_retention, one step-writing call; the
    # simulated user: 2 messages written, a goal check after turn 1 and goal_completion on the whole (turn
    # 2's check: the same prompt)
    assert document["metadata"]["estimate"]["simulator_calls"] == 2
    assert calls == turns + len(cases) + 1 + 2 + 2 and estimate[0] == calls
    assert prompt <= estimate[1] <= 5 * prompt
    assert COMPLETION_BOUND[0] * completion <= estimate[2] <= COMPLETION_BOUND[1] * completion


def test_a_model_target_conversation_is_estimated_call_by_call(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The multi-turn example's conversations against a chat model (the ``openai`` target, a system prompt,
    the history resent each turn) whose answers are the estimate's assumed answer: model calls exact,
    prompt tokens within the bound."""
    from evalgate.judges.estimate import ASSUMED_ANSWER_TOKENS, FILLER_WORD
    from tests.servers.openai_server import OpenAIServer, Rule

    monkeypatch.setenv("OPENAI_API_KEY", "sk-model")
    cases = yaml.safe_load((REPO / "examples" / "multi-turn" / "conversations.yaml").read_text())
    for case in cases:
        case.pop("expected_keywords", None)
        for turn in case["turns"]:
            for key in ("expected_keywords", "tools_should_include", "rules"):
                turn.pop(key, None)
    (tmp_path / "cases.yaml").write_text(yaml.safe_dump(cases))
    with OpenAIServer(script=[Rule(reply=FILLER_WORD * ASSUMED_ANSWER_TOKENS)]) as model:
        config = tmp_path / "evalgate.yaml"
        config.write_text(json.dumps({"target": "openai", "target_provider": "openai", "target_model": "loopback-model",
                                      "target_url": model.base_url + "/v1",
                                      "target_system_prompt": "You are a fantasy basketball assistant."}))
        document = run(tmp_path, config, tmp_path / "cases.yaml", "out")
        served = model.chat_requests()
        usage = model.extra_stats()["usage"]
    estimate = document["metadata"]["estimate"]
    print("model target conversations: estimated", (estimate["target_calls"], estimate["prompt_tokens"]),
          "actual", (len(served), usage["prompt_tokens"]))
    assert len(served) == sum(len(case["turns"]) for case in cases) == estimate["target_calls"]
    assert not estimate["tokens_counted"] and estimate["judge_calls"] == 0
    assert abs(estimate["prompt_tokens"] - usage["prompt_tokens"]) <= PROMPT_BOUND * usage["prompt_tokens"]
