"""The dialects' output-side hooks (``evalgate.dialect.Dialect``: ``document``, ``console_summary``,
``request_body`` / ``request_stdin`` / ``request_context`` / ``request_names``, ``export_names``,
``judge_temperatures``, ``reference_fields`` / ``prompt_fields``, ``metric_docs``) reproduce what each seed
wrote, and a generic run calls none of them.

``fixtures/results.json`` is a results document touching every seed document's fields (a repeat, an errored
query, a response over seed 004's 2,000-character cut, non-ASCII text); the ``fixtures/`` documents next to
it were written from it by the code before the move (``report/compat.py`` at 85e6f1e), so each hook is held
to the bytes the seed audit produced. The hand-computed values below check the same documents against the
seeds' own formulas.
"""

from __future__ import annotations

import dataclasses
import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalgate import dialect
from evalgate.calls.costs import CostLedger, price_table
from evalgate.calls.executor import Executor, RetryPolicy
from evalgate.calls.runtime import Runtime
from evalgate.cli import main as cli
from evalgate.dialect import DIALECTS, Dialect, OutputDocument, Trigger
from evalgate.export.langfuse import score_name
from evalgate.judges.controls import reference_of
from evalgate.judges.factory import metric_temperatures
from evalgate.judges.prompts import PromptInputs
from evalgate.metrics.registry import get_metric, load_builtin_metrics
from evalgate.model import Answer, Case
from evalgate.report.documents import build_document, write_document
from evalgate.runner.conversation import turn_case
from evalgate.targets.command import CommandTarget
from evalgate.targets.http import HttpTarget, case_context

FIXTURES = Path(__file__).resolve().parent / "fixtures"
RESULTS = FIXTURES / "results.json"
GOLDEN = {"seed000": "evaluation.json", "seed001": "seed001-summary.json", "seed004": "seed004-results.json"}


def golden(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


# --- each seed's output document --------------------------------------------------------------------------


@pytest.mark.parametrize("seed", sorted(GOLDEN))
def test_each_seed_document_is_the_bytes_the_seed_audit_wrote(seed: str) -> None:
    assert DIALECTS[seed].document is not None and DIALECTS[seed].document.file == GOLDEN[seed]
    out = io.StringIO()
    write_document(seed, RESULTS, out)  # streamed from the file, as the run writes it
    assert out.getvalue() == golden(GOLDEN[seed])
    in_memory = build_document(seed, json.loads(RESULTS.read_text(encoding="utf-8")))
    assert json.dumps(in_memory, indent=2, ensure_ascii=False) + "\n" == golden(GOLDEN[seed])


def test_seed004_without_responses_is_the_bytes_the_seed_audit_wrote() -> None:
    out = io.StringIO()
    write_document("seed004", RESULTS, out, include_responses=False)
    assert out.getvalue() == golden("seed004-results.no-responses.json")


def test_documents_follow_the_seeds_formulas() -> None:
    document = json.loads(RESULTS.read_text(encoding="utf-8"))
    seed000 = build_document("seed000", document)
    # first repeat of q1 (hit 1, mrr 0.5, judge 0.9, combined 0.8, 120 tokens) and q2 (0, 0, 0.4, 0.0, 80 tokens)
    assert seed000["num_questions"] == 2
    assert seed000["summary"] == {"avg_hit_rate": 0.5, "avg_mrr": 0.25, "avg_judge_score": 0.65,
                                  "avg_combined_score": 0.4, "best_combined_score": 0.8, "avg_num_tokens": 100.0,
                                  "total_tokens": 200}
    assert seed000["metadata"] == {"ground_truth_file": "ground_truth.json", "search_mode": None,
                                   "judge_model": "gpt-4o-mini"}
    assert build_document("seed001", document) == {
        "run_id": "run-7", "pass_rate": 0.4, "total_test_cases": 5, "total_passed": 2, "total_failed": 3,
        "average_scores": {"hit_rate": 0.333333, "specialist_match": 0.5}, "thresholds_passed": False}
    aggregate = build_document("seed004", document)["aggregate"]
    # G1 and G2 (G3 errored): specialist (1+0)/2, keywords (0.6666667+0)/2, sources 0.5 (G1 only), quality (4+2)/2
    composite = 0.30 * 0.5 + 0.25 * 0.333333 + 0.20 * 0.5 + 0.25 * 3.0 / 5
    assert aggregate["composite_score"] == pytest.approx(composite, abs=1e-6)
    assert aggregate["pass_verdict"] is False  # specialist 0.5 < 0.85
    per_query = build_document("seed004", document)["per_query"]
    assert [len(q.get("response_text", "")) for q in per_query] == [2000, 4, 0]


def test_seed001_console_summary_is_the_text_the_seed_audit_printed() -> None:
    hook = DIALECTS["seed001"].console_summary
    assert hook is not None
    document = json.loads(RESULTS.read_text(encoding="utf-8"))
    assert hook(document, "results/results.db") == golden("seed001-console.txt")
    assert dialect.console_summaries(["seed000", "seed001", "seed004"], document, "results/results.db") == [
        golden("seed001-console.txt")]


def test_an_unknown_or_documentless_dialect_has_no_document() -> None:
    assert set(dialect.output_documents(["seed000", "seed002", "seed003", "nope", "seed004"])) == {"seed000",
                                                                                                 "seed004"}
    with pytest.raises(ValueError, match="no output shape for 'seed002'; choose one of seed000, seed001, seed004"):
        build_document("seed002", {})
    assert [d.takes_output for d in dialect.output_documents(GOLDEN).values()] == [False, False, True]


# --- request payloads ---------------------------------------------------------------------------------------


def runtime() -> Runtime:
    return Runtime(Executor(RetryPolicy(retries=0, attempt_seconds=5, base_delay=0.01), concurrency=1),
                   CostLedger(), price_table({}))


def test_seed001_extractor_case_is_sent_its_text_and_brand_lists() -> None:
    target = HttpTarget(url="http://127.0.0.1:9/x", runtime=runtime(), env={}, eval_context={"region": "eu"})
    extractor = Case(id="e1", output="Nike beats Adidas", brands_mine=["Nike"], brands_competitors=["Adidas"])
    assert target.payload(extractor) == {"message": "Nike beats Adidas", "llm_answer_text": "Nike beats Adidas",
                                         "brands_mine": ["Nike"], "brands_competitors": ["Adidas"], "region": "eu"}
    # a case with an input is asked its input, brand lists or not
    asked = Case(id="e2", input="Rank the brands", output="x", brands_mine=["Nike"])
    assert target.payload(asked) == {"message": "Rank the brands", "region": "eu"}
    command = CommandTarget([sys.executable, "-c", "pass"], timeout=5)
    assert json.loads(command.stdin_for(extractor))["llm_answer_text"] == "Nike beats Adidas"
    assert "llm_answer_text" not in json.loads(command.stdin_for(Case(id="g", input="q", output="x")))


def test_seed002_context_fields_are_sent_in_its_camel_case_and_turns_inherit_them() -> None:
    case = Case(id="c", input="x", active_team_id=7, team_name="Hawks", language="de")
    assert case_context(case, {"active_league_id": "2", "region": "eu"}) == {
        "activeLeagueId": "2", "region": "eu", "activeTeamId": 7, "teamName": "Hawks", "language": "de"}
    conversation = Case.model_validate({"id": "talk", "active_team_id": 7, "team_name": "Hawks",
                                        "turns": [{"input": "hi"}]})
    assert conversation.turns is not None
    turn = turn_case(conversation, conversation.turns[0], 1)
    assert (turn.dialect_value("active_team_id"), turn.dialect_value("team_name")) == (7, "Hawks")


def test_a_record_shows_the_seeds_expectations_in_their_old_places() -> None:
    from evalgate.runner.record import expectations_of

    case = Case(id="x", input="q", expected_output="o", expected_keywords=["k"], expected_specialist="ops",
                expected_data_sources=["db"], verified_answer_summary="s", tools_should_exclude=["rm"],
                brands_mine=["A"], brands_competitors=["B"], expected_my_mentions=["A"])
    assert list(expectations_of(case)) == [
        "expected_output", "expected_keywords", "expected_specialist", "expected_data_sources",
        "verified_answer_summary", "tools_should_exclude", "brands_mine", "brands_competitors",
        "expected_my_mentions"]


# --- scores, judges and descriptions ------------------------------------------------------------------------


def test_seed003_scores_keep_its_langfuse_names_and_others_their_own() -> None:
    assert [score_name(m) for m in ("answer_quality", "factual_correctness", "completeness", "mention_f1")] == [
        "quality_answer_quality", "quality_factual_correctness", "quality_completeness", "mention_f1"]


def test_seed_judge_settings_come_from_their_dialects() -> None:
    from evalgate.config.settings import Settings

    assert metric_temperatures(Settings())["judge_score"] == 0.1  # seed 000 "for consistency"
    load_builtin_metrics()
    golden_case = Case(id="g", input="q", expected_output="ref", verified_answer_summary="  summary  ")
    assert reference_of(get_metric("response_quality"), golden_case) == "summary"
    assert reference_of(get_metric("correctness"), golden_case) == "ref"
    assert PromptInputs.of(golden_case, Answer(output="a")).summary == "  summary  "
    assert PromptInputs.of(Case(id="p", input="q"), Answer(output="a")).summary == ""


def test_judged_metric_descriptions_name_their_seed() -> None:
    load_builtin_metrics()
    assert get_metric("math").description.startswith("Seed 002 GEval: numeric equivalence of the answer's")
    assert get_metric("relevancy").description == (
        "Seed 002: relevance of the answer to the question, in [0, 1]; threshold 0.70.")
    assert get_metric("answer_quality").description.startswith("Seed 003: is the response clear")
    assert get_metric("judge_score").description.endswith("threshold > 0.75 (seed 000's minimum, strict).")
    assert dialect.describe("trajectory", "Generic text.") == "Generic text."


# --- a generic run calls no seed hook -----------------------------------------------------------------------


@pytest.fixture
def spied(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every callable hook of every registered dialect replaced by a spy that records the call and gives the
    generic answer (no claim, no body, no extra fields, no summary, an empty document)."""
    calls: list[str] = []
    loaded: dict[str, Dialect] = DIALECTS._all()  # type: ignore[attr-defined]

    def spy(name: str, result: Any) -> Any:
        def hook(*args: Any) -> Any:
            calls.append(name)
            return result() if callable(result) else result
        return hook

    for name, seed in list(loaded.items()):
        changes: dict[str, Any] = {}
        if seed.detect is not None:
            changes["detect"] = spy(f"{name}.detect", None)
        if seed.document is not None:
            changes["document"] = dataclasses.replace(
                seed.document, fields=spy(f"{name}.document", lambda: ({}, iter(()))))
        if seed.console_summary is not None:
            changes["console_summary"] = spy(f"{name}.console_summary", "")
        if seed.request_body is not None:
            changes["request_body"] = spy(f"{name}.request_body", None)
        if seed.request_stdin is not None:
            changes["request_stdin"] = spy(f"{name}.request_stdin", dict)
        changes["triggers"] = tuple(Trigger(t.metric, spy(f"{name}.trigger", False), t.why) for t in seed.triggers)
        monkeypatch.setitem(loaded, name, dataclasses.replace(seed, **changes))
    yield calls


AGENT = """import json, sys
case = json.load(sys.stdin)
with open(sys.argv[1], "a", encoding="utf-8") as seen:
    seen.write(json.dumps(sorted(case)) + "\\n")
print(json.dumps({"output": "Paris is the capital of France."}))
"""


def generic_run(tmp_path: Path, *extra: str) -> tuple[int, Path]:
    dataset = tmp_path / "cases.jsonl"
    dataset.write_text("\n".join(json.dumps(case) for case in (
        {"id": "a", "input": "Capital of France?", "expected_keywords": ["Paris"], "language": "en"},
        {"id": "b", "input": "Capital of France, again?", "expected_output": "Paris is the capital of France.",
         "output": "ignored: the command answers"},
    )) + "\n", encoding="utf-8")
    (tmp_path / "agent.py").write_text(AGENT, encoding="utf-8")
    out = tmp_path / "out"
    code = cli.main(["run", "--dataset", str(dataset), "--target", "command", "--target-command",
                     json.dumps([sys.executable, str(tmp_path / "agent.py"), str(tmp_path / "seen.jsonl")]),
                     "-o", str(out), *extra])
    return code, out


def test_a_generic_run_calls_no_seed_hook(tmp_path: Path, spied: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out = generic_run(tmp_path)
    assert code == 0, capsys.readouterr().err
    assert spied == []
    assert sorted(p.name for p in out.glob("*.json")) == ["results.json"]  # no seed document
    seen = [json.loads(line) for line in (tmp_path / "seen.jsonl").read_text(encoding="utf-8").splitlines()]
    assert all("llm_answer_text" not in keys for keys in seen) and len(seen) == 2


def test_the_spies_see_a_run_that_asks_for_a_seed(tmp_path: Path, spied: list[str],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The control: the same run with ``--compat seed001`` reaches seed 001's document and summary hooks
    (so the generic run's empty list is not the spies failing to be installed)."""
    code, _ = generic_run(tmp_path, "--compat", "seed001")
    assert code == 0, capsys.readouterr().err
    assert {"seed001.document", "seed001.console_summary"} <= set(spied)


def test_an_outside_dialect_document_is_written_by_the_same_hook(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A plug-in dialect's document goes through the same dispatcher as the seeds' (no seed privilege)."""

    def fields(head: Any, passes: Any, include_responses: bool) -> tuple[dict[str, Any], Iterator[Any]]:
        ids = [{"id": record["id"]} for record in passes()]  # ``head`` is complete after the first pass
        return {"run": head.get("run_id")}, iter(ids)

    loaded: dict[str, Dialect] = DIALECTS._all()  # type: ignore[attr-defined]
    monkeypatch.setitem(loaded, "acme", Dialect("acme", "Acme", document=OutputDocument("acme.json", fields, "ids")))
    out = io.StringIO()
    write_document("acme", RESULTS, out)
    written = json.loads(out.getvalue())
    assert written["run"] == "run-7" and [i["id"] for i in written["ids"]] == ["q1", "q1", "q2", "G1", "G2", "G3"]
