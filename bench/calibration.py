"""Error rates of the calibration floor: ``python -m bench.calibration``.

The gate lets a judged metric gate when its judge's calibration meets the floor: Cohen's κ ≥ 0.6 on ≥ 30
labelled examples (``evalgate.verdict.calibration.standing``, the defaults). κ is measured on a sample of
labels, so a judge whose true agreement is poor can clear the floor by luck, and a good judge can miss it.
This bench measures both, through the product's own code: for each true κ and number of labels n it draws
R labelled sets, scores them with ``cohen_kappa``, stores κ rounded as ``agreement`` stores it, and asks
``standing`` whether the judge is admitted.

Model of a judge: labels pass with probability p (the share of passing examples, 0.5 and 0.3); the judge
flips a label with probability e on either class, so its agreement is p_o = 1 − e, its pass rate
q = p(1 − e) + (1 − p)e, chance agreement p_e = pq + (1 − p)(1 − q), and its true
κ = (p_o − p_e) / (1 − p_e); e is solved for each target κ by bisection.

Reported: the admission rate per (p, true κ, n) with its Monte Carlo standard error √(r(1 − r)/R), i.e. the
**false admission** rate for true κ below the floor (κ 0.4 is "moderate", 0.2 "poor") and the **false
refusal** rate (1 − admission) for true κ above it. Writes bench/results/calibration.json and the table in
docs/judges.md (between ``<!-- bench.calibration:begin -->`` and ``<!-- bench.calibration:end -->``).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import sys
import time
from pathlib import Path
from typing import Any

from evalgate.verdict.calibration import Floor, cohen_kappa, standing

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "calibration.json"
DOC = ROOT / "docs" / "judges.md"
KAPPAS = (0.2, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
SIZES = (30, 50, 100, 200)
PASS_SHARES = (0.5, 0.3)


def true_kappa(p: float, e: float) -> float:
    """κ of a judge that flips each label with probability ``e`` on labels passing with probability ``p``."""
    q = p * (1 - e) + (1 - p) * e
    chance = p * q + (1 - p) * (1 - q)
    return ((1 - e) - chance) / (1 - chance)


def flip_rate(p: float, kappa: float) -> float:
    """The flip probability e with ``true_kappa(p, e) == kappa`` (κ falls as e rises on [0, 0.5])."""
    low, high = 0.0, 0.5
    for _ in range(60):
        middle = (low + high) / 2
        if true_kappa(p, middle) > kappa:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def admission_rate(p: float, kappa: float, n: int, replications: int, rng: random.Random,
                   floor: Floor = Floor()) -> float:
    """Share of ``replications`` labelled sets of size ``n`` on which ``standing`` admits the judge."""
    e = flip_rate(p, kappa)
    admitted = 0
    for _ in range(replications):
        labels = [rng.random() < p for _ in range(n)]
        verdicts = [label != (rng.random() < e) for label in labels]
        measured = cohen_kappa(labels, verdicts)
        record = {"kappa": None if measured is None else round(measured, 4), "n": n}
        admitted += standing(record, None, floor)[0] == "calibrated"
    return admitted / replications


def measure(replications: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    cells = []
    for p in PASS_SHARES:
        for kappa in KAPPAS:
            for n in SIZES:
                rate = admission_rate(p, kappa, n, replications, rng)
                cells.append({"pass_share": p, "true_kappa": kappa, "n": n, "admitted": round(rate, 4),
                              "se": round(math.sqrt(rate * (1 - rate) / replications), 4)})
    return {"replications": replications, "seed": seed, "floor": {"min_kappa": Floor().min_kappa,
                                                                   "min_labels": Floor().min_labels},
            "cells": cells}


def table(figures: dict[str, Any]) -> str:
    """The markdown table: one row per (pass share, true κ), one column per n; admission rates in %."""
    head = "| labels passing | true κ | " + " | ".join(f"n = {n}" for n in SIZES) + " |"
    lines = [head, "|" + "---|" * (2 + len(SIZES))]
    by_key = {(c["pass_share"], c["true_kappa"], c["n"]): c for c in figures["cells"]}
    for p in PASS_SHARES:
        for kappa in KAPPAS:
            rates = [f"{100 * by_key[(p, kappa, n)]['admitted']:.1f} %" for n in SIZES]
            lines.append(f"| {p:.0%} | {kappa:g} | " + " | ".join(rates) + " |")
    return "\n".join(lines)


def write_doc(figures: dict[str, Any]) -> None:
    text = DOC.read_text(encoding="utf-8")
    block = (f"<!-- bench.calibration:begin -->\nAdmission rate (share of labelled sets on which the judge may gate), "
             f"{figures['replications']:,} sets per cell (standard error ≤ "
             f"{100 * max(c['se'] for c in figures['cells']):.1f} points), floor κ ≥ "
             f"{figures['floor']['min_kappa']:g} on ≥ {figures['floor']['min_labels']} labels:\n\n"
             f"{table(figures)}\n<!-- bench.calibration:end -->")
    pattern = re.compile(r"<!-- bench\.calibration:begin -->.*?<!-- bench\.calibration:end -->", re.S)
    if not pattern.search(text):
        raise SystemExit(f"{DOC}: no bench.calibration markers")
    DOC.write_text(pattern.sub(lambda _: block, text), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replications", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=20261126)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    figures = measure(args.replications, args.seed)
    figures["seconds"] = round(time.perf_counter() - started, 1)
    print(table(figures))
    if not args.no_write:
        RESULTS.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
        write_doc(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
