"""Prices, token accounting, the pre-run estimate and the max_cost budget."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from evalgate.calls.costs import (
    BudgetExceeded,
    CostLedger,
    Price,
    Usage,
    add_spend,
    cached_prompt_tokens,
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
    assert find_price("gpt-4o-2024-08-06", table) == Price(2.5, 10.0, 1.25)
    assert find_price("models/gemini-2.0-flash", table) == Price(0.10, 0.40, 0.025)
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


def test_ledger_waits_for_calls_in_flight_and_refuses_only_a_call_that_cannot_fit() -> None:
    async def go() -> None:
        ledger = CostLedger(max_cost=1.0)
        held = await ledger.reserve(0.6)
        waiting = asyncio.create_task(ledger.reserve(0.5))  # 0.6 held + 0.5 > 1.0: waits for the first call
        await asyncio.sleep(0)
        assert not waiting.done() and not ledger.exceeded
        assert ledger.record("judge", Usage(1000, 1000, "provider"), Price(100, 100)) == pytest.approx(0.2)
        ledger.release(held)  # the first call cost 0.2 of its 0.6: 0.2 + 0.5 fits
        assert await waiting == 0.5 and ledger.reserved == pytest.approx(0.5)
        with pytest.raises(BudgetExceeded, match=r"max_cost \$1 reached: spent \$0\.200000 of \$1 \(20%\); the next "
                                                 r"call could cost up to \$0\.900000"):
            await ledger.reserve(0.9)  # 0.2 spent + 0.9 > 1.0 even with nothing else in flight
        assert ledger.exceeded
        with pytest.raises(BudgetExceeded):
            await ledger.reserve(0.01)  # once reached, no new call starts
        ledger.release(0.5)
        assert ledger.reserved == 0.0 and ledger.holding == 0
        assert ledger.record("judge", Usage(1, 1, "provider"), None) is None
        assert ledger.metadata()["roles"]["judge"]["unpriced_calls"] == 1

    asyncio.run(go())


def test_a_waiting_call_is_refused_when_the_release_leaves_too_little() -> None:
    async def go() -> None:
        ledger = CostLedger(max_cost=1.0)
        held = await ledger.reserve(0.5)
        waiting = asyncio.create_task(ledger.reserve(0.6))
        await asyncio.sleep(0)
        ledger.record("judge", Usage(1000, 0, "provider"), Price(450, 0))  # the call cost 0.45
        ledger.release(held)
        with pytest.raises(BudgetExceeded):
            await waiting  # 0.45 spent + 0.6 > 1.0

    asyncio.run(go())


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


PRICES = {"gpt-4o-mini": {"input": 3600, "output": 3600}}  # ≈ $0.6 per judge call of ≈ 165 tokens
"""USD per 1M tokens: a relevancy verdict (≈ 600 prompt + ≈ 20 completion tokens) costs ≈ $0.62; its worst case
(≈ 610·1.1 + 16 prompt + 1024 completion tokens) ≈ $1.72."""


def budget_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, budget: float, concurrency: int, cases: int = 20
               ) -> tuple[int, dict[str, Any], list[dict[str, Any]], str]:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("EVALGATE_PRICES", json.dumps(PRICES))
    monkeypatch.setenv("EVALGATE_CALIBRATION", "trust")  # relevancy gates: a verdict the budget left unasked errors
    dataset = tmp_path / "cases.json"
    dataset.write_text(json.dumps([{"id": f"c{i:02d}", "input": f"question {i}", "passing_criteria": "answers",
                                    "metrics": ["relevancy"]}
                                   for i in range(cases)]))
    with AgentServer({"question": "an answer"}) as agent, \
            OpenAIServer(api_key=KEY, judge=Judge(score=0.9), latency_ms=30) as judge, \
            contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()) as err:
        code = cli_main(["run", "--dataset", str(dataset), "--target", "http", "--target-url",
                         agent.base_url + "/api/agent/chat", "--judge-provider", "openai", "--judge-base-url",
                         judge.base_url + "/v1", "--max-cost", str(budget), "--concurrency", str(concurrency),
                         "--output-dir", str(tmp_path / "out"), "--progress", "none"])
        requests = judge.chat_requests()
    document = json.loads((tmp_path / "out" / "results.json").read_text())
    return code, document, requests, out.getvalue() + err.getvalue()


def test_max_cost_spends_close_to_its_budget_and_keeps_what_was_paid(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    budget = 5.0
    code, document, requests, output = budget_run(tmp_path, monkeypatch, budget, concurrency=8, cases=40)
    cost = document["metadata"]["cost"]
    spent, calls = cost["spent_usd"], cost["roles"]["judge"]["calls"]
    per_call = spent / calls
    worst = max(r["metrics"]["relevancy"]["details"].get("cost_usd") or 0 for r in document["results"]) * 3
    assert code == 1 and document["status"] == "cancelled" and cost["budget_exceeded"] is True
    assert calls == len(requests) and 0.5 < per_call < 0.8
    # spent up to the budget less about one call's worst case (the old ledger stopped at ≈ 2 calls, $1.2)
    assert budget - 1.8 <= spent <= budget and calls >= 5
    assert worst > 1.5  # the reservation per call really is ~3× a call's cost
    # every paid verdict is in the results; the cases in progress when the budget ran out are recorded too
    judged = [r for r in document["results"] if r["metrics"]["relevancy"]["status"] == "passed"]
    refused = [r for r in document["results"] if r["metrics"]["relevancy"]["status"] == "unavailable"]
    assert len(judged) == calls and len(judged) + len(refused) == len(document["results"]) < 40
    assert all(r["metrics"]["relevancy"]["details"]["judge_failure"] == "budget" and r["status"] == "errored"
               for r in refused)
    assert document["summary"]["cost_usd"] == pytest.approx(spent, abs=1e-6)
    reason = next(r for r in document["gate"]["reasons"] if r.startswith("max_cost"))
    assert reason.startswith(f"max_cost $5 reached: spent ${spent:.6f} of $5 ({spent / budget:.0%}); the next call "
                             "could cost up to $")
    assert reason.endswith(f"the cases in progress finished, {40 - len(document['results'])} case(s) not run")
    assert reason in output  # printed when stopping (the console report)
    assert "cost estimate: ~$" in output and "budget max_cost $5" in output and "exceeds it" in output


def test_a_budget_that_fits_the_run_is_not_reached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, document, requests, _ = budget_run(tmp_path, monkeypatch, 100.0, concurrency=8, cases=10)
    cost = document["metadata"]["cost"]
    assert code == 0 and cost["budget_exceeded"] is False and len(requests) == 10 and cost["spent_usd"] < 10


# --- provider prompt caching ---------------------------------------------------------------------------------


def test_cached_prompt_tokens_are_billed_at_the_cached_rate() -> None:
    price = Price(0.15, 0.60, 0.075)  # gpt-4o-mini's list price
    # 1,000 prompt tokens of which 800 cached, 100 completion: 200·0.15 + 800·0.075 + 100·0.60 per 1e6
    assert price.cost(1000, 100, 800) == pytest.approx((200 * 0.15 + 800 * 0.075 + 100 * 0.60) / 1e6)
    assert price.cache_saving(800) == pytest.approx(800 * 0.075 / 1e6)
    assert Price(0.5, 1.5).cost(1000, 0, 800) == Price(0.5, 1.5).cost(1000, 0)  # no cached rate: full price
    assert price.cost(100, 0, 10_000) == pytest.approx(100 * 0.075 / 1e6)  # never more cached than the prompt
    assert price_table({"m": {"input": 1, "output": 2, "cached": 0.25}})["m"] == Price(1.0, 2.0, 0.25)


@pytest.mark.parametrize("usage", [
    {"prompt_tokens": 900, "completion_tokens": 9, "prompt_tokens_details": {"cached_tokens": 768}},  # OpenAI
    {"prompt_tokens": 900, "completion_tokens": 9, "cached_content_token_count": 768},  # Gemini
    {"prompt_tokens": 900, "completion_tokens": 9, "cache_read_input_tokens": 768},  # Anthropic-style
])
def test_cached_tokens_are_read_from_every_providers_usage(usage: dict[str, Any]) -> None:
    assert cached_prompt_tokens(usage) == 768
    assert usage_from(900, 9, [], "", cached_prompt_tokens(usage)) == Usage(900, 9, "provider", 768)


def test_a_run_reports_the_prompt_cache_saving(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the real wire: the judge's ``usage`` says 64 of each prompt's tokens came from its cache; the
    run prices them at gpt-4o-mini's cached rate and the cost line shows the saving."""
    from tests.servers.openai_server import Rule

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    dataset = tmp_path / "cases.json"
    dataset.write_text(json.dumps([{"id": f"c{i}", "input": f"question {i}", "passing_criteria": "answers", "metrics": ["relevancy"]}
                                   for i in range(3)]))
    cached = Rule(judge=Judge(score=0.9), usage={"prompt_tokens_details": {"cached_tokens": 64}})  # type: ignore[dict-item]
    with AgentServer({"question": "an answer"}) as agent, OpenAIServer([cached], api_key=KEY) as judge, \
            contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()):
        code = cli_main(["run", "--dataset", str(dataset), "--target", "http", "--target-url",
                         agent.base_url + "/api/agent/chat", "--judge-provider", "openai", "--judge-base-url",
                         judge.base_url + "/v1", "--output-dir", str(tmp_path / "out"), "--progress", "none"])
    summary = json.loads((tmp_path / "out" / "results.json").read_text())["summary"]
    tokens, calls = summary["tokens"], summary["judge_calls"]
    assert code == 0 and tokens["judge_prompt_cached"] == 3 * 64
    assert calls["prompt_cache_saved_usd"] == pytest.approx(3 * 64 * (0.15 - 0.075) / 1e6, abs=1e-6)
    full = (tokens["judge_prompt"] * 0.15 + tokens["judge_completion"] * 0.60) / 1e6
    assert summary["cost_usd"] == pytest.approx(full - 3 * 64 * 0.075 / 1e6, abs=1e-6)
    assert "192 prompt tokens from the provider's prompt cache, $0.0000 saved" in out.getvalue()


def test_estimate_counts_turn_judging_simulator_calls_at_their_own_price_and_verdict_sizes() -> None:
    from evalgate.judges.client import LIST_MAX_TOKENS
    from evalgate.judges.estimate import verdict_tokens
    from evalgate.metrics.registry import get_metric
    from evalgate.runner.conversation import turn_case

    goal = get_metric("goal_completion").fn.definition  # type: ignore[attr-defined]
    talk = Case.model_validate({"id": "t", "turns": [{"user": "a", "output": "x", "passing_criteria": "p"},
                                                     {"user": "b", "output": "y", "passing_criteria": "p"},
                                                     {"user": "c", "output": "z"}]})
    simulated = Case.model_validate({"id": "s", "goal": "Get a refund for order 1234.",
                                     "simulated_user": {"persona": "p", "max_turns": 3, "first_message": "hi"}})
    judged = lambda case: ["relevancy"] if case.passing_criteria else []  # noqa: E731
    criteria = lambda case: [goal] if case.simulated_user is not None else []  # noqa: E731
    judge, simulator = Price(1.0, 4.0), Price(10.0, 40.0)
    estimate = estimate_run([talk, simulated], judged, repeat=2, samples=1, judge_price=judge, judging=True,
                            criteria_for=criteria, turn_case=turn_case, simulator_price=simulator)
    # turns 1 and 2 judged (relevancy, their own passing_criteria); the simulated user: 2 messages written
    # (turn 1 is its first_message), goal checks after turns 1 and 2, goal_completion on the whole
    assert estimate.by_role["judge"]["calls"] == 2 * (2 + 3) and estimate.simulator_calls == 2 * 2
    assert estimate.upper_bound and "4 simulated-user call(s)" in estimate.line(None)
    roles = estimate.by_role
    assert estimate.cost_usd == pytest.approx(
        judge.cost(roles["judge"]["prompt_tokens"], roles["judge"]["completion_tokens"])
        + simulator.cost(roles["simulator"]["prompt_tokens"], roles["simulator"]["completion_tokens"]))
    goal_tokens = count_message_tokens([{"content": simulated.goal}]) - 4  # without the message overhead
    assert roles["simulator"]["completion_tokens"] == 4 * goal_tokens  # each message as long as the goal
    without_turns = estimate_run([talk], judged, repeat=1, samples=1, judge_price=judge, judging=True)
    assert without_turns.judge_calls == 0  # the conversation case itself has no passing_criteria

    # completion: a score verdict with its reasoning at the 300-character cap; a claims verdict grows with
    # the answer's sentences, up to the template's max_tokens
    case = Case(id="c", input="q")
    score = verdict_tokens(TEMPLATES["relevancy"], case, Answer(output="a"), count_message_tokens)
    assert 60 <= score <= 90
    claims = [verdict_tokens(TEMPLATES["faithfulness"], case, Answer(output="It rains. " * n), count_message_tokens)
              for n in (1, 10, 1000)]
    assert claims[0] < claims[1] < claims[2] == LIST_MAX_TOKENS
