"""The http target against the loopback agent server (seed 002 and 004 shapes)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from evalgate.calls.costs import CostLedger, price_table
from evalgate.calls.executor import Executor, RetryPolicy
from evalgate.calls.runtime import Runtime
from evalgate.cli.main import main as cli_main
from evalgate.errors import UserError
from evalgate.model import Answer, Case
from evalgate.safety.redact import redact
from evalgate.targets.http import HttpTarget, case_context
from tests.servers.agent_server import AgentReply, AgentServer, Fault

CHAT = "/api/agent/chat"
QUERY = "/api/query"


def fast_runtime() -> Runtime:
    return Runtime(Executor(RetryPolicy(retries=2, attempt_seconds=5, base_delay=0.01), concurrency=4),
                   CostLedger(), price_table({}))


def run_target(target: HttpTarget, *cases: Case) -> list[Answer]:
    async def go() -> list[Answer]:
        try:
            return [await target.answer(c) for c in cases]
        finally:
            await target.aclose()

    return asyncio.run(go())


def write_dataset(path: Path, cases: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps(cases), encoding="utf-8")
    return path


def test_seed_002_chat_payload_and_reply_mapping() -> None:
    reply = AgentReply(text="Start Reid tonight.", agent="optimizer", tools_used=["get_my_roster", "get_espn_player_status"],
                       agents_called=["supervisor", "optimizer"], debug_context=["Reid is probable"],
                       sources=[{"title": "ESPN injuries"}], usage={"prompt_tokens": 10, "completion_tokens": 5,
                                                                    "total_tokens": 15})
    with AgentServer({"start": reply}) as server:
        target = HttpTarget(url=server.base_url + CHAT, runtime=fast_runtime(), env={},
                            eval_context={"active_team_id": "7", "team_name": "Bulls", "language": "en"})
        case = Case(id="c1", input="Should I start Reid?", active_league_id=99, team_name="Knicks", language="el")
        (answer,) = run_target(target, case)
        body = server.bodies(CHAT)[0]
    assert body == {"message": "Should I start Reid?", "activeTeamId": "7", "teamName": "Knicks", "language": "el",
                    "activeLeagueId": 99}
    assert answer.error is None
    assert answer.output == "Start Reid tonight."
    assert answer.agent_id == "optimizer"
    assert answer.tools_used == ["get_my_roster", "get_espn_player_status"]
    assert answer.agents_called == ["supervisor", "optimizer"]
    assert answer.debug_context == ["Reid is probable"]
    assert answer.sources == ["ESPN injuries"]
    assert (answer.num_tokens, answer.prompt_tokens, answer.completion_tokens) == (15, 10, 5)
    assert answer.latency_ms is not None and answer.latency_ms > 0


def test_seed_004_query_with_a_body_template() -> None:
    reply = AgentReply(text="Use the SPC chart.", agent="quality_inspector", data_sources=["mes"],
                       citations=[{"source": "SOP-QA-7"}])
    with AgentServer({"cpk": reply}) as server:
        target = HttpTarget(url=server.base_url + QUERY, runtime=fast_runtime(), env={},
                            body_template='{"query": {{ input | tojson }}, "case": {{ id | tojson }}}')
        (answer,) = run_target(target, Case(id="GD-1", input='What is "Cpk" </script>?'))
        body = server.bodies(QUERY)[0]
    assert body == {"query": 'What is "Cpk" </script>?', "case": "GD-1"}
    assert (answer.output, answer.agent_id, answer.data_sources, answer.sources) == (
        "Use the SPC chart.", "quality_inspector", ["mes"], ["SOP-QA-7"])


def test_headers_substitute_environment_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    token = "agent-token-5f1e2d3c4b"
    with AgentServer({"hi": "hello"}, api_key=token) as server:
        target = HttpTarget(url=server.base_url + CHAT, runtime=fast_runtime(),
                            headers={"Authorization": "Bearer ${AGENT_TOKEN}"}, env={"AGENT_TOKEN": token})
        (answer,) = run_target(target, Case(id="c", input="hi"))
        server.assert_secret_not_sent(token)
    assert answer.output == "hello"
    assert token not in json.dumps(target.describe())
    assert redact(f"oops {token}") == "oops ***"


def test_literal_credentials_in_headers_are_masked() -> None:
    literal = "literal-credential-77aa99bb"
    HttpTarget(url="http://127.0.0.1:9/x", runtime=fast_runtime(), env={},
               headers={"X-Api-Key": literal, "Authorization": "Basic other-credential-55cc"})
    assert redact(f"{literal} and other-credential-55cc") == "*** and ***"


def test_missing_header_variable_is_a_user_error() -> None:
    with pytest.raises(UserError, match=r"target_headers\.X-Key: environment variable NOPE is not set"):
        HttpTarget(url="http://127.0.0.1:9/x", runtime=fast_runtime(), headers={"X-Key": "${NOPE}"}, env={})


def test_template_problems() -> None:
    with pytest.raises(UserError, match="target_body_template: invalid jinja2 template"):
        HttpTarget(url="http://127.0.0.1:9/x", runtime=fast_runtime(), env={}, body_template="{{ input ")
    target = HttpTarget(url="http://127.0.0.1:9/x", runtime=fast_runtime(), env={}, body_template='{"q": {{ input }}}')
    (answer,) = run_target(target, Case(id="c", input="two words"))
    assert "rendered invalid JSON" in answer.error
    with pytest.raises(UserError, match=r"target_body_template: unknown template variable\(s\) nope"):
        HttpTarget(url="http://127.0.0.1:9/x", runtime=fast_runtime(), env={}, body_template='{{ nope | tojson }}')
    target = HttpTarget(url="http://127.0.0.1:9/x", runtime=fast_runtime(), env={},
                        body_template='{"q": {{ case.missing_field | tojson }}}')
    (answer,) = run_target(target, Case(id="c", input="x"))
    assert answer.error.startswith("request body:") and "missing_field" in answer.error


def test_bad_url_is_a_user_error() -> None:
    with pytest.raises(UserError, match="target_url"):
        HttpTarget(url="ftp://example", runtime=fast_runtime(), env={})


def test_plain_text_reply_is_the_answer_and_missing_text_is_an_error() -> None:
    with AgentServer({}, faults=[Fault(body="just text", times=1)]) as server:
        target = HttpTarget(url=server.base_url + CHAT, runtime=fast_runtime(), env={},
                            response_map={"output": "nothing.here"})
        plain, missing = run_target(target, Case(id="a", input="x"), Case(id="b", input="y"))
    assert plain.output == "just text"
    assert missing.error is not None and "no answer text at nothing.here" in missing.error


def test_context_defaults_and_case_overrides() -> None:
    case = Case(id="c", input="x", activeTeamId=3)
    assert case_context(case, {"active_team_id": "1", "active_league_id": "2", "region": "eu"}) == {
        "activeTeamId": 3, "activeLeagueId": "2", "region": "eu"}


def test_run_with_http_target_records_failures_and_goes_on(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "cases.json", [
        {"id": "good", "input": "hello there", "expected_keywords": ["hello"]},
        {"id": "broken", "input": "boom please", "expected_keywords": ["hello"]},
    ])
    with AgentServer({"hello": "hello back"}, faults=[Fault(status=500, contains="boom")]) as server:
        code = cli_main(["run", "--dataset", str(dataset), "--target", "http", "--target-url", server.base_url + CHAT,
                         "--output-dir", str(tmp_path / "out"), "--api-retries", "1", "--progress", "none"])
        attempts = len(server.requests([CHAT]))
    document = json.loads((tmp_path / "out" / "results.json").read_text())
    by_id = {r["id"]: r for r in document["results"]}
    assert code == 1
    assert attempts == 3  # good once, broken twice (one retry)
    assert by_id["good"]["status"] == "passed" and by_id["good"]["latency_ms"] > 0
    assert by_id["broken"]["status"] == "errored"
    assert "HTTP 500" in by_id["broken"]["error"] and "gave up after 2 attempts" in by_id["broken"]["error"]
    assert document["metadata"]["target"]["kind"] == "http"
    assert document["metadata"]["calls"]["retries"] == 1


def test_unreachable_target_is_exit_2_before_any_case(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dataset = write_dataset(tmp_path / "cases.json", [{"id": "a", "input": "x"}, {"id": "b", "input": "y"}])
    code = cli_main(["run", "--dataset", str(dataset), "--target", "http", "--target-url", "http://127.0.0.1:9/chat",
                     "--output-dir", str(tmp_path / "out"), "--api-retries", "0", "--progress", "none"])
    err = capsys.readouterr().err
    assert code == 2
    assert err == ("evalgate: error: target_url: cannot reach the target at http://127.0.0.1:9/chat: connection "
                   "refused by 127.0.0.1:9; no case was run\n")
    assert not (tmp_path / "out" / "results.json").exists()
