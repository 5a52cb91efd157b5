"""Annotations from a results document: levels, order, file/line, the runner's 10-per-type limit."""

from __future__ import annotations

from typing import Any

from evalgate.github.annotations import annotation_lines, build_annotations
from tests.support.action import runner_parse
from tests.support.reports import failing_case, passing_case, results_doc

WORKSPACE = "/github/workspace"


def doc_with(cases: list[dict[str, Any]], *, metrics_pass: bool = True) -> dict[str, Any]:
    doc = results_doc()
    doc["results"] = cases
    if metrics_pass:
        for info in doc["metrics"].values():
            if info["threshold"] is not None:
                info["passed"] = True
    return doc


def test_critical_cases_are_errors_and_others_warnings() -> None:
    cases = [
        passing_case("ok", 0),
        failing_case("low", risk="low", index=1),
        failing_case("crit", risk="critical", index=2),
        failing_case("err", risk="high", index=3, status="errored"),
    ]
    items = build_annotations(doc_with(cases), workspace=WORKSPACE, base_dir=WORKSPACE)
    assert [(a.level, a.title) for a in items] == [
        ("error", "evalgate: critical case crit failed"),
        ("warning", "evalgate: case err errored"),
        ("warning", "evalgate: case low failed"),
    ]
    crit = items[0]
    assert crit.file == "datasets/brand/fixtures.yaml"
    assert crit.line == 23
    assert crit.message == "mention_f1: 0.40 below 0.85 for crit (risk: critical)"


def test_failed_thresholds_come_first_as_errors() -> None:
    doc = results_doc()
    items = build_annotations(doc, workspace=WORKSPACE, base_dir=WORKSPACE)
    assert items[0].level == "error"
    assert items[0].message == "mention_f1 average 0.820 misses threshold ≥ 0.85"
    assert items[0].file is None
    assert items[1].title == "evalgate: critical case crit-1 failed"


def test_errored_case_without_reasons_reports_the_error() -> None:
    case = failing_case("boom", risk="critical", status="errored")
    case["reasons"] = []
    (item,) = build_annotations(doc_with([case]), workspace=WORKSPACE, base_dir=WORKSPACE)
    assert item.message == "error: target timed out after 30 s (risk: critical)"


def test_file_is_relative_to_the_workspace() -> None:
    absolute = failing_case("abs", risk="critical")
    absolute["source"] = "/github/workspace/evals/golden.json:7"
    nested = failing_case("rel", risk="critical")
    nested["source"] = "cases.yaml:4"
    outside = failing_case("out", risk="critical")
    outside["source"] = "/tmp/elsewhere/x.yaml:2"
    memory = failing_case("mem", risk="critical")
    memory["source"] = "<memory>"
    items = build_annotations(
        doc_with([absolute, nested, outside, memory]), workspace=WORKSPACE, base_dir="/github/workspace/sub"
    )
    assert [(a.file, a.line) for a in items] == [
        ("evals/golden.json", 7),
        ("sub/cases.yaml", 4),
        (None, None),
        (None, None),
    ]


def test_runner_limit_most_important_first_then_one_summary_notice() -> None:
    cases = [failing_case(f"crit-{i}", risk="critical", index=i) for i in range(14)]
    cases += [failing_case(f"low-{i}", risk="low", index=100 + i) for i in range(5)]
    cases += [failing_case(f"high-{i}", risk="high", index=200 + i) for i in range(6)]
    # two warnings of the step already spent (say a refused comment and a failed upload)
    items = build_annotations(doc_with(cases), workspace=WORKSPACE, base_dir=WORKSPACE, max_warnings=8)
    errors = [a for a in items if a.level == "error"]
    warnings = [a for a in items if a.level == "warning"]
    notices = [a for a in items if a.level == "notice"]
    assert len(errors) == 10
    assert [a.title for a in errors] == [f"evalgate: critical case crit-{i} failed" for i in range(10)]
    assert len(warnings) == 8
    assert [a.title.split()[2] for a in warnings[:6]] == [f"high-{i}" for i in range(6)], "high risk before low"
    assert len(notices) == 1
    assert notices[0].message.startswith("4 more error(s) and 3 more warning(s) not annotated")
    assert items[-1] is notices[0]


def test_no_notice_when_everything_fits() -> None:
    cases = [failing_case(f"c{i}", risk="medium", index=i) for i in range(8)]
    items = build_annotations(doc_with(cases), workspace=WORKSPACE, base_dir=WORKSPACE)
    assert [a.level for a in items] == ["warning"] * 8


def test_lines_are_valid_workflow_commands() -> None:
    case = failing_case("evil,id:1", risk="critical")
    case["reasons"] = ["model wrote\n::error::fake\r\n##[warning]also fake"]
    case["source"] = "/github/workspace/data/a,b:c.yaml:9"
    lines = annotation_lines(doc_with([case]), workspace=WORKSPACE, base_dir=WORKSPACE)
    assert len(lines) == 1
    assert "\n" not in lines[0] and "\r" not in lines[0]
    name, props, data = runner_parse(lines[0])  # type: ignore[misc]
    assert name == "error"
    assert props == {"file": "data/a,b:c.yaml", "line": "9", "title": "evalgate: critical case evil,id:1 failed"}
    assert data == "model wrote\n::error::fake\r\n##[warning]also fake (risk: critical)"
