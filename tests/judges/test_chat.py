"""The two chat backends (direct JSON, the official openai SDK) against the loopback OpenAI server: the same
requests, the same verdicts, the same handling of statuses and odd replies."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from evalgate.calls.chat import Completion, DirectChat, ReplyError, error_message, parse_completion
from evalgate.calls.executor import classify
from evalgate.calls.providers import resolve_provider
from evalgate.calls.runtime import Runtime
from evalgate.config.settings import Settings
from evalgate.judges.factory import build_judge
from evalgate.metrics.registry import MetricUnavailable
from tests.servers.openai_server import Judge, OpenAIServer, Rule
from tests.support.judging import ANSWER, CASE, ENV, KEY

CLIENTS = ("direct", "openai-sdk")


def judged(server: OpenAIServer, tmp_path: Path, chat_client: str, **values: Any) -> tuple[Any, Runtime]:
    settings = Settings(judge_provider="openai", judge_model="gpt-4o-mini", judge_base_url=server.base_url + "/v1",
                        output_dir=str(tmp_path), api_retries=1, no_cache=True, chat_client=chat_client, **values)

    async def go() -> tuple[Any, Runtime]:
        runtime = Runtime.from_settings(settings)
        judge = build_judge(settings, runtime, ENV)
        assert judge is not None
        try:
            return await judge.score("relevancy", CASE, ANSWER), runtime
        finally:
            await judge.aclose()

    return asyncio.run(go())


def test_both_clients_send_the_same_request_and_read_the_same_verdict(tmp_path: Path) -> None:
    results, bodies = {}, {}
    for client in CLIENTS:
        with OpenAIServer(api_key=KEY, judge=Judge(score=0.7, reasoning="on topic")) as server:
            results[client], _ = judged(server, tmp_path / client, client)
            (request,) = server.requests(["/v1/chat/completions"])
            bodies[client] = request.json()
            assert request.headers["authorization"] == f"Bearer {KEY}"
            server.assert_secret_not_sent(KEY)
    assert bodies["direct"] == bodies["openai-sdk"]
    assert bodies["direct"]["model"] == "gpt-4o-mini" and "max_completion_tokens" in bodies["direct"]
    assert bodies["direct"]["response_format"]["type"] == "json_schema"
    direct, sdk = results["direct"], results["openai-sdk"]
    assert direct.value == sdk.value == 0.7
    assert {k: v for k, v in direct.details.items()} == {k: v for k, v in sdk.details.items()}
    assert direct.details["prompt_tokens"] > 0 and direct.details["reasoning"] == "on topic"


@pytest.mark.parametrize("client", CLIENTS)
def test_rate_limit_is_retried_after_the_servers_wait(tmp_path: Path, client: str) -> None:
    with OpenAIServer(api_key=KEY, script=[Rule(status=429, retry_after=0.2, times=1)],
                      judge=Judge(score=0.6)) as server:
        result, runtime = judged(server, tmp_path, client)
        calls = len(server.requests(["/v1/chat/completions"]))
    stats = runtime.executor.stats.of("openai")
    assert result.value == 0.6 and calls == 2
    assert (stats.rate_limited, stats.retries) == (1, 1) and stats.waited_seconds == pytest.approx(0.2)


@pytest.mark.parametrize("client", CLIENTS)
def test_a_non_json_success_reply_is_a_clear_unavailable_metric(tmp_path: Path, client: str) -> None:
    with OpenAIServer(api_key=KEY, script=[Rule(body="<html>maintenance</html>")]) as server:
        with pytest.raises(MetricUnavailable) as caught:
            judged(server, tmp_path, client)
        calls = len(server.requests(["/v1/chat/completions"]))
    assert "judge call failed" in str(caught.value) and calls == 1  # not retried: it would not change


def test_direct_client_reads_the_providers_error_message(tmp_path: Path) -> None:
    with OpenAIServer(api_key="sk-some-other-key") as server, pytest.raises(MetricUnavailable) as caught:
        judged(server, tmp_path, "direct")
    assert "HTTP 401" in str(caught.value) and KEY not in str(caught.value)


def test_completion_parsing_and_error_messages() -> None:
    body = (b'{"choices": [{"message": {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}}],'
            b' "usage": {"prompt_tokens": 5, "completion_tokens": 2}}')
    assert parse_completion(body, "u") == Completion("ab", 5, 2)
    assert parse_completion(b'{"choices": [], "usage": {"prompt_tokens": true, "completion_tokens": 1}}', "u") == \
        Completion("", None, None)
    assert parse_completion(b'{"choices": [{"message": {"content": null}}]}', "u") == Completion("")
    with pytest.raises(ReplyError, match="non-JSON"):
        parse_completion(b"<html>", "http://judge/v1/chat/completions")
    with pytest.raises(ReplyError, match="not a chat completion"):
        parse_completion(b"[1, 2]", "u")
    assert not classify(ReplyError("x")).retryable
    assert error_message(b'{"error": {"message": "model not found", "type": "x"}}', "Not Found") == "model not found"
    assert error_message(b'{"error": "quota exceeded"}', "Too Many Requests") == "quota exceeded"
    assert error_message(b"", "Bad Gateway") == "Bad Gateway"
    assert error_message(b"upstream down", "Bad Gateway") == "upstream down"


def test_direct_client_posts_to_the_base_url_with_or_without_trailing_slash() -> None:
    provider = resolve_provider("local", model="m", base_url="http://127.0.0.1:9/v1/", env={"LOCAL_JUDGE_API_KEY": "k"})
    assert DirectChat(provider, timeout=1, concurrency=1).url == "http://127.0.0.1:9/v1/chat/completions"


@pytest.mark.parametrize("client", CLIENTS)
def test_the_cli_flag_picks_the_client_and_results_record_it(tmp_path: Path, client: str) -> None:
    import json
    import os
    import subprocess
    import sys

    dataset = tmp_path / "cases.jsonl"
    dataset.write_text(json.dumps({"id": "c1", "input": "Is it on topic?", "output": "Yes, on topic.",
                                   "passing_criteria": "answers the question",
                                   "metrics": ["relevancy"]}) + "\n")
    with OpenAIServer(api_key=KEY, judge=Judge(score=0.9)) as server:
        done = subprocess.run(
            [sys.executable, "-m", "evalgate", "run", "-d", str(dataset), "--output-dir", str(tmp_path / "out"),
             "--progress", "none", "--judge-provider", "openai", "--judge-base-url", server.base_url + "/v1",
             "--chat-client", client], capture_output=True, text=True, timeout=120,
            env=os.environ | {"OPENAI_API_KEY": KEY})
        calls = len(server.requests(["/v1/chat/completions"]))
    assert done.returncode == 0, done.stderr
    document = json.loads((tmp_path / "out" / "results.json").read_text())
    assert document["metadata"]["judge"]["client"] == client and calls == 1
    assert document["results"][0]["metrics"]["relevancy"]["value"] == 0.9
    assert KEY not in done.stdout + done.stderr
