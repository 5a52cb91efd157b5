"""The metric registry: every metric is a function registered by name with its direction, default
threshold and the test that says whether it applies to a case.

A metric function takes ``(case, answer, ctx)`` and returns a ``Score`` (or an awaitable of one, for
judged metrics). It raises ``MetricSkipped`` when it cannot run by design (no judge configured) and
``MetricUnavailable`` when it should have run but could not (judge reply invalid, provider down).
A ``Score``'s details are read-only once returned: metrics of one family may share one mapping.

An ``applies`` rule may read the case's suite, category and ``metrics`` list, and of every other field
only how filled it is (unset, empty, blank text or list of blank texts, zero, filled; bools and enums
as they are): plans are cached per such shape (``evalgate.runner.setup.case_shape``).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import evalgate.metrics as package
from evalgate.dialect import describe
from evalgate.model import MetricSkipped, MetricUnavailable, Score

if TYPE_CHECKING:
    from evalgate.model import Answer, Case

__all__ = ["REGISTRY", "Metric", "MetricContext", "MetricSkipped", "MetricUnavailable", "Score", "all_metrics",
           "get_metric", "in_scope", "judge_dependent", "metric"]

Direction = Literal["higher", "lower"]
Kind = Literal["deterministic", "judged"]


NO_JUDGE_REASON = "no judge configured (judge_provider none)"
"""Why a judged metric is skipped without a judge; reports count skips by this exact text."""


@dataclass(slots=True)
class MetricContext:
    """Per-case context handed to metric functions.

    ``options``: suite metric options (``evalgate.config.options.MetricOptions``);
    ``judge``: the judge client or None; ``memo``: scratch space shared by the metrics of one case,
    so families (precision/recall/F1) compute their common part once.
    """

    options: Any
    judge: Any = None
    memo: dict[str, Any] = field(default_factory=dict)
    values: dict[str, float] = field(default_factory=dict)
    """Values of metrics already computed for this case (for derived metrics such as composite)."""
    repeat: int = 0
    thresholds: dict[str, Any] | None = None
    """The case's own thresholds (``assert:`` entries), which override the run's; None when it has none."""
    judge_fallbacks: dict[str, str] = field(default_factory=dict)
    """Metrics of this case scored by a heuristic because the judge could not score them: name → why."""
    planned: tuple[str, ...] = ()
    """The metrics planned for this case, in order (a judge call may score several of them at once)."""


MetricFn = Callable[["Case", "Answer", MetricContext], "Score | Awaitable[Score]"]
AppliesFn = Callable[..., bool]
"""``applies(case)`` or ``applies(case, options)`` → True when the metric runs on the case."""


@dataclass(frozen=True, slots=True)
class Metric:
    name: str
    fn: MetricFn
    direction: Direction
    default_threshold: float | None
    applies: AppliesFn
    kind: Kind
    description: str
    family: str
    value_range: tuple[float, float] | None = (0.0, 1.0)
    depends_on: tuple[str, ...] = ()
    """Metrics whose values this one reads from ``ctx.values`` (computed first when they apply)."""
    applies_takes_options: bool = False
    strict_threshold: bool = False
    """True when the default threshold is a strict bound (``gt`` / ``lt``: the seed says "> x")."""
    per_case: bool = False
    """Plan this metric for every case (its ``applies`` may read any value: user metrics), not per shape."""
    info: Any = None
    """What the results' metadata shows about a user metric (origin, criteria, steps); None for built-ins."""
    uses_judge: bool = False
    """Scored by the LLM judge when one is configured (every ``judged`` metric, and response_quality)."""
    direction_declared: bool = True
    """False for a code check that did not say which way is better (``direction``): its direction is then
    inferred from a ``max`` threshold, with a notice (``runner.setup.infer_directions``)."""

    @property
    def default_op(self) -> str:
        """The operator of the default threshold: min/max, or gt/lt when ``strict_threshold``."""
        if self.direction == "higher":
            return "gt" if self.strict_threshold else "min"
        return "lt" if self.strict_threshold else "max"

    def applies_to(self, case: Case, options: Any) -> bool:
        """Whether the metric runs on ``case``; ``applies`` may take ``(case)`` or ``(case, options)``."""
        if self.applies_takes_options:
            return bool(self.applies(case, options))
        return bool(self.applies(case))


REGISTRY: dict[str, Metric] = {}


def metric(
    name: str,
    *,
    family: str,
    direction: Direction = "higher",
    threshold: float | None = None,
    applies: AppliesFn = lambda case: False,
    kind: Kind = "deterministic",
    value_range: tuple[float, float] | None = (0.0, 1.0),
    depends_on: tuple[str, ...] = (),
    strict: bool = False,
    uses_judge: bool | None = None,
) -> Callable[[MetricFn], MetricFn]:
    """Register ``fn`` under ``name``. Its docstring's first paragraph is the metric's description, as the
    dialect it comes from documents it (``evalgate.dialect.describe``).

    ``strict``: the default threshold is a strict bound (value > threshold for higher-is-better)."""

    def register(fn: MetricFn) -> MetricFn:
        if name in REGISTRY:
            raise RuntimeError(f"metric {name!r} registered twice")
        doc = (fn.__doc__ or "").strip().split("\n\n")[0]
        REGISTRY[name] = Metric(
            name=name,
            fn=fn,
            direction=direction,
            default_threshold=threshold,
            applies=applies,
            kind=kind,
            description=describe(name, " ".join(doc.split())),
            family=family,
            value_range=value_range,
            depends_on=depends_on,
            applies_takes_options=_arity(applies) >= 2,
            strict_threshold=strict,
            uses_judge=kind == "judged" if uses_judge is None else uses_judge,
        )
        return fn

    return register


ANSWER_TEXT_FAMILIES = frozenset({"judged", "criteria", "rules", "user"})
"""Families whose metrics score the answer text: the judged built-ins, criteria, rules and the user's code checks."""
ANSWER_TEXT_METRICS = frozenset({"keyword_coverage", "composite", "response_quality", "num_tokens"})
"""Other metrics scoring the answer text."""
NOT_ANSWER_TEXT = frozenset({"context_precision", "context_recall"})
"""Judged metrics of the retrieved context, not of the answer."""
EMPTY_ANSWER_REASON = ("the answer is empty: no answer text to score (set expect_empty: true on the case if an "
                       "empty answer is right)")


def reads_answer_text(metric: Metric) -> bool:
    """Whether ``metric`` scores the answer text: on an empty (or whitespace) answer it is then
    ``unavailable`` (missing evidence, never a pass) unless the case says ``expect_empty: true``."""
    if metric.name in NOT_ANSWER_TEXT:
        return False
    return metric.family in ANSWER_TEXT_FAMILIES or metric.name in ANSWER_TEXT_METRICS


def judge_dependent(metrics: Mapping[str, Metric]) -> frozenset[str]:
    """Metrics whose value comes from the judge: those that use it, and those that depend (directly or
    through others) on one that does (``composite`` on ``response_quality``, ``combined_score`` on
    ``judge_score``)."""
    found = {name for name, m in metrics.items() if m.uses_judge}
    grew = True
    while grew:
        grew = False
        for name, m in metrics.items():
            if name not in found and any(dependency in found for dependency in m.depends_on):
                found.add(name)
                grew = True
    return frozenset(found)


def in_scope(case: Case, categories: tuple[str, ...] | None, tags: tuple[str, ...] | None) -> bool:
    """Whether ``case`` is in a user metric's scope: one of ``categories`` and carrying any of ``tags``
    (None: no limit on that side)."""
    if categories is not None and case.category not in categories:
        return False
    return tags is None or bool(set(tags) & set(case.tags))


def _arity(fn: Callable[..., Any]) -> int:
    return len(inspect.signature(fn).parameters)


def get_metric(name: str) -> Metric:
    load_builtin_metrics()
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(name) from None


def all_metrics() -> dict[str, Metric]:
    load_builtin_metrics()
    return dict(REGISTRY)


_LOADED = False


def load_builtin_metrics() -> None:
    """Import every built-in metric module once (they register themselves on import)."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True


    for info in pkgutil.iter_modules(package.__path__):
        if info.name not in {"registry", "options", "text"}:
            importlib.import_module(f"evalgate.metrics.{info.name}")
