"""The gate: thresholds, per-metric and per-case verdicts, and the run verdict. Pure functions only.

Rules (documented in docs/gate.md):

* a metric result passes when its value meets its threshold (``>=`` min, ``<=`` max); a metric with
  no threshold is informational and always passes;
* a case fails when any of its metrics failed; it is errored when the target or a metric crashed, and
  (judge configured) when a gated metric that needs the judge has no judge verdict (``case_verdict``);
  in strict mode a skipped or unavailable metric fails the case;
* the run fails when a gated metric's suite average misses its threshold, when any critical case
  failed or errored (``fail_on_critical``), when more cases errored than ``max_errored``, when the judge
  left verdicts of gated metrics missing beyond that or scored fewer than half of one's (``judge_reason``,
  the first reason given), when the
  pass rate is below ``min_pass_rate``, in strict mode when any metric was skipped or unavailable,
  and when a comparison reports a significant regression with ``fail_on_regression``.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from evalgate.errors import EXIT_GATE_FAILED, EXIT_INTERRUPTED, EXIT_PASS, UserError
from evalgate.metrics.registry import judge_dependent
from evalgate.model import CaseStatus, MetricResult, MetricStatus, Threshold, trusted
from evalgate.text.numbers import score
from evalgate.verdict.aggregate import NOT_JUDGED

if TYPE_CHECKING:
    from evalgate.metrics.registry import Metric
    from evalgate.verdict.aggregate import RunAggregate


def parse_threshold(name: str, raw: Any, direction: str, where: str) -> Threshold:
    """A bare number means ``min`` for higher-is-better metrics and ``max`` for lower-is-better; a mapping is
    ``{min|max|gt|lt: x}`` (gt and lt are strict bounds)."""
    if isinstance(raw, bool):
        raise UserError(f"threshold for {name!r} must be a number or {{'min'|'max'|'gt'|'lt': number}}", where=where)
    if isinstance(raw, int | float):
        if not math.isfinite(raw):
            raise UserError(f"threshold for {name!r} must be finite", where=where)
        return Threshold(op="min" if direction == "higher" else "max", value=float(raw))
    try:
        threshold = Threshold.model_validate(raw)
    except ValidationError as exc:
        message = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise UserError(f"threshold for {name!r}: {message}", where=where) from None
    if not math.isfinite(threshold.value):
        raise UserError(f"threshold for {name!r} must be finite", where=where)
    return threshold


def resolve_thresholds(
    metrics: Mapping[str, Metric],
    layers: list[tuple[Mapping[str, Any], str]],
) -> dict[str, Threshold]:
    """Defaults from the registry, then each ``(mapping, where)`` layer in rising precedence.

    ``null`` in a layer removes a threshold (the metric becomes informational). Unknown metric names
    raise ``UserError`` naming the layer and suggesting the closest known name."""
    thresholds = {
        name: Threshold(op=m.default_op, value=m.default_threshold)  # type: ignore[arg-type]
        for name, m in metrics.items()
        if m.default_threshold is not None
    }
    for mapping, where in layers:
        for name, raw in mapping.items():
            if name not in metrics:
                raise UserError(f"unknown metric {name!r}{_suggest(name, metrics)}", where=where)
            if raw is None:
                thresholds.pop(name, None)
                continue
            thresholds[name] = parse_threshold(name, raw, metrics[name].direction, where)
    return thresholds


def _suggest(name: str, known: Mapping[str, Any]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def judge_metric(value: float, threshold: Threshold | None, details: dict[str, Any], *,
                 advisory: bool = False) -> MetricResult:
    """A computed value against its threshold. ``details`` is kept as given, not copied: metrics of one
    case may share one details mapping (it is read-only once scored). ``advisory``: a judged metric whose judge
    may not gate: recorded ``advisory`` with ``passed`` null, never as passed."""
    if advisory and threshold is None:
        return MetricResult(value=value, threshold=None, passed=None, status=MetricStatus.advisory, details=details)
    passed = True if threshold is None else threshold.admits(value)
    values: dict[str, Any] = {
        "value": value,
        "threshold": threshold,
        "passed": passed,
        "status": MetricStatus.passed if passed else MetricStatus.failed,
        "reason": None if passed else f"{score(value)} misses threshold {threshold}",
        "details": details,
    }
    if _already_valid(value, threshold, details):  # skip validation: one of the run's hottest paths
        return trusted(MetricResult, values)
    return MetricResult(**values)


def _already_valid(value: Any, threshold: Any, details: Any) -> bool:
    """True when validation would change nothing: exact types, text keys in ``details``."""
    return (
        type(value) is float
        and (threshold is None or type(threshold) is Threshold)
        and type(details) is dict
        and (not details or set(map(type, details)) == _TEXT_ONLY)
    )


_TEXT_ONLY = {str}


def case_verdict(
    metrics: Mapping[str, MetricResult], *, error: str | None, strict: bool, evidence: Collection[str] = (),
    optional: Collection[str] = (), needs_judge: Collection[str] = (), not_judged: str | None = None,
) -> tuple[CaseStatus, list[str]]:
    """A case's status and the reasons it did not pass.

    ``evidence``: the metrics whose value must come from the judge (judge configured;
    ``metrics.registry.judge_dependent``). One of them gated on this case (its result has a threshold) that
    is ``unavailable``, or valued only by a heuristic because the judge could not score it
    (``details.judge_unavailable``), makes the case ``errored``: missing evidence never passes.

    Any other gated metric that is ``unavailable`` (the answer lacks what it needs: no sources, no tool
    list, no number) errors the case too, unless it is in ``optional`` (the suite's ``optional_metrics``)
    or, without a judge (``evidence`` empty), in ``needs_judge`` (it only lacks the judge: like skipped).

    ``not_judged``: the reason judged metrics were skipped because the configured judge had no key
    (``runner.missing``). A case whose gated metrics were all skipped for it, none valued, is ``skipped``
    with that reason: not judged is never passed.
    """
    if error:
        return CaseStatus.errored, [error]
    found: list[tuple[int, str]] = []
    errored = False
    for name, result in metrics.items():
        status = result.status
        first = reason_rank(name)
        if status is _PASSED or status is _FAILED:
            if evidence and name in evidence and result.threshold is not None and "judge_unavailable" in result.details:
                errored = True
                found.append((first, f"{name}: no judge verdict ({result.details['judge_unavailable']}); "
                                     f"the heuristic's {result.value:.4g} does not stand in for it"))
            elif status is _FAILED:
                found.append((first, f"{name}: {_failed_checks(result.details) or result.reason or 'failed'}"))
        elif status is _ERRORED:
            errored = True
            found.append((first, f"{name} errored: {result.reason}"))
        elif status is _UNAVAILABLE and evidence and name in evidence and result.threshold is not None:
            errored = True
            found.append((first, f"{name} unavailable: {result.reason}"))
        elif (status is _UNAVAILABLE and result.threshold is not None and name not in optional
              and not (not evidence and name in needs_judge)):
            errored = True
            found.append((first, f"{name} has no value: {result.reason} (a gated metric; list it in "
                                 "optional_metrics if its cases may lack it)"))
        elif strict and status in _NOT_RUN:
            found.append((first, f"{name} {status.value} (strict mode): {result.reason}"))
    reasons = [text for _, text in sorted(found, key=lambda item: item[0])]
    if errored:
        return CaseStatus.errored, reasons
    if not reasons and not_judged and _only_judged(metrics, not_judged):
        names = ", ".join(name for name, r in metrics.items() if r.status is _SKIPPED and r.reason == not_judged
                          and r.threshold is not None)
        return CaseStatus.skipped, [f"{names}: {not_judged}"]
    return (CaseStatus.failed if reasons else CaseStatus.passed), reasons


def _only_judged(metrics: Mapping[str, MetricResult], not_judged: str) -> bool:
    """True when a gated metric was skipped for ``not_judged`` and no gated metric has a value."""
    gated = [r for r in metrics.values() if r.threshold is not None]
    return (any(r.status is _SKIPPED and r.reason == not_judged for r in gated)
            and not any(r.status is _PASSED or r.status is _FAILED for r in gated))


FIRST_REASONS = ("rules", "safety", "policy", "false_is_mine_rate")
"""Metrics whose failure a case's reasons name first: hard rules and safety before quality scores."""
LAST_REASONS = ("latency_ms", "num_tokens", "cost_usd")
"""Metrics named last: how fast or long, after what was wrong."""


def reason_rank(name: str) -> int:
    """Sort key of a metric's reason among a case's: rules and safety (0), others (1), latency and size (2)."""
    if name in FIRST_REASONS:
        return 0
    return 2 if name in LAST_REASONS else 1


def _failed_checks(details: Mapping[str, Any]) -> str | None:
    """``label: why`` of each failed rule check (the rules metric's ``details.checks``), or None."""
    checks = details.get("checks") if isinstance(details, Mapping) else None
    if not isinstance(checks, list):
        return None
    failed = [f"{check.get('label')}: {check.get('reason')}" if check.get("reason") else str(check.get("label"))
              for check in checks if isinstance(check, Mapping) and check.get("passed") is False]
    return "; ".join(failed) or None


def judge_evidence(judge_dependent: Collection[str], thresholds: Mapping[str, Threshold]) -> frozenset[str]:
    """The gated metrics among ``judge_dependent`` (``metrics.registry.judge_dependent``): with a judge
    configured, a case is errored when one of them has no judge verdict."""
    return frozenset(name for name in judge_dependent if thresholds.get(name) is not None)


def judge_metric_sets(metrics: Mapping[str, Metric], thresholds: Mapping[str, Threshold], *, judging: bool
                      ) -> tuple[frozenset[str], frozenset[str]]:
    """(judged, gated_judged) for ``RunAggregate``: the metrics the judge scores (none without a judge), and
    those among them the gate depends on: gated themselves, or read by a gated metric (``depends_on``)."""
    if not judging:
        return frozenset(), frozenset()

    judged = frozenset(name for name, metric in metrics.items() if metric.uses_judge)
    evidence = judge_evidence(judge_dependent(metrics), thresholds)
    gated = frozenset(name for name in judged
                      if name in evidence or any(name in metrics[e].depends_on for e in evidence if e in metrics))
    return judged, gated


def judge_reason(aggregate: RunAggregate, max_errored: int) -> str | None:
    """The gate reason for missing judge verdicts, or None. Given when a verdict of a gated judged metric is
    missing for the judge's sake (unreachable, unreadable, refused: not ``max_cost``, which has its own
    reason) and either more cases errored for it than ``max_errored`` allows, or the judge scored fewer than
    half of one gated metric's verdicts (its average would rest on a minority of the cases)."""
    gated = {name: tally for name, tally in sorted(aggregate.judge.items()) if name in aggregate.gated_judged}
    missing = sum(t.judge_missing for t in gated.values())
    if not missing:
        return None
    minority = [name for name, t in gated.items() if 2 * t.judge_missing > t.verdicts - t.budget]
    if aggregate.judge_errored_cases <= max_errored and not minority:
        return None
    verdicts = sum(t.verdicts - t.budget for t in gated.values())
    first = next((t.first_judge for t in gated.values() if t.first_judge), None)
    per_metric = ", ".join(f"{name} {t.judge_missing} of {t.verdicts - t.budget}"
                           for name, t in gated.items() if t.judge_missing)
    return (f"judge unavailable: {missing} of {verdicts} verdicts of gated judged metrics could not be scored "
            f"({per_metric}; first: {first}) — see results.json")


_PASSED, _FAILED, _ERRORED = MetricStatus.passed, MetricStatus.failed, MetricStatus.errored
_UNAVAILABLE = MetricStatus.unavailable
_SKIPPED = MetricStatus.skipped
_NOT_RUN = (MetricStatus.unavailable, MetricStatus.skipped)


NO_GATE = ("nothing could decide: no gated metric was scored (every gated metric advisory or unavailable, "
           "no rule gating)")


def nothing_gated(aggregate: RunAggregate, thresholds: Mapping[str, Threshold]) -> bool:
    """True when cases ran and no metric with a gating threshold has a value in any of them: the run's pass
    would then rest on nothing (``no_gate``)."""
    if aggregate.total_test_cases == 0:
        return False
    averages = aggregate.averages()
    return not any(averages.get(name) is not None for name in thresholds)


@dataclass(frozen=True)
class GatePolicy:
    strict: bool = False
    fail_on_critical: bool = True
    min_pass_rate: float | None = None
    max_errored: int = 0


@dataclass
class Verdict:
    passed: bool
    exit_code: int
    reasons: list[str] = field(default_factory=list)
    thresholds_passed: bool = True
    metric_passed: dict[str, bool | None] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "exit_code": self.exit_code, "reasons": list(self.reasons)}


def metric_table_verdicts(
    averages: Mapping[str, float | None], thresholds: Mapping[str, Threshold]
) -> dict[str, bool | None]:
    """Per metric: True/False against its threshold, None when informational or never computed."""
    verdicts: dict[str, bool | None] = {}
    for name, average in averages.items():
        threshold = thresholds.get(name)
        verdicts[name] = None if threshold is None or average is None else threshold.admits(average)
    return verdicts


def missing_evidence_reasons(aggregate: RunAggregate, thresholds: Mapping[str, Threshold]) -> list[str]:
    """One reason per gated metric that no case gave a value because every answer lacked what it needs
    (``unavailable`` on each case it applied to; judge-scored metrics have ``judge_reason``), and one per
    metric gated by the run or by a case's ``assert:`` that was ``skipped`` on every case (a case without
    the expectation it reads): a gate that checks nothing must not pass. The first reason seen names what
    was missing. Metrics needing a judge the run does not have (``unjudged``) are left to the judge rules."""
    reasons = []
    for name in sorted(thresholds):
        tally = aggregate.metrics.get(name)
        if (tally is None or tally.count or not tally.unavailable or name in aggregate.judged
                or name in aggregate.unjudged):
            continue
        why = tally.first_reason.get("unavailable") or "no value"
        reasons.append(f"{name}: 0 of {tally.unavailable + tally.errored} answers had what it needs ({why}) — "
                       "check target_response_map (or the target's reply)")
    for name, tally in sorted(aggregate.metrics.items()):
        # skipped on every case it gated (a run threshold or a case's ``assert:``): the gate checked nothing
        if (tally.count or tally.unavailable or not tally.skipped or not (name in thresholds or tally.gated)
                or name in aggregate.unjudged or tally.skipped_no_judge == tally.skipped):
            continue
        why = tally.first_reason.get("skipped") or "no value"
        reasons.append(f"{name}: skipped on all {tally.skipped} case(s) it gates ({why}) — a gate that checks "
                       "nothing does not pass; give those cases what it needs or remove its threshold/assert")
    return reasons


def nothing_decided_reason(aggregate: RunAggregate) -> str | None:
    """The gate reason when cases ran but none was decided and judged metrics were not judged (the judge's key
    was absent: ``runner.missing``): a suite whose only gate is a judged metric never passes on no evidence.
    Read from the metrics' skip reasons, so a merge of shards decides as the unsharded run."""
    if aggregate.total_test_cases == 0 or aggregate.total_passed + aggregate.total_failed + aggregate.total_errored:
        return None
    why = next((t.first_reason["skipped"] for _, t in sorted(aggregate.metrics.items())
                if str(t.first_reason.get("skipped", "")).startswith(NOT_JUDGED)), None)
    if why is None:
        return None
    return (f"nothing could decide: every case needs the judge, and judged metrics were {why} — run where the "
            "key is available, or add checks that need no judge (rules, expected_keywords)")


def run_verdict(
    aggregate: RunAggregate,
    thresholds: Mapping[str, Threshold],
    policy: GatePolicy,
    extra_reasons: list[str] | None = None,
    *,
    interrupted: bool = False,
) -> Verdict:
    """The run's verdict with every reason it failed (empty when it passed). ``interrupted`` (a signal or
    the caller stopped the run) never passes and exits ``EXIT_INTERRUPTED`` (130) instead of 1."""
    reasons: list[str] = []
    averages = aggregate.averages()
    metric_passed = metric_table_verdicts(averages, thresholds)
    for name, ok in metric_passed.items():
        if ok is False:
            reasons.append(f"{name} average {score(averages[name])} misses threshold {thresholds[name]}")
    thresholds_passed = not reasons
    reasons[:0] = missing_evidence_reasons(aggregate, thresholds)
    judge_missing = judge_reason(aggregate, policy.max_errored)
    if judge_missing is not None:  # first: it explains the errored cases and critical failures listed after it
        reasons.insert(0, judge_missing)
    if policy.fail_on_critical:
        for failure in aggregate.critical_failures:
            listed = failure.get("reasons") or []
            more = int(failure.get("more_reasons") or 0)
            reasons.append(
                f"critical case {failure['id']} {failure['status']} ({failure['source']})"
                + (f": {'; '.join(listed)}" if listed else "") + (f" (+{more} more)" if more else "")
            )
    if aggregate.total_errored > policy.max_errored:
        reasons.append(f"{aggregate.total_errored} case(s) errored (allowed: {policy.max_errored})")
    if policy.min_pass_rate is not None and aggregate.pass_rate < policy.min_pass_rate:
        reasons.append(f"pass rate {aggregate.pass_rate:.1%} is below min-pass-rate {policy.min_pass_rate:.1%}")
    if policy.strict:
        not_run = aggregate.not_run_metrics()
        if not_run:
            listed = ", ".join(f"{name} ({count})" for name, count in sorted(not_run.items()))
            reasons.append(f"strict mode: metrics skipped or unavailable: {listed}")
    if aggregate.total_test_cases == 0:
        reasons.append("no case was evaluated")
    undecided = nothing_decided_reason(aggregate)
    if undecided:
        reasons.append(undecided)
    reasons.extend(extra_reasons or [])
    passed = not reasons and not interrupted
    return Verdict(
        passed=passed,
        exit_code=EXIT_INTERRUPTED if interrupted else EXIT_PASS if passed else EXIT_GATE_FAILED,
        reasons=reasons,
        thresholds_passed=thresholds_passed,
        metric_passed=metric_passed,
    )
