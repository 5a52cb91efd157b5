"""The openai target: a chat model as the system under test, against the loopback OpenAI server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from evalgate.calls.runtime import Runtime
from evalgate.cli.main import main as cli_main
from evalgate.config.settings import Settings
from evalgate.errors import UserError
from evalgate.model import Answer, Case
from evalgate.targets.factory import build_target
from evalgate.targets.openai_chat import OpenAIChatTarget, target_provider_config
from tests.servers.openai_server import OpenAIServer, Rule

KEY = "sk-target-test-9a8b7c6d5e"


def answer_with(settings: Settings, env: dict[str, str], case: Case) -> tuple[Answer, Runtime]:
    async def go() -> tuple[Answer, Runtime]:
        runtime = Runtime.from_settings(settings)
        target = build_target(settings, runtime, env)
        assert isinstance(target, OpenAIChatTarget)
        try:
            return await target.answer(case), runtime
        finally:
            await target.aclose()

    return asyncio.run(go())


def test_model_answers_with_system_prompt_usage_and_cost() -> None:
    usage = {"prompt_tokens": 1000, "completion_tokens": 500}
    with OpenAIServer([Rule(reply="Caruso is the pick.", usage=usage)], api_key=KEY) as server:
        settings = Settings(target="openai", target_url=server.base_url + "/v1", target_model="gpt-4o-mini",
                            target_system_prompt="You advise team {{ context.teamName }} in {{ language }}.")
        case = Case(id="c1", input="Who do I pick up?", team_name="Bulls", language="en")
        answer, runtime = answer_with(settings, {"OPENAI_API_KEY": KEY}, case)
        sent = server.chat_requests()[0]
    assert answer.output == "Caruso is the pick."
    assert (answer.prompt_tokens, answer.completion_tokens, answer.num_tokens) == (1000, 500, 1500)
    assert answer.cost_usd == pytest.approx((1000 * 0.15 + 500 * 0.60) / 1_000_000)
    assert sent["model"] == "gpt-4o-mini" and sent["temperature"] == 0 and sent["seed"] == settings.judge_seed
    assert sent["messages"] == [{"role": "system", "content": "You advise team Bulls in en."},
                                {"role": "user", "content": "Who do I pick up?"}]
    assert runtime.ledger.roles["target"].calls == 1


def test_provider_follows_the_judge_and_target_settings() -> None:
    gemini = target_provider_config(Settings(target="openai", judge_provider="gemini"), {"GEMINI_API_KEY": "g-key-123456"})
    assert (gemini.name, gemini.model, gemini.key_variable) == ("gemini", "gemini-2.0-flash", "GEMINI_API_KEY")
    default = target_provider_config(Settings(target="openai"), {"OPENAI_API_KEY": KEY})
    assert (default.name, default.base_url) == ("openai", "https://api.openai.com/v1")
    ollama = target_provider_config(Settings(target="openai", target_provider="ollama", target_model="llama3.1:8b",
                                             judge_provider="openai"), {"OLLAMA_BASE_URL": "http://127.0.0.1:11434"})
    assert (ollama.name, ollama.base_url, ollama.model) == ("ollama", "http://127.0.0.1:11434/v1", "llama3.1:8b")


def test_missing_key_is_a_user_error() -> None:
    with pytest.raises(UserError, match="target_provider: provider 'openai' needs an API key: set OPENAI_API_KEY"):
        target_provider_config(Settings(target="openai"), {})


def test_unknown_system_prompt_variable_is_a_user_error() -> None:
    settings = Settings(target="openai", target_url="http://127.0.0.1:9/v1", target_system_prompt="{{ persona }}")
    with pytest.raises(UserError, match="target_system_prompt: unknown template variable"):
        build_target(settings, None, {"OPENAI_API_KEY": KEY})


def test_model_errors_are_errored_answers() -> None:
    with OpenAIServer([Rule(status=401)], api_key=KEY) as server:
        settings = Settings(target="openai", target_url=server.base_url + "/v1", api_retries=2)
        answer, _ = answer_with(settings, {"OPENAI_API_KEY": KEY}, Case(id="c", input="hi"))
        requests = len(server.chat_requests())
    assert requests == 1  # 401 is not retried
    assert answer.error is not None and "HTTP 401" in answer.error and KEY not in answer.error


def test_openai_target_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    dataset = tmp_path / "cases.json"
    dataset.write_text(json.dumps([{"id": "a", "input": "Say hello", "expected_keywords": ["hello"]}]))
    with OpenAIServer([Rule(reply="hello world")], api_key=KEY) as server:
        code = cli_main(["run", "--dataset", str(dataset), "--target", "openai", "--target-url", server.base_url + "/v1",
                         "--output-dir", str(tmp_path / "out"), "--progress", "none"])
    document = json.loads((tmp_path / "out" / "results.json").read_text())
    assert code == 0
    result = document["results"][0]
    assert result["output"] == "hello world" and result["cost_usd"] > 0
    assert document["summary"]["cost_usd"] == pytest.approx(result["cost_usd"], abs=1e-6)
    assert document["metadata"]["cost"]["roles"]["target"]["calls"] == 1
    assert KEY not in (tmp_path / "out" / "results.json").read_text()
