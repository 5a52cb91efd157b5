"""Code checks: your own metric as a Python function (docs/custom-metrics.md).

A check is ``fn(case: CaseView, answer: AnswerView)`` (plain or ``async``) returning a ``float``, a
``bool`` (True = 1.0, False = 0.0) or a ``Score(value, details, reason)``. It is named in ``metrics:`` as
``package.module:function``, ``file://checks.py:function`` (relative to the file that names it), by the
name an installed plug-in registers in the entry-point group ``evalgate.metrics``, or by the name given to
``@evalgate.metric`` in code that is already imported (the Python API). An exception, or a return value of
another type, makes the metric ``errored`` on that case with a one-line reason; the run goes on.

``CaseView`` and ``AnswerView`` (``evalgate.dataset.views``) are the stable, documented views a check
receives: read-only, their attributes named like the dataset keys, independent of evalgate's internal models.
"""

from __future__ import annotations

import hashlib
import inspect
import math
import re
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, entry_points, packages_distributions, version
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from evalgate.dataset.views import AnswerView, CaseView
from evalgate.errors import UserError
from evalgate.metrics.registry import REGISTRY, Metric, MetricContext, in_scope
from evalgate.model import DEFAULT_CUSTOM_THRESHOLD, METRIC_NAME, MetricErrored, Score

if TYPE_CHECKING:
    from evalgate.model import Answer, Case

ENTRY_POINT_GROUP = "evalgate.metrics"
FAMILY = "user"
_UNSET: Any = object()


def views(case: Case, answer: Answer, ctx: MetricContext) -> tuple[CaseView, AnswerView]:
    """The views of ``case`` and ``answer``, built once per case (shared by its checks)."""
    made = ctx.memo.get("user_views")
    if made is None:
        made = ctx.memo["user_views"] = (CaseView.of(case), AnswerView.of(answer))
    return made


# --- the @evalgate.metric decorator ------------------------------------------------------------------------


CheckFn = Callable[[CaseView, AnswerView], "float | bool | Score | Awaitable[float | bool | Score]"]


@dataclass(frozen=True, slots=True)
class CheckSpec:
    """How a code check is scored: set by ``@evalgate.metric``, or the defaults for a plain function."""

    fn: Callable[..., Any]
    name: str
    threshold: float | dict[str, float] | None = DEFAULT_CUSTOM_THRESHOLD
    direction: str = "higher"
    value_range: tuple[float, float] | None = (0.0, 1.0)
    applies: Callable[[CaseView], bool] | None = None
    description: str = ""
    direction_declared: bool = False
    """Whether ``direction`` was said (``@evalgate.metric(direction=…)``, a declaration's ``direction:``)."""


USER_METRICS: dict[str, CheckSpec] = {}
"""Checks defined with ``@evalgate.metric`` in code imported so far, by name (a redefinition replaces)."""


@overload
def metric(fn: Callable[..., Any], /) -> Callable[..., Any]: ...


@overload
def metric(*, name: str | None = None, threshold: Any = _UNSET, direction: str | None = None,
           value_range: tuple[float, float] | None = (0.0, 1.0),
           applies: Callable[[CaseView], bool] | None = None,
           description: str | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]: ...


def metric(fn: Callable[..., Any] | None = None, /, *, name: str | None = None, threshold: Any = _UNSET,
           direction: str | None = None, value_range: tuple[float, float] | None = (0.0, 1.0),
           applies: Callable[[CaseView], bool] | None = None, description: str | None = None) -> Any:
    """Declare a code check: ``@evalgate.metric`` or ``@evalgate.metric(name=…, threshold=…, …)``.

    ``name``: the metric's name in results (default: the function's name). ``threshold``: a number
    (``min`` for higher-is-better, ``max`` for lower-is-better), ``{"min": x}``/``{"max": x}``, or None
    for a reported, ungated metric (default 0.5). ``direction``: ``higher`` or ``lower`` is better (not
    given: ``higher``, or ``lower`` inferred from a ``max`` threshold with a notice).
    ``value_range``: values outside it make the metric ``errored`` (None: any finite number).
    ``applies(case) -> bool``: the cases it runs on (default: those that name it, or every case of a
    suite that lists it); it may read any value of the case. The function is returned unchanged.
    """

    def register(function: Callable[..., Any]) -> Callable[..., Any]:
        spec = make_spec(function, name=name, threshold=threshold, direction=direction, value_range=value_range,
                         applies=applies, description=description, where="@evalgate.metric")
        if spec.name in REGISTRY:
            raise ValueError(f"@evalgate.metric: {spec.name!r} is a built-in metric; choose another name")
        function.__evalgate_metric__ = spec  # type: ignore[attr-defined]
        USER_METRICS[spec.name] = spec
        return function

    return register(fn) if fn is not None else register


def make_spec(function: Callable[..., Any], *, name: str | None = None, threshold: Any = _UNSET,
              direction: str | None = None, value_range: tuple[float, float] | None = (0.0, 1.0),
              applies: Callable[[CaseView], bool] | None = None, description: str | None = None,
              where: str) -> CheckSpec:
    if not callable(function):
        raise UserError(f"a code check must be a function, got {type(function).__name__}", where=where)
    text = str(name or getattr(function, "__name__", ""))
    if not METRIC_NAME.fullmatch(text):
        raise UserError(f"{text!r} is not a valid metric name (letters, digits, '_', '.', '-')", where=where)
    if direction not in (None, "higher", "lower"):
        raise UserError(f"direction must be 'higher' or 'lower' (got {direction!r})", where=where)
    if value_range is not None and not (len(value_range) == 2 and value_range[0] < value_range[1]):
        raise UserError(f"value_range must be (low, high) with low < high (got {value_range!r})", where=where)
    doc = " ".join((inspect.getdoc(function) or "").split("\n\n")[0].split())
    return CheckSpec(fn=function, name=text, threshold=DEFAULT_CUSTOM_THRESHOLD if threshold is _UNSET else threshold,
                     direction=direction or "higher",
                     value_range=None if value_range is None else (value_range[0], value_range[1]),
                     applies=applies, description=description or doc, direction_declared=direction is not None)


def spec_of(obj: Any, *, name: str | None, where: str) -> CheckSpec:
    """The ``CheckSpec`` of a decorated function (renamed to ``name`` when given), else the defaults."""
    spec = getattr(obj, "__evalgate_metric__", None)
    if isinstance(spec, CheckSpec):
        return spec if name is None or name == spec.name else _renamed(spec, name)
    return make_spec(obj, name=name, where=where)


def _renamed(spec: CheckSpec, name: str) -> CheckSpec:
    return CheckSpec(spec.fn, name, spec.threshold, spec.direction, spec.value_range, spec.applies, spec.description,
                     spec.direction_declared)


# --- a check as a registry Metric ------------------------------------------------------------------------------


def check_metric(spec: CheckSpec, *, origin: str, categories: tuple[str, ...] | None = None,
                 tags: tuple[str, ...] | None = None, run_on_all: bool = True,
                 description: str | None = None) -> Metric:
    """The registry ``Metric`` that runs ``spec`` (planned per case: ``applies`` may read any value)."""
    fn = spec.fn
    asynchronous = inspect.iscoroutinefunction(fn)

    def run(case: Case, answer: Answer, ctx: MetricContext) -> Score | Awaitable[Score]:
        case_view, answer_view = views(case, answer, ctx)
        try:
            result = fn(case_view, answer_view)
        except Exception as exc:
            raise MetricErrored(f"{spec.name} raised {error_line(exc)}") from None
        if asynchronous or inspect.isawaitable(result):
            return _finish(spec.name, result)
        return to_score(spec.name, result)

    def applies(case: Case) -> bool:
        if not in_scope(case, categories, tags):
            return False
        if spec.applies is None:
            return run_on_all
        try:
            return bool(spec.applies(CaseView.of(case)))
        except Exception as exc:
            raise UserError(f"applies() of metric {spec.name!r} raised {error_line(exc)} on case {case.id!r}",
                            where=case.location) from None

    run.__name__ = run.__qualname__ = spec.name
    return Metric(
        name=spec.name, fn=run, direction=spec.direction,  # type: ignore[arg-type]
        default_threshold=None, applies=applies, kind="deterministic",
        description=description or spec.description or f"code check {origin}", family=FAMILY,
        value_range=spec.value_range, per_case=True, direction_declared=spec.direction_declared,
        info={"type": "check", "origin": origin, "function": qualname(fn), "code": code_identity(fn)},
    )


def code_identity(fn: Callable[..., Any]) -> str:
    """What a check's code is, for the gate policy: the BLAKE2b-128 digest of the file defining ``fn`` (a
    ``file://`` reference, a module of the checkout or of an installed package) and, when an installed
    distribution provides its top-level package, ``name==version``. Modules the file imports are not
    included (docs/security.md)."""
    parts: list[str] = []
    module_name = str(getattr(fn, "__module__", "") or "")
    module = sys.modules.get(module_name)
    path = getattr(module, "__file__", None)
    if not path:
        try:
            path = inspect.getsourcefile(fn)
        except TypeError:
            path = None
    if path:
        try:
            parts.append("file " + hashlib.blake2b(Path(path).read_bytes(), digest_size=16).hexdigest())
        except OSError:
            parts.append(f"file {Path(path).name} unreadable")
    dists = _distributions().get(module_name.partition(".")[0], [])
    parts += [f"{name}=={_version(name)}" for name in sorted(set(dists))]
    return "; ".join(parts) or "unknown"


_DISTRIBUTIONS: dict[str, list[str]] | None = None


def _distributions() -> dict[str, list[str]]:
    """Top-level package → installed distributions providing it (read once per process)."""
    global _DISTRIBUTIONS
    if _DISTRIBUTIONS is None:
        try:
            _DISTRIBUTIONS = {key: list(value) for key, value in packages_distributions().items()}
        except Exception:  # a broken installed distribution must not stop the run
            _DISTRIBUTIONS = {}
    return _DISTRIBUTIONS


def _version(name: str) -> str:
    try:
        return version(name)
    except (PackageNotFoundError, ValueError):
        return "?"


def qualname(fn: Callable[..., Any]) -> str:
    """``module.qualified_name`` of a function (a file's module name is unique per path)."""
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', '?')}"


async def _finish(name: str, pending: Any) -> Score:
    try:
        result = await pending
    except Exception as exc:
        raise MetricErrored(f"{name} raised {error_line(exc)}") from None
    return to_score(name, result)


def to_score(name: str, result: Any) -> Score:
    """A check's return value as a ``Score``: bool → 1.0/0.0, a number → itself, a ``Score`` as is; a
    ``Score``'s ``reason`` is kept in its details (the reports show it beside a failing value)."""
    if type(result) is Score:
        if result.reason and "reason" not in result.details:
            return Score(_number(name, result.value), {**result.details, "reason": str(result.reason)}, result.reason)
        return Score(_number(name, result.value), dict(result.details), result.reason)
    if isinstance(result, bool):
        return Score(1.0 if result else 0.0)
    if isinstance(result, int | float):
        return Score(_number(name, result))
    raise MetricErrored(f"{name} returned {type(result).__name__}; a check returns a float, a bool or "
                        "evalgate.Score")


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise MetricErrored(f"{name} returned a Score whose value is not a number ({value!r})") from None
    if not math.isfinite(number):
        raise MetricErrored(f"{name} returned {number!r}, not a finite number")
    return number


def error_line(exc: BaseException) -> str:
    """``Type: message`` on one line (at most 300 characters)."""
    message = " ".join(str(exc).split())
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return text if len(text) <= 300 else text[:299] + "…"


# --- installed plug-ins ---------------------------------------------------------------------------------------


def plugin_names() -> list[str]:
    """Names registered in the ``evalgate.metrics`` entry-point group of the installed packages."""
    return sorted({ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)})


def load_plugin(name: str, where: str) -> Any | None:
    """The object the installed plug-in ``name`` exports, or None when no package registers it."""
    found = list(entry_points(group=ENTRY_POINT_GROUP, name=name))
    if not found:
        return None
    if len({ep.value for ep in found}) > 1:
        raise UserError(f"metric {name!r} is registered by several installed plug-ins: "
                        f"{', '.join(sorted(ep.value for ep in found))}", where=where)
    try:
        return found[0].load()
    except Exception as exc:
        raise UserError(f"loading plug-in metric {name!r} ({found[0].value}) failed: {error_line(exc)}",
                        where=where) from None


def reference_base(where: str) -> Path | None:
    """The directory of the file in ``where`` (``path:line`` or ``path``), for ``file://`` references."""
    match = re.match(r"^(.*?)(?::\d+)?$", where)
    text = match.group(1) if match else where
    path = Path(text)
    return path.parent if text and path.suffix else None
