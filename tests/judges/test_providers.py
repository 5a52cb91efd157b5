"""Every judge provider setting, each pointed at the loopback server: they differ only in base URL, key and
default model. A missing key stops the run with exit 2 before any case runs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from evalgate.calls.providers import NO_KEY, PROVIDERS, resolve_provider
from evalgate.calls.runtime import Runtime
from evalgate.cli.main import main as cli_main
from evalgate.config.settings import Settings
from evalgate.errors import UserError
from evalgate.judges.factory import build_judge
from evalgate.model import Answer, Case
from tests.servers.agent_server import AgentServer
from tests.servers.openai_server import Judge, OpenAIServer

KEY = "sk-provider-test-13572468"


def judge_once(settings: Settings, env: dict[str, str]) -> Any:
    async def go() -> Any:
        judge = build_judge(settings, Runtime.from_settings(settings), env)
        assert judge is not None
        try:
            return await judge.score("relevancy", Case(id="c", input="q", passing_criteria="x"), Answer(output="a"))
        finally:
            await judge.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize(
    ("provider", "key_env", "model", "seeded", "response_format"),
    [
        ("openai", {"OPENAI_API_KEY": KEY}, "gpt-4o-mini", True, "json_schema"),
        ("gemini", {"GOOGLE_API_KEY": KEY}, "gemini-2.0-flash", False, "json_schema"),
        ("gemini", {"GEMINI_API_KEY": KEY}, "gemini-2.0-flash", False, "json_schema"),
        ("local", {"LOCAL_JUDGE_API_KEY": KEY}, "local-model", True, "json_schema"),
    ],
)
def test_each_provider_against_loopback(tmp_path: Path, provider: str, key_env: dict[str, str], model: str,
                                        seeded: bool, response_format: str | None) -> None:
    with OpenAIServer(api_key=KEY, judge=Judge(score=0.9)) as server:
        settings = Settings(judge_provider=provider, judge_base_url=server.base_url + "/v1", output_dir=str(tmp_path))
        result = judge_once(settings, key_env)
        sent = server.chat_requests()[0]
        server.assert_secret_not_sent(KEY)
    assert result.value == 0.9
    assert sent["model"] == model and result.details["model"] == model
    assert ("seed" in sent) is seeded
    assert (sent.get("response_format") or {}).get("type") == response_format


def test_ollama_uses_its_base_url_variable_and_needs_no_key(tmp_path: Path) -> None:
    with OpenAIServer(api_key=NO_KEY, judge=Judge(score=0.4)) as server:
        settings = Settings(judge_provider="ollama", output_dir=str(tmp_path))
        result = judge_once(settings, {"OLLAMA_BASE_URL": server.base_url})
        sent = server.chat_requests()[0]
    assert result.value == 0.4
    assert sent["model"] == "qwen2.5:14b-instruct"


def test_explicit_model_and_base_url_win() -> None:
    config = resolve_provider("openai", model="gpt-4.1-mini", base_url="http://127.0.0.1:1/v1/",
                              env={"OPENAI_API_KEY": KEY})
    assert (config.model, config.base_url, config.key_variable) == ("gpt-4.1-mini", "http://127.0.0.1:1/v1", "OPENAI_API_KEY")
    assert KEY not in json.dumps(config.describe())


def test_defaults_per_provider() -> None:
    assert {name: spec.default_model for name, spec in PROVIDERS.items()} == {
        "openai": "gpt-4o-mini", "gemini": "gemini-2.0-flash", "ollama": "qwen2.5:14b-instruct", "local": "local-model"}
    assert resolve_provider("gemini", model=None, base_url=None, env={"GEMINI_API_KEY": KEY}).base_url == \
        "https://generativelanguage.googleapis.com/v1beta/openai"


@pytest.mark.parametrize(
    ("provider", "env", "message"),
    [
        ("openai", {}, "provider 'openai' needs an API key: set OPENAI_API_KEY"),
        ("gemini", {"GOOGLE_API_KEY": "  "}, "set GOOGLE_API_KEY or GEMINI_API_KEY"),
        ("local", {}, "set LOCAL_JUDGE_API_KEY"),
        ("local", {"LOCAL_JUDGE_API_KEY": KEY}, "provider 'local' needs a base URL: set EVALGATE_JUDGE_BASE_URL"),
        ("ollama", {}, "needs a base URL: set OLLAMA_BASE_URL or EVALGATE_JUDGE_BASE_URL"),
        ("bogus", {}, "unknown provider 'bogus'"),
    ],
)
def test_missing_configuration_is_a_user_error(provider: str, env: dict[str, str], message: str) -> None:
    with pytest.raises(UserError, match=message):
        resolve_provider(provider, model=None, base_url=None, env=env)


def test_provider_none_builds_no_judge() -> None:
    assert build_judge(Settings(), None, {}) is None


def test_max_cost_needs_a_price_for_the_judge_model(tmp_path: Path) -> None:
    settings = Settings(judge_provider="openai", judge_model="brand-new-model", max_cost=1.0, output_dir=str(tmp_path))
    with pytest.raises(UserError, match="judge_model: max_cost is set but no price is known for model 'brand-new-model'"):
        build_judge(settings, None, {"OPENAI_API_KEY": KEY})
    priced = settings.model_copy(update={"prices": {"brand-new-model": {"input": 1, "output": 2}}})
    assert build_judge(priced, None, {"OPENAI_API_KEY": KEY}) is not None


def test_missing_key_exits_2_before_any_case_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    dataset = tmp_path / "cases.json"
    dataset.write_text(json.dumps([{"id": "a", "input": "hello", "passing_criteria": "greets"}]))
    with AgentServer({"hello": "hi"}) as agent:
        code = cli_main(["run", "--dataset", str(dataset), "--target", "http", "--target-url",
                         agent.base_url + "/api/agent/chat", "--judge-provider", "openai",
                         "--output-dir", str(tmp_path / "out"), "--progress", "none"])
        requests = len(agent.requests())
    assert code == 2
    assert requests == 0
    assert "judge-provider: provider 'openai' needs an API key: set OPENAI_API_KEY" in capsys.readouterr().err
    assert not (tmp_path / "out" / "results.json").exists()
