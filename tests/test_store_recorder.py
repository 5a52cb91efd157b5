"""The recorder process writes exactly what the in-process recorder writes (spool records, SQLite rows),
keeps what it was handed when the run crashes, and reports its own failure as an error."""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import sqlite3
import time
from enum import StrEnum
from pathlib import Path

import pytest

from evalgate.cli import main as cli
from evalgate.config.suite import SuiteConfig
from evalgate.dataset.load import DatasetStream
from evalgate.metrics.registry import all_metrics
from evalgate.model import CaseResult, CaseStatus, MetricResult, MetricStatus, Threshold, trusted
from evalgate.runner.engine import Engine
from evalgate.runner.setup import make_planner
from evalgate.safety.redact import register_secret
from evalgate.store.recorder import InlineRecorder, ProcessRecorder, holds_unstable, recorder_for
from evalgate.store.results_json import CaseSpool, write_results
from evalgate.store.sqlite import SQLiteStore
from evalgate.targets.recorded import RecordedTarget
from evalgate.verdict.gate import resolve_thresholds

REPO = Path(__file__).resolve().parents[1]
SECRET = "sk-recorder-secret-0042"
LATE_SECRET = "sk-recorder-late-0077"


class Flavour(StrEnum):
    sweet = "sweet"


def engine_results() -> list[CaseResult]:
    metrics = all_metrics()
    engine = Engine(target=RecordedTarget(), plan_for=make_planner(metrics, SuiteConfig(), {}),
                    thresholds=resolve_thresholds(metrics, []), sinks=[])
    cases = [case for root in (REPO / "datasets", REPO / "tests" / "fixtures" / "datasets")
             for case in DatasetStream([str(root)], REPO, fail_fast=False)]

    async def score() -> list[CaseResult]:
        return [await engine.evaluate(case, repeat=i % 2) for i, case in enumerate(cases)]

    return asyncio.run(score())


def odd_results() -> list[CaseResult]:
    """Results whose details hold what plain data cannot carry unchanged (set, enum) or oddities."""
    threshold = Threshold(op="min", value=0.5)
    shared = {"found": ["a", "b"], "n": 2}
    details = [{"set": {"x", "y", "z"}}, {"enum": Flavour.sweet}, {"nan": math.nan, "inf": -math.inf, "t": (1, (2, 3))},
               shared, {"nested": [{"deep": [frozenset({1})]}]}, {"text": f"leaked {SECRET} here"}, {}]
    results = []
    for i, detail in enumerate(details):
        metrics = {"m1": trusted(MetricResult, {"value": 0.75, "threshold": threshold, "passed": True,
                                                "status": MetricStatus.passed, "reason": None, "details": detail}),
                   "m2": MetricResult(value=0.25, threshold=threshold, passed=False, status=MetricStatus.failed,
                                      reason="0.25 misses threshold ≥ 0.5", details=shared),
                   "m3": MetricResult(status=MetricStatus.skipped, reason="no judge")}
        results.append(CaseResult(id=f"odd-{i}", index=1000 + i, status=CaseStatus.failed, passed=False,
                                  description="odd — one" if i % 2 else None, output=f"answer {SECRET}",
                                  reasons=["m2: 0.25 misses threshold ≥ 0.5"], metrics=metrics, repeat=i % 3,
                                  risk_level="critical" if i == 0 else "medium", latency_ms=1.5, num_tokens=3))
    return results


def record(results: list[CaseResult], out: Path, recorder_class: type) -> tuple[list[bytes], list, list]:
    out.mkdir()
    spool = CaseSpool(out / ".cases.jsonl")
    store = SQLiteStore(out / "results.db", "run-1", "2026-11-22T10:00:00Z")
    recorder = recorder_class(spool, store)
    for number, result in enumerate(results):
        if number == len(results) - 3:  # a secret known only from here on (both recorders alike)
            register_secret(LATE_SECRET)
        recorder.add(result)
    recorder.close()
    records = list(spool.iter_records_in_order())
    document = {"run_id": "run-1", "summary": {"total_test_cases": len(results), "total_passed": 0,
                                               "total_failed": len(results), "total_errored": 0, "pass_rate": 0.0}}
    write_results(out / "results.json", document, spool)
    spool.close()
    store.finish(document)
    db = sqlite3.connect(out / "results.db")
    rows = db.execute("SELECT id, eval_run_id, test_description, overall_passed, metric_name, metric_value,"
                      " metric_passed, metric_details_json, timestamp_utc FROM eval_results ORDER BY id").fetchall()
    cases = db.execute("SELECT * FROM eg_cases ORDER BY idx, repeat").fetchall()
    return records, rows, cases


def test_the_recorder_process_writes_what_the_inline_recorder_writes(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    register_secret(SECRET)
    results = engine_results() + odd_results()
    late = CaseResult(id="late", index=5000, status=CaseStatus.passed, passed=True, output=f"{LATE_SECRET} {SECRET}",
                      metrics={"m": MetricResult(value=1.0, passed=True, status=MetricStatus.passed,
                                                 details={"s": {LATE_SECRET}, "t": LATE_SECRET})})
    results = [*results[:-2], late, *results[-2:]]
    assert holds_unstable([odd_results()[0].metrics["m1"].details]) and not holds_unstable([{"a": [1, (2,)]}])
    inline = record(results, tmp_path / "inline", InlineRecorder)
    process = record(results, tmp_path / "process", ProcessRecorder)
    assert inline == process
    assert len(inline[0]) == len(results) and all(SECRET not in r.decode() for r in inline[0])
    assert LATE_SECRET not in inline[0][-1].decode() and b"***" in inline[0][-1]
    assert (tmp_path / "inline" / "results.json").read_bytes() == (tmp_path / "process" / "results.json").read_bytes()
    json.loads((tmp_path / "process" / "results.json").read_text())


def test_small_runs_and_single_cores_record_in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spool = CaseSpool(tmp_path / ".cases.jsonl")
    store = SQLiteStore(tmp_path / "results.db", "run-1", "t")
    assert isinstance(recorder_for(spool, store, 10), InlineRecorder)
    monkeypatch.setattr("evalgate.store.recorder.usable_cores", lambda: 1)
    assert isinstance(recorder_for(spool, store, 10**6), InlineRecorder)


def test_signals_do_not_stop_the_recorder_and_its_failure_is_an_error(tmp_path: Path) -> None:
    results = odd_results()
    spool = CaseSpool(tmp_path / ".cases.jsonl")
    store = SQLiteStore(tmp_path / "results.db", "run-1", "t")
    recorder = ProcessRecorder(spool, store)
    assert os.getpgid(recorder.process.pid) != os.getpgid(0)  # Ctrl-C in a terminal does not reach it
    recorder.add(results[3])
    recorder._send()
    deadline = time.monotonic() + 30
    while not spool.path.stat().st_size and time.monotonic() < deadline:  # it is running its loop
        time.sleep(0.01)
    os.kill(recorder.process.pid, signal.SIGINT)
    os.kill(recorder.process.pid, signal.SIGTERM)
    recorder.add(results[6])
    recorder._send()
    while spool.path.read_bytes().count(b"\n") < 2 and time.monotonic() < deadline:  # written after the signals
        time.sleep(0.01)
    os.kill(recorder.process.pid, signal.SIGKILL)  # the recorder dies: the run sees an error, not a pipe
    recorder.process.wait()
    with pytest.raises(OSError, match="case recorder process failed") as raised:
        for result in results:
            recorder.add(result)
            recorder._send()
    assert not isinstance(raised.value, BrokenPipeError)
    with pytest.raises(OSError):
        recorder.close()
    assert [json.loads(r)["id"] for r in spool.iter_records_in_order()] == ["odd-3", "odd-6"]  # both were written


def write_dataset(path: Path, n: int) -> None:
    with path.open("w") as handle:
        for i in range(n):
            handle.write(json.dumps({"id": f"c{i}", "input": f"question {i}", "output": f"answer {i}",
                                     "expected_keywords": ["answer"], "category": "kw"}) + "\n")


def test_a_crash_in_a_large_run_keeps_every_case_handed_to_the_recorder(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    write_dataset(tmp_path / "cases.jsonl", 6000)
    calls = {"n": 0}
    original = ProcessRecorder.add

    def flaky_add(self: ProcessRecorder, result: CaseResult) -> None:
        calls["n"] += 1
        if calls["n"] == 5200:
            raise OSError(28, "No space left on device")
        original(self, result)

    monkeypatch.setattr(ProcessRecorder, "add", flaky_add)
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
