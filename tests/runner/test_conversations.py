"""Conversation cases (``turns:``) and simulated users through the CLI, against real loopback agents:
the memory agent over http (history, a conversation id in the body, in a header, or taken from the
agent's first reply), a command target, and the OpenAI-compatible server as a model target."""

from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli.main import main as cli_main
from evalgate.demo.judge import judge_server
from tests.servers.agent_server import AgentReply, AgentServer
from tests.servers.memory_agent import HISTORY_PATH, SESSION_PATH, MemoryAgent, facts_of, learn, reply_to
from tests.servers.openai_server import Judge, OpenAIServer, Rule
from tests.support.conversations import NAME_CONVERSATION

ONLY_CONVERSATION = NAME_CONVERSATION[:NAME_CONVERSATION.index("- id: single-turn")]


def write(root: Path, dataset: str, **settings: Any) -> tuple[Path, Path]:
    (root / "cases.yaml").write_text(dataset)
    (root / "evalgate.yaml").write_text(json.dumps(settings))
    return root / "cases.yaml", root / "evalgate.yaml"


def run(root: Path, *extra: str, out: str = "out") -> tuple[int, dict[str, Any]]:
    code = cli_main(["run", "--config", str(root / "evalgate.yaml"), "--dataset", str(root / "cases.yaml"),
                     "--output-dir", str(root / out), "--progress", "none", *extra])
    return code, json.loads((root / out / "results.json").read_text())


def by_id(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in document["results"]}


def test_the_memory_agent_itself() -> None:
    facts: dict[str, str] = {}
    assert learn(facts, "my name is Ana. my city is Porto!") and facts == {"name": "Ana", "city": "Porto"}
    assert reply_to("What is my city?", facts) == ("Your city is Porto.", ["recall"])
    assert reply_to("What is my dog?", facts) == ("I don't know your dog.", ["recall"])
    assert facts_of([{"role": "assistant", "content": "my name is Bot"}, {"role": "user", "content": "my name is X"}]) \
        == {"name": "X"}


def test_http_history_conversation_passes_and_sends_the_whole_history(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    with MemoryAgent() as agent:
        write(tmp_path, NAME_CONVERSATION, target="http", target_url=agent.base_url + HISTORY_PATH,
              target_response_map={"output": "reply"})
        code, document = run(tmp_path)
        bodies = agent.json_bodies([HISTORY_PATH])
    assert code == 0, document["gate"]
    case = by_id(document)["remembers-name"]
    assert case["status"] == "passed" and case["metrics"]["conversation_turns"]["value"] == 1.0
    turns = case["conversation"]["turns"]
    assert [t["turn"] for t in turns] == [1, 2, 3, 4] and turns[2]["output"] == "Your name is Ana."
    assert turns[2]["metrics"]["keyword_coverage"]["value"] == 1.0 and turns[0]["tools_used"] == ["remember"]
    assert case["input"] == "Hello, my name is Ana." and "Your name is Ana." in case["output"]
    # the whole-conversation expectation (keywords over every answer) ran on the joined answers
    assert case["metrics"]["keyword_coverage"]["value"] == 1.0
    conversation = [b for b in bodies if "messages" in b]
    assert len(conversation) == 4
    third = conversation[2]
    assert third["message"] == "What is my name?"
    assert [m["role"] for m in third["messages"]] == ["user", "assistant", "user", "assistant", "user"]
    assert third["messages"][1] == {"role": "assistant", "content": "Noted, I will remember that."}
    single = [b for b in bodies if "messages" not in b]
    assert single == [{"message": "What is my name?"}]  # a single-turn case's request is unchanged


def test_a_forgetful_agent_fails_naming_the_turn_and_the_conversation_stops(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with MemoryAgent(forget=True) as agent:
        write(tmp_path, NAME_CONVERSATION, target="http", target_url=agent.base_url + HISTORY_PATH,
              target_response_map={"output": "reply"})
        code, document = run(tmp_path)
        sent = len(agent.json_bodies([HISTORY_PATH]))
    assert code == 1
    console = capsys.readouterr().out
    assert "turn 3 “What is my name?” failed: keyword_coverage 0.000 (needs ≥ 0.6): missing keywords: Ana" in console
    case = by_id(document)["remembers-name"]
    assert case["status"] == "failed"
    assert case["conversation"]["failed_turn"] == 3 and case["conversation"]["stopped"] is True
    assert len(case["conversation"]["turns"]) == 3 and sent == 3 + 1  # turn 4 was not sent
    turns = case["metrics"]["conversation_turns"]
    assert turns["value"] == pytest.approx(2 / 4) and turns["details"]["failed_turn"] == 3
    assert turns["reason"].startswith("turn 3 failed: keyword_coverage")
    assert any(r.startswith("conversation_turns: turn 3 failed") for r in case["reasons"])
    # every report shows the failed turn and the transcript
    markdown = tmp_path / "report.md"
    assert cli_main(["report", str(tmp_path / "out" / "results.json"), "-o", str(markdown)]) == 0
    text = markdown.read_text()
    assert "turn 3 “What is my name?” failed" in text
    assert "<details><summary>Transcript: 3 turn(s), turn 3 failed</summary>" in text
    assert "[turn 3 · failed] user: What is my name?" in text and "assistant: I don't know your name." in text
    html = tmp_path / "report.html"
    assert cli_main(["report", str(tmp_path / "out" / "results.json"), "-o", str(html)]) == 0
    page = html.read_text()
    assert '<details class="transcript" open><summary>Transcript: 3 turn(s), turn 3 failed</summary>' in page
    assert "assistant: I don&#39;t know your name." in page


def test_stop_on_failed_turn_false_sends_every_turn(tmp_path: Path) -> None:
    with MemoryAgent(forget=True) as agent:
        write(tmp_path, NAME_CONVERSATION, target="http", target_url=agent.base_url + HISTORY_PATH,
              target_response_map={"output": "reply"}, stop_on_failed_turn=False)
        code, document = run(tmp_path)
    case = by_id(document)["remembers-name"]
    assert code == 1 and len(case["conversation"]["turns"]) == 4 and case["conversation"]["stopped"] is False
    assert case["metrics"]["conversation_turns"]["value"] == pytest.approx(3 / 4)


@pytest.mark.parametrize("how", ["field", "header", "from-reply"])
def test_http_conversation_id_keeps_state_on_the_agent(tmp_path: Path, how: str) -> None:
    settings: dict[str, Any] = {"target_conversation": "id", "target_response_map": {"output": "reply"}}
    if how == "header":
        settings |= {"target_conversation_id_field": None, "target_conversation_id_header": "X-Conversation-Id"}
    if how == "from-reply":
        settings |= {"target_conversation_id_from": "conversation_id"}
    with MemoryAgent() as agent:
        write(tmp_path, ONLY_CONVERSATION, target="http", target_url=agent.base_url + SESSION_PATH, **settings)
        code, document = run(tmp_path)
        requests = agent.requests([SESSION_PATH])
    assert code == 0, document["gate"]
    case = by_id(document)["remembers-name"]
    conversation_ids = [json.loads(r.body).get("conversation_id") or r.headers.get("x-conversation-id")
                        for r in requests]
    bodies = [json.loads(r.body) for r in requests]
    assert len(bodies) == 4 and all("messages" not in b for b in bodies)  # the agent keeps the state
    if how == "from-reply":
        assert conversation_ids[0] is None and len(set(conversation_ids[1:])) == 1
        assert case["conversation"]["conversation_id"] == conversation_ids[1]
    else:
        assert len(set(conversation_ids)) == 1 and conversation_ids[0].startswith("eg-")
        if how == "header":
            assert all("conversation_id" not in b for b in bodies)


def test_an_agent_reply_without_the_conversation_id_errors_the_case(tmp_path: Path) -> None:
    with MemoryAgent() as agent:
        write(tmp_path, NAME_CONVERSATION, target="http", target_url=agent.base_url + SESSION_PATH,
              target_conversation="id", target_conversation_id_from="session.id",
              target_response_map={"output": "reply"})
        code, document = run(tmp_path)
    case = by_id(document)["remembers-name"]
    assert code == 1 and case["status"] == "errored"
    assert case["error"].startswith("turn 1: the agent's reply has no conversation id at 'session.id'")
    assert case["conversation"]["failed_turn"] == 1


COMMAND_AGENT = """\
import json, re, sys
case = json.load(sys.stdin)
messages = case.get("messages") or [{"role": "user", "content": case.get("input") or ""}]
facts = {}
for m in messages if "FORGET" not in case.get("metadata", {}) else messages[-1:]:
    if m["role"] == "user":
        for key, value in re.findall(r"\\bmy ([a-z ]+?) is ([^.!?]+)", m["content"], re.I):
            facts[key.lower()] = value
asked = re.search(r"what is my ([a-z ]+?)\\s*\\?", messages[-1]["content"], re.I)
answer = (f"Your {asked.group(1)} is {facts[asked.group(1).lower()]}." if asked and asked.group(1).lower() in facts
          else "Noted.")
print(json.dumps({"output": answer, "turn": case.get("turn")}))
"""


def test_command_target_receives_the_history_on_stdin(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(COMMAND_AGENT)
    dataset = ONLY_CONVERSATION.replace("      tools_should_include: [remember]\n", "").replace(
        "      tools_should_include: [recall]\n", "")
    write(tmp_path, dataset, target="command", target_command=[sys.executable, str(tmp_path / "agent.py")])
    code, document = run(tmp_path)
    case = by_id(document)["remembers-name"]
    assert code == 0, document["gate"]
    assert [t["output"] for t in case["conversation"]["turns"]] == ["Noted.", "Noted.", "Your name is Ana.", "Noted."]
    forgetful = dataset.replace("  evolution_type: multi_turn\n", "  evolution_type: multi_turn\n  metadata: {FORGET: 1}\n")
    write(tmp_path, forgetful, target="command", target_command=[sys.executable, str(tmp_path / "agent.py")])
    code, document = run(tmp_path, out="out2")
    assert code == 1 and by_id(document)["remembers-name"]["conversation"]["failed_turn"] == 3


def memory_model(body: dict[str, Any]) -> str:
    """A chat model with the memory agent's behaviour, reading the messages it was sent."""
    messages = body["messages"]
    return reply_to(messages[-1]["content"], facts_of(messages))[0]


def test_model_target_sends_the_full_message_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCAL_JUDGE_API_KEY", "sk-conv")
    dataset = ONLY_CONVERSATION.replace("      tools_should_include: [remember]\n", "").replace(
        "      tools_should_include: [recall]\n", "")
    with OpenAIServer(script=[Rule(compute=memory_model, usage={"prompt_tokens": 10, "completion_tokens": 5})]) as model:
        write(tmp_path, dataset, target="openai", target_provider="local", target_url=model.base_url + "/v1",
              target_model="loopback-judge", target_system_prompt="You are a helpful assistant.")
        code, document = run(tmp_path)
        requests = model.chat_requests()
    assert code == 0, document["gate"]
    conversation = requests
    assert len(conversation) == 4
    roles = [[m["role"] for m in r["messages"]] for r in conversation]
    assert roles[-1] == ["system", "user", "assistant", "user", "assistant", "user", "assistant", "user"]
    assert conversation[2]["messages"][-1]["content"] == "What is my name?"
    case = by_id(document)["remembers-name"]
    assert case["conversation"]["turns"][2]["output"] == "Your name is Ana."
    assert case["num_tokens"] == 4 * 15  # the turns' tokens add up


def test_recorded_conversations_and_validation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dataset = textwrap.dedent("""\
        - id: replan
          turns:
            - user: Who should I start tonight, Caruso or Reid?
              output: Start Caruso.
            - user: Caruso is now OUT — replan
              output: Then start Reid.
              expected_keywords: [Reid]
        """)
    write(tmp_path, dataset)
    code, document = run(tmp_path)
    assert code == 0 and document["results"][0]["conversation"]["turns"][1]["output"] == "Then start Reid."
    (tmp_path / "cases.yaml").write_text("- id: x\n  input: hi\n  turns:\n    - user: hello\n")
    assert cli_main(["validate", "--dataset", str(tmp_path / "cases.yaml")]) == 2
    assert "not 'input'" in capsys.readouterr().err
    (tmp_path / "cases.yaml").write_text("- id: x\n  simulated_user: {persona: a fan}\n")
    assert cli_main(["validate", "--dataset", str(tmp_path / "cases.yaml")]) == 2
    assert "simulated_user needs the case's 'goal'" in capsys.readouterr().err


SIMULATED = """\
- id: simulated-name
  goal: My name is Ana Lisboa. What is my name?
  simulated_user:
    persona: A new user who introduces herself and then checks that the assistant remembers her.
    max_turns: 3
"""


def simulated_run(tmp_path: Path, judge_url: str, agent_url: str, *extra: str, out: str = "out"
                  ) -> tuple[int, dict[str, Any]]:
    write(tmp_path, SIMULATED, target="http", target_url=agent_url + HISTORY_PATH,
          target_response_map={"output": "reply"}, judge_provider="local", judge_base_url=judge_url + "/v1")
    return run(tmp_path, *extra, out=out)


def test_a_simulated_user_played_by_the_demo_judge_reaches_its_goal_and_is_replayed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCAL_JUDGE_API_KEY", "sk-demo")
    monkeypatch.setenv("EVALGATE_CALIBRATION", "trust")  # goal_completion gates though its judge is not calibrated
    with judge_server() as judge, MemoryAgent() as agent:
        code, document = simulated_run(tmp_path, judge.base_url, agent.base_url)
        case = by_id(document)["simulated-name"]
        assert code == 0, document["gate"]
        turns = case["conversation"]["turns"]
        # the scripted user says its goal sentence by sentence; the goal is met once the agent recalls the name
        assert [t["input"] for t in turns] == ["My name is Ana Lisboa.", "What is my name?"]
        assert turns[1]["output"] == "Your name is Ana Lisboa."
        assert case["conversation"]["goal_met"] is True and case["conversation"]["simulated"] is True
        assert case["metrics"]["goal_completion"]["value"] == 1.0
        assert document["metadata"]["simulator"]["messages_written"] == 2
        assert not any(t.get("replayed") for t in turns)

        # a PR run with the base run as baseline replays the user's turns while the answers are unchanged
        code, again = simulated_run(tmp_path, judge.base_url, agent.base_url, "--baseline",
                                    str(tmp_path / "out" / "results.json"), out="pr")
        replayed = by_id(again)["simulated-name"]["conversation"]["turns"]
        assert code == 0 and [t.get("replayed") for t in replayed] == [True, True]
        assert "simulator" not in again["metadata"]  # no message was written

        # another user (the persona changed): nothing is replayed
        (tmp_path / "cases.yaml").write_text(SIMULATED.replace("A new user", "A returning user"))
        code, other = run(tmp_path, "--baseline", str(tmp_path / "out" / "results.json"), out="pr-other")
        assert code == 0 and not any(t.get("replayed") for t in by_id(other)["simulated-name"]["conversation"]["turns"])
        assert other["metadata"]["simulator"]["messages_written"] == 2

    # the agent now forgets: turn 1's answer is unchanged (replayed turn 2), then the answers differ and
    # the simulator writes the rest; the goal is never met and the case fails
    with judge_server() as judge, MemoryAgent(forget=True) as agent:
        code, forgetful = simulated_run(tmp_path, judge.base_url, agent.base_url, "--baseline",
                                        str(tmp_path / "out" / "results.json"), out="pr2")
    case = by_id(forgetful)["simulated-name"]
    turns = case["conversation"]["turns"]
    assert code == 1 and case["conversation"]["goal_met"] is False
    assert [t.get("replayed", False) for t in turns] == [True, True, False]
    assert turns[1]["output"] == "I don't know your name." and turns[2]["input"] == "Thank you, that is all I needed."
    assert case["metrics"]["goal_completion"]["status"] == "failed"


def test_a_simulated_user_without_a_judge_errors_its_case(tmp_path: Path) -> None:
    with MemoryAgent() as agent:
        write(tmp_path, SIMULATED, target="http", target_url=agent.base_url + HISTORY_PATH,
              target_response_map={"output": "reply"})
        code, document = run(tmp_path)
    case = by_id(document)["simulated-name"]
    assert code == 1 and case["status"] == "errored"
    assert case["error"].startswith("turn 1: a simulated user needs an LLM to play it")
    assert case["conversation"]["failed_turn"] == 1 and case["conversation"]["turns"][0]["status"] == "errored"


SEED002_MULTI_TURN = """\
suite: {kind: seed002}
cases:
  - id: agentic_replan_caruso
    category: agentic
    risk_level: high
    evolution_type: multi_turn
    turns:
      - input: "Who should I start tonight: Caruso or Reid?"
        expected_keywords: [Caruso]
      - input: "Caruso is now OUT — replan"
        expected_keywords: [Reid]
        rules: [{type: not_contains, value: "Start Caruso"}]
"""


def fanvise_replanner(payload: dict[str, Any]) -> AgentReply:
    """A FanVise-shaped supervisor that replans from the conversation it is sent."""
    said = " ".join(m["content"] for m in payload.get("messages", []) if m["role"] == "user")
    if "OUT" in payload["message"]:
        pick = "Reid" if "Reid" in said else "nobody I know of"
        return AgentReply(text=f"Caruso is out: start {pick}.", tools_used=["get_espn_player_status"])
    return AgentReply(text="Start Caruso over Reid tonight.", tools_used=["get_espn_player_status"])


def test_seed002_multi_turn_case_written_as_turns_runs_with_the_fanvise_variables(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "golden.yaml").write_text(SEED002_MULTI_TURN)
    with AgentServer(default=fanvise_replanner) as agent:
        monkeypatch.setenv("FANVISE_API_URL", agent.base_url + "/api/agent/chat")
        monkeypatch.setenv("FANVISE_EVAL_ACTIVE_TEAM_ID", "team-1")
        code = cli_main(["run", "-d", str(tmp_path / "golden.yaml"), "-o", str(tmp_path / "out"), "--progress", "none"])
        bodies = agent.bodies("/api/agent/chat")
    document = json.loads((tmp_path / "out" / "results.json").read_text())
    case = document["results"][0]
    assert code == 0, capsys.readouterr().out
    assert case["evolution_type"] == "multi_turn" and case["conversation"]["turns"][1]["output"] == "Caruso is out: start Reid."
    assert bodies[1]["activeTeamId"] == "team-1" and len(bodies[1]["messages"]) == 3
    assert document["breakdowns"]["evolution_type"]["multi_turn"]["passed"] == 1


def docs_blocks(language: str) -> list[str]:
    text = (Path(__file__).resolve().parents[2] / "docs" / "conversations.md").read_text()
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def test_the_docs_examples_validate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocks = docs_blocks("yaml")
    cases = [b for b in blocks if b.startswith("- id:") or "\n- id:" in b]
    assert len(cases) == 3  # the conversation, the simulated user, seed 002's migrated case
    for number, block in enumerate(cases):
        (tmp_path / f"case{number}.yaml").write_text(block)
        assert cli_main(["validate", "--dataset", str(tmp_path / f"case{number}.yaml")]) == 0, \
            capsys.readouterr().err
    config = next(b for b in blocks if "target_conversation: id" in b)
    metrics = next(b for b in blocks if "no_repeated_questions" in b)
    (tmp_path / "evalgate.yaml").write_text(config + metrics)
    assert cli_main(["validate", "--config", str(tmp_path / "evalgate.yaml"), "--dataset",
                     str(tmp_path / "case0.yaml")]) == 0, capsys.readouterr().err


def test_the_cost_estimate_counts_a_call_per_turn_and_the_growing_history() -> None:
    from evalgate.calls.costs import Price, count_message_tokens
    from evalgate.judges.estimate import ASSUMED_ANSWER_TOKENS as A
    from evalgate.judges.estimate import estimate_run
    from evalgate.model import Case

    case = Case.model_validate({"id": "c", "turns": [{"user": "a b"}, {"user": "c"}, {"user": "d e f"}]})
    simulated = Case.model_validate({"id": "s", "goal": "x", "simulated_user": {"persona": "p", "max_turns": 4}})

    def model_calls(which: Case) -> tuple[int, int]:
        estimate = estimate_run([which], lambda c: [], repeat=1, samples=1, judge_price=None, judging=False,
                                target_price=Price(1, 1), model_target=True)
        return estimate.target_calls, estimate.by_role["target"]["prompt_tokens"]

    calls, prompt = model_calls(case)
    assert calls == 3
    # each turn resends the history: turn 3 = a b, answer, c, answer, d e f (answers: A filler words each)
    answer = {"role": "assistant", "content": "word " * A}
    history = [{"role": "user", "content": "a b"}, answer, {"role": "user", "content": "c"}, answer,
               {"role": "user", "content": "d e f"}]
    assert prompt == sum(count_message_tokens(history[:end]) for end in (1, 3, 5))
    assert model_calls(simulated)[0] == 4

def test_a_code_check_reads_the_transcript(tmp_path: Path) -> None:
    (tmp_path / "checks.py").write_text(textwrap.dedent("""\
        def short_user(case, answer):
            \"\"\"Every user message under 40 characters.\"\"\"
            if answer.transcript is None:
                return 1.0
            users = [m["content"] for m in answer.transcript if m["role"] == "user"]
            return sum(len(u) < 40 for u in users) / len(users)
        """))
    dataset = ONLY_CONVERSATION + "  assert: [{check: 'file://checks.py:short_user', threshold: 1.0}]\n"
    with MemoryAgent() as agent:
        write(tmp_path, dataset, target="http", target_url=agent.base_url + HISTORY_PATH,
              target_response_map={"output": "reply"})
        code, document = run(tmp_path)
    assert code == 0 and document["results"][0]["metrics"]["short_user"]["value"] == 1.0


def test_turn_metrics_are_resolved_at_start_and_thresholds_may_name_them(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    typo = ONLY_CONVERSATION.replace("      expected_keywords: [Ana]\n", "      expected_keywords: [Ana]\n"
                                     "      metrics: [keyword_coverag]\n", 1)
    write(tmp_path, typo)
    assert cli_main(["validate", "--config", str(tmp_path / "evalgate.yaml"), "--dataset",
                     str(tmp_path / "cases.yaml")]) == 2
    assert "unknown metric 'keyword_coverag' (did you mean 'keyword_coverage'?)" in capsys.readouterr().err
    # a threshold on a metric only the turns compute (the case itself sets no tools) is not "matching no case"
    (tmp_path / "checks.py").write_text("def said_hello(case, answer):\n    return 'Noted' in answer.text\n")
    dataset = textwrap.dedent("""\
        - id: checked-turns
          turns:
            - user: Hello, my name is Ana.
              tools_should_include: [remember]
            - user: Thanks!
              assert: [{check: 'file://checks.py:said_hello'}]
        """)
    with MemoryAgent() as agent:
        write(tmp_path, dataset, target="http", target_url=agent.base_url + HISTORY_PATH,
              target_response_map={"output": "reply"}, metric_thresholds={"workflow": 1.0})
        code, document = run(tmp_path)
    turns = document["results"][0]["conversation"]["turns"]
    assert code == 0, capsys.readouterr()
    assert turns[1]["metrics"]["said_hello"]["value"] == 1.0
    assert turns[0]["metrics"]["workflow"]["threshold"] == {"min": 1.0}


def test_simulator_model_writes_the_users_messages_and_the_judge_decides_the_goal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A separate ``simulator_model`` on the judge's provider writes the user's messages (its prompt fences
    the agent's answers); the judge's own model scores the goal, here met only once the name is recalled."""
    monkeypatch.setenv("LOCAL_JUDGE_API_KEY", "sk-sim")
    lines = iter(["My name is Ana Lisboa.", '"What is my name?"', "user: Are you sure?"])
    script = [Rule(model="sim-model", compute=lambda body: next(lines)),
              Rule(judge=Judge(score=lambda prompt: 1.0 if "Your name is Ana Lisboa" in prompt else 0.0))]
    with OpenAIServer(script=script) as llm, MemoryAgent() as agent:
        write(tmp_path, SIMULATED, target="http", target_url=agent.base_url + HISTORY_PATH,
              target_response_map={"output": "reply"}, judge_provider="local", judge_base_url=llm.base_url + "/v1",
              judge_model="judge-model", simulator_model="sim-model")
        code, document = run(tmp_path)
        requests = llm.chat_requests()
    case = by_id(document)["simulated-name"]
    assert code == 0, document["gate"]
    # the simulator's quotes are stripped; the goal is met at turn 2, so the third line is never asked for
    assert [t["input"] for t in case["conversation"]["turns"]] == ["My name is Ana Lisboa.", "What is my name?"]
    simulator = [r for r in requests if r["model"] == "sim-model"]
    assert len(simulator) == 2 and all(r["model"] == "judge-model" for r in requests if r not in simulator)
    second = simulator[1]["messages"][-1]["content"]
    assert "A new user who introduces herself" in second and "<<<UNTRUSTED conversation id=" in second
    assert "assistant: Noted, I will remember that." in second
    assert document["metadata"]["simulator"] == {"provider": "local", "model": "sim-model", "messages_written": 2}


def test_a_turns_judged_check_may_show_the_conversation_so_far(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCAL_JUDGE_API_KEY", "sk-turn")
    dataset = textwrap.dedent("""\
        - id: judged-turn
          turns:
            - user: My name is Ana.
            - user: What is my name?
              assert:
                - criteria: Answers with the name the user gave earlier in the conversation.
                  fields: [transcript]
        """)
    seen: list[str] = []

    def score(prompt: str) -> float:
        seen.append(prompt)
        return 1.0 if "user: My name is Ana." in prompt and "assistant: Your name is Ana." in prompt else 0.0

    with OpenAIServer(script=[Rule(judge=Judge(score=score))]) as llm, MemoryAgent() as agent:
        write(tmp_path, dataset, target="http", target_url=agent.base_url + HISTORY_PATH,
              target_response_map={"output": "reply"}, judge_provider="local", judge_base_url=llm.base_url + "/v1")
        code, document = run(tmp_path)
    turn = document["results"][0]["conversation"]["turns"][1]
    assert code == 0, document["gate"]
    assert turn["metrics"]["case_criteria"]["value"] == 1.0 and len([p for p in seen if "Ana" in p]) == 1


def test_a_custom_target_reads_the_conversation_from_the_case_view(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(textwrap.dedent("""\
        from tests.servers.memory_agent import facts_of, reply_to

        class Agent:
            def answer(self, case):
                messages = case.get("messages") or [{"role": "user", "content": case.input}]
                return {"output": reply_to(messages[-1]["content"], facts_of(messages))[0],
                        "tools_used": [f"turn{case.get('turn')}"]}

        def make():
            return Agent()
        """))
    write(tmp_path, ONLY_CONVERSATION.replace("      tools_should_include: [remember]\n", "").replace(
        "      tools_should_include: [recall]\n", "      tools_should_include: [turn3]\n"),
        target="file://agent.py:make")
    code, document = run(tmp_path)
    turns = document["results"][0]["conversation"]["turns"]
    assert code == 0, document["gate"]
    assert turns[2]["output"] == "Your name is Ana." and turns[2]["tools_used"] == ["turn3"]


def test_a_body_template_sees_the_messages_and_the_turn(tmp_path: Path) -> None:
    template = ('{"message": {{ input | tojson }}, "messages": {{ messages | tojson }}, "turn": {{ turn | tojson }}, '
                '"conversation": {{ conversation_id | tojson }}}')
    with MemoryAgent() as agent:
        write(tmp_path, NAME_CONVERSATION, target="http", target_url=agent.base_url + HISTORY_PATH,
              target_response_map={"output": "reply"}, target_body_template=template)
        code, document = run(tmp_path)
        bodies = agent.json_bodies([HISTORY_PATH])
    assert code == 0, document["gate"]
    turns = sorted((b for b in bodies if b["turn"] is not None), key=lambda b: b["turn"])
    assert [b["turn"] for b in turns] == [1, 2, 3, 4] and len(turns[3]["messages"]) == 7
    assert all(b["conversation"] is None for b in bodies)  # history mode: no id
    assert [b for b in bodies if b["turn"] is None] == [
        {"message": "What is my name?", "messages": None, "turn": None, "conversation": None}]


def test_conversation_settings_read_from_the_environment(tmp_path: Path) -> None:
    from evalgate.config.settings import build_settings

    settings, _, _ = build_settings(env={"EVALGATE_TARGET_CONVERSATION": "id", "EVALGATE_STOP_ON_FAILED_TURN": "false",
                                         "EVALGATE_TARGET_CONVERSATION_ID_HEADER": "X-Conversation-Id",
                                         "EVALGATE_SIMULATOR_MODEL": "gpt-4o-mini"}, cwd=tmp_path)
    assert (settings.target_conversation, settings.stop_on_failed_turn, settings.target_conversation_id_header,
            settings.simulator_model) == ("id", False, "X-Conversation-Id", "gpt-4o-mini")
    assert (settings.target_history_field, settings.target_conversation_id_field) == ("messages", "conversation_id")


def test_knowledge_retention_judges_the_whole_transcript_when_listed(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCAL_JUDGE_API_KEY", "sk-kr")
    prompts: list[str] = []

    def score(prompt: str) -> float:
        prompts.append(prompt)
        return 1.0 if "assistant: Your name is Ana." in prompt else 0.25

    dataset = ONLY_CONVERSATION + "  metrics: [knowledge_retention]\n"
    with OpenAIServer(script=[Rule(judge=Judge(score=score))]) as llm, MemoryAgent() as agent:
        write(tmp_path, dataset, target="http", target_url=agent.base_url + HISTORY_PATH,
              target_response_map={"output": "reply"}, judge_provider="local", judge_base_url=llm.base_url + "/v1")
        code, document = run(tmp_path)
    case = document["results"][0]
    assert code == 0, document["gate"]
    assert case["metrics"]["knowledge_retention"]["value"] == 1.0
    assert "goal_completion" not in case["metrics"] and "role_adherence" not in case["metrics"]  # no goal, no role
    [prompt] = [p for p in prompts if "remembered what the user said" in p  # the run's (not its controls')
                and "assistant: Noted, I will remember that." in p]
    assert "user: Hello, my name is Ana.\n\nassistant: Noted, I will remember that." in prompt
