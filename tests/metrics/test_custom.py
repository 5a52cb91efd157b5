"""Your own metrics (docs/custom-metrics.md): judged metrics declared in a suite (criteria only, explicit
steps with a 1–5 rubric), a code check from a file, one-off ``assert:`` entries, run against the loopback
OpenAI-compatible judge, with the calls counted at the server."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from evalgate.cli.main import main as cli_main
from evalgate.report.markdown import render_comment
from tests.servers.openai_server import (
    DEFAULT_STEPS,
    STEPS_PROMPT_MARKER,
    Judge,
    OpenAIServer,
    Rule,
    prompt_text,
)

KEY = "sk-custom-metrics-24680"
SCHEMA = Path(__file__).resolve().parents[2] / "evalgate" / "schemas" / "results.schema.json"
CASES = 20

SUITE = """\
suite:
  name: helpdesk
  metrics:
    - name: helpdesk_tone
      criteria: |
        The reply is polite and empathetic.
        It never blames the customer.
      threshold: 0.7
    - name: resolution
      criteria: The reply resolves the customer's issue the way the expected output does.
      evaluation_steps:
        - Compare the reply with the expected output.
        - Check that the customer tier in the metadata is respected.
      rubric:
        5: fully resolved
        3: partly resolved
        1: not resolved
      fields: [input, output, expected_output, metadata.tier]
      threshold: 0.5
    - file://checks/ticket.py:has_ticket
cases:
"""

CHECKS = """\
import evalgate


def has_ticket(case, answer):
    \"\"\"The reply quotes a ticket number.\"\"\"
    if "TICKET-" in answer.text:
        return evalgate.Score(1.0, {"ticket": answer.text.split("TICKET-")[1][:4]})
    return evalgate.Score(0.0, reason="no ticket number in the reply")
"""


def write_suite(root: Path, cases: int = CASES) -> Path:
    (root / "checks").mkdir(parents=True, exist_ok=True)
    (root / "checks" / "ticket.py").write_text(CHECKS)
    lines = [SUITE]
    for number in range(cases):
        polite = number % 2 == 0
        resolved = number % 4 < 2
        output = ("Sorry about that! " if polite else "Read the manual. ") + (
            f"Your refund is on its way, TICKET-{1000 + number}." if resolved else "Nothing to do.")
        lines.append(textwrap.indent(textwrap.dedent(f"""\
            - id: c{number:02d}
              input: "Where is my refund for order {number}?"
              expected_output: Your refund is on its way.
              output: {json.dumps(output)}
              metadata: {{tier: {"gold" if number % 3 == 0 else "basic"}}}
            """), "  "))
    path = root / "helpdesk.yaml"
    path.write_text("".join(lines))
    return path


def answer_of(prompt: str) -> str:
    """The fenced answer in a judge prompt."""
    match = re.search(r"<<<UNTRUSTED answer id=(\w+)>>>\n(.*?)\n<<<END id=\1 ", prompt, re.S)
    assert match, prompt
    return match.group(2)


def score(prompt: str) -> float:
    if 'the metric "helpdesk_tone"' in prompt:
        return 0.9 if answer_of(prompt).startswith("Sorry") else 0.3
    if 'the metric "resolution"' in prompt:
        return 5.0 if "refund is on its way" in answer_of(prompt) else 1.0
    raise AssertionError(f"unexpected judge prompt: {prompt[:300]}")


def run(root: Path, dataset: Path, judge: OpenAIServer, *extra: str) -> tuple[int, dict[str, Any]]:
    code = cli_main(["run", "--dataset", str(dataset), "--judge-provider", "local", "--judge-base-url",
                     judge.base_url + "/v1", "--output-dir", str(root / "out"), "--progress", "none",
                     "--concurrency", "8", *extra])
    return code, json.loads((root / "out" / "results.json").read_text())


def test_declared_judged_metrics_and_a_file_check_against_the_loopback_judge(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("LOCAL_JUDGE_API_KEY", KEY)
    monkeypatch.setenv("EVALGATE_CALIBRATION", "trust")  # the declared judges gate (uncalibrated, as before #23)
    dataset = write_suite(tmp_path)
    server = OpenAIServer(api_key=KEY, judge=Judge(score=score)).start()
    judge_url = server.base_url + "/v1"
    try:
        code, document = run(tmp_path, dataset, server)
        counts = server.counts()
        prompts = [json.dumps(body) for body in server.chat_requests()]
        server.reset()
        # a rerun against the same judge: steps and verdicts come from the judge cache, no call at all
        code_again, again = run(tmp_path, dataset, server)
        rerun_counts = server.counts()
    finally:
        server.stop()

    # one step-generation call for the criteria-only metric, however many cases (20) and workers (8)
    assert counts == {"steps": 1, "criteria": 2 * CASES}, counts
    results = {r["id"]: r["metrics"] for r in document["results"]}
    for number in range(CASES):
        metrics = results[f"c{number:02d}"]
        polite, resolved = number % 2 == 0, number % 4 < 2
        assert metrics["helpdesk_tone"]["value"] == pytest.approx(0.9 if polite else 0.3)
        assert metrics["helpdesk_tone"]["passed"] is polite
        assert metrics["resolution"]["value"] == pytest.approx(1.0 if resolved else 0.0)  # (5−1)/4, (1−1)/4
        assert metrics["has_ticket"]["value"] == (1.0 if resolved else 0.0)
    failing = results["c01"]  # impolite, resolved
    assert failing["helpdesk_tone"]["details"]["reasoning"]
    assert failing["helpdesk_tone"]["details"]["steps_source"] == "generated"
    assert failing["helpdesk_tone"]["details"]["criteria"] == "The reply is polite and empathetic."
    assert results["c03"]["has_ticket"]["details"]["reason"] == "no ticket number in the reply"
    assert results["c00"]["has_ticket"]["details"]["ticket"] == "1000"

    custom = document["metadata"]["custom_metrics"]
    assert custom["helpdesk_tone"]["evaluation_steps"] == list(DEFAULT_STEPS)
    assert custom["helpdesk_tone"]["steps_source"] == "generated"
    assert custom["resolution"]["steps_source"] == "declared"
    assert custom["resolution"]["rubric"][0] == {"score": 5.0, "description": "fully resolved"}
    assert custom["has_ticket"]["type"] == "check"
    table = document["metrics"]
    assert table["helpdesk_tone"]["summary"] == "The reply is polite and empathetic."
    assert table["helpdesk_tone"]["average"] == pytest.approx(0.6) and table["helpdesk_tone"]["passed"] is False
    assert table["has_ticket"]["summary"] == "The reply quotes a ticket number."
    assert table["resolution"]["kind"] == "judged" and table["resolution"]["threshold"] == {"min": 0.5}
    assert code == 1  # helpdesk_tone's average 0.6 misses 0.7

    # what the judge saw: declared steps, the 1–5 scale, fenced fields (metadata too); generated steps reused
    resolution = next(p for p in prompts if 'metric \\"resolution\\"' in p)
    assert "Check that the customer tier in the metadata is respected." in resolution
    assert "<<<UNTRUSTED metadata.tier id=" in resolution and "<<<UNTRUSTED expected output id=" in resolution
    assert "Score 1\\u20135" in resolution  # the 1–5 scale (the recorded body is JSON: non-ASCII escaped)
    tone = [p for p in prompts if 'metric \\"helpdesk_tone\\"' in p]
    assert len(tone) == CASES and all(DEFAULT_STEPS[1] in p for p in tone)

    # the reports show the criteria beside the score and the judge's reasoning for a failing case
    out = capsys.readouterr().out
    assert "The reply is polite and empathetic." in out
    assert re.search(r"- helpdesk_tone 0\.\d{3} \(needs ≥ 0\.7\): scripted verdict", out), out  # the "why" line
    jsonschema.validate(document, json.loads(SCHEMA.read_text()))
    comment = render_comment(document, run_url=None, artifact_url=None, tag="default")
    assert "`helpdesk_tone` — The reply is polite and empathetic." in comment
    assert "misses threshold ≥ 0.7 — scripted verdict from the loopback judge" in comment

    # the rerun made no call; validate says the steps are cached
    assert rerun_counts == {} and code_again == code
    assert again["metadata"]["custom_metrics"]["helpdesk_tone"]["steps_source"] == "cache"
    assert [r["metrics"]["helpdesk_tone"]["value"] for r in again["results"]] == [
        r["metrics"]["helpdesk_tone"]["value"] for r in document["results"]]
    capsys.readouterr()
    assert cli_main(["validate", "--dataset", str(dataset), "--judge-provider", "local", "--judge-base-url",
                     judge_url, "--output-dir", str(tmp_path / "out"), "--format", "json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)["custom_metrics"]}
    assert rows["helpdesk_tone"]["steps"] == "cached"
    assert rows["resolution"]["steps"] == "declared"
    assert rows["has_ticket"]["type"] == "check"


def test_steps_generation_failure_makes_the_metric_unavailable_once(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCAL_JUDGE_API_KEY", KEY)
    dataset = write_suite(tmp_path, cases=6)
    broken = Rule(where=lambda body: STEPS_PROMPT_MARKER in prompt_text(body), invalid_json=True)
    with OpenAIServer([broken], api_key=KEY, judge=Judge(score=score)) as judge:
        _, document = run(tmp_path, dataset, judge, "--api-retries", "0")
        counts = judge.counts()
    assert counts["steps"] == 1  # one call for all 6 cases (structured output: no repair retry)
    for record in document["results"]:
        tone = record["metrics"]["helpdesk_tone"]
        assert tone["status"] == "unavailable" and "could not write evaluation steps" in tone["reason"]
        assert record["metrics"]["resolution"]["status"] in ("passed", "failed")
    assert "steps_error" in document["metadata"]["custom_metrics"]["helpdesk_tone"]


def test_criteria_verdicts_use_repair_retry_samples_and_the_scale(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Prompt-only output, where an unreadable reply gets its repair retry (structured output makes none)."""
    monkeypatch.setenv("LOCAL_JUDGE_API_KEY", KEY)
    dataset = tmp_path / "one.yaml"
    dataset.write_text(textwrap.dedent("""\
        cases:
          - id: a
            input: Say hello politely.
            output: Hello there, how can I help?
            assert:
              - criteria: Greets the user.
                evaluation_steps: [Check for a greeting.]
                threshold: 0.8
              - criteria: Offers help.
                evaluation_steps: [Check for an offer of help.]
                rubric: {0: no offer, 10: clear offer}
                threshold: {min: 0.4}
        """))
    first_invalid = Rule(contains="Greets the user.", invalid_json=True, times=1)
    judge_reply = Judge(score=lambda p: 0.85 if "Greets the user." in p else 5.0)
    with OpenAIServer([first_invalid], api_key=KEY, judge=judge_reply) as judge:
        code, document = run(tmp_path, dataset, judge, "--judge-samples", "2", "--judge-output", "prompt")
        counts = judge.counts()
    metrics = document["results"][0]["metrics"]
    greets, offers = metrics["case_criteria"], metrics["case_criteria_2"]
    assert greets["details"]["output_mode"] == "prompt"
    assert greets["value"] == pytest.approx(0.85) and greets["threshold"] == {"min": 0.8}
    assert greets["details"]["repaired"] is True
    assert offers["value"] == pytest.approx(0.5) and offers["threshold"] == {"min": 0.4}  # 5 on a 0–10 scale
    assert counts == {"criteria": 5}  # 2 samples × 2 metrics, + 1 repair
    assert code == 0


def test_no_judge_skips_custom_judged_metrics_and_says_so(tmp_path: Path) -> None:
    dataset = write_suite(tmp_path, cases=2)
    code = cli_main(["run", "--dataset", str(dataset), "--output-dir", str(tmp_path / "out"), "--progress", "none"])
    document = json.loads((tmp_path / "out" / "results.json").read_text())
    tone = document["results"][0]["metrics"]["helpdesk_tone"]
    assert tone["status"] == "skipped" and "no judge configured" in tone["reason"]
    assert document["results"][0]["metrics"]["has_ticket"]["status"] == "passed"
    assert code == 0
    strict = cli_main(["run", "--dataset", str(dataset), "--output-dir", str(tmp_path / "out2"), "--progress",
                       "none", "--strict-metrics"])
    assert strict == 1  # missing evidence never turns into a pass in strict mode


def test_the_docs_example_validates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "custom-metrics.md").read_text()
    section = page[page.index("# Your own metrics"):]
    example = section[section.index("```yaml\n") + 8:section.index("```\n", section.index("```yaml\n") + 8)]
    (tmp_path / "suite.yaml").write_text(example)
    (tmp_path / "checks.py").write_text("def has_ticket(case, answer):\n    return 'TICKET-' in answer.text\n")
    (tmp_path / "my_package").mkdir()
    (tmp_path / "my_package" / "__init__.py").write_text("")
    (tmp_path / "my_package" / "checks.py").write_text("def no_pii(case, answer):\n    return '@' not in answer.text\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert cli_main(["validate", "--dataset", "suite.yaml", "--format", "json"]) == 0
    names = {row["name"] for row in json.loads(capsys.readouterr().out)["custom_metrics"]}
    assert names == {"helpdesk_tone", "resolution", "has_ticket", "no_pii"}


def test_criteria_that_mention_the_expected_output_are_shown_it() -> None:
    from evalgate.metrics.criteria import definition_of
    from evalgate.model import CaseAssertion

    shown = definition_of("m", CaseAssertion(criteria="Matches the expected output in substance."), "x").fields
    assert shown == ("input", "output", "expected_output")
    assert definition_of("m", CaseAssertion(criteria="Is polite."), "x").fields == ("input", "output")
    explicit = CaseAssertion(criteria="Agrees with the expected answer.", fields=["output"])
    assert definition_of("m", explicit, "x").fields == ("output",)  # a declared list is kept as written
