"""Merge shard results (results.json and/or SQLite files) into one run.

Each input is one run: a ``results.json`` file, or a SQLite results database (its newest finished
run, or ``FILE#RUN_ID`` for a given one). The merged run is rebuilt from the per-case records only:

1. every input is checked against the others: same schema version, evalgate version, datasets
   (path + sha256), judge, target kind and the settings that change selection, scoring or the gate
   (``MATTERING_SETTINGS``); the judge's temperature, seed, samples and template versions and each judged
   metric's calibration key and result (``runner.shard_judging``: a shard without a calibration another
   found makes the merged one the weakest — not gating — said in a gate note); the same threshold for
   every metric; shard labels ``i/n`` with one ``n`` and no ``i`` twice; each case id in exactly one input
   (and in the shard its id hashes to);
2. the records are spooled to disk and re-aggregated in dataset order (``index``, ``repeat``): through
   ``RepeatSink`` (each case's repeats collapse into one case, flaky cases and confidence intervals are
   collected, as in ``evalgate.runner.tallies``) into ``RunAggregate``; the gate is recomputed with ``run_verdict``
   and the recorded thresholds, policy and repeat rule, so the verdict equals that of one unsharded run
   of the same cases;
3. ``results.json`` and a new run with status ``merged`` in the SQLite file are written.

A missing shard is an error unless ``allow_partial``; then, like a cancelled or crashed shard, it
becomes a gate reason (partial results never pass). Judge spend (``summary.judge_calls``, judge tokens)
and the call counters (``metadata.calls``: calls, retries, HTTP 429s …) are summed over the inputs.
Shard-level ``comparison`` blocks are dropped: compare the merged run (``baseline``); the shards' pairwise
preferences against that same base run are summed into its family (``shard_judging.merged_pairwise``).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalgate.calls.executor import CALL_COUNTERS
from evalgate.config.settings import Settings, parse_shard
from evalgate.dataset.select import shard_of
from evalgate.errors import UserError
from evalgate.judges.health import HealthTally
from evalgate.metrics.registry import all_metrics
from evalgate.model import CaseResult, Threshold
from evalgate.runner.calibrate import JudgePolicy, attach_calibration
from evalgate.runner.finish import attach_comparison, build_document, compare_gate_policy, new_run_id
from evalgate.runner.shard_judging import JudgingAgreement, merged_pairwise
from evalgate.store.judge_cache import CACHE_FILE, cache_path, merge_cache_files
from evalgate.store.outdir import OutputLock
from evalgate.store.reader import BaselineLookup, ShardRun, expand_inputs, open_input, split_run_spec
from evalgate.store.results_json import CaseSpool, write_results
from evalgate.store.sqlite import SQLiteStore
from evalgate.verdict.aggregate import RunAggregate
from evalgate.verdict.gate import GatePolicy, Verdict, judge_metric_sets, run_verdict
from evalgate.verdict.policy import CaseSet
from evalgate.verdict.reasons import ShardEnd, gate_reasons
from evalgate.verdict.repeats import RepeatSink, apply_report

MATTERING_SETTINGS = (
    "strict_metrics", "fail_on_critical", "min_pass_rate", "max_errored", "fail_on_regression",
    "significance_level", "repeat", "adaptive", "repeat_rule", "judge_samples", "judge_provider", "judge_model",
    "target", "target_model", "category", "tags", "case_ids", "first_n",
    "regression_tolerance", "judge_temperature", "judge_temperatures", "judge_seed", "judge_output", "calibration",
    "calibration_min_kappa", "calibration_min_labels", "calibration_floors", "pairwise", "max_answer_chars",
)
"""Settings (``metadata.config``, defaults filled in) that must agree between shards; thresholds are
compared as applied (each metric's recorded threshold), wherever they were configured."""
PER_SHARD_SETTINGS = ("shard", "output_dir", "db", "format", "progress", "verbose", "baseline")
"""Settings dropped from the merged run's ``metadata.config``."""
SPOOL_NAME = ".merge-cases.jsonl"


@dataclass
class MergeOutcome:
    document: dict[str, Any]
    results_path: Path
    db_path: Path
    verdict: Verdict
    warnings: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# consistency checks (pure)


def _settings_defaults() -> dict[str, Any]:
    return {name: Settings.model_fields[name].get_default(call_default_factory=True) for name in MATTERING_SETTINGS}


def run_identity(document: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """What must be equal between shards of one run (JSON-comparable values)."""
    metadata = document.get("metadata") or {}
    config = metadata.get("config") or {}
    judge = metadata.get("judge") or {}
    return {
        "evalgate version": (metadata.get("versions") or {}).get("evalgate"),
        "datasets": _canonical(metadata.get("datasets")),
        "judge": _canonical([judge.get("provider"), judge.get("model")]),
        "target kind": (metadata.get("target") or {}).get("kind"),
        **{name: _canonical(config.get(name, defaults[name])) for name in MATTERING_SETTINGS},
    }


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def recorded_thresholds(document: Mapping[str, Any]) -> dict[str, Any]:
    """Metric → threshold mapping (``None``: informational) as the run applied it."""
    found: dict[str, Any] = {name: (row or {}).get("threshold") for name, row in (document.get("metrics") or {}).items()}
    for name, threshold in (document.get("thresholds") or {}).items():
        found.setdefault(name, threshold)
    return found


def shard_of_document(document: Mapping[str, Any], label: str) -> tuple[int, int] | None:
    """The ``(i, n)`` shard a run selected (``metadata.config.shard``), None for an unsharded run."""
    text = ((document.get("metadata") or {}).get("config") or {}).get("shard")
    if not text:
        return None
    try:
        return parse_shard(str(text))
    except ValueError as exc:
        raise UserError(str(exc), where=f"{label}: metadata.config.shard") from None


class Consistency:
    """Accumulates the inputs' identities, thresholds and shards; raises on the first disagreement."""

    def __init__(self) -> None:
        self.defaults = _settings_defaults()
        self.identity: dict[str, Any] | None = None
        self.first_label = ""
        self.thresholds: dict[str, tuple[Any, str]] = {}
        self.shards: dict[int, str] = {}
        self.shard_count: int | None = None
        self.unsharded: str | None = None
        self.judging = JudgingAgreement()

    def add(self, run: ShardRun) -> None:
        self._check_identity(run)
        self.judging.add(run.label, run.document)  # judge fields, template versions, calibrations (shard_judging)
        self._check_thresholds(run)
        self._check_shard(run)

    def _check_identity(self, run: ShardRun) -> None:
        identity = run_identity(run.document, self.defaults)
        if self.identity is None:
            self.identity, self.first_label = identity, run.label
            return
        for key, value in identity.items():
            if value != self.identity[key]:
                raise UserError(
                    f"{key} differs between shards: {value} here, {self.identity[key]} in {self.first_label}",
                    where=run.label,
                )

    def _check_thresholds(self, run: ShardRun) -> None:
        for name, threshold in recorded_thresholds(run.document).items():
            seen = self.thresholds.get(name)
            if seen is None:
                self.thresholds[name] = (threshold, run.label)
            elif _canonical(seen[0]) != _canonical(threshold) and None in (seen[0], threshold) and (
                    self.judging.missing_in(run.label if threshold is None else seen[1], name)):
                # a shard without the judge's calibration did not gate on it: the merged run takes the weakest
                self.thresholds[name] = (None, run.label if threshold is None else seen[1])
            elif _canonical(seen[0]) != _canonical(threshold):
                raise UserError(
                    f"threshold for {name!r} is {_canonical(threshold)} here but {_canonical(seen[0])} in {seen[1]}; "
                    "shards of one run must share thresholds",
                    where=run.label,
                )

    def _check_shard(self, run: ShardRun) -> None:
        shard = run.shard
        if shard is None:
            if self.shards:
                raise UserError(f"this run is not a shard but {self.shards[min(self.shards)]} is", where=run.label)
            self.unsharded = self.unsharded or run.label
            return
        if self.unsharded:
            raise UserError(f"shard {shard[0]}/{shard[1]} cannot merge with the unsharded run {self.unsharded}",
                            where=run.label)
        index, count = shard
        if self.shard_count is not None and count != self.shard_count:
            raise UserError(f"shard {index}/{count} does not match the {self.shard_count} shards of "
                            f"{self.shards[min(self.shards)]}", where=run.label)
        if index in self.shards:
            raise UserError(f"shard {index}/{count} is given twice (also {self.shards[index]})", where=run.label)
        self.shard_count = count
        self.shards[index] = run.label

    def missing_shards(self) -> list[str]:
        if self.shard_count is None:
            return []
        return [f"{i}/{self.shard_count}" for i in range(1, self.shard_count + 1) if i not in self.shards]

    def gate_thresholds(self) -> dict[str, Threshold]:
        """The thresholds the merged gate applies: the shards' agreed ones, less the judged metrics whose
        calibration some shard lacked (``shard_judging``: the weakest)."""
        dropped = self.judging.not_gating()
        return {name: Threshold.model_validate(t) for name, (t, _) in sorted(self.thresholds.items())
                if t is not None and name not in dropped}

    def setting(self, name: str) -> Any:
        """The value every input agreed on for ``name`` (one of ``MATTERING_SETTINGS``)."""
        identity = self.identity or {}
        return json.loads(identity[name]) if name in identity else self.defaults[name]

    def policy(self) -> GatePolicy:
        value = self.setting
        return GatePolicy(strict=bool(value("strict_metrics")), fail_on_critical=bool(value("fail_on_critical")),
                          min_pass_rate=value("min_pass_rate"), max_errored=int(value("max_errored")))

    def repeat_sink(self, downstream: RunAggregate) -> RepeatSink:
        """A ``RepeatSink`` with the inputs' ``repeat`` and ``repeat_rule``; shards run with ``repeat: adaptive``
        (a varying number of trials per case, decided per shard) are refused rather than miscounted."""
        if self.setting("adaptive"):
            raise UserError("shards run with repeat: adaptive cannot be merged yet (each shard re-tried its own "
                            "cases); run sharded suites with repeat: N", where="metadata.config.adaptive")
        return RepeatSink(downstream, repeat=int(self.setting("repeat")), rule=self.setting("repeat_rule"))


# ---------------------------------------------------------------------------------------------
# the merge


def merge_runs(
    sources: Sequence[str | Path],
    *,
    output_dir: Path,
    db_path: Path | None = None,
    allow_partial: bool = False,
    now: dt.datetime | None = None,
    baseline: BaselineLookup | None = None,
    settings: Settings | None = None,
    pr_labels: Sequence[str] = (),
    missing_hint: str = "pass --allow-partial to merge anyway",
) -> MergeOutcome:
    """Merge ``sources`` into ``output_dir/results.json`` and a new ``merged`` run in ``db_path``. With a
    ``baseline`` (and the ``settings`` that say how to compare: significance, ``fail_on_regression``) the
    merged run is compared with it as an unsharded run would be, and a regression can fail the gate."""
    if not sources:
        raise UserError("give at least one shard's results.json or SQLite file", where="merge")
    output_dir.mkdir(parents=True, exist_ok=True)
    db_path = db_path or output_dir / "results.db"
    lock = OutputLock(output_dir, new_run_id((now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)))
    lock.acquire(wait=False, where="--output-dir")  # one run or merge at a time in a directory (store.outdir)
    spool = CaseSpool(output_dir / SPOOL_NAME)
    try:
        inputs = expand_inputs(sources, exclude=output_dir)  # a directory stands for the runs under it
        consistency, runs = _spool_inputs(inputs, spool)
        missing = consistency.missing_shards()
        if missing and not allow_partial:
            raise UserError(f"shard(s) {', '.join(missing)} missing ({missing_hint})", where="merge")
        moment = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)
        merged = _Merged(lock.run_id, moment.strftime("%Y-%m-%dT%H:%M:%SZ"), runs, consistency,
                         consistency.gate_thresholds(), missing)
        store = SQLiteStore(db_path, merged.run_id, merged.timestamp, marker=lock.marker())
        tallies = _replay(spool, store, merged)
        document, verdict, merge_warnings = _merged_document(merged, tallies, spool, baseline, settings, pr_labels)
        results_path = output_dir / "results.json"
        write_results(results_path, document, spool)
        store.finish(document)
        merge_cache_files([split_run_spec(source)[0].parent / CACHE_FILE for source in inputs],
                          cache_path(db_path))  # the merged artifact carries every shard's verdicts
    finally:
        spool.close()
        spool.path.unlink(missing_ok=True)
        lock.release()
    warnings = [f"{run.label}: its baseline comparison was dropped; compare the merged run instead"
                for run in runs if run.document.get("comparison")] + merge_warnings
    return MergeOutcome(document=document, results_path=results_path, db_path=db_path, verdict=verdict,
                        warnings=warnings)


@dataclass
class _Merged:
    """What the merged run is made of: its id and time, the checked inputs, the thresholds as applied and
    the missing shards."""

    run_id: str
    timestamp: str
    runs: list[ShardRun]
    consistency: Consistency
    thresholds: dict[str, Threshold]
    missing: list[str]


@dataclass
class _Tallies:
    """The merged cases, re-aggregated (``_replay``)."""

    aggregate: RunAggregate
    repeats: RepeatSink
    health: HealthTally
    case_set: CaseSet


def _replay(spool: CaseSpool, store: SQLiteStore, merged: _Merged) -> _Tallies:
    """Every spooled record, in dataset order, through the repeats, the judge's health, the case set and
    the database (each record stored as read)."""
    aggregate = RunAggregate(*merged_judge_sets(merged.runs, merged.thresholds))
    tallies = _Tallies(aggregate, merged.consistency.repeat_sink(aggregate), HealthTally(), CaseSet())
    for record in spool.iter_records_in_order():
        text = record.decode("utf-8")
        result = CaseResult.from_stored(text)
        tallies.repeats.add(result)
        tallies.health.add(result)
        tallies.case_set.add(result)
        store.add(result, text)
    tallies.repeats.finish()
    return tallies


def _merged_document(merged: _Merged, tallies: _Tallies, spool: CaseSpool, baseline: BaselineLookup | None,
                     settings: Settings | None, pr_labels: Sequence[str]
                     ) -> tuple[dict[str, Any], Verdict, list[str]]:
    """The merged results document (without ``results``), its verdict (``verdict.reasons.gate_reasons`` for
    the shards, calibration, comparison and gate policy) and the warnings of merging pairwise preferences."""
    runs, thresholds, policy = merged.runs, merged.thresholds, merged.consistency.policy()
    first = runs[0].document
    notes = {str(note).partition(": ")[0]: str(note) for note in (first.get("gate") or {}).get("notes") or []}
    block, notes, calibration_reasons = merged.consistency.judging.merged(first.get("calibration") or {}, notes)
    shards = [ShardEnd(run.label, str(run.document.get("status") or "completed"),
                       bool(((run.document.get("metadata") or {}).get("cost") or {}).get("budget_exceeded")))
              for run in runs]
    extra = gate_reasons(missing_shards=merged.missing, shards=shards, calibration=calibration_reasons)
    verdict = run_verdict(tallies.aggregate, thresholds, policy, extra)
    document = build_document(
        run_id=merged.run_id, timestamp=merged.timestamp, status="merged", aggregate=tallies.aggregate,
        thresholds=thresholds, verdict=verdict, metadata=merged_metadata(runs), metrics=all_metrics(),
    )
    add_judge_spend(document["summary"], [run.document for run in runs])
    apply_report(document, tallies.repeats.report())
    merge_warnings = _merged_comparison(document, merged, block, spool, baseline, settings)
    policy_reasons, gate_fields = _merged_gate_policy(document, runs, tallies.case_set.as_dict(), baseline, settings,
                                                      pr_labels)
    reasons = gate_reasons(missing_shards=merged.missing, shards=shards, calibration=calibration_reasons,
                           comparison=document.get("comparison"),
                           fail_on_regression=settings is not None and settings.fail_on_regression,
                           policy=policy_reasons)
    if reasons != extra:
        verdict = run_verdict(tallies.aggregate, thresholds, policy, reasons)
        document["gate"] = verdict.as_dict()
    document["gate"].update(gate_fields)
    attach_calibration(document, JudgePolicy(dict(thresholds), block, notes), tallies.health.report())
    return document, verdict, merge_warnings


def _merged_comparison(document: dict[str, Any], merged: _Merged, block: Mapping[str, Any], spool: CaseSpool,
                       baseline: BaselineLookup | None, settings: Settings | None) -> list[str]:
    """With a baseline and settings: the merged run's ``comparison`` (and ``pairwise``, the shards' preferences
    against that base run summed, their sign tests joining the one family); returns the merging warnings."""
    if baseline is None or settings is None:
        return []
    pairwise, pairwise_gated, merge_warnings = merged_pairwise(  # their sign tests join the one family
        [(run.label, run.document) for run in merged.runs], (baseline.document or {}).get("run_id"), block,
        merged.thresholds)
    if pairwise is not None:
        document["pairwise"] = pairwise
    attach_comparison(document, baseline, spool.iter_records_in_order(), settings,
                      pairwise=pairwise, pairwise_gated=pairwise_gated)
    return merge_warnings


def _merged_gate_policy(document: dict[str, Any], runs: Sequence[ShardRun], cases: Mapping[str, Any],
                        baseline: BaselineLookup | None, settings: Settings | None, pr_labels: Sequence[str]
                        ) -> tuple[list[str], dict[str, Any]]:
    """The merged run's ``gate_policy`` (the first shard's, with the merged case set) and, with a baseline and
    settings, its comparison with the base run's (``runner.finish.compare_gate_policy``). Shards from an
    evalgate that recorded no policy give none."""
    shard = runs[0].document.get("gate_policy") if runs else None
    if not isinstance(shard, Mapping):
        return [], {}
    head = {**shard, "cases": dict(cases)}
    if baseline is None or settings is None:
        document["gate_policy"] = head
        return [], {}
    asked = settings.gate_changes if not settings.origin("gate_changes").startswith("default") else None
    return compare_gate_policy(document, head, baseline, settings, pr_labels,
                               configured=asked or str(shard.get("gate_changes") or "report"))


def merged_judge_sets(runs: Sequence[ShardRun], thresholds: Mapping[str, Threshold]
                      ) -> tuple[frozenset[str], frozenset[str]]:
    """``RunAggregate``'s (judged, gated_judged) for the merged run: the built-in metrics that use the judge,
    plus the metrics the shards' tables mark ``judged`` (metrics a config declared), when the shards had a
    judge."""
    judging = str(((runs[0].document.get("metadata") or {}).get("judge") or {}).get("provider") or "none") != "none"
    judged, gated = judge_metric_sets(all_metrics(), thresholds, judging=judging)
    if not judging:
        return judged, gated
    declared = {str(name) for run in runs for name, row in (run.document.get("metrics") or {}).items()
                if isinstance(row, Mapping) and row.get("kind") == "judged"}
    return judged | declared, gated | {name for name in declared if thresholds.get(name) is not None}


def _spool_inputs(sources: Sequence[str | Path], spool: CaseSpool) -> tuple[Consistency, list[ShardRun]]:
    """Read every input once: check it, and append its records to ``spool`` (case ids must be unique)."""
    consistency = Consistency()
    owner: dict[str, str] = {}
    runs: list[ShardRun] = []
    for source in sources:
        run = open_input(source)
        run.shard = shard_of_document(run.document, run.label)
        consistency.add(run)
        run.cases = _spool_records(run, spool, owner)
        runs.append(run)
    return consistency, runs


def _spool_records(run: ShardRun, spool: CaseSpool, owner: dict[str, str]) -> int:
    seen: set[tuple[str, int]] = set()
    count = 0
    for where, result, text in run.case_records():
        key = (result.id, result.repeat)
        if key in seen:
            raise UserError(f"case {result.id!r} repeat {result.repeat} appears twice", where=where)
        seen.add(key)
        other = owner.setdefault(result.id, run.label)
        if other != run.label:
            raise UserError(f"case id {result.id!r} is also in {other}; shards must not overlap", where=where)
        if run.shard and shard_of(result.id, run.shard[1]) != run.shard[0]:
            raise UserError(f"case {result.id!r} belongs to shard {shard_of(result.id, run.shard[1])}/{run.shard[1]}, "
                            f"not {run.shard[0]}/{run.shard[1]}", where=where)
        spool.add(result.index, result.repeat, text)
        count += 1
    return count


def merged_metadata(runs: Sequence[ShardRun]) -> dict[str, Any]:
    """The first input's metadata without per-shard settings, plus one ``merged_from`` entry per input."""
    first = dict(runs[0].document.get("metadata") or {})
    config = {k: v for k, v in (first.get("config") or {}).items() if k not in PER_SHARD_SETTINGS}
    per_run = ("calls", "cost", "estimate", "selected_cases")
    metadata = {k: v for k, v in first.items() if k not in per_run} | {"config": config}
    metadata["selected_cases"] = sum(run.cases for run in runs)
    metadata["calls"] = summed_calls(run.document for run in runs)
    metadata["merged_from"] = [
        {
            "source": run.label,
            "run_id": run.document.get("run_id"),
            "timestamp": run.document.get("timestamp"),
            "status": run.document.get("status"),
            "shard": f"{run.shard[0]}/{run.shard[1]}" if run.shard else None,
            "records": run.cases,
            "calls": (run.document.get("metadata") or {}).get("calls"),
            "cost": (run.document.get("metadata") or {}).get("cost"),
        }
        for run in runs
    ]
    return metadata


def summed_calls(documents: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Σ over the inputs of each ``metadata.calls`` counter (calls, attempts, retries, rate_limited_429,
    failed, timeouts); an input without counters adds 0."""
    totals = dict.fromkeys(CALL_COUNTERS, 0)
    for document in documents:
        calls = (document.get("metadata") or {}).get("calls") or {}
        for key in CALL_COUNTERS:
            value = calls.get(key)
            totals[key] += int(value) if isinstance(value, int) and not isinstance(value, bool) else 0
    return totals


def add_judge_spend(summary: dict[str, Any], documents: Sequence[Mapping[str, Any]]) -> None:
    """Add the inputs' judge spend: ``cost_usd`` += Σ judge cost; judge tokens and calls summed."""
    spends = [d["summary"]["judge_calls"] for d in documents if (d.get("summary") or {}).get("judge_calls")]
    if not spends:
        return
    cost = sum(float(s.get("cost_usd") or 0.0) for s in spends)
    summary["cost_usd"] = round(float(summary.get("cost_usd") or 0.0) + cost, 6)
    summary["judge_calls"] = {"made": sum(int(s.get("made") or 0) for s in spends),
                              "cached": sum(int(s.get("cached") or 0) for s in spends), "cost_usd": round(cost, 6)}
    tokens = summary.setdefault("tokens", {})
    for key in ("judge_prompt", "judge_completion"):
        tokens[key] = sum(int(((d.get("summary") or {}).get("tokens") or {}).get(key) or 0) for d in documents)
