"""The Python API: ``evalgate.run``, ``evalgate.validate`` and ``evalgate.compare`` (re-exported lazily by
``evalgate/__init__.py``; the CLI verbs wrap these functions).

Keyword arguments are the settings (docs/reference/settings.md: ``dataset``, ``config``, ``judge_provider``,
``metric_thresholds``, ``output_dir`` …) and take precedence over evalgate.yaml and ``EVALGATE_*``
variables, exactly as CLI flags do. ``metrics=`` and ``thresholds=`` add to evalgate.yaml's suite-level
``metrics:`` / ``thresholds:``; ``metrics=`` may hold functions (code checks) and declarations (dicts).
Configuration and dataset problems raise ``evalgate.UserError``; a failed gate does not raise — read
``RunResult.passed`` (or call ``RunResult.assert_passed()`` in a test).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalgate.config.settings import FIELD_NAMES, Settings, build_settings
from evalgate.config.suite import did_you_mean
from evalgate.dataset.summary import dataset_summary
from evalgate.errors import UserError
from evalgate.judges.factory import build_judge
from evalgate.metrics.checks import USER_METRICS, spec_of
from evalgate.model import CaseResult
from evalgate.report.progress import make_progress
from evalgate.runner.calibrate import explain_gating, labelled_examples
from evalgate.runner.run import execute
from evalgate.runner.setup import Prepared, prepare
from evalgate.runner.shard_judging import merged_pairwise
from evalgate.store.judge_cache import cache_path
from evalgate.store.reader import load_results
from evalgate.verdict.compare import DEFAULT_ALPHA, compare_runs
from evalgate.verdict.policy import loosenings, unknown
from evalgate.verdict.reasons import gate_reasons

API_ONLY = ("metrics", "thresholds", "env", "cwd")


# --- results --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunResult:
    """What ``evalgate.run`` returns: the verdict, the summary and where the results were written."""

    passed: bool
    exit_code: int
    """0 passed, 1 gate failed (or crashed), 130 interrupted (docs/gate.md "Exit status")."""
    reasons: list[str]
    """Why the gate failed (empty when it passed)."""
    status: str
    """completed, cancelled or crashed."""
    summary: dict[str, Any]
    """results.json ``summary``: pass rates, totals, tokens, cost."""
    metrics: dict[str, dict[str, Any]]
    """results.json ``metrics``: per metric average, count, threshold, passed."""
    results_path: Path
    db_path: Path
    document: dict[str, Any] = field(repr=False)
    """results.json without its ``results`` (read those with ``cases()``)."""

    @property
    def pass_rate(self) -> float:
        return float(self.summary.get("pass_rate", 0.0))

    def cases(self) -> list[CaseResult]:
        """Every case record of the run, read from results.json."""
        document = json.loads(self.results_path.read_text(encoding="utf-8"))
        return [CaseResult.from_stored(record) for record in document.get("results") or []]

    def assert_passed(self) -> None:
        """Raise ``AssertionError`` listing the gate's reasons unless it passed (for pytest)."""
        if not self.passed:
            listed = "\n".join(f"  - {reason}" for reason in self.reasons)
            raise AssertionError(f"evalgate gate failed ({self.results_path}):\n{listed}")


@dataclass(frozen=True)
class ValidationResult:
    """What ``evalgate.validate`` returns (nothing was called)."""

    cases: int
    files: list[dict[str, Any]]
    """Each ``{path, sha256, cases}``."""
    thresholds: dict[str, dict[str, float]]
    """Thresholds in force, ``{"min": x}`` / ``{"max": x}`` by metric."""
    custom_metrics: list[dict[str, Any]]
    """Each user metric: name, type (judged/check), origin, summary, and for a judged metric whose steps the
    judge writes, ``steps``: declared, cached, not cached, or why it cannot be told."""
    summary: dict[str, Any]
    """Counts by suite, category, difficulty, risk level, evolution type and tag."""
    notices: list[str] = field(default_factory=list)
    """One-line notices (a threshold that matches no selected case, …)."""
    explain: Any = field(default=None, repr=False)
    """``explain(case)`` → the case's metrics with thresholds and why each applies (``runner.explain``)."""
    selected: Any = field(default=None, repr=False)
    """The selected cases (iterable; streamed from the files when large)."""
    judged: list[str] = field(default_factory=list)
    """One line per gated judged metric: whether and on what evidence it can gate (``runner.calibrate``)."""

    def explanation(self) -> list[dict[str, Any]]:
        """Per selected case: ``{id, source, kind, metrics: [{metric, threshold, threshold_from, why}]}``."""
        return [{"id": case.id, "source": case.location, "kind": case.dialect, "metrics": self.explain(case)}
                for case in self.selected or []]


@dataclass(frozen=True)
class ComparisonResult:
    """What ``evalgate.compare`` returns: the baseline comparison of two runs."""

    regression: bool
    """True when a gated metric regressed significantly or a critical case flipped to fail."""
    reasons: list[str]
    """The regressions that fail a gate with ``fail_on_regression`` (empty without it)."""
    summary: str
    metrics: dict[str, dict[str, Any]]
    """Per metric: base, head, delta, confidence interval, significant, regression."""
    comparison: dict[str, Any] = field(repr=False)
    """The whole comparison, as results.json's ``comparison``."""
    loosened: list[dict[str, Any]] | None = None
    """How HEAD's gate policy is easier to pass than BASE's (``verdict.policy.loosenings``); None when either
    run recorded no policy (an older evalgate)."""


# --- settings from keyword arguments ---------------------------------------------------------------------


def settings_from(kwargs: Mapping[str, Any], *, env: Mapping[str, str] | None = None,
                  cwd: Path | None = None, defaults: Mapping[str, Any] | None = None,
                  what: str = "run") -> tuple[Settings, dict[str, Any]]:
    """Settings and suite-level config from API keyword arguments (they are the CLI-flag layer)."""
    unknown = [key for key in kwargs if key not in FIELD_NAMES]
    if unknown:
        key = unknown[0]
        raise TypeError(f"{what}() got an unexpected keyword argument {key!r}"
                        f"{did_you_mean(key, [*FIELD_NAMES, *API_ONLY])}")
    values = {key: _flag_value(value) for key, value in kwargs.items() if value is not None}
    settings, suite_config, _ = build_settings(cli=values, env=env, cwd=cwd, defaults=defaults)
    return settings, dict(suite_config)


def _flag_value(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, list | tuple) and all(isinstance(item, str | Path) for item in value):
        return [str(item) for item in value]
    return value


def with_api_metrics(suite_config: dict[str, Any], metrics: Iterable[Any] | None,
                     thresholds: Mapping[str, Any] | None) -> dict[str, Any]:
    """``suite_config`` with the API's ``metrics=`` entries appended and ``thresholds=`` over its own.
    A function entry is registered like ``@evalgate.metric`` (its decorator settings, else the defaults)."""
    if metrics is not None:
        if isinstance(metrics, str | bytes) or callable(metrics):
            metrics = [metrics]
        entries: list[Any] = []
        for entry in metrics:
            if callable(entry):
                spec = spec_of(entry, name=None, where="metrics=")
                USER_METRICS[spec.name] = spec
                entries.append(spec.name)
            elif isinstance(entry, str | Mapping):
                entries.append(entry if isinstance(entry, str) else dict(entry))
            else:
                raise TypeError(f"metrics= takes names, references, declarations (dicts) and functions, "
                                f"not {type(entry).__name__}")
        suite_config["metrics"] = [*(suite_config.get("metrics") or []), *entries]
    if thresholds is not None:
        suite_config["thresholds"] = {**(suite_config.get("thresholds") or {}), **dict(thresholds)}
    return suite_config


def _sync(make: Callable[[], Any]) -> Any:
    """``asyncio.run(make())``, in a helper thread when this thread already runs an event loop (Jupyter)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["value"] = asyncio.run(make())
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=work, name="evalgate-run")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


# --- run ---------------------------------------------------------------------------------------------------


def run(*, metrics: Iterable[Any] | None = None, thresholds: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None, cwd: str | Path | None = None, **settings: Any) -> RunResult:
    """Evaluate the datasets, apply the gate and write results.json + SQLite; synchronous.

    ``settings``: any setting by its name (``dataset="evals/"``, ``judge_provider="openai"``,
    ``metric_thresholds={...}``, ``output_dir=...``); ``env``: the environment to read ``EVALGATE_*`` and
    API keys from (default ``os.environ``); ``cwd``: where relative paths and evalgate.yaml are looked up.
    No progress display unless ``progress=`` is given; nothing is printed but the cost estimate (stderr)."""
    settings.setdefault("progress", "none")
    base = Path(cwd) if cwd is not None else None
    parsed, suite_config = settings_from(settings, env=env, cwd=base)
    suite_config = with_api_metrics(suite_config, metrics, thresholds)
    outcome = run_settings(parsed, suite_config, cwd=base)
    return result_of(outcome)


def run_settings(settings: Settings, suite_config: Mapping[str, Any], *, cwd: Path | None = None,
                 progress_for: Callable[[int], Any] | None = None, install_signal_handlers: bool = False,
                 baseline_loader: Callable[[], Any] | None = None) -> Any:
    """``evalgate.runner.run.execute`` run to completion (the CLI's ``run`` and the API share it)."""
    if settings.progress != "none" and progress_for is None:
        def progress_for(total: int) -> Any:
            return make_progress(settings.progress, total, quiet=False,
                                 every_seconds=settings.progress_interval_seconds)

    return _sync(lambda: execute(settings, suite_config, cwd=cwd, progress_for=progress_for,
                                 install_signal_handlers=install_signal_handlers, baseline_loader=baseline_loader))


def result_of(outcome: Any) -> RunResult:
    document = outcome.document
    gate = document.get("gate") or {}
    return RunResult(passed=bool(gate.get("passed")), exit_code=int(gate.get("exit_code", outcome.verdict.exit_code)),
                     reasons=list(gate.get("reasons") or []), status=str(document.get("status")),
                     summary=dict(document.get("summary") or {}), metrics=dict(document.get("metrics") or {}),
                     results_path=outcome.results_path, db_path=outcome.db_path, document=document)


# --- validate ----------------------------------------------------------------------------------------------


def validate(*, metrics: Iterable[Any] | None = None, thresholds: Mapping[str, Any] | None = None,
             env: Mapping[str, str] | None = None, cwd: str | Path | None = None,
             **settings: Any) -> ValidationResult:
    """Check datasets and configuration without calling anything; raises ``UserError`` on a problem."""
    base = Path(cwd) if cwd is not None else None
    parsed, suite_config = settings_from(settings, env=env, cwd=base, what="validate")
    suite_config = with_api_metrics(suite_config, metrics, thresholds)
    return validate_settings(parsed, suite_config, cwd=base, env=env)


def gating_explained(settings: Settings, prepared: Prepared) -> list[str]:
    return explain_gating(settings, prepared)


def validate_settings(settings: Settings, suite_config: Mapping[str, Any], *, cwd: Path | None = None,
                      env: Mapping[str, str] | None = None) -> ValidationResult:
    prepared = prepare(settings, suite_config, cwd)
    if prepared.calibration_sets:  # labelled examples are checked too: file:line, label values, metric names
        labelled_examples(prepared, cwd or Path.cwd())
    summary = dataset_summary(prepared.cases)
    return ValidationResult(
        cases=len(prepared.cases), files=prepared.files,
        thresholds={name: t.model_dump() for name, t in sorted(prepared.thresholds.items())},
        custom_metrics=custom_metric_rows(settings, prepared, env), summary=summary, notices=list(prepared.notices),
        explain=prepared.explain, selected=prepared.cases, judged=gating_explained(settings, prepared),
    )


def custom_metric_rows(settings: Settings, prepared: Prepared, env: Mapping[str, str] | None) -> list[dict[str, Any]]:
    """One row per user metric; for judged metrics whose steps the judge writes, whether they are cached
    (looked up in the judge cache without any call; the cache file is never created here)."""
    rows: list[dict[str, Any]] = []
    lookup = _steps_lookup(settings, env) if any(
        (m.info or {}).get("steps_source") == "generated" for m in prepared.user_metrics.values()) else None
    try:
        for name, metric in sorted(prepared.user_metrics.items()):
            info = dict(metric.info or {})
            row: dict[str, Any] = {"name": name, "type": info.get("type", "check"), "origin": info.get("origin"),
                                   "summary": metric.description,
                                   "threshold": (prepared.thresholds[name].model_dump()
                                                 if name in prepared.thresholds else None)}
            if info.get("type") == "judged":
                if info.get("steps_source") == "declared":
                    row["steps"] = "declared"
                else:
                    row["steps"] = lookup(str(info["criteria"])) if callable(lookup) else lookup
            rows.append(row)
    finally:
        closer = getattr(lookup, "close", None)
        if closer is not None:
            closer()
    return rows


class _CacheLookup:
    def __init__(self, judge: Any) -> None:
        from evalgate.judges.custom import criteria_judging  # optional: loads jinja2 (≈100 ms), for cached steps only

        self.judge = judge
        self.judging = criteria_judging(judge)

    def __call__(self, criteria: str) -> str:
        return "cached" if self.judging.cached_steps(criteria) else "not cached (the first run writes them: one call)"

    def close(self) -> None:
        self.judge.cache.close()


def _steps_lookup(settings: Settings, env: Mapping[str, str] | None) -> Any:
    if settings.judge_provider == "none":
        return "not cached (no judge configured: judge_provider none)"
    if not cache_path(settings.db_path).is_file():
        return "not cached (no judge cache yet: the first run writes them, one call per criteria)"
    try:
        judge = build_judge(settings, None, env if env is not None else settings.environment)
    except UserError as exc:
        return f"unknown (the judge is not usable here: {exc})"
    if judge is None:
        return "not cached"
    return _CacheLookup(judge)


# --- compare ---------------------------------------------------------------------------------------------


def compare(base: str | Path, head: str | Path, *, significance_level: float | None = None,
            repeat_rule: str | None = None, fail_on_regression: bool = False) -> ComparisonResult:
    """Compare two runs (results.json or SQLite files): one regression decision over the gated metrics, the
    pass rate, the critical cases and HEAD's pairwise judge preferences when HEAD judged them against BASE itself
    (weighted Holm–Bonferroni, the pass rate carrying 2/3 of α, at ``significance_level``, docs/trustworthy-verdicts.md),
    metric deltas with BCa intervals, flipped cases. ``significance_level``, ``repeat_rule`` and the
    ``regression_tolerance`` default to HEAD's own settings."""
    base_doc, head_doc = load_results(str(base)), load_results(str(head))
    return compare_documents(base_doc, head_doc, base_label=str(base), head_label=str(head),
                             significance_level=significance_level, repeat_rule=repeat_rule,
                             fail_on_regression=fail_on_regression)


def compare_documents(base_doc: Mapping[str, Any], head_doc: Mapping[str, Any], *, base_label: str,
                      head_label: str, significance_level: float | None = None, repeat_rule: str | None = None,
                      fail_on_regression: bool = False) -> ComparisonResult:
    """``compare`` for two results documents already read (``results`` may be any iterable of records, read
    once: ``evalgate view`` streams them from the database)."""
    config = (head_doc.get("metadata") or {}).get("config") or {}
    alpha = significance_level if significance_level is not None else config.get("significance_level", DEFAULT_ALPHA)
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0.0 < alpha < 1.0:
        raise UserError(f"significance level must be between 0 and 1, got {alpha!r}", where="significance_level")
    rule = repeat_rule or config.get("repeat_rule") or "majority"
    if rule not in ("majority", "all", "any"):
        raise UserError(f"repeat_rule must be majority, all or any (got {rule!r})", where="repeat_rule")
    thresholds = [str(name) for name, row in (head_doc.get("metrics") or {}).items()
                  if isinstance(row, dict) and row.get("threshold") is not None]
    pairwise, pairwise_gated, _ = merged_pairwise(  # HEAD's pairwise preferences, when judged against BASE itself
        [(head_label, head_doc)], base_doc.get("run_id"), head_doc.get("calibration") or {}, thresholds)
    comparison = compare_runs(base_doc, head_doc, alpha=float(alpha), baseline_source=base_label,
                              repeat_rule=rule,  # type: ignore[arg-type]  # checked just above
                              pairwise=(pairwise or {}).get("metrics"), pairwise_gated=pairwise_gated)
    reasons = gate_reasons(comparison=comparison, fail_on_regression=fail_on_regression, diluted=False)
    head_policy, base_policy = head_doc.get("gate_policy"), base_doc.get("gate_policy")
    loosened = None
    if isinstance(head_policy, dict) and not unknown(base_policy) and not unknown(head_policy):
        cases = {**(comparison.get("cases") or {}), **(comparison.get("dataset") or {})}
        removed = cases.get("removed")
        loosened = loosenings(base_policy, head_policy, removed if isinstance(removed, list) else None, cases=cases)
    return ComparisonResult(regression=bool(comparison.get("regression")), reasons=list(reasons),
                            summary=str(comparison.get("summary") or ""),
                            metrics=dict(comparison.get("metrics") or {}), comparison=comparison, loosened=loosened)
