"""``store.reader.read_case``, the one lenient reader of a per-case record, and its "not recorded" rule, fed
hand-written foreign records through the real entry points (``evalgate report``, the workflow annotations).

The expected lines are main's output (f2bc33d, when every reader took the record as an untyped mapping) for
the same document: a legacy ``critical: true`` stays critical with no risk shown, a text id is taken from a
number, undeclared keys are ignored, a bare-number threshold reads as a minimum. The deliberate changes: a
record without an id is shown under a stand-in id instead of ``None``; a record whose status is no case
status but whose ``passed`` is false is listed as failed (main listed it nowhere but the HTML case list)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evalgate.export.langfuse import build_events
from evalgate.github import annotations
from evalgate.model import CaseResult
from evalgate.report.documents import build_document
from evalgate.store.reader import STAND_IN_ID, read_case, read_metrics, recorded
from tests.support.reports import failing_case, results_doc

ROOT = Path(__file__).resolve().parents[2]


def foreign_document() -> dict[str, Any]:
    """``results_doc()`` with records no evalgate run writes: hand-edited or from older tools."""
    doc = results_doc()
    legacy = failing_case("legacy-flag", index=5)
    del legacy["risk_level"]
    legacy["critical"] = True
    no_id = failing_case("x", index=6)
    del no_id["id"]
    no_id["reasons"] = []
    number_id = failing_case("y", index=7)
    number_id["id"] = 7
    extra = failing_case("extra", index=8, risk="high")
    extra["unknown_key"] = 1
    extra["metrics"]["bare"] = {"value": 0.1, "threshold": 0.5, "passed": False, "status": "failed",
                                "reason": "low", "details": {}}
    no_status = failing_case("nostatus", index=9)
    no_status["status"] = "weird"
    minimal = {"id": "minimal", "status": "errored", "error": "boom"}
    doc["results"] = [*doc["results"], legacy, no_id, number_id, extra, no_status, minimal]
    return doc


STAND_IN = STAND_IN_ID.format(6)


def test_the_not_recorded_rule() -> None:
    legacy = read_case({"id": "a", "status": "failed", "critical": True})
    assert legacy is not None and legacy.risk_level == "critical"  # never lower than the legacy flag
    assert recorded(legacy, "risk_level") is None and recorded(legacy, "source") is None  # shown as recorded: none
    assert legacy.passed is False
    lower = read_case({"id": "b", "status": "failed", "risk_level": "low", "critical": True})
    assert lower is not None and recorded(lower, "risk_level") == "critical"
    nameless = read_case({"status": "errored", "index": 4})
    assert nameless is not None and nameless.id == STAND_IN_ID.format(4) and recorded(nameless, "id") is None
    assert read_case({"status": "failed", "id": None}, 9).id == STAND_IN_ID.format(9)  # type: ignore[union-attr]
    assert read_case({"id": 7, "status": "passed"}).id == "7"  # type: ignore[union-attr]
    for not_a_case in (["a", "list"], {"id": "c"}, {"id": "c", "status": "weird"}, {"id": "c", "status": ["x"]},
                       {"id": "c", "passed": "no"}):
        assert read_case(not_a_case) is None
    said = read_case({"id": "d", "status": "weird", "passed": False})
    assert said is not None and said.status == "failed" and recorded(said, "status") is None
    assert read_case({"id": "e", "passed": True}).status == "passed"  # type: ignore[union-attr]
    odd = read_case({"id": "f", "status": "failed", "passed": "no", "index": "x"})
    assert odd is not None and odd.passed is False and odd.index == 0 and recorded(odd, "index") is None
    written = CaseResult.from_stored(failing_case("w"))
    assert read_case(failing_case("w")) == written and read_case(written) is written
    assert read_case(json.dumps(failing_case("w"))) == written  # a SQLite document, read from its text
    flagged = read_case('{"id": "t", "status": "failed", "critical": true}')
    assert flagged is not None and flagged.risk_level == "critical" and read_case("[1]") is None
    with pytest.raises(ValueError):
        read_case("not json")
    assert recorded(written, "risk_level") == "medium" and recorded(written, "source") is not None


def test_read_metrics_keeps_the_valid_entries() -> None:
    metrics = read_metrics({"odd": "not a mapping", "weird": {"status": "weird"}, "bare": {"status": "failed",
                           "value": 0.1, "threshold": 0.5}, "hit": {"status": "passed", "value": 1.0}})
    assert list(metrics) == ["bare", "hit"]
    assert metrics["bare"].threshold is not None and metrics["bare"].threshold.model_dump() == {"min": 0.5}
    assert read_metrics(None) == {} and read_metrics(["x"]) == {}


def test_annotations_of_foreign_records_are_mains() -> None:
    lines = annotations.annotation_lines(foreign_document(), workspace=None)
    assert lines == [
        "::error title=evalgate%3A metric mention_f1 below threshold::mention_f1 average 0.820 misses threshold ≥ 0.85",
        "::error file=datasets/brand/fixtures.yaml,line=13,title=evalgate%3A critical case crit-1 failed::"
        "mention_f1: 0.40 below 0.85 for crit-1 (risk: critical)",
        "::error file=datasets/brand/fixtures.yaml,line=53,title=evalgate%3A critical case legacy-flag failed::"
        "mention_f1: 0.40 below 0.85 for legacy-flag (risk: unknown)",
        "::warning file=datasets/brand/fixtures.yaml,line=83,title=evalgate%3A case extra failed::"
        "mention_f1: 0.40 below 0.85 for extra (risk: high)",
        # main: "case None failed" — a record without an id is still annotated, under its stand-in id
        f"::warning file=datasets/brand/fixtures.yaml,line=63,title=evalgate%3A case {STAND_IN.replace(',', '%2C')}"
        f" failed::case {STAND_IN} failed (risk: medium)",
        "::warning file=datasets/brand/fixtures.yaml,line=73,title=evalgate%3A case 7 failed::"
        "mention_f1: 0.40 below 0.85 for y (risk: medium)",
        # main: not annotated (status "weird"); its passed: false lists it as failed
        "::warning file=datasets/brand/fixtures.yaml,line=93,title=evalgate%3A case nostatus failed::"
        "mention_f1: 0.40 below 0.85 for nostatus (risk: medium)",
        "::warning file=datasets/brand/fixtures.yaml,line=23,title=evalgate%3A case err-2 errored::"
        "mention_f1: 0.40 below 0.85 for err-2 (risk: low)",
        "::warning title=evalgate%3A case minimal errored::error: boom (risk: unknown)",
    ]


def _report(tmp_path: Path, fmt: str) -> str:
    path = tmp_path / "results.json"
    path.write_text(json.dumps(foreign_document()), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "evalgate", "report", str(path), "--format", fmt],
                          capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_markdown_report_of_foreign_records_is_mains(tmp_path: Path) -> None:
    text = _report(tmp_path, "markdown")
    for line in (
        "- 🚨 `legacy-flag` · `datasets/brand/fixtures.yaml:53` · critical — mention\\_f1 0.400 (needs ≥ 0.85): "
        "missed HubSpot",
        "- ❌ `7` · `datasets/brand/fixtures.yaml:73` — mention\\_f1 0.400 (needs ≥ 0.85): missed HubSpot",
        "- 💥 `minimal` · — · errored — error: boom",
        "<summary>❌ <code>legacy-flag</code> · failed · 🚨 critical · crm</summary>",
        "| `bare` | 0.100 | ≥ 0.5 | failed | low |",
        "<summary>💥 <code>minimal</code> · errored</summary>",
        f"- ❌ `{STAND_IN}` · `datasets/brand/fixtures.yaml:63` — mention\\_f1 0.400 (needs ≥ 0.85): missed HubSpot",
        f"<summary>❌ <code>{STAND_IN}</code> · failed · medium risk · crm</summary>",
    ):
        assert line in text.splitlines(), line
    assert "- ❌ `nostatus` · `datasets/brand/fixtures.yaml:93` — mention\\_f1 0.400 (needs ≥ 0.85): missed HubSpot" \
        in text.splitlines()
    assert "`None`" not in text


def test_html_report_of_foreign_records_is_mains(tmp_path: Path) -> None:
    text = _report(tmp_path, "html")
    for line in (
        '<li class="failed-case">🚨 <code>legacy-flag</code> <span class="s-failed">failed</span> · '
        '<span class="mono">datasets/brand/fixtures.yaml:53</span> — mention_f1 0.400 (needs ≥ 0.85): missed HubSpot</li>',
        '<summary><span class="s-failed">❌ failed</span> <code>legacy-flag</code> <span class="badge critical">'
        'critical</span> <span class="badge">crm</span></summary>',
        '<summary><span class="s-failed">❌ failed</span> <code>7</code> <span class="badge">medium risk</span> '
        '<span class="badge">crm</span></summary>',
        '<tr><td><code>bare</code></td><td class="n">0.100</td><td>≥ 0.5</td><td class="s-failed">failed</td>'
        '<td>low</td></tr>',
        '<summary><span class="s-errored">💥 errored</span> <code>minimal</code></summary>',
    ):
        assert line in text.splitlines(), line
    assert f"<code>{STAND_IN}</code>" in text and "<code>None</code>" not in text
    # main listed the record whose status is no case status as "weird"; its passed: false lists it as failed
    assert '<details class="case status-failed" id="case-6" data-case-id="nostatus" data-status="failed">' in text


@pytest.mark.parametrize("record", [{"id": "v", "status": "failed", "critical": True, "risk_level": None},
                                    {"status": "failed", "critical": 1}])
def test_a_critical_flag_is_never_downgraded(record: dict[str, Any]) -> None:
    doc = {**results_doc(), "results": [record]}
    (line,) = [x for x in annotations.annotation_lines(doc, workspace=None) if "case" in x.split("::")[1]]
    assert line.startswith("::error ") and "critical case" in line


def test_langfuse_events_of_foreign_records_are_mains() -> None:
    events = build_events(foreign_document())
    traces = {e["body"]["name"]: e["body"] for e in events if e["type"] == "trace-create"}
    # main's ids (uuid5 of run id, case id, repeat) and metadata for the same records
    assert traces["legacy-flag"]["id"] == "72ac26f7-685a-5474-bd6d-a35058b8e7f6"
    assert traces["legacy-flag"]["metadata"] == {
        "suite": "brand-mentions", "category": "crm", "risk_level": None, "status": "failed",
        "source": "datasets/brand/fixtures.yaml:53", "run_id": "20261122T101500Z-3f2a1c"}
    assert traces["7"]["id"] == "05902de2-0054-5add-8cd7-ecefd7f208f1"
    assert traces["minimal"] == {
        "id": "2ee793eb-189b-57f8-a554-9773df46e2a5", "timestamp": "2026-11-22T10:15:00Z", "name": "minimal",
        "sessionId": "20261122T101500Z-3f2a1c", "input": None, "output": None, "tags": ["evalgate"],
        "metadata": {"suite": None, "category": None, "risk_level": None, "status": "errored", "source": None,
                     "run_id": "20261122T101500Z-3f2a1c"}}
    assert STAND_IN in traces and "None" not in traces  # main: "None"
    assert traces["nostatus"]["metadata"]["status"] == "failed"  # main: "weird" (its passed: false)
    assert len(events) == 40


def test_seed_documents_of_foreign_records() -> None:
    """A dialect's document reads the records through their type too: main's seed 004 entries for the same
    records, but a number id is its text and a record without an id has its stand-in (main: 7 and null)."""
    entries = build_document("seed004", foreign_document())["per_query"]
    assert [e["id"] for e in entries] == ["ok-0", "minimal", "crit-1", "err-2", "legacy-flag", STAND_IN, "7", "extra",
                                          "nostatus"]
