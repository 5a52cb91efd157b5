"""One evaluation run from settings to verdict: load → select → plan → engine → gate → store/report.

The CLI and the Action entrypoint both call ``execute``; publishing (PR comment, artifacts) happens
after it returns, outside this module.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import gc
import json
import platform
import secrets
import signal
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalgate import __version__
from evalgate.config.options import MetricOptions
from evalgate.config.settings import Settings
from evalgate.dataset.stream import SelectedCases
from evalgate.errors import UserError
from evalgate.metrics.judged import default_category_metrics
from evalgate.metrics.registry import Metric, all_metrics
from evalgate.model import Case, Threshold
from evalgate.report.progress import FailureCollector
from evalgate.runner.engine import CasePlan, Engine
from evalgate.safety.redact import redact, redact_mapping
from evalgate.store.recorder import InlineRecorder, ProcessRecorder, recorder_for
from evalgate.store.results_json import SCHEMA_VERSION, CaseSpool, write_results
from evalgate.store.sqlite import SQLiteStore
from evalgate.verdict.aggregate import RunAggregate
from evalgate.verdict.gate import GatePolicy, Verdict, resolve_thresholds, run_verdict
from evalgate.verdict.repeats import RepeatSink, apply_report

if TYPE_CHECKING:
    from evalgate.github.baseline import BaselineLookup

DEMO_EXCLUDED = {"failing", "live"}


def demo_dir() -> Path:
    """Where the bundled demo suites live (repository checkout or the container image)."""
    return Path(__file__).resolve().parents[2] / "datasets"


def default_datasets() -> list[str]:
    """The passing demo suites: every sub-directory of ``datasets/`` except failing/ and live/."""
    root = demo_dir()
    if not root.is_dir():
        raise UserError("no --dataset given and no bundled demo suites found", where="dataset")
    return [str(p) for p in sorted(root.iterdir()) if p.is_dir() and p.name not in DEMO_EXCLUDED]


@dataclass
class Prepared:
    """Everything decided before the first case runs."""

    cases: SelectedCases
    """Iterable any number of times, with ``len()``; streamed from the files when large."""
    files: list[dict[str, Any]]
    thresholds: dict[str, Threshold]
    plan_for: Callable[[Case], CasePlan]
    metrics: dict[str, Metric]


@dataclass
class RunOutcome:
    document: dict[str, Any]
    results_path: Path
    db_path: Path
    verdict: Verdict
    failures: list[dict[str, Any]] = field(default_factory=list)


def prepare(settings: Settings, suite_config: Mapping[str, Any], cwd: Path | None = None) -> Prepared:
    """Validate and select the cases (streamed: large datasets are not held in memory), resolve
    thresholds, and build each case's metric plan."""
    from evalgate.config.suite import SuiteConfig, parse_suite_config
    from evalgate.dataset.stream import scan, selector

    metrics = all_metrics()
    config_name = settings.config or "evalgate.yaml"
    global_suite = parse_suite_config(dict(suite_config), config_name, label="") if suite_config else SuiteConfig()
    paths = settings.dataset or default_datasets()
    choose = selector(case_ids=settings.case_ids or None, first_n=settings.first_n,
                      categories=settings.category or None, tags=settings.tags or None, shard=settings.shard_tuple)
    scanned = scan(paths, cwd or Path.cwd(), select=choose)
    suites = dict(scanned.suites)
    _check_metric_names(metrics, global_suite, suites, scanned.case_metrics)
    thresholds = resolve_thresholds(metrics, _threshold_layers(global_suite, suites, settings))
    plan_for = make_planner(metrics, global_suite, suites)
    files = [file.as_metadata() for file in scanned.files]
    return Prepared(cases=scanned.cases, files=files, thresholds=thresholds, plan_for=plan_for, metrics=metrics)


def _threshold_layers(global_suite: Any, suites: Mapping[str, Any], settings: Settings) -> list[tuple[Mapping[str, Any], str]]:
    layers: list[tuple[Mapping[str, Any], str]] = []
    seen: dict[str, tuple[Any, str]] = {}
    for name, suite in suites.items():
        where = f"suite {name!r} thresholds"
        for metric, raw in (suite.thresholds or {}).items():
            if metric in seen and seen[metric][0] != raw:
                raise UserError(
                    f"suites disagree on the threshold for {metric!r} ({seen[metric][1]}: {seen[metric][0]}); "
                    "set it once in evalgate.yaml or metric_thresholds",
                    where=where,
                )
            seen[metric] = (raw, where)
        layers.append((suite.thresholds or {}, where))
    layers.append((global_suite.thresholds or {}, f"{settings.config or 'evalgate.yaml'}: thresholds"))
    layers.append((settings.metric_thresholds, "metric_thresholds (EVALGATE_METRIC_THRESHOLDS)"))
    return layers


def _check_metric_names(metrics: Mapping[str, Metric], global_suite: Any, suites: Mapping[str, Any],
                        case_metrics: Iterable[tuple[str, list[str]]]) -> None:
    from evalgate.config.suite import validate_metric_names

    for where, suite in [("config", global_suite), *((f"suite {n!r}", s) for n, s in suites.items())]:
        validate_metric_names(list(suite.metrics or []) + list(suite.exclude_metrics or []), metrics, where)
        for category, names in (suite.category_metrics or {}).items():
            validate_metric_names(names, metrics, f"{where} category_metrics.{category}")
    for where, names in case_metrics:
        validate_metric_names(names, metrics, where)


def make_planner(metrics: Mapping[str, Metric], global_suite: Any, suites: Mapping[str, Any]) -> Callable[[Case], CasePlan]:
    """Return ``plan_for(case)``: the metrics that apply to the case, dependencies first.

    Plans are cached by ``case_shape``: cases of one shape get the same plan (a 100k-case suite has a
    handful of shapes), so the ``applies`` rules run once per shape instead of once per case."""
    plan_uncached = make_uncached_planner(metrics, global_suite, suites)
    plans: dict[tuple[Any, ...], CasePlan] = {}

    def plan_for(case: Case) -> CasePlan:
        key = case_shape(case)
        plan = plans.get(key)
        if plan is None:
            if len(plans) >= PLAN_CACHE_SHAPES:  # a suite of (nearly) unique shapes: stay bounded
                plans.clear()
            plan = plans[key] = plan_uncached(case)
        return plan

    return plan_for


def make_uncached_planner(metrics: Mapping[str, Metric], global_suite: Any,
                          suites: Mapping[str, Any]) -> Callable[[Case], CasePlan]:
    """``plan_for(case)`` evaluating every metric's ``applies`` rule for each case (equal plans are
    shared)."""
    options_cache: dict[str | None, MetricOptions] = {}
    plan_cache: dict[tuple[Any, ...], CasePlan] = {}

    def options_for(suite_name: str | None) -> MetricOptions:
        if suite_name not in options_cache:
            merged = global_suite.options.model_dump(exclude_unset=True)
            suite = suites.get(suite_name) if suite_name else None
            if suite is not None:
                merged.update(suite.options.model_dump(exclude_unset=True))
            options_cache[suite_name] = MetricOptions.model_validate(merged)
        return options_cache[suite_name]

    def plan_for(case: Case) -> CasePlan:
        suite = suites.get(case.suite) if case.suite else None
        options = options_for(case.suite)
        names = {name for name, metric in metrics.items() if metric.applies_to(case, options)}
        excluded: set[str] = set(global_suite.exclude_metrics or [])
        configs = [config for config in (global_suite, suite) if config is not None]
        category_maps = [c.category_metrics for c in configs if c.category_metrics] or [default_category_metrics()]
        for category_map in category_maps:
            names |= set(category_map.get(case.category or "", []))
        for config in configs:
            names |= set(config.metrics or [])
            excluded |= set(config.exclude_metrics or [])
        names |= set(case.metrics or [])
        names -= excluded
        key = (case.suite, frozenset(names))
        if key not in plan_cache:
            plan_cache[key] = CasePlan(metrics=ordered_metrics(names, metrics), options=options)
        return plan_cache[key]

    return plan_for


PLAN_CACHE_SHAPES = 4096
"""Shapes remembered by ``make_planner`` (a few hundred bytes each)."""
SHAPE_IGNORED = frozenset({"id", "index", "source_file", "source_line", "suite", "category", "metrics"})
"""Fields outside the filled-or-not part of ``case_shape`` (provenance, or kept whole)."""


def case_shape(case: Case) -> tuple[Any, ...]:
    """What decides a case's plan: suite, category, the case's own ``metrics`` list, and for every
    other field set to a value how filled it is (``fill``).

    ``applies`` rules must depend on no more than this (the registry's contract; tests check every
    built-in metric against the uncached planner)."""
    filled: list[Any] = [case.suite, case.category, None if case.metrics is None else tuple(case.metrics)]
    for name, value in vars(case).items():
        if value is not None and name not in SHAPE_IGNORED:
            filled.append(name)
            filled.append(fill(value))
    return tuple(filled)


EMPTY, BLANK, FILLED, ZERO = "empty", "blank", "filled", "zero"
"""``fill`` codes (text, so that none equals a bool kept as it is)."""


def fill(value: Any) -> Any:
    """How filled a value is: ``EMPTY`` (an empty text or collection), ``BLANK`` (text, or a list of
    texts, that is only whitespace), ``ZERO`` (the number 0), else ``FILLED``; bools and enums are
    kept as they are."""
    kind = type(value)
    if kind is str:
        return FILLED if value.strip() else BLANK if value else EMPTY
    if kind is list:
        if not value:
            return EMPTY
        first = value[0]
        if type(first) is not str or first.strip():
            return FILLED
        return FILLED if any(type(item) is not str or item.strip() for item in value) else BLANK
    if kind is bool or isinstance(value, Enum):
        return value
    if kind is int or kind is float:
        return FILLED if value else ZERO
    if isinstance(value, str):
        return fill(str(value))
    if isinstance(value, list | tuple):
        return fill(list(value))
    return FILLED if value else EMPTY


def ordered_metrics(names: set[str], metrics: Mapping[str, Metric]) -> list[Metric]:
    """Topological order over ``depends_on`` (dependencies that apply come first), then by name."""
    ordered: list[Metric] = []
    placed: set[str] = set()

    def place(name: str, trail: tuple[str, ...]) -> None:
        if name in placed or name not in names:
            return
        if name in trail:
            raise UserError(f"metric dependency cycle: {' → '.join((*trail, name))}", where="metrics")
        for dependency in metrics[name].depends_on:
            place(dependency, (*trail, name))
        placed.add(name)
        ordered.append(metrics[name])

    for name in sorted(names):
        place(name, ())
    return ordered


def new_run_id(now: dt.datetime) -> str:
    return now.strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def build_document(
    *,
    run_id: str,
    timestamp: str,
    status: str,
    aggregate: RunAggregate,
    thresholds: Mapping[str, Threshold],
    verdict: Verdict,
    metadata: dict[str, Any],
    metrics: Mapping[str, Metric],
) -> dict[str, Any]:
    """The results.json document without ``results`` (those are streamed from the spool)."""
    averages = aggregate.averages()
    table: dict[str, Any] = {}
    for name, tally in sorted(aggregate.metrics.items()):
        metric = metrics.get(name)
        threshold = thresholds.get(name)
        table[name] = {
            "average": _round(tally.average),
            "count": tally.count,
            "failed": tally.failed,
            "skipped": tally.skipped,
            "unavailable": tally.unavailable,
            "errored": tally.errored,
            "min": _round(tally.minimum) if tally.count else None,
            "max": _round(tally.maximum) if tally.count else None,
            "threshold": threshold.model_dump() if threshold else None,
            "direction": metric.direction if metric else "higher",
            "kind": metric.kind if metric else "deterministic",
            "passed": verdict.metric_passed.get(name),
            "reasons": dict(tally.reasons) if tally.reasons else {},
        }
    judged_unavailable = sum(
        t.unavailable for n, t in aggregate.metrics.items() if n in metrics and metrics[n].kind == "judged"
    )
    summary = {
        "pass_rate": round(aggregate.pass_rate, 6),
        "weighted_pass_rate": round(aggregate.weighted_pass_rate, 6),
        "total_test_cases": aggregate.total_test_cases,
        "total_passed": aggregate.total_passed,
        "total_failed": aggregate.total_failed,
        "total_errored": aggregate.total_errored,
        "total_skipped": aggregate.total_skipped,
        "critical_failures": aggregate.critical_failure_count,
        "average_scores": {k: _round(v) for k, v in averages.items() if v is not None},
        "tokens": {
            "total": aggregate.tokens_total,
            "average": _round(aggregate.tokens_total / aggregate.tokens_cases) if aggregate.tokens_cases else None,
        },
        "latency_ms": {
            "average": _round(aggregate.latency_total / aggregate.latency_cases) if aggregate.latency_cases else None
        },
        "cost_usd": round(aggregate.cost_usd, 6),
        "judged_unavailable": judged_unavailable,
    }
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "timestamp": timestamp,
        "status": status,
        "summary": summary,
        "metrics": table,
        "thresholds": {name: t.model_dump() for name, t in sorted(thresholds.items()) if name in table},
        "thresholds_passed": verdict.thresholds_passed,
        "gate": verdict.as_dict(),
        "critical_failures": aggregate.critical_failures,
        "breakdowns": aggregate.breakdowns_dict(),
        "metadata": metadata,
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def run_metadata(settings: Settings, prepared: Prepared, target: Any) -> dict[str, Any]:
    config = settings.model_dump(exclude_defaults=True)
    return {
        "datasets": prepared.files,
        "config": redact_mapping(config),
        "versions": {"evalgate": __version__, "python": platform.python_version()},
        "judge": {"provider": settings.judge_provider, "model": settings.judge_model},
        "target": redact_mapping(target.describe()),
        "selected_cases": len(prepared.cases),
        "repeat": settings.repeat,
    }


async def execute(
    settings: Settings,
    suite_config: Mapping[str, Any],
    *,
    cwd: Path | None = None,
    progress_for: Callable[[int], Any] | None = None,
    stop: asyncio.Event | None = None,
    install_signal_handlers: bool = True,
    baseline_loader: Callable[[], BaselineLookup] | None = None,
) -> RunOutcome:
    """Run the evaluation and write results.json + SQLite. Always finalises what was computed.

    ``baseline_loader`` answers ``baseline: auto`` (the Action passes
    ``evalgate.github.baseline.auto_loader(...)``); a path baseline is read here, before the run.
    """
    from evalgate.calls.costs import add_spend
    from evalgate.calls.executor import Runtime
    from evalgate.judges.estimate import announce_estimate
    from evalgate.judges.factory import build_judge
    from evalgate.runner.warmup import preload
    from evalgate.targets.factory import build_target

    if uses_http_pool(settings):  # every module-level import of this path is done: no concurrent imports
        preload(("aiohttp",))
    prepared = prepare(settings, suite_config, cwd)
    baseline = None
    if settings.baseline_kind != "none":  # the default: nothing to look up or import
        from evalgate.github.baseline import resolve_baseline

        baseline = await asyncio.to_thread(resolve_baseline, settings.baseline, auto=baseline_loader, cwd=cwd)
    if baseline is not None and baseline.document is not None:  # keep only what the comparison reads
        baseline.document["results"] = [_compared_record(r) for r in baseline.document["results"]]
    progress = progress_for(len(prepared.cases) * settings.repeat) if progress_for else None
    stop = stop or asyncio.Event()
    runtime = Runtime.from_settings(settings, stop)
    judge = build_judge(settings, runtime)
    target = build_target(settings, runtime)
    estimate: dict[str, Any] | None = None
    now = dt.datetime.now(dt.UTC)
    run_id, timestamp = new_run_id(now), now.strftime("%Y-%m-%dT%H:%M:%SZ")
    output_dir = settings.output_path
    output_dir.mkdir(parents=True, exist_ok=True)
    results_path = output_dir / "results.json"
    spool = CaseSpool(output_dir / ".cases.jsonl")
    store = SQLiteStore(settings.db_path, run_id, timestamp)
    recorder = recorder_for(spool, store, len(prepared.cases) * settings.repeat)
    aggregate = RunAggregate()
    failures = FailureCollector()
    repeats = RepeatSink(aggregate, repeat=settings.repeat, rule=settings.repeat_rule)
    sinks: list[Any] = [repeats, recorder, failures]
    if progress is not None:
        sinks.append(progress)
    engine = Engine(
        target=target,
        plan_for=prepared.plan_for,
        thresholds=prepared.thresholds,
        sinks=sinks,
        concurrency=settings.concurrency,
        spare_workers=spare_workers(settings.concurrency, target),
        strict=settings.strict_metrics,
        judge=judge,
        repeat=settings.repeat,
        stop=stop,
    )
    status = "crashed"
    handlers = _install_handlers(stop) if install_signal_handlers else []
    frozen = _freeze_for_large_run(len(prepared.cases) * settings.repeat)
    try:
        running = asyncio.ensure_future(engine.run(prepared.cases))
        estimating = asyncio.ensure_future(estimate_once_started(
            running, lambda: announce_estimate(settings, prepared, judge, target)))
        try:
            stats = await running
            estimate = await estimating
        except BaseException:
            estimating.cancel()
            raise
        status = "cancelled" if stats.cancelled else "completed"
    finally:
        _thaw(frozen)
        for sig in handlers:
            asyncio.get_running_loop().remove_signal_handler(sig)
        if progress is not None and hasattr(progress, "close"):
            progress.close()
        with contextlib.suppress(Exception):
            await target.aclose()
        if judge is not None and hasattr(judge, "aclose"):
            with contextlib.suppress(Exception):
                await judge.aclose()
        repeats.finish()
        recorder_failure = _close_recorder(recorder)  # every recorded case is in the spool after this
        crash_raised = status == "crashed"
        if recorder_failure is not None:  # some finished cases may be missing from the results
            status = "crashed"
        extra = [f"run {status} before every case finished"] if status != "completed" else []
        if runtime.ledger.exceeded:
            extra.append(f"max_cost ${settings.max_cost:g} reached: the run stopped before exceeding the budget")
        verdict = run_verdict(aggregate, prepared.thresholds, policy_of(settings), extra)
        metadata = run_metadata(settings, prepared, target) | runtime.metadata() | {"estimate": estimate}
        if judge is not None:
            metadata["judge"] = redact_mapping(judge.metadata())
        document = build_document(
            run_id=run_id, timestamp=timestamp, status=status, aggregate=aggregate,
            thresholds=prepared.thresholds, verdict=verdict, metadata=metadata, metrics=prepared.metrics,
        )
        add_spend(document["summary"], runtime.ledger)
        apply_report(document, repeats.report())
        regression_reasons = attach_comparison(document, baseline, spool.iter_records_in_order(), settings)
        if regression_reasons:
            verdict = run_verdict(aggregate, prepared.thresholds, policy_of(settings), extra + regression_reasons)
            document["gate"] = verdict.as_dict()
        write_results(results_path, document, spool)
        spool.close()
        store.finish(document)
        spool.path.unlink(missing_ok=True)
        if recorder_failure is not None and not crash_raised:
            raise recorder_failure
    if target.kind != "recorded" and aggregate.total_test_cases and aggregate.total_errored == aggregate.total_test_cases \
            and engine.stats.target_errors == aggregate.total_test_cases:
        raise UserError(f"the target never answered ({settings.target_url or settings.target}); "
                        f"partial results are in {results_path}", where="target")
    return RunOutcome(document=document, results_path=results_path, db_path=settings.db_path,
                      verdict=verdict, failures=failures.failures)


def spare_workers(concurrency: int, target: Any) -> int:
    """Cases in progress beyond ``concurrency`` (see ``Engine``): half as many again, at least two, when
    ``target.calls_bounded`` (every call the cases make waits at the executor's bound) and
    ``concurrency`` > 1; none otherwise. At 50 ms latency and C = 8 a case spends ≈ 2 ms of each 100 ms
    scoring between its calls, at 2 ms latency and C = 64 about as long as it waits: half of C keeps the
    slots full in both."""
    if concurrency == 1 or not getattr(target, "calls_bounded", False):
        return 0  # concurrency 1 stays one case at a time, start to finish (what debugging expects)
    return max(2, concurrency // 2)


def uses_http_pool(settings: Settings) -> bool:
    """Whether the run calls over ``http_pool`` (aiohttp): an HTTP or model target, or a judge."""
    return settings.target in ("http", "openai") or settings.judge_provider != "none"


DISPATCH_TURNS = 256
"""Event-loop turns given to the workers' first calls before the estimate: opening C loopback connections
and writing the requests takes ≈ 100 turns at C = 8 (measured: all 8 requests received before the
estimate from 128 turns on); an idle turn costs ≈ 10 µs, so 256 spend at most a few milliseconds."""


async def estimate_once_started(running: asyncio.Future[Any], announce: Callable[[], dict[str, Any] | None],
                                turns: int = DISPATCH_TURNS) -> dict[str, Any] | None:
    """``announce()`` (the cost estimate: it renders up to 200 judge prompts, ≈ 60 ms with jinja2's
    import), run in a thread once the event loop has turned ``turns`` times (fewer if ``running`` ends
    first). The run's first calls are then already sent, and the estimate's work fills the wait for
    their replies: in the thread it yields the interpreter to the event loop every few milliseconds
    instead of holding the loop for its whole duration. It only reads the cases (each iteration is a
    fresh one) and renders templates (jinja2 environments are thread-safe)."""
    for _ in range(turns):
        if running.done():
            break
        await asyncio.sleep(0)
    return await asyncio.to_thread(announce)


LARGE_RUN_CASES = 5_000


def _freeze_for_large_run(cases: int) -> tuple[int, int, int] | None:
    """For ``cases`` ≥ ``LARGE_RUN_CASES``: move every object alive now (modules, settings, plans…) out
    of the garbage collector's sight until the run ends (``gc.freeze``), so its full collections scan
    only what the run creates, and collect the young generation every ``GC_YOUNG_THRESHOLD``
    allocations instead of 700 (fewer rescans of the cases in flight). Together ~10 % of a 100k-case
    run. Returns the thresholds to restore (None: nothing changed)."""
    if cases < LARGE_RUN_CASES:
        return None
    previous = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *previous[1:])
    return previous


def _thaw(previous: tuple[int, int, int] | None) -> None:
    """Undo ``_freeze_for_large_run``."""
    if previous is not None:
        gc.set_threshold(*previous)
        gc.unfreeze()


GC_YOUNG_THRESHOLD = 10_000


def _close_recorder(recorder: InlineRecorder | ProcessRecorder) -> Exception | None:
    """Close ``recorder``; its failure is returned, to be raised once the results are written."""
    try:
        recorder.close()
    except Exception as exc:
        return exc
    return None


COMPARED_RECORD_KEYS = ("id", "source", "risk_level", "status", "passed", "repeat")


def attach_comparison(document: dict[str, Any], baseline: BaselineLookup | None, records: Iterable[bytes],
                      settings: Settings) -> list[str]:
    """Put ``baseline`` (what was asked, found or why not) and ``comparison`` into ``document``; return
    the gate reasons the comparison adds (only with ``fail_on_regression``). ``records`` are the run's
    case records as JSON, streamed and slimmed to what the comparison reads. Never raises."""
    if baseline is None:
        return []
    info: dict[str, Any] = {"setting": settings.baseline, "found": baseline.found, "source": baseline.source,
                            "warning": baseline.warning}
    document["baseline"] = info
    document["comparison"] = None
    if baseline.document is None:
        return []
    from evalgate.verdict.compare import compare_runs, comparison_gate_reasons

    head = {**document, "results": (_compared_record(json.loads(record)) for record in records)}
    try:
        comparison = compare_runs(baseline.document, head, alpha=settings.significance_level,
                                  baseline_source=baseline.source, repeat_rule=settings.repeat_rule)
    except Exception as exc:  # a comparison problem must not lose the run's results
        info["warning"] = redact(f"no comparison: {type(exc).__name__}: {exc}")
        return []
    document["comparison"] = comparison
    return comparison_gate_reasons(comparison, settings.fail_on_regression)


def _compared_record(record: dict[str, Any]) -> dict[str, Any]:
    slim = {key: record[key] for key in COMPARED_RECORD_KEYS if key in record}
    slim["metrics"] = {name: {"value": m.get("value")} for name, m in (record.get("metrics") or {}).items()
                       if isinstance(m, dict)}
    return slim


def policy_of(settings: Settings) -> GatePolicy:
    return GatePolicy(strict=settings.strict_metrics, fail_on_critical=settings.fail_on_critical,
                      min_pass_rate=settings.min_pass_rate, max_errored=settings.max_errored)


def _install_handlers(stop: asyncio.Event) -> list[int]:
    loop = asyncio.get_running_loop()
    installed: list[int] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
    return installed
