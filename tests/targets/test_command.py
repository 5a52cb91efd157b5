"""The command target: a local program per case, JSON in and out, no shell, with a timeout."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import pytest

from evalgate.cli.main import main as cli_main
from evalgate.errors import UserError
from evalgate.model import Answer, Case
from evalgate.targets.command import CommandTarget

AGENT = r'''
import json, sys
case = json.load(sys.stdin)
text = case["input"]
if "crash" in text:
    print("secret-free failure detail", file=sys.stderr)
    sys.exit(3)
if "garbage" in text:
    print("not json at all")
    sys.exit(0)
if "plain" in text:
    print(json.dumps("just the text"))
    sys.exit(0)
if "sleep" in text:
    import time
    time.sleep(30)
print(json.dumps({"answer": "echo: " + text, "tools_used": ["calc"], "sources": [{"title": "Doc"}],
                  "usage": {"total_tokens": 9}, "seen": case}))
'''


@pytest.fixture
def agent(tmp_path: Path) -> list[str]:
    script = tmp_path / "agent.py"
    script.write_text(AGENT, encoding="utf-8")
    return [sys.executable, str(script)]


def run(target: CommandTarget, *cases: Case) -> list[Answer]:
    async def go() -> list[Answer]:
        return list(await asyncio.gather(*(target.answer(c) for c in cases)))

    return asyncio.run(go())


def test_answer_json_on_stdout_is_mapped(agent: list[str]) -> None:
    target = CommandTarget(agent, timeout=10, eval_context={"team_name": "Bulls"})
    (answer,) = run(target, Case(id="c1", input="hello; rm -rf / $(whoami)", category="x"))
    assert answer.error is None
    assert answer.output == "echo: hello; rm -rf / $(whoami)"  # no shell: the text is data
    assert answer.tools_used == ["calc"] and answer.sources == ["Doc"] and answer.num_tokens == 9
    assert answer.latency_ms is not None and answer.latency_ms > 0


def test_case_json_on_stdin(agent: list[str], tmp_path: Path) -> None:
    echo = tmp_path / "echo.py"
    echo.write_text("import sys, json; d = json.load(sys.stdin); print(json.dumps({'output': json.dumps(d)}))")
    target = CommandTarget([sys.executable, str(echo)], timeout=10, eval_context={"active_team_id": "5"})
    (answer,) = run(target, Case(id="c9", input="q", category="waiver", expected_output="x", team_name="Knicks"))
    seen = json.loads(answer.output)
    assert seen["id"] == "c9" and seen["input"] == "q" and seen["category"] == "waiver"
    assert seen["context"] == {"activeTeamId": "5", "teamName": "Knicks"}


def test_a_json_string_is_the_answer_text(agent: list[str]) -> None:
    (answer,) = run(CommandTarget(agent, timeout=10), Case(id="c", input="plain please"))
    assert answer.output == "just the text"


def test_failures_are_errored_answers(agent: list[str]) -> None:
    crash, garbage = run(CommandTarget(agent, timeout=10), Case(id="a", input="crash"), Case(id="b", input="garbage"))
    assert crash.error == "command exited with status 3: secret-free failure detail"
    assert garbage.error is not None and garbage.error.startswith("command printed invalid JSON")


def test_timeout_kills_the_program(agent: list[str]) -> None:
    started = time.monotonic()
    (answer,) = run(CommandTarget(agent, timeout=0.5), Case(id="slow", input="sleep"))
    assert answer.error == "command timed out after 0.5s and was killed"
    assert time.monotonic() - started < 30  # killed, not waited for (no speed is asserted)


def test_missing_program_is_a_user_error() -> None:
    with pytest.raises(UserError, match="target_command: program 'no-such-program-xyz' not found"):
        CommandTarget(["no-such-program-xyz"], timeout=1)
    with pytest.raises(UserError, match="target_command"):
        CommandTarget([], timeout=1)


def test_command_target_end_to_end(agent: list[str], tmp_path: Path) -> None:
    dataset = tmp_path / "cases.json"
    dataset.write_text(json.dumps([{"id": "a", "input": "hello", "expected_keywords": ["echo"]},
                                   {"id": "b", "input": "crash now", "expected_keywords": ["echo"]}]))
    code = cli_main(["run", "--dataset", str(dataset), "--target", "command", "--target-command", json.dumps(agent),
                     "--output-dir", str(tmp_path / "out"), "--progress", "none"])
    document = json.loads((tmp_path / "out" / "results.json").read_text())
    statuses = {r["id"]: r["status"] for r in document["results"]}
    assert code == 1
    assert statuses == {"a": "passed", "b": "errored"}
    assert document["metadata"]["target"]["kind"] == "command"
