"""The loopback endpoints every tool is pointed at: the agent (target) and the OpenAI-compatible judge.

Both run as their own processes (``tests.servers.*`` with ``--latency-ms/--jitter-ms``), so the tool
under measurement shares nothing with them but the machine. Calls are counted at the servers
(``GET /_stats``) and the counters are reset (``POST /_reset``, which also reseeds the jitter, so every
run sees the same latency sequence) before each run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.servers._http import SubprocessServer

AGENT_PATH = "/api/agent/chat"
DEEPEVAL_JUDGE_MODEL = "bench-judge-deepeval"
DEEPEVAL_VERDICT = json.dumps({"reason": "scripted verdict from the loopback judge", "score": 10})
"""GEval's ReasonScore shape (score on its 0–10 scale); the other tools get the server's default judge."""


@dataclass(frozen=True, slots=True)
class Endpoints:
    """Where the tools send their calls, and the servers to count them at."""

    agent: SubprocessServer
    judge: SubprocessServer
    latency_ms: float
    jitter_ms: float

    @property
    def agent_url(self) -> str:
        return self.agent.base_url + AGENT_PATH

    @property
    def judge_base_url(self) -> str:
        """The OpenAI-compatible base URL (with ``/v1``)."""
        return self.judge.base_url + "/v1"

    def reset(self) -> None:
        self.agent.reset()
        self.judge.reset()

    def counts(self) -> dict[str, dict[str, int]]:
        """Responses since the last reset: ``{"agent": {...}, "judge": {...}}`` (see ``call_counts``)."""
        return {"agent": call_counts(self.agent.stats()), "judge": call_counts(self.judge.stats())}


def call_counts(stats: Mapping[str, Any]) -> dict[str, int]:
    """``/_stats`` → ``{"ok": 2xx responses, "failed": every other outcome, "connections": opened,
    "peak_in_flight": most calls the server was answering at once}`` summed over the server's API paths."""
    ok = failed = 0
    for statuses in stats.get("paths", {}).values():
        for status, count in statuses.items():
            if str(status).startswith("2"):
                ok += int(count)
            else:
                failed += int(count)
    return {"ok": ok, "failed": failed, "connections": int(stats.get("connections", 0)),
            "peak_in_flight": int(stats.get("peak_in_flight", 0))}


def write_scripts(directory: Path, agent_script: Mapping[str, Any]) -> tuple[Path, Path]:
    """Write the agent's answer script and the judge's rules; returns (agent, judge) script paths."""
    directory.mkdir(parents=True, exist_ok=True)
    agent_path, judge_path = directory / "agent-script.json", directory / "judge-script.json"
    agent_path.write_text(json.dumps(agent_script), encoding="utf-8")
    judge_path.write_text(json.dumps({"rules": [{"model": DEEPEVAL_JUDGE_MODEL, "reply": DEEPEVAL_VERDICT}]}),
                          encoding="utf-8")
    return agent_path, judge_path


@contextmanager
def loopback_endpoints(script_dir: Path, agent_script: Mapping[str, Any], *, latency_ms: float,
                       jitter_ms: float, seed: int = 7) -> Iterator[Endpoints]:
    """Start both servers with the given latency ± jitter (ms) and stop them on exit."""
    agent_path, judge_path = write_scripts(script_dir, agent_script)
    timing = ["--latency-ms", f"{latency_ms:g}", "--jitter-ms", f"{jitter_ms:g}", "--seed", str(seed)]
    with ExitStack() as stack:
        agent = stack.enter_context(SubprocessServer("tests.servers.agent_server",
                                                     [*timing, "--script", str(agent_path)]))
        judge = stack.enter_context(SubprocessServer("tests.servers.openai_server",
                                                     [*timing, "--script", str(judge_path)]))
        yield Endpoints(agent=agent, judge=judge, latency_ms=latency_ms, jitter_ms=jitter_ms)
