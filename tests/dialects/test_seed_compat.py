"""The pieces that make each seed a drop-in, one by one: strict thresholds, the seeds' variables, flags and
config file, dataset kinds and value sets, names that match nothing, output shapes, the debug-context MRR,
per-metric judge temperatures, SQLite descriptions and the Langfuse events. (End-to-end runs per seed:
tests/dialects/test_migration.py.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from evalgate.cli import main as cli
from evalgate.cli.options import cli_values
from evalgate.config.settings import build_settings
from evalgate.config.suite import parse_suite_config
from evalgate.dialects.seed000 import evaluation_json as seed000_document
from evalgate.dialects.seed001 import console_summary as render_seed001_summary
from evalgate.dialects.seed001 import summary_json as seed001_document
from evalgate.dialects.seed004 import results_json as seed004_document
from evalgate.errors import UserError
from evalgate.export.langfuse import LangfuseError, batches, build_events, score_name, send
from evalgate.judges.factory import metric_temperatures, template_temperatures
from evalgate.metrics.retrieval import context_reciprocal_rank
from evalgate.metrics.workflow import check_side
from evalgate.model import CaseResult, CaseStatus, Threshold
from evalgate.report.view import format_threshold
from evalgate.store.results_json import SCHEMA_PATH
from evalgate.store.sqlite import Descriptions
from tests.servers.langfuse_server import LangfuseServer

# --- strict thresholds ------------------------------------------------------------------------------


@pytest.mark.parametrize(("spec", "inside", "boundary", "outside"), [
    ({"gt": 0.8}, 0.81, 0.8, 0.79), ({"lt": 0.2}, 0.19, 0.2, 0.21),
    ({"min": 0.8}, 0.81, None, 0.79), ({"max": 0.2}, 0.19, None, 0.21),
])
def test_strict_bounds_exclude_their_boundary(spec: dict[str, float], inside: float, boundary: float | None,
                                              outside: float) -> None:
    threshold = Threshold.model_validate(spec)
    assert threshold.admits(inside) and not threshold.admits(outside)
    if boundary is not None:
        assert not threshold.admits(boundary)  # "> 0.80" fails at exactly 0.80
    assert threshold.model_dump() == spec
    assert format_threshold(spec) == str(threshold)


def test_strict_forms_are_accepted_wherever_thresholds_are(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = parse_suite_config({"thresholds": {"hit_rate": {"gt": 0.5}, "num_tokens": {"lt": 3000}}}, "f.yaml:1")
    assert suite.resolve_thresholds({"hit_rate": "higher", "num_tokens": "lower"}) == {
        "hit_rate": Threshold(op="gt", value=0.5), "num_tokens": Threshold(op="lt", value=3000)}
    with pytest.raises(UserError, match=r"\{min: x\}, \{max: x\}, \{gt: x\} or \{lt: x\}"):
        parse_suite_config({"thresholds": {"hit_rate": {"above": 0.5}}}, "f.yaml:1")
    (tmp_path / "d.json").write_text(json.dumps([{"question": "q", "expected_sources": ["A"], "sources": ["B", "A"],
                                                  "output": "x"}]))
    (tmp_path / "evalgate.yaml").write_text("thresholds:\n  mrr: {gt: 0.5}\n")
    code = cli.main(["run", "-d", str(tmp_path / "d.json"), "-c", str(tmp_path / "evalgate.yaml"), "-o",
                     str(tmp_path / "out"), "--metric-thresholds", '{"hit_rate": {"gt": 0.99}}', "--progress", "none"])
    capsys.readouterr()
    document = json.loads((tmp_path / "out" / "results.json").read_text())
    jsonschema.validate(document, json.loads(SCHEMA_PATH.read_text()))
    assert document["thresholds"]["mrr"] == {"gt": 0.5} and document["metrics"]["mrr"]["passed"] is False  # 0.5
    assert document["thresholds"]["hit_rate"] == {"gt": 0.99} and document["metrics"]["hit_rate"]["passed"] is True
    assert code == 1


# --- seed 002's variables -----------------------------------------------------------------------------------

FANVISE = {
    "FANVISE_JUDGE_PROVIDER": ("judge_provider", "local"), "FANVISE_JUDGE_MODEL": ("judge_model", "qwen2.5:14b"),
    "FANVISE_JUDGE_BASE_URL": ("judge_base_url", "http://127.0.0.1:9/v1"),
    "FANVISE_STRICT_METRICS": ("strict_metrics", True), "FANVISE_FAIL_ON_CRITICAL": ("fail_on_critical", False),
    "FANVISE_API_RETRIES": ("api_retries", 5), "FANVISE_API_TIMEOUT_SECONDS": ("api_timeout_seconds", 240.0),
    "FANVISE_METRIC_THRESHOLDS": ("metric_thresholds", {"faithfulness": 0.8}),
    "FANVISE_EVAL_FIRST_N": ("first_n", 8), "FANVISE_EVAL_CASE_IDS": ("case_ids", ["a", "b"]),
    "FANVISE_API_URL": ("target_url", "http://127.0.0.1:3000/api/agent/chat"),
}
RAW = {"FANVISE_STRICT_METRICS": "true", "FANVISE_FAIL_ON_CRITICAL": "false", "FANVISE_API_RETRIES": "5",
       "FANVISE_API_TIMEOUT_SECONDS": "240", "FANVISE_METRIC_THRESHOLDS": '{"faithfulness": 0.8}',
       "FANVISE_EVAL_FIRST_N": "8", "FANVISE_EVAL_CASE_IDS": "a,b"}


def test_every_fanvise_variable_is_read_with_a_notice(tmp_path: Path) -> None:
    env = {name: RAW.get(name, value) for name, (_, value) in FANVISE.items()}
    env |= {"FANVISE_EVAL_ACTIVE_TEAM_ID": "t1", "FANVISE_EVAL_ACTIVE_LEAGUE_ID": "l1",
            "FANVISE_EVAL_TEAM_NAME": "Eagles", "FANVISE_EVAL_LANGUAGE": "el"}
    settings, _, _ = build_settings(env=env, cwd=tmp_path)
    for name, (field, value) in FANVISE.items():
        assert getattr(settings, field) == value, name
    assert settings.target == "http"  # FANVISE_API_URL: the seed always called its API
    assert settings.eval_context == {"active_team_id": "t1", "active_league_id": "l1", "team_name": "Eagles",
                                     "language": "el"}
    assert len(settings.notices) == len(env) + 1  # one per variable, and seed 002's dialect switched on
    assert settings.compat == ["seed002"]
    assert any("seed 002's dialect is on" in notice for notice in settings.notices)
    assert "FANVISE_EVAL_FIRST_N is read as EVALGATE_FIRST_N; rename it to EVALGATE_FIRST_N" in settings.notices


def test_evalgate_names_win_over_fanvise_names_and_errors_name_what_was_set(tmp_path: Path) -> None:
    settings, _, _ = build_settings(env={"FANVISE_EVAL_FIRST_N": "8", "EVALGATE_FIRST_N": "2",
                                         "FANVISE_TELEMETRY": "on"}, cwd=tmp_path)
    assert settings.first_n == 2
    assert settings.notices == ["FANVISE_EVAL_FIRST_N is ignored: EVALGATE_FIRST_N is also set and wins",
                                "FANVISE_TELEMETRY is not read by evalgate (no equivalent setting); it has no effect"]
    with pytest.raises(UserError) as caught:
        build_settings(env={"FANVISE_EVAL_FIRST_N": "eight"}, cwd=tmp_path)
    assert caught.value.where == "FANVISE_EVAL_FIRST_N"


# --- seed 004's flags, variable and config file ---------------------------------------------------------------


def test_eval_judge_api_key_selects_the_openai_judge_unless_a_provider_is_set(tmp_path: Path) -> None:
    settings, _, _ = build_settings(env={"EVAL_JUDGE_API_KEY": "sk-seed004-judge"}, cwd=tmp_path)
    assert (settings.judge_provider, settings.judge_api_key) == ("openai", "sk-seed004-judge")
    assert "sk-seed004-judge" not in json.dumps(settings.model_dump())
    settings, _, _ = build_settings(env={"EVAL_JUDGE_API_KEY": "k", "EVALGATE_JUDGE_PROVIDER": "local",
                                         "EVALGATE_JUDGE_BASE_URL": "http://127.0.0.1:9"}, cwd=tmp_path)
    assert settings.judge_provider == "local"


def test_eval_config_yaml_is_mapped_key_by_key(tmp_path: Path) -> None:
    config = tmp_path / "eval_config.yaml"
    config.write_text(
        "api: {url: 'http://127.0.0.1:8000/', api_key: k-1, tenant_id: t, user_id: u, timeout_seconds: 30}\n"
        "scoring:\n  weights: {specialist_match: 0.4, keyword_coverage: 0.2, data_source_match: 0.2, response_quality: 0.2}\n"
        "  thresholds: {specialist_accuracy_min: 0.9, composite_score_min: 0.7}\n"
        "llm_judge: {api_key: sk-j, api_base: 'http://127.0.0.1:9/v1', model: m, temperature: 0.3, rubric: 'Score 1-5.'}\n"
        "output: {default_path: out/results.json, include_responses: false}\n")
    settings, suite, path = build_settings(env={}, cwd=tmp_path, cli={"config": str(config)})
    assert path == config
    assert (settings.target, settings.target_url) == ("http", "http://127.0.0.1:8000/chat")
    assert settings.target_headers == {"Authorization": "Bearer k-1", "X-Tenant-ID": "t", "X-User-ID": "u"}
    assert settings.api_timeout_seconds == 30
    assert (settings.judge_provider, settings.judge_api_key, settings.judge_base_url, settings.judge_model) == (
        "openai", "sk-j", "http://127.0.0.1:9/v1", "m")
    assert settings.judge_temperatures == {"response_quality": 0.3}
    assert (settings.compat, settings.compat_output, settings.compat_include_responses) == (
        ["seed004"], "out/results.json", False)
    assert suite == {"options": {"composite_weights": {"specialist_match": 0.4, "keyword_coverage": 0.2,
                                                       "data_source_match": 0.2, "response_quality": 0.2},
                                 "response_quality_rubric": "Score 1-5."},
                     "thresholds": {"specialist_match": {"min": 0.9}, "composite": {"min": 0.7}}}


@pytest.mark.parametrize(("text", "message"), [
    ("api: {urll: x}\n", "unknown key 'api.urll' (did you mean 'url'?)"),
    ("scoring: {thresholds: {specialist_accuracy: 0.9}}\n",
     "unknown key 'scoring.thresholds.specialist_accuracy' (did you mean 'specialist_accuracy_min'?)"),
    ("api: {url: x}\nllm_judges: {model: m}\n", "unknown key 'llm_judges' (did you mean 'llm_judge'?)"),
])
def test_eval_config_unknown_keys_are_errors(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "eval_config.yaml").write_text(text)
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")):
        build_settings(env={}, cwd=tmp_path, cli={"config": "eval_config.yaml"})


def test_seed004_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = cli.build_parser().parse_args(["run", "--ids", "GD-001", "GD-011,GD-021", "--api-url", "http://h:1/",
                                          "--output", "results.json", "--compat", "seed001"])
    values, origins, notices = cli_values(args)
    assert values["case_ids"] == ["GD-001", "GD-011", "GD-021"] and values["target_url"] == "http://h:1/chat"
    assert values["target"] == "http" and values["compat"] == "seed001,seed004"
    assert origins == {"case_ids": "--ids", "target_url": "--api-url", "compat_output": "--output"}
    assert len(notices) == 3
    assert cli.main(["validate", "--ids", "a", "--case-ids", "b"]) == 2
    assert "give case ids with --case-ids or --ids, not both" in capsys.readouterr().err


# --- dataset kinds, value sets and names that match nothing ------------------------------------------------------


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(("text", "fragment"), [
    ("suite: {kind: seed002}\ncases:\n  - id: a\n    input: q\n",
     "case 'a': missing required field 'category' (seed 002 cases require id, category, input; this case is "
     "seed002 because its suite declares it)"),
    ("suite: {kind: workflow-validation}\ncases:\n  - id: a\n    input: q\n",
     "seed 003 scenarios need at least one of agents_should_include"),
    ("suite: {kind: seed000}\ncases:\n  - question: q\n",
     "missing required field 'expected_sources'"),
    ("suite: {kind: seed005}\ncases:\n  - question: q\n",
     "unknown kind 'seed005' (did you mean 'seed004'?)"),
    ("suite: {valid: {category: [waiver, math]}}\ncases:\n  - {id: a, input: q, category: maths}\n",
     "field 'category': 'maths' is not a valid value; valid: waiver, math (the suite's 'valid:')"),
    ("suite: {valid: {categori: [a]}}\ncases:\n  - {id: a, input: q}\n",
     "'categori' is not a field with a set of values (did you mean 'category'?)"),
])
def test_declared_kinds_and_value_sets(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str,
                                       fragment: str) -> None:
    assert cli.main(["validate", "-d", write(tmp_path / "s.yaml", text)]) == 2
    assert fragment in capsys.readouterr().err


def test_a_suite_switches_a_kinds_value_set_off_and_evalgate_yaml_declares_kinds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    golden = {"id": "G1", "query": "q", "expected_specialist": "generalist", "expected_keywords": ["k"],
              "expected_data_sources": ["rag"], "difficulty": "simple", "category": "procedure",
              "verified_answer_summary": "s"}
    dataset = write(tmp_path / "g.yaml", "suite: {valid: {expected_specialist: null}}\ncases:\n  - "
                    + json.dumps(golden) + "\n")
    assert cli.main(["validate", "-d", dataset]) == 0
    bare = write(tmp_path / "g.json", json.dumps([golden]))
    assert cli.main(["validate", "-d", bare]) == 2  # inferred seed 004: its documented specialists
    config = write(tmp_path / "evalgate.yaml", "valid: {expected_specialist: [generalist]}\n")
    assert cli.main(["validate", "-d", bare, "-c", config]) == 0
    plain = write(tmp_path / "p.json", json.dumps([{"id": "p", "input": "q"}]))
    config = write(tmp_path / "evalgate.yaml", "kind: seed002\n")
    assert cli.main(["validate", "-d", plain, "-c", config]) == 2
    assert "missing required field 'category'" in capsys.readouterr().err


def test_names_that_match_nothing_are_errors_in_full_runs_and_notices_in_subsets(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dataset = write(tmp_path / "d.yaml", "cases:\n  - {id: a, input: q, output: x, category: math,"
                    " expected_keywords: [x]}\n  - {id: b, input: q2, output: y, category: waiver}\n")
    assert cli.main(["validate", "-d", dataset, "--metric-thresholds", '{"mention_f1": 0.9}']) == 2
    assert ("metric_thresholds (EVALGATE_METRIC_THRESHOLDS): threshold for 'mention_f1' matches no case"
            in capsys.readouterr().err)
    config = write(tmp_path / "evalgate.yaml", "category_metrics: {wavier: [correctness]}\n")
    assert cli.main(["run", "-d", dataset, "-c", config, "-o", str(tmp_path / "o")]) == 2
    assert "evalgate.yaml category_metrics: category 'wavier' matches no case's category" in capsys.readouterr().err
    assert cli.main(["validate", "-d", dataset, "--case-ids", "b", "--metric-thresholds",
                     '{"keyword_coverage": 0.9}']) == 0
    assert "threshold for 'keyword_coverage' matches no case: no selected case computes" in capsys.readouterr().err


# --- output shapes ----------------------------------------------------------------------------------------------


def record(case_id: str, metrics: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"id": case_id, "index": extra.pop("index", 0), "repeat": 0, "status": "passed", "passed": True,
            "metrics": {name: {"value": value, "status": "passed" if value is not None else "skipped",
                               "details": details} for name, (value, details) in metrics.items()}, **extra}


def test_seed_shapes_are_pure_functions_of_the_results_document() -> None:
    document = {
        "run_id": "r1", "timestamp": "2025-11-02T10:00:00Z", "thresholds_passed": False,
        "summary": {"pass_rate": 0.5, "total_test_cases": 2, "total_passed": 1, "total_failed": 0, "total_errored": 1,
                    "average_scores": {"hit_rate": 0.5}},
        "metadata": {"judge": {"provider": "none", "model": None}},
        "thresholds": {"specialist_match": {"min": 0.85}, "composite": {"min": 0.75}},
        "results": [
            record("q1", {"hit_rate": (1.0, {}), "mrr": (0.5, {}), "judge_score": (None, {})}, input="Q1",
                   source="gt.json:2", num_tokens=100, index=0),
            record("q2", {"hit_rate": (0.0, {}), "mrr": (0.0, {})}, input="Q2", source="gt.json:6", index=1),
        ],
    }
    seed000 = seed000_document(document)
    assert seed000["summary"] == {"avg_hit_rate": 0.5, "avg_mrr": 0.25, "avg_judge_score": None,
                                  "avg_combined_score": None, "best_combined_score": None, "avg_num_tokens": 100.0,
                                  "total_tokens": 100}
    assert seed000["metadata"] == {"ground_truth_file": "gt.json", "search_mode": None, "judge_model": None}
    assert seed000["results"][0] == {"question": "Q1", "hit_rate": 1.0, "mrr": 0.5, "judge_score": None,
                                     "num_tokens": 100, "combined_score": None}
    assert seed001_document(document) == {"run_id": "r1", "pass_rate": 0.5, "total_test_cases": 2, "total_passed": 1,
                                          "total_failed": 1, "average_scores": {"hit_rate": 0.5},
                                          "thresholds_passed": False}
    golden = {**document, "results": [
        record("G1", {"specialist_match": (1.0, {}), "keyword_coverage": (0.5, {"found": ["a"], "missing": ["b"]}),
                      "data_source_match": (1.0, {"used": ["rag"]}), "response_quality": (3.0, {})},
               input="q", category="procedure", difficulty="simple", output="x" * 2500, latency_ms=12.0),
        {**record("G2", {"specialist_match": (None, {})}, input="q2", category="data", difficulty="medium"),
         "status": "errored", "error": "HTTP 500"},
    ]}
    seed004 = seed004_document(golden)
    assert seed004["metadata"] == {"timestamp": "2025-11-02T10:00:00Z", "total_queries": 2, "errors": 1}
    aggregate = seed004["aggregate"]
    assert (aggregate["specialist_accuracy"], aggregate["avg_keyword_coverage"], aggregate["avg_response_quality"]) \
        == (1.0, 0.5, 3.0)
    assert aggregate["composite_score"] == pytest.approx(0.3 + 0.125 + 0.2 + 0.25 * 0.6)  # 0.775
    assert aggregate["pass_verdict"] is True
    assert aggregate["by_category"] == {"procedure": {"count": 1, "specialist_accuracy": 1.0,
                                                      "avg_keyword_coverage": 0.5, "avg_response_quality": 3.0,
                                                      "avg_latency_ms": 12.0}}
    first, second = seed004["per_query"]
    assert len(first["response_text"]) == 2000 and first["keywords_missing"] == ["b"] and first["latency_ms"] == 12
    assert second["error"] == "HTTP 500" and second["specialist_match"] is None
    assert "response_text" not in seed004_document(golden, include_responses=False)["per_query"][0]


def test_seed001_summary_marks_failed_thresholds() -> None:
    document = {"summary": {"total_test_cases": 10, "total_passed": 8}, "thresholds_passed": False,
                "metrics": {"mention_precision": {"average": 0.667, "threshold": {"min": 0.9}, "passed": False},
                            "false_is_mine_rate": {"average": 0.0, "threshold": {"max": 0.0}, "passed": True}}}
    text = render_seed001_summary(document, "eval_results.db")
    assert "  ✅ Passed: 8/10 tests (80.0%)\n  ❌ Failed: 2/10 tests" in text
    assert "  mention_precision:  0.67 (❌ >= 0.90)" in text and "  false_is_mine_rate: 0.00 (✅ <= 0.00)" in text
    assert "❌ Thresholds failed: mention_precision" in text


# --- metrics and the judge ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("chunks", "value", "rank"), [
    (["unrelated words here", "Maxey averaged points"], 0.5, 2),  # 3/4 of the reference words at rank 2
    (["maxey"], 0.0, None),  # 1/4 < 0.3
    ([], 0.0, None),
    (["", "Maxey averaged 28 points"], 0.5, 2),  # an empty chunk still takes rank 1
])
def test_context_mrr_is_the_seed_002_keyword_overlap_rank(chunks: list[str], value: float, rank: int | None) -> None:
    got, details = context_reciprocal_rank(chunks, "Maxey averaged 28 points", 0.3)  # 4 words
    assert (got, details["first_relevant_rank"]) == (value, rank)


def test_always_expected_agents_is_configurable() -> None:
    called = ["orchestrator", "research", "planner"]
    assert check_side(called, ["research"], None, ["orchestrator"])["unexpected"] == ["planner"]
    assert check_side(called, ["research"], None, ["orchestrator", "planner"])["pass"] is True
    assert check_side(called, ["research"], None, [])["unexpected"] == ["orchestrator", "planner"]


def test_always_expected_agents_from_a_suite_block(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dataset = write(tmp_path / "w.yaml", "suite: {options: {always_expected_agents: [orchestrator, router]}}\n"
                    "cases:\n  - {id: w, input: q, agents_should_include: [research],"
                    " agents_called: [router, orchestrator, research], output: x}\n")
    assert cli.main(["run", "-d", dataset, "-o", str(tmp_path / "o"), "--progress", "none"]) == 0
    capsys.readouterr()


def test_judge_temperatures(tmp_path: Path) -> None:
    settings, _, _ = build_settings(env={}, cwd=tmp_path)
    assert metric_temperatures(settings) == {"judge_score": 0.1}  # seed 000's judge
    settings, _, _ = build_settings(env={"EVALGATE_JUDGE_TEMPERATURES": '{"judge_score": 0, "safety": 0.3}'},
                                    cwd=tmp_path)
    assert template_temperatures(settings) == {"judge_score": 0.0, "safety": 0.3}
    settings, _, _ = build_settings(env={"EVALGATE_JUDGE_TEMPERATURES": '{"mention_f1": 0.3}'}, cwd=tmp_path)
    with pytest.raises(UserError, match="unknown metric 'mention_f1'"):
        metric_temperatures(settings)
    settings, _, _ = build_settings(env={"EVALGATE_JUDGE_TEMPERATURES": '{"answer_quality": 0.3}'}, cwd=tmp_path)
    with pytest.raises(UserError, match="scored by one judge call"):
        template_temperatures(settings)
    with pytest.raises(UserError, match="between 0 and 2"):
        build_settings(env={"EVALGATE_JUDGE_TEMPERATURES": '{"safety": 3}'}, cwd=tmp_path)


# --- SQLite and Langfuse ------------------------------------------------------------------------------------------


def test_sqlite_descriptions_are_the_fixtures_and_stay_distinct() -> None:
    def result(case_id: str, description: str | None, repeat: int = 0) -> CaseResult:
        return CaseResult(id=case_id, description=description, status=CaseStatus.passed, passed=True, repeat=repeat)

    names = Descriptions()
    assert names(result("t1", "HubSpot detection")) == "HubSpot detection"
    assert names(result("t1", "HubSpot detection", repeat=1)) == "HubSpot detection #r1"
    assert names(result("t2", "HubSpot detection")) == "HubSpot detection [t2]"
    assert names(result("t3", None)) == "t3"


def test_langfuse_events_and_batches() -> None:
    document = {"run_id": "r1", "timestamp": "2025-01-01T00:00:00Z", "summary": {"pass_rate": 1.0},
                "gate": {"passed": True, "reasons": []}, "metrics": {"answer_quality": {"average": 0.9}},
                "results": [record("c1", {"answer_quality": (0.9, {}), "workflow": (1.0, {}), "safety": (None, {})},
                                   input="q", output="a", passed=True)]}
    events = build_events(document)
    assert events == build_events(document)  # ids derived from the run: a re-export updates
    scores = [(e["body"]["name"], e["body"]["value"]) for e in events if e["type"] == "score-create"]
    assert scores == [("quality_answer_quality", 0.9), ("workflow", 1.0), ("case_passed", 1.0), ("pass_rate", 1.0),
                      ("gate_passed", 1.0), ("quality_answer_quality", 0.9)]
    assert score_name("mention_f1") == "mention_f1"
    groups = list(batches(events, limit=1200))
    assert len(groups) > 1 and [e for g in groups for e in g] == events
    with LangfuseServer("pk", "sk") as server:
        assert send(events, host=server.base_url, public_key="pk", secret_key="sk") == {"events": len(events)}
        assert len(server.requests()) == 1 and len(server.accepted) == len(events)
    with LangfuseServer("pk", "sk", fail_events=True) as server, \
            pytest.raises(LangfuseError, match=f"{len(events)} of {len(events)} events rejected"):
        send(events, host=server.base_url, public_key="pk", secret_key="sk")
    with pytest.raises(LangfuseError, match="cannot reach"):
        send(events, host="http://127.0.0.1:9", public_key="pk", secret_key="sk")


def test_seed004_output_may_not_overwrite_evalgates_own_results(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    dataset = write(tmp_path / "d.yaml", "cases:\n  - {id: a, input: q, output: x}\n")
    code = cli.main(["run", "-d", dataset, "-o", str(tmp_path), "--output", str(tmp_path / "results.json")])
    assert code == 2 and "is where evalgate writes its own results" in capsys.readouterr().err
