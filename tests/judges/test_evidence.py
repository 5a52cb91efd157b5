"""Issue #11, "a judge that fails never passes the gate": runs against the loopback OpenAI server whose judge
goes down mid-run, scores one verdict of many, or answers unreadable text; the reports that show it; repeats,
merged shards and the baseline comparison. Pure parts (case verdict, gate reason, counts) against
hand-computed values."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from evalgate.cli.main import main as cli_main
from evalgate.model import CaseResult, CaseStatus, MetricResult, MetricStatus, Threshold
from evalgate.report.console import make_console, render_report
from evalgate.report.html import render_html
from evalgate.report.markdown import render_comment, render_summary
from evalgate.store.results_json import SCHEMA_PATH
from evalgate.verdict.aggregate import RunAggregate, judge_verdicts
from evalgate.verdict.compare import compare_runs
from evalgate.verdict.gate import GatePolicy, case_verdict, judge_reason, run_verdict
from evalgate.verdict.repeats import collapse_repeats
from tests.servers.agent_server import AgentServer
from tests.servers.openai_server import Judge, OpenAIServer, Rule

KEY = "sk-evidence-judge-5a4b3c2d1e"
SCHEMA = json.loads(SCHEMA_PATH.read_text())
RELEVANT = [{"id": f"r{i}", "input": f"Question {i}?", "output": f"Answer {i}.", "passing_criteria": "answers it",
             "metrics": ["relevancy"]} for i in range(10)]
"""Ten cases with one gated judged metric each (relevancy ≥ 0.7)."""
GOLDEN = [{"id": f"GD-{i}", "query": f"How do I reset press {i}?", "answer": f"1. Lock out press {i}.\n2. Then reset it within 5 minutes.",
           "expected_specialist": "procedure_expert", "agent_id": "procedure_expert",
           "verified_answer_summary": "Lock out the press, then reset it.", "expected_keywords": ["lock out"],
           "expected_data_sources": ["rag"], "data_sources": ["rag"], "difficulty": "simple", "category": "procedure"}
          for i in range(3)]


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCAL_JUDGE_API_KEY", KEY)
    monkeypatch.setenv("EVALGATE_CALIBRATION", "trust")  # these tests are about a gating judge's missing evidence
    for name in ("GITHUB_ACTIONS", "GITHUB_REPOSITORY", "GITHUB_EVENT_PATH", "GITHUB_TOKEN", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(name, raising=False)


def run(tmp_path: Path, cases: list[dict[str, Any]], server: OpenAIServer, *args: Any, name: str = "out"
        ) -> tuple[int, dict[str, Any], str]:
    dataset = tmp_path / "cases.json"
    dataset.write_text(json.dumps(cases), encoding="utf-8")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = cli_main(["run", "-d", str(dataset), "-o", str(tmp_path / name), "--progress", "none",
                         "--judge-provider", "local", "--judge-base-url", server.base_url + "/v1",
                         "--api-retries", "0", *map(str, args)])
    document = json.loads((tmp_path / name / "results.json").read_text(encoding="utf-8"))
    jsonschema.validate(document, SCHEMA)
    return code, document, out.getvalue()


def down_after(calls: int) -> list[Rule]:
    """The judge answers its first ``calls`` requests, then every request gets HTTP 503."""
    return [Rule(status=503, where=lambda payload, seen=[0]: _count(seen) > calls)]


def _count(seen: list[int]) -> int:
    seen[0] += 1
    return seen[0]


# --- runs against the loopback judge ------------------------------------------------------------------------


def test_a_healthy_judge_passes(tmp_path: Path) -> None:
    with OpenAIServer(api_key=KEY, judge=Judge(score=0.9)) as server:
        code, document, _ = run(tmp_path, RELEVANT, server)
    assert code == 0 and document["gate"]["reasons"] == []
    assert document["summary"]["judged_unavailable"] == 0 and document["summary"]["judged_verdicts"] == 10


def test_a_judge_outage_mid_run_fails_the_gate_with_the_reason(tmp_path: Path) -> None:
    with OpenAIServer(down_after(3), api_key=KEY, judge=Judge(score=0.9)) as server:
        code, document, out = run(tmp_path, RELEVANT, server, "--concurrency", "1")
    gate, summary = document["gate"], document["summary"]
    assert code == 1 and gate["exit_code"] == 1 and not gate["passed"]
    assert gate["reasons"][0].startswith("judge unavailable: 7 of 10 verdicts of gated judged metrics could not be "
                                         "scored (relevancy 7 of 10; first: judge call failed: ")
    assert "HTTP 503" in gate["reasons"][0] and gate["reasons"][0].endswith("— see results.json")
    assert gate["reasons"][1] == "7 case(s) errored (allowed: 0)"
    assert (summary["total_passed"], summary["total_errored"]) == (3, 7)
    assert (summary["judged_unavailable"], summary["judged_verdicts"]) == (7, 10)
    assert document["metrics"]["relevancy"]["judge_unavailable"] == 7
    assert document["metrics"]["relevancy"]["average"] == pytest.approx(0.9)  # over the 3 verdicts given
    errored = [r for r in document["results"] if r["status"] == "errored"]
    assert [r["id"] for r in errored] == [f"r{i}" for i in range(3, 10)]
    assert all(r["reasons"][0].startswith("relevancy unavailable: judge call failed") for r in errored)
    assert all(r["metrics"]["relevancy"]["details"]["judge_failure"] == "unreachable" for r in errored)
    assert "⚠ Judge verdicts unavailable: 7 of 10" in out


def test_one_scored_verdict_of_many_fails_even_when_errored_cases_are_allowed(tmp_path: Path) -> None:
    with OpenAIServer(down_after(1), api_key=KEY, judge=Judge(score=0.9)) as server:
        code, document, _ = run(tmp_path, RELEVANT, server, "--concurrency", "1", "--max-errored", "100")
    reasons = document["gate"]["reasons"]
    assert code == 1
    assert reasons == [reasons[0]] and reasons[0].startswith(
        "judge unavailable: 9 of 10 verdicts of gated judged metrics could not be scored (relevancy 9 of 10;")
    assert document["summary"]["total_errored"] == 9 and document["summary"]["judged_unavailable"] == 9


def test_a_few_missing_verdicts_within_max_errored_pass(tmp_path: Path) -> None:
    with OpenAIServer(down_after(8), api_key=KEY, judge=Judge(score=0.9)) as server:
        code, document, _ = run(tmp_path, RELEVANT, server, "--concurrency", "1", "--max-errored", "2")
    assert code == 0 and document["gate"]["reasons"] == []
    assert document["summary"]["total_errored"] == 2 and document["summary"]["judged_unavailable"] == 2


def test_unreadable_verdicts_error_their_cases_with_the_reason(tmp_path: Path) -> None:
    with OpenAIServer([Rule(reply="The answer looks fine to me.")], api_key=KEY) as server:
        code, document, _ = run(tmp_path, RELEVANT[:4], server)
        requests = len(server.chat_requests())
    assert code == 1 and requests == 4  # structured output: no repair retries
    assert document["gate"]["reasons"][0] == (
        "judge unavailable: 4 of 4 verdicts of gated judged metrics could not be scored (relevancy 4 of 4; first: "
        "the judge's reply was not a valid verdict: the reply contains no JSON object) — see results.json")
    assert document["summary"]["total_errored"] == 4
    metric = document["results"][0]["metrics"]["relevancy"]
    assert metric["status"] == "unavailable" and metric["details"]["raw_reply"] == "The answer looks fine to me."
    assert metric["details"]["judge_failure"] == "unreadable"


def test_a_dead_judge_keeps_the_heuristic_values_visible_but_errors_the_cases(tmp_path: Path) -> None:
    with OpenAIServer([Rule(status=503)], api_key=KEY) as server:
        code, document, out = run(tmp_path, GOLDEN, server)
    assert code == 1 and document["gate"]["reasons"][0].startswith(
        "judge unavailable: 3 of 3 verdicts of gated judged metrics could not be scored (response_quality 3 of 3;")
    summary = document["summary"]
    assert summary["total_errored"] == 3 and summary["judged_unavailable"] == 3
    for record in document["results"]:
        quality, composite = record["metrics"]["response_quality"], record["metrics"]["composite"]
        assert quality["status"] in ("passed", "failed") and quality["details"]["method"] == "heuristic"
        assert "HTTP 503" in quality["details"]["judge_unavailable"]
        assert composite["value"] is not None and "response_quality scored by the heuristic" in \
            composite["details"]["judge_unavailable"]
        assert record["reasons"][0].startswith("response_quality: no judge verdict (judge call failed")
    assert document["metrics"]["response_quality"]["judge_unavailable"] == 3
    assert "response_quality: no judge verdict in 3 of 3 case(s), scored by the heuristic instead" in out


def test_no_judge_configured_stays_skipped_and_passes(tmp_path: Path) -> None:
    dataset = tmp_path / "cases.json"
    dataset.write_text(json.dumps(RELEVANT[:3] + GOLDEN), encoding="utf-8")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli_main(["run", "-d", str(dataset), "-o", str(tmp_path / "out"), "--progress", "none"])
    document = json.loads((tmp_path / "out" / "results.json").read_text())
    assert code == 0
    assert document["metrics"]["relevancy"]["skipped"] == 3 and document["summary"]["judged_unavailable"] == 0
    assert document["results"][3]["metrics"]["response_quality"]["details"]["method"] == "heuristic"
    assert "judge_unavailable" not in document["results"][3]["metrics"]["response_quality"]["details"]
    assert "Skipped by design: relevancy (3) — first: no judge configured (judge_provider none)" in out.getvalue()


def test_repeats_count_every_missing_verdict(tmp_path: Path) -> None:
    # concurrency 1: requests in order r0#0, r0#1, r1#0, r1#1, …; the judge dies after 3 of the 8
    with OpenAIServer(down_after(3), api_key=KEY, judge=Judge(score=0.9)) as server:
        code, document, _ = run(tmp_path, RELEVANT[:4], server, "--concurrency", "1", "--repeat", "2")
    summary = document["summary"]
    assert code == 1
    assert (summary["judged_unavailable"], summary["judged_verdicts"]) == (5, 8)
    # r0 passed twice; r1 passed once and errored once (majority of 2 not reached); r2, r3 errored twice
    statuses = {r["id"]: [] for r in document["results"]}
    for record in document["results"]:
        statuses[record["id"]].append(record["status"])
    assert statuses == {"r0": ["passed", "passed"], "r1": ["passed", "errored"], "r2": ["errored", "errored"],
                        "r3": ["errored", "errored"]}
    assert (summary["total_passed"], summary["total_errored"]) == (1, 3)
    assert document["gate"]["reasons"][0].startswith("judge unavailable: 5 of 8 verdicts")


def test_merged_shards_recount_the_missing_verdicts(tmp_path: Path) -> None:
    with OpenAIServer(api_key=KEY, judge=Judge(score=0.9)) as healthy:
        code_1, _, _ = run(tmp_path, RELEVANT, healthy, "--shard", "1/2", name="s1")
    with OpenAIServer([Rule(status=503)], api_key=KEY) as dead:
        code_2, second, _ = run(tmp_path, RELEVANT, dead, "--shard", "2/2", name="s2")
    assert code_1 == 0 and code_2 == 1
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = cli_main(["merge", str(tmp_path / "s1" / "results.json"), str(tmp_path / "s2" / "results.json"),
                         "-o", str(tmp_path / "merged")])
    merged = json.loads((tmp_path / "merged" / "results.json").read_text())
    missing = second["summary"]["judged_unavailable"]
    assert code == 1 and missing == len(second["results"]) > 0
    assert merged["summary"]["judged_unavailable"] == missing and merged["summary"]["judged_verdicts"] == 10
    assert merged["gate"]["reasons"][0].startswith(f"judge unavailable: {missing} of 10 verdicts")


# --- the comparison with a baseline ------------------------------------------------------------------------


def _record(case_id: str, status: str, value: float, **details: Any) -> dict[str, Any]:
    return {"id": case_id, "source": f"c.yaml:{case_id[-1]}", "risk_level": "medium", "status": status,
            "passed": status == "passed", "repeat": 0,
            "metrics": {"response_quality": {"value": value, "status": "passed", "details": details}}}


def test_heuristic_values_in_place_of_judge_verdicts_are_not_compared() -> None:
    base = {"results": [_record(f"c{i}", "passed", 4.0, method="judge") for i in range(6)]}
    head = {"results": [_record(f"c{i}", "errored", 1.2, method="heuristic", judge_unavailable="HTTP 503")
                        for i in range(5)] + [_record("c5", "passed", 4.5, method="judge")]}
    comparison = compare_runs(base, head, gated_metrics={"response_quality"})
    assert comparison["metrics"]["response_quality"]["n_paired"] == 1  # only c5 has a judge value on both sides
    assert comparison["pass_rate"]["regressions"] == 5  # passed → errored still counts as a regression


# --- pure parts: case verdict, counts, gate reason ---------------------------------------------------------


def _metric(status: MetricStatus, value: float | None = None, reason: str | None = None,
            **details: Any) -> MetricResult:
    return MetricResult(status=status, value=value, reason=reason, details=details,
                        threshold=Threshold(op="min", value=0.7), passed=None if value is None else value >= 0.7)


def test_case_verdict_errors_on_missing_evidence_only_for_gated_judge_metrics() -> None:
    unavailable = {"relevancy": _metric(MetricStatus.unavailable, reason="judge call failed: HTTP 503")}
    # no judge configured: a judge-dependent metric that only lacks the judge is like a skipped one
    assert case_verdict(unavailable, error=None, strict=False, needs_judge={"relevancy"}) == (CaseStatus.passed, [])
    assert case_verdict(unavailable, error=None, strict=False, optional={"relevancy"}) == (CaseStatus.passed, [])
    assert case_verdict(unavailable, error=None, strict=False)[0] is CaseStatus.errored  # missing evidence
    assert case_verdict(unavailable, error=None, strict=False, evidence={"relevancy"}) == (
        CaseStatus.errored, ["relevancy unavailable: judge call failed: HTTP 503"])
    fallback = {"response_quality": _metric(MetricStatus.passed, 4.25, judge_unavailable="HTTP 503")}
    assert case_verdict(fallback, error=None, strict=False, evidence={"response_quality"}) == (
        CaseStatus.errored, ["response_quality: no judge verdict (HTTP 503); the heuristic's 4.25 does not stand in "
                             "for it"])
    assert case_verdict(fallback, error=None, strict=False, evidence={"other"}) == (CaseStatus.passed, [])


def _case(case_id: str, status: CaseStatus, metric: MetricResult, repeat: int = 0) -> CaseResult:
    return CaseResult(id=case_id, status=status, passed=status is CaseStatus.passed, metrics={"relevancy": metric},
                      repeat=repeat)


def test_judge_counts_and_reason_by_hand() -> None:
    aggregate = RunAggregate({"relevancy"}, {"relevancy"})
    aggregate.add(_case("a", CaseStatus.passed, _metric(MetricStatus.passed, 0.9)))
    aggregate.add(_case("b", CaseStatus.errored, _metric(MetricStatus.unavailable, reason="first reason")))
    aggregate.add(_case("c", CaseStatus.errored, _metric(MetricStatus.errored, reason="second reason")))
    aggregate.add(_case("d", CaseStatus.passed, _metric(MetricStatus.skipped, reason="not asked")))
    tally = aggregate.judge["relevancy"]
    assert (tally.verdicts, tally.missing, tally.first, aggregate.judge_errored_cases) == (3, 2, "first reason", 2)
    assert judge_reason(aggregate, max_errored=2) == (  # 2 errored allowed, but 2 of 3 missing is a majority
        "judge unavailable: 2 of 3 verdicts of gated judged metrics could not be scored (relevancy 2 of 3; first: "
        "first reason) — see results.json")
    verdict = run_verdict(aggregate, {"relevancy": Threshold(op="min", value=0.7)}, GatePolicy(max_errored=2))
    assert verdict.reasons == [judge_reason(aggregate, 2)]
    aggregate.add(_case("e", CaseStatus.passed, _metric(MetricStatus.passed, 0.8)))
    aggregate.add(_case("f", CaseStatus.passed, _metric(MetricStatus.passed, 0.8)))
    assert judge_reason(aggregate, max_errored=2) is None  # 2 of 5 missing, within max_errored
    assert judge_reason(aggregate, max_errored=1) is not None
    for case_id in ("g", "h"):  # verdicts max_cost left unasked have their own gate reason: not the judge's
        aggregate.add(_case(case_id, CaseStatus.errored, _metric(MetricStatus.unavailable, judge_failure="budget",
                                                                 reason="not judged: max_cost $1 reached")))
    assert (tally.verdicts, tally.missing, tally.budget, tally.judge_missing) == (7, 4, 2, 2)
    assert aggregate.judge_errored_cases == 2 and judge_reason(aggregate, max_errored=2) is None


def test_collapsed_repeats_carry_their_verdict_counts() -> None:
    repeats = [_case("a", CaseStatus.passed, _metric(MetricStatus.passed, 0.9), 0),
               _case("a", CaseStatus.errored, _metric(MetricStatus.unavailable, reason="down"), 1),
               _case("a", CaseStatus.passed, _metric(MetricStatus.passed, 0.8), 2)]
    collapsed = collapse_repeats(repeats)
    assert collapsed.status is CaseStatus.passed  # 2 of 3 repeats passed (majority)
    counted = judge_verdicts(collapsed.metrics["relevancy"])
    assert (counted.verdicts, counted.missing, counted.budget, counted.first) == (3, 1, 0, "down")
    assert collapsed.metrics["relevancy"].value == pytest.approx(0.85)


def test_heuristic_repeats_do_not_dilute_judge_values() -> None:
    repeats = [_case("a", CaseStatus.passed, _metric(MetricStatus.passed, 0.9), 0),
               _case("a", CaseStatus.errored, _metric(MetricStatus.failed, 0.1, judge_unavailable="down"), 1)]
    assert collapse_repeats(repeats).metrics["relevancy"].value == pytest.approx(0.9)


# --- every reporter shows unavailable apart from skipped -----------------------------------------------------


@pytest.fixture(scope="module")
def outage(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("outage")
    cases = RELEVANT[:4] + [dict(c, id=f"g{i}") for i, c in enumerate(GOLDEN)] + [
        {"id": "m0", "input": "2+2?", "output": "4", "category": "math", "metrics": ["math"]}]  # math without expected_output: skipped
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LOCAL_JUDGE_API_KEY", KEY)
        patch.setenv("EVALGATE_CALIBRATION", "trust")
        with OpenAIServer(down_after(2), api_key=KEY, judge=Judge(score=0.9)) as server:
            _, document, _ = run(root, cases, server, "--concurrency", "1")
    return document


def test_console_lists_unavailable_then_skipped(outage: dict[str, Any]) -> None:
    for verbose in (False, True):
        buffer = io.StringIO()
        render_report(outage, make_console(buffer), verbose=verbose)
        text = buffer.getvalue()
        assert "⚠ Judge verdicts unavailable: 5 of 7 (first: judge call failed:" in text
        assert "⚠ relevancy: unavailable in 2 case(s) — first: judge call failed:" in text
        assert "⚠ response_quality: no judge verdict in 3 of 3 case(s), scored by the heuristic instead" in text
        skipped = "⏭ math: skipped in 1 case(s) — the case has no expected_output to compare with" if verbose else \
            "Skipped by design: math (1) — first: the case has no expected_output to compare with"
        assert skipped in text


def test_markdown_and_html_show_unavailable_apart_from_skipped(outage: dict[str, Any]) -> None:
    for text in (render_comment(outage, run_url=None, artifact_url=None, tag="t"),
                 render_summary(outage, run_url=None, artifact_url=None)):
        assert "Judge verdicts unavailable: 5 of 7**" in text
        assert "- ⚠️ `relevancy`: unavailable in 2 case(s) — first: judge call failed" in text
        assert "`response_quality`: no judge verdict in 3 of 3 case(s), scored by the heuristic instead" in text
        assert "judged metric skipped (math): " in text  # skipped (a choice) apart from unavailable (a problem)
        assert "⚠️ 3 without a judge verdict" in text  # response_quality's row: not a plain ✅
    html = render_html(outage)
    assert 'id="judge-unavailable"' in html and "Judge verdicts unavailable: 5 of 7" in html
    assert "<code>math</code>: skipped in 1 case(s)" in html
    assert "<code>relevancy</code>: unavailable in 2 case(s)" in html


def test_reports_of_an_older_results_file_without_the_new_fields(outage: dict[str, Any]) -> None:
    old = json.loads(json.dumps(outage))
    for info in old["metrics"].values():
        for key in ("first_reason", "judge_unavailable", "judge_verdicts", "judge_unavailable_first"):
            info.pop(key, None)
    for key in ("judged_verdicts", "judged_unavailable_first"):
        old["summary"].pop(key)
    text = render_comment(old, run_url=None, artifact_url=None, tag="t")
    assert "`relevancy`: unavailable in 2 case(s)" in text and "Judge verdicts unavailable: 5**" in text


def test_an_agent_target_with_a_dead_judge(tmp_path: Path) -> None:
    """The judge dead from the start while an HTTP agent answers: nothing passes on the agent's word alone."""
    cases = [{"id": f"a{i}", "input": f"question {i}", "passing_criteria": "answers", "metrics": ["relevancy"]}
             for i in range(3)]
    dataset = tmp_path / "cases.json"
    dataset.write_text(json.dumps(cases))
    with AgentServer({"question": "an answer"}) as agent, OpenAIServer([Rule(drop=True)], api_key=KEY) as judge, \
            contextlib.redirect_stdout(io.StringIO()):
        code = cli_main(["run", "-d", str(dataset), "--target", "http", "--target-url",
                         agent.base_url + "/api/agent/chat", "--judge-provider", "local", "--judge-base-url",
                         judge.base_url + "/v1", "--api-retries", "0", "-o", str(tmp_path / "out"),
                         "--progress", "none"])
    document = json.loads((tmp_path / "out" / "results.json").read_text())
    assert code == 1 and document["gate"]["reasons"][0].startswith("judge unavailable: 3 of 3 verdicts")
    assert document["summary"]["total_errored"] == 3


def test_a_declared_judged_metric_with_a_case_threshold_needs_its_verdict(tmp_path: Path) -> None:
    dataset = tmp_path / "cases.yaml"
    dataset.write_text("""cases:
  - id: a
    input: Say hello politely.
    output: Hello there, how can I help?
    assert:
      - criteria: Greets the user.
        evaluation_steps: [Check for a greeting.]
        threshold: 0.8
  - id: b
    input: Say hello.
    output: Hi!
    assert:
      - criteria: Greets the user.
        evaluation_steps: [Check for a greeting.]
        threshold: 0.3
  - id: c
    input: Say goodbye.
    output: Bye.
""", encoding="utf-8")
    with OpenAIServer([Rule(status=503)], api_key=KEY) as server, contextlib.redirect_stdout(io.StringIO()):
        code = cli_main(["run", "-d", str(dataset), "-o", str(tmp_path / "out"), "--progress", "none",
                         "--judge-provider", "local", "--judge-base-url", server.base_url + "/v1", "--api-retries", "0"])
    document = json.loads((tmp_path / "out" / "results.json").read_text())
    statuses = {r["id"]: r["status"] for r in document["results"]}
    assert code == 1 and statuses == {"a": "errored", "b": "errored", "c": "passed"}
    assert document["summary"]["judged_unavailable"] == 2 and document["summary"]["judged_verdicts"] == 2
    assert document["results"][0]["reasons"][0].startswith("case_criteria unavailable: judge call failed")
