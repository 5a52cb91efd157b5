"""Running ``evalgate run`` against an instrumented agent script that exports its spans to evalgate's OTLP
receiver: the agent writes its port to a file, evalgate's receiver listens on a port chosen here."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path


def traced_env(env: Mapping[str, str], traces_port: int) -> dict[str, str]:
    """``env`` with the agent's OTLP exporter pointed at evalgate's receiver on ``traces_port``."""
    return {**env, "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{traces_port}"}


def run_against_agent(agent_argv: Sequence[str], port_file: Path, cwd: Path, env: Mapping[str, str],
                      traces_port: int, dataset: str = "cases.yaml") -> subprocess.CompletedProcess[str]:
    """Start the agent (``python AGENT_ARGV…``, which writes its HTTP port to ``port_file``), run evalgate with
    traces on over ``dataset`` against its ``/chat``, stop the agent; evalgate's completed process."""
    agent = subprocess.Popen([sys.executable, *agent_argv], env=dict(env))
    try:
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text()) and time.monotonic() < deadline:
            assert agent.poll() is None, "the agent exited"
            time.sleep(0.1)
        return subprocess.run(
            [sys.executable, "-m", "evalgate", "run", "--dataset", dataset, "--target", "http",
             "--target-url", f"http://127.0.0.1:{port_file.read_text()}/chat", "--progress", "none",
             "--output-dir", "out"],
            cwd=cwd, capture_output=True, text=True, timeout=120,
            env={**env, "EVALGATE_TRACES": "true", "EVALGATE_TRACES_PORT": str(traces_port)})
    finally:
        agent.terminate()
        agent.wait(timeout=30)
