"""examples/otel-agent/run.sh as CI runs it: exit 0 as shipped; with BREAK=order the agent books before it
searches and the run exits 1 naming the tool, with the expected and actual sequences on one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "otel-agent" / "run.sh"


@pytest.mark.parametrize(("breakage", "status"), [("", 0), ("order", 1)])
def test_otel_agent_example(breakage: str, status: int) -> None:
    env = {**os.environ, "PYTHON": sys.executable, "BREAK": breakage}
    run = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=180, env=env)
    output = run.stdout + run.stderr
    assert run.returncode == status, output
    if breakage:
        assert ("book_flight not called after search_flights: expected search_flights → book_flight "
                "(subsequence), got book_flight → search_flights") in output
    else:
        assert "receiving OpenTelemetry traces" in output
