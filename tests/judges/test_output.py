"""Issue #11, "structured judge output": the verdict's schema in every judge call, in the shape each provider
takes; a refused shape detected once per run and recorded; prompt-only parsing of a lone score in words; the
repair retry only where it can rescue; cache keys that include the output mode; samples that fail among K.
Against the loopback OpenAI server."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from evalgate.calls.costs import Price
from evalgate.calls.executor import CallFailed
from evalgate.calls.runtime import Runtime
from evalgate.cli.main import main as cli_main
from evalgate.config.settings import Settings
from evalgate.judges.client import REPAIR_TRIAL
from evalgate.judges.estimate import estimate_run
from evalgate.judges.factory import build_judge
from evalgate.judges.output import (
    OutputNegotiator,
    enumerated_bounds,
    is_refusal,
    lean_schema,
    modes_for,
    schema_for,
)
from evalgate.judges.parse import VerdictError, parse_verdict, schema_of, score_in_words
from evalgate.judges.prompts import FivePointVerdict, OverallVerdict, ScoreVerdict
from evalgate.model import Answer, Case, MetricUnavailable
from tests.servers.openai_server import Judge, OpenAIServer, Rule, openai_error

KEY = "sk-output-judge-9f8e7d6c5b"
ENV = {"LOCAL_JUDGE_API_KEY": KEY, "OPENAI_API_KEY": KEY, "GOOGLE_API_KEY": KEY}
CASE = Case(id="c1", input="Is the press safe to reset?", passing_criteria="says to lock out first")
ANSWER = Answer(output="Lock it out first, then reset.")


def mode_of(payload: dict[str, Any]) -> str:
    return ((payload.get("response_format") or {}).get("type")) or "prompt"


def refuse(kind: str, status: int = 400, message: str | None = None) -> Rule:
    """A server that does not take ``response_format`` of type ``kind``."""
    text = message or f"Invalid parameter: 'response_format' of type '{kind}' is not supported with this model."
    return Rule(where=lambda payload: mode_of(payload) == kind, status=status,
                body=json.dumps(openai_error(status, text)))


def settings_for(server: OpenAIServer, tmp_path: Path, **values: Any) -> Settings:
    base = {"judge_provider": "local", "judge_base_url": server.base_url + "/v1", "output_dir": str(tmp_path),
            "api_retries": 0, "no_cache": True}
    return Settings(**(base | values))


def judge_many(settings: Settings, count: int, *, case: Case = CASE, metric: str = "relevancy",
               sequential: bool = False) -> tuple[list[Any], dict[str, Any]]:
    """``count`` different answers judged concurrently (or one after the other); the results (or exceptions)
    and the judge's metadata."""
    async def go() -> tuple[list[Any], dict[str, Any]]:
        judge = build_judge(settings, Runtime.from_settings(settings), ENV)
        assert judge is not None
        answers = [Answer(output=f"Answer {i}: lock out first.") for i in range(count)]
        try:
            if sequential:
                results = []
                for answer in answers:
                    try:
                        results.append(await judge.score(metric, case, answer))
                    except MetricUnavailable as exc:
                        results.append(exc)
            else:
                results = list(await asyncio.gather(*(judge.score(metric, case, a) for a in answers),
                                                    return_exceptions=True))
            return results, judge.metadata()
        finally:
            await judge.aclose()

    return asyncio.run(go())


# --- the request shapes ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", ["openai", "gemini", "ollama", "local"])
def test_every_provider_is_sent_the_schema_first(tmp_path: Path, provider: str) -> None:
    with OpenAIServer(judge=Judge(score=0.8)) as server:  # no key: Ollama sends none
        [result], metadata = judge_many(settings_for(server, tmp_path, judge_provider=provider), 1)
        sent = server.chat_requests()[0]
    fmt = sent["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "relevancy_verdict"
    assert fmt["json_schema"]["strict"] is False
    score = fmt["json_schema"]["schema"]["properties"]["score"]
    if provider in ("local", "ollama"):  # grammar engines cannot bound a number: the scale's 21 steps
        assert score["enum"] == [round(k * 0.05, 6) if k % 20 else k // 20 for k in range(21)]
        assert "minimum" not in score
    else:
        assert (score["minimum"], score["maximum"]) == (0.0, 1.0) and "enum" not in score
    assert result.value == 0.8 and result.details["output_mode"] == "json_schema"
    assert metadata["output"] == {"mode": "json_schema", "modes": list(modes_for(provider)), "forced": False,
                                  "refused": [], "calls": {"json_schema": 1}}


def test_enumerated_bounds_by_hand() -> None:
    five = enumerated_bounds(schema_of(FivePointVerdict))["properties"]["score"]["enum"]
    assert five[:6] == [1, 1.2, 1.4, 1.6, 1.8, 2] and five[-1] == 5 and len(five) == 21
    overall = schema_for("local", schema_of(OverallVerdict))["properties"]
    assert all(len(overall[name]["enum"]) == 21 for name in ("accuracy", "completeness", "relevance", "overall_score"))
    assert overall["reasoning"] == {"type": "string", "maxLength": 300}  # the grammar caps the reasoning
    sent = schema_for("openai", schema_of(ScoreVerdict))
    assert sent == {"properties": {"reasoning": {"type": "string"},
                                   "score": {"maximum": 1.0, "minimum": 0.0, "type": "number"}},
                    "required": ["reasoning", "score"], "type": "object"}  # no title/description tokens


def test_lean_schema_keeps_a_property_named_title() -> None:
    schema = {"title": "T", "description": "d", "type": "object",
              "properties": {"title": {"title": "Title", "type": "string"}}}
    assert lean_schema(schema) == {"type": "object", "properties": {"title": {"type": "string"}}}


def test_json_object_mode_sends_llama_cpps_shape(tmp_path: Path) -> None:
    with OpenAIServer(api_key=KEY, judge=Judge(score=0.35)) as server:
        [result], _ = judge_many(settings_for(server, tmp_path, judge_output="json_object"), 1)
        sent = server.chat_requests()[0]
    assert sent["response_format"]["type"] == "json_object"
    assert sent["response_format"]["schema"]["required"] == ["reasoning", "score"]
    assert result.value == 0.35 and result.details["output_mode"] == "json_object"


# --- refusal: once per run, recorded ---------------------------------------------------------------------------


def test_a_refused_json_schema_falls_back_once_for_the_whole_run(tmp_path: Path) -> None:
    with OpenAIServer([refuse("json_schema")], api_key=KEY, judge=Judge(score=0.9)) as server:
        results, metadata = judge_many(settings_for(server, tmp_path, concurrency=4), 8)
        modes = [mode_of(p) for p in server.chat_requests()]
    assert modes == ["json_schema"] + ["json_object"] * 8  # the other 7 waited for the first call's outcome
    assert [r.value for r in results] == [0.9] * 8
    assert all(r.details["output_mode"] == "json_object" for r in results)
    output = metadata["output"]
    assert output["mode"] == "json_object" and output["calls"] == {"json_object": 8}
    assert [(r["mode"], r["status"]) for r in output["refused"]] == [("json_schema", 400)]
    assert "'response_format' of type 'json_schema' is not supported" in output["refused"][0]["error"]


def test_a_server_refusing_both_structured_shapes_gets_the_prompt_only_mode(tmp_path: Path) -> None:
    # llama-cpp-python's server answers a validation error with HTTP 500
    rules = [refuse("json_schema", 500, "1 validation error: ('body', 'response_format', 'type'): Input should be "
                                       "'text' or 'json_object'"), refuse("json_object")]
    with OpenAIServer(rules, api_key=KEY, judge=Judge(score=0.6)) as server:
        results, metadata = judge_many(settings_for(server, tmp_path, concurrency=3), 3)
        modes = [mode_of(p) for p in server.chat_requests()]
    assert modes == ["json_schema", "json_object", "prompt", "prompt", "prompt"]
    assert [r.value for r in results] == [0.6] * 3 and results[0].details["output_mode"] == "prompt"
    assert [r["mode"] for r in metadata["output"]["refused"]] == ["json_schema", "json_object"]
    assert metadata["output"]["refused"][0]["status"] == 500


def test_a_forced_mode_that_is_refused_makes_the_verdicts_unavailable(tmp_path: Path) -> None:
    with OpenAIServer([refuse("json_schema")], api_key=KEY, judge=Judge(score=0.9)) as server:
        results, metadata = judge_many(settings_for(server, tmp_path, judge_output="json_schema"), 2)
    assert all(isinstance(r, MetricUnavailable) for r in results)
    assert results[0].details["judge_failure"] == "refused" and "HTTP 400" in str(results[0])
    assert metadata["output"]["forced"] is True and metadata["output"]["refused"] == []


def test_other_errors_are_not_taken_for_a_refusal(tmp_path: Path) -> None:
    with OpenAIServer([Rule(status=400, body=json.dumps(openai_error(400, "maximum context length exceeded")),
                            times=1)], api_key=KEY, judge=Judge(score=0.9)) as server:
        results, metadata = judge_many(settings_for(server, tmp_path, concurrency=1), 2)
        modes = [mode_of(p) for p in server.chat_requests()]
    assert isinstance(results[0], MetricUnavailable) and results[0].details["judge_failure"] == "refused"
    assert results[1].value == 0.9 and modes == ["json_schema", "json_schema"]
    assert metadata["output"]["refused"] == []


def test_refusal_detection_by_hand() -> None:
    assert is_refusal("json_schema", CallFailed("HTTP 400: 'response_format' is not supported", status=400))
    assert is_refusal("json_object", CallFailed("HTTP 500: Unknown grammar", status=500))
    assert not is_refusal("prompt", CallFailed("HTTP 400: response_format", status=400))
    assert not is_refusal("json_schema", CallFailed("connection error: response_format", status=None))
    assert not is_refusal("json_schema", CallFailed("HTTP 400: context length exceeded", status=400))


def test_the_negotiator_moves_once_and_resends_calls_sent_in_the_refused_mode() -> None:
    async def go() -> tuple[list[str], list[str]]:
        negotiator = OutputNegotiator(("json_schema", "json_object", "prompt"))
        sent: list[str] = []

        async def send(mode: str) -> str:
            sent.append(mode)
            await asyncio.sleep(0)
            if mode == "json_schema":
                raise CallFailed("HTTP 422: response_format json_schema unknown", status=422)
            return mode

        results = await asyncio.gather(*(negotiator.run(send) for _ in range(5)))  # type: ignore[arg-type]
        return sent, [mode for _, mode in results]

    sent, used = asyncio.run(go())
    assert sent == ["json_schema"] + ["json_object"] * 5 and used == ["json_object"] * 5


# --- prompt-only mode: a lone score in words, the repair retry --------------------------------------------------


@pytest.mark.parametrize(("text", "bounds", "expected"), [
    ("Score: 4", (1.0, 5.0), 4.0),
    ("I would rate this answer 4 out of 5.", (1.0, 5.0), 4.0),
    ("Overall rating: 0.75 — clear and correct.", (0.0, 1.0), 0.75),
    ("score 4/5", (1.0, 5.0), 4.0),
    ("score 8/10", (0.0, 1.0), None),  # another scale: never rescaled
    ("score: 7", (1.0, 5.0), None),  # off the scale: never clamped
    ("Rating: 3. Score: 4", (1.0, 5.0), None),  # two different values
    ("I rate it 4 out of 5", (0.0, 1.0), None),
    ("no number here", (0.0, 1.0), None),
    ("score 4.5.1", (1.0, 5.0), None),
])
def test_a_lone_score_in_words(text: str, bounds: tuple[float, float], expected: float | None) -> None:
    assert score_in_words(text, bounds) == expected


def test_words_are_read_only_for_one_score_verdicts_and_not_from_broken_json() -> None:
    assert parse_verdict("Score: 4 — mostly right.", FivePointVerdict, words=True).score == 4.0
    with pytest.raises(VerdictError, match="no JSON object"):
        parse_verdict("Score: 4 — mostly right.", FivePointVerdict)  # words only when asked (prompt mode)
    with pytest.raises(VerdictError):
        parse_verdict('{"reasoning": "cut", "score": 4', FivePointVerdict, words=True)
    with pytest.raises(VerdictError):
        parse_verdict("overall score: 0.8", OverallVerdict, words=True)


def test_prompt_mode_reads_a_score_in_words_and_says_so(tmp_path: Path) -> None:
    with OpenAIServer([Rule(reply="The answer is on topic. Score: 0.8")], api_key=KEY) as server:
        [result], _ = judge_many(settings_for(server, tmp_path, judge_output="prompt"), 1)
        sent = server.chat_requests()[0]
    assert "response_format" not in sent
    assert result.value == 0.8 and result.details["parsed_from"] == "words"
    assert result.details["output_mode"] == "prompt"


def test_the_repair_retry_stops_once_it_rescues_nothing(tmp_path: Path) -> None:
    count = REPAIR_TRIAL + 4
    with OpenAIServer([Rule(reply="I cannot decide.")], api_key=KEY) as server:
        results, metadata = judge_many(settings_for(server, tmp_path, judge_output="prompt"), count, sequential=True)
        requests = len(server.chat_requests())
    assert all(isinstance(r, MetricUnavailable) for r in results)
    assert requests == count + REPAIR_TRIAL
    assert metadata["repairs"] == {"attempted": REPAIR_TRIAL, "rescued": 0, "stopped": True}
    assert "after one repair retry" in str(results[0]) and "after one repair retry" not in str(results[-1])


def test_a_rescuing_repair_keeps_the_retry_on(tmp_path: Path) -> None:
    rules = [Rule(reply="Hmm.", where=lambda p: len(p["messages"]) == 2)]  # first replies unreadable; repairs fine
    with OpenAIServer(rules, api_key=KEY, judge=Judge(score=0.7)) as server:
        results, metadata = judge_many(settings_for(server, tmp_path, judge_output="prompt"), REPAIR_TRIAL + 2,
                                       sequential=True)
    assert [r.value for r in results] == [0.7] * (REPAIR_TRIAL + 2)
    assert all(r.details["repaired"] for r in results)
    assert metadata["repairs"] == {"attempted": REPAIR_TRIAL + 2, "rescued": REPAIR_TRIAL + 2, "stopped": False}


def test_the_estimate_counts_repair_retries_only_in_prompt_mode() -> None:
    cases = [Case(id=f"c{i}", input="q", passing_criteria="x", output="a") for i in range(4)]
    structured = estimate_run(cases, lambda c: ["relevancy"], repeat=1, samples=1, judge_price=Price(1, 1),
                              judging=True, output_mode="json_schema")
    prompt = estimate_run(cases, lambda c: ["relevancy"], repeat=1, samples=1, judge_price=Price(1, 1),
                          judging=True, output_mode="prompt")
    assert structured.repair_calls == 0 and "json_schema judge output: no repair retries" in structured.line(None)
    assert prompt.repair_calls == 4 and "up to 4 repair retries more" in prompt.line(None)
    # each repair: the first prompt + the assumed reply + 60 tokens, and another assumed reply
    reply = prompt.completion_tokens // 4
    assert 60 < reply < 90  # a {"reasoning" (300 characters), "score"} verdict
    expected = Price(1, 1).cost(prompt.prompt_tokens + 4 * reply + 4 * 60, 4 * reply)
    assert prompt.repair_cost_usd == pytest.approx(expected)
    assert prompt.as_dict()["repair_calls_max"] == 4 and structured.as_dict()["output_mode"] == "json_schema"


# --- the cache keys include the output mode ---------------------------------------------------------------------


def test_a_reply_cached_in_one_mode_is_not_served_in_another(tmp_path: Path) -> None:
    with OpenAIServer(api_key=KEY, judge=Judge(score=0.9)) as server:
        for mode in ("json_schema", "prompt", "json_schema", "prompt", "json_object"):
            judge_many(settings_for(server, tmp_path, judge_output=mode, no_cache=False), 1)
        modes = [mode_of(p) for p in server.chat_requests()]
    assert modes == ["json_schema", "prompt", "json_object"]  # the reruns came from the cache


# --- samples that fail among K --------------------------------------------------------------------------------


def test_a_failed_sample_among_three_leaves_the_verdict_on_the_other_two(tmp_path: Path) -> None:
    rules = [Rule(status=503, where=lambda p: p["seed"] == 21)]
    with OpenAIServer(rules, api_key=KEY, judge=Judge(score=0.6)) as server:
        [result], _ = judge_many(settings_for(server, tmp_path, judge_samples=3, judge_seed=20), 1)
    assert result.value == 0.6 and result.details["samples_failed"] == 1
    assert [s["relevancy"] for s in result.details["samples"]] == [0.6, 0.6]
    assert "HTTP 503" in result.details["sample_failures"][0]


def test_two_failed_samples_among_three_make_the_verdict_unavailable_and_stop_sampling(tmp_path: Path) -> None:
    with OpenAIServer([Rule(status=503, where=lambda p: p["seed"] in (20, 21))], api_key=KEY) as server:
        [result], _ = judge_many(settings_for(server, tmp_path, judge_samples=3, judge_seed=20), 1)
        seeds = [p["seed"] for p in server.chat_requests()]
    assert isinstance(result, MetricUnavailable) and "(2 of 3 samples failed)" in str(result)
    assert result.details["samples_failed"] == 2 and seeds == [20, 21]  # the third could not make a majority


# --- end to end: recorded in results.json --------------------------------------------------------------------------


def test_the_run_records_the_output_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCAL_JUDGE_API_KEY", KEY)
    dataset = tmp_path / "cases.json"
    dataset.write_text(json.dumps([{"id": f"c{i}", "input": f"q{i}", "output": f"a{i}", "passing_criteria": "x",
                                    "metrics": ["relevancy"]}
                                   for i in range(3)]))
    with OpenAIServer([refuse("json_schema")], api_key=KEY, judge=Judge(score=0.9)) as server, \
            contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
        code = cli_main(["run", "-d", str(dataset), "-o", str(tmp_path / "out"), "--progress", "none",
                         "--judge-provider", "local", "--judge-base-url", server.base_url + "/v1"])
    document = json.loads((tmp_path / "out" / "results.json").read_text())
    assert code == 0, err.getvalue()
    judge = document["metadata"]["judge"]
    assert judge["output"]["mode"] == "json_object" and judge["output"]["refused"][0]["mode"] == "json_schema"
    assert judge["repairs"] == {"attempted": 0, "rescued": 0, "stopped": False}
    assert {r["metrics"]["relevancy"]["details"]["output_mode"] for r in document["results"]} == {"json_object"}
    assert document["metadata"]["estimate"]["output_mode"] in ("json_schema", "json_object")  # as the run began


def test_concurrent_unreadable_replies_repair_at_most_the_trial_before_a_rescue(tmp_path: Path) -> None:
    with OpenAIServer([Rule(reply="I cannot decide.")], api_key=KEY) as server:
        results, metadata = judge_many(settings_for(server, tmp_path, judge_output="prompt", concurrency=4), 20)
        requests = len(server.chat_requests())
    assert all(isinstance(r, MetricUnavailable) for r in results)
    assert requests == 20 + REPAIR_TRIAL and metadata["repairs"]["attempted"] == REPAIR_TRIAL
