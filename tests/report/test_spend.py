"""Judge spend, call retries and HTTP 429s, "no baseline", flaky cases, confidence intervals and judge
stability in every report (console, PR comment / job summary, HTML), from a real run against the
loopback OpenAI server (which answers the first two judge calls with HTTP 429) and from constructed
documents."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalgate.report.console import call_summary, make_console, render_report, spend_lines
from evalgate.report.html import render_html
from evalgate.report.markdown import render_comment, render_summary
from tests.servers.openai_server import Judge, OpenAIServer, Rule
from tests.support.cli import run_cli

KEY = "sk-report-spend-judge-0123456789"
CASES = [{"id": f"q{i}", "input": f"What about topic-{i}?", "output": f"Topic {i} is covered.",
          "risk_level": "critical" if i == 1 else "medium", "metrics": ["relevancy"]} for i in range(3)]


class Scores:
    """Per case and call (2 samples per answer, 2 repeats, concurrency 1): topic-1's second repeat
    scores 0.3 (a flaky critical case); topic-2's samples alternate 0.6 / 0.9 (unstable judge)."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}

    def __call__(self, prompt: str) -> float:
        found = re.search(r"topic-(\d)", prompt)
        assert found is not None
        topic = found.group(1)
        count = self.calls[topic] = self.calls.get(topic, 0) + 1
        if topic == "1":
            return 0.3 if count > 2 else 0.9
        if topic == "2":
            return 0.6 if count % 2 else 0.9
        return 0.9


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("spend")
    dataset = root / "cases.json"
    dataset.write_text(json.dumps(CASES), encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        for name in ("GITHUB_ACTIONS", "GITHUB_REPOSITORY", "GITHUB_EVENT_PATH", "GITHUB_TOKEN"):
            patch.delenv(name, raising=False)
        patch.setenv("LOCAL_JUDGE_API_KEY", KEY)
        patch.setenv("EVALGATE_CALIBRATION", "trust")  # relevancy gates (its judge is not calibrated)
        rules = [Rule(status=429, retry_after=0, times=2)]
        with OpenAIServer(rules, api_key=KEY, judge=Judge(score=Scores())) as server:
            code, out, err = run_cli("run", "-d", dataset, "-o", root / "out", "--progress", "none",
                                     "--judge-provider", "local", "--judge-base-url", server.base_url + "/v1",
                                     "--repeat", "2", "--judge-samples", "2", "--concurrency", "1",
                                     "--baseline", "auto")
            requests = len(server.chat_requests())
    document = json.loads((root / "out" / "results.json").read_text(encoding="utf-8"))
    yield {"code": code, "out": out, "err": err, "document": document, "requests": requests}


def test_the_run_recorded_the_counters(run: dict[str, Any]) -> None:
    document = run["document"]
    calls = document["metadata"]["calls"]
    assert run["code"] == 1, run["err"]  # the flaky critical case passes 1 of 2 repeats: fails (majority)
    assert (calls["calls"], calls["retries"], calls["rate_limited_429"]) == (12, 2, 2)
    assert run["requests"] == 14
    assert document["summary"]["judge_calls"]["made"] == 12
    assert document["baseline"]["found"] is False
    assert [f["id"] for f in document["flaky"]] == ["q1"]
    assert KEY not in json.dumps(document)


def test_console_prints_judge_spend_retries_and_429s(run: dict[str, Any]) -> None:
    out = run["out"]
    tokens = run["document"]["summary"]["tokens"]
    assert (f"Judge: 12 call(s), 0 cached; {tokens['judge_prompt']:,} prompt + {tokens['judge_completion']:,} "
            "completion tokens; cost $0.0000") in out
    assert "Calls: 12 API call(s), 2 retries, 2 HTTP 429 responses" in out
    assert "No baseline: not a pull request or merge queue run (no base branch to compare with)" in out
    assert "Flaky cases (1):" in out and "‼ q1 passed 1/2 [passed failed]" in out
    assert "Judge stability relevancy: 2 samples per answer" in out
    assert KEY not in out + run["err"]


def test_comment_from_the_real_run(run: dict[str, Any]) -> None:
    document = run["document"]
    body = render_comment(document, run_url=None, artifact_url=None, tag="")
    tokens = document["summary"]["tokens"]
    assert (f"Judge: 12 call(s) + 0 cached · {tokens['judge_prompt']} prompt + {tokens['judge_completion']} "
            "completion tokens · $0.0000 · API calls: 12 · 2 retries · 2 × HTTP 429") in body
    assert "<sub>No baseline: not a pull request or merge queue run (no base branch to compare with)</sub>" in body
    assert "2 runs per case (majority rule) · 1 flaky case(s) of 3" in body
    assert re.search(r"^\| `q1` 🚨 \| `.*cases\.json:\d+` \| critical \| 1/2 \| passed failed \| failed \|$", body, re.M)
    assert "| pass rate | 66.7% |" in body
    assert re.search(r"^\| `relevancy` \| 0\.\d{3} \| 0\.\d{3} – 0\.\d{3} \| BCa bootstrap \| 3 \| 0\.\d{3} \|$", body, re.M)
    stability = document["summary"]["judge_stability"]["relevancy"]
    assert stability["straddling_threshold"] == 2  # topic-2's 0.6 / 0.9 in both repeats
    assert "| `relevancy` | 2 | 6 | " in body and body.rstrip().endswith("</sub>")
    assert body.count("### Judge stability") == 1
    assert render_summary(document, run_url=None, artifact_url=None).count("2 × HTTP 429") == 1


def test_html_from_the_real_run(run: dict[str, Any]) -> None:
    html = render_html(run["document"])
    line = re.search(r'<p id="spend">(.*?)</p>', html)
    assert line is not None
    assert line.group(1).startswith("Judge: 12 call(s) + 0 cached · ")
    assert line.group(1).endswith("API calls: 12 · 2 retries · 2 × HTTP 429")


def test_no_spend_anywhere_for_a_run_without_calls(tmp_path: Path) -> None:
    dataset = tmp_path / "cases.json"
    dataset.write_text(json.dumps([{"id": "a", "input": "x", "output": "y", "rules": [{"type": "contains",
                                                                                       "value": "y"}]}]))
    code, out, err = run_cli("run", "-d", dataset, "-o", tmp_path / "out", "--progress", "none")
    assert code == 0, err
    document = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))
    assert "Judge:" not in out and "Calls:" not in out
    assert 'id="spend"' not in render_html(document)
    body = render_comment(document, run_url=None, artifact_url=None, tag="")
    assert "API calls" not in body and "\nJudge: " not in body


# --- the console helpers on constructed documents ---------------------------------------------------------


def document_with(calls: dict[str, Any] | None, judge: dict[str, Any] | None = None) -> dict[str, Any]:
    summary: dict[str, Any] = {"tokens": {"total": 0, "judge_prompt": 900, "judge_completion": 100}, "cost_usd": 0.25}
    if judge is not None:
        summary["judge_calls"] = judge
    return {"summary": summary, "metadata": {"calls": calls} if calls is not None else {}}


def test_call_summary_reads_documents_and_tolerates_gaps() -> None:
    spend = call_summary(document_with({"calls": 5, "retries": 1, "rate_limited_429": 1, "failed": "x"},
                                       {"made": 4, "cached": 1, "cost_usd": 0.125}))
    assert (spend["judge_made"], spend["judge_cached"], spend["judge_cost_usd"]) == (4, 1, 0.125)
    assert (spend["judge_prompt"], spend["judge_completion"], spend["cost_usd"]) == (900, 100, 0.25)
    assert (spend["calls"], spend["retries"], spend["rate_limited_429"], spend["failed"], spend["timeouts"]) == \
        (5, 1, 1, 0, 0)
    assert spend["max_cost_usd"] is None and spend["budget_exceeded"] is False
    empty = call_summary({})
    assert all(empty[key] == 0 for key in ("judge_made", "calls", "retries", "rate_limited_429"))


def test_spend_lines_only_show_what_is_not_zero() -> None:
    quiet = call_summary(document_with({"calls": 5, "attempts": 5, "retries": 0, "rate_limited_429": 0}))
    assert spend_lines(quiet) == []
    busy = call_summary(document_with({"calls": 5, "retries": 3, "rate_limited_429": 2, "timeouts": 1, "failed": 1},
                                      {"made": 4, "cached": 1, "cost_usd": 0.125}))
    assert spend_lines(busy) == [
        "Judge: 4 call(s), 1 cached; 900 prompt + 100 completion tokens; cost $0.1250",
        "Calls: 5 API call(s), 3 retries, 2 HTTP 429 responses, 1 timed-out attempts, 1 failed calls",
    ]


def test_render_report_prints_the_spend_lines() -> None:
    document = json.loads(json.dumps({
        "run_id": "r1", "status": "completed", "gate": {"passed": True, "exit_code": 0, "reasons": []},
        "summary": {"total_test_cases": 1, "total_passed": 1, "total_failed": 0, "total_errored": 0, "pass_rate": 1.0,
                    "weighted_pass_rate": 1.0, "critical_failures": 0, "cost_usd": 0.0,
                    "tokens": {"total": 0, "judge_prompt": 10, "judge_completion": 2},
                    "judge_calls": {"made": 0, "cached": 3, "cost_usd": 0.0}},
        "metrics": {}, "metadata": {"calls": {"calls": 0}},
    }))
    stream = io.StringIO()
    render_report(document, make_console(stream))
    assert "Judge: 0 call(s), 3 cached; 10 prompt + 2 completion tokens; cost $0.0000" in stream.getvalue()
    assert "Calls:" not in stream.getvalue()
