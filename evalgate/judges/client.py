"""The judge, built on the run's chat-completions service (``evalgate.calls.chat.ChatService``).

``JudgeClient.score(metric, case, answer, repeat=...)`` renders the metric's template,
serves it from the cache or calls the judge ``judge_samples`` times, parses each reply (one repair
retry) and returns the mean value with details; an unusable reply or a failed call raises
``MetricUnavailable`` with the reason (and the raw reply, when there was one).
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evalgate.calls.chat import ChatReply, ChatService
from evalgate.calls.costs import Usage
from evalgate.calls.executor import CallFailed
from evalgate.judges.parse import VerdictError, kept_raw, parse_verdict, schema_of
from evalgate.model import MetricUnavailable
from evalgate.safety.redact import redact, redact_mapping
from evalgate.store.judge_cache import CachedReply, CacheKey, JudgeCache

if TYPE_CHECKING:
    from evalgate.judges.prompts import JudgeTemplate, RenderedPrompt, Values
    from evalgate.metrics.criteria import CriteriaDefinition
    from evalgate.model import Answer, Case
JUDGE_MAX_TOKENS = 1024
LIST_MAX_TOKENS = 2048
"""Completion cap for judges that return claim/chunk/statement lists."""
MEMO_SIZE = 512
"""Verdicts remembered per judge (a repeated prompt within a run is answered from memory)."""


# --- the judge -------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Sample:
    values: Values
    reasoning: str
    extras: dict[str, Any]
    cached: bool
    repaired: bool
    usage: Usage | None = None
    cost_usd: float | None = None


@dataclass(slots=True)
class JudgeVerdict:
    """Values averaged over the samples of one template call, and what explains them."""

    values: Values
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class JudgeScore:
    value: float
    details: dict[str, Any]


class JudgeClient:
    """Scores judged metrics with one provider and model."""

    def __init__(self, service: ChatService, cache: JudgeCache, *, temperature: float = 0.0, seed: int | None = None,
                 samples: int = 1, temperatures: Mapping[str, float] | None = None) -> None:
        self.service = service
        self.cache = cache
        self.temperature = temperature
        self.temperatures = dict(temperatures or {})
        """Template name → temperature for that template's calls (``judges.factory.template_temperatures``)."""
        self.seed = seed
        self.samples = samples
        self.templates_used: dict[str, str] = {}
        self._memo: OrderedDict[tuple[str, str, int], JudgeVerdict | MetricUnavailable] = OrderedDict()

    @property
    def provider(self) -> str:
        return self.service.provider.name

    @property
    def model(self) -> str:
        return self.service.model

    async def score(self, metric: str, case: Case, answer: Answer, *, repeat: int = 0,
                    rubric: str | None = None) -> JudgeScore:
        """The value of judged ``metric`` for this answer (mean over samples) with details; ``rubric``
        replaces the template's fixed rubric where the template allows it (response_quality)."""
        from evalgate.judges.prompts import template_for_metric  # jinja2: loaded by the first judged case

        template = template_for_metric(metric)
        verdict = await self.verdict(template, case, answer, repeat=repeat, rubric=rubric)
        return JudgeScore(verdict.values[metric], dict(verdict.details))

    async def criteria_score(self, definition: CriteriaDefinition, case: Case, answer: Answer, *,
                             repeat: int = 0) -> JudgeScore:
        """The value of a custom judged metric (``evalgate.judges.custom``) for this answer, with details."""
        from evalgate.judges.custom import criteria_judging

        return await criteria_judging(self).score(definition, case, answer, repeat=repeat)

    async def once(self, prompt: RenderedPrompt) -> Sample:
        """One reply to ``prompt`` that is not a per-case verdict (the steps of a custom metric): from the
        cache, else one call with the usual repair retry; ``MetricUnavailable`` when there is none."""
        self.templates_used[prompt.template.name] = prompt.version
        request = self.request(prompt.template, 0)
        return await self._sample(prompt, 0, 0, request, prompt.prompt_hash(request))

    def cached(self, prompt: RenderedPrompt) -> Sample | None:
        """The cached reply to ``prompt`` (as ``once`` would ask it), or None; never calls the judge."""
        request = self.request(prompt.template, 0)
        key = CacheKey(self.provider, self.service.provider.base_url, self.model, prompt.version,
                       prompt.prompt_hash(request), 0, 0)
        hit = self.cache.get(key)
        if hit is None:
            return None
        try:
            return _read(prompt, hit.reply, cached=True, repaired=False)
        except VerdictError:
            return None

    async def verdict(self, template: JudgeTemplate, case: Case, answer: Answer, *, repeat: int = 0,
                      rubric: str | None = None) -> JudgeVerdict:
        """``rubric``: a configured rubric shown in place of the template's (response_quality)."""
        if answer.output is None:
            raise MetricUnavailable("the target returned no output text to judge")
        if rubric:  # a built-in template with the suite's rubric in place of its own
            from evalgate.judges.prompts import render

            prompt = render(template, case, answer, rubric)
        else:
            prompt = template.render(case, answer)
        self.templates_used[template.name] = prompt.version
        first = self.request(template, 0)
        first_hash = prompt.prompt_hash(first)  # also the first sample's cache key: hashed once
        key = (template.name, first_hash, repeat)
        if key in self._memo:
            return _replay(self._memo[key])
        try:
            result: JudgeVerdict | MetricUnavailable = await self._verdict(prompt, repeat, first, first_hash)
        except MetricUnavailable as exc:
            result = exc
        self._memo[key] = result
        while len(self._memo) > MEMO_SIZE:
            self._memo.popitem(last=False)
        return _replay(result)

    async def _verdict(self, prompt: RenderedPrompt, repeat: int, first: dict[str, Any], first_hash: str
                       ) -> JudgeVerdict:
        samples = []
        for index in range(self.samples):
            request = first if index == 0 else self.request(prompt.template, index)
            samples.append(await self._sample(prompt, repeat, index, request,
                                              first_hash if index == 0 else prompt.prompt_hash(request)))
        names = samples[0].values.keys()
        values = {name: sum(s.values[name] for s in samples) / len(samples) for name in names}
        return JudgeVerdict(values, self._details(prompt, samples, values))

    def params(self, template: JudgeTemplate, sample: int) -> dict[str, Any]:
        """Request parameters: temperature, seed (+ sample index) where supported, response format."""
        spec = self.service.provider.spec
        params: dict[str, Any] = {"temperature": self.temperature_for(template.name)}
        if self.seed is not None and spec.supports_seed:
            params["seed"] = self.seed + sample
        if spec.response_format == "json_schema":
            params["response_format"] = {"type": "json_schema", "json_schema": {
                "name": f"{template.name}_verdict", "schema": schema_of(template.verdict), "strict": False}}
        elif spec.response_format == "json_object":
            params["response_format"] = {"type": "json_object"}
        return params

    def temperature_for(self, template: str) -> float:
        """The temperature of ``template``'s calls: its own when configured, else the judge's."""
        return self.temperatures.get(template, self.temperature)

    def request(self, template: JudgeTemplate, sample: int) -> dict[str, Any]:
        """What, besides the messages, decides sample ``sample``'s reply: ``params`` + ``max_tokens``."""
        return {**self.params(template, sample), "max_tokens": max_tokens_for(template)}

    async def _sample(self, prompt: RenderedPrompt, repeat: int, index: int, request: dict[str, Any],
                      prompt_hash: str) -> Sample:
        """Sample ``index``: ``request`` is ``self.request(template, index)``, ``prompt_hash`` the hash of the
        messages with it (the cache key)."""
        key = CacheKey(self.provider, self.service.provider.base_url, self.model, prompt.version,
                       prompt_hash, repeat, index)
        cached = self.cache.get(key)
        if cached is not None:
            try:
                sample = _read(prompt, cached.reply, cached=True, repaired=False)
            except VerdictError:
                pass  # a reply stored by an older parser: ask again
            else:
                self.service.runtime.ledger.record_cached("judge")
                return sample
        params = {name: value for name, value in request.items() if name != "max_tokens"}
        sample, final = await self._call(prompt, params, request["max_tokens"])
        self.cache.put(key, CachedReply(redact(final), sample.usage.prompt_tokens if sample.usage else 0,
                                        sample.usage.completion_tokens if sample.usage else 0))
        return sample

    async def _call(self, prompt: RenderedPrompt, params: dict[str, Any], max_tokens: int) -> tuple[Sample, str]:
        messages = list(prompt.messages)
        what = f"judge {self.provider}/{self.model} ({prompt.template.name})"
        first = await self._complete(messages, params, max_tokens, what)
        try:
            sample = _read(prompt, first.text, cached=False, repaired=False)
            return _with_cost(sample, [first]), first.text
        except VerdictError as exc:
            problem = exc.problem
        from evalgate.judges.prompts import repair_message

        messages += [{"role": "assistant", "content": first.text}, {"role": "user", "content": repair_message(problem)}]
        second = await self._complete(messages, params, max_tokens, what + " repair")
        try:
            sample = _read(prompt, second.text, cached=False, repaired=True)
        except VerdictError as exc:
            raise MetricUnavailable(
                f"the judge's reply was not a valid verdict after one repair retry: {exc.problem}",
                {"raw_reply": kept_raw(redact(second.text)), "first_reply": kept_raw(redact(first.text)),
                 "first_problem": problem, **self._identity(prompt)},
            ) from None
        return _with_cost(sample, [first, second]), second.text

    async def _complete(self, messages: list[Mapping[str, Any]], params: dict[str, Any], max_tokens: int,
                        what: str) -> ChatReply:
        try:
            return await self.service.complete(messages, params, max_tokens=max_tokens, what=what)
        except CallFailed as exc:
            raise MetricUnavailable(redact(f"judge call failed: {exc}"), {"attempts": exc.attempts,
                                                                         "status": exc.status}) from None

    def _identity(self, prompt: RenderedPrompt) -> dict[str, Any]:
        return {"method": "judge", "provider": self.provider, "model": self.model,
                "template_version": prompt.version, "temperature": self.temperature_for(prompt.template.name),
                "seed": self.seed if self.service.provider.spec.supports_seed else None}

    def _details(self, prompt: RenderedPrompt, samples: list[Sample], values: Values) -> dict[str, Any]:
        details = self._identity(prompt)
        details.update({
            "scores": {k: round(v, 6) for k, v in values.items()},
            "reasoning": kept_raw(redact(samples[0].reasoning)),
            "cached": all(s.cached for s in samples),
            "repaired": any(s.repaired for s in samples),
            "prompt_tokens": sum(s.usage.prompt_tokens for s in samples if s.usage),
            "completion_tokens": sum(s.usage.completion_tokens for s in samples if s.usage),
            "cost_usd": round(sum(s.cost_usd or 0.0 for s in samples), 8),
            **redact_mapping(samples[0].extras),
        })
        if len(samples) > 1:
            details["samples"] = [{k: round(v, 6) for k, v in s.values.items()} for s in samples]
        return details

    def reuse(self) -> dict[str, Any] | None:
        """What the base branch's restored cache saved (None when none was restored): verdicts reused of all
        looked up, the tokens those verdicts cost when they were judged and their price now (None: no price)."""
        cache = self.cache
        if cache.base_label is None:
            return None
        price = self.service.price
        saved = price.cost(cache.base_prompt_tokens, cache.base_completion_tokens) if price is not None else None
        return {"source": cache.base_label, "reused": cache.base_hits, "verdicts": cache.lookups,
                "base_rows": cache.base_rows, "prompt_tokens_saved": cache.base_prompt_tokens,
                "completion_tokens_saved": cache.base_completion_tokens,
                "saved_usd": None if saved is None else round(saved, 6), "error": cache.base_error}

    def metadata(self) -> dict[str, Any]:
        return {"provider": self.provider, "model": self.model, "base_url": self.service.provider.base_url,
                "client": self.service.runtime.chat_client,
                "temperature": self.temperature, "temperatures": dict(sorted(self.temperatures.items())),
                "seed": self.seed, "samples": self.samples,
                "templates": dict(sorted(self.templates_used.items())), "cache": self.cache.metadata()}

    async def aclose(self) -> None:
        self.cache.close()
        await self.service.aclose()


@functools.cache
def max_tokens_for(template: JudgeTemplate) -> int:
    """The completion cap for ``template``: larger when its verdict holds lists (claims, chunks)."""
    list_valued = any(
        getattr(field_info.annotation, "__origin__", None) is list for field_info in template.verdict.model_fields.values()
    )
    return LIST_MAX_TOKENS if list_valued else JUDGE_MAX_TOKENS


def _read(prompt: RenderedPrompt, text: str, *, cached: bool, repaired: bool) -> Sample:
    from evalgate.judges.prompts import verdict_details

    verdict = parse_verdict(text, prompt.template.verdict)
    values = prompt.template.values(verdict, prompt.inputs)
    return Sample(values, str(getattr(verdict, "reasoning", "")), verdict_details(verdict), cached, repaired)


def _with_cost(sample: Sample, replies: list[ChatReply]) -> Sample:
    sample.usage = Usage(sum(r.usage.prompt_tokens for r in replies), sum(r.usage.completion_tokens for r in replies),
                         replies[-1].usage.source)
    costs = [r.cost_usd for r in replies]
    sample.cost_usd = None if any(c is None for c in costs) else sum(c for c in costs if c is not None)
    return sample


def _replay(result: JudgeVerdict | MetricUnavailable) -> JudgeVerdict:
    if isinstance(result, MetricUnavailable):
        raise MetricUnavailable(str(result), dict(result.details))
    return result
