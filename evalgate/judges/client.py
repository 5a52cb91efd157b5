"""The judge, built on the run's chat-completions service (``evalgate.calls.chat.ChatService``).

``JudgeClient.score(metric, case, answer, repeat=...)`` renders the metric's template, serves it from the
cache or calls the judge ``judge_samples`` times, parses each reply and returns the mean value with details;
an unusable reply or a failed call raises ``MetricUnavailable`` with the reason, the raw reply when there was
one, and ``details.judge_failure``: ``unreachable`` (connection, timeout, HTTP 5xx/429 after the retries),
``refused`` (another HTTP error, e.g. 400/401/404), ``unreadable`` (no valid verdict in the reply) or
``budget`` (``max_cost`` left no room for the call).

Output: every call asks for the verdict's JSON schema in the run's output mode (``evalgate.judges.output``:
``json_schema`` → ``json_object`` → ``prompt``, moved down once per run when the server refuses one, and
started where an earlier run with the same cache learnt the endpoint's mode);
``details.output_mode`` says which mode produced a verdict. Prompt-only replies may state a lone score in
words (``parse.parse_verdict(words=True)``).

Repair retry: in prompt mode an unreadable reply is answered once with the problem quoted and the verdict
asked for again. It is dropped where it does not rescue verdicts: never in the structured modes (against
SmolLM2-135M it rescued 0 of 5 unreadable structured replies: off the scale or cut at ``max_tokens``, and at
temperature 0 under the same grammar asking again repeats that), and in prompt mode it stops for the rest of
the run once ``REPAIR_TRIAL`` repairs in a row rescued none (it rescued 0 of 7 prompt-only replies there). ``metadata.judge.repairs`` counts attempts and rescues.

Batch (``judge_mode: batch``, ``judges.batch``): a cache miss is answered by the run's batch first and sent
directly only when the batch cannot answer it. One call for several metrics (``judge_combine``,
``judges.combined``): ``score(..., together=...)`` renders one prompt for the metrics sharing their inputs,
and the second metric's verdict comes from the memo.

Samples: with ``judge_samples`` K, the verdict is the mean over the samples that were read when they are
more than half of K (the failed ones are listed in ``details.sample_failures``); otherwise the verdict is
unavailable with the first failure's reason. Sampling stops as soon as a majority can no longer be reached.
"""

from __future__ import annotations

import asyncio
import functools
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evalgate.calls.chat import ChatReply, ChatService
from evalgate.calls.costs import BudgetExceeded, Usage
from evalgate.calls.executor import CallFailed, Failure
from evalgate.judges.batch import BatchFallback, BatchJudge, custom_id
from evalgate.judges.combined import combined_template
from evalgate.judges.custom import criteria_judging
from evalgate.judges.health import HealthCheck
from evalgate.judges.output import (
    OutputMode,
    OutputNegotiator,
    clearly_refused,
    modes_for,
    response_format,
    schema_for,
)
from evalgate.judges.parse import VerdictError, kept_raw, parse_verdict, schema_of, verdict_in_words
from evalgate.judges.prompts import (
    render,
    repair_message,
    template_for_metric,
    verdict_details,
)
from evalgate.judges.samples import JudgeScore, JudgeVerdict, Sample
from evalgate.model import MetricUnavailable
from evalgate.safety.redact import redact, redact_mapping
from evalgate.store.judge_cache import CachedReply, CacheKey, JudgeCache

if TYPE_CHECKING:
    from evalgate.judges.prompts import JudgeTemplate, RenderedPrompt, Values
    from evalgate.metrics.criteria import CriteriaDefinition
    from evalgate.model import Answer, Case
JUDGE_MAX_TOKENS = 256
"""Completion cap for a verdict of scores: the reasoning (at most 3 sentences, ≈ 100 tokens; 300 characters
where a grammar enforces it, ``output.REASONING_MAX_CHARS``) plus the JSON around it and the scores
(≈ 10 tokens each) with room to spare. A cap is what the provider reserves against the token budget."""
LIST_MAX_TOKENS = 2048
"""Completion cap for judges that return claim/chunk/statement lists (one entry per claim of the answer: a
list cut at the cap is an unreadable verdict, so it stays generous)."""
MEMO_SIZE = 512
"""Verdicts remembered per judge (a repeated prompt within a run is answered from memory)."""
REPAIR_TRIAL = 8
"""Prompt mode: after this many repair retries in a row that rescued nothing, no more are made."""


def failure_cause(exc: CallFailed) -> str:
    """``unreachable`` for failures the retry layer retries (no status: connection or timeout; 408/425/429/5xx),
    else ``refused``."""
    status = exc.status
    if status is None or status in (408, 425, 429) or status >= 500:
        return "unreachable"
    return "refused"


@dataclass(slots=True)
class RepairStats:
    """Repair retries of one run: made, rescued (a valid verdict on the repair), and whether still on."""

    attempted: int = 0
    """Repair retries answered: a prompt-mode reply with no valid verdict sent back once, its problem quoted
    (``repair_message``), asking for the verdict again."""
    rescued: int = 0
    """Of ``attempted``: repairs whose reply gave a valid verdict."""
    unrescued_streak: int = 0
    """Repairs in a row that rescued nothing; at ``REPAIR_TRIAL`` the run stops repairing (``stopped``)."""
    pending: int = 0
    """Repairs sent whose outcome is not known yet (counted against the trial, so concurrent verdicts do not
    all repair at once)."""

    def start(self, mode: OutputMode) -> bool:
        """Whether to repair now (and if so, count it as pending until ``record``): in prompt mode, until
        ``REPAIR_TRIAL`` repairs in a row rescued nothing; before the run's first rescue, repairs still in
        flight count towards that trial too."""
        if mode != "prompt" or self.unrescued_streak >= REPAIR_TRIAL:
            return False
        if not self.rescued and self.unrescued_streak + self.pending >= REPAIR_TRIAL:
            return False
        self.pending += 1
        return True

    def record(self, rescued: bool) -> None:
        self.pending = max(0, self.pending - 1)
        self.attempted += 1
        if rescued:
            self.rescued += 1
            self.unrescued_streak = 0
        else:
            self.unrescued_streak += 1

    def as_dict(self) -> dict[str, Any]:
        return {"attempted": self.attempted, "rescued": self.rescued,
                "stopped": self.unrescued_streak >= REPAIR_TRIAL}


# --- the judge -------------------------------------------------------------------------------------------


class JudgeClient:
    """Scores judged metrics with one provider and model."""

    def __init__(self, service: ChatService, cache: JudgeCache, *, temperature: float = 0.0, seed: int | None = None,
                 samples: int = 1, temperatures: Mapping[str, float] | None = None, output: str = "auto",
                 batch: BatchJudge | None = None, batch_notice: str | None = None) -> None:
        self.service = service
        self.batch = batch
        """``judge_mode: batch``: cache misses are answered through the provider's batch interface first."""
        self.batch_notice = batch_notice
        self.cache = cache
        self.temperature = temperature
        self.temperatures = dict(temperatures or {})
        """Template name → temperature for that template's calls (``judges.factory.template_temperatures``)."""
        self.seed = seed
        self.samples = samples
        remembered = cache.output_mode(service.provider.name, service.provider.base_url, service.model) \
            if output == "auto" else None
        self.output = OutputNegotiator(modes_for(service.provider.name, output), forced=output != "auto",
                                       start=remembered)
        self._learnt_saved = False
        self.repairs = RepairStats()
        self.templates_used: dict[str, str] = {}
        self.health = HealthCheck()
        self._memo: OrderedDict[tuple[str, str, int], JudgeVerdict | MetricUnavailable] = OrderedDict()

    @property
    def provider(self) -> str:
        return self.service.provider.name

    @property
    def model(self) -> str:
        return self.service.model

    @property
    def base_url(self) -> str:
        """Where judge calls go (credentials removed: ``calls.providers.ProviderConfig``)."""
        return self.service.provider.base_url

    async def score(self, metric: str, case: Case, answer: Answer, *, repeat: int = 0,
                    rubric: str | None = None, together: tuple[str, ...] = ()) -> JudgeScore:
        """The value of judged ``metric`` for this answer (mean over samples) with details; ``rubric``
        replaces the template's fixed rubric where the template allows it (response_quality); ``together``:
        the metrics (``metric`` among them) one call scores for this case (``judges.combined``)."""
        template: JudgeTemplate = combined_template(together) if len(together) > 1 else template_for_metric(metric)
        verdict = await self.verdict(template, case, answer, repeat=repeat, rubric=rubric)
        return JudgeScore(verdict.values[metric], dict(verdict.details))

    async def criteria_score(self, definition: CriteriaDefinition, case: Case, answer: Answer, *,
                             repeat: int = 0) -> JudgeScore:
        """The value of a custom judged metric (``evalgate.judges.custom``) for this answer, with details."""
        return await criteria_judging(self).score(definition, case, answer, repeat=repeat)

    async def once(self, prompt: RenderedPrompt) -> Sample:
        """One reply to ``prompt`` that is not a per-case verdict (the steps of a custom metric): from the
        cache, else one call in the run's output mode (with a repair retry where that mode has one);
        ``MetricUnavailable`` when there is none."""
        self.templates_used[prompt.template.name] = prompt.version
        return await self._sample(prompt, 0, 0, self.output.mode, None)

    def cached(self, prompt: RenderedPrompt) -> Sample | None:
        """The cached reply to ``prompt`` (as ``once`` would ask it now), or None; never calls the judge."""
        mode = self.output.mode
        hit = self.cache.get(self._key(prompt, prompt.prompt_hash(self.request(prompt.template, 0, mode)), 0, 0))
        if hit is None:
            return None
        try:
            return _read(prompt, hit.reply, mode, cached=True, repaired=False)
        except VerdictError:
            return None

    async def verdict(self, template: JudgeTemplate, case: Case, answer: Answer, *, repeat: int = 0,
                      rubric: str | None = None) -> JudgeVerdict:
        """``rubric``: a configured rubric shown in place of the template's (response_quality)."""
        if answer.output is None:
            raise MetricUnavailable("the target returned no output text to judge")
        # a built-in template with the suite's rubric in place of its own
        prompt = render(template, case, answer, rubric) if rubric else template.render(case, answer)
        self.templates_used[template.name] = prompt.version
        mode = self.output.mode
        first = self.request(template, 0, mode)
        first_hash = prompt.prompt_hash(first)  # also the first sample's cache key: hashed once
        key = (template.name, first_hash, repeat)
        if key in self._memo:
            return _replay(self._memo[key])
        try:
            result: JudgeVerdict | MetricUnavailable = await self._verdict(prompt, repeat, mode, first_hash)
        except MetricUnavailable as exc:
            result = exc
        self._memo[key] = result
        while len(self._memo) > MEMO_SIZE:
            self._memo.popitem(last=False)
        return _replay(result)

    async def _verdict(self, prompt: RenderedPrompt, repeat: int, mode: OutputMode, first_hash: str) -> JudgeVerdict:
        """Samples 0 … K−1; the verdict stands on the samples read when they are more than half of K."""
        samples: list[Sample] = []
        failures: list[MetricUnavailable] = []
        if self.batch is not None and self.samples > 1:  # batch judging: every sample joins the same batch
            outcomes = await asyncio.gather(*(self._sample(prompt, repeat, index, mode, first_hash if index == 0 else None)
                                              for index in range(self.samples)), return_exceptions=True)
            for outcome in outcomes:
                if isinstance(outcome, MetricUnavailable):
                    failures.append(outcome)
                elif isinstance(outcome, BaseException):
                    raise outcome
                else:
                    samples.append(outcome)
        for index in range(self.samples if self.batch is None or self.samples == 1 else 0):
            try:
                samples.append(await self._sample(prompt, repeat, index, mode, first_hash if index == 0 else None))
            except MetricUnavailable as exc:
                failures.append(exc)
                if 2 * (self.samples - len(failures)) <= self.samples:
                    break  # a majority of readable samples is out of reach: spare the remaining calls
        if not samples or 2 * len(samples) <= self.samples:
            first = failures[0]
            if self.samples > 1:
                raise MetricUnavailable(f"{first} ({len(failures)} of {self.samples} samples failed)",
                                        {**first.details, "samples_failed": len(failures)})
            raise first
        unhealthy, flags = self.health.check(prompt, samples)
        if unhealthy is not None:  # a readable verdict that fails a health check (judges.health) is no verdict
            raise MetricUnavailable(unhealthy[1], {**self._identity(prompt, samples[0].mode), "judge_failure": "unhealthy",
                                                   "health": unhealthy[0],
                                                   "reasoning": kept_raw(redact(samples[0].reasoning))})
        names = samples[0].values.keys()
        values = {name: sum(s.values[name] for s in samples) / len(samples) for name in names}
        details = self._details(prompt, samples, values)
        if flags:
            details["health_flags"] = flags
        if failures:
            details["samples_failed"] = len(failures)
            details["sample_failures"] = [str(f) for f in failures]
        return JudgeVerdict(values, details)

    def params(self, template: JudgeTemplate, sample: int, mode: OutputMode | None = None) -> dict[str, Any]:
        """Request parameters: the template's temperature, seed (+ sample index) where supported, the output
        mode's ``response_format`` (none in prompt mode)."""
        params: dict[str, Any] = {"temperature": self.temperature_for(template.name)}
        if self.seed is not None and self.service.provider.spec.supports_seed:
            params["seed"] = self.seed + sample
        shape = response_format(mode or self.output.mode, f"{template.name}_verdict",
                                schema_for(self.provider, schema_of(template.verdict)))
        if shape is not None:
            params["response_format"] = shape
        return params

    def temperature_for(self, template: str) -> float:
        """The temperature of ``template``'s calls: its own when configured, else the judge's."""
        return self.temperatures.get(template, self.temperature)

    def request(self, template: JudgeTemplate, sample: int, mode: OutputMode | None = None) -> dict[str, Any]:
        """What, besides the messages, decides sample ``sample``'s reply: ``params`` + ``max_tokens`` + the
        output mode (hashed into the cache key: a reply read in one mode is never served in another)."""
        mode = mode or self.output.mode
        return {**self.params(template, sample, mode), "max_tokens": max_tokens_for(template), "output_mode": mode}

    async def _sample(self, prompt: RenderedPrompt, repeat: int, index: int, mode: OutputMode,
                      prompt_hash: str | None) -> Sample:
        """Sample ``index`` in ``mode`` (the run's mode when the verdict started), from the cache or the judge;
        ``prompt_hash`` is the hash of the messages with ``self.request(template, index, mode)`` when known."""
        template = prompt.template
        if prompt_hash is None:
            prompt_hash = prompt.prompt_hash(self.request(template, index, mode))
        cached = self.cache.get(self._key(prompt, prompt_hash, repeat, index))
        if cached is not None:
            try:
                sample = _read(prompt, cached.reply, mode, cached=True, repaired=False)
            except VerdictError:
                pass  # a reply stored by an older parser: ask again
            else:
                self.service.runtime.ledger.record_cached("judge")
                return sample
        sample, final = await self._call(prompt, index, batch_id=custom_id(prompt_hash, repeat) if self.batch else None)
        if sample.mode != mode:  # the server refused ``mode`` meanwhile: key the reply by the mode that made it
            prompt_hash = prompt.prompt_hash(self.request(template, index, sample.mode))
        self.cache.put(self._key(prompt, prompt_hash, repeat, index),
                       CachedReply(redact(final), sample.usage.prompt_tokens if sample.usage else 0,
                                   sample.usage.completion_tokens if sample.usage else 0))
        return sample

    def _key(self, prompt: RenderedPrompt, prompt_hash: str, repeat: int, index: int) -> CacheKey:
        return CacheKey(self.provider, self.service.provider.base_url, self.model, prompt.version, prompt_hash,
                        repeat, index)

    async def _call(self, prompt: RenderedPrompt, index: int, batch_id: str | None = None) -> tuple[Sample, str]:
        """One verdict from the judge: through the batch when ``batch_id`` is given (sent directly when the
        batch cannot answer it), else one call in the run's output mode, with a repair retry where that mode
        has one."""
        template = prompt.template
        what = f"judge {self.provider}/{self.model} ({template.name})"
        max_tokens = max_tokens_for(template)
        follow_up: list[Mapping[str, str]] = []

        async def send(mode: OutputMode) -> ChatReply:
            messages = [*prompt.messages_for(mode), *follow_up]
            return await self.service.complete(messages, self.params(template, index, mode), max_tokens=max_tokens,
                                               what=what, final=functools.partial(_refused_outright, mode))

        batched: ChatReply | None = None
        mode = self.output.mode
        if batch_id is not None and self.batch is not None:
            try:
                batched = await self.batch.complete(batch_id, prompt.messages_for(mode),
                                                    self.params(template, index, mode), max_tokens)
            except BatchFallback:
                batched = None
        if batched is not None:
            first = batched
        else:
            try:
                first, mode = await self.output.run(send)
            except (CallFailed, BudgetExceeded) as exc:
                raise self._call_failed(exc, prompt, self.output.mode) from None
            self._remember_mode()
        try:
            sample = _read(prompt, first.text, mode, cached=False, repaired=False)
            return _with_cost(sample, [first]), first.text
        except VerdictError as exc:
            problem = exc.problem
        if not self.repairs.start(mode):
            raise MetricUnavailable(
                f"the judge's reply was not a valid verdict: {problem}",
                {"raw_reply": kept_raw(redact(first.text)), "judge_failure": "unreadable",
                 **self._identity(prompt, mode), **_spent([first])},
            ) from None

        follow_up += [{"role": "assistant", "content": first.text}, {"role": "user", "content": repair_message(problem)}]
        try:
            second = await send(mode)
        except (CallFailed, BudgetExceeded) as exc:
            self.repairs.pending -= 1
            raise self._call_failed(exc, prompt, mode, [first]) from None
        except BaseException:
            self.repairs.pending -= 1
            raise
        try:
            sample = _read(prompt, second.text, mode, cached=False, repaired=True)
        except VerdictError as exc:
            self.repairs.record(rescued=False)
            raise MetricUnavailable(
                f"the judge's reply was not a valid verdict after one repair retry: {exc.problem}",
                {"raw_reply": kept_raw(redact(second.text)), "first_reply": kept_raw(redact(first.text)),
                 "first_problem": problem, "judge_failure": "unreadable", **self._identity(prompt, mode),
                 **_spent([first, second])},
            ) from None
        self.repairs.record(rescued=True)
        return _with_cost(sample, [first, second]), second.text

    def _remember_mode(self) -> None:
        """Store the output mode this run learnt (once), so the next run starts there (``judges.output``)."""
        learnt = self.output.learnt
        if learnt is None or self._learnt_saved:
            return
        self._learnt_saved = True
        self.cache.remember_output_mode(self.provider, self.service.provider.base_url, self.model, learnt[0],
                                        learnt[1])

    def _call_failed(self, exc: CallFailed | BudgetExceeded, prompt: RenderedPrompt, mode: OutputMode,
                     paid: list[ChatReply] | None = None) -> MetricUnavailable:
        """The ``MetricUnavailable`` for a call that failed after its retries, or that the budget stopped."""
        details = {**self._identity(prompt, mode), **_spent(paid or [])}
        if isinstance(exc, BudgetExceeded):
            return MetricUnavailable(redact(f"not judged: {exc}"), {**details, "judge_failure": "budget"})
        return MetricUnavailable(redact(f"judge call failed: {exc}"),
                                 {**details, "judge_failure": failure_cause(exc), "attempts": exc.attempts,
                                  "status": exc.status})

    def _identity(self, prompt: RenderedPrompt, mode: OutputMode) -> dict[str, Any]:
        return {"method": "judge", "provider": self.provider, "model": self.model,
                "template_version": prompt.version, "temperature": self.temperature_for(prompt.template.name),
                "seed": self.seed if self.service.provider.spec.supports_seed else None, "output_mode": mode}

    def _details(self, prompt: RenderedPrompt, samples: list[Sample], values: Values) -> dict[str, Any]:
        details = self._identity(prompt, samples[0].mode)
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
        if any(s.parsed_from != "json" for s in samples):
            details["parsed_from"] = "words"
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
                "output": self.output.metadata(), "repairs": self.repairs.as_dict(),
                "templates": dict(sorted(self.templates_used.items())), "cache": self.cache.metadata(),
                **({"mode": "batch", "batch": self.batch.metadata()} if self.batch is not None else {}),
                **({"batch_notice": self.batch_notice} if self.batch_notice else {})}

    async def aclose(self) -> None:
        self.cache.close()
        if self.batch is not None:
            await self.batch.aclose()
        await self.service.aclose()


@functools.cache
def max_tokens_for(template: JudgeTemplate) -> int:
    """The completion cap for ``template``: larger when its verdict holds lists (claims, chunks)."""
    list_valued = any(
        getattr(field_info.annotation, "__origin__", None) is list for field_info in template.verdict.model_fields.values()
    )
    return LIST_MAX_TOKENS if list_valued else JUDGE_MAX_TOKENS


def _refused_outright(mode: OutputMode, failure: Failure) -> bool:
    """The retry layer's ``final`` for a judge call: a structured mode clearly refused is not retried."""
    return clearly_refused(mode, failure.status, failure.reason)


def _read(prompt: RenderedPrompt, text: str, mode: OutputMode, *, cached: bool, repaired: bool) -> Sample:
    """The sample in ``text``: a JSON verdict, or in prompt mode also a lone score stated in words."""
    template = prompt.template
    parsed_from = "json"
    try:
        verdict = parse_verdict(text, template.verdict)
    except VerdictError:
        in_words = verdict_in_words(text, template.verdict) if mode == "prompt" else None
        if in_words is None:
            raise
        verdict, parsed_from = in_words, "words"
    values = template.values(verdict, prompt.inputs)
    reasoning = str(getattr(verdict, "reasoning", ""))
    return Sample(values, reasoning, verdict_details(verdict), cached, repaired, mode, parsed_from=parsed_from)


def _with_cost(sample: Sample, replies: list[ChatReply]) -> Sample:
    sample.usage = Usage(sum(r.usage.prompt_tokens for r in replies), sum(r.usage.completion_tokens for r in replies),
                         replies[-1].usage.source, sum(r.usage.cached_tokens for r in replies))
    costs = [r.cost_usd for r in replies]
    sample.cost_usd = None if any(c is None for c in costs) else sum(c for c in costs if c is not None)
    return sample


def _spent(replies: list[ChatReply]) -> dict[str, Any]:
    """Tokens and cost of the calls an unavailable verdict made (paid although nothing could be read)."""
    if not replies:
        return {}
    costs = [r.cost_usd for r in replies]
    return {"prompt_tokens": sum(r.usage.prompt_tokens for r in replies),
            "completion_tokens": sum(r.usage.completion_tokens for r in replies),
            "cost_usd": None if any(c is None for c in costs) else round(sum(c or 0.0 for c in costs), 8)}


def _replay(result: JudgeVerdict | MetricUnavailable) -> JudgeVerdict:
    if isinstance(result, MetricUnavailable):
        raise MetricUnavailable(str(result), dict(result.details))
    return result
