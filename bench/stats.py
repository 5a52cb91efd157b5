"""Simulation of the regression decision: ``python -m bench.stats``.

Synthetic base and head results documents go through the real comparison
(``evalgate.verdict.compare.compare_runs``: the same collapsing of repeats, tests, weighted Holm adjustment and
``regression`` flag a run uses); the share of replications it flags is

* the **A/A false-alarm rate** when base and head are drawn from the same distribution (target ≤ 5 %,
  the family-wise level α = 0.05, in every cell), and
* the **A/B power** when head's pass rate is 10 points lower (targets: ≥ 80 % at n = 200 with 3 repeats,
  ≥ 55 % with one run, and ≥ 63 % — the power before #21 — kept; those two cells run 30× the replications).

A cell varies one factor around the default (n = 200 cases, 3 gated metrics, no critical case, one run,
the ``iid`` flakiness model):

* n: 50, 200, 1,000 cases; gated metrics: 1, 3, 6, 12 (alternately 0/1 metrics and continuous scores,
  independent of the case outcome); critical cases: 0, 10 stable (p = 0.98), 10 flaky (p = 0.6);
  repeats: 1, 3, 5 on both sides;
* flakiness models of a case's pass probability pᵢ (mean 0.8): ``iid`` (every case 0.8, every run
  independent), ``stable`` (pᵢ ~ Beta(0.4, 0.1): most cases nearly always pass or nearly always fail),
  ``sparse`` (90 % of cases deterministic, 80 % of them passing; 10 % flaky at 0.5, then rescaled to
  mean 0.8). Head's pᵢ under A/B = pᵢ·(1 − 0.10/p̄): a 10-point drop of the mean pass probability.

Each rate is a share of R replications; its Monte Carlo standard error √(r(1 − r)/R) is reported beside
it (R = 150 by default: ±1.8 points at 5 %). The comparison runs with ``--resamples`` (1,000) bootstrap
and permutation resamples instead of the product's 10,000, for time: a Monte Carlo permutation p-value
(1 + hits)/(1 + R) keeps its exact level at any R, so the false-alarm rates hold; power is a little
lower than with 10,000.

A last part replays candidate decision rules (``ALTERNATIVES``: plain or weighted Holm, exact or mid-p McNemar)
on the family p-values of the same replications (``compare_alternatives``, 10× the replications), computes
them exactly for the iid cell with one gated 0/1 metric (``exact_rates``) and gives the mid-p test's size
given the number of discordant cases (``mid_p_sizes``): the evidence for the rule ``compare_runs`` applies.

The pairwise cells (``pairwise_cells``, ``PAIRWISE_FACTOR``× the replications) add pairwise judging of some gated
metrics with a simulated position-fair judge (``simulated_preferences``: ``random`` or ``content``): its sign tests
are members of the comparison's one family, and the A/A rate must stay ≤ 5 %; beside it, the same replications
decided by the two families used before (``pairwise_flags``).

The ``repeat: adaptive`` cells (``adaptive_cells``, ``ADAPTIVE_FACTOR``× the replications for the two iid cells
the targets name) run each PR three ways on the same draws: one run per case on both sides, ``repeat: 3`` on
both, and ``repeat: adaptive`` against a base run with ``repeat: 5`` (``adaptive_replicate``: the rounds of
``verdict.adaptive.Plan``, each re-trial a fresh draw, then ``compare_runs`` on the documents): share flagged,
share inconclusive, the PR's agent calls per decision and the share the critical rule blocks; the critical SPRT
is also computed exactly (``critical_exact``). ``--only-adaptive`` recomputes this part alone and keeps the rest
of bench/results/stats.json.

The run writes bench/results/stats.json and the tables into docs/trustworthy-verdicts.md and
bench/README.md (between ``<!-- bench.stats:begin -->`` and ``<!-- bench.stats:end -->``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from evalgate.config.budget import parse_budget
from evalgate.judges.pairwise import combine
from evalgate.verdict import stats
from evalgate.verdict.adaptive import Plan, base_outcomes
from evalgate.verdict.compare import PASS_RATE_WEIGHT, compare_runs, family_weights
from evalgate.verdict.pairwise import summarize
from evalgate.verdict.sequential import critical_operating

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "stats.json"
DOCS = (ROOT / "docs" / "trustworthy-verdicts.md", ROOT / "bench" / "README.md")
BEGIN, END = "<!-- bench.stats:begin -->", "<!-- bench.stats:end -->"
ALPHA = 0.05
DROP = 0.10
MODELS = ("iid", "stable", "sparse")


@dataclass(frozen=True)
class Cell:
    """One configuration of the simulation."""

    n: int = 200
    gated: int = 3
    critical: int = 0
    critical_kind: str = "stable"
    repeats: int = 1
    model: str = "iid"
    drop: float = 0.0
    metric_drop: float = 0.0
    """Relative drop of the first gated (0/1) metric's per-case levels on head."""
    pairwise: int = 0
    """How many gated metrics (the first ones) are also judged pairwise (``simulated_preferences``)."""
    judge: str = "random"
    """The pairwise judge: ``random`` or ``content`` (``simulated_preferences``)."""

    @property
    def label(self) -> str:
        crit = f"{self.critical} {self.critical_kind}" if self.critical else "0"
        label = f"n={self.n}, gated={self.gated}, critical={crit}, repeats={self.repeats}, model={self.model}"
        label += f", m00 −{self.metric_drop:.0%}" if self.metric_drop else ""
        return label + (f", pairwise={self.pairwise} ({self.judge} judge)" if self.pairwise else "")


def base_probabilities(cell: Cell, rng: np.random.Generator) -> np.ndarray:
    """Each case's pass probability under the cell's flakiness model (mean ≈ 0.8), critical cases last."""
    n = cell.n - cell.critical
    if cell.model == "iid":
        p = np.full(n, 0.8)
    elif cell.model == "stable":
        p = rng.beta(0.4, 0.1, size=n)
    elif cell.model == "sparse":
        p = np.where(rng.random(n) < 0.8, 1.0, 0.0)
        flaky = rng.random(n) < 0.1
        p[flaky] = 0.5
        p *= 0.8 / max(float(p.mean()), 1e-9)
        p = np.clip(p, 0.0, 1.0)
    else:
        raise ValueError(f"unknown model {cell.model!r}")
    critical = np.full(cell.critical, {"stable": 0.98, "p90": 0.9, "broken": 1.0}.get(cell.critical_kind, 0.6))
    return np.concatenate([p, critical])


def _metric_levels(cell: Cell, rng: np.random.Generator) -> list[np.ndarray]:
    """Per gated metric, each case's level: a probability for the 0/1 metrics (even index), a mean score in
    [0.4, 1] for the continuous ones (odd index)."""
    return [rng.beta(2.0, 0.5, size=cell.n) if j % 2 == 0 else rng.uniform(0.4, 1.0, size=cell.n)
            for j in range(cell.gated)]


def _document(cell: Cell, p: np.ndarray, levels: list[np.ndarray], rng: np.random.Generator,
              run_id: str) -> dict[str, Any]:
    """One run's results document: ``repeats`` records per case."""
    k = cell.repeats
    outcomes = rng.random((cell.n, k)) < p[:, None]
    values = []
    for j, level in enumerate(levels):
        if j % 2 == 0:
            values.append((rng.random((cell.n, k)) < level[:, None]).astype(float))
        else:
            values.append(np.clip(level[:, None] + rng.normal(0.0, 0.1, size=(cell.n, k)), 0.0, 1.0))
    names = [f"m{j:02d}" for j in range(cell.gated)]
    critical_from = cell.n - cell.critical
    records = []
    for i in range(cell.n):
        risk = "critical" if i >= critical_from else "medium"
        for r in range(k):
            passed = bool(outcomes[i, r])
            records.append({
                "id": f"c{i}", "index": i, "repeat": r, "risk_level": risk, "source": f"synthetic.yaml:{i + 1}",
                "status": "passed" if passed else "failed", "passed": passed,
                "metrics": {name: {"value": float(values[j][i, r])} for j, name in enumerate(names)},
            })
    table = {name: {"direction": "higher", "threshold": {"min": 0.0}} for name in names}
    return {"run_id": run_id, "timestamp": "2026-11-26T00:00:00Z", "metrics": table, "results": records}


def replicate(cell: Cell, rng: np.random.Generator, resamples: int) -> tuple[dict[str, Any], dict[str, Any],
                                                                            dict[str, Any]]:
    """One replication: draw base and head, compare; returns (base, head, comparison)."""
    p = base_probabilities(cell, rng)
    levels = _metric_levels(cell, rng)
    head_p = _head_probabilities(cell, p)
    head_levels = [level * (1.0 - cell.metric_drop) if j == 0 else level for j, level in enumerate(levels)]
    base = _document(cell, p, levels, rng, "base")
    head = _document(cell, head_p, head_levels, rng, "head")
    names = [f"m{j:02d}" for j in range(min(cell.pairwise, cell.gated))]
    table = summarize(simulated_preferences(cell, base, head, names, rng)) if names else None
    comparison = compare_runs(base, head, alpha=ALPHA, resamples=resamples,
                              seed=int(rng.integers(0, 2**31 - 1)), tolerances={}, pairwise=table,
                              pairwise_gated=names)
    return base, head, comparison


# ── repeat: adaptive ─────────────────────────────────────────────────────────────────────────

ADAPTIVE_BASE_REPEATS = 5
"""The base branch's run (on push, amortised over every PR against it) uses ``repeat: 5`` (docs/trustworthy-verdicts.md)."""
ADAPTIVE_FACTOR = 10
"""The two iid adaptive cells the targets name run this many times the replications."""
ADAPTIVE_OTHER_SHARE = 0.4
"""The other adaptive cells run this share of those replications."""


def adaptive_replicate(cell: Cell, rng: np.random.Generator, resamples: int) -> tuple[dict[str, Any], Plan]:
    """One PR under ``repeat: adaptive`` through the real code: base with ``ADAPTIVE_BASE_REPEATS`` runs per
    case, head's first trials, then the rounds ``verdict.adaptive.Plan`` asks for (each re-trial a fresh draw
    of the case's head outcome) within the budget; the comparison is ``compare_runs`` on the two documents."""
    p = base_probabilities(cell, rng)
    levels = _metric_levels(cell, rng)
    head_p = _head_probabilities(cell, p)
    head_levels = [level * (1.0 - cell.metric_drop) if j == 0 else level for j, level in enumerate(levels)]
    base = _document(replace(cell, repeats=ADAPTIVE_BASE_REPEATS), p, levels, rng, "base")
    head = _document(replace(cell, repeats=1), head_p, head_levels, rng, "head")
    plan = Plan(alpha=ALPHA, level=PASS_RATE_WEIGHT * ALPHA)
    outcomes = base_outcomes(base["results"])
    records = list(head["results"])
    for record in records:
        plan.add(record["id"], record["risk_level"] == "critical", record["status"] == "passed", outcomes[record["id"]])
    plan.after_round()
    room = parse_budget("auto", cell.n, cell.critical).trials or 0
    while wanted := plan.next_round(room - plan.retrials):
        for case_id in wanted:
            i = int(case_id[1:])
            passed = bool(rng.random() < head_p[i])
            records.append({"id": case_id, "index": i, "repeat": len(plan.cases[case_id].head),
                            "risk_level": records[i]["risk_level"], "source": records[i]["source"],
                            "status": "passed" if passed else "failed", "passed": passed, "metrics": {}})
            plan.add(case_id, records[i]["risk_level"] == "critical", passed)
        plan.after_round()
    head = head | {"results": records, "metadata": {"config": {"adaptive": True}}}
    comparison = compare_runs(base, head, alpha=ALPHA, resamples=resamples, seed=int(rng.integers(0, 2**31 - 1)),
                              tolerances={}, adaptive=True)
    return comparison, plan


def _head_probabilities(cell: Cell, p: np.ndarray) -> np.ndarray:
    """Head's pass probabilities: 10 points lower on average under A/B; a broken critical case (the last
    case, ``critical_kind`` ``broken``) at 0.5."""
    head_p = p * (1.0 - cell.drop / float(p.mean())) if cell.drop else p.copy()
    if cell.critical and cell.critical_kind == "broken":
        head_p[-1] = 0.5
    return head_p


def adaptive_modes(cell: Cell, replications: int, resamples: int, seed: int) -> dict[str, Any]:
    """One cell three ways on the same seed: one run per case on both sides, ``repeat: 3`` on both, and
    ``repeat: adaptive`` (base ``repeat: 3``): share flagged, inconclusive, head-side agent calls per PR
    (× one run; judge calls scale the same: one per trial and judged metric), and for critical cells the
    share of PRs the critical rule blocks."""
    rows: dict[str, Any] = {}
    for mode in ("one run", "repeat: 3", "adaptive"):
        rng = np.random.default_rng(seed)
        flagged = inconclusive = blocked = 0
        calls = 0.0
        started = time.perf_counter()
        for _ in range(replications):
            if mode == "adaptive":
                comparison, plan = adaptive_replicate(cell, rng, resamples)
                calls += (cell.n + plan.retrials) / cell.n
                blocked += any(plan.case_status(c.id)[0] == "failed" for c in plan.cases.values() if c.critical)
            else:
                k = 1 if mode == "one run" else 3
                _, head, comparison = replicate(replace(cell, repeats=k), rng, resamples)
                calls += k
                critical = [r for r in head["results"] if r["risk_level"] == "critical" and r["status"] != "passed"]
                blocked += bool(critical)  # pass^k: every repeat of a critical case must pass
            flagged += bool(comparison["regression"])
            inconclusive += comparison["verdict"] == "inconclusive"
        rows[mode] = {"rate": flagged / replications, "mc_se": math.sqrt(flagged * (replications - flagged))
                      / replications ** 1.5, "inconclusive": inconclusive / replications,
                      "calls": calls / replications, "critical_blocked": blocked / replications,
                      "seconds": round(time.perf_counter() - started, 1)}
    return {"cell": asdict(cell), "label": cell.label, "replications": replications, "modes": rows}


def adaptive_cells() -> list[tuple[str, Cell]]:
    """n = 200, one gated metric: A/A and A/B in each flakiness model; critical cells."""
    cells = [(("A/B: pass rate −10 points" if drop else "A/A"), Cell(gated=1, model=m, drop=drop))
             for drop in (0.0, DROP) for m in MODELS]
    cells += [("A/A, 10 critical cases at p = 0.9", Cell(gated=1, critical=10, critical_kind="p90")),
              ("1 critical case broken (PR 0.5, base 1.0)", Cell(gated=1, critical=1, critical_kind="broken"))]
    return cells


def compare_adaptive(replications: int, resamples: int, seed: int, *, progress: bool = True) -> list[dict[str, Any]]:
    out = []
    for index, (name, cell) in enumerate(adaptive_cells()):
        target = cell.model == "iid" and not cell.critical
        reps = replications if target else max(1, int(replications * ADAPTIVE_OTHER_SHARE))
        row = adaptive_modes(cell, reps, resamples, seed + 7000 + 31 * index) | {"name": name}
        out.append(row)
        if progress:
            print(f"[bench.stats] adaptive {name} ({cell.model}): " + ", ".join(
                f"{mode} {r['rate']:.1%} flagged, {r['calls']:.2f}× calls" for mode, r in row["modes"].items()),
                file=sys.stderr)
    return out


def critical_exact(m: int = 10, requirement: float = 0.9) -> dict[str, Any]:
    """The critical SPRT computed exactly (``sequential.critical_operating``) at α/m per case, an undecided case
    after 40 trials failing when ln Λ > 0: unchanged PRs blocked with m cases at p = 0.9; a broken case (p = 0.5)
    blocked; expected trials."""
    fine = critical_operating(0.9, requirement, ALPHA / m)
    broken = critical_operating(0.5, requirement, ALPHA / m)
    return {"m": m, "unchanged_blocked": 1 - (1 - fine["fails"]) ** m, "broken_blocked": broken["fails"],
            "trials_fine": fine["trials"], "trials_broken": broken["trials"],
            "one_run_blocked": 1 - 0.9 ** m, "repeat3_blocked": 1 - 0.9 ** (3 * m)}


JUDGE_NOISE = 0.15
"""Standard deviation of the content judge's noise on each answer's value."""
JUDGE_TIE = 0.05
"""The content judge says ``tie`` when the two noisy values are closer than this."""


def simulated_preferences(cell: Cell, base: dict[str, Any], head: dict[str, Any], names: Sequence[str],
                          rng: np.random.Generator) -> list[tuple[str, str]]:
    """(metric, preferred) for every case (first repeat) and metric in ``names``, from a position-fair judge
    asked in both orders and combined by the product's rule (``judges.pairwise.combine``):

    * ``random``: each order's answer is A, B or tie with probabilities 0.4, 0.4, 0.2, whatever the answers;
    * ``content``: the judge sees each answer's metric value plus N(0, 0.15²) noise (drawn afresh per order)
      and prefers the higher one, or says tie when they are within 0.05 — it tracks the metric, so its sign
      test is correlated with the metric's own test (weighted Holm needs no independence).

    Neither favours a position, so under A/A a head answer is preferred as often as the base's."""
    def value(doc: dict[str, Any], name: str) -> np.ndarray:
        return np.array([r["metrics"][name]["value"] for r in doc["results"] if r["repeat"] == 0])

    out: list[tuple[str, str]] = []
    for name in names:
        before, after = value(base, name), value(head, name)
        orders = []
        for a, b in ((before, after), (after, before)):  # order 1: base is A; order 2: head is A
            if cell.judge == "random":
                orders.append(rng.choice(np.array(["A", "B", "tie"]), size=before.size, p=[0.4, 0.4, 0.2]))
            elif cell.judge == "content":
                gap = (a + rng.normal(0.0, JUDGE_NOISE, a.size)) - (b + rng.normal(0.0, JUDGE_NOISE, b.size))
                orders.append(np.where(gap > JUDGE_TIE, "A", np.where(gap < -JUDGE_TIE, "B", "tie")))
            else:
                raise ValueError(f"unknown judge {cell.judge!r}")
        out += [(name, combine(str(first), str(second))) for first, second in zip(*orders, strict=True)]
    return out


def pairwise_flags(comparison: dict[str, Any]) -> dict[str, bool]:
    """This replication flagged by: the one family (``compare_runs``' ``regression``: a pairwise test shares its
    metric's slot); the one family with each pairwise test a slot of its own instead; the two families before
    (the comparison's tests in their own weighted Holm family, and the pairwise sign tests plain-Holm-adjusted
    together with the comparison's raw p-values — ``verdict.pairwise.pairwise_reasons`` until this change);
    and the comparison without pairwise judging (its members re-adjusted without the pairwise tests)."""
    tests = comparison["family"]["tests"]
    own = [t for t in tests if t["kind"] != "pairwise"]
    pairwise = [float(t["p_value"]) for t in tests if t["kind"] == "pairwise"]
    weights = family_weights([t["kind"] for t in own], PASS_RATE_WEIGHT, [t["name"] for t in own])
    alone = any(a <= ALPHA for a in stats.weighted_holm([float(t["p_value"]) for t in own], weights)) if own else False
    joined = stats.holm([*(float(t["p_value"]) for t in own), *pairwise])[len(own):]
    # the alternative weighting: each pairwise test a slot of its own, like one more gated metric
    slots = family_weights([t["kind"] for t in tests], PASS_RATE_WEIGHT,
                           [f"{t['name']}#pairwise" if t["kind"] == "pairwise" else t["name"] for t in tests])
    own_slot = any(a <= ALPHA for a in stats.weighted_holm([float(t["p_value"]) for t in tests], slots))
    return {"one family": bool(comparison["regression"]),
            "one family, pairwise own slot": own_slot,
            "two families (before)": alone or any(a <= ALPHA for a in joined),
            "without pairwise": alone}


def pairwise_cells() -> list[tuple[str, Cell]]:
    """A/A and A/B cells with pairwise judging (n = 200, one run unless stated)."""
    return [
        ("A/A", Cell(gated=3, pairwise=1)),
        ("A/A", Cell(gated=3, pairwise=3)),
        ("A/A", Cell(gated=3, pairwise=3, judge="content")),
        ("A/A", Cell(gated=6, pairwise=6, critical=10, critical_kind="flaky", repeats=3, judge="content")),
        ("A/A", Cell(gated=1, pairwise=1, model="sparse", judge="content")),
        ("A/B: pass rate −10 points", Cell(gated=1, pairwise=1, drop=DROP, judge="content")),
        ("A/B: gated 0/1 metric −8 %", Cell(gated=3, pairwise=1, metric_drop=0.08, judge="content")),
    ]


def compare_pairwise(replications: int, resamples: int, seed: int, *, progress: bool = True) -> list[dict[str, Any]]:
    """Per ``pairwise_cells`` cell, the share flagged by each rule of ``pairwise_flags`` on the same replications."""
    rows = []
    for index, (name, cell) in enumerate(pairwise_cells()):
        rng = np.random.default_rng(seed + 9000 + 1000 * index)
        started = time.perf_counter()
        hits: dict[str, int] = {}
        for _ in range(replications):
            for rule, flag in pairwise_flags(replicate(cell, rng, resamples)[2]).items():
                hits[rule] = hits.get(rule, 0) + int(flag)
        rates = {rule: count / replications for rule, count in hits.items()}
        row = {"name": name, "label": cell.label, "cell": asdict(cell), "replications": replications, "rates": rates,
               "mc_se": {rule: math.sqrt(r * (1.0 - r) / replications) for rule, r in rates.items()},
               "seconds": round(time.perf_counter() - started, 2)}
        rows.append(row)
        if progress:
            print(f"[bench.stats] pairwise {name} {cell.label}: {rates} ({row['seconds']} s)", file=sys.stderr)
    return rows


def flagged(cell: Cell, rng: np.random.Generator, resamples: int) -> bool:
    """One replication: the comparison's ``regression`` flag."""
    return bool(replicate(cell, rng, resamples)[2]["regression"])


def rate(cell: Cell, replications: int, resamples: int, seed: int) -> dict[str, Any]:
    """Share of ``replications`` the comparison flags, with its Monte Carlo standard error."""
    rng = np.random.default_rng(seed)
    started = time.perf_counter()
    hits = sum(flagged(cell, rng, resamples) for _ in range(replications))
    share = hits / replications
    return {"cell": asdict(cell), "label": cell.label, "replications": replications, "flagged": hits,
            "rate": share, "mc_se": math.sqrt(share * (1.0 - share) / replications),
            "seconds": round(time.perf_counter() - started, 2)}


def null_cells() -> list[Cell]:
    """The A/A cells: one factor at a time around the default."""
    default = Cell()
    cells = [replace(default, n=n) for n in (50, 200, 1000)]
    cells += [replace(default, gated=g) for g in (1, 6, 12)]
    cells += [replace(default, critical=10, critical_kind=kind) for kind in ("stable", "flaky")]
    cells += [replace(default, repeats=k) for k in (3, 5)]
    cells += [replace(default, critical=10, critical_kind="flaky", repeats=3)]
    cells += [replace(default, model=m) for m in MODELS if m != default.model]
    cells += [replace(default, gated=12, critical=10, critical_kind="flaky", repeats=3, model="sparse")]
    return cells


def power_cells() -> list[Cell]:
    """The A/B cells: a 10-point pass-rate drop, over n × repeats (1 gated metric) and over gated metrics."""
    cells = [Cell(n=n, gated=1, repeats=k, drop=DROP) for n in (50, 200) for k in (1, 3, 5)]
    cells += [Cell(n=1000, gated=1, repeats=k, drop=DROP) for k in (1, 3)]
    cells += [Cell(gated=g, repeats=k, drop=DROP) for g in (0, 3, 12) for k in (1, 3)]
    cells += [Cell(gated=1, repeats=1, model=m, drop=DROP) for m in MODELS if m != "iid"]
    return cells


@dataclass(frozen=True)
class Alternative:
    """A candidate decision rule, applied to the family p-values of the same replications."""

    label: str
    pass_rate_weight: float | None
    """The pass rate's weighted-Holm weight; None = plain Holm (equal weights)."""
    mid_p: bool
    """Mid-p McNemar (``stats.mcnemar_mid_p``) for the pass rate and the 0/1 metrics instead of the exact test."""


ALTERNATIVES = (
    Alternative("Holm, exact (as merged)", None, False),
    Alternative("Holm, mid-p", None, True),
    Alternative("weighted Holm 2/3, exact (chosen)", PASS_RATE_WEIGHT, False),
    Alternative("weighted Holm 4/5, exact", 0.8, False),
    Alternative("weighted Holm 2/3, mid-p", PASS_RATE_WEIGHT, True),
)
CHOSEN = 2
"""Index of the rule ``compare_runs`` applies: its decisions must equal the comparison's ``regression`` flag."""


def alternative_cells() -> list[tuple[str, Cell]]:
    """Cells where the candidate rules differ: n = 200, one run."""
    return [("A/A", Cell(gated=1)), ("A/B: pass rate −10 points", Cell(gated=1, drop=DROP)),
            ("A/A, pass rate only", Cell(gated=0)), ("A/B, pass rate only", Cell(gated=0, drop=DROP)),
            ("A/A, sparse", Cell(gated=1, model="sparse")),
            ("A/B: gated 0/1 metric −8 % (≈ −6 points), pass rate unchanged", Cell(gated=3, metric_drop=0.08))]


def _flips(base: dict[str, Any], head: dict[str, Any], name: str) -> tuple[int, int]:
    """(worse, better) cases of a 0/1 metric (higher is better), one run per case."""
    values = {r["id"]: r["metrics"][name]["value"] for r in base["results"]}
    worse = better = 0
    for record in head["results"]:
        d = record["metrics"][name]["value"] - values[record["id"]]
        worse += d < 0
        better += d > 0
    return worse, better


def decisions(base: dict[str, Any], head: dict[str, Any], comparison: dict[str, Any]) -> list[bool]:
    """Whether each of ``ALTERNATIVES`` flags this replication, from the family's p-values (mid-p recomputed
    from the flips) re-adjusted by ``stats.weighted_holm``."""
    tests = comparison["family"]["tests"]
    kinds = [t["kind"] for t in tests]
    exact = [float(t["p_value"]) for t in tests]
    mid = []
    for test in tests:
        if test["kind"] == "pass_rate":
            rate_block = comparison["pass_rate"]
            mid.append(stats.mcnemar_mid_p(rate_block["regressions"], rate_block["fixes"]))
        elif test["kind"] == "metric" and test["method"].startswith("exact McNemar"):
            mid.append(stats.mcnemar_mid_p(*_flips(base, head, test["name"])))
        else:
            mid.append(float(test["p_value"]))
    flags = []
    for alternative in ALTERNATIVES:
        weights = ([1.0] * len(kinds) if alternative.pass_rate_weight is None
                   else family_weights(kinds, alternative.pass_rate_weight))
        adjusted = stats.weighted_holm(mid if alternative.mid_p else exact, weights) if kinds else []
        flags.append(any(a <= ALPHA for a in adjusted))
    return flags


def _trinomial(n: int, worse: float, better: float) -> list[tuple[int, int, float]]:
    """P(b worse, c better, n − b − c unchanged) of n independent pairs, every (b, c) above 1e-16."""
    rest = 1.0 - worse - better
    out = []
    log_n = math.lgamma(n + 1)
    for b in range(n + 1):
        for c in range(n + 1 - b):
            r = n - b - c
            log_p = (log_n - math.lgamma(b + 1) - math.lgamma(c + 1) - math.lgamma(r + 1)
                     + b * math.log(worse) + c * math.log(better) + (r * math.log(rest) if r else 0.0))
            if log_p > -37.0:
                out.append((b, c, math.exp(log_p)))
    return out


def _share_above(pairs: list[tuple[int, int, float]], mid_p: bool, level: float) -> float:
    """P(p-value > level) of the one-sided McNemar test (exact or mid-p) over the (b, c) distribution."""
    test = stats.mcnemar_mid_p if mid_p else stats.mcnemar_one_sided
    return math.fsum(w for b, c, w in pairs if test(b, c) > level)


def exact_rates(n: int = 200, p: float = 0.8, drop: float = DROP) -> list[dict[str, Any]]:
    """Each alternative's flag rate in the iid cell with one gated 0/1 metric and one run, computed exactly
    (no simulation): the pass-rate flips are trinomial with P(worse) = p(1 − p + drop), P(better) =
    (1 − p)(p − drop) under A/B (p(1 − p) each under A/A); the metric's with P = E[l(1 − l)] =
    ab/((a + b)(a + b + 1)) each, l ~ Beta(a = 2, b = ½) (``_metric_levels``), independent of the outcome.
    Weighted Holm over two tests flags when some pᵢ ≤ wᵢ·α, so rate = 1 − P(p₁ > w₁α)·P(p₂ > w₂α)."""
    metric_discord = 2.0 * 0.5 / (2.5 * 3.5)
    metric = _trinomial(n, metric_discord, metric_discord)
    rows = []
    for name, worse, better in (("A/A", p * (1 - p), p * (1 - p)),
                                ("A/B: pass rate −10 points", p * (1 - p + drop), (1 - p) * (p - drop))):
        outcome = _trinomial(n, worse, better)
        rates = {}
        for alternative in ALTERNATIVES:
            w = 0.5 if alternative.pass_rate_weight is None else alternative.pass_rate_weight
            none = (_share_above(outcome, alternative.mid_p, w * ALPHA)
                    * _share_above(metric, alternative.mid_p, (1 - w) * ALPHA))
            rates[alternative.label] = 1.0 - none
        rows.append({"name": name, "n": n, "rates": rates})
    return rows


def mid_p_sizes(alpha: float = ALPHA, largest: int = 300) -> dict[str, Any]:
    """The one-sided mid-p McNemar test's size given N discordant cases, for N = 1 … ``largest``: it rejects
    every b with mid-p(b, N − b) ≤ α, so its size is Σ C(N, b)/2^N over those b (exact integers). Returns
    how many N exceed α and the worst N. (The exact test's size never exceeds α, by construction.)"""
    exceeding, worst, worst_n = 0, 0.0, 0
    for n in range(1, largest + 1):
        comb = [math.comb(n, b) for b in range(n + 1)]
        above = 0  # Σ_{i > b} C(n, i)
        rejected = 0
        limit = alpha * 2 ** (n + 1)
        for b in range(n, -1, -1):
            if 2 * above + comb[b] > limit:
                break
            rejected += comb[b]
            above += comb[b]
        size = rejected / 2**n
        if size > alpha:
            exceeding += 1
        if size > worst:
            worst, worst_n = size, n
    return {"alpha": alpha, "largest": largest, "exceeding": exceeding, "worst_size": worst, "worst_n": worst_n}


def compare_alternatives(replications: int, resamples: int, seed: int, *, progress: bool = True) -> list[dict[str, Any]]:
    """Each alternative's flag rate per ``alternative_cells`` cell, on the same replications (paired)."""
    rows = []
    for index, (name, cell) in enumerate(alternative_cells()):
        rng = np.random.default_rng(seed + 7000 + 1000 * index)
        started = time.perf_counter()
        hits = [0] * len(ALTERNATIVES)
        mismatches = 0
        for _ in range(replications):
            base, head, comparison = replicate(cell, rng, resamples)
            flags = decisions(base, head, comparison)
            hits = [h + f for h, f in zip(hits, flags, strict=True)]
            mismatches += flags[CHOSEN] != bool(comparison["regression"])
        row = {"name": name, "cell": asdict(cell), "replications": replications,
               "rates": {a.label: h / replications for a, h in zip(ALTERNATIVES, hits, strict=True)},
               "mismatches": mismatches, "seconds": round(time.perf_counter() - started, 2)}
        rows.append(row)
        if progress:
            print(f"[bench.stats] alternatives {name}: {row['rates']} ({row['seconds']} s)", file=sys.stderr)
    return rows


def simulate_adaptive(replications: int, resamples: int, seed: int, *, progress: bool = True) -> dict[str, Any]:
    """The ``repeat: adaptive`` part: its cells (``compare_adaptive``) and the critical SPRT computed exactly."""
    started = time.perf_counter()
    rows = compare_adaptive(replications, resamples, seed, progress=progress) if replications else []
    return {"adaptive": rows, "critical_exact": critical_exact(),
            "adaptive_seconds": round(time.perf_counter() - started, 1)}


def simulate(replications: int, resamples: int, seed: int, *, null: Sequence[Cell] | None = None,
             power: Sequence[Cell] | None = None, alternatives: int | None = None, pairwise: int | None = None,
             adaptive: int | None = None, progress: bool = True) -> dict[str, Any]:
    """Run every cell, the alternatives' comparison with ``alternatives`` replications per cell (default
    ``ALTERNATIVES_FACTOR``× ``replications``; 0 skips it) and the pairwise cells with ``pairwise`` (default
    ``PAIRWISE_FACTOR``× ``replications``; 0 skips them); returns the results document
    (bench/results/stats.json)."""
    started = time.perf_counter()
    out: dict[str, Any] = {"alpha": ALPHA, "drop": DROP, "replications": replications, "resamples": resamples,
                           "seed": seed, "null": [], "power": []}
    for key, cells in (("null", null_cells() if null is None else null),
                       ("power", power_cells() if power is None else power)):
        for index, cell in enumerate(cells):
            reps = replications * TARGET_FACTOR if key == "power" and is_target(cell) else replications
            row = rate(cell, reps, resamples, seed + 1000 * index + (0 if key == "null" else 500))
            out[key].append(row)
            if progress:
                print(f"[bench.stats] {key} {row['label']}: {row['rate']:.1%} ({row['seconds']} s)", file=sys.stderr)
    reps = replications * ALTERNATIVES_FACTOR if alternatives is None else alternatives
    out["alternatives"] = compare_alternatives(reps, resamples, seed, progress=progress) if reps else []
    out["exact"] = exact_rates() if reps else []
    out["mid_p_sizes"] = mid_p_sizes() if reps else None
    reps = replications * PAIRWISE_FACTOR if pairwise is None else pairwise
    out["pairwise"] = compare_pairwise(reps, resamples, seed, progress=progress) if reps else []
    out |= simulate_adaptive(replications * ADAPTIVE_FACTOR if adaptive is None else adaptive, resamples, seed,
                             progress=progress)
    out["seconds"] = round(time.perf_counter() - started, 1)
    out["targets"] = check_targets(out)
    return out


TARGET_FACTOR = 30
"""The power cells the targets name run this many times the replications (less Monte Carlo error)."""
ALTERNATIVES_FACTOR = 10
"""The alternatives' cells run this many times the replications."""
PAIRWISE_FACTOR = 10
"""The pairwise cells run this many times the replications."""


def is_target(cell: Cell) -> bool:
    """A power cell a target names: n = 200, one gated metric, iid, one run or 3 repeats."""
    return (cell.n, cell.gated, cell.critical, cell.model, cell.repeats) in {(200, 1, 0, "iid", 1), (200, 1, 0, "iid", 3)}


def check_targets(results: dict[str, Any]) -> dict[str, Any]:
    """The issue's targets, each with the measured rate and whether it is met: a power target is met when
    the rate is not significantly below it (rate + 2 MC s.e. ≥ target), an A/A cell when it is not
    significantly above 5 %, and the pooled A/A rate must be ≤ 5 % itself."""
    worst_null = max((row["rate"] for row in results["null"]), default=0.0)
    pooled_hits = sum(row["flagged"] for row in results["null"])
    pooled_runs = sum(row["replications"] for row in results["null"]) or 1
    pooled = pooled_hits / pooled_runs
    allowance = ALPHA + 2.0 * math.sqrt(ALPHA * (1.0 - ALPHA) / max(1, results["replications"]))

    def power_at(n: int, repeats: int) -> tuple[float | None, float]:
        for row in results["power"]:
            c = row["cell"]
            if (c["n"], c["repeats"], c["gated"], c["model"]) == (n, repeats, 1, "iid"):
                return float(row["rate"]), float(row["mc_se"])
        return None, 0.0

    (three, three_se), (one, one_se) = power_at(200, 3), power_at(200, 1)
    pairwise_null = [row for row in results.get("pairwise") or [] if row["name"] == "A/A"]
    targets: dict[str, Any] = {}
    if pairwise_null:
        worst = max(row["rates"]["one family"] for row in pairwise_null)
        reps = min(row["replications"] for row in pairwise_null)
        limit = ALPHA + 2.0 * math.sqrt(ALPHA * (1.0 - ALPHA) / reps)
        targets["aa_pairwise_max"] = {"rate": worst, "met": worst <= limit,
                                      "target": f"A/A with pairwise judging, no cell significantly above 5 % "
                                                f"(≤ 5 % + 2 MC s.e. = {limit:.1%})"}
    for row in results.get("adaptive") or []:
        c, mode = row["cell"], row["modes"]["adaptive"]
        se = math.sqrt(max(mode["rate"] * (1 - mode["rate"]), 1e-12) / row["replications"])
        if c["model"] != "iid" or c["critical"]:
            continue
        if c["drop"]:
            targets["adaptive_power_n200"] = {
                "rate": mode["rate"], "mc_se": se, "met": mode["rate"] + 2 * se >= 0.8 and mode["calls"] <= 1.3,
                "target": f"≥ 80 % (not significantly below) with ≤ 1.3× the calls of one run "
                          f"(measured {mode['calls']:.2f}×)"}
        else:
            limit = ALPHA + 2.0 * math.sqrt(ALPHA * (1.0 - ALPHA) / row["replications"])
            targets["adaptive_aa"] = {
                "rate": mode["rate"], "met": mode["rate"] <= limit and mode["calls"] <= 1.3,
                "target": f"≤ 5 % family-wise over both looks (≤ {limit:.1%}), ≤ 1.3× the calls "
                          f"(measured {mode['calls']:.2f}×)"}
    exact = results.get("critical_exact")
    if exact:
        targets["critical_unchanged_blocked"] = {
            "rate": exact["unchanged_blocked"], "met": exact["unchanged_blocked"] <= ALPHA,
            "target": f"≤ 5 % of unchanged PRs blocked with {exact['m']} critical cases at p = 0.9 (exact)"}
        targets["critical_broken_blocked"] = {
            "rate": exact["broken_blocked"], "met": exact["broken_blocked"] >= 0.95,
            "target": "≥ 95 % of PRs with a broken critical case (p = 0.5, base 1.0) blocked (exact)"}
    return targets | {
        "aa_pooled": {"rate": pooled, "target": f"≤ 5 % over all {pooled_runs} A/A replications",
                      "met": pooled <= ALPHA},
        "aa_max": {"rate": worst_null,
                   "target": f"no cell significantly above 5 % (≤ 5 % + 2 MC s.e. = {allowance:.1%})",
                   "met": worst_null <= allowance},
        "power_n200_3_repeats": {"rate": three, "mc_se": three_se, "target": "≥ 80 % (not significantly below)",
                                 "met": three is not None and three + 2 * three_se >= 0.8},
        "power_n200_1_run": {"rate": one, "mc_se": one_se, "target": "≥ 55 % (not significantly below)",
                             "met": one is not None and one + 2 * one_se >= 0.55},
        "power_n200_1_run_kept": {"rate": one, "mc_se": one_se,
                                  "target": "≥ 63 %, the power before #21 (not significantly below)",
                                  "met": one is not None and one + 2 * one_se >= 0.63},
    }


def render(results: dict[str, Any]) -> str:
    """Markdown tables of the results (the text between the doc markers)."""
    reps, resamples = results["replications"], results["resamples"]
    se5 = math.sqrt(0.05 * 0.95 / reps)
    lines = [
        f"Generated by `python -m bench.stats` ({reps} replications per cell, {TARGET_FACTOR}× for the two power "
        f"cells the targets name, {resamples} resamples, seed "
        f"{results['seed']}, {results['seconds']} s). Monte Carlo standard error of a rate r: √(r(1−r)/{reps}) "
        f"(±{se5:.1%} at 5 %). Family-wise α = {results['alpha']}.",
        "",
        "**A/A false alarms** (base and head from the same distribution; share of unchanged PRs flagged):",
        "",
        "| n | gated metrics | critical cases | repeats | model | flagged | ± MC s.e. |",
        "|---:|---:|---|---:|---|---:|---:|",
    ]
    lines += [_row(row) for row in results["null"]]
    lines += ["", f"**A/B power** (head's pass rate {results['drop']:.0%} lower; share of PRs flagged):", "",
              "| n | gated metrics | critical cases | repeats | model | flagged | ± MC s.e. |",
              "|---:|---:|---|---:|---|---:|---:|"]
    lines += [_row(row) for row in results["power"]]
    if results.get("alternatives"):
        lines += _alternatives_table(results["alternatives"])
    if results.get("exact"):
        labels = list(results["exact"][0]["rates"])
        lines += ["", "The same rules **computed exactly** (no Monte Carlo error) for n = 200, one run, one gated 0/1 "
                  "metric, iid outcomes (`exact_rates`):", "",
                  "| cell | " + " | ".join(labels) + " |", "|---|" + "---:|" * len(labels)]
        lines += [f"| {row['name']} | " + " | ".join(f"{row['rates'][label]:.1%}" for label in labels) + " |"
                  for row in results["exact"]]
    if results.get("pairwise"):
        lines += _pairwise_table(results["pairwise"])
    if results.get("adaptive"):
        lines += _adaptive_table(results["adaptive"], results.get("critical_exact"))
    sizes = results.get("mid_p_sizes")
    if sizes:
        lines += ["", f"Given N discordant cases, the one-sided mid-p test at α = {sizes['alpha']} rejects more than "
                  f"α of the time for {sizes['exceeding']} of N = 1 … {sizes['largest']} (worst: "
                  f"{sizes['worst_size']:.1%} at N = {sizes['worst_n']}); the exact test never does (`mid_p_sizes`)."]
    lines += ["", "Targets:", ""]
    for name, target in results["targets"].items():
        measured = "n/a" if target["rate"] is None else f"{target['rate']:.1%}"
        if target.get("mc_se"):
            measured += f" ± {target['mc_se']:.1%}"
        lines.append(f"- {name.replace('_', ' ')}: {measured} (target {target['target']}) — "
                     f"{'met' if target['met'] else 'NOT met'}")
    return "\n".join(lines)


def _alternatives_table(rows: list[dict[str, Any]]) -> list[str]:
    reps = rows[0]["replications"]
    labels = list(rows[0]["rates"])
    lines = ["", f"**Candidate decision rules** on the same {reps} replications per row (n = 200, one run; ± "
             f"{math.sqrt(0.05 * 0.95 / reps):.1%} at 5 %, ±{math.sqrt(0.25 / reps):.1%} at 50 %; share flagged):", "",
             "| cell | " + " | ".join(labels) + " |", "|---|" + "---:|" * len(labels)]
    for row in rows:
        lines.append(f"| {row['name']} (gated {row['cell']['gated']}, {row['cell']['model']}) | "
                     + " | ".join(f"{row['rates'][label]:.1%}" for label in labels) + " |")
    mismatches = sum(row["mismatches"] for row in rows)
    lines += ["", f"The chosen rule's column is recomputed from the family's p-values; it differs from "
              f"`compare_runs`' own decision in {mismatches} replications."]
    return lines


def _adaptive_table(rows: list[dict[str, Any]], exact: dict[str, Any] | None) -> list[str]:
    reps = max(row["replications"] for row in rows)
    few = min(row["replications"] for row in rows)
    lines = ["", f"**`repeat: adaptive`** (`adaptive_cells`, {reps} replications for the two iid rows without "
             f"critical cases, {few} for the others; ± {math.sqrt(0.05 * 0.95 / reps):.1%} at 5 %, "
             f"±{math.sqrt(0.16 / reps):.1%} at 80 % with {reps}; n = 200, one gated "
             f"metric; the base run has 1, 3 and {ADAPTIVE_BASE_REPEATS} runs per case (one run, repeat: 3, adaptive); adaptive re-trials within "
             "the default budget `auto`: 50 % of the cases + 39 per critical case). Flagged = share of PRs the comparison flags; inconclusive = share "
             "whose comparison ends inconclusive; calls = the PR's agent calls per decision as a multiple of one run "
             "(judge calls scale the same: one per trial and judged metric); critical blocked = share the critical "
             "rule fails (one run, repeat: 3: pass^k; adaptive: the SPRT):", "",
             "| cell | model | one run: flagged · inconclusive · calls | repeat: 3 | adaptive | critical blocked "
             "(one run · repeat: 3 · adaptive) |", "|---|---|---|---|---|---|"]
    for row in rows:
        m = row["modes"]
        cells = [f"{m[k]['rate']:.1%} · {m[k]['inconclusive']:.1%} · {m[k]['calls']:.2f}×"
                 for k in ("one run", "repeat: 3", "adaptive")]
        blocked = " · ".join(f"{m[k]['critical_blocked']:.1%}" for k in ("one run", "repeat: 3", "adaptive")) \
            if row["cell"]["critical"] else "—"
        lines.append(f"| {row['name']} | {row['cell']['model']} | " + " | ".join(cells) + f" | {blocked} |")
    ab = next((r for r in rows if r["cell"]["drop"] and r["cell"]["model"] == "iid"), None)
    if ab is not None:
        adaptive = ab["modes"]["adaptive"]
        lines += ["", "**Calls per trustworthy decision** (A/B iid row: agent calls per PR ÷ power, × one run; a "
                  "trustworthy decision = a 10-point drop caught): one run "
                  f"{ab['modes']['one run']['calls'] / max(ab['modes']['one run']['rate'], 1e-9):.2f}×, repeat: 3 "
                  f"{ab['modes']['repeat: 3']['calls'] / max(ab['modes']['repeat: 3']['rate'], 1e-9):.2f}×, adaptive "
                  f"{adaptive['calls'] / max(adaptive['rate'], 1e-9):.2f}×; the peers' fixed-n cost (promptfoo, "
                  "DeepEval, Braintrust, LangSmith run every case a fixed k times: k = 3 to reach ≥ 80 %) is the "
                  "repeat: 3 column."]
    if exact:
        lines += ["", f"Critical cases computed exactly (`critical_exact`, the SPRT at α/{exact['m']} per case): "
                  f"{exact['m']} unchanged critical cases at p = 0.9 block {exact['unchanged_blocked']:.1%} of PRs "
                  f"(one run, pass^1: {exact['one_run_blocked']:.1%}; repeat: 3, pass^3: {exact['repeat3_blocked']:.1%}); "
                  f"a broken one (p = 0.5) is blocked {exact['broken_blocked']:.1%} of the time; expected trials "
                  f"{exact['trials_fine']:.1f} (p = 0.9) and {exact['trials_broken']:.1f} (p = 0.5) per critical case."]
    return lines


def _pairwise_table(rows: list[dict[str, Any]]) -> list[str]:
    reps = rows[0]["replications"]
    labels = list(rows[0]["rates"])
    lines = ["", f"**Pairwise judging** (`pairwise_cells`; a position-fair judge asked in both orders, every case's "
             f"answer compared; {reps} replications per row, ± {math.sqrt(0.05 * 0.95 / reps):.1%} at 5 %; share "
             "flagged by the one weighted Holm family, by the two families used before, and by the comparison "
             "without the pairwise tests):", "",
             "| cell | n | gated (judged pairwise) | critical | repeats | model | judge | " + " | ".join(labels) + " |",
             "|---|---:|---|---|---:|---|---|" + "---:|" * len(labels)]
    for row in rows:
        c = row["cell"]
        critical = f"{c['critical']} {c['critical_kind']}" if c["critical"] else "0"
        lines.append(f"| {row['name']} | {c['n']} | {c['gated']} ({c['pairwise']}) | {critical} | {c['repeats']} | "
                     f"{c['model']} | {c['judge']} | " + " | ".join(f"{row['rates'][label]:.1%}" for label in labels)
                     + " |")
    return lines


def _row(row: dict[str, Any]) -> str:
    c = row["cell"]
    critical = f"{c['critical']} {c['critical_kind']}" if c["critical"] else "0"
    return (f"| {c['n']} | {c['gated']} | {critical} | {c['repeats']} | {c['model']} | {row['rate']:.1%} | "
            f"{row['mc_se']:.1%} |")


def write_tables(text: str, paths: Iterable[Path]) -> list[Path]:
    """Replace the text between the markers in each file that has them; returns the files written."""
    written = []
    for path in paths:
        if not path.exists():
            continue
        content = path.read_text(encoding="utf-8")
        start, stop = content.find(BEGIN), content.find(END)
        if start < 0 or stop < start:
            continue
        path.write_text(content[: start + len(BEGIN)] + "\n" + text + "\n" + content[stop:], encoding="utf-8")
        written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.stats", description=__doc__.split("\n\n")[0])
    parser.add_argument("--replications", type=int, default=150, help="replications per cell (150)")
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap/permutation resamples (1000)")
    parser.add_argument("--seed", type=int, default=20261126)
    parser.add_argument("--output", type=Path, default=RESULTS, help="results file (bench/results/stats.json)")
    parser.add_argument("--no-docs", action="store_true", help="do not rewrite the tables in the docs")
    parser.add_argument("--only-adaptive", action="store_true",
                        help="recompute only the repeat: adaptive part, keeping the rest of the results file")
    args = parser.parse_args(argv)
    if args.only_adaptive and args.output.exists():
        results = json.loads(args.output.read_text(encoding="utf-8"))
        results |= simulate_adaptive(args.replications * ADAPTIVE_FACTOR, args.resamples, args.seed)
        results["targets"] = check_targets(results)
    else:
        results = simulate(args.replications, args.resamples, args.seed)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    text = render(results)
    print(text)
    if not args.no_docs:
        for path in write_tables(text, DOCS):
            print(f"[bench.stats] tables written to {path.relative_to(ROOT)}", file=sys.stderr)
    return 0 if all(t["met"] for t in results["targets"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
