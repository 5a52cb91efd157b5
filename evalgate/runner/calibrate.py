"""Judge calibration: ``evalgate calibrate`` (score the suites' labelled examples with the configured judge and
store the agreement) and, before a run, which judged metrics may gate (``judge_policy``).

Where calibrations live: the results database's ``eg_calibrations`` (``settings.db_path``) and the committable
JSON file ``calibration_file`` (default: ``judge-calibration.json`` beside each suite's labels file). A run
reads both and takes, per metric, the newest record stored under the metric's current key
(``judges.calibration``); the gate rules are ``verdict.calibration.standing`` / ``gates``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalgate.calls.runtime import Runtime
from evalgate.config.settings import Settings
from evalgate.config.trust import untrusted_checkout
from evalgate.dataset.labels import LabelledExample, load_labels
from evalgate.dataset.load import display_path
from evalgate.errors import UserError
from evalgate.judges import controls as built
from evalgate.judges.calibration import (
    changed_parts,
    judge_label,
    key_of,
    key_parts,
    pairwise_key_parts,
    score_example,
)
from evalgate.judges.client import JudgeClient
from evalgate.judges.factory import build_judge
from evalgate.judges.pairwise import prefer
from evalgate.metrics.registry import Metric
from evalgate.model import Case, Threshold
from evalgate.runner.catalog import INLINE_CRITERIA
from evalgate.runner.setup import Prepared, prepare
from evalgate.store.calibration import (
    DEFAULT_FILE,
    CalibrationFileError,
    load,
    read_file,
    record_digest,
    save,
    write_file,
)
from evalgate.verdict.calibration import (
    ControlFloor,
    Floor,
    Pair,
    Standing,
    agreement,
    control_standing,
    decide,
    gates,
    mismatch_text,
    preference_agreement,
    recompute,
    standing,
)
from evalgate.verdict.reasons import calibration_reason, judge_line, not_gating_note

# --- where records are ----------------------------------------------------------------------------------------


def calibration_files(settings: Settings, prepared: Prepared, cwd: Path) -> list[Path]:
    """The JSON files a run reads (and ``calibrate`` writes: the first)."""
    if settings.calibration_file:
        path = Path(settings.calibration_file)
        return [(path if path.is_absolute() else cwd / path).resolve()]
    return list(dict.fromkeys(path.resolve().parent / DEFAULT_FILE for path, _ in prepared.calibration_sets))


def stored_records(settings: Settings, prepared: Prepared, cwd: Path, notices: list[str]) -> list[dict[str, Any]]:
    """Every stored record, its summary numbers recomputed from its own labels and verdicts
    (``verdict.calibration.recompute``): a record whose written κ, n, accuracy or intervals disagree is read
    with the recomputed ones, and one notice names the file, the metric and what disagreed. Each record carries
    ``digest`` (sha256 of the record as stored) and ``read_from`` (where it was read), for the gate policy.
    In a pull-request run (``config.trust.untrusted_checkout``) the results database's records are not read: the
    pull request may have committed that database, and only the calibration file is compared with the base run's."""
    db_path = settings.db_path if settings.db_path.is_absolute() else cwd / settings.db_path
    found: list[tuple[dict[str, Any], str]] = [(record, display_path(db_path, cwd)) for record in load(db_path)
                                               if not str(record.get("metric", "")).startswith("controls:")]
    # (the controls' records are a log of what the run's judge showed: never read back as evidence)
    if found and untrusted_checkout(settings.environment):  # a results.db the pull request may have committed
        notices.append(f"calibrations in {display_path(db_path, cwd)} not read in a pull-request run (the "
                       "calibration file is, and compared with the base run's): evalgate calibrate writes both")
        found = []
    for path in calibration_files(settings, prepared, cwd):
        try:
            found.extend((record, display_path(path, cwd)) for record in read_file(path))
        except CalibrationFileError as exc:
            notices.append(f"calibration file ignored: {exc}")
    records = []
    for record, where in found:
        fresh, mismatched = recompute(record)
        fresh["digest"], fresh["read_from"] = record_digest(record), where
        if mismatched:
            fresh["mismatch"] = mismatch_text(record, fresh, mismatched)
            notices.append(f"calibration {where}: {record.get('metric')} ({record.get('judge') or record.get('key')}): "
                           f"{fresh['mismatch']}; the recomputed values are used")
        records.append(fresh)
    return records


def global_options(prepared: Prepared) -> Any:
    """The metric options of a case of no suite (evalgate.yaml's): what calibration keys read (a rubric)."""
    return prepared.plan_for(Case(id="calibration")).options


def lookup(records: list[dict[str, Any]], metric: str, key: str, parts: dict[str, Any]
           ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(the newest record of ``metric`` under ``key``, the newest under another key with ``changed``: the key parts
    that differ from ``parts``)."""
    own = [r for r in records if r.get("metric") == metric]
    current = max((r for r in own if r.get("key") == key), key=lambda r: str(r.get("created", "")), default=None)
    other = max((r for r in own if r.get("key") != key), key=lambda r: str(r.get("created", "")), default=None)
    return current, None if other is None else {**other, "changed": changed_parts(other.get("parts") or {}, parts)}


def floor_for(settings: Settings, metric: str) -> Floor:
    own = settings.calibration_floors.get(metric, {})
    return Floor(float(own.get("min_kappa", settings.calibration_min_kappa)),
                 int(own.get("min_labels", settings.calibration_min_labels)))


# --- before a run: who may gate ----------------------------------------------------------------------------------


@dataclass
class JudgePolicy:
    """What calibration decided for one run: the thresholds that gate, the ``calibration`` block of results.json,
    one gate note per metric that does not gate, and failure reasons under ``calibration: required``."""

    thresholds: dict[str, Threshold]
    block: dict[str, Any] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    """Metric (``name`` or ``name#pairwise``) → the line under ``calibration: required``."""
    pairwise_gating: set[str] | None = None
    """Metrics whose pairwise preferences may fail the gate (None: every gated one, as with calibration off)."""

    def failures_for(self, used: Collection[str]) -> list[str]:
        """The failure lines (``calibration: required``) of the metrics the run scored."""
        return [line for name, line in sorted(self.failures.items()) if name.partition("#")[0] in used]

    def advisory(self) -> frozenset[str]:
        """The metrics shown without gating (their values are recorded ``advisory``)."""
        return frozenset(name for name, entry in self.block.get("metrics", {}).items() if entry.get("gating") is False)

    def pairwise_gated(self, thresholds: Collection[str]) -> list[str]:
        return [name for name in thresholds if self.pairwise_gating is None or name in self.pairwise_gating]


def judged_gated(prepared: Prepared) -> list[str]:
    """The gated judged metrics a calibration decides on (one-off ``assert:`` criteria are each their own prompt:
    nothing to calibrate, they gate as written)."""
    return [name for name in sorted(prepared.thresholds) if name in prepared.metrics
            and prepared.metrics[name].uses_judge and name != INLINE_CRITERIA]


async def prove_judges(settings: Settings, prepared: Prepared, judge: JudgeClient | None, cwd: Path,
                       announce: Any = None) -> dict[str, dict[str, Any]]:
    """Score each gated judged metric's controls (``judges.controls``) with the run's judge, unless human labels
    for its current configuration decide already (``auto``/``required``) or ``calibration: trust``. Returns
    metric → the controls' record (``agreement`` over the control pairs, ``status``, ``reason``, ``digest``,
    per-kind counts); a metric without controls is absent. Every call goes through the judge (its cache, batch
    and budget): a rerun with the same judge and control set costs no call. The record is also saved in the
    results database (``controls:NAME``) as a log; the decision is always recomputed from the verdicts, so no
    file of the checkout can vouch for a judge."""
    if judge is None or settings.calibration == "trust" or settings.controls_max_items == 0:
        return {}
    names = judged_gated(prepared)
    if not names:
        return {}
    records = stored_records(settings, prepared, cwd, []) if settings.calibration != "off" else []
    options = global_options(prepared)
    wanted = _wanted_controls(names, prepared, judge, records, options, settings.controls_max_items)
    total = sum(len(items) for items in wanted.values())
    if announce is not None and total:
        announce(f"judge controls: {total} item(s) for {len(wanted)} metric(s) (at most "
                 f"{settings.controls_max_items} per metric), {total * judge.samples} judge call(s) at most; "
                 "cached replies cost none")
    gate = asyncio.Semaphore(max(1, settings.concurrency))
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    found: dict[str, dict[str, Any]] = {}

    async def one(metric: Metric, item: built.Control) -> Pair:
        async with gate:
            value, reasoning, problem = await built.score_control(judge, metric, item, options)
        return Pair(item.name, item.label, None, value, reasoning, item.kind, problem)

    for name, items in wanted.items():
        metric = prepared.metrics[name]
        pairs = await asyncio.gather(*(one(metric, item) for item in items))
        found[name] = _controls_record(name, items, pairs, prepared.thresholds[name],
                                       key_parts(judge, metric, options), now)
    if found:
        db_path = settings.db_path if settings.db_path.is_absolute() else cwd / settings.db_path
        try:
            save(db_path, list(found.values()))
        except (OSError, UserError) as exc:  # a log only: never a reason to lose the run
            prepared.notices.append(f"controls not saved in {db_path}: {exc}")
    return found


def _wanted_controls(names: list[str], prepared: Prepared, judge: JudgeClient, records: list[dict[str, Any]],
                     options: Any, cap: int) -> dict[str, list[built.Control]]:
    """Per gated judged metric of ``names`` that controls can prove and no human labels of its current
    configuration decide: at most ``cap`` controls built from the cases it is planned for."""
    wanted: dict[str, list[built.Control]] = {}
    for name in names:
        metric = prepared.metrics[name]
        if built.family(metric) is None:
            continue
        parts = key_parts(judge, metric, options)
        current, _stale = lookup(records, name, key_of(parts), parts)
        if current is not None:  # human labels for this configuration decide (they override the controls)
            continue
        cases = (case for case in prepared.cases if name in prepared.plan_for(case).names)
        items = built.build(metric, cases, cap)
        if items:  # none: the suite gives nothing to build them from (no reference, no conversation)
            wanted[name] = items
    return wanted


def _controls_record(name: str, items: list[built.Control], pairs: list[Pair], threshold: Threshold,
                     parts: dict[str, Any], now: str) -> dict[str, Any]:
    """The controls' record of metric ``name``: agreement over its control ``pairs``, standing, per-kind counts
    (``n``, ``right``, ``no_verdict``), the control set's digest and the judge's key ``parts``."""
    report = agreement(pairs, threshold.admits)
    state, why = control_standing(report, ControlFloor())
    kinds: dict[str, dict[str, int]] = {}
    for pair in pairs:
        row = kinds.setdefault(pair.source, {"n": 0, "right": 0, "no_verdict": 0})
        row["n"] += 1
        if pair.judge_value is None:
            row["no_verdict"] += 1
        elif bool(threshold.admits(pair.judge_value)) == pair.label_pass:
            row["right"] += 1
    digest = built.digest(items)
    return {**report, "status": state, "reason": why, "items": len(items), "digest": digest,
            "first_unavailable": next((pair.problem for pair in pairs if pair.problem), None),
            "kinds": kinds, "created": now, "metric": f"controls:{name}",
            "key": key_of({**parts, "controls": digest}), "parts": parts,
            "judge": judge_label(parts, name, key_of(parts)), "threshold": threshold.model_dump()}


def explain_gating(settings: Settings, prepared: Prepared) -> list[str]:
    """``validate --explain``: per gated judged metric, in one line, what it needs to gate (no call is made, so
    what the judge will show is not known yet: the controls are counted, not scored)."""
    mode = settings.calibration
    judged = "judged — needs a judge (judge_provider); then" if settings.judge_provider == "none" else "judged —"
    lines = []
    wanted = set(judged_gated(prepared))
    used = {name for case in prepared.cases for name in prepared.plan_for(case).names if name in wanted}
    for name in sorted(used):
        metric = prepared.metrics[name]
        if mode == "trust":
            lines.append(f"{name}: {judged} gates unchecked (calibration: trust)")
            continue
        cases = (case for case in prepared.cases if name in prepared.plan_for(case).names)
        items = built.build(metric, cases, settings.controls_max_items) if settings.controls_max_items else []
        labels = "" if mode == "off" else " (human labels for its judge, when they exist, decide instead)"
        if items:
            lines.append(f"{name}: {judged} gates once its judge passes {len(items)} controls built from this suite"
                         f"{labels}; else shown, not gating (calibration: {mode})")
        elif mode == "off":
            lines.append(f"{name}: {judged} gates unchecked: no controls can be built for it (calibration: off)")
        else:
            seed = " (under a seed kind: gates as the seed framework did)" if prepared.seed_kind and mode == "auto" else ""
            lines.append(f"{name}: {judged} gates only on human labels, no controls can be built for it "
                         f"(`evalgate calibrate`){seed} (calibration: {mode})")
    return lines


def judge_policy(settings: Settings, prepared: Prepared, judge: JudgeClient | None, cwd: Path,
                 controls: Mapping[str, Mapping[str, Any]] | None = None) -> JudgePolicy:
    """Per gated judged metric: its calibration standing, its controls (``prove_judges``) and whether it gates
    (``verdict.calibration.decide``). A metric that reads a non-gating judged metric's value (``composite``,
    ``combined_score``) stops gating too."""
    thresholds = dict(prepared.thresholds)
    if judge is None:
        return JudgePolicy(thresholds)
    mode = settings.calibration
    controls = controls or {}
    judged = judged_gated(prepared)
    if not judged or mode == "trust":  # trust: every judge gates, nothing checked (the one-line note says so)
        policy = JudgePolicy(thresholds, {"mode": mode, "metrics": {}} if mode == "trust" else {})
        if mode == "trust":
            for name in judged:
                policy.block["metrics"][name] = {"status": "trusted", "gating": True, "evidence": "trusted",
                                                 "threshold": thresholds[name].model_dump()}
        return policy
    notices: list[str] = []
    records = stored_records(settings, prepared, cwd, notices) if mode != "off" else []
    prepared.notices.extend(notices)
    options = global_options(prepared)
    policy = JudgePolicy(thresholds, {"mode": mode, "metrics": {}})
    not_gating: set[str] = set()
    for name in judged:
        entry = _metric_entry(settings, prepared, judge, records, options, name, controls.get(name), thresholds[name])
        policy.block["metrics"][name] = entry
        line = entry["line"]
        if not entry["gating"] and mode == "required":  # one reason, not its verdicts as well
            not_gating.add(name)
            policy.failures[name] = calibration_reason(line)
        elif not entry["gating"]:
            not_gating.add(name)
            policy.notes[name] = not_gating_note(line)
        else:
            policy.notes[name] = line if entry["evidence"] in ("seed", "trusted") else f"{line} — gates"
    _stop_dependents(policy, thresholds, prepared, not_gating)
    if settings.pairwise:
        _pairwise_policy(policy, settings, prepared, judge, records, options, judged)
    return policy


def _metric_entry(settings: Settings, prepared: Prepared, judge: JudgeClient, records: list[dict[str, Any]],
                  options: Any, name: str, control: Mapping[str, Any] | None, threshold: Threshold) -> dict[str, Any]:
    """The calibration block's entry of judged metric ``name`` (gated at ``threshold``): the judge's key, the standing of its human labels and of its ``control`` record, whether it gates and on what
    evidence, and its gate ``line``."""
    parts = key_parts(judge, prepared.metrics[name], options)
    key = key_of(parts)
    label = judge_label(parts, name, key)
    current, stale = lookup(records, name, key, parts)
    floor = floor_for(settings, name)
    state, why = standing(current, stale, floor)
    control_state, control_why = control_standing(control) if control is not None else ("none", "")
    gating, evidence = decide(settings.calibration, state, control_state, seed_kind=prepared.seed_kind)
    entry: dict[str, Any] = {"judge": label, "key": key, "status": state, "reason": why, "gating": gating,
                             "evidence": evidence, "min_kappa": floor.min_kappa, "min_labels": floor.min_labels,
                             "threshold": threshold.model_dump()}
    if current is not None:
        entry.update({"kappa": current.get("kappa"), "kappa_ci": current.get("kappa_ci"), "n": current.get("n"),
                      "accuracy": current.get("accuracy"), "spearman": current.get("spearman"),
                      "kendall": current.get("kendall"), "created": current.get("created"),
                      "digest": current.get("digest"), "read_from": current.get("read_from"),
                      **({"mismatch": current["mismatch"]} if current.get("mismatch") else {})})
    if control is not None:
        entry["controls"] = {"status": control_state, "reason": control_why, "n": control.get("n"),
                             "kappa": control.get("kappa"), "kappa_ci": control.get("kappa_ci"),
                             "items": control.get("items"), "digest": control.get("digest"),
                             "kinds": control.get("kinds"), "first_unavailable": control.get("first_unavailable"),
                             "disagreements": control.get("disagreements", [])[:3]}
    entry["line"] = judge_line(name, label, evidence, gating, why, control_state, control_why)
    return entry


def _stop_dependents(policy: JudgePolicy, thresholds: dict[str, Threshold], prepared: Prepared,
                     not_gating: set[str]) -> None:
    """A metric that reads a non-gating judged metric's value stops gating too; the non-gating metrics leave
    ``thresholds``."""
    for name in sorted(thresholds):
        dependent = prepared.metrics.get(name)
        if dependent is not None and name not in not_gating and set(dependent.depends_on) & not_gating:
            not_gating.add(name)
            policy.notes[name] = (f"{name}: reads {', '.join(sorted(set(dependent.depends_on) & not_gating))}, whose "
                                  "judge is not calibrated — shown, not gating")
            policy.block["metrics"].setdefault(name, {"status": "depends", "gating": False,
                                                      "threshold": thresholds[name].model_dump()})
    for name in not_gating:
        thresholds.pop(name, None)


def _pairwise_policy(policy: JudgePolicy, settings: Settings, prepared: Prepared, judge: JudgeClient,
                     records: list[dict[str, Any]], options: Any, judged: list[str]) -> None:
    """Pairwise preferences gate (``fail_on_regression``) under the same rules, calibrated as ``pairwise:NAME``."""
    policy.pairwise_gating = set()
    block = policy.block.setdefault("pairwise", {})
    for name in judged:
        parts = pairwise_key_parts(judge, prepared.metrics[name], options)
        key = key_of(parts)
        label = judge_label(parts, f"pairwise:{name}", key)
        current, stale = lookup(records, f"pairwise:{name}", key, parts)
        state, why = standing(current, stale, floor_for(settings, f"pairwise:{name}"))
        gating = gates(settings.calibration, state, seed_kind=prepared.seed_kind)
        block[name] = {"judge": label, "key": key, "status": state, "reason": why, "gating": gating,
                       **({"kappa": current.get("kappa"), "n": current.get("n"), "created": current.get("created")}
                          if current is not None else {})}
        if gating:
            policy.pairwise_gating.add(name)
        elif settings.calibration == "required":
            policy.failures[f"{name}#pairwise"] = calibration_reason(f"{name} (pairwise): judge not calibrated "
                                                                     f"for {label}: {why}")


def attach_calibration(document: dict[str, Any], policy: JudgePolicy, health: dict[str, Any] | None) -> None:
    """results.json: ``calibration`` (the policy's block), ``gate.notes`` (one line per judged metric that does
    not gate), per metric ``calibration`` (standing, κ, n, date) and ``judge_health``, and
    ``summary.judge_health`` (``judges.health``)."""
    metrics = document.get("metrics", {})
    if policy.block:
        document["calibration"] = {**policy.block, "metrics": {name: entry for name, entry in
                                                               policy.block.get("metrics", {}).items() if name in metrics}}
        for name, entry in document["calibration"]["metrics"].items():
            metrics[name]["calibration"] = {k: entry.get(k) for k in ("status", "gating", "kappa", "n", "created",
                                                                      "judge", "reason", "threshold")}
            if entry.get("evidence"):
                metrics[name]["calibration"]["evidence"] = entry["evidence"]
            if isinstance(entry.get("controls"), dict):
                metrics[name]["calibration"]["controls"] = {k: entry["controls"].get(k)
                                                            for k in ("status", "kappa", "kappa_ci", "n")}
    notes = [line for name, line in sorted(policy.notes.items()) if name in metrics]
    if notes:
        document.setdefault("gate", {})["notes"] = notes
    if health is not None and health.get("metrics"):
        document["summary"]["judge_health"] = health["total"]
        for name, counts in health["metrics"].items():
            if name in document.get("metrics", {}):
                document["metrics"][name]["judge_health"] = counts


# --- evalgate calibrate -----------------------------------------------------------------------------------------


@dataclass
class CalibrationOutcome:
    records: list[dict[str, Any]]
    standings: dict[str, tuple[Standing, str]]
    """metric → (standing, reason) under the floor."""
    files: list[Path]
    db_path: Path
    notices: list[str]


def labelled_examples(prepared: Prepared, cwd: Path) -> list[LabelledExample]:
    if not prepared.calibration_sets:
        raise UserError("no labelled examples: name a labels file in a suite block (calibration: labels.yaml) or in "
                        "evalgate.yaml's suite (docs/judge-calibration.md, \"Calibration\")", where="calibration")
    examples: list[LabelledExample] = []
    for path, _where in prepared.calibration_sets:
        examples.extend(load_labels(path, cwd))
    for example in examples:
        for name in [*example.labels, *(example.preferred or {})]:
            metric = prepared.metrics.get(name)
            if metric is None or not metric.uses_judge:
                what = "unknown metric" if metric is None else "not a judged metric"
                raise UserError(f"label for {name!r}: {what} (calibration is for judged metrics)", where=example.where)
    return examples


async def calibrate(settings: Settings, suite_config: Mapping[str, Any], cwd: Path | None = None,
                    metrics: list[str] | None = None) -> CalibrationOutcome:
    """Score every labelled example with the configured judge; store and return one record per metric."""
    cwd = cwd or Path.cwd()
    prepared = prepare(settings, suite_config, cwd)
    by_metric, by_pairwise = _examples_by_metric(labelled_examples(prepared, cwd), prepared, set(metrics or []))
    if settings.judge_provider == "none":
        raise UserError("calibration needs a judge: set judge_provider (--judge-provider)", where="judge_provider")
    runtime = Runtime.from_settings(settings)
    judge = build_judge(settings, runtime, settings.environment)
    assert judge is not None
    options = global_options(prepared)
    gate = asyncio.Semaphore(settings.concurrency)
    try:
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        records: list[dict[str, Any]] = []
        for name in sorted(by_metric):
            records.append(await _calibrate_metric(judge, name, by_metric[name], options, gate, now, prepared, cwd))
        for name in sorted(by_pairwise):
            records.append(await _calibrate_pairwise(judge, prepared.metrics[name], by_pairwise[name], options, gate,
                                                     now, prepared, cwd))
    finally:
        await judge.aclose()
        await runtime.aclose()
    files = calibration_files(settings, prepared, cwd)
    db_path = settings.db_path if settings.db_path.is_absolute() else cwd / settings.db_path
    save(db_path, records)
    if files:
        write_file(files[0], records)
    standings = {r["metric"]: standing(r, None, floor_for(settings, r["metric"])) for r in records}
    return CalibrationOutcome(records, standings, files[:1], db_path, prepared.notices)


def _examples_by_metric(examples: list[LabelledExample], prepared: Prepared, wanted: set[str]
                        ) -> tuple[dict[str, list[LabelledExample]], dict[str, list[LabelledExample]]]:
    """The labelled examples per metric to calibrate (those in ``wanted``; every one when it is empty), and per
    metric whose pairwise preferences to calibrate (``pairwise:NAME`` or ``NAME`` in ``wanted``). A labelled
    metric without a threshold, or nothing to calibrate, is a user error."""
    by_metric: dict[str, list[LabelledExample]] = {}
    by_pairwise: dict[str, list[LabelledExample]] = {}
    for example in examples:
        for name in example.labels:
            if not wanted or name in wanted:
                by_metric.setdefault(name, []).append(example)
        for name in example.preferred or {}:
            if not wanted or name in wanted or f"pairwise:{name}" in wanted:
                by_pairwise.setdefault(name, []).append(example)
    for name in sorted(by_metric):
        if prepared.thresholds.get(name) is None:
            raise UserError(f"{name} has no threshold: calibration compares pass/fail at the threshold; set one "
                            "(thresholds:, metric_thresholds)", where=by_metric[name][0].where)
    if not by_metric and not by_pairwise:
        raise UserError("no labelled example names a metric to calibrate", where="calibration")
    return by_metric, by_pairwise


async def _calibrate_metric(judge: JudgeClient, name: str, examples: list[LabelledExample], options: Any,
                            gate: asyncio.Semaphore, now: str, prepared: Prepared, cwd: Path) -> dict[str, Any]:
    """The record of metric ``name``: the judge's verdicts on the labelled ``examples`` against the human labels,
    at the metric's threshold (``verdict.calibration.agreement``)."""
    metric = prepared.metrics[name]

    async def one(example: LabelledExample) -> Pair:
        async with gate:
            value, reasoning, problem = await score_example(judge, metric, example.case, options)
        label = example.labels[metric.name]
        threshold = prepared.thresholds[metric.name]
        return Pair(example.case.id or example.where, label.as_pass(threshold.admits), label.value, value,
                    reasoning, example.where, problem)

    pairs = await asyncio.gather(*(one(example) for example in examples))
    parts = key_parts(judge, metric, options)
    key = key_of(parts)
    report = agreement(pairs, prepared.thresholds[name].admits)
    first_problem = next((p.problem for p in pairs if p.problem), None)
    return {"metric": name, "key": key, "judge": judge_label(parts, name, key), "parts": parts,
            "created": now, "threshold": prepared.thresholds[name].model_dump(),
            "labels": sorted({display_path(p.resolve(), cwd) for p, _ in prepared.calibration_sets}),
            "first_unavailable": first_problem, **report}


async def _calibrate_pairwise(judge: JudgeClient, metric: Metric, examples: list[LabelledExample], options: Any,
                              gate: asyncio.Semaphore, now: str, prepared: Prepared, cwd: Path) -> dict[str, Any]:
    """The ``pairwise:NAME`` record: the judge's combined preference (both orders) against the human one."""
    async def one(example: LabelledExample) -> tuple[str, str | None, str, str]:
        assert example.answers is not None and example.preferred is not None
        async with gate:
            found = await prefer(judge, metric, example.case, *example.answers)  # A as "base", B as "head"
        choice = {"base": "A", "head": "B", "tie": "tie"}[found["preferred"]]
        return example.case.id or example.where, choice, example.preferred[metric.name], " / ".join(found["reasoning"])

    rows = await asyncio.gather(*(one(example) for example in examples))
    parts = pairwise_key_parts(judge, metric, options)
    key = key_of(parts)
    name = f"pairwise:{metric.name}"
    return {"metric": name, "key": key, "judge": judge_label(parts, name, key), "parts": parts, "created": now,
            "labels": sorted({display_path(p.resolve(), cwd) for p, _ in prepared.calibration_sets}),
            **preference_agreement(rows)}
