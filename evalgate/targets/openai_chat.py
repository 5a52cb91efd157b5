"""The ``openai`` target: a chat model is the system under test.

Messages: an optional system prompt (``target_system_prompt``, a jinja2 template over ``input``, ``id``,
``category``, ``language``, ``context`` and ``case``), then the case input as the user message (a
conversation's turn: every message so far, user and assistant, ending with the turn's user message). The
provider is ``target_provider`` (default: the judge's provider, or ``openai`` when the judge is
``none``) with the same key variables and defaults as the judge; ``target_url`` overrides its base URL
(else ``judge_base_url`` when both use the same provider), ``target_model`` its default model. Calls use
temperature 0, the run's seed where the provider supports one, at most ``TARGET_MAX_TOKENS`` completion
tokens, and go through the run's retry layer and budget. Tokens and cost are recorded on the answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import jinja2

from evalgate.calls.chat import ChatService
from evalgate.calls.costs import check_budget_pricing
from evalgate.calls.executor import CallFailed
from evalgate.calls.providers import ProviderConfig, resolve_provider
from evalgate.calls.runtime import Runtime
from evalgate.model import Answer
from evalgate.safety.redact import redact
from evalgate.targets.http import case_context, compile_template
from evalgate.traces.context import attempt_headers

if TYPE_CHECKING:
    from evalgate.config.settings import Settings
    from evalgate.model import Case
    from evalgate.targets.base import TargetCall

TARGET_MAX_TOKENS = 2048
SYSTEM_VARIABLES = frozenset({"input", "id", "category", "language", "context", "case"})


def target_provider_config(settings: Settings, env: Mapping[str, str]) -> ProviderConfig:
    """The provider the model target talks to (see the module docstring for the defaults); its key from ``env``."""
    chosen = getattr(settings, "target_provider", None)
    name = chosen or (settings.judge_provider if settings.judge_provider != "none" else "openai")
    base_url = settings.credentialed_url("target_url") or (
        settings.credentialed_url("judge_base_url") if name == settings.judge_provider else None)
    return resolve_provider(name, model=settings.target_model, base_url=base_url, env=env,
                            setting="target_provider", base_url_setting="EVALGATE_TARGET_URL")


class OpenAIChatTarget:
    kind = "openai"
    calls_bounded = True
    """Whether the run's bound on calls in flight covers this target (every model call goes through the run's Executor)."""

    def __init__(self, service: ChatService, *, system_prompt: str | None = None, seed: int | None = None,
                 eval_context: Mapping[str, Any] | None = None) -> None:
        self.service = service
        self.seed = seed
        self.eval_context = dict(eval_context or {})
        self.system_template = (compile_template(system_prompt, SYSTEM_VARIABLES, "target_system_prompt")
                                if system_prompt else None)

    @classmethod
    def from_settings(cls, settings: Settings, runtime: Runtime, env: Mapping[str, str]
                      ) -> OpenAIChatTarget:
        provider = target_provider_config(settings, env)
        service = ChatService(provider, runtime, role="target")
        check_budget_pricing(settings.max_cost, provider, service.price, "target_model")
        return cls(service, system_prompt=settings.target_system_prompt, seed=settings.judge_seed,
                   eval_context=settings.eval_context)

    def messages(self, case: Case, call: TargetCall | None = None) -> list[dict[str, str]]:
        """The system prompt (if any), then the case input, or a conversation turn's whole history."""
        messages: list[dict[str, str]] = []
        if self.system_template is not None:
            system = self.system_template.render(
                input=case.input or "", id=case.id, category=case.category, language=case.language,
                context=case_context(case, self.eval_context), case=case.model_dump(mode="json", exclude_none=True),
            )
            messages.append({"role": "system", "content": system})
        if call is not None and call.messages is not None:
            messages.extend({"role": m["role"], "content": m["content"]} for m in call.messages)
        else:
            messages.append({"role": "user", "content": case.input or ""})
        return messages

    def params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"temperature": 0.0}
        if self.seed is not None and self.service.provider.spec.supports_seed:
            params["seed"] = self.seed
        return params

    async def answer(self, case: Case, call: TargetCall | None = None) -> Answer:
        try:
            messages = self.messages(case, call)
        except jinja2.TemplateError as exc:
            return Answer(error=f"target_system_prompt: {exc}")
        try:
            reply = await self.service.complete(messages, self.params(), max_tokens=TARGET_MAX_TOKENS,
                                                what=f"model {self.service.provider.name}/{self.service.model}",
                                                headers=attempt_headers())
        except CallFailed as exc:
            return Answer(error=redact(str(exc)))
        return Answer(output=redact(reply.text), prompt_tokens=reply.usage.prompt_tokens,
                      completion_tokens=reply.usage.completion_tokens, num_tokens=reply.usage.total,
                      cost_usd=reply.cost_usd, latency_ms=reply.latency_ms)

    async def aclose(self) -> None:
        await self.service.aclose()

    def describe(self) -> dict[str, object]:
        return {"kind": self.kind, **self.service.provider.describe(), "system_prompt": self.system_template is not None}
