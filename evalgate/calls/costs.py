"""Token and cost accounting for judge and chat-model calls, and the ``max_cost`` budget.

Prices are USD per 1,000,000 tokens, ``{"input": x, "output": y}`` per model; ``settings.prices``
overrides or extends the built-in table. A model name matches its own entry, else the longest entry
that is a prefix of it up to a ``-`` (``gpt-4o-mini-2024-07-18`` → ``gpt-4o-mini``). Self-hosted
providers (ollama, local) cost 0 unless priced explicitly.

cost = (prompt_tokens − cached) · input / 1e6 + cached · cached_input / 1e6 + completion_tokens · output / 1e6,
where ``cached`` is the prompt tokens the provider served from its prompt cache (``usage``: OpenAI's and
Gemini's ``prompt_tokens_details.cached_tokens``, Anthropic's ``cache_read_input_tokens``) and
``cached_input`` the model's cached-input price (the input price when the model has none). A batch
(``judge_mode: batch``) is billed at ``BATCH_DISCOUNT`` × that.

Tokens come from the provider's ``usage`` fields, else from counting the text with tiktoken
(``evalgate.text.tokens.count_tokens``) plus ``MESSAGE_OVERHEAD`` tokens per message.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evalgate.calls.executor import CallCancelled
from evalgate.errors import UserError
from evalgate.model import counters
from evalgate.text.tokens import count_tokens

if TYPE_CHECKING:
    from evalgate.calls.providers import ProviderConfig

DEFAULT_PRICES: dict[str, tuple[float, float] | tuple[float, float, float]] = {
    "gpt-4o-mini": (0.15, 0.60, 0.075),
    "gpt-4o": (2.50, 10.00, 1.25),
    "gpt-4.1": (2.00, 8.00, 0.50),
    "gpt-4.1-mini": (0.40, 1.60, 0.10),
    "gpt-4.1-nano": (0.10, 0.40, 0.025),
    "gpt-4-turbo": (10.00, 30.00),
    "gpt-3.5-turbo": (0.50, 1.50),
    "o3-mini": (1.10, 4.40, 0.55),
    "o4-mini": (1.10, 4.40, 0.275),
    "gemini-2.5-pro": (1.25, 10.00, 0.3125),
    "gemini-2.5-flash": (0.30, 2.50, 0.075),
    "gemini-2.0-flash": (0.10, 0.40, 0.025),
    "gemini-2.0-flash-lite": (0.075, 0.30),
    "gemini-1.5-pro": (1.25, 5.00),
    "gemini-1.5-flash": (0.075, 0.30),
}
"""Public list prices (USD per 1M input, output and, where the model has a prompt cache, cached input tokens)
of common judge models."""
BATCH_DISCOUNT = 0.5
"""What OpenAI's Batch API (and Gemini's batch mode) bills relative to direct calls: half, input and output."""
MESSAGE_OVERHEAD = 4
"""Tokens added per chat message when counting locally (role and separators)."""


class BudgetExceeded(CallCancelled):
    """The next call could take the run's spend past ``max_cost``: the run stops before making it."""


@dataclass(frozen=True, slots=True)
class Price:
    """A model's list price in US dollars per 1,000,000 tokens: ``input`` for prompt tokens, ``output`` for
    completion tokens (``DEFAULT_PRICES``' entries, or ``settings.prices``)."""

    input: float
    output: float
    cached_input: float | None = None
    """USD per 1M prompt tokens served from the provider's prompt cache (None: billed as ``input``)."""

    def cost(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> float:
        """USD for the given token counts, ``cached_tokens`` of the prompt at the cached-input rate."""
        cached = min(max(cached_tokens, 0), prompt_tokens)
        rate = self.input if self.cached_input is None else self.cached_input
        return ((prompt_tokens - cached) * self.input + cached * rate + completion_tokens * self.output) / 1_000_000

    def cache_saving(self, cached_tokens: int) -> float:
        """USD the provider's prompt cache saved on ``cached_tokens`` prompt tokens."""
        rate = self.input if self.cached_input is None else self.cached_input
        return max(cached_tokens, 0) * (self.input - rate) / 1_000_000


def price_table(overrides: Mapping[str, Mapping[str, float]]) -> dict[str, Price]:
    """The built-in table with ``settings.prices`` applied; bad entries are a ``UserError``."""
    table = {model: Price(*entry) for model, entry in DEFAULT_PRICES.items()}
    for model, entry in overrides.items():
        table[model] = _override(model, entry)
    return table


def _override(model: str, entry: Any) -> Price:
    aliases = {"input": "input", "prompt": "input", "output": "output", "completion": "output",
               "cached_input": "cached_input", "cached": "cached_input"}
    if not isinstance(entry, Mapping) or not entry or set(entry) - set(aliases):
        raise UserError(f"price for {model!r} must be {{input: USD per 1M tokens, output: USD per 1M tokens}} "
                        "(optionally cached_input: USD per 1M cached prompt tokens)", where="prices")
    values = {aliases[k]: v for k, v in entry.items()}
    for key, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise UserError(f"price {key!r} for {model!r} must be a number ≥ 0 (USD per 1M tokens)", where="prices")
    cached = values.get("cached_input")
    return Price(float(values.get("input", 0.0)), float(values.get("output", 0.0)),
                 None if cached is None else float(cached))


def find_price(model: str, table: Mapping[str, Price], *, self_hosted: bool = False) -> Price | None:
    """The price of ``model`` (exact, else longest ``prefix-`` match); free for self-hosted providers."""
    name = model.removeprefix("models/")
    if name in table:
        return table[name]
    prefixes = [key for key in table if name.startswith(key + "-")]
    if prefixes:
        return table[max(prefixes, key=len)]
    return Price(0.0, 0.0) if self_hosted else None


def count_message_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """Local token count of chat messages: Σ (tokens(content) + MESSAGE_OVERHEAD)."""
    return sum(count_tokens(str(m.get("content") or ""), approximate=True)[0] + MESSAGE_OVERHEAD for m in messages)


def count_text_tokens(text: str) -> int:
    return count_tokens(text, approximate=True)[0]


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens of one call and where the counts came from (``provider`` or ``tiktoken``); ``cached_tokens``:
    prompt tokens the provider served from its prompt cache (part of ``prompt_tokens``)."""

    prompt_tokens: int
    completion_tokens: int
    source: str
    cached_tokens: int = 0

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def usage_from(prompt: Any, completion: Any, messages: Sequence[Mapping[str, Any]], reply: str,
               cached: Any = None) -> Usage:
    """The provider's token counts when both are integers, else counted locally (nothing cached then)."""
    if isinstance(prompt, int) and isinstance(completion, int):
        hit = min(cached, prompt) if isinstance(cached, int) and not isinstance(cached, bool) and cached > 0 else 0
        return Usage(prompt, completion, "provider", hit)
    return Usage(count_message_tokens(messages), count_text_tokens(reply), "tiktoken")


def cached_prompt_tokens(usage: Any) -> int | None:
    """Prompt tokens served from the provider's prompt cache, as its ``usage`` reports them: OpenAI's and
    Gemini's OpenAI-compatible ``prompt_tokens_details.cached_tokens``, Gemini's native
    ``cached_content_token_count`` / ``cachedContentTokenCount``, Anthropic's ``cache_read_input_tokens``."""
    if not isinstance(usage, Mapping):
        return None
    details = usage.get("prompt_tokens_details")
    candidates = [details.get("cached_tokens") if isinstance(details, Mapping) else None,
                  usage.get("cached_content_token_count"), usage.get("cachedContentTokenCount"),
                  usage.get("cache_read_input_tokens")]
    for value in candidates:
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


@dataclass(slots=True)
class RoleTotals:
    """One role's calls, tokens and spend: ``metadata.cost.roles.<role>`` of results.json, in field order, the
    US dollar amounts rounded to 6 decimals."""

    calls: int = 0
    """Calls the provider answered (each ``CostLedger.record``)."""
    cached_calls: int = 0
    """Replies read from the judge cache instead of a call: no tokens, no cost, not in ``calls``."""
    prompt_tokens: int = 0
    """Tokens sent, Σ over ``calls``: the provider's ``usage`` counts, else tiktoken's count of the messages
    (+ ``MESSAGE_OVERHEAD`` per message)."""
    completion_tokens: int = 0
    """Tokens received, Σ over ``calls`` (the provider's count, else tiktoken's count of the reply)."""
    cost_usd: float = 0.0
    """US dollars: Σ ``Price.cost`` over the priced calls, × ``BATCH_DISCOUNT`` for a call answered through a
    batch (the module docstring's formula); the role's share of ``CostLedger.spent``."""
    unpriced_calls: int = 0
    """Calls of a model with no price (their tokens are counted, their cost is not in ``cost_usd``)."""
    cached_prompt_tokens: int = 0
    """Prompt tokens the provider served from its prompt cache (part of ``prompt_tokens``)."""
    cache_saved_usd: float = 0.0
    """US dollars those cost less than at the full input price: cached · (input − cached_input) / 1e6, ×
    ``BATCH_DISCOUNT`` for a batch call."""
    batch_calls: int = 0
    """Calls answered through a batch (``judge_mode: batch``), part of ``calls``."""
    batch_saved_usd: float = 0.0
    """US dollars the batch discount saved against direct calls: direct cost · (1 − ``BATCH_DISCOUNT``)."""

    def as_dict(self) -> dict[str, Any]:
        return counters(self, 6)


@dataclass(slots=True)
class CostLedger:
    """Spend so far per role (``judge``, ``target``), plus reservations for calls in flight.

    Before a paid call, ``reserve(worst_case)`` holds the call's worst case (prompt estimate + its
    ``max_tokens`` completion, ``ChatService.worst_case_cost``) until the reply arrives; then ``release``
    frees it and ``record`` adds what the reply's usage says it cost. A call that fits the budget only once
    calls in flight have released their reservations waits for them; a call that cannot fit even then
    (``spent + worst_case > max_cost``) is refused with ``BudgetExceeded`` and ``exceeded`` is set, after which
    every new call is refused. So the
    spend never passes the budget as long as the worst case bounds the real cost, and the run spends up to
    ``max_cost`` minus one call's worst case instead of stopping at the first crowd of reservations.
    """

    max_cost: float | None = None
    reserved: float = 0.0
    holding: int = 0
    """Reservations held (calls in flight under the budget)."""
    exceeded: bool = False
    refused_call_usd: float = 0.0
    """Worst case of the call that was refused (for the stop message)."""
    roles: dict[str, RoleTotals] = field(default_factory=dict)
    _waiting: list[Any] = field(default_factory=list)

    @property
    def spent(self) -> float:
        return sum(role.cost_usd for role in self.roles.values())

    def role(self, name: str) -> RoleTotals:
        return self.roles.setdefault(name, RoleTotals())

    async def reserve(self, amount: float) -> float:
        """Hold ``amount`` USD for one call (waiting for calls in flight when only they are in the way)."""
        if self.exceeded:  # the budget stopped the run: no new call starts, however small
            raise BudgetExceeded(self.stop_message())
        while self.max_cost is not None and self.spent + self.reserved + amount > self.max_cost:
            if self.exceeded or self.spent + amount > self.max_cost or self.holding == 0:
                self.exceeded = True
                self.refused_call_usd = max(self.refused_call_usd, amount)
                raise BudgetExceeded(self.stop_message(amount))
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiting.append(waiter)
            await waiter
        self.reserved += amount
        self.holding += 1
        return amount

    def release(self, amount: float) -> None:
        self.holding = max(0, self.holding - 1)
        self.reserved = max(0.0, self.reserved - amount) if self.holding else 0.0
        waiting, self._waiting = self._waiting, []
        for waiter in waiting:
            if not waiter.done():
                waiter.set_result(None)

    def stop_message(self, amount: float | None = None) -> str:
        """``max_cost $B reached: spent $S of $B (P %)…``: what stopping on the budget says."""
        budget = self.max_cost or 0.0
        share = f" ({self.spent / budget:.0%})" if budget else ""
        text = f"max_cost ${budget:g} reached: spent ${self.spent:.6f} of ${budget:g}{share}"
        amount = self.refused_call_usd if amount is None else amount
        if amount:
            text += f"; the next call could cost up to ${amount:.6f}"
        return text + ", so no new call was started"

    def record(self, role: str, usage: Usage, price: Price | None, *, batch: bool = False) -> float | None:
        """Add one finished call; returns its cost (None when the model has no price): cached prompt tokens
        at the cached-input rate, and × ``BATCH_DISCOUNT`` for a call answered through a batch."""
        totals = self.role(role)
        totals.calls += 1
        totals.prompt_tokens += usage.prompt_tokens
        totals.completion_tokens += usage.completion_tokens
        totals.cached_prompt_tokens += usage.cached_tokens
        totals.batch_calls += int(batch)
        if price is None:
            totals.unpriced_calls += 1
            return None
        factor = BATCH_DISCOUNT if batch else 1.0
        direct = price.cost(usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens)
        cost = direct * factor
        totals.cache_saved_usd += price.cache_saving(usage.cached_tokens) * factor
        totals.batch_saved_usd += direct - cost
        totals.cost_usd += cost
        return cost

    def record_cached(self, role: str) -> None:
        self.role(role).cached_calls += 1

    def metadata(self) -> dict[str, Any]:
        return {"max_cost_usd": self.max_cost, "spent_usd": round(self.spent, 6), "budget_exceeded": self.exceeded,
                "roles": {name: totals.as_dict() for name, totals in sorted(self.roles.items())}}


def add_spend(summary: dict[str, Any], ledger: CostLedger) -> None:
    """Fold judge spend into a results summary: ``cost_usd`` += judge cost; judge tokens under ``tokens``."""
    judge = ledger.roles.get("judge")
    if judge is None:
        return
    summary["cost_usd"] = round(float(summary.get("cost_usd") or 0.0) + judge.cost_usd, 6)
    tokens = summary.setdefault("tokens", {})
    tokens["judge_prompt"] = judge.prompt_tokens
    tokens["judge_completion"] = judge.completion_tokens
    summary["judge_calls"] = {"made": judge.calls, "cached": judge.cached_calls, "cost_usd": round(judge.cost_usd, 6)}
    if judge.cached_prompt_tokens:
        tokens["judge_prompt_cached"] = judge.cached_prompt_tokens
        summary["judge_calls"]["prompt_cache_saved_usd"] = round(judge.cache_saved_usd, 6)
    if judge.batch_calls:
        summary["judge_calls"]["batch"] = judge.batch_calls
        summary["judge_calls"]["batch_saved_usd"] = round(judge.batch_saved_usd, 6)


def check_budget_pricing(max_cost: float | None, provider: ProviderConfig, price: Price | None, setting: str) -> None:
    """With ``max_cost`` set, every paid model must have a price, or the budget could not be kept."""
    if max_cost is not None and price is None:
        raise UserError(
            f"max_cost is set but no price is known for model {provider.model!r} ({provider.name}); "
            "add it to prices as {input: USD per 1M tokens, output: USD per 1M tokens}",
            where=setting,
        )
