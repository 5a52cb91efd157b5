"""The bundled live demo: demo agent + scripted judge (shipped in evalgate/demo) running datasets/live."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import jsonschema
import pytest

from evalgate.demo.agent import CHAT_PATH, agent_server
from evalgate.demo.judge import coverage, judge_server, terms, verdict
from evalgate.demo.live import main as demo_main
from evalgate.judges.output import schema_for
from evalgate.judges.parse import parse_verdict, schema_of
from evalgate.judges.prompts import TEMPLATES, render
from evalgate.model import Answer, Case


def test_demo_judge_replies_validate_for_every_template() -> None:
    case = Case(id="c", input="How many points did Maxey score?", expected_output="Maxey scored 30 points.",
                passing_criteria="states 30 points", retrieval_context=["Maxey: 30 points", "Schedule: 4 games"],
                verified_answer_summary="30 points", expected_answer_criteria="1. the number")
    answer = Answer(output="Maxey scored 30 points. The weather was nice.", tools_used=["get_game_log"])
    for template in TEMPLATES.values():
        prompt = render(template, case, answer)
        structured = verdict(prompt.messages[1]["content"], schema_for("openai", schema_of(template.verdict)))
        prompt_mode = verdict(prompt.messages_for("prompt")[1]["content"])
        assert structured == prompt_mode, template.name  # the same verdict whichever way the shape travels
        values = template.values(parse_verdict(json.dumps(structured), template.verdict), prompt.inputs)
        low, high = template.value_range
        assert all(low <= v <= high for v in values.values()), (template.name, values)


def test_demo_judge_scores_by_reference_coverage() -> None:
    assert terms("The Points, points! 46.8% of 880") == {"point", "46", "8", "880"}
    assert coverage("Pick up Caruso for steals", "Caruso leads in steals; pick him up") == 1.0
    assert coverage("Pick up Caruso for steals", "Start Reid") == 0.0
    case = Case(id="c", input="q", expected_output="Hold Giannis and check the injury report.")
    good = render(TEMPLATES["correctness"], case, Answer(output="Hold Giannis; check the official injury report."))
    bad = render(TEMPLATES["correctness"], case, Answer(output="Drop him."))
    assert verdict(good.messages[1]["content"])["score"] == 1.0
    assert verdict(bad.messages[1]["content"])["score"] == 0.0


def test_demo_servers_speak_their_protocols() -> None:
    with agent_server() as agent, judge_server(api_key="demo-key-123") as judge, httpx.Client(timeout=5) as client:
        reply = client.post(agent.base_url + CHAT_PATH, json={"message": "Is Brunson playing?"}).json()
        denied = client.post(judge.base_url + "/v1/chat/completions", json={"model": "m", "messages": []})
        bad = client.post(agent.base_url + CHAT_PATH, json={"query": "x"})
    assert reply["tools_used"] == ["get_espn_player_status"] and "active tonight" in reply["response"]
    assert reply["usage"]["total_tokens"] == reply["usage"]["prompt_tokens"] + reply["usage"]["completion_tokens"]
    assert denied.status_code == 401 and bad.status_code == 422


def test_live_demo_passes_and_reruns_from_the_cache(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    with socket.socket() as probe:  # a port nobody else prefers (a demo judge a user left on 8012 stays out)
        probe.bind(("127.0.0.1", 0))
        monkeypatch.setenv("EVALGATE_DEMO_JUDGE_PORT", str(probe.getsockname()[1]))
    out = tmp_path / "live"
    assert demo_main(["--output-dir", str(out), "--progress", "none"]) == 0
    first = json.loads((out / "results.json").read_text())
    assert demo_main(["--output-dir", str(out), "--progress", "none"]) == 0
    second = json.loads((out / "results.json").read_text())
    schema = json.loads((Path(__file__).resolve().parents[2] / "evalgate/schemas/results.schema.json").read_text())
    jsonschema.validate(first, schema)
    assert first["status"] == "completed" and first["summary"]["total_passed"] == 6
    judged = {n for n, row in first["metrics"].items() if row.get("kind") == "judged"}
    assert {"correctness", "safety", "policy", "math", "faithfulness", "context_precision", "tool_calling"} <= judged
    assert first["summary"]["judge_calls"]["made"] > 0 and first["summary"]["judge_calls"]["cached"] == 0
    assert second["summary"]["judge_calls"]["made"] == 0
    assert second["summary"]["judge_calls"]["cached"] == first["summary"]["judge_calls"]["made"]
    assert "cost estimate" in capsys.readouterr().err
