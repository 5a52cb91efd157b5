"""Repeats and flakiness: ``repeat: N`` runs every case N times; the aggregate must see one verdict per
case, the reports must see which cases are flaky and how sure the suite averages are.

``RepeatSink`` sits between the engine and the ``RunAggregate``. It groups the repeats of each case as
they finish, holding only cases that still have outstanding repeats (bounded by the engine's
concurrency, because work is handed out case by case), and forwards one collapsed ``CaseResult`` per
case, so totals count cases, not repeats. Collapsing rules (``collapse_repeats``):

* counted repeats = the repeats not ``skipped``; no counted repeat → the case is ``skipped``;
* case ``passed`` when ``stats.repeat_verdict`` over the counted repeats passes (rule ``majority`` by
  default: passes > repeats/2; ``all``; ``any``), else ``failed`` when any repeat failed, else
  ``errored`` (the same rule ``compare`` applies to a baseline);
* ``flaky`` = the counted repeats disagree on pass/fail (errored counts as not passed);
* each metric's value = the mean over the repeats where it produced a value, its status = the repeat
  verdict over those repeats' pass/fail; a metric with no value anywhere keeps the most severe status
  seen (errored > unavailable > skipped);
* ``num_tokens`` and ``cost_usd`` = sums over the repeats (real consumption), ``latency_ms`` = mean.

With N > 1 the sink also keeps one number per case and metric (bounded: O(cases × metrics) floats) for
the suite averages' 95% confidence intervals: BCa bootstrap (Wilson for the pass rate) over cases with the repeats
averaged within each case (``stats.bca_mean_ci``, fixed seed, ``stats.DEFAULT_RESAMPLES``).

Judge stability (``judge_samples`` K > 1): a judged metric's ``details.samples`` holds the K sample
values; per metric the sink reports the mean and largest sample standard deviation (n−1 denominator)
and how many answers had samples on both sides of the threshold.
"""

from __future__ import annotations

import heapq
import itertools
import math
import statistics
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from evalgate.model import CaseResult, CaseStatus, MetricResult, MetricStatus, Threshold
from evalgate.text.numbers import score
from evalgate.verdict import stats
from evalgate.verdict.aggregate import JudgeTally, judge_verdicts

CONFIDENCE = 0.95
FLAKY_LIMIT = 200
"""Flaky cases listed in results.json (critical and high-risk first); all are counted."""
RISK_RANK = {"critical": 0, "high": 1, "medium": 2, "low": 3}
_SEVERITY = (MetricStatus.errored, MetricStatus.unavailable, MetricStatus.skipped)
_VALUED = (MetricStatus.passed, MetricStatus.failed, MetricStatus.advisory)


class ResultSink(Protocol):
    def add(self, result: CaseResult) -> None: ...


@dataclass(frozen=True, slots=True)
class CaseRepeats:
    """One case's repeats summarised: outcome per repeat and per-metric spread."""

    id: str
    index: int
    source: str
    risk_level: str
    status: CaseStatus
    outcomes: tuple[str, ...]
    """Each repeat's status, in repeat order."""
    passes: int
    counted: int
    """Repeats that were not skipped."""
    flaky: bool
    metrics: dict[str, stats.RepeatSummary]

    @property
    def pass_fraction(self) -> float | None:
        """Passing repeats / counted repeats; None when every repeat was skipped."""
        return self.passes / self.counted if self.counted else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "index": self.index,
            "source": self.source,
            "risk_level": self.risk_level,
            "status": self.status.value,
            "repeats": len(self.outcomes),
            "passes": self.passes,
            "pass_fraction": _round(self.pass_fraction),
            "pass_fraction_ci": _wilson(self.passes, self.counted),
            "outcomes": list(self.outcomes),
            "metrics": {name: _spread_dict(summary) for name, summary in self.metrics.items()},
        }


# ── collapsing one case ───────────────────────────────────────────────────────────────────────


def case_status(statuses: Sequence[CaseStatus], rule: stats.RepeatRule) -> CaseStatus:
    """The case verdict over its repeats' statuses (module doc)."""
    counted = [s for s in statuses if s is not CaseStatus.skipped]
    if not counted:
        return CaseStatus.skipped
    if stats.repeat_verdict([s is CaseStatus.passed for s in counted], rule):
        return CaseStatus.passed
    return CaseStatus.failed if CaseStatus.failed in counted else CaseStatus.errored


def case_rule(risk_level: str, rule: stats.RepeatRule) -> stats.RepeatRule:
    """The repeat rule for a case: a critical case passes only when it passes every repeat (pass^k)."""
    return "all" if str(risk_level).lower() == "critical" else rule


def summarise_case(results: Sequence[CaseResult], rule: stats.RepeatRule) -> CaseRepeats:
    """Outcomes and per-metric spread of one case's repeats (``results`` share one case); a critical case is
    judged by pass^k (``case_rule``)."""
    ordered = sorted(results, key=lambda r: r.repeat)
    rule = case_rule(ordered[0].risk_level, rule)
    statuses = [r.status for r in ordered]
    counted = [s for s in statuses if s is not CaseStatus.skipped]
    passes = sum(1 for s in counted if s is CaseStatus.passed)
    first = ordered[0]
    return CaseRepeats(
        id=first.id,
        index=first.index,
        source=first.source,
        risk_level=first.risk_level,
        status=case_status(statuses, rule),
        outcomes=tuple(s.value for s in statuses),
        passes=passes,
        counted=len(counted),
        flaky=0 < passes < len(counted),
        metrics=_metric_summaries(ordered, rule),
    )


def _metric_summaries(results: Sequence[CaseResult], rule: stats.RepeatRule) -> dict[str, stats.RepeatSummary]:
    """Per metric, the spread over the repeats where it produced a value."""
    summaries: dict[str, stats.RepeatSummary] = {}
    for name in _metric_names(results):
        valued = _valued(results, name)
        if valued:
            summaries[name] = stats.summarise_repeats(
                [m.value for m in valued], [m.status is MetricStatus.passed for m in valued], rule
            )
    return summaries


def _metric_names(results: Sequence[CaseResult]) -> list[str]:
    """Metric names in first-seen order over the repeats."""
    return list(dict.fromkeys(name for r in results for name in r.metrics))


def _valued(results: Sequence[CaseResult], name: str) -> list[MetricResult]:
    """The repeats' valued results of ``name``; values the heuristic gave in place of a missing judge verdict
    (``details.judge_unavailable``) only when no repeat has a judge's value."""
    metrics = (r.metrics.get(name) for r in results)
    valued = [m for m in metrics if m is not None and m.status in _VALUED and m.value is not None]
    judged = [m for m in valued if "judge_unavailable" not in m.details]
    return judged if judged and len(judged) < len(valued) else valued


def collapse_repeats(results: Sequence[CaseResult], rule: stats.RepeatRule = "majority") -> CaseResult:
    """One ``CaseResult`` standing for all repeats of a case (module doc); one repeat is returned as is."""
    if not results:
        raise ValueError("collapse_repeats needs at least one result")
    if len(results) == 1:
        return results[0]
    ordered = sorted(results, key=lambda r: r.repeat)
    return _collapsed(ordered, summarise_case(results, rule), case_rule(ordered[0].risk_level, rule))


def _collapsed(ordered: Sequence[CaseResult], summary: CaseRepeats, rule: stats.RepeatRule) -> CaseResult:
    first = ordered[0]
    metrics = {name: _collapse_metric(ordered, name, summary.metrics.get(name)) for name in _metric_names(ordered)}
    tokens = [r.num_tokens for r in ordered if r.num_tokens is not None]
    latencies = [r.latency_ms for r in ordered if r.latency_ms is not None]
    costs = [r.cost_usd for r in ordered if r.cost_usd is not None]
    return first.model_copy(update={
        "status": summary.status,
        "passed": summary.status is CaseStatus.passed,
        "error": next((r.error for r in ordered if r.error), None) if summary.status is CaseStatus.errored else None,
        "reasons": _reasons(ordered, summary, rule),
        "metrics": metrics,
        "num_tokens": sum(tokens) if tokens else None,
        "latency_ms": math.fsum(latencies) / len(latencies) if latencies else None,
        "cost_usd": math.fsum(costs) if costs else None,
        "repeat": 0,
    })


def _collapse_metric(ordered: Sequence[CaseResult], name: str, summary: stats.RepeatSummary | None) -> MetricResult:
    present = [r.metrics[name] for r in ordered if name in r.metrics]
    threshold = next((m.threshold for m in present if m.threshold is not None), None)
    verdicts = _judge_verdicts(present)
    if summary is not None and summary.mean is not None:
        reason = None if summary.passed else (
            f"passed in {round(summary.pass_fraction * summary.repeats)} of {summary.repeats} repeats "
            f"(mean {score(summary.mean)}, {summary.rule} rule)"
        )
        if all(m.status is MetricStatus.advisory for m in present if m.value is not None):
            return MetricResult(value=summary.mean, threshold=None, passed=None, status=MetricStatus.advisory,
                                details={"repeats": _spread_dict(summary), "judge_verdicts": verdicts})
        return MetricResult(value=summary.mean, threshold=threshold, passed=summary.passed,
                            status=MetricStatus.passed if summary.passed else MetricStatus.failed,
                            reason=reason, details={"repeats": _spread_dict(summary), "judge_verdicts": verdicts})
    worst = next(s for s in _SEVERITY if any(m.status is s for m in present))
    example = next(m for m in present if m.status is worst)
    return MetricResult(status=worst, threshold=threshold, reason=example.reason,
                        details={**example.details, "judge_verdicts": verdicts})


def _judge_verdicts(present: Sequence[MetricResult]) -> dict[str, Any]:
    """Judge verdicts the repeats asked for, how many were missing and why first (``aggregate.judge_verdicts``
    reads this from a collapsed result instead of counting it as one verdict)."""
    total = JudgeTally()
    for result in present:
        total.add(judge_verdicts(result))
    return total.as_dict()


def _reasons(ordered: Sequence[CaseResult], summary: CaseRepeats, rule: stats.RepeatRule) -> list[str]:
    if summary.status in (CaseStatus.passed, CaseStatus.skipped):
        return []
    head = (f"passed {summary.passes} of {summary.counted} repeats (critical: pass^{summary.counted}, every repeat "
            "must pass)" if rule == "all" and summary.risk_level == "critical"
            else f"passed {summary.passes} of {summary.counted} repeats ({rule} rule)")
    failing = next((r for r in ordered if not r.passed and r.status is not CaseStatus.skipped), None)
    detail = (failing.reasons or ([failing.error] if failing.error else [])) if failing else []
    return [head, *(f"repeat {failing.repeat}: {reason}" for reason in detail[:3])] if failing else [head]


# ── the sink ──────────────────────────────────────────────────────────────────────────────────


@dataclass
class _MetricCases:
    """Per metric: each case's mean over its repeats, and the within-case spread."""

    means: array = field(default_factory=lambda: array("d"))
    stdev_total: float = 0.0
    stdev_cases: int = 0


@dataclass
class _JudgeTally:
    """Per judged metric: sample spread over the answers judged K > 1 times."""

    answers: int = 0
    """Answers (each repeat's its own) whose value is the mean of K ≥ 2 judge samples (``judge_samples``)."""
    samples: int = 0
    """The largest K seen."""
    stdev_total: float = 0.0
    """Σ over those answers of the sample standard deviation of their K values, in the metric's score units;
    ``mean_stdev`` = stdev_total / answers."""
    stdev_max: float = 0.0
    """The largest of those standard deviations (``max_stdev``), in score units."""
    straddling: int = 0
    """Answers whose samples fall on both sides of the metric's threshold (``straddling_threshold``)."""


class RepeatSink:
    """Groups repeats, forwards one collapsed result per case to ``downstream`` (usually the
    ``RunAggregate``) and collects flaky cases, confidence-interval inputs and judge stability.

    Call ``finish()`` after the last result: it forwards cases whose repeats did not all finish (a
    cancelled run) with what they have. ``report()`` returns the additions to the results document.
    """

    def __init__(self, downstream: ResultSink, *, repeat: int = 1, rule: stats.RepeatRule = "majority",
                 flaky_limit: int = FLAKY_LIMIT) -> None:
        if repeat < 1:
            raise ValueError(f"repeat must be at least 1, got {repeat}")
        if rule not in stats.REPEAT_RULES:
            raise ValueError(f"repeat rule must be one of {', '.join(stats.REPEAT_RULES)}, got {rule!r}")
        self.downstream = downstream
        self.repeat = repeat
        self.rule: stats.RepeatRule = rule
        self.flaky_limit = flaky_limit
        self.pending: dict[tuple[int, str], list[CaseResult]] = {}
        self.cases = 0
        self.incomplete = 0
        self.flaky_count = 0
        self._flaky: list[tuple[tuple[int, int], int, dict[str, Any]]] = []
        self._order = itertools.count()
        self._metrics: dict[str, _MetricCases] = {}
        self._verdicts = array("d")
        self._fractions = array("d")
        self._judge: dict[str, _JudgeTally] = {}

    def add(self, result: CaseResult) -> None:
        self._judge_samples(result)
        if self.repeat == 1:
            self.cases += 1
            self.downstream.add(result)
            return
        key = (result.index, result.id)
        group = self.pending.setdefault(key, [])
        group.append(result)
        if len(group) >= self.repeat:
            del self.pending[key]
            self._emit(group)

    def finish(self) -> None:
        """Forward every case still waiting for repeats (in dataset order)."""
        for key in sorted(self.pending):
            self.incomplete += 1
            self._emit(self.pending.pop(key))

    def _emit(self, group: list[CaseResult]) -> None:
        ordered = sorted(group, key=lambda r: r.repeat)
        summary = summarise_case(ordered, self.rule)
        self.cases += 1
        rule = case_rule(ordered[0].risk_level, self.rule)
        self.downstream.add(_collapsed(ordered, summary, rule) if len(ordered) > 1 else ordered[0])
        self._collect(summary)

    def _collect(self, summary: CaseRepeats) -> None:
        if summary.status is not CaseStatus.skipped:
            self._verdicts.append(1.0 if summary.status is CaseStatus.passed else 0.0)
            self._fractions.append(summary.passes / summary.counted)
        for name, spread in summary.metrics.items():
            if spread.mean is None:
                continue
            tally = self._metrics.setdefault(name, _MetricCases())
            tally.means.append(spread.mean)
            if spread.stdev is not None:
                tally.stdev_total += spread.stdev
                tally.stdev_cases += 1
        if summary.flaky:
            self._keep_flaky(summary)

    def _keep_flaky(self, summary: CaseRepeats) -> None:
        """Keep the ``flaky_limit`` most important flaky cases: riskiest first, then dataset order."""
        self.flaky_count += 1
        rank = (RISK_RANK.get(summary.risk_level, 2), summary.index)
        entry = ((-rank[0], -rank[1]), next(self._order), summary.to_dict())
        if len(self._flaky) < self.flaky_limit:
            heapq.heappush(self._flaky, entry)
        elif self._flaky and entry[0] > self._flaky[0][0]:
            heapq.heapreplace(self._flaky, entry)

    def _judge_samples(self, result: CaseResult) -> None:
        for name, metric in result.metrics.items():
            details = metric.details
            if type(details) is dict and "samples" not in details:  # the usual case, decided cheaply
                continue
            values = _sample_values(details, name)
            if len(values) < 2:
                continue
            tally = self._judge.setdefault(name, _JudgeTally())
            spread = statistics.stdev(values)
            tally.answers += 1
            tally.samples = max(tally.samples, len(values))
            tally.stdev_total += spread
            tally.stdev_max = max(tally.stdev_max, spread)
            if _straddles(values, metric.threshold):
                tally.straddling += 1

    # ── results document ──

    @property
    def flaky(self) -> list[dict[str, Any]]:
        """Listed flaky cases, riskiest first, then in dataset order."""
        return [entry for _, _, entry in sorted(self._flaky, key=lambda e: (e[0][0], e[0][1]), reverse=True)]

    def confidence_intervals(self, *, resamples: int = stats.DEFAULT_RESAMPLES,
                             seed: int = stats.DEFAULT_SEED) -> dict[str, Any]:
        """95% intervals over cases (each case = the mean of its repeats): BCa bootstrap for the metric means
        and the mean pass fraction, Wilson for the pass rate (cases passing / cases); each names its method."""

        def interval(values: array) -> dict[str, Any] | None:
            # sorted: the interval must not depend on the order cases finished in (concurrency, merge)
            result = stats.bca_mean_ci(sorted(values), resamples=resamples, confidence=CONFIDENCE, seed=seed)
            if result is None:
                return None
            mean, low, high = result
            return {"mean": _round(mean), "low": _round(low), "high": _round(high), "cases": len(values),
                    "method": "BCa bootstrap"}

        def proportion(values: array) -> dict[str, Any] | None:
            result = stats.wilson_interval(int(sum(values)), len(values), confidence=CONFIDENCE)
            if result is None:
                return None
            rate, low, high = result
            return {"mean": _round(rate), "low": _round(low), "high": _round(high), "cases": len(values),
                    "method": "Wilson"}

        metrics: dict[str, Any] = {}
        for name, tally in sorted(self._metrics.items()):
            row = interval(tally.means)
            if row is not None:
                row["within_case_stdev"] = _round(tally.stdev_total / tally.stdev_cases) if tally.stdev_cases else None
                metrics[name] = row
        return {
            "confidence": CONFIDENCE,
            "method": "over cases, repeats averaged within each case: Wilson for the pass rate, BCa bootstrap "
                      "for means",
            "resamples": resamples,
            "seed": seed,
            "pass_rate": proportion(self._verdicts),
            "pass_fraction": interval(self._fractions),
            "metrics": metrics,
        }

    def judge_stability(self) -> dict[str, Any]:
        """Per judged metric with K > 1 samples: mean and largest sample stdev, answers straddling the threshold."""
        return {
            name: {
                "samples": tally.samples,
                "answers": tally.answers,
                "mean_stdev": _round(tally.stdev_total / tally.answers),
                "max_stdev": _round(tally.stdev_max),
                "straddling_threshold": tally.straddling,
            }
            for name, tally in sorted(self._judge.items())
        }

    def report(self) -> dict[str, Any]:
        """``{"summary": {...}, "flaky": [...]}``: what this sink adds to the results document."""
        summary: dict[str, Any] = {}
        judge = self.judge_stability()
        if judge:
            summary["judge_stability"] = judge
        if self.repeat == 1:
            return {"summary": summary}
        summary["repeats"] = {
            "repeat": self.repeat,
            "rule": self.rule,
            "cases": self.cases,
            "incomplete_cases": self.incomplete,
            "flaky_cases": self.flaky_count,
            "flaky_listed": len(self._flaky),
        }
        summary["confidence_intervals"] = self.confidence_intervals()
        return {"summary": summary, "flaky": self.flaky}


def apply_report(document: dict[str, Any], report: Mapping[str, Any]) -> None:
    """Merge ``RepeatSink.report()`` into a results document (``summary`` keys and top-level ``flaky``)."""
    document.setdefault("summary", {}).update(report.get("summary") or {})
    if "flaky" in report:
        document["flaky"] = list(report["flaky"])


def _sample_values(details: Mapping[str, Any], name: str) -> list[float]:
    """The judge sample values of metric ``name`` in ``details.samples`` (finite numbers only)."""
    samples = details.get("samples") if isinstance(details, Mapping) else None
    if not isinstance(samples, list):
        return []
    values = [s.get(name) for s in samples if isinstance(s, Mapping)]
    return [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)]


def _straddles(values: Sequence[float], threshold: Threshold | None) -> bool:
    """True when some samples meet the threshold and some miss it."""
    if threshold is None:
        return False
    admitted = {threshold.admits(v) for v in values}
    return len(admitted) == 2


def _spread_dict(summary: stats.RepeatSummary) -> dict[str, Any]:
    return {
        "mean": _round(summary.mean),
        "stdev": _round(summary.stdev),
        "min": _round(summary.min),
        "max": _round(summary.max),
        "values": summary.values,
        "pass_fraction": _round(summary.pass_fraction),
        "flaky": summary.flaky,
    }


def _wilson(passes: int, runs: int) -> dict[str, Any] | None:
    """The case's pass probability as a 95% Wilson interval over its counted repeats (5 of 5 → [0.566, 1]):
    how sure pass^k can be from k repeats."""
    interval = stats.wilson_interval(passes, runs, confidence=CONFIDENCE)
    if interval is None:
        return None
    return {"low": _round(interval[1]), "high": _round(interval[2]), "method": "Wilson"}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)
