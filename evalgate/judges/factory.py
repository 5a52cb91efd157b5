"""Build the configured judge client (None for provider ``none``).

Everything that can be wrong with the judge configuration (unknown provider, missing key or base URL,
a ``max_cost`` with no known price for the model) is a ``UserError`` here, before any case runs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from evalgate.calls.executor import Runtime
from evalgate.calls.providers import ProviderConfig, resolve_provider
from evalgate.errors import UserError
from evalgate.judges.cache import JudgeCache, cache_path

if TYPE_CHECKING:
    from evalgate.config.settings import Settings
    from evalgate.judges.client import ChatService, JudgeClient


def build_judge(settings: Settings, runtime: Runtime | None = None, env: Mapping[str, str] | None = None
                ) -> JudgeClient | None:
    if settings.judge_provider == "none":
        return None  # and the openai package (≈2 s to import) is never loaded
    from evalgate.judges.client import ChatService, JudgeClient
    env = os.environ if env is None else env
    provider = resolve_provider(settings.judge_provider, model=settings.judge_model,
                                base_url=settings.judge_base_url, env=env)
    runtime = runtime or Runtime.from_settings(settings)
    service = ChatService(provider, runtime, role="judge")
    check_budget_pricing(settings, provider, service, "judge_model")
    cache = JudgeCache(cache_path(settings.db_path), read=not settings.no_cache)
    return JudgeClient(service, cache, temperature=settings.judge_temperature, seed=settings.judge_seed,
                       samples=settings.judge_samples)


def check_budget_pricing(settings: Settings, provider: ProviderConfig, service: ChatService, setting: str) -> None:
    """With ``max_cost`` set, every paid model must have a price, or the budget could not be kept."""
    if settings.max_cost is not None and service.price is None:
        raise UserError(
            f"max_cost is set but no price is known for model {provider.model!r} ({provider.name}); "
            "add it to prices as {input: USD per 1M tokens, output: USD per 1M tokens}",
            where=setting,
        )
