"""A real model plays a simulated user (docs/conversations.md): SmolLM2 behind llama.cpp's server writes the
user's messages and judges the goal, the loopback memory agent answers. A 135M model's messages and
verdicts are what they are; the test asserts what evalgate guarantees whatever the model writes: every
user message is text of its own (no fence, no role label, no prompt echo), the conversation stops within
``max_turns``, and the results agree with the exit status."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.servers.memory_agent import HISTORY_PATH, MemoryAgent

from .harness import Run, run_evalgate

DATASET = """\
- id: simulated-name
  goal: Tell the assistant your name is Ana, then ask it what your name is.
  simulated_user:
    persona: Ana, a friendly new user who writes short messages.
    max_turns: 2
"""


def describe(run: Run) -> str:
    turns = ((run.results or {}).get("results") or [{}])[0].get("conversation")
    return f"exit {run.returncode} after {run.seconds:.0f}s\nturns: {json.dumps(turns)[:3000]}\n{run.stderr[-2000:]}"


@pytest.mark.realmodel
@pytest.mark.timeout(400)
def test_the_real_model_plays_a_simulated_user(llama_server: str, tmp_path: Path) -> None:
    (tmp_path / "cases.yaml").write_text(DATASET)
    with MemoryAgent() as agent:
        (tmp_path / "evalgate.yaml").write_text(
            f"target: http\ntarget_url: {agent.base_url}{HISTORY_PATH}\ntarget_response_map: {{output: reply}}\n")
        run = run_evalgate(["-c", "evalgate.yaml", "-d", "cases.yaml", "--concurrency", "1", "--api-retries", "1"],
                           workdir=tmp_path, judge_url=llama_server, timeout=380)
    assert run.results is not None and run.returncode in (0, 1), describe(run)
    assert run.results["gate"]["exit_code"] == run.returncode, describe(run)
    case = run.results["results"][0]
    conversation = case["conversation"]
    assert conversation["simulated"] is True and 1 <= len(conversation["turns"]) <= 2, describe(run)
    for turn in conversation["turns"]:
        said = turn["input"]
        assert isinstance(said, str) and said.strip() and len(said) <= 4000, describe(run)
        assert "<<<UNTRUSTED" not in said and not said.lower().startswith("user:"), describe(run)
        assert "You are role-playing the user" not in said, describe(run)
    assert run.results["metadata"]["simulator"]["messages_written"] == len(conversation["turns"]), describe(run)
