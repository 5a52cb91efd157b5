"""Workflow annotations for a results document.

* ``::error`` for each failed metric threshold (no file) and each failed/errored critical case;
* ``::warning`` for each other failed/errored case;
* case annotations point at the dataset case (``file`` relative to ``GITHUB_WORKSPACE``, ``line``).

The runner records only 10 annotations per type and step. Publishing emits these last, with what is
left of that budget once the step's own problems (a refused comment, a failed upload, an unreadable
baseline) have been reported; within it the most important come first (thresholds, then cases by risk
and dataset order), at most ``max_errors`` / ``max_warnings`` are emitted, and one ``::notice`` says how
many more were left out.

Case records are read through their type (``store.reader.read_case``, its "not recorded" rule: a record's
risk level and source show only as recorded; a legacy ``critical: true`` is critical; a record without an
id is annotated under a stand-in id).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from evalgate.github.commands import RUNNER_LIMIT_PER_TYPE, Level, annotation
from evalgate.model import STATUS_TEXT, CaseResult
from evalgate.report.digest import beyond
from evalgate.report.markdown import repo_relative, split_source
from evalgate.report.view import format_number, format_threshold, is_critical, is_failing, risk_rank
from evalgate.store.reader import read_case, recorded


@dataclass(frozen=True)
class Annotation:
    """One annotation before formatting."""

    level: Level
    message: str
    title: str
    file: str | None = None
    line: int | None = None

    def command(self) -> str:
        """The ``::level file=…,line=…,title=…::message`` line."""
        return annotation(self.level, self.message, file=self.file, line=self.line, title=self.title)


def build_annotations(
    results: Mapping[str, Any],
    *,
    workspace: str | None,
    base_dir: str | None = None,
    max_errors: int = RUNNER_LIMIT_PER_TYPE,
    max_warnings: int = RUNNER_LIMIT_PER_TYPE,
) -> list[Annotation]:
    """Errors, then warnings (each list cut to its maximum), then one summary notice if any were cut."""
    errors = threshold_annotations(results)
    warnings: list[Annotation] = []
    no_gate = (results.get("gate") or {}).get("no_gate")
    if no_gate:  # the run's pass (or failure) rests on no gated metric: said where the check is read
        passed = bool((results.get("gate") or {}).get("passed"))
        (warnings if passed else errors).append(Annotation(
            "warning" if passed else "error", f"{no_gate}" + (" (no_gate: fail fails such a run)" if passed else ""),
            title="evalgate: nothing gated"))
    for case in _ordered_failures(results.get("results") or []):
        item = case_annotation(case, workspace=workspace, base_dir=base_dir)
        (errors if item.level == "error" else warnings).append(item)
    shown = errors[:max_errors] + warnings[:max_warnings]
    # failures a digest counted but does not hold (report.digest): critical ones are errors
    more_critical = beyond(results, "critical_failing")
    more = beyond(results, "failing") - more_critical
    omitted_errors = max(0, len(errors) - max_errors) + more_critical
    omitted_warnings = max(0, len(warnings) - max_warnings) + more
    if omitted_errors or omitted_warnings:
        shown.append(_overflow_notice(omitted_errors, omitted_warnings))
    return shown


def annotation_lines(results: Mapping[str, Any], **kwargs: Any) -> list[str]:
    """``build_annotations`` formatted as workflow-command lines."""
    return [item.command() for item in build_annotations(results, **kwargs)]


def threshold_annotations(results: Mapping[str, Any]) -> list[Annotation]:
    """One error per gated metric whose suite average misses its threshold."""
    out = []
    for name, info in (results.get("metrics") or {}).items():
        if not isinstance(info, Mapping) or info.get("threshold") is None or info.get("passed") is not False:
            continue
        if info.get("average") is None:
            continue
        message = f"{name} average {format_number(info.get('average'))} misses threshold {format_threshold(info['threshold'])}"
        out.append(Annotation("error", message, title=f"evalgate: metric {name} below threshold"))
    return out


def case_annotation(case: CaseResult, *, workspace: str | None, base_dir: str | None = None) -> Annotation:
    """Error for a critical case, warning otherwise; file/line from the case's ``source`` (as recorded)."""
    critical = is_critical(case)
    status = STATUS_TEXT[case.status]
    path, line = split_source(recorded(case, "source"))
    file = repo_relative(path, workspace, base_dir) if path else None
    kind = "critical case" if critical else "case"
    return Annotation(
        level="error" if critical else "warning",
        message=_case_message(case),
        title=f"evalgate: {kind} {case.id} {status}",
        file=file,
        line=line if file else None,
    )


def _case_message(case: CaseResult) -> str:
    """Reasons (or the error), then the risk level as recorded: ``reason; reason (risk: high)``."""
    reasons = list(case.reasons)
    if case.error and not reasons:
        reasons = [f"error: {case.error}"]
    text = "; ".join(reasons) or f"case {case.id} {STATUS_TEXT[case.status]}"
    return f"{text} (risk: {recorded(case, 'risk_level') or 'unknown'})"


def _ordered_failures(records: Iterable[Any]) -> list[CaseResult]:
    """The failed/errored case records, read one at a time through their type, by risk, errored after failed,
    then dataset order."""
    read = (read_case(record, position) for position, record in enumerate(records))
    failing = [case for case in read if case is not None and is_failing(case)]
    return sorted(failing, key=lambda c: (risk_rank(c), STATUS_TEXT[c.status] != "failed", c.index))


def _overflow_notice(omitted_errors: int, omitted_warnings: int) -> Annotation:
    parts = []
    if omitted_errors:
        parts.append(f"{omitted_errors} more error(s)")
    if omitted_warnings:
        parts.append(f"{omitted_warnings} more warning(s)")
    message = (
        f"{' and '.join(parts)} not annotated (the runner keeps {RUNNER_LIMIT_PER_TYPE} per type); "
        "see the job summary and the results artifact for every failed case"
    )
    return Annotation("notice", message, title="evalgate: more failures")

