"""Build the configured judge client (None for provider ``none``).

Everything that can be wrong with the judge configuration (unknown provider, missing key or base URL,
a ``max_cost`` with no known price for the model) is a ``UserError`` here, before any case runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from evalgate.calls.costs import check_budget_pricing
from evalgate.calls.executor import Runtime
from evalgate.calls.providers import resolve_provider
from evalgate.store.judge_cache import JudgeCache, cache_path

if TYPE_CHECKING:
    from evalgate.config.settings import Settings
    from evalgate.judges.client import JudgeClient


def build_judge(settings: Settings, runtime: Runtime | None, env: Mapping[str, str]) -> JudgeClient | None:
    """The judge client for ``settings`` (its key from ``env``, as given by the caller), or None."""
    if settings.judge_provider == "none":
        return None  # and the openai package (slow to import) is never loaded
    from evalgate.judges.client import ChatService, JudgeClient
    provider = resolve_provider(settings.judge_provider, model=settings.judge_model,
                                base_url=settings.judge_base_url, env=env)
    runtime = runtime or Runtime.from_settings(settings)
    service = ChatService(provider, runtime, role="judge")
    check_budget_pricing(settings.max_cost, provider, service.price, "judge_model")
    cache = JudgeCache(cache_path(settings.db_path), read=not settings.no_cache)
    return JudgeClient(service, cache, temperature=settings.judge_temperature, seed=settings.judge_seed,
                       samples=settings.judge_samples)
