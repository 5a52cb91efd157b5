"""Token and cost accounting for judge and chat-model calls, and the ``max_cost`` budget.

Prices are USD per 1,000,000 tokens, ``{"input": x, "output": y}`` per model; ``settings.prices``
overrides or extends the built-in table. A model name matches its own entry, else the longest entry
that is a prefix of it up to a ``-`` (``gpt-4o-mini-2024-07-18`` → ``gpt-4o-mini``). Self-hosted
providers (ollama, local) cost 0 unless priced explicitly.

cost = prompt_tokens · input / 1e6 + completion_tokens · output / 1e6.

Tokens come from the provider's ``usage`` fields, else from counting the text with tiktoken
(``evalgate.text.tokens.count_tokens``) plus ``MESSAGE_OVERHEAD`` tokens per message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evalgate.calls.executor import CallCancelled
from evalgate.errors import UserError

if TYPE_CHECKING:
    from evalgate.calls.providers import ProviderConfig

DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4-turbo": (10.00, 30.00),
    "gpt-3.5-turbo": (0.50, 1.50),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
    "gemini-2.5-pro": (1.25, 10.00),
    "gemini-2.5-flash": (0.30, 2.50),
    "gemini-2.0-flash": (0.10, 0.40),
    "gemini-2.0-flash-lite": (0.075, 0.30),
    "gemini-1.5-pro": (1.25, 5.00),
    "gemini-1.5-flash": (0.075, 0.30),
}
"""Public list prices (USD per 1M input, output tokens) of common judge models."""
MESSAGE_OVERHEAD = 4
"""Tokens added per chat message when counting locally (role and separators)."""


class BudgetExceeded(CallCancelled):
    """The next call could take the run's spend past ``max_cost``: the run stops before making it."""


@dataclass(frozen=True, slots=True)
class Price:
    input: float
    output: float

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """USD for the given token counts."""
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1_000_000


def price_table(overrides: Mapping[str, Mapping[str, float]]) -> dict[str, Price]:
    """The built-in table with ``settings.prices`` applied; bad entries are a ``UserError``."""
    table = {model: Price(*pair) for model, pair in DEFAULT_PRICES.items()}
    for model, entry in overrides.items():
        table[model] = _override(model, entry)
    return table


def _override(model: str, entry: Any) -> Price:
    aliases = {"input": "input", "prompt": "input", "output": "output", "completion": "output"}
    if not isinstance(entry, Mapping) or not entry or set(entry) - set(aliases):
        raise UserError(f"price for {model!r} must be {{input: USD per 1M tokens, output: USD per 1M tokens}}",
                        where="prices")
    values = {aliases[k]: v for k, v in entry.items()}
    for key, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise UserError(f"price {key!r} for {model!r} must be a number ≥ 0 (USD per 1M tokens)", where="prices")
    return Price(float(values.get("input", 0.0)), float(values.get("output", 0.0)))


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
    from evalgate.text.tokens import count_tokens

    return sum(count_tokens(str(m.get("content") or ""))[0] + MESSAGE_OVERHEAD for m in messages)


def count_text_tokens(text: str) -> int:
    from evalgate.text.tokens import count_tokens

    return count_tokens(text)[0]


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens of one call and where the counts came from (``provider`` or ``tiktoken``)."""

    prompt_tokens: int
    completion_tokens: int
    source: str

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def usage_from(prompt: Any, completion: Any, messages: Sequence[Mapping[str, Any]], reply: str) -> Usage:
    """The provider's token counts when both are integers, else counted locally."""
    if isinstance(prompt, int) and isinstance(completion, int):
        return Usage(prompt, completion, "provider")
    return Usage(count_message_tokens(messages), count_text_tokens(reply), "tiktoken")


@dataclass(slots=True)
class RoleTotals:
    calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    unpriced_calls: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "cached_calls": self.cached_calls, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "cost_usd": round(self.cost_usd, 6),
                "unpriced_calls": self.unpriced_calls}


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
        import asyncio

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

    def record(self, role: str, usage: Usage, price: Price | None) -> float | None:
        """Add one finished call; returns its cost (None when the model has no price)."""
        totals = self.role(role)
        totals.calls += 1
        totals.prompt_tokens += usage.prompt_tokens
        totals.completion_tokens += usage.completion_tokens
        if price is None:
            totals.unpriced_calls += 1
            return None
        cost = price.cost(usage.prompt_tokens, usage.completion_tokens)
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


def check_budget_pricing(max_cost: float | None, provider: ProviderConfig, price: Price | None, setting: str) -> None:
    """With ``max_cost`` set, every paid model must have a price, or the budget could not be kept."""
    if max_cost is not None and price is None:
        raise UserError(
            f"max_cost is set but no price is known for model {provider.model!r} ({provider.name}); "
            "add it to prices as {input: USD per 1M tokens, output: USD per 1M tokens}",
            where=setting,
        )
