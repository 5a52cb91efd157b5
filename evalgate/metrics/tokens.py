"""Token count, latency and the combined score of retrieval, judge and tokens (the tokenizer:
``evalgate.text.tokens``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from evalgate.config.options import CombinedScoreOptions
from evalgate.metrics.registry import MetricContext, MetricFn, MetricSkipped, MetricUnavailable, Score, metric
from evalgate.text.tokens import count_tokens

if TYPE_CHECKING:
    from evalgate.model import Answer, Case


def _efficiency(name: str) -> Callable[[MetricFn], MetricFn]:
    """Register the efficiency metric ``name`` (lower is better, unbounded), run on the cases that record it
    (the case's own field ``name``: a recorded token count or latency)."""

    def records_it(case: Case) -> bool:
        return getattr(case, name) is not None

    return metric(name, family="efficiency", direction="lower", applies=records_it, value_range=None)


@_efficiency("num_tokens")
def num_tokens(case: Case, answer: Answer, ctx: MetricContext) -> Score:
    """Tokens used for the answer: the count the target reported, else the cl100k_base token count of
    the answer text (ceil(characters/4) when no tokenizer is available offline).
    """
    if answer.num_tokens is not None:
        return Score(float(answer.num_tokens), {"tokenizer": "target"})
    if answer.output is None:
        raise MetricUnavailable("target returned no answer text and no token count")
    count, name = count_tokens(answer.output)
    return Score(float(count), {"tokenizer": name})


@_efficiency("latency_ms")
def latency_ms(case: Case, answer: Answer, ctx: MetricContext) -> Score:
    """Latency in milliseconds as the target reported or the runner measured it."""
    if answer.latency_ms is None:
        raise MetricUnavailable("target reported no latency")
    return Score(float(answer.latency_ms))


def combined(hit: float, judge: float, tokens: float, weights: CombinedScoreOptions) -> float:
    """``hit^alpha · judge^gamma / (tokens/1000)^beta`` (tokens > 0, hit and judge ≥ 0)."""
    return hit**weights.alpha * judge**weights.gamma / (tokens / 1000.0) ** weights.beta


def _combined_inputs(ctx: MetricContext) -> tuple[float, float, float]:
    """(hit_rate, judge_score, num_tokens) from ``ctx.values``, or why they cannot be used."""
    values = ctx.values
    if "judge_score" not in values:
        if ctx.judge is None:
            raise MetricSkipped("needs judge_score (no judge configured)")
        raise MetricUnavailable("needs judge_score, which is unavailable for this case")
    if "hit_rate" not in values:
        raise MetricUnavailable("needs hit_rate, which is unavailable for this case")
    if "num_tokens" not in values:
        raise MetricUnavailable("needs num_tokens, which is unavailable for this case")
    hit, judge, tokens = values["hit_rate"], values["judge_score"], values["num_tokens"]
    if tokens <= 0:
        raise MetricUnavailable("num_tokens is 0: the token penalty (num_tokens/1000)^beta is undefined")
    if hit < 0 or judge < 0:
        raise MetricUnavailable(f"hit_rate {hit:g} and judge_score {judge:g} must be ≥ 0")
    return hit, judge, tokens


@metric(
    "combined_score",
    family="combined",
    applies=lambda case: bool(case.expected_sources),
    value_range=None,
    depends_on=("hit_rate", "judge_score", "num_tokens"),
)
def combined_score(case: Case, answer: Answer, ctx: MetricContext) -> Score:
    """hit_rate^alpha · judge_score^gamma / (num_tokens/1000)^beta with alpha = 2.0, gamma = 1.5,
    beta = 0.5 by default (metric option ``combined_score``); unbounded, higher is better.

    Its description names the dialect it comes from and that dialect's informational target
    (``Dialect.metric_docs``).
    """
    hit, judge, tokens = _combined_inputs(ctx)
    options = getattr(ctx.options, "combined_score", None) or CombinedScoreOptions()
    details: dict[str, Any] = {
        "hit_rate": hit,
        "judge_score": judge,
        "num_tokens": tokens,
        "alpha": options.alpha,
        "beta": options.beta,
        "gamma": options.gamma,
    }
    try:
        value = combined(hit, judge, tokens, options)
    except (ZeroDivisionError, OverflowError) as exc:
        raise MetricUnavailable(f"combined score undefined for these inputs: {exc}", details) from None
    return Score(value, details)
