"""Evidence that is not there never passes, through ``evalgate run`` (the CLI in a subprocess):

* an empty or whitespace answer is the same missing evidence for every metric kind — a judged built-in
  (never sent to the judge), a criteria metric, rules such as ``not_contains`` and ``max_tokens`` — unless
  the case says ``expect_empty: true``;
* a gated metric skipped on every case (an ``assert:`` on keyword_coverage for cases without expected
  keywords) fails the run like an unavailable one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.servers.openai_server import Judge, OpenAIServer

REPO = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    done = subprocess.run([sys.executable, "-m", "evalgate", "run", "-d", "cases.yaml", "-o", "out", "--progress",
                           "none", *args], cwd=tmp_path, capture_output=True, text=True, timeout=180,
                          env={**os.environ, "LOCAL_JUDGE_API_KEY": "sk-test-missing-evidence"})
    path = tmp_path / "out" / "results.json"
    return done, (json.loads(path.read_text()) if path.exists() else {})


EMPTY_CASES = """
cases:
  - id: judged
    input: What is the capital of France?
    output: "{blank}"
    expected_output: Paris is the capital of France.
    metrics: [correctness]
  - id: criteria
    input: Greet the user
    output: "{blank}"
    assert:
      - {{criteria: "The answer greets the user politely.", threshold: 0.5}}
  - id: rules
    input: Say anything without secrets
    output: "{blank}"
    rules:
      - {{type: not_contains, value: password}}
      - {{type: max_tokens, value: 50}}
  - id: nothing-to-say
    input: Reply with nothing at all
    output: "{blank}"
    expect_empty: true
    rules:
      - {{type: not_contains, value: password}}
      - {{type: max_length, value: 5}}
"""


def test_an_empty_answer_is_missing_evidence_for_every_metric_kind(tmp_path: Path) -> None:
    for blank in ("", "   \\n\\t "):
        (tmp_path / "cases.yaml").write_text(EMPTY_CASES.format(blank=blank))
        with OpenAIServer(api_key="sk-test-missing-evidence", judge=Judge(score=1.0)) as judge:  # lenient
            done, document = _run(tmp_path, "--judge-provider", "local", "--judge-base-url", judge.base_url + "/v1",
                                  "--judge-model", "gpt-4o-mini", "--calibration", "trust", "--no-cache")
            prompts = [json.dumps(body) for body in judge.chat_requests()]
        assert done.returncode == 1, done.stdout + done.stderr
        cases = {record["id"]: record for record in document["results"]}
        for case_id, metric in (("judged", "correctness"), ("rules", "rules")):
            entry = cases[case_id]["metrics"][metric]
            assert entry["status"] == "unavailable" and "the answer is empty" in entry["reason"], entry
            assert cases[case_id]["status"] == "errored", cases[case_id]
        (criteria,) = [entry for name, entry in cases["criteria"]["metrics"].items()]
        assert criteria["status"] == "unavailable" and "the answer is empty" in criteria["reason"], criteria
        assert cases["criteria"]["status"] == "errored"
        assert cases["nothing-to-say"]["status"] == "passed", cases["nothing-to-say"]  # the case says so
        assert cases["nothing-to-say"]["expected"]["expect_empty"] is True
        assert not any("Paris" in prompt or "greets the user" in prompt for prompt in prompts), prompts


SKIPPED_CASES = "cases:\n" + "".join(
    f"  - {{id: c{i}, input: question {i}, output: 'answer {i}', assert: [{{metric: keyword_coverage, threshold: 0.8}}]}}\n"
    for i in range(20))


def test_a_gated_metric_skipped_on_every_case_fails_the_run(tmp_path: Path) -> None:
    (tmp_path / "cases.yaml").write_text(SKIPPED_CASES)
    done, document = _run(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    reasons = document["gate"]["reasons"]
    assert any(reason.startswith("keyword_coverage: skipped on all 20 case(s) it gates") and "expected_keywords"
               in reason for reason in reasons), reasons


def test_a_metric_skipped_on_some_cases_but_valued_on_others_still_passes(tmp_path: Path) -> None:
    (tmp_path / "cases.yaml").write_text(SKIPPED_CASES.replace(
        "  - {id: c0, input: question 0, output: 'answer 0',",
        "  - {id: c0, input: question 0, output: 'answer 0', expected_keywords: [answer],"))
    done, _ = _run(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
