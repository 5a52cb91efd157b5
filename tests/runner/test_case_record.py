"""The one typed case record (``model.CaseResult``, built by ``runner.record.case_record``): records made by
the real engine through the CLI, for single-turn and conversation cases, read back with
``CaseResult.from_stored`` and serialised again, equal the stored documents byte for byte (results.json's
lines and the SQLite ``eg_cases.record`` column), keys in the declared order."""

from __future__ import annotations

import json
import sqlite3
import textwrap
from pathlib import Path

import pytest
from pydantic import ValidationError

from evalgate.cli.main import main as cli_main
from evalgate.model import Answer, Case, CaseResult, CaseStatus, MetricResult, MetricStatus, Threshold
from evalgate.runner.record import ERROR_CHARS, case_record, conversation_summary, errored_turn, turn_record

DATASET = textwrap.dedent("""\
    - id: greets
      input: Say hello
      output: Hello there
      category: smalltalk
      risk_level: high
      tags: [a, b]
      expected_keywords: [hello]
    - id: misses
      input: Name the capital of France
      output: I do not know
      expected_keywords: [Paris]
    - id: replan
      turns:
        - user: Who should I start tonight, Caruso or Reid?
          output: Start Caruso.
        - user: Caruso is now OUT, replan
          output: Then start Reid.
          expected_keywords: [Reid]
      expected_keywords: [Reid]
    - id: forgets
      turns:
        - user: My name is Ana.
          output: Noted.
        - user: What is my name?
          output: I do not know.
          expected_keywords: [Ana]
        - user: Thanks
          output: Bye
    """)


def stored_lines(results: Path) -> list[str]:
    """results.json's case records as written: one line each, inside ``results``."""
    text = results.read_text(encoding="utf-8")
    body = text[text.index('"results": [') :]
    return [line.strip().removesuffix(",") for line in body.splitlines()[1:] if line.startswith("    {")]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("records")
    (root / "cases.yaml").write_text(DATASET)
    (root / "evalgate.yaml").write_text(json.dumps({"metrics": ["keyword_coverage"]}))
    code = cli_main(["run", "--config", str(root / "evalgate.yaml"), "--dataset", str(root / "cases.yaml"),
                     "--output-dir", str(root / "out"), "--progress", "none"])
    assert code == 1  # two cases fail
    return root / "out"


def test_records_read_back_through_the_type_equal_the_stored_documents_byte_for_byte(run_dir: Path) -> None:
    lines = stored_lines(run_dir / "results.json")
    document = json.loads((run_dir / "results.json").read_text())
    assert [json.loads(line) for line in lines] == document["results"]
    assert [r["id"] for r in document["results"]] == ["greets", "misses", "replan", "forgets"]
    with sqlite3.connect(run_dir / "results.db") as db:
        rows = [row[0] for row in db.execute("SELECT record FROM eg_cases ORDER BY rowid")]
    assert sorted(rows) == sorted(lines)
    for line, parsed in zip(lines, document["results"], strict=True):
        record = CaseResult.from_stored(line)
        assert record.model_dump_json() == line
        assert CaseResult.from_stored(parsed).model_dump_json() == line  # from parsed JSON too
        assert list(parsed) == list(CaseResult.model_fields)  # every field, in the declared order


def test_conversation_records_keep_their_shape(run_dir: Path) -> None:
    results = {r["id"]: r for r in json.loads((run_dir / "results.json").read_text())["results"]}
    replan, forgets = results["replan"], results["forgets"]
    assert replan["status"] == "passed" and replan["input"] == "Who should I start tonight, Caruso or Reid?"
    assert list(replan["conversation"]) == ["turns", "planned_turns", "failed_turn", "stopped", "conversation_id"]
    assert [list(turn) for turn in replan["conversation"]["turns"]] == [
        ["turn", "input", "output", "status", "reasons", "metrics"]] * 2
    assert replan["output"] == "Start Caruso.\n\nThen start Reid."
    assert forgets["status"] == "failed"
    assert {k: forgets["conversation"][k] for k in ("planned_turns", "failed_turn", "stopped")} == {
        "planned_turns": 3, "failed_turn": 2, "stopped": True}
    assert len(forgets["conversation"]["turns"]) == 2  # the third turn was never sent


def test_case_record_serialises_to_the_documented_dict() -> None:
    case = Case.model_validate({"id": "c1", "input": "q", "expected_keywords": ["k"], "tags": ["t"],
                                "risk_level": "critical"})
    case.source_file, case.source_line = "cases.yaml", 3
    metric = MetricResult(value=0.0, threshold=Threshold(op="min", value=1.0), passed=False,
                          status=MetricStatus.failed, reason="missing k")
    answer = Answer(output="a", sources=["s"], latency_ms=1.5, error=None)
    record = case_record(case, answer, {"keyword_coverage": metric}, 1, status=CaseStatus.failed,
                         reasons=["x" * (ERROR_CHARS + 5)], expectation="abc")
    dumped = json.loads(record.model_dump_json())
    assert dumped == {
        "id": "c1", "index": 0, "suite": None, "category": None, "risk_level": "critical", "difficulty": None,
        "evolution_type": None, "tags": ["t"], "description": None, "source": "cases.yaml:3", "status": "failed",
        "passed": False, "error": None, "reasons": ["x" * ERROR_CHARS + f"… ({ERROR_CHARS + 5:,} characters)"],
        "input": "q", "expected": {"expected_keywords": ["k"]}, "output": "a", "answer": {"sources": ["s"]},
        "metrics": {"keyword_coverage": {"value": 0.0, "threshold": {"min": 1.0}, "passed": False,
                                         "status": "failed", "reason": "missing k", "details": {}}},
        "num_tokens": None, "latency_ms": 1.5, "cost_usd": None, "repeat": 1, "expectation": "abc",
        "conversation": None}
    assert record == CaseResult(**{**dumped, "metrics": {"keyword_coverage": metric}})  # the fast path == validation


def test_conversation_parts() -> None:
    answer = Answer(output="hi", tools_used=["t"], latency_ms=2.0)
    scored = turn_record(1, "hello", answer, CaseStatus.passed, [], {}, replayed=True)
    assert scored == {"turn": 1, "input": "hello", "replayed": True, "output": "hi", "status": "passed",
                      "reasons": [], "metrics": {}, "tools_used": ["t"], "latency_ms": 2.0}
    assert errored_turn(2, "", "no simulator") == {"turn": 2, "input": "", "status": "errored",
                                                   "error": "no simulator"}
    summary = conversation_summary([scored], planned=3, simulated=True, stopped=False, failed_turn=None,
                                   conversation_id=None, goal_met=True, user="abcd")
    assert summary == {"turns": [scored], "planned_turns": None, "failed_turn": None, "stopped": False,
                       "conversation_id": None, "simulated": True, "goal_met": True, "user": "abcd"}
    case = Case.model_validate({"id": "conv", "turns": [{"user": "hello"}]})
    record = case_record(case, Answer(output="hi"), {}, 0, status=CaseStatus.passed, reasons=[], expectation=None,
                         conversation=summary)
    assert record.input == "hello" and record.conversation == summary


def test_from_stored_rejects_a_record_of_another_shape() -> None:
    with pytest.raises(ValidationError):
        CaseResult.from_stored({"id": "c1", "status": "passed", "passed": True, "surprise": 1})
    with pytest.raises(ValidationError):
        CaseResult.from_stored(b'{"id": "c1"}')


