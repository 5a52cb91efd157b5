"""Build the configured judge client (None for provider ``none``).

Everything that can be wrong with the judge configuration (unknown provider, missing key or base URL,
a ``max_cost`` with no known price for the model) is a ``UserError`` here, before any case runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from evalgate.calls.costs import check_budget_pricing
from evalgate.calls.providers import resolve_provider
from evalgate.calls.runtime import Runtime
from evalgate.config.suite import validate_metric_names
from evalgate.dialect import judge_temperatures
from evalgate.errors import UserError
from evalgate.judges.batch import BatchJudge, batch_refusal
from evalgate.judges.client import ChatService, JudgeClient
from evalgate.judges.prompts import METRIC_TEMPLATES
from evalgate.judges.simulator import UserSimulator
from evalgate.store.judge_cache import BaseCache, JudgeCache, cache_path
from evalgate.store.shared_cache import LayeredJudgeCache, shared_cache_path

if TYPE_CHECKING:
    from evalgate.config.sections import JudgeSettings
    from evalgate.config.settings import Settings
    from evalgate.judges.client import JudgeClient
    from evalgate.judges.simulator import UserSimulator


def build_judge(settings: Settings, runtime: Runtime | None, env: Mapping[str, str],
                base_cache: BaseCache | None = None) -> JudgeClient | None:
    """The judge client for ``settings`` (its key from ``env``, as given by the caller), or None;
    ``base_cache`` is the base branch's restored cache (``store.judge_cache``), consulted after the run's
    own (never with ``no_cache``)."""
    if settings.judge_provider == "none":
        return None  # and the openai package (slow to import) is never loaded
    provider = resolve_provider(settings.judge_provider, model=settings.judge_model,
                                base_url=settings.credentialed_url("judge_base_url"), env=env,
                                api_key=settings.judge_api_key)
    runtime = runtime or Runtime.from_settings(settings)
    service = ChatService(provider, runtime, role="judge")
    check_budget_pricing(settings.max_cost, provider, service.price, "judge_model")
    restored = base_cache if base_cache is not None and not settings.no_cache else None
    cache = JudgeCache(cache_path(settings.db_path), read=not settings.no_cache,
                       base=restored.path if restored else None, base_label=restored.label if restored else None)
    shared, _ = shared_cache_path(settings.judge_shared_cache, env)
    if shared is not None and shared.resolve() != cache_path(settings.db_path).resolve():
        cache = LayeredJudgeCache(cache, JudgeCache(shared, read=not settings.no_cache),
                                  max_bytes=int(settings.judge_shared_cache_max_mb * 1024 * 1024))
    batch, notice = None, None
    if settings.judge_mode == "batch":
        notice = batch_refusal(settings.judge_mode, provider.name, env, settings.max_cost)
        if notice is None:
            batch = BatchJudge(service, settings.output_path, deadline_s=settings.judge_batch_deadline_seconds,
                               poll_s=settings.judge_batch_poll_seconds, quiet_s=settings.judge_batch_quiet_seconds,
                               max_requests=settings.judge_batch_max_requests)
    return JudgeClient(service, cache, temperature=settings.judge_temperature, seed=settings.judge_seed,
                       samples=settings.judge_samples, temperatures=template_temperatures(settings),
                       output=settings.judge_output, batch=batch, batch_notice=notice)


def default_metric_temperatures() -> dict[str, float]:
    """Per-metric judge temperatures that differ from ``judge_temperature`` (0) by default: those the
    dialects' frameworks used (``evalgate.dialect.judge_temperatures``, e.g. ``judge_score`` at 0.1)."""
    return judge_temperatures()


def metric_temperatures(settings: Settings | JudgeSettings) -> dict[str, float]:
    """Judged metric → temperature: ``judge_temperatures`` entries, then ``default_metric_temperatures()``;
    metrics in neither use ``judge_temperature``. Unknown or non-judged metric names are a ``UserError``."""
    validate_metric_names(settings.judge_temperatures, METRIC_TEMPLATES, "judge_temperatures (judged metrics only)")
    return {**default_metric_temperatures(), **settings.judge_temperatures}


def template_temperatures(settings: Settings) -> dict[str, float]:
    """Template name → temperature. Metrics scored by one call (answer_quality, factual_correctness and
    completeness share one template) must agree, else ``UserError``."""
    temperatures = metric_temperatures(settings)
    chosen: dict[str, tuple[float, str]] = {}
    for metric, temperature in sorted(temperatures.items()):
        template = METRIC_TEMPLATES[metric]
        if template in chosen and chosen[template][0] != temperature:
            value, other_metric = chosen[template]
            raise UserError(f"{metric} and {other_metric} are scored by one judge call and need the same "
                            f"temperature (got {temperature:g} and {value:g})", where="judge_temperatures")
        chosen[template] = (temperature, metric)
    for template in chosen:
        members = [m for m, t in METRIC_TEMPLATES.items() if t == template]
        missing = [m for m in members if m not in temperatures]
        if len(members) > 1 and missing:
            raise UserError(f"{', '.join(members)} are scored by one judge call: set the same temperature for all "
                            f"of them (missing {', '.join(missing)})", where="judge_temperatures")
    return {template: value for template, (value, _) in chosen.items()}


def build_simulator(settings: Settings, runtime: Runtime, env: Mapping[str, str], judge: JudgeClient | None
                    ) -> UserSimulator | None:
    """The model that plays simulated users (``judges.simulator``): the judge's, or ``simulator_model`` on the
    judge's provider; None without a judge provider (simulated users then error their cases)."""
    if judge is None:
        return None

    if not settings.simulator_model or settings.simulator_model == judge.model:
        return UserSimulator(judge.service, temperature=settings.judge_temperature, seed=settings.judge_seed)
    provider = resolve_provider(settings.judge_provider, model=settings.simulator_model,
                                base_url=settings.credentialed_url("judge_base_url"), env=env,
                                api_key=settings.judge_api_key, setting="simulator_model")
    service = ChatService(provider, runtime, role="judge")
    check_budget_pricing(settings.max_cost, provider, service.price, "simulator_model")
    return UserSimulator(service, temperature=settings.judge_temperature, seed=settings.judge_seed,
                         owns_service=True)
