"""Prices, token accounting, the pre-run estimate and the max_cost budget."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalgate.calls.costs import (
    BudgetExceeded,
    CostLedger,
    Price,
    Usage,
    add_spend,
    count_message_tokens,
    find_price,
    price_table,
    usage_from,
)
from evalgate.cli.main import main as cli_main
from evalgate.errors import UserError
from evalgate.judges.estimate import estimate_run
from evalgate.judges.prompts import TEMPLATES, render
from evalgate.model import Answer, Case
from tests.servers.agent_server import AgentServer
from tests.servers.openai_server import Judge, OpenAIServer

KEY = "sk-cost-test-24681357"


def test_price_lookup() -> None:
    table = price_table({"my-model": {"input": 1, "output": 2}, "gpt-4o-mini": {"prompt": 0.2, "completion": 0.8}})
    assert find_price("gpt-4o-mini", table) == Price(0.2, 0.8)
    assert find_price("gpt-4o-mini-2024-07-18", table) == Price(0.2, 0.8)  # longest prefix, not gpt-4o
    assert find_price("gpt-4o-2024-08-06", table) == Price(2.5, 10.0)
    assert find_price("models/gemini-2.0-flash", table) == Price(0.10, 0.40)
    assert find_price("my-model", table) == Price(1.0, 2.0)
    assert find_price("mystery", table) is None
    assert find_price("mystery", table, self_hosted=True) == Price(0.0, 0.0)
    assert Price(0.15, 0.60).cost(1_000_000, 500_000) == pytest.approx(0.45)


@pytest.mark.parametrize("entry", [{"input": -1}, {"inputs": 1}, {}, 3, {"input": "cheap"}, {"output": True}])
def test_bad_price_entries_are_user_errors(entry: object) -> None:
    with pytest.raises(UserError, match="prices"):
        price_table({"m": entry})  # type: ignore[dict-item]


def test_usage_from_provider_fields_else_counted_locally() -> None:
    assert usage_from(11, 4, [], "x") == Usage(11, 4, "provider")
    messages = [{"role": "user", "content": "hello world"}]
    counted = usage_from(None, None, messages, "a reply")
    assert counted.source == "tiktoken"
    assert counted.prompt_tokens == count_message_tokens(messages) > 4
    assert counted.completion_tokens >= 2


def test_ledger_refuses_a_call_that_could_pass_the_budget() -> None:
    ledger = CostLedger(max_cost=1.0)
    held = ledger.reserve(0.6)
    with pytest.raises(BudgetExceeded, match=r"max_cost \$1 reached"):
        ledger.reserve(0.5)  # 0.6 held + 0.5 > 1.0
    assert ledger.exceeded
    ledger.release(held)
    assert ledger.record("judge", Usage(1000, 1000, "provider"), Price(200, 200)) == pytest.approx(0.4)
    ledger.reserve(0.6)
    assert ledger.spent == pytest.approx(0.4)
    assert ledger.record("judge", Usage(1, 1, "provider"), None) is None
    assert ledger.metadata()["roles"]["judge"]["unpriced_calls"] == 1


def test_spend_is_folded_into_the_summary() -> None:
    ledger = CostLedger()
    ledger.record("judge", Usage(100, 20, "provider"), Price(1, 1))
    ledger.record_cached("judge")
    summary = {"cost_usd": 0.5, "tokens": {"total": 10}}
    add_spend(summary, ledger)
    assert summary["cost_usd"] == pytest.approx(0.50012)
    assert summary["tokens"] == {"total": 10, "judge_prompt": 100, "judge_completion": 20}
    assert summary["judge_calls"] == {"made": 1, "cached": 1, "cost_usd": 0.00012}


def test_estimate_counts_shared_templates_samples_and_repeats() -> None:
    cases = [Case(id=f"c{i}", input="q", expected_answer_criteria="x", output="a") for i in range(3)]
    estimate = estimate_run(cases, lambda c: ["answer_quality", "completeness", "factual_correctness", "mrr"],
                            repeat=2, samples=2, judge_price=Price(1.0, 1.0), judging=True)
    assert estimate.judge_calls == 3 * 1 * 2 * 2  # seed 003's three metrics are one call
    assert estimate.cost_usd == pytest.approx((estimate.prompt_tokens + estimate.completion_tokens) / 1e6)
    unpriced = estimate_run(cases, lambda c: ["relevancy"], repeat=1, samples=1, judge_price=None, judging=True)
    assert unpriced.cost_usd is None and "unknown" in unpriced.line(None)
    assert "exceeds it" in estimate.line(0.0000001)
    assert estimate.tokens_counted and "characters/4" not in estimate.line(None)


def test_unpriced_estimate_counts_characters_without_loading_the_tokenizer() -> None:
    cases = [Case(id=f"c{i}", input="q" * 40, passing_criteria="on topic", output="a" * 400) for i in range(4)]
    unpriced = estimate_run(cases, lambda c: ["relevancy"], repeat=1, samples=1, judge_price=None, judging=True)
    priced = estimate_run(cases, lambda c: ["relevancy"], repeat=1, samples=1, judge_price=Price(1, 1), judging=True)
    assert not unpriced.tokens_counted and "estimated as characters/4" in unpriced.line(None)
    assert unpriced.as_dict()["tokens_counted"] is False
    messages = render(TEMPLATES["relevancy"], cases[0], Answer(output=cases[0].output)).messages
    chars = sum(len(m["content"]) for m in messages)
    assert unpriced.prompt_tokens == 4 * sum(-(-len(m["content"]) // 4) + 4 for m in messages)
    # the character estimate and the tokenizer's count agree to within a factor of two on English-like text
    assert 0.5 < unpriced.prompt_tokens / priced.prompt_tokens < 2.0 and chars > 400


def test_max_cost_stops_the_run_before_the_budget_is_exceeded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("EVALGATE_PRICES", json.dumps({"gpt-4o-mini": {"input": 1000, "output": 1000}}))
    cases = [{"id": f"c{i}", "input": f"question {i}", "passing_criteria": "answers"} for i in range(20)]
    dataset = tmp_path / "cases.json"
    dataset.write_text(json.dumps(cases))
    budget = 5.0
    with AgentServer({"question": "an answer"}) as agent, OpenAIServer(api_key=KEY, judge=Judge(score=0.9)) as judge:
        code = cli_main(["run", "--dataset", str(dataset), "--target", "http", "--target-url",
                         agent.base_url + "/api/agent/chat", "--judge-provider", "openai", "--judge-base-url",
                         judge.base_url + "/v1", "--max-cost", str(budget), "--concurrency", "1",
                         "--output-dir", str(tmp_path / "out"), "--progress", "none"])
        judge_calls = len(judge.chat_requests())
    err = capsys.readouterr().err
    document = json.loads((tmp_path / "out" / "results.json").read_text())
    assert code == 1
    assert "cost estimate: ~$" in err and "budget max_cost $5" in err and "exceeds it" in err
    assert document["status"] == "cancelled"
    assert any("max_cost $5 reached" in reason for reason in document["gate"]["reasons"])
    cost = document["metadata"]["cost"]
    assert cost["budget_exceeded"] is True
    assert 0 < cost["spent_usd"] <= budget
    assert document["summary"]["cost_usd"] == pytest.approx(cost["spent_usd"], abs=1e-6)
    assert 0 < judge_calls < len(cases)
    assert len(document["results"]) == judge_calls  # every finished case was written; none half-judged
    assert all(r["metrics"]["relevancy"]["status"] == "passed" for r in document["results"])
