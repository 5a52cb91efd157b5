"""Agreement between a judge and human labels, and what the gate does with it. Pure functions only.

Binary agreement (pass/fail at the metric's threshold, labels vs the judge's verdicts), n pairs:

* accuracy p_o = agreements / n, with a Wilson score interval (z = 1.96);
* Cohen's κ = (p_o − p_e) / (1 − p_e), p_e = p_l·p_j + (1 − p_l)(1 − p_j) where p_l and p_j are the
  labels' and the judge's pass rates; undefined (None) when p_e = 1 (both sides one class). Its interval
  is a percentile bootstrap (``BOOTSTRAP_RESAMPLES`` resamples of the pairs, seed ``BOOTSTRAP_SEED``, so
  the same labels always give the same interval; resamples where κ is undefined are left out).

Score agreement (labels given as values on the metric's scale), n ≥ 3 pairs:

* Spearman's ρ: Pearson's r of the average ranks (ties share their mean rank); interval by Fisher's z
  with SE = √(1.06 / (n − 3)) (Fieller, Hartley & Pearson 1957);
* Kendall's τ_b = (C − D) / √((n₀ − n₁)(n₀ − n₂)), n₀ = n(n−1)/2, n₁ / n₂ the tied pairs in labels /
  verdicts (scipy's default); interval by Fisher's z with SE = √(0.437 / (n − 4)) (same source; n ≥ 5).

Pairwise preferences: ``sign_test`` (exact binomial, p = ½).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from evalgate.model import Threshold
from evalgate.verdict.stats import mcnemar_one_sided

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20261126
Z95 = 1.959963984540054
DEFAULT_MIN_KAPPA = 0.6
DEFAULT_MIN_LABELS = 30


# --- binary agreement ---------------------------------------------------------------------------------


def confusion(labels: Sequence[bool], verdicts: Sequence[bool]) -> dict[str, int]:
    """Counts of (label, verdict): ``pass_pass``, ``pass_fail`` (label pass, judge fail), ``fail_pass``,
    ``fail_fail``."""
    table = {"pass_pass": 0, "pass_fail": 0, "fail_pass": 0, "fail_fail": 0}
    for label, verdict in zip(labels, verdicts, strict=True):
        table[f"{'pass' if label else 'fail'}_{'pass' if verdict else 'fail'}"] += 1
    return table


def cohen_kappa(labels: Sequence[bool], verdicts: Sequence[bool]) -> float | None:
    """Cohen's κ of two binary raters (see the module docstring); None when undefined."""
    n = len(labels)
    if n == 0 or n != len(verdicts):
        return None
    observed = sum(1 for a, b in zip(labels, verdicts, strict=True) if a == b) / n
    p_label = sum(labels) / n
    p_judge = sum(verdicts) / n
    expected = p_label * p_judge + (1 - p_label) * (1 - p_judge)
    if expected >= 1.0:
        return None
    return (observed - expected) / (1 - expected)


def nominal_kappa(labels: Sequence[str], verdicts: Sequence[str]) -> float | None:
    """Cohen's κ of two raters over any categories (pairwise preferences A / B / tie):
    p_e = Σ_k (n_label(k) / n)(n_judge(k) / n); None when undefined (p_e = 1)."""
    n = len(labels)
    if n == 0 or n != len(verdicts):
        return None
    observed = sum(1 for a, b in zip(labels, verdicts, strict=True) if a == b) / n
    expected = sum((labels.count(k) / n) * (verdicts.count(k) / n) for k in set(labels) | set(verdicts))
    if expected >= 1.0:
        return None
    return (observed - expected) / (1 - expected)


def nominal_kappa_interval(labels: Sequence[str], verdicts: Sequence[str], *, resamples: int = BOOTSTRAP_RESAMPLES,
                           seed: int = BOOTSTRAP_SEED) -> tuple[float, float] | None:
    """95 % percentile-bootstrap interval of ``nominal_kappa`` (pairs resampled with replacement; resamples where κ
    is undefined are left out)."""
    import numpy as np  # lazy: numpy (~0.1 s) only for bootstrap and exact statistics

    n = len(labels)
    if n < 2:
        return None
    rng = np.random.default_rng(seed)
    kappas = []
    for draw in rng.integers(0, n, size=(resamples, n)):
        value = nominal_kappa([labels[i] for i in draw], [verdicts[i] for i in draw])
        if value is not None:
            kappas.append(value)
    if not kappas:
        return None
    low, high = np.percentile(kappas, [2.5, 97.5])
    return (float(low), float(high))


def preference_agreement(rows: Sequence[tuple[str, str | None, str, str]]) -> dict[str, Any]:
    """Human vs judge preferences: rows of (example, judge's combined preference A / B / tie or None when it gave
    none, the human's, the judge's reasoning). Accuracy (Wilson interval), Cohen's κ over the three categories,
    the confusion counts ``label_verdict`` and the disagreements."""
    scored = [row for row in rows if row[1] is not None]
    labels = [row[2] for row in scored]
    verdicts = [str(row[1]) for row in scored]
    n = len(scored)
    agree = sum(1 for a, b in zip(labels, verdicts, strict=True) if a == b)
    confusion: dict[str, int] = {}
    for label, verdict in zip(labels, verdicts, strict=True):
        confusion[f"{label}_{verdict}"] = confusion.get(f"{label}_{verdict}", 0) + 1
    return {"n": n, "unavailable": len(rows) - n, "accuracy": _round(agree / n) if n else None,
            "accuracy_ci": _pair(wilson_interval(agree, n)) if n else None,
            "kappa": _round(nominal_kappa(labels, verdicts)), "kappa_ci": _pair(nominal_kappa_interval(labels, verdicts)),
            "confusion": dict(sorted(confusion.items())),
            "methods": {"accuracy_ci": "Wilson score, 95%", "kappa": "Cohen's kappa over A / B / tie",
                        "kappa_ci": f"percentile bootstrap, {BOOTSTRAP_RESAMPLES} resamples, 95%"},
            "disagreements": [{"example": e, "label": label, "verdict": v, "reasoning": r[:500]}
                              for e, v, label, r in scored if v != label][:5],
            "pairs": [[e, v, label] for e, v, label, _ in rows]}


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a proportion: (p̂ + z²/2n ± z·√(p̂(1−p̂)/n + z²/4n²)) / (1 + z²/n)."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    centre = p + z * z / (2 * n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    denominator = 1 + z * z / n
    return (max(0.0, (centre - half) / denominator), min(1.0, (centre + half) / denominator))


def kappa_interval(labels: Sequence[bool], verdicts: Sequence[bool], *, resamples: int = BOOTSTRAP_RESAMPLES,
                   seed: int = BOOTSTRAP_SEED) -> tuple[float, float] | None:
    """95 % percentile-bootstrap interval of κ over the pairs (None when fewer than 2 pairs or no resample
    has a defined κ). Each resample needs only its four cell counts, so it is a multinomial draw."""
    import numpy as np  # lazy: numpy (~0.1 s) only for bootstrap and exact statistics

    n = len(labels)
    if n < 2:
        return None
    cells = confusion(labels, verdicts)
    probabilities = np.array([cells["pass_pass"], cells["pass_fail"], cells["fail_pass"], cells["fail_fail"]]) / n
    draws = np.random.default_rng(seed).multinomial(n, probabilities, size=resamples).astype(float)
    pp, pf, fp, ff = draws.T
    observed = (pp + ff) / n
    p_label = (pp + pf) / n
    p_judge = (pp + fp) / n
    expected = p_label * p_judge + (1 - p_label) * (1 - p_judge)
    defined = expected < 1.0
    if not defined.any():
        return None
    kappas = (observed[defined] - expected[defined]) / (1 - expected[defined])
    low, high = np.percentile(kappas, [2.5, 97.5])
    return (float(low), float(high))


# --- score agreement ----------------------------------------------------------------------------------


def average_ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, tied values sharing their mean rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    n = len(x)
    if n < 2:
        return None
    mx, my = sum(x) / n, sum(y) / n
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's ρ (Pearson's r of the average ranks); None when either side is constant."""
    return pearson(average_ranks(x), average_ranks(y))


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's τ_b (O(n²): calibration sets are small); None when either side is constant."""
    n = len(x)
    concordant = discordant = tied_x = tied_y = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx = x[i] - x[j]
            dy = y[i] - y[j]
            if dx == 0 and dy == 0:
                tied_x += 1
                tied_y += 1
            elif dx == 0:
                tied_x += 1
            elif dy == 0:
                tied_y += 1
            elif (dx > 0) == (dy > 0):
                concordant += 1
            else:
                discordant += 1
    n0 = n * (n - 1) / 2
    denominator = math.sqrt((n0 - tied_x) * (n0 - tied_y))
    if denominator == 0:
        return None
    return (concordant - discordant) / denominator


def fisher_interval(r: float | None, n: int, variance: float, dof: int) -> tuple[float, float] | None:
    """95 % interval of a correlation through Fisher's z: tanh(atanh(r) ± z·√(variance / (n − dof)))."""
    if r is None or n - dof <= 0:
        return None
    clipped = max(-0.999999, min(0.999999, r))
    z = math.atanh(clipped)
    half = Z95 * math.sqrt(variance / (n - dof))
    return (math.tanh(z - half), math.tanh(z + half))


# --- the agreement report -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Pair:
    """One labelled example scored by the judge: the human label (pass/fail and, when given, a value) and the
    judge's value (None: no verdict)."""

    example: str
    label_pass: bool
    label_value: float | None
    judge_value: float | None
    reasoning: str = ""
    source: str = ""
    problem: str | None = None


def agreement(pairs: Sequence[Pair], passes: Any) -> dict[str, Any]:
    """Accuracy, κ, Spearman and Kendall (each with its interval and method), the confusion matrix and the
    worst disagreements. ``passes(value) → bool`` is the metric's threshold; pairs without a judge value are
    counted (``unavailable``) and left out of every statistic."""
    scored = [p for p in pairs if p.judge_value is not None]
    labels = [p.label_pass for p in scored]
    verdicts = [bool(passes(p.judge_value)) for p in scored]
    n = len(scored)
    agree = sum(1 for a, b in zip(labels, verdicts, strict=True) if a == b)
    kappa = cohen_kappa(labels, verdicts)
    interval = kappa_interval(labels, verdicts)
    report: dict[str, Any] = {
        "n": n,
        "unavailable": len(pairs) - n,
        "accuracy": _round(agree / n) if n else None,
        "accuracy_ci": _pair(wilson_interval(agree, n)) if n else None,
        "kappa": _round(kappa),
        "kappa_ci": _pair(interval),
        "confusion": confusion(labels, verdicts),
        "methods": {"accuracy_ci": "Wilson score, 95%",
                    "kappa_ci": f"percentile bootstrap, {BOOTSTRAP_RESAMPLES} resamples, 95%",
                    "spearman_ci": "Fisher z, SE sqrt(1.06/(n-3)), 95%",
                    "kendall_ci": "Fisher z, SE sqrt(0.437/(n-4)), 95%"},
    }
    valued = [p for p in scored if p.label_value is not None]
    x = [float(p.label_value) for p in valued if p.label_value is not None]
    y = [float(p.judge_value) for p in valued if p.judge_value is not None]
    rho = spearman(x, y) if len(x) >= 3 else None
    tau = kendall_tau_b(x, y) if len(x) >= 3 else None
    report.update({"scored_labels": len(x), "spearman": _round(rho),
                   "spearman_ci": _pair(fisher_interval(rho, len(x), 1.06, 3)),
                   "kendall": _round(tau), "kendall_ci": _pair(fisher_interval(tau, len(x), 0.437, 4))})
    report["disagreements"] = worst_disagreements(scored, verdicts)
    report["pairs"] = [[p.example, p.label_pass, p.label_value, p.judge_value] for p in pairs]
    return report


def worst_disagreements(scored: Sequence[Pair], verdicts: Sequence[bool], limit: int = 5) -> list[dict[str, Any]]:
    """The pairs where label and verdict disagree, farthest first (by |label value − judge value| when the
    label has a value, else 1), with the judge's reasoning."""
    rows = []
    for pair, verdict in zip(scored, verdicts, strict=True):
        if pair.label_pass == verdict:
            continue
        gap = abs(pair.label_value - pair.judge_value) if (pair.label_value is not None
                                                          and pair.judge_value is not None) else 1.0
        rows.append((gap, pair, verdict))
    rows.sort(key=lambda row: (-row[0], row[1].example))
    return [{"example": p.example, "source": p.source, "label": "pass" if p.label_pass else "fail",
             "label_value": p.label_value, "verdict": "pass" if v else "fail", "judge_value": p.judge_value,
             "reasoning": p.reasoning[:500]} for _, p, v in rows[:limit]]


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _pair(interval: tuple[float, float] | None) -> list[float] | None:
    return None if interval is None else [round(interval[0], 4), round(interval[1], 4)]


# --- reading a stored record: its numbers from its own data ------------------------------------------------

SUMMARY_FIELDS = ("n", "accuracy", "accuracy_ci", "kappa", "kappa_ci", "confusion", "spearman", "spearman_ci",
                  "kendall", "kendall_ci")
"""A record's summary numbers: never read as written, always recomputed (``recompute``)."""
BINARY_CELLS = ("pass_pass", "pass_fail", "fail_pass", "fail_fail")
PREFERENCES = ("A", "B", "tie")


def recompute(record: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A stored calibration record with every summary number (``SUMMARY_FIELDS``) recomputed from the record's
    own labels and verdicts, and the fields whose stored value disagreed (empty for an untouched record).

    The data, most detailed first: ``pairs`` (``[example, label pass, label value, judge value]``; the verdict is
    the judge value at the record's ``threshold``; pairwise: ``[example, judge's preference, human's]``), else
    the ``confusion`` counts (κ, accuracy and their intervals follow from the four cells; Spearman and Kendall
    need the values, so they are None). A record with neither has no labels: n = 0, κ undefined. Floats agree
    within 5·10⁻⁴ (records round to 4 places)."""
    found = dict(record)
    if str(record.get("metric", "")).startswith("pairwise:"):
        fresh = _recompute_preferences(record)
    else:
        threshold = None
        try:
            threshold = Threshold.model_validate(record.get("threshold"))
        except ValueError:
            threshold = None
        rows = _binary_rows(record.get("pairs"))
        if rows is not None and threshold is not None:
            pairs = [Pair(str(example), label, label_value, judge_value) for example, label, label_value, judge_value
                     in rows]
            fresh = agreement(pairs, threshold.admits)
            fresh.pop("disagreements", None)
            fresh.pop("pairs", None)
        else:
            fresh = _from_cells(_cells(record.get("confusion"), BINARY_CELLS))
    mismatched = [name for name in SUMMARY_FIELDS if name in fresh and not _same(record.get(name), fresh[name])]
    found.update({name: fresh.get(name) for name in SUMMARY_FIELDS})  # unverifiable ones: None
    stored_missing: Any = record.get("unavailable")
    kept = int(stored_missing) if _number(stored_missing) and stored_missing >= 0 else 0
    found["unavailable"] = fresh.get("unavailable", kept)
    return found, mismatched


def _binary_rows(value: Any) -> list[tuple[Any, bool, float | None, float | None]] | None:
    if not isinstance(value, list):
        return None
    rows = []
    for row in value:
        if not (isinstance(row, list) and len(row) == 4 and isinstance(row[1], bool)
                and all(v is None or _number(v) for v in row[2:])):
            return None
        rows.append((row[0], row[1], None if row[2] is None else float(row[2]),
                     None if row[3] is None else float(row[3])))
    return rows


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _cells(value: Any, names: Sequence[str]) -> dict[str, int]:
    """Counts of a stored confusion matrix; a cell that is not a non-negative integer counts 0."""
    table = value if isinstance(value, Mapping) else {}
    return {name: int(table[name]) if isinstance(table.get(name), int) and not isinstance(table.get(name), bool)
            and table[name] >= 0 else 0 for name in names}


def _from_cells(cells: Mapping[str, int]) -> dict[str, Any]:
    """κ, accuracy and their intervals of a binary confusion matrix (``kappa_interval`` needs only the cells)."""
    labels: list[bool] = []
    verdicts: list[bool] = []
    for name in BINARY_CELLS:
        label, _, verdict = name.partition("_")
        labels += [label == "pass"] * cells[name]
        verdicts += [verdict == "pass"] * cells[name]
    n = len(labels)
    agree = cells["pass_pass"] + cells["fail_fail"]
    return {"n": n, "accuracy": _round(agree / n) if n else None,
            "accuracy_ci": _pair(wilson_interval(agree, n)) if n else None,
            "kappa": _round(cohen_kappa(labels, verdicts)), "kappa_ci": _pair(kappa_interval(labels, verdicts)),
            "confusion": dict(cells)}


def _recompute_preferences(record: Mapping[str, Any]) -> dict[str, Any]:
    rows = record.get("pairs")
    if isinstance(rows, list) and all(isinstance(r, list) and len(r) == 3 and r[2] in PREFERENCES
                                      and (r[1] is None or r[1] in PREFERENCES) for r in rows):
        fresh = preference_agreement([(str(e), v, label, "") for e, v, label in rows])
    else:
        table = record.get("confusion") if isinstance(record.get("confusion"), Mapping) else {}
        names = [f"{a}_{b}" for a in PREFERENCES for b in PREFERENCES]
        cells = _cells(table, names)
        fresh = preference_agreement([("", name.partition("_")[2], name.partition("_")[0], "")
                                      for name in names for _ in range(cells[name])])
        fresh["unavailable"] = max(0, int(record.get("unavailable") or 0)) if _number(record.get("unavailable")) else 0
    for name in ("disagreements", "pairs", "methods"):
        fresh.pop(name, None)
    return fresh


def _same(stored: Any, fresh: Any) -> bool:
    if _number(fresh) or _number(stored):
        return _number(fresh) and _number(stored) and abs(float(stored) - float(fresh)) <= 5e-4
    if isinstance(fresh, list) and isinstance(stored, list):
        return len(fresh) == len(stored) and all(_same(a, b) for a, b in zip(stored, fresh, strict=True))
    if isinstance(fresh, Mapping) and isinstance(stored, Mapping):
        return set(fresh) == set(stored) and all(_same(stored[k], fresh[k]) for k in fresh)
    return bool(stored == fresh)


def mismatch_text(record: Mapping[str, Any], fresh: Mapping[str, Any], fields: Sequence[str]) -> str:
    """``κ 0.95 stored, 0.40 from its labels and verdicts; n 100 stored, 32 …`` for a notice."""
    def shown(value: Any) -> str:
        return "none" if value is None else f"{value:g}" if _number(value) else str(value)

    parts = [f"{'κ' if name == 'kappa' else name} {shown(record.get(name))} stored, {shown(fresh.get(name))} "
             "from its labels and verdicts" for name in fields]
    return "; ".join(parts)


# --- the gate policy: which calibration records admitted a judge ----------------------------------------------


def calibration_snapshot(block: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """``gate_policy.calibrations``: per judged metric (``pairwise:NAME`` for preferences) that gates because a
    stored calibration admitted its judge, which record it was (``digest``: sha256 of the record as stored,
    ``store.calibration.record_digest``), where it was read and its recomputed κ and n."""
    found: dict[str, dict[str, Any]] = {}
    if not isinstance(block, Mapping):
        return found
    groups = [("", block.get("metrics")), ("pairwise:", block.get("pairwise"))]
    for prefix, entries in groups:
        for name, entry in sorted((entries or {}).items()) if isinstance(entries, Mapping) else ():
            if isinstance(entry, Mapping) and entry.get("status") == "calibrated" and entry.get("gating"):
                found[prefix + str(name)] = {k: entry.get(k) for k in ("key", "digest", "read_from", "kappa", "n")}
    return found


def calibration_loosenings(base: Mapping[str, Any], head: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Judges the head run lets gate on a calibration record the base run did not use (a calibration file the
    pull request added or edited, a record for a new key): ``{setting, before, after, origin, text}`` each.
    Nothing when the base run recorded no ``calibrations`` (an older evalgate)."""
    before, after = base.get("calibrations"), head.get("calibrations")
    if not isinstance(before, Mapping) or not isinstance(after, Mapping):
        return []
    found = []
    for name, entry in sorted(after.items()):
        old = before.get(name)
        if not isinstance(entry, Mapping) or (isinstance(old, Mapping) and old.get("digest") == entry.get("digest")):
            continue
        kappa, n = entry.get("kappa"), entry.get("n")
        shown = "κ undefined" if not isinstance(kappa, int | float) else f"κ {kappa:.2f}"
        what = "a calibration record the base run did not use" if isinstance(old, Mapping) else (
            "a calibration the base run did not have")
        found.append({"setting": f"calibration of {name}", "before": (old or {}).get("digest") if isinstance(old, Mapping)
                      else None, "after": entry.get("digest"), "origin": entry.get("read_from"),
                      "text": f"{name}'s judge gates on {what} ({shown} on {n} labels)"})
    return found


# --- the floor and the policy ------------------------------------------------------------------------------

CalibrationMode = Literal["auto", "required", "off", "trust"]
Standing = Literal["calibrated", "missing", "stale", "below_floor"]


@dataclass(frozen=True, slots=True)
class Floor:
    min_kappa: float = DEFAULT_MIN_KAPPA
    min_labels: int = DEFAULT_MIN_LABELS


def standing(record: Mapping[str, Any] | None, stale: Mapping[str, Any] | None, floor: Floor) -> tuple[Standing, str]:
    """Whether a judge configuration may gate a metric: ``record`` is the calibration stored for its current
    key (None: none), ``stale`` the newest one stored for another key of the same metric. Returns the standing
    and a short reason (``κ 0.21 on 40 labels``)."""
    if record is None:
        if stale is not None:
            return "stale", f"calibrated for another configuration ({stale_difference(stale)})"
        return "missing", "no calibration for this configuration"
    kappa, n = record.get("kappa"), int(record.get("n") or 0)
    shown = "κ undefined" if kappa is None else f"κ {kappa:.2f}"
    missing = int(record.get("unavailable") or 0)
    what = f"{shown} on {n} labels" + (f" ({missing} more without a usable verdict)" if missing else "")
    if n < floor.min_labels:
        return "below_floor", f"{what} (needs ≥ {floor.min_labels} labels)"
    if kappa is None or kappa < floor.min_kappa:
        return "below_floor", f"{what} (needs κ ≥ {floor.min_kappa:g})"
    return "calibrated", what


def stale_difference(stale: Mapping[str, Any]) -> str:
    changed = stale.get("changed") or []
    return "changed: " + ", ".join(changed) if changed else "its key differs"


def gates(mode: CalibrationMode, state: Standing, *, seed_kind: bool) -> bool:
    """Whether a judge's pairwise preferences gate (no controls: human labels only): ``off`` and ``trust``
    always; ``required`` only when calibrated (else the run fails); ``auto`` when calibrated, and when never
    calibrated at all under a seed kind."""
    if mode in ("off", "trust") or state == "calibrated":
        return True
    return mode == "auto" and state == "missing" and seed_kind


# --- controls built from the suite (judges.controls) ----------------------------------------------------------

ControlState = Literal["passed", "failed", "insufficient", "none"]
DEFAULT_CONTROL_KAPPA_LOW = 0.4
"""The controls' floor: the lower end of κ's 95 % interval on the control labels must reach it."""
DEFAULT_CONTROL_MIN_ITEMS = 10


@dataclass(frozen=True, slots=True)
class ControlFloor:
    """A judge passes its controls when the lower end of the 95 % percentile-bootstrap interval of Cohen's κ
    (control label vs the judge's pass/fail at the metric's threshold) is ≥ ``min_kappa_low``, on at least
    ``min_items`` controls with a verdict, both classes present. ``bench.calibration`` measures its error rates."""

    min_kappa_low: float = DEFAULT_CONTROL_KAPPA_LOW
    min_items: int = DEFAULT_CONTROL_MIN_ITEMS


def control_standing(record: Mapping[str, Any] | None, floor: ControlFloor = ControlFloor()
                     ) -> tuple[ControlState, str]:
    """Whether the judge passed its controls: ``record`` is ``agreement`` over the control pairs (None: the metric
    has no controls). Returns the state and a short reason (``κ 0.95 [0.81, 1.00] on 24 controls``)."""
    if record is None:
        return "none", "no controls can be built for this metric"
    n = int(record.get("n") or 0)
    cells = record.get("confusion") or {}
    positives = int(cells.get("pass_pass", 0)) + int(cells.get("pass_fail", 0))
    missing = int(record.get("unavailable") or 0)
    unscored = f" ({missing} without a usable verdict)" if missing else ""
    if n < floor.min_items or positives in (0, n):
        return "insufficient", f"{n} control(s) with a verdict{unscored} (needs ≥ {floor.min_items}, passes and fails)"
    kappa, interval = record.get("kappa"), record.get("kappa_ci")
    shown = "κ undefined" if kappa is None else f"κ {kappa:.2f}"
    if interval:
        shown += f" [{interval[0]:.2f}, {interval[1]:.2f}]"
    what = f"{shown} on {n} controls{unscored}"
    if kappa is None or not interval or interval[0] < floor.min_kappa_low:
        return "failed", f"{what} (needs the interval's low end ≥ {floor.min_kappa_low:g})"
    return "passed", what


Evidence = Literal["labels", "controls", "trusted", "seed", "none"]


def decide(mode: CalibrationMode, labels: Standing, controls: ControlState, *, seed_kind: bool
           ) -> tuple[bool, Evidence]:
    """Whether a judged metric gates, and on what evidence:

    * ``trust``: always (nothing checked);
    * human labels for the judge's current configuration decide when they exist (``auto``/``required``): they
      override the controls either way;
    * else the controls: passed → gates; failed or too few → never gates, in any dialect and under ``off`` too;
    * a metric without controls (none can be built) and without labels: gates only under ``off`` (no labels
      asked for) or under a seed kind with ``auto`` (the seed frameworks gated on their judges).
    """
    if mode == "trust":
        return True, "trusted"
    if mode != "off" and labels == "calibrated":
        return True, "labels"
    if mode != "off" and labels == "below_floor":
        return False, "labels"
    if controls == "passed":
        return True, "controls"
    if controls in ("failed", "insufficient"):
        return False, "controls"
    if mode == "off" or (mode == "auto" and seed_kind and labels == "missing"):
        return True, "seed" if mode == "auto" else "trusted"
    return False, "none"


# --- pairwise preferences ------------------------------------------------------------------------------------


def sign_test(wins: int, losses: int) -> dict[str, float]:
    """Exact sign test of wins vs losses (ties dropped), X ~ Binomial(n = wins + losses, ½):
    ``p_two_sided`` = min(1, 2·P(X ≤ min(wins, losses))), ``p_worse`` = P(X ≥ losses) (the one-sided p-value
    that the change is worse, ``stats.mcnemar_one_sided(losses, wins)`` in exact integers: the p-value the comparison's
family uses). Both 1.0 when n = 0."""
    n = wins + losses
    if n == 0:
        return {"p_two_sided": 1.0, "p_worse": 1.0}
    total = 2 ** n

    def at_most(k: int) -> float:
        return sum(math.comb(n, i) for i in range(k + 1)) / total

    two_sided = min(1.0, 2 * at_most(min(wins, losses)))
    return {"p_two_sided": two_sided, "p_worse": mcnemar_one_sided(losses, wins)}
