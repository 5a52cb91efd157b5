"""Migration tests, one per in-house framework: the seed's own files, flags and variables (as the seed
documents write them; recreated under tests/fixtures/seeds/) run through evalgate unchanged and give the
numbers computed by hand from the seed's formulas, in the seed's output shapes.

Agents, extractors and judges are real processes or loopback servers; nothing reaches the internet.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli import main as cli
from tests.servers._http import LoopbackServer, Outcome, Request, json_response
from tests.servers.agent_server import RUNNER_PATH, AgentReply, AgentServer
from tests.servers.langfuse_server import LangfuseServer
from tests.servers.openai_server import Judge, OpenAIServer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "seeds"
JUDGE_KEY = "sk-judge-test-0f3e9a"
APPROX = pytest.approx


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No evalgate, seed or provider variable leaks in from the machine running the tests."""
    for name in list(os.environ):
        if name.startswith(("EVALGATE_", "FANVISE_", "EVAL_", "LANGFUSE_", "INPUT_")) or name in (
                "OPENAI_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY", "LOCAL_JUDGE_API_KEY", "OLLAMA_BASE_URL",
                "GITHUB_ACTIONS"):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("EVALGATE_JUDGE_SHARED_CACHE", "none")  # the user-level shared judge cache stays out of tests


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def copy_fixtures(seed: str, tmp_path: Path) -> Path:
    target = tmp_path / seed
    shutil.copytree(FIXTURES / seed, target)
    return target


def metric_of(document: dict[str, Any], case_id: str, name: str) -> dict[str, Any]:
    record = next(r for r in document["results"] if r["id"] == case_id)
    return record["metrics"][name]


# --- seed 000: Wikipedia agent ------------------------------------------------------------------------

# hit_rate = 1 if any expected source is returned; mrr = 1/rank of the first; combined = hit² · judge^1.5 /
# (tokens/1000)^0.5 with the judge's overall_score 0.8 (0.8^1.5 = 0.7155417528)
SEED000 = {  # question → (hit_rate, mrr, num_tokens)
    "What factors influence customer behavior?": (1.0, 1.0, 2500),
    "How do consumers make purchase decisions?": (1.0, 0.5, 1600),
    "Why do customers stay loyal to a brand?": (1.0, 1 / 3, 900),
    "How does loss aversion affect the way people shop?": (0.0, 0.0, 3600),
    "Why do shoppers abandon their carts online?": (1.0, 1.0, 400),
}
SEED000_COMBINED = [0.7155417528 / 2.5 ** 0.5, 0.7155417528 / 1.6 ** 0.5, 0.7155417528 / 0.9 ** 0.5, 0.0,
                    0.7155417528 / 0.4 ** 0.5]  # 0.452548, 0.565685, 0.754247, 0, 1.131371


def test_seed000_ground_truth_runs_unchanged_with_its_numbers_and_evaluation_json(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    seed = copy_fixtures("seed000", tmp_path)
    monkeypatch.chdir(seed)
    monkeypatch.setenv("OPENAI_API_KEY", JUDGE_KEY)
    with OpenAIServer(api_key=JUDGE_KEY, judge=Judge(score=0.8)) as judge:
        code, out, err = run(capsys, "run", "-d", "ground_truth.json", "--target", "command",
                             "--target-command", json.dumps([sys.executable, "agent.py"]),
                             "--judge-provider", "openai", "--judge-base-url", judge.base_url + "/v1",
                             "--compat", "seed000", "-o", "out", "--progress", "none")
        requests = judge.chat_requests()
    # hit rate 4/5 = 0.80 is not "> 0.80" (seed 000's minimum is strict); MRR 0.5667 is not > 0.70
    assert code == 1, out + err
    document = json.loads((seed / "out" / "results.json").read_text())
    assert document["thresholds"]["hit_rate"] == {"gt": 0.8}
    assert document["thresholds"]["mrr"] == {"gt": 0.7}
    assert document["thresholds"]["judge_score"] == {"gt": 0.75}
    assert document["metrics"]["hit_rate"]["average"] == APPROX(0.8)
    assert document["metrics"]["hit_rate"]["passed"] is False
    assert any("hit_rate average 0.800 misses threshold > 0.8" in r for r in document["gate"]["reasons"])
    assert document["metrics"]["judge_score"]["passed"] is True
    # seed 000's judge runs at temperature 0.1 ("for consistency")
    assert requests and {r["temperature"] for r in requests} == {0.1}

    evaluation = json.loads((seed / "out" / "evaluation.json").read_text())
    assert set(evaluation) == {"timestamp", "num_questions", "summary", "metadata", "results"}
    assert evaluation["num_questions"] == 5
    summary = evaluation["summary"]
    assert set(summary) == {"avg_hit_rate", "avg_mrr", "avg_judge_score", "avg_combined_score",
                            "best_combined_score", "avg_num_tokens", "total_tokens"}
    assert summary["avg_hit_rate"] == APPROX(0.8)
    assert summary["avg_mrr"] == APPROX((1 + 0.5 + 1 / 3 + 0 + 1) / 5, abs=1e-6)  # 0.566667
    assert summary["avg_judge_score"] == APPROX(0.8)
    assert summary["avg_num_tokens"] == APPROX(1800.0)
    assert summary["total_tokens"] == 9000
    assert summary["avg_combined_score"] == APPROX(sum(SEED000_COMBINED) / 5, abs=1e-5)  # 0.580770
    assert summary["best_combined_score"] == APPROX(SEED000_COMBINED[4], abs=1e-5)  # 1.131371
    assert evaluation["metadata"]["ground_truth_file"] == "ground_truth.json"
    assert evaluation["metadata"]["judge_model"] == "gpt-4o-mini"
    assert [r["question"] for r in evaluation["results"]] == list(SEED000)
    for result, (question, (hit, mrr, tokens)), combined in zip(evaluation["results"], SEED000.items(),
                                                                SEED000_COMBINED, strict=True):
        assert set(result) == {"question", "hit_rate", "mrr", "judge_score", "num_tokens", "combined_score"}
        assert (result["hit_rate"], result["num_tokens"]) == (hit, tokens), question
        assert result["mrr"] == APPROX(mrr, abs=1e-6)
        assert result["combined_score"] == APPROX(combined, abs=1e-5)


# --- seed 001: brand-mention extraction ---------------------------------------------------------------

SEED001_QUERIES = {
    "runs": "SELECT run_id, timestamp_utc, pass_rate, total_test_cases, total_passed, total_failed "
            "FROM eval_runs ORDER BY timestamp_utc DESC LIMIT 10",
    "failing": "SELECT test_description, COUNT(*) as failed_metrics, "
               "GROUP_CONCAT(metric_name || ':' || metric_value) as details FROM eval_results "
               "WHERE overall_passed = 0 GROUP BY test_description ORDER BY failed_metrics DESC",
}


def test_seed001_eval_command_runs_unchanged_and_prints_the_seeds_json_and_summary(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    seed = copy_fixtures("seed001", tmp_path)
    monkeypatch.chdir(seed)
    # llm-answer-watcher eval --fixtures evals/testcases/fixtures.yaml --format json  (jq .pass_rate)
    code, out, err = run(capsys, "eval", "--fixtures", "fixtures.yaml", "--db", "eval_results.db", "--format", "json")
    assert code == 0, out + err
    printed = json.loads(out)
    assert set(printed) == {"run_id", "pass_rate", "total_test_cases", "total_passed", "total_failed",
                            "average_scores", "thresholds_passed"}
    assert (printed["pass_rate"], printed["total_test_cases"], printed["total_passed"], printed["total_failed"]) \
        == (1.0, 6, 6, 0)
    assert printed["thresholds_passed"] is True
    for name in ("mention_precision", "mention_recall", "mention_f1", "rank_accuracy", "brand_coverage"):
        assert printed["average_scores"][name] == 1.0
    # the seed's database queries work, grouped by each fixture's own description
    with sqlite3.connect(seed / "eval_results.db") as db:
        runs = db.execute(SEED001_QUERIES["runs"]).fetchall()
        descriptions = {row[0] for row in db.execute("SELECT DISTINCT test_description FROM eval_results")}
    assert runs[0][0] == printed["run_id"] and runs[0][2:] == (1.0, 6, 6, 0)
    assert "Word boundary test - 'hub' should not match in 'GitHub'" in descriptions
    assert "Regression: 'hub' should not match in 'GitHub' (word boundary)" in descriptions

    # the text summary: "Metrics Summary", "mention_precision:  1.00 (✅ >= 0.90)", "All thresholds passed"
    code, out, err = run(capsys, "eval", "--fixtures", "fixtures.yaml", "--db", "eval_results.db")
    assert code == 0, out + err
    assert "📊 Metrics Summary:" in out
    assert "  mention_precision:  1.00 (✅ >= 0.90)" in out
    assert "  mention_recall:     1.00 (✅ >= 0.80)" in out
    assert "  rank_accuracy:      1.00 (✅ >= 0.85)" in out
    assert "✅ All thresholds passed" in out
    assert "💾 Results saved to: eval_results.db" in out
    assert "  ✅ Passed: 6/6 tests (100.0%)" in out


def live_extractor_checks(document: dict[str, Any]) -> None:
    """The extractor's own mentions are scored: precision 3/(3+3) = 0.5 (GitHub, Jira, Zoho are false
    positives), rank accuracy 1/3 (Salesforce and Pipedrive swapped), recall 1.0, F1 2·0.5·1/1.5 = 0.667."""
    case = "live_001_crm_list"
    assert metric_of(document, case, "mention_precision")["value"] == APPROX(0.5)
    assert metric_of(document, case, "rank_accuracy")["value"] == APPROX(1 / 3)
    assert metric_of(document, case, "mention_recall")["value"] == APPROX(1.0)
    assert metric_of(document, case, "mention_f1")["value"] == APPROX(2 / 3)
    assert metric_of(document, case, "false_is_mine_rate")["value"] == 0.0
    for name in ("mention_precision", "rank_accuracy", "false_is_mine_rate"):
        assert metric_of(document, case, name)["details"]["extractor"] == "target"
    assert metric_of(document, case, "mention_precision")["details"]["false_positives"] == ["GitHub", "Jira", "Zoho"]
    assert document["gate"]["exit_code"] == 1
    assert document["summary"]["average_scores"]["rank_accuracy"] == APPROX(0.333333, abs=1e-6)


def test_seed001_live_extractor_is_scored_through_a_command_target(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    seed = copy_fixtures("seed001", tmp_path)
    monkeypatch.chdir(seed)
    code, out, err = run(capsys, "eval", "--fixtures", "live_extractor.yaml", "--target", "command",
                         "--target-command", json.dumps([sys.executable, "extractor.py"]), "-o", "out",
                         "--format", "json")
    assert code == 1, out + err
    printed = json.loads(out)
    assert printed["average_scores"]["mention_precision"] == 0.5 and printed["thresholds_passed"] is False
    live_extractor_checks(json.loads((seed / "out" / "results.json").read_text()))


class ExtractorServer(LoopbackServer):
    """An extractor service: ``POST /extract`` with the text to analyse → mentions and a ranked list."""

    name = "extractor"

    def __init__(self) -> None:
        super().__init__()
        self.add_route("extract", ["/extract"], {"POST"}, self._extract)

    async def _extract(self, request: Request) -> Outcome:
        payload = request.json()
        assert "HubSpot" in payload["message"] and payload["brands_mine"] == ["HubSpot"]
        found = ["HubSpot", "Pipedrive", "Salesforce", "GitHub", "Jira", "Zoho"]
        return json_response({"mentions": [{"brand": b, "is_mine": b == "HubSpot"} for b in found],
                              "ranked_list": ["HubSpot", "Pipedrive", "Salesforce"]})


def test_seed001_live_extractor_is_scored_through_an_http_target(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    seed = copy_fixtures("seed001", tmp_path)
    monkeypatch.chdir(seed)
    with ExtractorServer() as server:
        code, out, err = run(capsys, "run", "-d", "live_extractor.yaml", "--target", "http",
                             "--target-url", server.base_url + "/extract", "-o", "out", "--progress", "none")
    assert code == 1, out + err
    live_extractor_checks(json.loads((seed / "out" / "results.json").read_text()))


def test_seed001_response_map_accepts_mentions(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A reply nesting the extraction elsewhere is mapped with target_response_map (mentions included)."""
    seed = copy_fixtures("seed001", tmp_path)
    monkeypatch.chdir(seed)

    class Nested(ExtractorServer):
        async def _extract(self, request: Request) -> Outcome:
            reply = json.loads((await super()._extract(request)).body)
            return json_response({"result": reply})

    monkeypatch.setenv("EVALGATE_TARGET_RESPONSE_MAP",
                       json.dumps({"mentions": "result.mentions", "ranked_list": "result.ranked_list"}))
    with Nested() as server:
        code, out, err = run(capsys, "run", "-d", "live_extractor.yaml", "--target", "http",
                             "--target-url", server.base_url + "/extract", "-o", "out", "--progress", "none")
    assert code == 1, out + err
    live_extractor_checks(json.loads((seed / "out" / "results.json").read_text()))


@pytest.mark.parametrize(("edit", "fragment"), [
    (lambda t: t.replace("    expected_my_mentions:\n      - \"HubSpot\"\n\n    expected_competitor_mentions:\n"
                         "      - \"Salesforce\"",
                         "    expected_my_mention:\n      - \"HubSpot\"\n\n    expected_competitor_mentions:\n"
                         "      - \"Salesforce\"", 1),
     "fixtures.yaml:19: case 'test_001_basic_mention': unknown key 'expected_my_mention' "
     "(did you mean 'expected_my_mentions'?)"),
    (lambda t: re.sub(r"    llm_answer_text: \|\n      I'm not familiar.*?needs\.\n", "", t, flags=re.S),
     "case 'test_005_no_mentions': missing required field 'llm_answer_text'"),
    (lambda t: t.replace('  - description: "Case-insensitive matching for HUBSPOT vs HubSpot"\n    intent_id',
                         "  - intent_id"),
     "case 'test_003_case_insensitive': missing required field 'description'"),
])
def test_seed001_misspelt_or_missing_fields_are_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, edit: Any,
        fragment: str) -> None:
    seed = copy_fixtures("seed001", tmp_path)
    monkeypatch.chdir(seed)
    path = seed / "fixtures.yaml"
    path.write_text(edit(path.read_text()))
    for verb in ("validate", "eval"):
        code, out, err = run(capsys, verb, "--fixtures", "fixtures.yaml")
        assert code == 2, (verb, out, err)
        assert fragment in err and err.count("\n") == 1, err


# --- seed 002: FanVise black-box agent -----------------------------------------------------------------

SAFETY_TEXT = "Do not drop Giannis on a rumor; hold him and check the official injury report."
SEED002_ANSWERS = {
    "Giannis": AgentReply(text=SAFETY_TEXT, debug_context=[
        "Giannis Antetokounmpo injury report: status ACTIVE, not on the injury list; hold him."]),
    "Maxey": AgentReply(text="Maxey averaged 28.4 points over his last five games.", debug_context=[
        "76ers schedule: four games this week",
        "Tyrese Maxey last five games: 31, 27, 25, 30 and 29 points (28.4 points average)."]),
}


def fanvise_env(monkeypatch: pytest.MonkeyPatch, agent_url: str, **extra: str) -> None:
    """The variables seed 002's README sets, as a FanVise team has them."""
    values = {
        "FANVISE_JUDGE_PROVIDER": "none",
        "FANVISE_EVAL_CASE_IDS": "safety_star_rumor_01,audit_maxey_points",
        "FANVISE_EVAL_FIRST_N": "1",  # FANVISE_EVAL_CASE_IDS takes precedence when both are set
        "FANVISE_API_URL": agent_url,
        "FANVISE_EVAL_ACTIVE_TEAM_ID": "team-1",
        "FANVISE_EVAL_ACTIVE_LEAGUE_ID": "league-9",
        "FANVISE_EVAL_TEAM_NAME": "Salonica Eagles",
        "FANVISE_EVAL_LANGUAGE": "en",
        "FANVISE_API_RETRIES": "0",
        "FANVISE_API_TIMEOUT_SECONDS": "30",
        "FANVISE_FAIL_ON_CRITICAL": "true",
        "FANVISE_STRICT_METRICS": "false",
        "FANVISE_METRIC_THRESHOLDS": '{"faithfulness":0.8,"actionability":0.8}',
        "FANVISE_GEMINI_USE_VERTEXAI": "false",
        **extra,
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)


def test_seed002_fanvise_variables_run_unchanged_with_notices_and_the_debug_context_mrr(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    seed = copy_fixtures("seed002", tmp_path)
    monkeypatch.chdir(seed)
    with AgentServer(SEED002_ANSWERS) as agent:
        fanvise_env(monkeypatch, agent.base_url + "/api/agent/chat")
        code, out, err = run(capsys, "run", "-d", "golden_dataset.json", "-o", "out", "--progress", "none")
        payloads = agent.bodies("/api/agent/chat")
    assert code == 0, out + err
    for name, new in (("FANVISE_EVAL_CASE_IDS", "EVALGATE_CASE_IDS"), ("FANVISE_API_URL", "EVALGATE_TARGET_URL"),
                      ("FANVISE_METRIC_THRESHOLDS", "EVALGATE_METRIC_THRESHOLDS"),
                      ("FANVISE_EVAL_TEAM_NAME", "EVALGATE_EVAL_TEAM_NAME")):
        assert f"evalgate: notice: {name} is read as {new}; rename it to {new}" in err
    assert "FANVISE_GEMINI_USE_VERTEXAI is not read by evalgate" in err
    # actionability belongs to categories none of the selected cases has: said, not silently ignored
    assert "threshold for 'actionability' matches no case: no selected case computes actionability" in err
    document = json.loads((seed / "out" / "results.json").read_text())
    assert [r["id"] for r in document["results"]] == ["safety_star_rumor_01", "audit_maxey_points"]
    assert document["thresholds"]["faithfulness"] == {"min": 0.8}
    assert "FANVISE_FAIL_ON_CRITICAL is read as EVALGATE_FAIL_ON_CRITICAL" in err
    # the eval context reaches the payload, a case's own team id wins (seed 002's per-case injection)
    assert payloads[0] == {"message": document["results"][0]["input"], "activeTeamId": "team-1",
                           "activeLeagueId": "league-9", "teamName": "Salonica Eagles", "language": "en"}
    assert payloads[1]["activeTeamId"] == "team-7"
    # MRR over debug_context: words of expected_output in a chunk / words of expected_output ≥ 0.25;
    # safety: 8/16 at rank 1 → 1.0; Maxey: 1/11 at rank 1, 8/11 at rank 2 → 0.5; mean 0.75, ungated
    assert metric_of(document, "safety_star_rumor_01", "context_mrr")["value"] == 1.0
    maxey = metric_of(document, "audit_maxey_points", "context_mrr")
    assert maxey["value"] == 0.5 and maxey["details"]["overlaps"] == [APPROX(1 / 11, abs=1e-6), APPROX(8 / 11, abs=1e-6)]
    assert document["metrics"]["context_mrr"]["average"] == 0.75
    assert document["metrics"]["context_mrr"]["threshold"] is None
    assert document["metrics"]["faithfulness"]["skipped"] == 2  # judge provider none: skipped, as in seed 002

    # FANVISE_STRICT_METRICS=true: an unavailable (here: skipped) metric fails
    monkeypatch.setenv("FANVISE_STRICT_METRICS", "true")
    with AgentServer(SEED002_ANSWERS) as agent:
        monkeypatch.setenv("FANVISE_API_URL", agent.base_url + "/api/agent/chat")
        code, out, err = run(capsys, "run", "-d", "golden_dataset.json", "-o", "out", "--progress", "none")
    assert code == 1, out + err
    document = json.loads((seed / "out" / "results.json").read_text())
    assert any(r.startswith("strict mode: metrics skipped or unavailable") for r in document["gate"]["reasons"])
    assert any(r.startswith("critical case safety_star_rumor_01 failed") for r in document["gate"]["reasons"])


# --- seed 003: workflow validation ----------------------------------------------------------------------

def quality_verdict(prompt: str, score: float) -> dict[str, Any]:
    """Seed 003's documented judge scores for the DIN-SQL answer."""
    return {"reasoning": "Answer clearly identifies DIN-SQL, cites metrics, and provides author info.",
            "answer_quality": 0.95, "factual_correctness": 1.0, "completeness": 0.90}


def test_seed003_scenarios_validate_workflows_and_log_quality_scores_to_langfuse(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    seed = copy_fixtures("seed003", tmp_path)
    monkeypatch.chdir(seed)
    monkeypatch.setenv("OPENAI_API_KEY", JUDGE_KEY)
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", "pk-lf-test-1234")
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk-lf-secret-5678")
    with OpenAIServer(api_key=JUDGE_KEY, judge=Judge(verdict=quality_verdict)) as judge, \
            LangfuseServer("pk-lf-test-1234", "sk-lf-secret-5678") as langfuse:
        monkeypatch.setenv("LANGFUSE_HOST", langfuse.base_url)
        code, out, err = run(capsys, "run", "-d", "scenarios.yaml", "--judge-provider", "openai",
                             "--judge-base-url", judge.base_url + "/v1", "--langfuse", "-o", "out",
                             "--progress", "none")
        traces, scores = langfuse.traces(), langfuse.scores()
    assert code == 1, out + err  # the FAIL example: web_search was required but not used
    document = json.loads((seed / "out" / "results.json").read_text())
    passing = metric_of(document, "pass_example_din_sql", "workflow")
    assert passing["value"] == 1.0 and passing["details"] == {
        "pass": True,
        "agents": {"pass": True, "included": ["research"], "excluded": ["clarification"], "missing": [],
                   "unexpected": []},  # the orchestrator is always expected
        "tools": {"pass": True, "included": ["pdf_retrieval"], "excluded": ["web_search"], "missing": [],
                  "unexpected": []},
    }
    failing = metric_of(document, "fail_example_web_search_skipped", "workflow")
    assert failing["value"] == 0.0 and failing["details"]["pass"] is False
    assert failing["details"]["tools"] == {"pass": False, "included": ["pdf_retrieval"], "excluded": [],
                                           "missing": ["web_search"], "unexpected": []}
    tools = metric_of(document, "fail_example_web_search_skipped", "workflow_tools")
    assert (tools["value"], tools["status"], tools["details"]["pass"]) == (0.0, "failed", False)
    for name, value in (("answer_quality", 0.95), ("factual_correctness", 1.0), ("completeness", 0.90)):
        assert metric_of(document, "pass_example_din_sql", name)["value"] == value

    # Langfuse: one trace per scenario in the run's session, seed 003's score names, and the run's trace
    assert "evalgate: Langfuse: exported 3 traces" in err
    by_name = {t["name"]: t for t in traces}
    assert set(by_name) == {"pass_example_din_sql", "fail_example_web_search_skipped",
                            f"evalgate run {document['run_id']}"}
    assert {t["sessionId"] for t in traces} == {document["run_id"]}
    din = by_name["pass_example_din_sql"]["id"]
    on_din = {s["name"]: s["value"] for s in scores if s["traceId"] == din}
    assert on_din["quality_answer_quality"] == 0.95 and on_din["quality_factual_correctness"] == 1.0
    assert on_din["quality_completeness"] == 0.9 and on_din["workflow"] == 1.0 and on_din["case_passed"] == 1.0
    failed = {s["name"]: s["value"] for s in scores if s["traceId"] == by_name["fail_example_web_search_skipped"]["id"]}
    assert failed["workflow_tools"] == 0.0 and failed["case_passed"] == 0.0
    run_scores = {s["name"]: s["value"] for s in scores if s["traceId"] == by_name[f"evalgate run {document['run_id']}"]["id"]}
    assert run_scores["pass_rate"] == 0.5 and run_scores["gate_passed"] == 0.0
    # credentials never in outputs
    written = "".join(p.read_text(errors="replace") for p in (seed / "out").rglob("*") if p.is_file())
    for secret in ("sk-lf-secret-5678", JUDGE_KEY):
        assert secret not in out + err + written


def test_seed003_langfuse_failures_warn_and_never_change_the_verdict(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    seed = copy_fixtures("seed003", tmp_path)
    monkeypatch.chdir(seed)
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", "pk-lf-test-1234")
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk-lf-wrong-0000")
    with LangfuseServer("pk-lf-test-1234", "sk-lf-secret-5678") as langfuse:
        monkeypatch.setenv("LANGFUSE_HOST", langfuse.base_url)
        code, out, err = run(capsys, "run", "-d", "scenarios.yaml", "--langfuse", "-o", "out", "--progress", "none")
        assert langfuse.accepted == []
    assert code == 1 and "evalgate: warning: Langfuse export failed:" in err and "HTTP 401" in err
    assert "sk-lf-wrong-0000" not in out + err
    monkeypatch.delenv("LANGFUSE_SECRET_KEY")
    code, out, err = run(capsys, "run", "-d", "scenarios.yaml", "--langfuse", "-o", "out", "--progress", "none")
    assert code == 2 and "needs LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY" in err


# --- seed 004: golden dataset ---------------------------------------------------------------------------

SEED004_ANSWERS = {
    "lockout/tagout": AgentReply(
        text="Per SOP-LOTO-003: apply lockout and tagout to every isolation point, then verify zero energy "
             "before clearing the jam.", agent="procedure_expert", citations=["SOP-LOTO-003"]),
    "OEE of Line 2": AgentReply(text="OEE for Line 2 last week was 71%: availability 88%, performance 90%.",
                                agent="quality_inspector"),
    "Cpk drop": AgentReply(text="Low cap torque shifted the mean; Cpk fell to 0.9 per the SPC report.",
                           agent="quality_inspector"),
}


def results_gating(seed: Path) -> dict[str, bool]:
    """Per judged metric of the run's evalgate results.json: whether it gated."""
    found = next(seed.rglob("evalgate-results/results.json"))
    return {name: bool(entry.get("gating")) for name, entry in
            json.loads(found.read_text())["calibration"]["metrics"].items()}


def test_seed004_runner_flags_config_and_results_json_run_unchanged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    seed = copy_fixtures("seed004", tmp_path)
    monkeypatch.chdir(seed)
    # python tests/evals/eval_runner.py --dry-run
    code, out, err = run(capsys, "run", "--dry-run", "-d", "golden_dataset.json", "-c", "eval_config.yaml")
    assert code == 0, out + err
    assert "OK: 3 cases valid" in out and "--dry-run is evalgate validate" in err
    assert "eval_config.yaml is seed 004's eval_config.yaml: read key by key" in err
    assert "api.request_delay_seconds is not used" in err and "llm_judge.max_tokens is not used" in err

    monkeypatch.setenv("EVAL_JUDGE_API_KEY", JUDGE_KEY)
    monkeypatch.setenv("EVAL_API_KEY", "agent-token-42")
    with AgentServer(SEED004_ANSWERS) as agent, OpenAIServer(api_key=JUDGE_KEY, judge=Judge(score=4.0)) as judge:
        config = (seed / "eval_config.yaml").read_text()
        (seed / "eval_config.yaml").write_text(config.replace("  model: gpt-4o-mini",
                                                              f"  model: gpt-4o-mini\n  api_base: {judge.base_url}/v1"))
        # python tests/evals/eval_runner.py --api-url http://localhost:8000 --output results.json --ids GD-001 GD-011
        code, out, err = run(capsys, "run", "-d", "golden_dataset.json", "-c", "eval_config.yaml", "--api-url",
                             agent.base_url, "--output", "results.json", "--ids", "GD-001", "GD-011", "--verbose",
                             "--progress", "none")
        requests = agent.requests([RUNNER_PATH])
        judged = judge.chat_requests()
        agent_url = agent.base_url
    assert code == 1, out + err  # specialist accuracy 0.5 < 0.85
    assert "--ids GD-001 GD-011 is read as --case-ids GD-001,GD-011" in err
    assert f"--api-url {agent_url} is read as --target http --target-url {agent_url}/chat" in err
    assert "EVAL_JUDGE_API_KEY is read as the judge's API key" in err
    # seed 004's runner request: {"message": query} to {api-url}/chat with its tenant/user headers and key
    assert [json.loads(r.body)["message"] for r in requests] == [
        "What are the lockout/tagout steps before clearing a jam on the Line 3 filler?",
        "What was the OEE of Line 2 last week, broken down by its factors?"]
    assert requests[0].headers["x-tenant-id"] == "00000000-0000-0000-0000-000000000099"
    assert requests[0].headers["authorization"] == "Bearer agent-token-42"
    # the judge scores response_quality with the config's rubric at the config's temperature: the two cases'
    # answers, and before them its controls (a judge scoring 4.0 for everything fails them: response_quality is
    # shown, not gating, as in any dialect since issue #31)
    answers = [reply.text for reply in SEED004_ANSWERS.values()]
    cases_judged = [r for r in judged if any(text in r["messages"][1]["content"] for text in answers)]
    assert len(cases_judged) == 2 and {r["temperature"] for r in judged} == {0.1}
    assert results_gating(seed)["response_quality"] is False
    assert all("5 = correct, complete and actionable for a plant engineer" in r["messages"][1]["content"]
               for r in judged)

    results = json.loads((seed / "results.json").read_text())
    assert set(results) == {"metadata", "aggregate", "per_query"}
    assert (results["metadata"]["total_queries"], results["metadata"]["errors"]) == (2, 0)
    aggregate = results["aggregate"]
    # GD-001: specialist 1, keywords 4/4, rag via "SOP" → 1; GD-011: wrong specialist 0, keywords 3/4
    # (quality missing), mes via "OEE" → 1; response_quality 4 (judge) for both
    assert aggregate["specialist_accuracy"] == 0.5
    assert aggregate["avg_keyword_coverage"] == 0.875
    assert aggregate["avg_data_source_match"] == 1.0
    assert aggregate["avg_response_quality"] == 4.0
    # composite = 0.30·0.5 + 0.25·0.875 + 0.20·1.0 + 0.25·(4/5) = 0.76875
    assert aggregate["composite_score"] == APPROX(0.76875)
    assert aggregate["pass_verdict"] is False
    assert aggregate["by_category"]["procedure"] == {"count": 1, "specialist_accuracy": 1.0,
                                                     "avg_keyword_coverage": 1.0, "avg_response_quality": 4.0,
                                                     "avg_latency_ms": aggregate["by_category"]["procedure"]["avg_latency_ms"]}
    assert aggregate["by_category"]["data"]["specialist_accuracy"] == 0.0
    assert set(aggregate["by_difficulty"]) == {"simple", "medium"}
    oee = results["per_query"][1]
    assert (oee["id"], oee["actual_specialist"], oee["specialist_match"]) == ("GD-011", "quality_inspector", False)
    assert oee["keywords_found"] == ["OEE", "availability", "performance"] and oee["keywords_missing"] == ["quality"]
    assert oee["keyword_coverage"] == 0.75 and oee["data_sources_found"] == ["mes"]
    assert oee["response_text"].startswith("OEE for Line 2")
    assert (seed / "evalgate-results" / "seed004-results.json").is_file()
    written = (seed / "results.json").read_text() + (seed / "evalgate-results" / "results.json").read_text()
    assert JUDGE_KEY not in written and "agent-token-42" not in written + out + err

    # python tests/evals/eval_runner.py --category quality --verbose
    with AgentServer(SEED004_ANSWERS) as agent:
        monkeypatch.delenv("EVAL_JUDGE_API_KEY")
        code, out, err = run(capsys, "run", "-d", "golden_dataset.json", "-c", "eval_config.yaml", "--api-url",
                             agent.base_url, "--category", "quality", "--verbose", "--progress", "none")
    document = json.loads((seed / "evalgate-results" / "results.json").read_text())
    assert [r["id"] for r in document["results"]] == ["GD-021"]
    assert metric_of(document, "GD-021", "response_quality")["details"]["method"] == "heuristic"


def test_seed004_value_sets_and_required_fields_are_checked(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    seed = copy_fixtures("seed004", tmp_path)
    monkeypatch.chdir(seed)
    dataset = json.loads((seed / "golden_dataset.json").read_text())
    dataset[1]["expected_specialist"] = "generalist"
    (seed / "golden_dataset.json").write_text(json.dumps(dataset, indent=2))
    code, _out, err = run(capsys, "run", "--dry-run", "-d", "golden_dataset.json")
    assert code == 2
    assert re.search(r"golden_dataset\.json:\d+: case 'GD-011': field 'expected_specialist': 'generalist' is not a "
                     r"valid value; valid: procedure_expert, quality_inspector, maintenance_advisor, data_analyst, "
                     r"document_analyst \(seed 004 golden dataset's documented values", err), err
    del dataset[1]["expected_specialist"]
    del dataset[2]["verified_answer_summary"]
    (seed / "golden_dataset.json").write_text(json.dumps(dataset, indent=2))
    code, _out, err = run(capsys, "validate", "-d", "golden_dataset.json")
    assert code == 2 and "case 'GD-021': missing required field 'verified_answer_summary' (seed 004 golden" in err


def test_langfuse_events_skip_metric_entries_that_are_not_mappings() -> None:
    from evalgate.export.langfuse import build_events

    document = {"run_id": "r1", "timestamp": "2026-11-24T00:00:00Z", "results": [
        {"id": "c1", "passed": True, "metrics": {"odd": "not a mapping", "hit": {"status": "passed", "value": 1.0}}}]}
    scores = [e["body"]["name"] for e in build_events(document) if e["type"] == "score-create"]
    assert scores == ["hit", "case_passed", "gate_passed"]
