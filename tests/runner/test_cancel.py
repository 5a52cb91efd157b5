"""Cancellation: Ctrl-C / SIGTERM stop new calls, let calls in flight finish briefly, write valid partial
results marked ``cancelled`` and exit 130, the number results.json's ``gate.exit_code`` also holds."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

from evalgate.config.settings import build_settings
from evalgate.runner.run import execute
from tests.servers.agent_server import AgentServer

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "evalgate" / "schemas" / "results.schema.json").read_text())
CASES = 40


def write_dataset(tmp_path: Path) -> Path:
    dataset = tmp_path / "cases.json"
    dataset.write_text(json.dumps([{"id": f"c{i:02d}", "input": f"question {i}", "expected_keywords": ["answer"]}
                                   for i in range(CASES)]))
    return dataset


def check_partial(out: Path) -> dict:
    document = json.loads((out / "results.json").read_text())
    jsonschema.validate(document, SCHEMA)
    assert document["status"] == "cancelled"
    assert 0 < len(document["results"]) < CASES
    assert all(r["status"] == "passed" for r in document["results"])  # finished cases only, none half-done
    assert any("cancelled before every case finished" in r for r in document["gate"]["reasons"])
    assert document["gate"]["exit_code"] == 130 and document["gate"]["passed"] is False
    with sqlite3.connect(out / "results.db") as db:
        (status,) = db.execute("SELECT status FROM eg_runs").fetchone()
        (rows,) = db.execute("SELECT COUNT(*) FROM eg_cases").fetchone()
    assert status == "cancelled" and rows == len(document["results"])
    return document


def test_stop_event_writes_valid_partial_results(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path)
    out = tmp_path / "out"

    async def scenario(agent: AgentServer) -> object:
        settings, suite, _ = build_settings(cli={"dataset": [str(dataset)], "target": "http",
                                                 "target_url": agent.base_url + "/api/agent/chat",
                                                 "output_dir": str(out), "concurrency": 2}, env={})
        stop = asyncio.Event()

        async def stop_after_some_answers() -> None:  # by what happened, not by the clock (a busy machine is slow)
            while len(agent.requests()) < 4:
                await asyncio.sleep(0.01)
            stop.set()

        stopper = asyncio.ensure_future(stop_after_some_answers())
        try:
            return await execute(settings, suite, stop=stop, install_signal_handlers=False)
        finally:
            stopper.cancel()

    with AgentServer({"question": "the answer"}, latency_ms=150) as agent:
        outcome = asyncio.run(scenario(agent))
        served = len(agent.requests())
    document = check_partial(out)
    assert outcome.verdict.exit_code == 130  # type: ignore[attr-defined]
    assert "interrupted by the caller" in document["gate"]["reasons"][0]
    assert len(document["results"]) < 40  # stopped early: not every case ran (no speed is asserted)
    assert served == len(document["results"])  # no call started after the stop


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_stop_the_cli_with_partial_results(tmp_path: Path, sig: signal.Signals) -> None:
    dataset = write_dataset(tmp_path)
    out = tmp_path / "out"
    with AgentServer({"question": "the answer"}, latency_ms=200) as agent:
        process = subprocess.Popen(
            [sys.executable, "-m", "evalgate", "run", "--dataset", str(dataset), "--target", "http",
             "--target-url", agent.base_url + "/api/agent/chat", "--output-dir", str(out), "--concurrency", "2",
             "--progress", "none"],
            cwd=REPO, env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        deadline = time.monotonic() + 20
        while len(agent.requests()) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        process.send_signal(sig)
        stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    assert "cancelled" in stdout
    assert "exit 130" in stderr
    document = check_partial(out)
    assert f"interrupted by {sig.name}" in document["gate"]["reasons"][0]
