"""Batch judging (``judge_mode: batch``) driven by the real openai SDK against a loopback server implementing
OpenAI's Files and Batch endpoints (tests/servers/openai_batch_server.py): every verdict from one batch at
half price, the same verdicts as direct calls, a re-run after a killed job resumes the stored batch instead of
paying again, a batch past its deadline (or a server without the Batch API) falls back to direct calls, and
pull-request runs in Actions stay synchronous."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli.main import main as cli_main
from evalgate.judges.batch import STATE_FILE, batch_refusal
from tests.servers.agent_server import AgentServer
from tests.servers.openai_batch_server import BatchOpenAIServer
from tests.servers.openai_server import Judge

KEY = "sk-batch-test-97531"
CASES = 6
PRICES = {"gpt-4o-mini": {"input": 0.15, "output": 0.60}}
FAST = ["--judge-mode", "batch"]
FAST_ENV = {"EVALGATE_JUDGE_BATCH_POLL_SECONDS": "0.05", "EVALGATE_JUDGE_BATCH_QUIET_SECONDS": "0.3"}


def dataset(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    path = root / "cases.json"
    path.write_text(json.dumps([{"id": f"c{i}", "input": f"question {i}", "passing_criteria": "answers", "metrics": ["relevancy"]}
                                for i in range(CASES)]))
    return path


def argv(root: Path, agent: AgentServer, judge: BatchOpenAIServer, *extra: str) -> list[str]:
    return ["run", "--dataset", str(dataset(root)), "--target", "http", "--target-url",
            agent.base_url + "/api/agent/chat", "--judge-provider", "openai", "--judge-base-url",
            judge.base_url + "/v1", "--output-dir", str(root / "out"), "--progress", "none", *extra]


def run(root: Path, agent: AgentServer, judge: BatchOpenAIServer, *extra: str) -> tuple[int, dict[str, Any], str]:
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()) as err:
        code = cli_main(argv(root, agent, judge, *extra))
    return code, json.loads((root / "out" / "results.json").read_text()), out.getvalue() + err.getvalue()


def verdicts(document: dict[str, Any]) -> dict[str, Any]:
    return {r["id"]: r["metrics"]["relevancy"]["value"] for r in document["results"]}


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("EVALGATE_PRICES", json.dumps(PRICES))
    for name, value in FAST_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)


def test_every_verdict_from_one_batch_at_half_price(tmp_path: Path, env: None) -> None:
    with AgentServer({"question": "an answer"}) as agent, \
            BatchOpenAIServer(api_key=KEY, judge=Judge(score=0.9), steps=3) as judge:
        code, batched, output = run(tmp_path / "batch", agent, judge, *FAST)
        direct_calls = len(judge.chat_requests())
        calls = dict(judge.batch_calls)
        code_direct, direct, _ = run(tmp_path / "direct", agent, judge, "--no-cache")
    assert code == 0 and code_direct == 0
    assert direct_calls == 0 and calls["files.create"] == 1 and calls["batches.create"] == 1
    assert calls["batches.retrieve"] >= 3  # validating → in_progress → finalizing → completed
    assert verdicts(batched) == verdicts(direct) and len(verdicts(batched)) == CASES
    summary = batched["summary"]
    assert summary["judge_calls"]["made"] == CASES and summary["judge_calls"]["batch"] == CASES
    assert summary["cost_usd"] == pytest.approx(direct["summary"]["cost_usd"] / 2, rel=1e-3)
    assert summary["judge_calls"]["batch_saved_usd"] == pytest.approx(summary["cost_usd"], rel=1e-3)
    meta = batched["metadata"]["judge"]
    assert meta["mode"] == "batch" and meta["batch"]["answered"] == CASES and meta["batch"]["sent_directly"] == 0
    state = json.loads((tmp_path / "batch" / "out" / STATE_FILE).read_text())
    assert [b["status"] for b in state["batches"]] == ["completed"] and len(state["batches"][0]["custom_ids"]) == CASES
    assert "judge batch batch_" in output and f"{CASES}/{CASES} done" in output
    assert f"{CASES} call(s) batched" in output  # the cost line shows the saving


def test_a_rerun_after_a_killed_job_resumes_the_stored_batch(tmp_path: Path, env: None) -> None:
    """The first attempt is killed while its batch is in progress; the re-run (same output directory) polls
    that batch instead of uploading and paying for the requests again."""
    with AgentServer({"question": "an answer"}) as agent, \
            BatchOpenAIServer(api_key=KEY, judge=Judge(score=0.9), hold=True) as judge:
        environment = {**os.environ, **FAST_ENV}
        first = subprocess.Popen([sys.executable, "-m", "evalgate", *argv(tmp_path, agent, judge, *FAST)],
                                 env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        state = tmp_path / "out" / STATE_FILE
        deadline = time.monotonic() + 60
        while not state.exists() or judge.batch_calls["batches.retrieve"] < 2:
            assert first.poll() is None and time.monotonic() < deadline, "the first attempt never submitted"
            time.sleep(0.05)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        judge.hold = False
        code, document, output = run(tmp_path, agent, judge, *FAST)
        calls = dict(judge.batch_calls)
        direct_calls = len(judge.chat_requests())
    assert code == 0 and len(verdicts(document)) == CASES
    assert calls["files.create"] == 1 and calls["batches.create"] == 1 and direct_calls == 0
    assert document["metadata"]["judge"]["batch"]["batches"][0]["resumed"] is True
    assert document["summary"]["judge_calls"]["batch"] == CASES
    assert "judge batch batch_" in output


def test_a_batch_past_its_deadline_is_cancelled_and_judged_directly(tmp_path: Path, env: None,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALGATE_JUDGE_BATCH_DEADLINE_SECONDS", "0.5")
    with AgentServer({"question": "an answer"}) as agent, \
            BatchOpenAIServer(api_key=KEY, judge=Judge(score=0.9), hold=True) as judge:
        code, document, output = run(tmp_path, agent, judge, *FAST)
        calls, direct_calls = dict(judge.batch_calls), len(judge.chat_requests())
    assert code == 0 and len(verdicts(document)) == CASES
    assert calls["batches.cancel"] == 1 and direct_calls == CASES
    batch = document["metadata"]["judge"]["batch"]
    assert batch["sent_directly"] == CASES and batch["batches"][0]["status"] == "deadline"
    assert "not done 0.5s after it was created: sending directly" in output
    assert "batch" not in document["summary"]["judge_calls"]  # paid at the direct price
    state = json.loads((tmp_path / "out" / STATE_FILE).read_text())
    assert state["batches"][0]["status"] == "cancelled"


def test_a_server_without_the_batch_api_is_judged_directly(tmp_path: Path, env: None) -> None:
    with AgentServer({"question": "an answer"}) as agent, \
            BatchOpenAIServer(api_key=KEY, judge=Judge(score=0.9), refuse_batches=True) as judge:
        code, document, output = run(tmp_path, agent, judge, *FAST)
        direct_calls = len(judge.chat_requests())
    assert code == 0 and direct_calls == CASES and len(verdicts(document)) == CASES
    assert "the batch could not be created (NotFoundError" in output


def test_pull_request_runs_stay_synchronous(tmp_path: Path, env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    assert batch_refusal("batch", "openai", {"GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": "push"}) is None
    assert batch_refusal("batch", "openai", {"GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": "schedule"}) is None
    assert batch_refusal("batch", "ollama", {}) is not None
    assert batch_refusal("batch", "openai", {}, max_cost=1.0) is not None
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_EVENT_NAME", "pull_request")
    with AgentServer({"question": "an answer"}) as agent, \
            BatchOpenAIServer(api_key=KEY, judge=Judge(score=0.9)) as judge:
        _, document, output = run(tmp_path, agent, judge, *FAST, "--baseline", "none")
        calls, direct_calls = dict(judge.batch_calls), len(judge.chat_requests())
    assert direct_calls == CASES and calls["batches.create"] == 0
    assert "this pull_request run judges directly" in output
    assert "mode" not in document["metadata"]["judge"]


def test_judge_samples_join_one_batch(tmp_path: Path, env: None) -> None:
    with AgentServer({"question": "an answer"}) as agent, \
            BatchOpenAIServer(api_key=KEY, judge=Judge(score=0.9), steps=2) as judge:
        code, document, _ = run(tmp_path, agent, judge, *FAST, "--judge-samples", "3")
        calls, batched = dict(judge.batch_calls), judge.batch_requests()
    assert code == 0 and calls["batches.create"] == 1 and len(batched) == 3 * CASES
    assert sorted({r["seed"] for r in batched}) == [20261122, 20261123, 20261124]  # seed + sample index
    assert all(len(r["metrics"]["relevancy"]["details"]["samples"]) == 3 for r in document["results"])
