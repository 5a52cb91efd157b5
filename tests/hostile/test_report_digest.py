"""Issue #22, item 3: ``evalgate report`` and the Action's publishing stream results.json and keep a
bounded digest (``report.digest``); what they render is the same as from the whole document."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evalgate.github.annotations import annotation_lines
from evalgate.report.digest import Digest, load_digest
from evalgate.report.markdown import render_comment, render_summary
from evalgate.store.results_json import StreamedDocument


def document(cases: int) -> dict[str, Any]:
    records = []
    for i in range(cases):
        failing = i % 3 == 0
        records.append({"id": f"c{i:05d}", "index": i, "repeat": 0, "suite": "s", "source": f"d.yaml:{i + 1}",
                        "risk_level": "critical" if i % 97 == 0 else ("high" if i % 7 == 0 else "medium"),
                        "status": "failed" if failing else "passed", "passed": not failing, "reasons": [],
                        "input": f"question {i}", "output": f"answer {i}", "expected": {}, "answer": {},
                        "metrics": {"keyword_coverage": {"value": 0.0 if failing else 1.0, "threshold": {"min": 0.6},
                                                         "passed": not failing,
                                                         "status": "failed" if failing else "passed",
                                                         "reason": "missing keywords: x" if failing else None,
                                                         "details": {}}}})
    failed = sum(r["status"] == "failed" for r in records)
    return {"schema_version": 1, "run_id": "r1", "timestamp": "2026-11-26T00:00:00Z", "status": "completed",
            "summary": {"pass_rate": 1 - failed / cases, "total_test_cases": cases, "total_passed": cases - failed,
                        "total_failed": failed, "total_errored": 0, "total_skipped": 0,
                        "critical_failures": sum(r["risk_level"] == "critical" and r["status"] == "failed"
                                                 for r in records)},
            "metrics": {}, "thresholds": {}, "thresholds_passed": True,
            "gate": {"passed": False, "exit_code": 1, "reasons": ["critical case failed"]},
            "breakdowns": {}, "metadata": {}, "results": records}


def test_the_streamed_reader_gives_every_record_and_field(tmp_path: Path) -> None:
    full = document(500)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(full, indent=2))
    stream = StreamedDocument(path)
    assert list(stream.records()) == full["results"]
    assert stream.head == {k: v for k, v in full.items() if k != "results"}


def test_a_digest_renders_the_same_comment_and_annotations_as_the_whole_document(tmp_path: Path) -> None:
    full = document(6000)  # 2,000 failed cases, 20 of them critical
    path = tmp_path / "results.json"
    path.write_text(json.dumps(full))
    small = load_digest(path, keep_failing=300)  # more than the comment ever shows
    assert len(small["results"]) == 300 and small["_digest"]["failing"] == 2000
    comment = render_comment(full, run_url=None, artifact_url=None, tag="")
    assert "more" in comment and render_comment(small, run_url=None, artifact_url=None, tag="") == comment
    assert annotation_lines(small, workspace=None) == annotation_lines(full, workspace=None)
    whole = load_digest(path)  # the default keeps 2,000 failures: the job summary is the same too
    assert render_summary(whole, run_url=None, artifact_url=None) == render_summary(full, run_url=None,
                                                                                  artifact_url=None)


def test_the_digest_keeps_the_most_important_failures_whatever_the_order() -> None:
    digest = Digest(keep_failing=3, keep_cases=2)
    for record in reversed(document(30)["results"]):
        digest.add(record)
    kept = digest.records()
    assert [r.id for r in kept] == ["c00000", "c00021", "c00003", "c00001", "c00002"]
    assert digest.counts()["cases"] == 30 and digest.counts()["failing"] == 10
