"""Simulation of the regression decision: ``python -m bench.stats``.

Synthetic base and head results documents go through the real comparison
(``evalgate.verdict.compare.compare_runs``: the same collapsing of repeats, tests, Holm adjustment and
``regression`` flag a run uses); the share of replications it flags is

* the **A/A false-alarm rate** when base and head are drawn from the same distribution (target ≤ 5 %,
  the family-wise level α = 0.05, in every cell), and
* the **A/B power** when head's pass rate is 10 points lower (targets: ≥ 80 % at n = 200 with 3 repeats,
  ≥ 55 % with one run; those two cells run 3× the replications).

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

from evalgate.verdict.compare import compare_runs

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

    @property
    def label(self) -> str:
        crit = f"{self.critical} {self.critical_kind}" if self.critical else "0"
        return f"n={self.n}, gated={self.gated}, critical={crit}, repeats={self.repeats}, model={self.model}"


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
    critical = np.full(cell.critical, 0.98 if cell.critical_kind == "stable" else 0.6)
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


def flagged(cell: Cell, rng: np.random.Generator, resamples: int) -> bool:
    """One replication: draw base and head, compare, return the comparison's ``regression`` flag."""
    p = base_probabilities(cell, rng)
    levels = _metric_levels(cell, rng)
    head_p = p * (1.0 - cell.drop / float(p.mean())) if cell.drop else p
    base = _document(cell, p, levels, rng, "base")
    head = _document(cell, head_p, levels, rng, "head")
    comparison = compare_runs(base, head, alpha=ALPHA, resamples=resamples,
                              seed=int(rng.integers(0, 2**31 - 1)), tolerances={})
    return bool(comparison["regression"])


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


def simulate(replications: int, resamples: int, seed: int, *, null: Sequence[Cell] | None = None,
             power: Sequence[Cell] | None = None, progress: bool = True) -> dict[str, Any]:
    """Run every cell; returns the results document (bench/results/stats.json)."""
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
    out["seconds"] = round(time.perf_counter() - started, 1)
    out["targets"] = check_targets(out)
    return out


TARGET_FACTOR = 3
"""The power cells the targets name run this many times the replications (less Monte Carlo error)."""


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
    return {
        "aa_pooled": {"rate": pooled, "target": f"≤ 5 % over all {pooled_runs} A/A replications",
                      "met": pooled <= ALPHA},
        "aa_max": {"rate": worst_null,
                   "target": f"no cell significantly above 5 % (≤ 5 % + 2 MC s.e. = {allowance:.1%})",
                   "met": worst_null <= allowance},
        "power_n200_3_repeats": {"rate": three, "mc_se": three_se, "target": "≥ 80 % (not significantly below)",
                                 "met": three is not None and three + 2 * three_se >= 0.8},
        "power_n200_1_run": {"rate": one, "mc_se": one_se, "target": "≥ 55 % (not significantly below)",
                             "met": one is not None and one + 2 * one_se >= 0.55},
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
    lines += ["", "Targets:", ""]
    for name, target in results["targets"].items():
        measured = "n/a" if target["rate"] is None else f"{target['rate']:.1%}"
        if target.get("mc_se"):
            measured += f" ± {target['mc_se']:.1%}"
        lines.append(f"- {name.replace('_', ' ')}: {measured} (target {target['target']}) — "
                     f"{'met' if target['met'] else 'NOT met'}")
    return "\n".join(lines)


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
    args = parser.parse_args(argv)
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
