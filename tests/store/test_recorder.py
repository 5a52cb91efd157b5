"""The case recorder writes each finished case once, redacted, to the spool and the database, and a
crash in a large run keeps every case it was handed."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from evalgate.cli import main as cli
from evalgate.model import CaseResult, CaseStatus, MetricResult, MetricStatus, Threshold
from evalgate.safety.redact import register_secret
from evalgate.store.recorder import CaseRecorder
from evalgate.store.results_json import CaseSpool
from evalgate.store.sqlite import SQLiteStore

SECRET = "sk-recorder-secret-0042"


def test_each_case_is_recorded_once_redacted_in_the_spool_and_the_database(tmp_path: Path) -> None:
    register_secret(SECRET)
    spool = CaseSpool(tmp_path / ".cases.jsonl")
    store = SQLiteStore(tmp_path / "results.db", "run-1", "2026-11-22T10:00:00Z")
    recorder = CaseRecorder(spool, store)
    threshold = Threshold(op="min", value=0.5)
    for index in (2, 0, 1):
        metric = MetricResult(value=0.25, threshold=threshold, passed=False, status=MetricStatus.failed,
                              reason="0.25 misses threshold ≥ 0.5", details={"said": f"leaked {SECRET}"})
        recorder.add(CaseResult(id=f"c{index}", index=index, status=CaseStatus.failed, passed=False,
                                output=f"answer {SECRET}", metrics={"m": metric}))
    records = [json.loads(r) for r in spool.iter_records_in_order()]
    assert [r["id"] for r in records] == ["c0", "c1", "c2"]
    assert all(SECRET not in json.dumps(r) and r["output"] == "answer ***" for r in records)
    spool.close()
    store.finish({"summary": {"total_test_cases": 3, "total_passed": 0, "total_failed": 3, "total_errored": 0,
                              "pass_rate": 0.0}})
    db = sqlite3.connect(tmp_path / "results.db")
    assert db.execute("SELECT COUNT(*) FROM eg_cases").fetchone() == (3,)
    assert db.execute("SELECT metric_name, COUNT(*) FROM eval_results GROUP BY metric_name ORDER BY 1").fetchall() == [
        ("case_passed", 3), ("m", 3)]
    assert all(SECRET not in row[0] for row in db.execute("SELECT record FROM eg_cases"))
    details = [row[0] for row in db.execute("SELECT metric_details_json FROM eval_results WHERE metric_name = 'm'")]
    assert details == ['{"said": "leaked ***"}'] * 3
    db.close()


def write_dataset(path: Path, n: int) -> None:
    with path.open("w") as handle:
        for i in range(n):
            handle.write(json.dumps({"id": f"c{i}", "input": f"question {i}", "output": f"answer {i}",
                                     "expected_keywords": ["answer"], "category": "kw"}) + "\n")


def test_a_crash_in_a_large_run_keeps_every_case_handed_to_the_recorder(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    write_dataset(tmp_path / "cases.jsonl", 6000)
    calls = {"n": 0}
    original = CaseRecorder.add

    def flaky_add(self: CaseRecorder, result: CaseResult) -> None:
        calls["n"] += 1
        if calls["n"] == 5200:
            raise OSError(28, "No space left on device")
        original(self, result)

    monkeypatch.setattr(CaseRecorder, "add", flaky_add)
    out = tmp_path / "out"
    code = cli.main(["run", "-d", str(tmp_path / "cases.jsonl"), "-o", str(out), "--progress", "none",
                     "--concurrency", "1"])
    assert code == 1
    document = json.loads((out / "results.json").read_text())
    assert document["status"] == "crashed" and len(document["results"]) == 5199
    assert [r["index"] for r in document["results"]] == list(range(5199))
    db = sqlite3.connect(out / "results.db")
    assert db.execute("SELECT status FROM eg_runs").fetchone() == ("crashed",)
    assert db.execute("SELECT COUNT(*) FROM eg_cases").fetchone() == (5199,)
    assert db.execute("SELECT COUNT(*) FROM eval_results").fetchone() == (5199 * 2,)


def test_a_large_run_records_every_case_once(tmp_path: Path) -> None:
    write_dataset(tmp_path / "cases.jsonl", 6000)
    out = tmp_path / "out"
    assert cli.main(["run", "-d", str(tmp_path / "cases.jsonl"), "-o", str(out), "--progress", "none"]) == 0
    document = json.loads((out / "results.json").read_text())
    assert [r["id"] for r in document["results"]] == [f"c{i}" for i in range(6000)]
    db = sqlite3.connect(out / "results.db")
    assert db.execute("SELECT COUNT(*), COUNT(DISTINCT case_id) FROM eg_cases").fetchone() == (6000, 6000)
    assert not (out / ".cases.jsonl").exists()
