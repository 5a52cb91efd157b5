"""examples/otel-agent/run.sh as CI runs it: exit 0 as shipped; with BREAK=order the agent books before it
searches and the run exits 1 naming the tool, with the expected and actual sequences on one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evalgate.report.html import render_html
from evalgate.report.markdown import render_comment

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "otel-agent" / "run.sh"


@pytest.mark.parametrize(("breakage", "status"), [("", 0), ("order", 1)])
def test_otel_agent_example(breakage: str, status: int, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHON": sys.executable, "BREAK": breakage, "RESULTS_DIR": str(tmp_path)}
    run = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=180, env=env)
    output = run.stdout + run.stderr
    assert run.returncode == status, output
    if breakage:
        line = ("book_flight not called after search_flights: expected search_flights → book_flight "
                "(subsequence), got book_flight → search_flights")
        assert line in output
        document = json.loads((tmp_path / "results.json").read_text())
        comment = render_comment(document, run_url=None, artifact_url=None, tag="t")
        escaped = line.replace("_", "\\_")  # markdown-escaped in the comment
        assert any(escaped in row for row in comment.splitlines())  # expected vs actual, on one line
        html = render_html(document)
        # the span tree: the agent span with its tools and LLM calls indented below it
        assert "<pre class=\"trace\">travel-agent  [agent]" in html
        assert "\n  book_flight  [tool]" in html and "\n  chat scripted-planner-1  [LLM]" in html
    else:
        assert "receiving OpenTelemetry traces" in output
