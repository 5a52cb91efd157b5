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
docs/judge-calibration.md (between ``<!-- bench.calibration:begin -->`` and ``<!-- bench.calibration:end -->``).

**Controls** (``judges.controls``): the same judge model on control sets of n items, a fixed share of them positive
(``CONTROL_PASS_SHARE``, as the builder makes them: 2 positives of up to 8 items per case), scored through
``agreement`` (κ and its percentile-bootstrap interval) and ``control_standing`` at the default ``ControlFloor``
(the interval's low end ≥ 0.4 on ≥ 10 controls). Reported as the admission rate per (true κ, n), the default
control-set size ``DEFAULT_MAX_ITEMS`` included; table between ``<!-- bench.controls:begin -->`` and
``<!-- bench.controls:end -->``.
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

from evalgate.judges.controls import DEFAULT_MAX_ITEMS
from evalgate.verdict.calibration import ControlFloor, Floor, Pair, agreement, cohen_kappa, control_standing, standing

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "calibration.json"
DOC = ROOT / "docs" / "judge-calibration.md"
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


CONTROL_KAPPAS = (0.2, 0.4, 0.6, 0.7, 0.8, 0.9)
CONTROL_SIZES = (20, 40, DEFAULT_MAX_ITEMS)
CONTROL_PASS_SHARE = 0.3


def control_admission_rate(kappa: float, n: int, replications: int, rng: random.Random,
                           floor: ControlFloor = ControlFloor()) -> float:
    """Share of ``replications`` control sets of ``n`` items (``CONTROL_PASS_SHARE`` of them positive) on which the
    judge passes its controls: ``agreement`` over the pairs, then ``control_standing``."""
    e = flip_rate(CONTROL_PASS_SHARE, kappa)
    positives = round(CONTROL_PASS_SHARE * n)
    admitted = 0
    for _ in range(replications):
        pairs = [Pair(f"c{i}", i < positives, None, 1.0 if (i < positives) != (rng.random() < e) else 0.0)
                 for i in range(n)]
        record = agreement(pairs, lambda value: value >= 0.5)
        admitted += control_standing(record, floor)[0] == "passed"
    return admitted / replications


def measure_controls(replications: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    cells = []
    for kappa in CONTROL_KAPPAS:
        for n in CONTROL_SIZES:
            rate = control_admission_rate(kappa, n, replications, rng)
            cells.append({"true_kappa": kappa, "n": n, "admitted": round(rate, 4),
                          "se": round(math.sqrt(rate * (1 - rate) / replications), 4)})
    return {"replications": replications, "seed": seed, "pass_share": CONTROL_PASS_SHARE,
            "floor": {"min_kappa_low": ControlFloor().min_kappa_low, "min_items": ControlFloor().min_items},
            "default_size": DEFAULT_MAX_ITEMS, "cells": cells}


def control_table(figures: dict[str, Any]) -> str:
    lines = ["| true κ | " + " | ".join(f"n = {n}" + (" (default)" if n == figures["default_size"] else "")
                                       for n in CONTROL_SIZES) + " |", "|" + "---|" * (1 + len(CONTROL_SIZES))]
    by_key = {(c["true_kappa"], c["n"]): c for c in figures["cells"]}
    for kappa in CONTROL_KAPPAS:
        lines.append(f"| {kappa:g} | " + " | ".join(f"{100 * by_key[(kappa, n)]['admitted']:.1f} %"
                                                    for n in CONTROL_SIZES) + " |")
    return "\n".join(lines)


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
    text = pattern.sub(lambda _: block, text)
    controls = figures.get("controls")
    if controls is not None:
        block = (f"<!-- bench.controls:begin -->\nAdmission rate by controls (share of control sets on which the "
                 f"judge passes), {controls['replications']:,} sets per cell (standard error ≤ "
                 f"{100 * max(c['se'] for c in controls['cells']):.1f} points), {controls['pass_share']:.0%} of the "
                 f"controls positive, floor: the low end of κ's 95 % interval ≥ {controls['floor']['min_kappa_low']:g} "
                 f"on ≥ {controls['floor']['min_items']} controls:\n\n{control_table(controls)}\n"
                 "<!-- bench.controls:end -->")
        pattern = re.compile(r"<!-- bench\.controls:begin -->.*?<!-- bench\.controls:end -->", re.S)
        if not pattern.search(text):
            raise SystemExit(f"{DOC}: no bench.controls markers")
        text = pattern.sub(lambda _: block, text)
    DOC.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replications", type=int, default=4000)
    parser.add_argument("--control-replications", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=20261126)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    figures = measure(args.replications, args.seed)
    figures["controls"] = measure_controls(args.control_replications, args.seed)
    figures["seconds"] = round(time.perf_counter() - started, 1)
    print(table(figures))
    print()
    print(control_table(figures["controls"]))
    if not args.no_write:
        RESULTS.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
        write_doc(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
