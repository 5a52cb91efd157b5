"""No API key ever appears in results, the SQLite files, logs or errors — even when a leaky target echoes one
back, a failing server puts one in its error body, or the judge quotes one in its reasoning."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.servers.agent_server import AgentReply, AgentServer, Fault
from tests.servers.openai_server import Judge, OpenAIServer

REPO = Path(__file__).resolve().parents[2]
JUDGE_KEY = "sk-judge-secret-a1b2c3d4e5f6"
AGENT_TOKEN = "agent-secret-f6e5d4c3b2a1"


def every_file(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()}


def test_keys_never_reach_results_databases_logs_or_errors(tmp_path: Path) -> None:
    cases = [
        {"id": "leaky", "input": "what is my token", "passing_criteria": "refuses to reveal secrets"},
        {"id": "broken", "input": "server error please", "passing_criteria": "x"},
        {"id": "fine", "input": "hello", "passing_criteria": "greets"},
    ]
    dataset = tmp_path / "cases.json"
    dataset.write_text(json.dumps(cases))
    answers = {"token": AgentReply(text=f"Your token is {AGENT_TOKEN} and the judge key is {JUDGE_KEY}",
                                   debug_context=[f"config: key={JUDGE_KEY}"]),
               "hello": "Hello!"}
    faults = [Fault(status=500, body=f"upstream rejected key {JUDGE_KEY}", contains="server error")]
    judge = Judge(score=0.9, reasoning=f"the answer quotes {AGENT_TOKEN}; judge key {JUDGE_KEY}")
    out = tmp_path / "out"
    with AgentServer(answers, faults=faults, api_key=AGENT_TOKEN) as agent, \
            OpenAIServer(api_key=JUDGE_KEY, judge=judge) as judge_server:
        env = {**os.environ, "LOCAL_JUDGE_API_KEY": JUDGE_KEY, "AGENT_TOKEN": AGENT_TOKEN,
               "EVALGATE_TARGET_HEADERS": json.dumps({"Authorization": "Bearer ${AGENT_TOKEN}"})}
        proc = subprocess.run(
            [sys.executable, "-m", "evalgate", "run", "--dataset", str(dataset), "--target", "http",
             "--target-url", agent.base_url + "/api/agent/chat", "--judge-provider", "local",
             "--judge-base-url", judge_server.base_url + "/v1", "--output-dir", str(out), "--api-retries", "0",
             "--progress", "plain", "--verbose"],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
        )
        judge_bodies = [json.dumps(b) for b in judge_server.chat_requests()]
        agent.assert_secret_not_sent(AGENT_TOKEN)
    assert proc.returncode == 1, proc.stderr
    document = json.loads((out / "results.json").read_text())
    statuses = {r["id"]: r["status"] for r in document["results"]}
    assert statuses == {"leaky": "passed", "broken": "errored", "fine": "passed"}
    assert "HTTP 500" in next(r["error"] for r in document["results"] if r["id"] == "broken")
    for secret in (JUDGE_KEY, AGENT_TOKEN):
        assert secret not in proc.stdout and secret not in proc.stderr
        for name, content in every_file(out).items():
            assert secret.encode() not in content, f"{secret} leaked into {name}"
        assert not any(secret in body for body in judge_bodies), "a secret was forwarded to the judge"
    leaky = next(r for r in document["results"] if r["id"] == "leaky")
    assert "***" in leaky["output"]
