"""After the last case: the results document (``build_document``), its metadata, and the comparison with a
baseline (``attach_comparison``). Pure but for reading the run's own spooled records."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import platform
import re
import secrets
import shutil
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from evalgate import __version__
from evalgate.config.sections import PublishSettings
from evalgate.config.settings import Settings
from evalgate.config.trust import from_checkout, untrusted_checkout
from evalgate.dialect import output_documents
from evalgate.errors import UserError
from evalgate.metrics.registry import Metric
from evalgate.model import Threshold
from evalgate.report.documents import write_document
from evalgate.runner.provenance import provenance
from evalgate.runner.setup import Prepared
from evalgate.safety.redact import redact, redact_mapping
from evalgate.store.reader import BaselineLookup
from evalgate.store.results_json import SCHEMA_VERSION
from evalgate.verdict.aggregate import RunAggregate
from evalgate.verdict.calibration import calibration_snapshot
from evalgate.verdict.compare import compare_runs
from evalgate.verdict.gate import GatePolicy, Verdict
from evalgate.verdict.policy import (
    GATE_SETTINGS,
    approval,
    dataset_line,
    effective_gate_changes,
    gate_reason,
    loosenings,
    snapshot,
    unknown,
)
from evalgate.verdict.reasons import gate_reasons
from evalgate.verdict.tolerance import resolve_tolerances


def new_run_id(now: dt.datetime) -> str:
    return now.strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def build_document(
    *,
    run_id: str,
    timestamp: str,
    status: str,
    aggregate: RunAggregate,
    thresholds: Mapping[str, Threshold],
    verdict: Verdict,
    metadata: dict[str, Any],
    metrics: Mapping[str, Metric],
) -> dict[str, Any]:
    """The results.json document without ``results`` (those are streamed from the spool)."""
    table = metric_table(aggregate, thresholds, verdict, metrics)
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "timestamp": timestamp,
        "status": status,
        "summary": run_summary(aggregate),
        "metrics": table,
        "thresholds": {name: t.model_dump() for name, t in sorted(thresholds.items()) if name in table},
        "thresholds_passed": verdict.thresholds_passed,
        "gate": verdict.as_dict(),
        "critical_failures": aggregate.critical_failures,
        "breakdowns": aggregate.breakdowns_dict(),
        "metadata": metadata,
    }


def metric_table(aggregate: RunAggregate, thresholds: Mapping[str, Threshold], verdict: Verdict,
                 metrics: Mapping[str, Metric]) -> dict[str, Any]:
    """results.json ``metrics``: per metric (by name) its average, counts by status, range, threshold, direction,
    kind, whether it passed, reason counts and, for a judged metric, the judge's verdict counts."""
    table: dict[str, Any] = {}
    for name, tally in sorted(aggregate.metrics.items()):
        metric = metrics.get(name)
        threshold = thresholds.get(name)
        table[name] = {
            "average": _round(tally.average),
            "count": tally.count,
            "failed": tally.failed,
            "skipped": tally.skipped,
            "unavailable": tally.unavailable,
            "errored": tally.errored,
            "min": _round(tally.minimum) if tally.count else None,
            "max": _round(tally.maximum) if tally.count else None,
            "threshold": threshold.model_dump() if threshold else None,
            "direction": metric.direction if metric else "higher",
            "kind": metric.kind if metric else "deterministic",
            "passed": verdict.metric_passed.get(name),
            "reasons": dict(tally.reasons) if tally.reasons else {},
            "first_reason": dict(tally.first_reason),
        }
        if metric is not None and metric.info is not None:  # a user metric: what it checks, in one line
            table[name]["summary"] = metric.description
        judged = aggregate.judge.get(name)
        if judged is not None:
            table[name].update({"judge_verdicts": judged.verdicts, "judge_unavailable": judged.missing,
                                "judge_unavailable_first": judged.first})
    return table


def run_summary(aggregate: RunAggregate) -> dict[str, Any]:
    """results.json ``summary``: pass rates, totals, average scores, tokens, latency (ms), cost (USD) and the
    judge's verdict counts."""
    averages = aggregate.averages()
    judge_total = aggregate.judge_totals()
    return {
        "pass_rate": round(aggregate.pass_rate, 6),
        "weighted_pass_rate": round(aggregate.weighted_pass_rate, 6),
        "total_test_cases": aggregate.total_test_cases,
        "total_passed": aggregate.total_passed,
        "total_failed": aggregate.total_failed,
        "total_errored": aggregate.total_errored,
        "total_skipped": aggregate.total_skipped,
        "critical_failures": aggregate.critical_failure_count,
        "average_scores": {k: _round(v) for k, v in averages.items() if v is not None},
        "tokens": {
            "total": aggregate.tokens_total,
            "average": _round(aggregate.tokens_total / aggregate.tokens_cases) if aggregate.tokens_cases else None,
        },
        "latency_ms": {
            "average": _round(aggregate.latency_total / aggregate.latency_cases) if aggregate.latency_cases else None,
            "p50": _ms(aggregate.latency.quantile(0.5)), "p95": _ms(aggregate.latency.quantile(0.95)),
        },
        "cost_usd": round(aggregate.cost_usd, 6),
        "judged_unavailable": judge_total.missing,
        "judged_verdicts": judge_total.verdicts,
        "judged_unavailable_first": judge_total.first,
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _ms(value: float | None) -> float | None:
    """A latency percentile (estimated within 1 %, ``verdict.quantiles``) to 0.1 ms."""
    return None if value is None else round(value, 1)


def run_metadata(settings: Settings, prepared: Prepared, target: Any) -> dict[str, Any]:
    config = settings.model_dump(exclude_defaults=True)
    return {
        "datasets": prepared.files,
        "config": redact_mapping(config),
        "versions": {"evalgate": __version__, "python": platform.python_version()},
        "judge": {"provider": settings.judge_provider, "model": settings.judge_model},
        "target": redact_mapping(target.describe()),
        "selected_cases": len(prepared.cases),
        "repeat": settings.repeat,
        **provenance(settings.environment),  # metadata.git {branch, commit} and metadata.finished (evalgate view's runs page)
    }


def custom_metrics_metadata(prepared: Prepared, judge: Any) -> dict[str, Any]:
    """``metadata.custom_metrics``: each user metric's declaration (origin, criteria, rubric, fields) and,
    for a judged metric whose steps the judge wrote, those steps (``steps_source`` generated or cache) or
    why there are none."""
    from evalgate.judges.custom import steps_metadata  # optional: loads jinja2 (≈100 ms); needed with user metrics only

    generated = steps_metadata(judge) if judge is not None else {}
    out: dict[str, Any] = {}
    for name, metric in sorted(prepared.metrics.items()):
        info = metric.info
        if info is None or (name not in prepared.user_metrics and name not in prepared.used_inline):
            continue
        entry = {"summary": metric.description, **info}
        if info.get("type") == "judged" and info.get("steps_source") == "generated":
            steps = generated.get(info.get("criteria"))
            if steps is None:
                entry["steps_source"] = None  # no case asked the judge (no judge, or the metric never ran)
            elif "error" in steps:
                entry["steps_source"], entry["steps_error"] = None, steps["error"]
            else:
                entry["evaluation_steps"] = steps["steps"]
                entry["steps_source"] = "cache" if steps["cached"] else "generated"
        out[name] = redact_mapping(entry)
    return out


COMPARED_RECORD_KEYS = ("id", "source", "risk_level", "status", "passed", "repeat", "expectation")


def attach_comparison(document: dict[str, Any], baseline: BaselineLookup | None, records: Iterable[bytes],
                      settings: Settings, *, pairwise: Mapping[str, Any] | None = None,
                      pairwise_gated: Collection[str] = ()) -> list[str]:
    """Put ``baseline`` (what was asked, found or why not) and ``comparison`` into ``document``; return
    the gate reasons the comparison adds (only with ``fail_on_regression``). ``records`` are the run's
    case records as JSON, streamed and slimmed to what the comparison reads. ``pairwise`` (the run's
    ``pairwise`` block, ``runner.pairwise``): the sign tests of ``pairwise_gated`` metrics join the comparison's
    one family, and each of their rows in ``pairwise.metrics`` gets the family's ``p_adjusted``,
    ``family_size`` and ``weight``. Never raises."""
    if baseline is None:
        return []
    info: dict[str, Any] = {"setting": settings.baseline, "found": baseline.found, "source": baseline.source,
                            "warning": baseline.warning, "severity": baseline.severity if baseline.warning else None}
    document["baseline"] = info
    document["comparison"] = None
    if baseline.document is None:
        return []
    head = {**document, "results": (compared_record(json.loads(record)) for record in records)}
    try:
        comparison = compare_runs(baseline.document, head, alpha=settings.significance_level,
                                  baseline_source=baseline.source, repeat_rule=settings.repeat_rule,
                                  tolerances=settings.regression_tolerance,
                                  pairwise=(pairwise or {}).get("metrics") or {}, pairwise_gated=pairwise_gated)
    except Exception as exc:  # a comparison problem must not lose the run's results
        info["warning"] = redact(f"no comparison: {type(exc).__name__}: {exc}")
        info["severity"] = "warning"
        return []
    document["comparison"] = comparison
    tests = {t["name"]: t for t in comparison["family"]["tests"] if t["kind"] == "pairwise"}
    for name, row in ((pairwise or {}).get("metrics") or {}).items():
        if name in tests and isinstance(row, dict):
            row.update(p_adjusted=tests[name]["p_adjusted"], family_size=comparison["family"]["size"],
                       weight=tests[name]["weight"])
    return gate_reasons(comparison=comparison, fail_on_regression=settings.fail_on_regression)


def compared_record(record: dict[str, Any]) -> dict[str, Any]:
    """What the comparison reads of a case record; a value scored by the heuristic because the judge could
    not score it is left out (it is not comparable with a judge's value on the other side)."""
    slim = {key: record[key] for key in COMPARED_RECORD_KEYS if key in record}
    slim["metrics"] = {name: {"value": None if "judge_unavailable" in (m.get("details") or {}) else m.get("value")}
                       for name, m in (record.get("metrics") or {}).items() if isinstance(m, dict)}
    return slim


def write_compat_documents(settings: PublishSettings, results_path: Path, cwd: Path | None = None
                           ) -> dict[str, Path]:
    """The ``compat`` dialects' output documents (``report.documents``) written beside results.json, plus the
    single one at ``compat_output`` (the dialect's own ``--output``, relative to ``cwd``). Returns dialect →
    path written."""
    if not settings.compat:
        return {}
    written: dict[str, Path] = {}
    extra = Path(settings.compat_output) if settings.compat_output else None
    if extra is not None and not extra.is_absolute():
        extra = (cwd or Path.cwd()) / extra
    shaped = output_documents(settings.compat)  # a dialect without a document writes none
    for seed, shape in shaped.items():
        path = results_path.parent / shape.file
        with open(path, "w", encoding="utf-8") as out:  # streamed: memory flat in the number of cases
            write_document(seed, results_path, out, settings.compat_include_responses, clean=redact)
        written[seed] = path
    for seed, shape in shaped.items():  # after every document is written: --output may name results.json itself
        if extra is not None and (shape.takes_output or len(shaped) == 1):
            try:
                extra.parent.mkdir(parents=True, exist_ok=True)
                if not extra.exists() or not extra.samefile(written[seed]):
                    shutil.copyfile(written[seed], extra)
            except OSError as exc:
                raise UserError(f"cannot write {extra} ({exc.strerror}); results are in {results_path}",
                                where="compat_output (--output)") from None
            written[f"{seed}:output"] = extra
    return written


def policy_of(settings: Settings) -> GatePolicy:
    return GatePolicy(strict=settings.strict_metrics, fail_on_critical=settings.fail_on_critical,
                      min_pass_rate=settings.min_pass_rate, max_errored=settings.max_errored)


POLICY_NOTE_UNKNOWN = "gate policy of the base run unknown (made by an evalgate that did not record it)"


def gate_policy_snapshot(settings: Settings, prepared: Prepared, document: Mapping[str, Any], cases: Mapping[str, Any],
                         cwd: Path | None) -> dict[str, Any]:
    """The run's ``gate_policy`` (``verdict.policy.snapshot``): the thresholds that gated (``document``'s,
    after calibration), the gate settings with where each was set, and the bounded case facts ``cases``."""
    root = f"{(cwd or Path.cwd()).resolve()}/"

    def where(origin: str) -> str:
        if origin.startswith("default "):
            return "default"
        if origin.startswith("metric_thresholds ("):
            origin = f"metric_thresholds: {settings.origin('metric_thresholds')}"
        return redact(origin.replace(root, ""))

    values: dict[str, Any] = {name: getattr(settings, name) for name in GATE_SETTINGS if name != "selection"}
    values["calibration_floors"] = {name: dict(floor) for name, floor in settings.calibration_floors.items()}
    values["selection"] = {"case_ids": len(settings.case_ids), "first_n": settings.first_n,
                           "category": sorted(settings.category), "tags": sorted(settings.tags),
                           "shard": settings.shard if shard_from_checkout(settings) else None}
    origins = {name: where(settings.origin(name)) for name in (*GATE_SETTINGS, "regression_tolerance")
               if name != "selection"}
    for name in ("case_ids", "first_n", "category", "tags", "shard", "repeat", "target", "judge_provider",
                 "max_answer_chars", "traces", "pairwise", "critical_pass_probability"):
        origins[name] = where(settings.origin(name))
    origins["simulator"] = where(settings.origin("simulator_model"))
    judge_origins = [settings.origin(f"judge_{key}") for key in ("model", "base_url", "temperature", "temperatures",
                                                                 "samples", "seed", "output")]
    origins["judge"] = where(next((o for o in judge_origins if not o.startswith("default ")), "default "))
    thresholds = document.get("thresholds") or {}
    return snapshot(
        thresholds=thresholds,
        threshold_origins={name: where(prepared.threshold_origins.get(name, "default"))
                           for name in {*thresholds, *(document.get("metrics") or {})}},
        computed=(document.get("metrics") or {}).keys(),
        settings=values,
        origins=origins,
        tolerances={name: t.to_dict() for name, t in resolve_tolerances(settings.regression_tolerance).items()},
        optional_metrics={suite or "": names for suite, names in prepared.optional.items()},
        cases=cases,
        not_gating={name: str(entry["calibration"].get("reason") or entry["calibration"].get("status") or "")
                    for name, entry in (document.get("metrics") or {}).items()
                    if isinstance(entry, Mapping) and isinstance(entry.get("calibration"), Mapping)
                    and entry["calibration"].get("gating") is False},
        run=run_settings(settings, prepared, document),
    )


def shard_from_checkout(settings: Settings) -> bool:
    """True when ``shard`` was set by the checkout's evalgate.yaml (a pull request choosing to run part of
    its cases), not by the workflow (``--shard``, an input, ``EVALGATE_SHARD``: its shards are merged)."""
    return bool(settings.shard) and from_checkout(settings.origin("shard"), settings.config)


FILE_MODULE = re.compile(r"^evalgate_user_[0-9a-f]+\.")
"""The module name a ``file://`` check is loaded under (``config.references``): a digest of the file's absolute
path, so the same file in another checkout directory (a base run on another runner) is no other definition."""


TARGET_IDENTITY = ("target", "target_url", "target_method", "target_headers", "target_body_template",
                   "target_response_map", "target_response_format", "target_command", "target_model",
                   "target_provider", "target_options", "outputs_file")
"""Settings that say where a run's answers come from (``answer_source.identity``)."""
SET_BY_WORKFLOW = "set by the workflow"


def run_settings(settings: Settings, prepared: Prepared, document: Mapping[str, Any]) -> dict[str, Any]:
    """The gate policy's ``RUN_SETTINGS`` (``verdict.policy``): what else can change a verdict. A target or
    judge setting the workflow gave (an input, ``EVALGATE_*``, a flag) is recorded as ``SET_BY_WORKFLOW``: the
    pull request cannot change it, and a value the workflow makes per run (an agent on a free port) must not
    read as the pull request's change."""
    def digest(value: Any) -> str:
        text = json.dumps(value, sort_keys=True, default=str)
        return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()

    def own(name: str, value: Any = None) -> Any:
        if _from_workflow(settings, name):
            return SET_BY_WORKFLOW
        return getattr(settings, name) if value is None else value

    target = (document.get("metadata") or {}).get("target") or {}
    kind = str(target.get("kind") or settings.target) if isinstance(target, Mapping) else settings.target
    base_url = None
    if settings.judge_base_url:
        parts = urlsplit(settings.judge_base_url)
        base_url = redact(f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}")
    definitions = {}
    for name in sorted(prepared.user_metrics):
        info = dict(prepared.metrics[name].info or {}) if name in prepared.metrics else {}
        origin = str(info.pop("origin", "") or "")
        if isinstance(info.get("function"), str):  # a file:// module's name hashes the checkout's absolute path
            info["function"] = FILE_MODULE.sub("file://", info["function"])
        definitions[name] = {"digest": digest(info), "origin": redact(origin)}
    return {
        "repeat": settings.repeat,
        "answer_source": {"target": kind, "identity": digest({name: own(name) for name in TARGET_IDENTITY})},
        "judge": {"provider": settings.judge_provider, "model": own("judge_model"),
                  "base_url": own("judge_base_url", base_url) if base_url else None,
                  "temperature": own("judge_temperature"), "temperatures": own("judge_temperatures", dict(
                      settings.judge_temperatures)), "samples": own("judge_samples"), "seed": own("judge_seed"),
                  "output": own("judge_output")},
        "simulator": own("simulator_model"),
        "metric_definitions": definitions,
        "directions": {name: str(entry.get("direction") or "higher")
                       for name, entry in sorted((document.get("metrics") or {}).items())
                       if isinstance(entry, Mapping)},
        "suites": dict(sorted(prepared.suite_digests.items())),
        "max_answer_chars": settings.max_answer_chars,
        "adaptive": {"on": settings.adaptive, "budget": settings.adaptive_budget,
                     "critical_pass_probability": settings.critical_pass_probability},
        "traces": settings.traces,
        "pairwise": settings.pairwise,
    }


def attach_gate_policy(document: dict[str, Any], baseline: BaselineLookup | None, settings: Settings,
                       prepared: Prepared, cases: Mapping[str, Any], cwd: Path | None,
                       pr_labels: Iterable[str] = ()) -> tuple[list[str], dict[str, Any]]:
    """Put ``gate_policy`` into ``document``; with a baseline, compare it with the base run's. Returns the gate
    reason (``gate_changes: fail`` in a pull-request run, loosened, not approved by the label) and the
    ``gate`` fields to add: ``gate_changes`` (as applied), ``loosened`` (list; None when the base run's policy
    is unknown), ``policy_note``, ``approved_by``. Never raises."""
    head = gate_policy_snapshot(settings, prepared, document, cases, cwd)
    head["calibrations"] = calibration_snapshot(document.get("calibration"))  # which records admitted a judge
    partial = bool(settings.shard) and not shard_from_checkout(settings)  # a PR's own shard is no partial run
    return compare_gate_policy(document, head, baseline, settings, pr_labels, partial=partial)


def compare_gate_policy(document: dict[str, Any], head: dict[str, Any], baseline: BaselineLookup | None,
                        settings: Settings, pr_labels: Iterable[str] = (), *, partial: bool = False,
                        configured: str | None = None) -> tuple[list[str], dict[str, Any]]:
    """``attach_gate_policy`` for a ready snapshot ``head`` (a merged run's: a shard's with the merged case
    set). ``partial``: the run holds part of the cases (one shard), so missing and demoted cases are not
    compared. ``configured``: the ``gate_changes`` asked for (default: ``settings``')."""
    untrusted = untrusted_checkout(settings.environment)
    base_doc = baseline.document if baseline is not None else None
    base_policy = base_doc.get("gate_policy") if isinstance(base_doc, Mapping) else None
    base_mode = base_policy.get("gate_changes") if isinstance(base_policy, Mapping) else None
    configured = configured or settings.gate_changes
    mode = effective_gate_changes(configured, untrusted=untrusted, base_value=base_mode,
                                  from_workflow=_from_workflow(settings, "gate_changes"))
    head["gate_changes"] = mode
    document["gate_policy"] = head
    chosen = _baseline_from_checkout(settings, untrusted)
    if base_doc is None and not chosen:
        return [], {}
    fields: dict[str, Any] = {"gate_changes": mode}
    loosened: list[dict[str, Any]] = list(chosen)
    compared = document.get("comparison") or {}
    exact: Any = {**(compared.get("cases") or {}), **(compared.get("dataset") or {})}
    if base_doc is not None and unknown(base_policy):
        fields["policy_note"] = POLICY_NOTE_UNKNOWN
    elif base_doc is not None:
        removed = exact.get("removed")
        try:
            asked = {**head, "gate_changes": configured}  # what the PR asked for, listed if looser
            loosened += loosenings(base_policy, asked, removed if isinstance(removed, list) and not partial
                                   else None, cases=exact if not partial else None)
        except Exception as exc:  # a malformed base policy must not lose the run's results
            fields["policy_note"] = redact(f"gate policy of the base run unreadable: {type(exc).__name__}")
    if base_doc is not None and not partial and isinstance(exact, Mapping):
        changes = dataset_line(exact)
        if changes is not None:
            fields["dataset_changes"] = changes
    if partial:  # one shard holds part of the cases: the merged run compares them
        loosened = [item for item in loosened
                    if item["kind"] not in ("cases_missing", "critical_demoted", "expectations_edited")]
    fields["loosened"] = loosened if loosened or "policy_note" not in fields else None
    in_actions = settings.environment.get("GITHUB_ACTIONS", "").strip().lower() == "true"
    if not loosened or mode != "fail" or (in_actions and not untrusted):  # a push or schedule run: reported only
        return [], fields
    label = settings.gate_change_label
    if from_checkout(settings.origin("gate_change_label"), settings.config):
        label = str(Settings.model_fields["gate_change_label"].default)  # the PR's file may not name the label
    approved = approval(pr_labels, label)
    if approved:
        fields["approved_by"] = approved
        return [], fields
    return [gate_reason(loosened, label)], fields


def _from_workflow(settings: Settings, name: str) -> bool:
    """True when setting ``name`` was given by the workflow (an input, an ``EVALGATE_*`` variable, a flag), not
    by the checkout's evalgate.yaml nor left at its default."""
    origin = settings.origin(name)
    return not origin.startswith("default ") and not from_checkout(origin, settings.config)


def _baseline_from_checkout(settings: Settings, untrusted: bool) -> list[dict[str, Any]]:
    """In a pull-request run, a ``baseline`` chosen by the PR's own evalgate.yaml (``none``, or a file the PR
    can write) leaves nothing trustworthy to compare the policy with: one loosening saying so."""
    origin = settings.origin("baseline")
    if not untrusted or settings.baseline_kind == "auto" or not from_checkout(origin, settings.config):
        return []  # ``auto`` is the base branch's own artifact: nothing the PR can write
    where = redact(origin.replace(f"{Path.cwd().resolve()}/", ""))
    return [{"kind": "baseline", "setting": "baseline", "before": None, "after": settings.baseline, "origin": where,
             "text": f"baseline {settings.baseline} chosen by the pull request's evalgate.yaml: the base run's gate "
                     f"cannot be compared with ({where})"}]
