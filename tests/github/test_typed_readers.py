"""The annotations reader takes case records through their type (``store.reader.read_case``)."""

from __future__ import annotations

from typing import Any

import pytest

from evalgate.github import annotations
from evalgate.model import CaseResult
from evalgate.store.reader import read_case
from tests.support.reports import failing_case, results_doc


def test_read_case_drops_only_the_malformed_parts() -> None:
    record: dict[str, Any] = {"id": "c1", "status": "failed", "extra": 1,
                              "metrics": {"odd": "not a mapping", "hit": {"status": "passed", "value": 1.0}}}
    case = read_case(record)
    assert isinstance(case, CaseResult)
    assert list(case.metrics) == ["hit"] and case.passed is False
    assert "risk_level" not in case.model_fields_set  # a default, not a recorded value
    assert read_case(["not", "a", "record"]) is None
    assert read_case({"id": "c2", "status": "weird"}) is None


def test_annotations_get_case_results_and_the_same_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = results_doc()
    plain = annotations.annotation_lines(doc, workspace=None)
    odd = failing_case("crit-odd", risk="critical")
    odd["unknown_key"] = "ignored"
    odd["metrics"] = {**odd["metrics"], "broken": "not a mapping"}
    seen: list[object] = []
    real = annotations.case_annotation

    def spy(case: Any, **kwargs: Any) -> Any:
        seen.append(case)
        return real(case, **kwargs)

    monkeypatch.setattr(annotations, "case_annotation", spy)
    assert annotations.annotation_lines(doc, workspace=None) == plain
    assert seen and all(isinstance(case, CaseResult) for case in seen)
    clean = annotations.annotation_lines({**doc, "results": [failing_case("crit-odd", risk="critical")]}, workspace=None)
    assert annotations.annotation_lines({**doc, "results": [odd]}, workspace=None) == clean
