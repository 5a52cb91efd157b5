"""Shards of one run must have judged alike (``evalgate merge``): the judge settings and template versions that
change a verdict, and each judged metric's calibration — its key and its result.

Per shard, ``metadata.judge`` gives the judge's ``JUDGE_FIELDS`` (temperature(s), seed, samples) and the
``templates`` it used (name → version; a template one shard never used is not compared); ``calibration`` gives,
per judged metric (``metrics``) and per pairwise comparison (``pairwise``), the entry ``runner.calibrate`` made:
its identity (``IDENTITY``: judge label, key, floor) and result (``RESULT``: standing, κ, n, date, gating).

* Any difference in the judge fields, a template version, a calibration identity, or a calibration result
  between two shards that both found a calibration is a ``UserError`` naming both shard files and the field
  (``evalgate merge`` exits 2).
* A shard that found no calibration (``status: missing``, or no entry) while another found one is the one
  difference allowed: the merged run takes the **weakest** — the missing entry, not gating — and says so in a
  gate note (or, under ``calibration: required``, in a gate reason); the metric's threshold is then dropped from
  the merged gate even where the calibrated shards applied it.

``merged_pairwise``: the shards' pairwise preferences summed, so that their sign tests join the merged run's one
comparison family (``evalgate merge --baseline``).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from evalgate.errors import UserError
from evalgate.runner.pairwise import merged_health
from evalgate.verdict.calibration import sign_test
from evalgate.verdict.reasons import NOT_GATING, merged_calibration_reason

JUDGE_FIELDS = ("temperature", "temperatures", "seed", "samples")
IDENTITY = ("judge", "key", "min_kappa", "min_labels")
RESULT = ("status", "kappa", "n", "created", "gating")
MISSING = "missing"
SECTIONS = {"metrics": "", "pairwise": " (pairwise)"}


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


class JudgingAgreement:
    """Accumulates the shards' judge settings and calibrations; raises on the first disagreement (module doc)."""

    def __init__(self) -> None:
        self.judge: dict[str, tuple[str, str]] = {}
        """field → (value, first shard)."""
        self.templates: dict[str, tuple[str, str]] = {}
        self.entries: dict[tuple[str, str], tuple[dict[str, Any], str]] = {}
        """(section, metric) → (the entry the merged run keeps, the shard it came from)."""
        self.statuses: dict[tuple[str, str], dict[str, str]] = {}
        self.refused: dict[tuple[str, str], dict[str, bool]] = {}
        """Per (section, metric) gated by controls: per shard, whether its controls refused the judge."""
        """(section, metric) → shard → the standing it found (a shard without the entry is not listed)."""
        self.labels: list[str] = []
        self.mode: str | None = None

    def add(self, label: str, document: Mapping[str, Any]) -> None:
        self.labels.append(label)
        judge = (document.get("metadata") or {}).get("judge") or {}
        for name in JUDGE_FIELDS:
            self._same(self.judge, f"judge {name}", _text(judge.get(name)), label)
        for name, version in sorted((judge.get("templates") or {}).items()):
            self._same(self.templates, f"judge template {name!r} version", _text(version), label, key=str(name))
        block = document.get("calibration") or {}
        self.mode = self.mode or block.get("mode")
        for section in SECTIONS:
            for name, entry in sorted((block.get(section) or {}).items()):
                if isinstance(entry, Mapping):
                    self._entry((section, str(name)), dict(entry), label)

    def _same(self, seen: dict[str, tuple[str, str]], field: str, value: str, label: str, key: str | None = None) -> None:
        first = seen.setdefault(key or field, (value, label))
        if first[0] != value:
            raise UserError(f"{field} differs between shards: {value} here, {first[0]} in {first[1]}", where=label)

    def _entry(self, slot: tuple[str, str], entry: dict[str, Any], label: str) -> None:
        self.statuses.setdefault(slot, {})[label] = str(entry.get("status"))
        if entry.get("evidence") == "controls":  # each shard proves its judge on its own cases' controls
            self.refused.setdefault(slot, {})[label] = entry.get("gating") is False
        what = f"calibration of {slot[1]}{SECTIONS[slot[0]]}"
        seen = self.entries.get(slot)
        if seen is None:
            self.entries[slot] = (entry, label)
            return
        kept, where = seen
        for field in IDENTITY:
            if _text(entry.get(field)) != _text(kept.get(field)):
                raise UserError(f"{what}: {field} differs between shards: {_text(entry.get(field))} here, "
                                f"{_text(kept.get(field))} in {where}", where=label)
        if entry.get("evidence") == "controls" or kept.get("evidence") == "controls":
            if entry.get("gating") is False and kept.get("gating") is not False:
                self.entries[slot] = (entry, label)  # the weakest: a shard whose controls refused the judge
            return
        if MISSING in (entry.get("status"), kept.get("status")):
            if entry.get("status") == MISSING and kept.get("status") != MISSING:
                self.entries[slot] = (entry, label)  # the weakest: no calibration
            return
        for field in RESULT:
            if _text(entry.get(field)) != _text(kept.get(field)):
                raise UserError(f"{what}: {field} differs between shards: {_text(entry.get(field))} here, "
                                f"{_text(kept.get(field))} in {where} (calibrate once, then run every shard "
                                "with the same calibration file)", where=label)

    def missing_in(self, label: str, metric: str) -> bool:
        """Whether shard ``label`` found no calibration for ``metric`` while some shard has an entry for it (so it
        may have recorded no threshold where the others did)."""
        statuses = self.statuses.get(("metrics", metric))
        return statuses is not None and statuses.get(label, MISSING) == MISSING

    def weakened(self) -> dict[tuple[str, str], tuple[str, str]]:
        """(section, metric) → (a shard without its calibration, a shard with it): the entries the merged run
        takes as missing although some shard found a calibration."""
        out = {}
        for slot, statuses in self.statuses.items():
            found = [label for label in self.labels if statuses.get(label, MISSING) != MISSING]
            lacking = [label for label in self.labels if statuses.get(label, MISSING) == MISSING]
            if found and lacking:
                out[slot] = (lacking[0], found[0])
        return out

    def merged(self, first_block: Mapping[str, Any], notes: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str],
                                                                                         list[str]]:
        """(the merged ``calibration`` block, the gate notes by metric, gate reasons): the shards' agreed entries;
        a weakened one is the missing entry, not gating, with a note (a reason under ``calibration: required``)."""
        block: dict[str, Any] = {key: value for key, value in first_block.items() if key not in SECTIONS}
        for section in SECTIONS:
            if section in first_block or any(slot[0] == section for slot in self.entries):
                block[section] = {}
        for (section, name), (entry, _label) in sorted(self.entries.items()):
            block[section][name] = entry
        out_notes = dict(notes)
        for (section, name), (without, with_) in sorted(self.weakened().items()):
            kept = dict(self.entries[(section, name)][0])
            kept.update(status=MISSING, gating=False, kappa=None, n=None, created=None,
                        reason=f"no calibration in shard {without} (found in {with_}): the merged run takes the weakest")
            block[section][name] = kept
            if section == "metrics":
                out_notes[name] = (f"{name}: judge calibration missing in shard {without} (calibrated in {with_}) — "
                                   f"the merged run takes the weakest: {NOT_GATING}")
        for (section, name), refused in sorted(self.refused.items()):
            if any(refused.values()) and not all(refused.values()) and section == "metrics":
                without = next(label for label, no in refused.items() if no)
                out_notes[name] = (f"{name}: judge refused by its controls in shard {without} — the merged run takes "
                                   f"the weakest: {NOT_GATING}")
        reasons = [merged_calibration_reason(f"{name}{SECTIONS[section]}", entry)
                   for section in SECTIONS for name, entry in sorted(block.get(section, {}).items())
                   if self.mode == "required" and entry.get("status") != "calibrated" and entry.get("gating") is not True]
        return block, out_notes, reasons

    def not_gating(self) -> set[str]:
        """Metrics whose threshold the merged gate drops (weakened calibrations)."""
        return ({name for (section, name) in self.weakened() if section == "metrics"}
                | {name for (section, name), refused in self.refused.items() if section == "metrics" and any(refused.values())})


def merged_pairwise(shards: Sequence[tuple[str, Mapping[str, Any]]], baseline_run_id: Any,
                    calibration: Mapping[str, Any], thresholds: Collection[str]
                    ) -> tuple[dict[str, Any] | None, list[str], list[str]]:
    """The shards' pairwise preferences as one run's ``pairwise`` block, for the merged comparison with the
    baseline whose ``run_id`` is ``baseline_run_id``: (block, the metrics whose sign test joins the family, warnings).

    Shards judge disjoint cases, so wins, losses, ties, unavailable pairs, compared cases and the replies' health
    counts add up, and the sign test is recomputed
    on the sums (``verdict.calibration.sign_test``). Only when every shard judged pairwise against that same
    baseline run; otherwise None and a warning. A metric's sign test gates when its merged ``pairwise``
    calibration gates (every thresholded one when there is no pairwise calibration block, as in a run)."""
    judged = [(label, doc) for label, doc in shards if isinstance(doc.get("pairwise"), Mapping)]
    if not judged:
        return None, [], []
    for label, doc in shards:
        compared = ((doc.get("comparison") or {}).get("baseline") or {}).get("run_id")
        if not isinstance(doc.get("pairwise"), Mapping) or compared != baseline_run_id:
            why = "did not judge pairwise" if not isinstance(doc.get("pairwise"), Mapping) else \
                f"judged pairwise against run {compared}, not the baseline's {baseline_run_id}"
            return None, [], [f"{label}: {why}: the merged comparison has no pairwise tests"]
    metrics: dict[str, dict[str, Any]] = {}
    cases: list[Any] = []
    for _label, doc in judged:
        for name, row in (doc["pairwise"].get("metrics") or {}).items():
            total = metrics.setdefault(str(name), {"wins": 0, "losses": 0, "ties": 0, "unavailable": 0})
            for key in total:
                total[key] += int((row or {}).get(key) or 0)
        cases.extend(doc["pairwise"].get("cases") or [])
    for row in metrics.values():
        row.update(sign_test(row["wins"], row["losses"]))
    block = {"compared_cases": sum(int(doc["pairwise"].get("compared_cases") or 0) for _, doc in judged),
             "metrics": dict(sorted(metrics.items())), "cases": cases[:50]}
    if any("health" in doc["pairwise"] for _, doc in judged):
        block["health"] = merged_health(doc["pairwise"].get("health") for _, doc in judged)
    own = calibration.get("pairwise")
    gated = [name for name in thresholds if not isinstance(own, Mapping)
             or (isinstance(own.get(name), Mapping) and own[name].get("gating"))]
    return block, gated, []
