"""Baseline-vs-head comparison: the ``comparison`` block of results.json.

Cases are matched by id. A case run several times (``repeat`` 0, 1, …) is collapsed first: each
metric's value is the mean over the repeats that have a finite number, and its outcome is the repeat
verdict (``evalgate.verdict.stats.repeat_verdict``, majority by default; **every repeat** — pass^k — for
a critical case) over the repeats not skipped.

One regression decision (docs/trustworthy-verdicts.md). Every comparison that can fail a run is one
test of "the PR made this worse" in one family:

* each gated metric (a threshold in head): pairs are the shared cases with a value in both runs;
  d = head − base; worse = lower for ``direction: higher``. The one-sided p-value tests
  H0: mean worsening ≤ tolerance (``verdict.tolerance``): the exact McNemar test when every value is
  0 or 1 and there is no tolerance, else the paired sign-flip permutation test on d shifted by the
  tolerance (exact up to 16 nonzero pairs, Monte Carlo beyond);
* the pass rate: exact one-sided McNemar on (pass→fail, fail→pass) flips;
* the critical cases (when any is shared): the exact stratified exchange test
  (``stats.stratified_exchange_p``) of base passes vs head passes over their repeats;
* each gated metric judged pairwise (``pairwise``: the judge's preferences between the base's and the head's
  answers, ``verdict.pairwise``): the exact one-sided sign test of losses vs wins (ties dropped).

The family's p-values are adjusted by the weighted Holm–Bonferroni procedure (``stats.weighted_holm``): the
pass rate, the primary endpoint, carries weight ``PASS_RATE_WEIGHT`` (2/3) and the other slots — one per gated
metric, one for the critical cases — share the rest equally (equal weights when the pass rate is the only
member or absent); a metric's absolute test and its pairwise test split that metric's slot in half
(``family_weights``). A test is rejected when its adjusted p ≤ α, so an unchanged PR is flagged with
probability ≤ α (family-wise) for any weights. ``regression`` (top level) = a gated metric, the pass rate,
a pairwise test or the critical cases rejected — the latter only when some critical case passed
every base repeat and fails on head (a case flaky on the base is listed as flaky, never as the
regression). Improvements are the mirror tests in their own Holm family; ungated metrics form a third,
informational family. Each metric row carries ``verdict``: regression · improvement · no change ·
no meaningful change (the interval lies inside ±tolerance) · inconclusive (``detectable``: the change
n pairs detect with 80 % power at the member's first-step level w·α).

Intervals: metric deltas BCa bootstrap (confidence 1 − α), pass rates Wilson; each names its method.

``load_results`` reads results.json or evalgate's SQLite store (``load_results_sqlite``).
"""

from __future__ import annotations

import hashlib
import math
import statistics
from array import array
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from evalgate.text.numbers import score
from evalgate.verdict import sequential, stats
from evalgate.verdict.adaptive import Plan, base_outcomes
from evalgate.verdict.tolerance import Tolerance, resolve_tolerances

if TYPE_CHECKING:
    import numpy as np

DEFAULT_ALPHA = 0.05
PROCEDURE = "weighted Holm–Bonferroni"
PASS_RATE_WEIGHT = 2.0 / 3.0
"""Share of the family's weight (of α at Holm's first step) the pass rate gets; the other members split the
rest. Chosen with ``python -m bench.stats`` (docs/trustworthy-verdicts.md, "Why the pass rate carries 2/3 of α")."""
PAIRWISE_TEST = "exact sign test (one-sided)"
INCONCLUSIVE_P = 0.1
"""A member not significant but with a one-sided p at most this leans worse: listed as inconclusive."""
INTERVAL_METHOD = "BCa bootstrap"
PROPORTION_METHOD = "Wilson"
DETECTION_POWER = 0.8


@dataclass(slots=True)
class _Case:
    """One case of one run with its repeats collapsed."""

    id: str
    source: str
    risk_level: str
    status: str | None
    """``passed``/``failed``/``errored`` from the repeat verdict; None when every repeat was skipped."""
    values: dict[str, float] = field(default_factory=dict)
    passes: int = 0
    runs: int = 0
    """Passing repeats and repeats not skipped."""
    binary: set[str] = field(default_factory=set)
    """Metrics whose every value on this case (every repeat) is 0 or 1."""
    expectation: str | None = None
    """The digest of what the case asks and expects (the record's ``expectation``; None in older runs)."""

    @property
    def critical(self) -> bool:
        return self.risk_level == "critical"


def compare_runs(
    base: Mapping[str, Any],
    head: Mapping[str, Any],
    *,
    alpha: float = DEFAULT_ALPHA,
    resamples: int = stats.DEFAULT_RESAMPLES,
    seed: int = stats.DEFAULT_SEED,
    pass_rate_weight: float = PASS_RATE_WEIGHT,
    gated_metrics: set[str] | None = None,
    baseline_source: str | None = None,
    repeat_rule: stats.RepeatRule = "majority",
    tolerances: Mapping[str, Any] | None = None,
    pairwise: Mapping[str, Mapping[str, Any]] | None = None,
    pairwise_gated: Collection[str] = (),
    adaptive: bool | None = None,
) -> dict[str, Any]:
    """Compare a head run with its baseline (both results.json documents); returns the block.

    ``gated_metrics`` overrides which metrics count as gated (default: those with a threshold in
    head). ``baseline_source`` describes where the baseline came from (e.g. the artifact and run).
    ``tolerances`` is a ``regression_tolerance`` mapping (default: head's ``metadata.config``'s), on top
    of ``verdict.tolerance.DEFAULT_TOLERANCES``. ``resamples`` is used by the bootstrap intervals and the
    Monte Carlo permutation tests alike. ``pass_rate_weight`` (0 < w < 1) is the pass rate's weight in the
    weighted Holm family (0.5 with one other member is plain Holm). ``pairwise`` is the judge's preference
    table (``verdict.pairwise.summarize``: metric → wins, losses, ties); the metrics in ``pairwise_gated`` join
    the family (block ``pairwise``), the others are reported only. ``adaptive`` (default: head's
    ``metadata.config.adaptive``, i.e. ``repeat: adaptive``): every member but the pass rate reads head's first
    trials only, and the pass rate's p-value is the group-sequential one of ``verdict.adaptive`` (block
    ``adaptive``).
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be between 0 and 1, got {alpha}")
    if not 0.0 < pass_rate_weight < 1.0:
        raise ValueError(f"pass_rate_weight must be between 0 and 1, got {pass_rate_weight}")
    if repeat_rule not in stats.REPEAT_RULES:
        raise ValueError(f"repeat rule must be one of {', '.join(stats.REPEAT_RULES)}, got {repeat_rule!r}")
    if tolerances is None:
        config = (head.get("metadata") or {}).get("config") or {}
        tolerances = config.get("regression_tolerance") if isinstance(config, Mapping) else None
    resolved = resolve_tolerances(tolerances if isinstance(tolerances, Mapping) else None)
    if adaptive is None:
        config = (head.get("metadata") or {}).get("config") or {}
        adaptive = bool(config.get("adaptive")) if isinstance(config, Mapping) else False
    base_cases = _collapse(base.get("results", []), repeat_rule)
    head_records = head.get("results", [])
    if adaptive:
        head_records = list(head_records)  # read twice: first trials, then every trial (the looks)
    head_cases = _collapse([r for r in head_records if not r.get("repeat")] if adaptive else head_records,
                           repeat_rule)
    shared = [case_id for case_id in head_cases if case_id in base_cases]
    gated = _gated_names(head) if gated_metrics is None else set(gated_metrics)
    metrics = {
        name: _metric_block(
            name, base_cases, head_cases, shared,
            direction=_direction(name, head, base),
            gated=name in gated,
            tolerance=resolved.get(name, Tolerance()),
            alpha=alpha,
            resamples=resamples,
            seed=seed,
        )
        for name in _metric_names(base_cases, head_cases, shared)
    }
    pass_rate, regressions, fixes = _compare_outcomes(base_cases, head_cases, shared, alpha, resamples, seed)
    critical = _critical_block(base_cases, head_cases, shared, regressions)
    cases: dict[str, list[Any]] = {
        "regressions": regressions,
        "fixes": fixes,
        "new": [case_id for case_id in head_cases if case_id not in base_cases],
        "removed": [case_id for case_id in base_cases if case_id not in head_cases],
    }
    lost = _lost_values(base_cases, head_cases, shared)
    preferences = _pairwise_block(pairwise or {}, pairwise_gated)
    plan = None
    if adaptive:
        plan = adaptive_plan(base.get("results", []), head_records, alpha, pass_rate_weight * alpha)
        if plan.stage_p:
            pass_rate["test"] = (f"group-sequential, {len(plan.stage_p)} of {len(plan.design.fractions)} looks "
                                 f"({plan.design.spending} spending, inverse-normal combination of exact tests)")
            pass_rate["p_value"] = sequential.sequential_p(plan.stage_p, plan.design)
            pass_rate["looks"] = plan.report()["looks"]
    family = _decide(metrics, pass_rate, critical, alpha, pass_rate_weight, preferences)
    regression = any(test["rejected"] for test in family["tests"])
    verdict, inconclusive = three_valued(regression, pass_rate, metrics, critical, cases, plan,
                                         pass_rate_weight * alpha)
    return {
        "baseline": {
            "source": baseline_source or "baseline results",
            "run_id": base.get("run_id"),
            "timestamp": base.get("timestamp"),
        },
        "significance_level": alpha,
        "bootstrap": {"resamples": resamples, "seed": seed, "method": INTERVAL_METHOD},
        "family": family,
        "metrics": metrics,
        "pass_rate": pass_rate,
        "critical": critical,
        "pairwise": preferences,
        "cases": cases,
        "dataset": dataset_changes(base_cases, head_cases, shared),
        "diluted": diluted(base_cases, head_cases, shared, head.get("thresholds") or {}),
        "lost_values": lost,
        "regression": regression,
        "verdict": verdict,
        "inconclusive": inconclusive,
        **({"adaptive": plan.report()} if plan is not None else {}),
        "summary": _summary(metrics, pass_rate, critical, cases, alpha) + _pairwise_sentence(preferences, alpha)
        + _inconclusive_sentence(verdict, inconclusive) + _lost_sentence(lost),
    }


def adaptive_plan(base_records: Iterable[Mapping[str, Any]], head_records: Iterable[Mapping[str, Any]],
                  alpha: float, level: float) -> Plan:
    """The adaptive design's looks replayed from the two runs' records (``verdict.adaptive``): look 1 on
    head's first trials, look 2 on the re-tried cases' trial 1 when look 1 continued."""
    outcomes = base_outcomes(base_records)
    plan = Plan(alpha=alpha, level=level)
    trials: dict[str, list[tuple[int, bool, bool]]] = {}
    for record in head_records:
        status = _status(record)
        if status == "skipped":
            continue
        trials.setdefault(str(record["id"]), []).append(
            (int(record.get("repeat") or 0), status == "passed",
             str(record.get("risk_level") or "").lower() == "critical"))
    for case_id, runs in trials.items():
        for _, passed, critical in sorted(runs):
            plan.add(case_id, critical, passed, outcomes.get(case_id, ()))
    plan.first_look()
    if plan.decision == "continue":
        plan.second_look()
    return plan


def three_valued(regression: bool, pass_rate: Mapping[str, Any], metrics: Mapping[str, Mapping[str, Any]],
                 critical: Mapping[str, Any] | None, cases: Mapping[str, list[Any]],
                 plan: Plan | None, level: float) -> tuple[str, list[dict[str, Any]]]:
    """``regression`` · ``no regression`` · ``inconclusive``, and what is inconclusive with what would
    resolve it. Without ``repeat: adaptive`` a comparison is inconclusive when the pass rate or a gated metric
    leans worse (one-sided p ≤ ``INCONCLUSIVE_P``, or too few cases changed for any split of them to be
    significant: 0.5^changed > ``level``, the pass rate's first-step level) without significance (a metric: its interval reaches past
    its tolerance), or when a critical case flipped on one run; with it, when the sequential test did not
    reach its last look. Inconclusive never fails the gate."""
    if regression:
        return "regression", []
    found: list[dict[str, Any]] = []
    if plan is not None:
        if plan.comparison_verdict() == "inconclusive":
            found.append({"name": "pass rate", "why": "the sequential test did not reach a decision "
                          f"(look {len(plan.stage_p)} of {len(plan.design.fractions)})",
                          "resolve": plan.report()["resolve"] or ["more trials"]})
    elif pass_rate.get("regressions", 0) > pass_rate.get("fixes", 0) and (
            pass_rate["p_value"] <= INCONCLUSIVE_P
            or 0.5 ** (pass_rate["regressions"] + pass_rate["fixes"]) > level):  # so few changed cases that no split of them is significant
        found.append({"name": "pass rate", "why": f"{pass_rate['regressions']} case(s) flipped to fail and "
                      f"{pass_rate['fixes']} to pass, not significant (p={_p(pass_rate['p_value'])})",
                      "resolve": ["more trials (repeat: adaptive re-tries the flipped cases)",
                                  "more cases" + (f" (n={pass_rate['n_paired']} detects drops of "
                                                  f"{_pct(pass_rate['detectable'])} with 80 % power)"
                                                  if pass_rate.get("detectable") else "")]})
    for name, m in metrics.items():
        if m.get("gated") and m.get("verdict") == "inconclusive" and m["p_value"] <= INCONCLUSIVE_P and \
                (m["delta"] < 0) == (m.get("direction", "higher") == "higher"):
            found.append({"name": name, "why": f"{name} moved {_num(m['delta'])}, not significant "
                          f"(p={_p(m['p_value'])}); its interval reaches past the tolerance {_num(m['tolerance'])}",
                          "resolve": ["more trials", "more cases", f"a wider tolerance (regression_tolerance.{name})"]})
    if plan is None and critical is not None and critical.get("regressions") and critical.get("repeats") == 1:
        listed = ", ".join(str(e["id"]) for e in critical["regressions"][:5])
        found.append({"name": "critical cases", "why": f"critical case(s) {listed} flipped to fail on one run: "
                      "a single flip is not evidence", "resolve": ["repeat: adaptive (re-tries them until a "
                                                                    "sequential test decides)"]})
    return ("inconclusive" if found else "no regression"), found


def _inconclusive_sentence(verdict: str, inconclusive: Sequence[Mapping[str, Any]]) -> str:
    if verdict != "inconclusive":
        return ""
    parts = "; ".join(f"{e['name']}: {e['why']} — would resolve: {', '.join(e['resolve'])}" for e in inconclusive)
    return f" Inconclusive (does not fail the gate): {parts}."



LOST_LISTED = 10
"""Cases listed per metric in ``lost_values`` (the count is exact)."""


def _lost_values(base: Mapping[str, _Case], head: Mapping[str, _Case], shared: Sequence[str]
                 ) -> dict[str, dict[str, Any]]:
    """Per metric, the shared cases that had a value on the base and have none on head (an optional metric's
    answers that stopped carrying what it needs leave the paired comparison silently otherwise):
    ``{metric: {"count": n, "cases": [{"id", "source"}, …the first LOST_LISTED]}}``, by metric name."""
    lost: dict[str, dict[str, Any]] = {}
    for case_id in shared:
        before, after = base[case_id].values, head[case_id].values
        if head[case_id].status is None:  # skipped on head: not scored at all, nothing to compare
            continue
        for name in before.keys() - after.keys():
            row = lost.setdefault(name, {"count": 0, "cases": []})
            row["count"] += 1
            if len(row["cases"]) < LOST_LISTED:
                row["cases"].append({"id": case_id, "source": head[case_id].source})
    return {name: lost[name] for name in sorted(lost)}


def _lost_sentence(lost: Mapping[str, Mapping[str, Any]]) -> str:
    """`` hit_rate lost its value on 3 case(s) against the baseline (a (f.yaml:3), …).`` or nothing."""
    parts = []
    for name, row in lost.items():
        listed = ", ".join(f"{entry['id']} ({entry['source']})" for entry in row["cases"][:3])
        more = f", … (+{row['count'] - 3})" if row["count"] > 3 else ""
        parts.append(f"{name} lost its value on {_plural(row['count'], 'case')} that had one on the baseline "
                     f"({listed}{more})")
    return f" {'; '.join(parts)}." if parts else ""


def comparison_gate_reasons(comparison: Mapping[str, Any], fail_on_regression: bool) -> list[str]:
    """Why the gate fails because of the comparison: each rejected test of the family, with the p-value
    the decision used. Empty unless ``fail_on_regression``."""
    if not fail_on_regression:
        return []
    family = comparison.get("family") or {}
    alpha = comparison["significance_level"]
    size = len(family.get("tests") or [])
    level = _confidence_label(alpha)
    procedure = str(family.get("procedure") or PROCEDURE).split(" (")[0]
    reasons: list[str] = []
    for test in family.get("tests") or []:
        if not test.get("rejected"):
            continue
        decision = (f"{test['method']} p={_p(test['p_value'])}, {procedure}-adjusted p={_p(test['p_adjusted'])} "
                    f"≤ α={alpha:g} over {_plural(size, 'test')}")
        if test["kind"] == "metric":
            m = comparison["metrics"][test["name"]]
            tolerance = f", beyond tolerance {_num(m['tolerance'])}" if m.get("tolerance") else ""
            reasons.append(
                f"{test['name']} regressed against the baseline: {_num(m['base'])} → {_num(m['head'])} "
                f"(Δ {_num(m['delta'])}, {level} {m.get('ci_method', INTERVAL_METHOD)} CI {_num(m['ci_low'])} to "
                f"{_num(m['ci_high'])}{tolerance}, n={m['n_paired']}; {decision})")
        elif test["kind"] == "pairwise":
            row = (comparison.get("pairwise") or {})[test["name"]]
            reasons.append(
                f"{test['name']}: the judge preferred the base branch's answer {row['losses']} time(s) and this "
                f"change's {row['wins']} time(s) ({row['ties']} tie(s); {decision})")
        elif test["kind"] == "pass_rate":
            pr = comparison["pass_rate"]
            reasons.append(
                f"pass rate fell against the baseline: {_pct(pr['base'])} → {_pct(pr['head'])} "
                f"({pr['regressions']} case(s) flipped to fail, {pr['fixes']} to pass, n={pr['n_paired']}; {decision})")
        else:
            crit = comparison.get("critical") or {}
            listed = ", ".join(f"{e['id']} ({e['source']})" for e in crit.get("regressions", [])[:5])
            reasons.append(
                f"critical cases regressed against the baseline: {len(crit.get('regressions', []))} that passed "
                f"every base run now fail: {listed} ({decision})")
    return reasons


def _pairwise_block(table: Mapping[str, Mapping[str, Any]], gated: Collection[str]) -> dict[str, dict[str, Any]]:
    """The family's pairwise members: per gated metric with a preference table, wins/losses/ties and the exact
    one-sided sign tests (``stats.mcnemar_one_sided`` on losses vs wins: P(X ≥ losses), X ~ Bin(wins + losses, ½)).
    ``p_adjusted``/``regression`` are filled by ``_decide``."""
    wanted = set(gated)
    block: dict[str, dict[str, Any]] = {}
    for name in sorted(table):
        row = table[name]
        if name not in wanted or not isinstance(row, Mapping):
            continue
        wins, losses, ties = (int(row.get(key) or 0) for key in ("wins", "losses", "ties"))
        block[name] = {"wins": wins, "losses": losses, "ties": ties, "test": PAIRWISE_TEST,
                       "p_value": stats.mcnemar_one_sided(losses, wins),
                       "p_improvement": stats.mcnemar_one_sided(wins, losses),
                       "significant": False, "regression": False, "improvement": False}
    return block


def _decide(metrics: Mapping[str, dict[str, Any]], pass_rate: dict[str, Any], critical: dict[str, Any] | None,
            alpha: float, pass_rate_weight: float = PASS_RATE_WEIGHT,
            pairwise: Mapping[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Weighted Holm over the family (gated metrics, pass rate, critical cases, pairwise tests;
    ``family_weights``); fills each member's ``p_adjusted``, ``regression``, ``improvement`` and ``verdict``.
    Returns the ``family`` block."""
    members: list[tuple[str, str, dict[str, Any]]] = [
        ("metric", name, m) for name, m in metrics.items() if m["gated"]]
    members += [("pairwise", name, row) for name, row in (pairwise or {}).items()]
    if pass_rate["n_paired"]:
        members.append(("pass_rate", "pass_rate", pass_rate))
    if critical is not None:
        members.append(("critical", "critical cases", critical))
    informational = [m for m in metrics.values() if not m["gated"]]
    weights = family_weights([kind for kind, _, _ in members], pass_rate_weight,
                             [name for _, name, _ in members])
    for group, group_weights in (([entry for _, _, entry in members], weights),
                                 (informational, [1.0] * len(informational))):
        if not group:
            continue
        adjusted = stats.weighted_holm([entry["p_value"] for entry in group], group_weights)
        adjusted_better = stats.weighted_holm([entry.get("p_improvement", 1.0) for entry in group], group_weights)
        for entry, p_adj, p_better in zip(group, adjusted, adjusted_better, strict=True):
            entry["p_adjusted"] = p_adj
            entry["p_improvement_adjusted"] = p_better
            entry["family_size"] = len(group)
            entry["regression"] = p_adj <= alpha
            entry["improvement"] = p_better <= alpha and not entry["regression"]
            entry["significant"] = entry["regression"] or entry["improvement"]
    if critical is not None:  # the case listed must be a reliable one: flaky-on-base never makes the regression
        critical["regression"] = critical["regression"] and bool(critical["regressions"])
        critical["significant"] = critical["regression"]
    first_step = {id(entry): alpha * w for (_, _, entry), w in zip(members, weights, strict=True)}
    for m in metrics.values():  # gated: the level at Holm's first step, what n pairs must detect on their own
        m["verdict"], m["detectable"] = _metric_verdict(m, first_step.get(id(m), alpha))
    pass_rate["verdict"], pass_rate["detectable"] = _metric_verdict(pass_rate, first_step.get(id(pass_rate), alpha))
    for entry in (*metrics.values(), pass_rate):
        entry.pop("_sd", None)
    tests = [{"kind": kind, "name": name, "method": entry["test"], "p_value": entry["p_value"],
              "p_adjusted": entry["p_adjusted"], "weight": w, "rejected": bool(entry["regression"])}
             for (kind, name, entry), w in zip(members, weights, strict=True)]
    weighted = len(set(weights)) > 1
    label = Fraction(pass_rate_weight).limit_denominator(100)
    procedure = f"{PROCEDURE} (pass rate weight {label})" if weighted else "Holm–Bonferroni"
    return {"procedure": procedure, "alpha": alpha, "size": len(tests), "tests": tests,
            "informational": sorted(name for name, m in metrics.items() if not m["gated"])}


def family_weights(kinds: Sequence[str], pass_rate_weight: float, names: Sequence[str] | None = None) -> list[float]:
    """Weighted Holm weights (summing to 1) of the members ``kinds`` (with their ``names``).

    Members fall into slots: the pass rate; one per metric name — its ``metric`` (absolute) test and its
    ``pairwise`` test share it; the critical cases. The pass rate's slot weighs ``pass_rate_weight`` and the other
    slots an equal share of the rest (equal slots when the pass rate is absent or alone); a slot's weight is split
    equally among its members. E.g. pass rate + metrics a, b + pairwise a at w = 2/3: 2/3, 1/12, 1/6, 1/12."""
    names = list(names) if names is not None else [f"{kind}#{i}" for i, kind in enumerate(kinds)]
    if len(names) != len(kinds):
        raise ValueError(f"need one name per member: {len(names)} names for {len(kinds)} kinds")
    slots = [("metric", name) if kind in ("metric", "pairwise") else (kind, name)
             for kind, name in zip(kinds, names, strict=True)]
    distinct = list(dict.fromkeys(slots))
    others = sum(1 for kind, _ in distinct if kind != "pass_rate")
    if others == 0 or others == len(distinct):
        slot_weight = dict.fromkeys(distinct, 1.0 / len(distinct)) if distinct else {}
    else:
        share = (1.0 - pass_rate_weight) / others
        slot_weight = {slot: pass_rate_weight if slot[0] == "pass_rate" else share for slot in distinct}
    members = {slot: slots.count(slot) for slot in distinct}
    return [slot_weight[slot] / members[slot] for slot in slots]


def _metric_verdict(m: Mapping[str, Any], level: float) -> tuple[str, float | None]:
    """The row's verdict and the change it could detect (None when not inconclusive)."""
    if m["regression"]:
        return "regression", None
    if m["improvement"]:
        return "improvement", None
    if m.get("delta") in (0, 0.0) and m.get("ci_low") == m.get("ci_high"):
        return "no change", None
    tolerance = float(m.get("tolerance") or 0.0)
    low, high = m.get("ci_low"), m.get("ci_high")
    if low is None or high is None:
        return "inconclusive", None
    if tolerance > 0.0 and -tolerance <= low and high <= tolerance:
        return "no meaningful change", None
    worse = -low if m.get("direction", "higher") == "higher" else high
    if worse <= tolerance:
        return "no meaningful change", None
    return "inconclusive", _detectable(m.get("_sd"), m.get("n_paired") or 0, level)


def _detectable(sd: float | None, n: int, level: float) -> float | None:
    """(z_{1−level} + z_{0.8})·sd/√n: the mean change n pairs with this spread detect with 80 % power."""
    if not sd or n < 2:
        return None
    normal = statistics.NormalDist()
    return (normal.inv_cdf(1.0 - level) + normal.inv_cdf(DETECTION_POWER)) * sd / math.sqrt(n)


# ── dataset changes ───────────────────────────────────────────────────────────────────────────

LOCATED = 5
"""Cases of each change (new, edited, removed, demoted) whose ``file:line`` the block names."""


def dataset_changes(base: Mapping[str, _Case], head: Mapping[str, _Case], shared: Sequence[str]) -> dict[str, Any]:
    """What changed in the dataset between the runs, exactly, at any number of cases: ``edited`` (shared cases
    whose expectation digest differs; both runs recorded one), ``demoted`` (shared cases critical on the base,
    not on head), ``expectations_unknown`` (shared cases without a digest on either side), and ``located``:
    ``file:line`` of the first ``LOCATED`` new, edited, demoted (head's file) and removed (the base's) cases."""
    edited, demoted, unknown = [], [], 0
    for case_id in shared:
        old, new = base[case_id], head[case_id]
        if old.expectation is None or new.expectation is None:
            unknown += 1
        elif old.expectation != new.expectation:
            edited.append(case_id)
        if old.critical and not new.critical:
            demoted.append(case_id)
    located: dict[str, str] = {}
    for ids, side in ((edited, head), (demoted, head)):
        for case_id in ids[:LOCATED]:
            located[case_id] = side[case_id].source
    for case_id in [i for i in head if i not in base][:LOCATED]:
        located[case_id] = head[case_id].source
    for case_id in [i for i in base if i not in head][:LOCATED]:
        located[case_id] = base[case_id].source
    return {"edited": edited, "demoted": demoted, "expectations_unknown": unknown, "located": located}


def diluted(base: Mapping[str, _Case], head: Mapping[str, _Case], shared: Sequence[str],
            thresholds: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each gated metric whose average over the cases the base run had (the shared ones, repeats collapsed by
    their mean) misses its threshold while the average over all of head's cases meets it (head has new cases): ``{metric, cases, average, threshold, new}``.
    New easy cases cannot lift a failing average: the threshold holds on the base's cases too."""
    new = sum(1 for case_id in head if case_id not in base)
    if not new:
        return []
    found = []
    for name, bound in sorted(thresholds.items()):
        if not isinstance(bound, Mapping):
            continue
        values = [head[i].values[name] for i in shared if name in head[i].values]
        if not values:
            continue
        mean = math.fsum(values) / len(values)
        every = [case.values[name] for case in head.values() if name in case.values]
        overall = math.fsum(every) / len(every)
        for op, limit in bound.items():  # a run whose own average misses the threshold already says so
            if (_number(limit) is not None and not _holds(str(op), mean, float(limit))
                    and _holds(str(op), overall, float(limit))):
                found.append({"metric": name, "cases": len(values), "average": mean,
                              "threshold": {str(op): float(limit)}, "new": new})
                break
    return found


def diluted_reasons(comparison: Mapping[str, Any]) -> list[str]:
    """The gate reasons of ``comparison['diluted']`` (one per metric)."""
    reasons = []
    for entry in comparison.get("diluted") or []:
        (op, limit), = entry["threshold"].items()
        reasons.append(f"{entry['metric']} on the {entry['cases']} case(s) the base run had: average "
                       f"{score(entry['average'])} misses threshold {op} {limit:g} (the {entry['new']} new case(s) "
                       "do not count towards it)")
    return reasons


def _holds(op: str, value: float, limit: float) -> bool:
    return {"min": value >= limit, "gt": value > limit, "max": value <= limit, "lt": value < limit}.get(op, True)


# ── collapsing runs ───────────────────────────────────────────────────────────────────────────

_STATUS_NAMES = ("passed", "failed", "errored")


class _Cases(Mapping[str, _Case]):
    """One run's cases, repeats collapsed, as compact per-case columns (flat memory: a few bytes a case and
    metric instead of a ``_Case`` object with its dicts and sets); ``self[id]`` builds the ``_Case`` on demand.

    Columns (position = first-seen order of the id): ``source`` as an interned file + line number (other
    sources in a side table), risk level interned, the expectation digest's fingerprint, passes/runs/failed/errored
    counts, and per metric one ``array('d')`` per repeat slot (NaN = no finite value), so a collapsed value
    is ``math.fsum`` over the slots / their number, exactly as over the records."""

    def __init__(self) -> None:
        self._position: dict[str, int] = {}
        self._files: dict[str, int] = {}
        self._file_names: list[str] = []
        self._file = array("i")
        self._line = array("i")
        self._odd_sources: dict[int, str] = {}
        self._risks: dict[str, int] = {}
        self._risk_names: list[str] = []
        self._risk = array("b")
        self._expectation = array("q")
        """The expectation digest's 64-bit fingerprint (0: none), all ``dataset_changes`` compares."""
        self._passes = array("i")
        self._runs = array("i")
        self._failed = array("i")
        self._errored = array("i")
        self._records = array("i")
        self._slots: dict[str, list[array[float]]] = {}
        self.rule: stats.RepeatRule = "majority"

    def add(self, record: Mapping[str, Any]) -> None:
        """Fold one case record in (repeats of a case: its first record gives source, risk and expectation)."""
        case_id = str(record["id"])
        at = self._position.get(case_id)
        if at is None:
            at = self._position[case_id] = len(self._passes)
            self._add_source(at, str(record.get("source") or "<unknown>"))
            self._risk.append(self._intern(self._risks, self._risk_names,
                                           str(record.get("risk_level") or "medium").lower()))
            digest = str(record["expectation"]) if record.get("expectation") else None
            self._expectation.append(0 if digest is None else _fingerprint(digest))
            for column in (self._passes, self._runs, self._failed, self._errored, self._records):
                column.append(0)
            for slots in self._slots.values():
                for slot in slots:
                    slot.append(math.nan)
        status = _status(record)
        if status != "skipped":
            self._runs[at] += 1
            if status == "passed":
                self._passes[at] += 1
            elif status == "failed":
                self._failed[at] += 1
            elif status == "errored":
                self._errored[at] += 1
        repeat = self._records[at]
        self._records[at] = repeat + 1
        for name, value in _record_values(record).items():
            if name not in self._slots:
                self._slots[name] = [array("d", [math.nan]) * len(self._passes)]
            slots = self._slots[name]
            while len(slots) <= repeat:
                slots.append(array("d", [math.nan]) * len(self._passes))
            slots[repeat][at] = value

    def _add_source(self, at: int, source: str) -> None:
        path, _, line = source.rpartition(":")
        if path and line.isascii() and line.isdigit() and str(int(line)) == line and int(line) < 2**31:
            self._file.append(self._intern(self._files, self._file_names, path))
            self._line.append(int(line))
        else:
            self._file.append(-1)
            self._line.append(0)
            self._odd_sources[at] = source

    @staticmethod
    def _intern(table: dict[str, int], names: list[Any], text: str) -> int:
        code = table.get(text)
        if code is None:
            code = table[text] = len(names)
            names.append(text)
        return code

    def __getitem__(self, case_id: str) -> _Case:
        at = self._position[case_id]
        risk = self._risk_names[self._risk[at]]
        runs = self._runs[at]
        status = None
        if runs:
            passes = self._passes[at]
            if stats.repeat_verdict([True] * passes + [False] * (runs - passes),
                                    "all" if risk == "critical" else self.rule):
                status = "passed"
            else:
                status = "failed" if self._failed[at] or not self._errored[at] else "errored"
        values: dict[str, float] = {}
        binary: set[str] = set()
        for name, slots in self._slots.items():
            found = [slot[at] for slot in slots if not math.isnan(slot[at])]
            if found:
                values[name] = found[0] if len(found) == 1 else math.fsum(found) / len(found)
                if all(value in (0.0, 1.0) for value in found):
                    binary.add(name)
        file = self._file[at]
        source = self._odd_sources[at] if file < 0 else f"{self._file_names[file]}:{self._line[at]}"
        return _Case(id=case_id, source=source, risk_level=risk, status=status, values=values,
                     passes=self._passes[at], runs=runs, binary=binary,
                     expectation=f"{self._expectation[at]:x}" if self._expectation[at] else None)

    def __contains__(self, case_id: object) -> bool:
        return case_id in self._position

    def __iter__(self) -> Iterator[str]:
        return iter(self._position)

    def __len__(self) -> int:
        return len(self._position)


def _fingerprint(text: str) -> int:
    """A nonzero signed 64-bit BLAKE2b fingerprint of ``text`` (two digests collide with probability 2⁻⁶⁴)."""
    value = int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little", signed=True)
    return value or 1


def _collapse(records: Iterable[Mapping[str, Any]], rule: stats.RepeatRule) -> _Cases:
    """Group records by id (first-seen order) and collapse their repeats, in one pass (``_Cases``)."""
    cases = _Cases()
    cases.rule = rule
    for record in records:
        cases.add(record)
    return cases


def _status(record: Mapping[str, Any]) -> str:
    status = record.get("status")
    if isinstance(status, str):
        return status
    return "passed" if record.get("passed") else "failed"


def _record_values(record: Mapping[str, Any]) -> dict[str, float]:
    """Finite numeric metric values of one record, except values a heuristic gave because the judge could
    not score the answer (``details.judge_unavailable``): they are not comparable with judge values."""
    values = {}
    for name, result in (record.get("metrics") or {}).items():
        if not isinstance(result, Mapping):
            continue
        value = _number(result.get("value"))
        if value is not None and "judge_unavailable" not in (result.get("details") or {}):
            values[name] = value
    return values


def _number(value: Any) -> float | None:
    """``value`` as a float when it is a finite int or float (not a bool), else None."""
    if type(value) is float or type(value) is int:
        return float(value) if math.isfinite(value) else None
    return None


# ── metrics ───────────────────────────────────────────────────────────────────────────────────


def _metric_names(base: Mapping[str, _Case], head: Mapping[str, _Case], shared: list[str]) -> list[str]:
    """Metrics with at least one pair (a value in both runs on the same case), sorted by name."""
    return sorted({name for i in shared for name in head[i].values.keys() & base[i].values.keys()})


def _gated_names(head: Mapping[str, Any]) -> set[str]:
    table = head.get("metrics") or {}
    gated = {name for name, row in table.items() if isinstance(row, Mapping) and row.get("threshold")}
    return gated | set(head.get("thresholds") or {})


def _direction(name: str, *docs: Mapping[str, Any]) -> str:
    """The metric's direction from the first suite table that states one; ``higher`` otherwise."""
    for doc in docs:
        row = (doc.get("metrics") or {}).get(name)
        if isinstance(row, Mapping) and row.get("direction") in ("higher", "lower"):
            return str(row["direction"])
    return "higher"


def _paired_values(
    name: str, base: Mapping[str, _Case], head: Mapping[str, _Case], shared: list[str]
) -> tuple[np.ndarray, np.ndarray, bool]:
    """Values of ``name`` on the shared cases that have one in both runs, as (base, head) float64 arrays (8
    bytes a pair), and whether every one of them is 0 or 1 on every repeat (a 0/1 metric: McNemar applies)."""
    import numpy as np  # lazy: numpy (~0.1 s) only for bootstrap and exact statistics

    before, after = array("d"), array("d")
    binary = True
    for i in shared:
        old, new = base[i], head[i]
        if name in old.values and name in new.values:
            before.append(old.values[name])
            after.append(new.values[name])
            binary = binary and name in old.binary and name in new.binary
    return np.frombuffer(before, dtype=np.float64), np.frombuffer(after, dtype=np.float64), binary


def _metric_block(
    name: str,
    base_cases: Mapping[str, _Case],
    head_cases: Mapping[str, _Case],
    shared: list[str],
    *,
    direction: str,
    gated: bool,
    tolerance: Tolerance,
    alpha: float,
    resamples: int,
    seed: int,
) -> dict[str, Any]:
    """One row of ``comparison.metrics`` from at least one pair: the delta, its BCa interval, and the
    one-sided p-values of "worse by more than the tolerance" (``p_value``) and "better by more than it"
    (``p_improvement``). ``regression``/``improvement``/``verdict`` are filled by ``_decide``."""
    import numpy as np  # lazy: numpy (~0.1 s) only for bootstrap and exact statistics

    base_values, head_values, binary = _paired_values(name, base_cases, head_cases, shared)
    n = len(base_values)
    if n == 0:
        raise ValueError("a metric row needs at least one pair")
    differences = head_values - base_values
    interval = stats.bca_mean_ci(differences, resamples=resamples, confidence=1.0 - alpha, seed=seed)
    assert interval is not None
    delta, low, high = interval
    base_mean = math.fsum(base_values) / n
    amount = tolerance.amount(base_mean)
    worse = -differences if direction == "higher" else differences
    if binary and amount == 0.0:
        flips_worse = int(np.count_nonzero(worse > 0))
        flips_better = int(np.count_nonzero(worse < 0))
        p_worse = stats.mcnemar_one_sided(flips_worse, flips_better)
        p_better = stats.mcnemar_one_sided(flips_better, flips_worse)
        test = "exact McNemar (one-sided)"
    else:
        p_worse, how = stats.sign_flip_p(worse, shift=amount, resamples=resamples, seed=seed)
        p_better, _ = stats.sign_flip_p(-worse, shift=amount, resamples=resamples, seed=seed)
        test = f"paired sign-flip permutation (one-sided, {how})"
    return {
        "base": base_mean,
        "head": math.fsum(head_values) / n,
        "delta": delta,
        "ci_low": low,
        "ci_high": high,
        "ci_method": INTERVAL_METHOD,
        "n_paired": n,
        "direction": direction,
        "tolerance": amount,
        "tolerance_rule": tolerance.to_dict() if tolerance else None,
        "test": test,
        "p_value": p_worse,
        "p_improvement": p_better,
        "significant": False,
        "regression": False,
        "improvement": False,
        "gated": gated,
        "_sd": statistics.stdev(differences) if n >= 2 else None,  # exact: as over the Python floats
    }


# ── case outcomes ─────────────────────────────────────────────────────────────────────────────


def _compare_outcomes(
    base: Mapping[str, _Case], head: Mapping[str, _Case], shared: list[str], alpha: float, resamples: int, seed: int
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    regressions: list[dict[str, Any]] = []
    fixes: list[dict[str, Any]] = []
    differences = array("d")  # head − base outcome per paired case: 8 bytes a case
    base_passed = head_passed = 0
    for i in shared:  # one pass: each case's two sides built once
        old, new = base[i], head[i]
        if old.status is None or new.status is None:
            continue
        was, now = _passed(old), _passed(new)
        base_passed += was
        head_passed += now
        differences.append(float(now) - float(was))
        if was != now:
            (regressions if was else fixes).append(_flip(old, new))
    regressions.sort(key=_flip_order)
    fixes.sort(key=_flip_order)
    n = len(differences)
    base_ci = stats.wilson_interval(base_passed, n, confidence=1.0 - alpha)
    head_ci = stats.wilson_interval(head_passed, n, confidence=1.0 - alpha)
    pass_rate = {
        "base": base_ci[0] if base_ci else None,
        "head": head_ci[0] if head_ci else None,
        "delta": (head_passed - base_passed) / n if n else None,
        "base_ci": list(base_ci[1:]) if base_ci else None,
        "head_ci": list(head_ci[1:]) if head_ci else None,
        "ci_method": PROPORTION_METHOD,
        "ci_low": None,
        "ci_high": None,
        "direction": "higher",
        "tolerance": 0.0,
        "regressions": len(regressions),
        "fixes": len(fixes),
        "n_paired": n,
        "test": "exact McNemar (one-sided)",
        "p_value": stats.mcnemar_one_sided(len(regressions), len(fixes)),
        "p_improvement": stats.mcnemar_one_sided(len(fixes), len(regressions)),
        "significant": False,
        "regression": False,
        "improvement": False,
        "_sd": statistics.stdev(differences) if n >= 2 else None,
    }
    if n and (regressions or fixes):
        change = stats.bca_mean_ci(differences, confidence=1.0 - alpha, resamples=resamples, seed=seed)
        if change is not None:
            pass_rate["ci_low"], pass_rate["ci_high"] = change[1], change[2]
    elif n:
        pass_rate["ci_low"] = pass_rate["ci_high"] = 0.0
    return pass_rate, regressions, fixes


def _critical_block(base: Mapping[str, _Case], head: Mapping[str, _Case], shared: list[str],
                    regressions: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The critical cases' test (``stats.stratified_exchange_p``) and which flipped cases count: a case that
    passed every base repeat and fails on head is a critical regression; one that was flaky on the base
    (some base repeats failed) is listed under ``flaky_on_base``. None without a shared critical case."""
    paired = [i for i in shared if (base[i].critical or head[i].critical)
              and base[i].runs and head[i].runs]
    if not paired:
        return None
    strata = [(base[i].passes, base[i].runs, head[i].passes, head[i].runs) for i in paired]
    reliable = [flip for flip in regressions if flip["critical"] and flip["base_passes"] == flip["base_runs"]]
    flaky = sorted((_flip(base[i], head[i]) for i in paired
                    if 0 < base[i].passes < base[i].runs and not _passed(head[i])), key=_flip_order)
    runs = max(base[i].runs for i in paired)
    note = None
    if reliable and runs == 1:
        note = ("one run per case: a single flip of a critical case is not evidence of a regression "
                "(the critical case still fails this run on its own); repeat: adaptive re-tries it until a sequential "
                "test decides (or run critical suites with repeat: 3 or more)")
    return {
        "cases": len(paired),
        "repeats": runs,
        "test": "exact stratified exchange test (one-sided)",
        "p_value": stats.stratified_exchange_p(strata),
        "p_improvement": 1.0,
        "regressions": reliable,
        "flaky_on_base": flaky,
        "significant": False,
        "regression": False,
        "note": note,
    }


def _passed(case: _Case) -> bool:
    return case.status == "passed"


def _flip(base: _Case, head: _Case) -> dict[str, Any]:
    return {
        "id": head.id,
        "source": head.source,
        "risk_level": head.risk_level,
        "critical": base.critical or head.critical,
        "base_status": base.status,
        "head_status": head.status,
        "base_passes": base.passes,
        "base_runs": base.runs,
        "head_passes": head.passes,
        "head_runs": head.runs,
    }


def _flip_order(flip: Mapping[str, Any]) -> tuple[bool, str, int, str]:
    """Critical first, then source file, then line number (numeric), then id."""
    path, _, line = str(flip["source"]).rpartition(":")
    if not (path and line.isdigit()):
        path, line = str(flip["source"]), "0"
    return (not flip["critical"], path, int(line), str(flip["id"]))


# ── summary ───────────────────────────────────────────────────────────────────────────────────


def _summary(
    metrics: Mapping[str, Mapping[str, Any]],
    pass_rate: Mapping[str, Any],
    critical: Mapping[str, Any] | None,
    cases: Mapping[str, list[Any]],
    alpha: float,
) -> str:
    """What matters first: new failures (critical first) with their count and test; then significant metric
    changes with effect and interval; then one sentence on everything else. Sentences may start with a
    metric name, which keeps its case."""
    moved = [name for name, m in metrics.items() if m["delta"] != 0.0]
    if not moved and not any(cases.values()):
        return (
            f"No change against the baseline: {pass_rate['n_paired']} paired cases, "
            "every metric delta is 0 and no case changed outcome."
        )
    parts = [_case_sentence(pass_rate, critical, cases, alpha), _metric_sentence(metrics, moved, alpha)]
    return " ".join(part for part in parts if part)


def _pairwise_sentence(pairwise: Mapping[str, Mapping[str, Any]], alpha: float) -> str:
    """The pairwise regressions (the judge preferred the base's answers significantly), or nothing."""
    lost = [f"{name} ({row['losses']} worse, {row['wins']} better, {row['ties']} tie(s); sign test "
            f"p={_p(row['p_value'])}, adjusted p={_p(row['p_adjusted'])})"
            for name, row in pairwise.items() if row.get("regression")]
    if not lost:
        return ""
    return f" The judge preferred the base branch's answers, a significant regression at α={alpha:g}: {'; '.join(lost)}."


def _metric_sentence(metrics: Mapping[str, Mapping[str, Any]], moved: list[str], alpha: float) -> str:
    """Significant regressions and improvements of gated metrics (those in the family), significant moves of
    ungated ones, then one clause on the rest by verdict."""
    level = _confidence_label(alpha)
    regressions = [n for n in moved if metrics[n]["regression"] and metrics[n].get("gated", True)]
    improvements = [n for n in moved if metrics[n]["improvement"] and metrics[n].get("gated", True)]
    ungated = [n for n in moved if metrics[n]["significant"] and not metrics[n].get("gated", True)]
    quiet = [n for n in moved if not metrics[n]["significant"]]
    parts = []
    for label, names in (("regression", regressions), ("improvement", improvements)):
        if names:
            phrases = "; ".join(_metric_phrase(n, metrics[n], level) for n in names)
            parts.append(f"{_plural(len(names), f'significant {label}')}: {phrases}")
    if ungated:
        phrases = "; ".join(_metric_phrase(n, metrics[n], level) for n in ungated)
        parts.append(f"{_plural(len(ungated), 'significant change')} of ungated metrics (no threshold): {phrases}")
    if quiet:
        parts.append(_quiet_clause(metrics, quiet, alpha, lead=not parts))
    if not parts:
        parts.append("No metric changed")
    return "; ".join(parts) + "."


def _quiet_clause(metrics: Mapping[str, Mapping[str, Any]], quiet: list[str], alpha: float, *, lead: bool) -> str:
    """The metrics that moved without a significant change, counted by verdict; the inconclusive ones say
    what change their n could have detected."""
    by_verdict: dict[str, list[str]] = {}
    for name in quiet:
        by_verdict.setdefault(str(metrics[name].get("verdict") or "not significant"), []).append(name)
    clauses = []
    for verdict in ("no meaningful change", "inconclusive", "not significant", "no change"):
        names = by_verdict.get(verdict, [])
        if not names:
            continue
        if verdict == "inconclusive":
            details = ", ".join(_inconclusive_phrase(n, metrics[n]) for n in names)
            clauses.append(f"inconclusive at α={alpha:g}: {details}")
        else:
            clauses.append(f"{verdict}: {', '.join(names)}")
    head = "other metric changes" if not lead else "metric changes"
    return f"{head} — " + "; ".join(clauses)


def _inconclusive_phrase(name: str, m: Mapping[str, Any]) -> str:
    verb = "rose" if m["delta"] > 0 else "fell"
    phrase = f"{name} {verb} {_num(abs(m['delta']))} (p={_p(m['p_value'])})"
    if m.get("detectable") is not None:
        phrase += f", n={m['n_paired']} too small to detect a change below {_num(m['detectable'])}"
    return phrase


def _metric_phrase(name: str, m: Mapping[str, Any], level: str) -> str:
    verb = "rose" if m["delta"] > 0 else "fell"
    lower = "lower is better; " if m["direction"] == "lower" else ""
    key = "p_improvement_adjusted" if m.get("improvement") else "p_adjusted"
    adjusted = f", adjusted p={_p(m[key])}" if m.get(key) is not None else ""
    return (f"{name} {verb} {_num(abs(m['delta']))} ({lower}{level} {m.get('ci_method', INTERVAL_METHOD)} CI "
            f"{_num(m['ci_low'])} to {_num(m['ci_high'])}{adjusted})")


def _case_sentence(pass_rate: Mapping[str, Any], critical: Mapping[str, Any] | None,
                   cases: Mapping[str, list[Any]], alpha: float) -> str:
    regressions, fixes = cases["regressions"], cases["fixes"]
    if regressions or fixes:
        flagged = sum(1 for flip in regressions if flip["critical"])
        note = f" ({flagged} critical)" if flagged else ""
        verdict = ("a significant regression" if pass_rate["regression"]
                   else "a significant improvement" if pass_rate["improvement"] else "not significant")
        adjusted = f", adjusted p={_p(pass_rate['p_adjusted'])}" if pass_rate.get("p_adjusted") is not None else ""
        sentence = (
            f"{_plural(len(regressions), 'case')} flipped to fail{note} and {len(fixes)} to pass: pass rate "
            f"{_pct(pass_rate['base'])} → {_pct(pass_rate['head'])} ({pass_rate['test']} p={_p(pass_rate['p_value'])}"
            f"{adjusted}; {verdict} at α={alpha:g})"
        )
        if pass_rate.get("verdict") == "inconclusive" and pass_rate.get("detectable") is not None:
            sentence += (f"; n={pass_rate['n_paired']} too small to detect a pass-rate drop below "
                         f"{_pct(pass_rate['detectable'])}")
    else:
        sentence = "No case changed outcome"
    if critical is not None and (critical["regressions"] or critical["flaky_on_base"]):
        crit = (f"; critical cases: {len(critical['regressions'])} that passed every base run now fail, "
                f"{len(critical['flaky_on_base'])} flaky on the base ({critical['test']} "
                f"p={_p(critical['p_value'])}, {'a regression' if critical['regression'] else 'not significant'})")
        sentence += crit
        if critical.get("note"):
            sentence += f"; {critical['note']}"
    if cases["new"] or cases["removed"]:
        sentence += f"; {len(cases['new'])} new and {len(cases['removed'])} removed"
    return sentence + "."


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _confidence_label(alpha: float) -> str:
    return f"{(1.0 - alpha) * 100:g}%"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _num(value: float | None) -> str:
    """The report number format (:func:`evalgate.text.numbers.score`); ``n/a`` for None."""
    return "n/a" if value is None else score(value)


def _p(value: float) -> str:
    """Two decimals from 0.1 up, else two significant digits: an adjusted p of 0.047 is not printed as 0.05
    beside α = 0.05."""
    return f"{value:.2f}" if value >= 0.1 else f"{value:.2g}"
