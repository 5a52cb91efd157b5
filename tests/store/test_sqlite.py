"""SQLite store (seed 001's tables, queries unchanged) and the streamed results.json writer."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from evalgate.model import CaseResult, CaseStatus, MetricResult, MetricStatus, Threshold
from evalgate.store.results_json import CaseSpool, write_results
from evalgate.store.sqlite import SQLiteStore

SEED_001_QUERIES = {
    "runs": """SELECT run_id, timestamp_utc, pass_rate,
       total_test_cases, total_passed, total_failed
FROM eval_runs
ORDER BY timestamp_utc DESC
LIMIT 10;""",
    "trends": """SELECT DATE(r.timestamp_utc) as date,
       er.metric_name,
       AVG(er.metric_value) as avg_value,
       COUNT(*) as test_count
FROM eval_results er
JOIN eval_runs r ON er.eval_run_id = r.run_id
WHERE r.timestamp_utc >= datetime('now', '-30 days')
GROUP BY DATE(r.timestamp_utc), er.metric_name
ORDER BY date DESC, metric_name;""",
    "failing": """SELECT test_description,
       COUNT(*) as failed_metrics,
       GROUP_CONCAT(metric_name || ':' || metric_value) as details
FROM eval_results
WHERE overall_passed = 0
GROUP BY test_description
ORDER BY failed_metrics DESC;""",
}


def case(case_id: str, index: int, passed: bool, value: float) -> CaseResult:
    status = MetricStatus.passed if passed else MetricStatus.failed
    return CaseResult(
        id=case_id, index=index, status=CaseStatus.passed if passed else CaseStatus.failed, passed=passed,
        description=f"about {case_id}",
        metrics={
            "mention_f1": MetricResult(value=value, threshold=Threshold(op="min", value=0.85), passed=passed,
                                       status=status),
            "judge_score": MetricResult(status=MetricStatus.skipped, reason="no judge configured"),
        },
    )


def summary_doc(status: str, total: int, passed: int) -> dict:
    return {"status": status, "summary": {"total_test_cases": total, "total_passed": passed,
                                          "total_failed": total - passed, "total_errored": 0,
                                          "pass_rate": passed / total}}


def test_seed_001_schema_and_queries_across_runs(tmp_path: Path) -> None:
    db_path = tmp_path / "results.db"
    now = "2026-11-22T10:00:00Z"
    for run in ("r1", "r2"):
        store = SQLiteStore(db_path, run, now.replace("10:00", f"10:0{run[-1]}"))
        store.add(case("a", 0, True, 0.9), "{}")
        store.add(case("b", 1, False, 0.5), "{}")
        store.finish(summary_doc("completed", 2, 1))
    conn = sqlite3.connect(db_path)
    ddl = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type IN ('table', 'index')").fetchall())
    assert "UNIQUE(eval_run_id, test_description, metric_name)" in ddl["eval_results"]
    for index in ("idx_eval_runs_timestamp", "idx_eval_runs_pass_rate", "idx_eval_results_run_id",
                  "idx_eval_results_metric_name", "idx_eval_results_passed", "idx_eval_results_timestamp"):
        assert index in ddl
    runs = conn.execute(SEED_001_QUERIES["runs"]).fetchall()
    assert [r[0] for r in runs] == ["r2", "r1"] and runs[0][2:] == (0.5, 2, 1, 1)
    failing = conn.execute(SEED_001_QUERIES["failing"]).fetchall()
    assert failing == [("about b", 4, "mention_f1:0.5,case_passed:0.0,mention_f1:0.5,case_passed:0.0")]
    # the trend query filters on datetime('now', '-30 days'): our timestamps are in the future of the
    # seed's clock only if the test machine's date is earlier, so assert on shape, not count
    trends = conn.execute(SEED_001_QUERIES["trends"]).fetchall()
    assert all(row[1] in {"mention_f1", "case_passed"} for row in trends)
    skipped = conn.execute("SELECT COUNT(*) FROM eval_results WHERE metric_name = 'judge_score'").fetchone()[0]
    assert skipped == 0  # metrics without a value are kept in eg_cases, not as fake numbers


def test_rows_are_visible_before_the_run_finishes(tmp_path: Path) -> None:
    db_path = tmp_path / "results.db"
    store = SQLiteStore(db_path, "r1", "2026-11-22T10:00:00Z")
    for index in range(600):  # crosses the commit batch size
        store.add(case(f"c{index}", index, True, 1.0), f'{{"id": "c{index}"}}')
    reader = sqlite3.connect(db_path)
    assert reader.execute("SELECT status FROM eg_runs").fetchone() == ("running",)
    assert reader.execute("SELECT COUNT(*) FROM eg_cases").fetchone()[0] >= 500


def test_results_json_streams_in_dataset_order(tmp_path: Path) -> None:
    spool = CaseSpool(tmp_path / ".cases.jsonl")
    for index in (2, 0, 1):
        spool.add(index, 0, json.dumps({"id": f"c{index}", "index": index}))
    spool.add(0, 1, json.dumps({"id": "c0", "index": 0, "repeat": 1}))
    write_results(tmp_path / "results.json", {"run_id": "r", "summary": {}}, spool)
    document = json.loads((tmp_path / "results.json").read_text())
    assert [r["id"] for r in document["results"]] == ["c0", "c0", "c1", "c2"]
    assert document["results"][1]["repeat"] == 1 and document["run_id"] == "r"
    assert not (tmp_path / "results.json.tmp").exists()


def test_results_json_is_the_same_whether_the_spool_is_copied_or_sorted(tmp_path: Path) -> None:
    records = [json.dumps({"id": f"c{i}", "text": "é, \\n and \" inside"}, ensure_ascii=False) for i in range(5)]
    outputs = []
    for name, order in (("copied", [0, 1, 2, 3, 4]), ("sorted", [3, 0, 4, 1, 2])):
        spool = CaseSpool(tmp_path / f"{name}.jsonl")
        for i in order:
            spool.add(i, 0, records[i])
        write_results(tmp_path / f"{name}.json", {"run_id": "r", "summary": {}}, spool)
        outputs.append((tmp_path / f"{name}.json").read_bytes())
    assert outputs[0] == outputs[1]
    assert [r["id"] for r in json.loads(outputs[0])["results"]] == [f"c{i}" for i in range(5)]
    spool = CaseSpool(tmp_path / "multiline.jsonl")  # a record spanning lines is never copied as lines
    spool.add(0, 0, '{"id": "a",\n "x": 1}')
    spool.add(1, 0, '{"id": "b"}')
    write_results(tmp_path / "multiline.json", {"run_id": "r", "summary": {}}, spool)
    assert [r["id"] for r in json.loads((tmp_path / "multiline.json").read_text())["results"]] == ["a", "b"]


def test_row_encoders_equal_json_dumps() -> None:
    import datetime as dt
    import math

    from evalgate.store.sqlite import case_passed_json, details_json

    for status, error in (("passed", None), ("errored", 'boom "é" \u2028\n'), ("failed", "")):
        assert case_passed_json(status, error) == json.dumps({"status": status, "error": error})
    for details in ({"a": [1, 2.5, None, True, "é"], "n": math.nan, "t": (1, 2)}, {3: "int key"},
                    {"when": dt.date(2024, 1, 2), "set": {1}}, {}):
        assert details_json(details) == json.dumps(details, default=str)


def test_multi_row_inserts_write_the_rows_executemany_writes(tmp_path: Path) -> None:
    from evalgate.store.sqlite import INSERT_RESULT, insert_rows, open_database

    rows = [("r", f"case {i // 3}", i % 2, f"m{i % 3}", i / 7, 1, None if i % 4 else "{}", "t") for i in range(257)]
    rows += [rows[5]]  # a repeat: INSERT OR REPLACE replaces it in both
    tables = []
    for name, write in (("many", lambda c: c.executemany(INSERT_RESULT, rows)),
                        ("multi", lambda c: insert_rows(c, INSERT_RESULT, rows))):
        connection = open_database(tmp_path / f"{name}.db")
        connection.execute("BEGIN")
        write(connection)
        connection.execute("COMMIT")
        tables.append((connection.execute("SELECT * FROM eval_results ORDER BY id").fetchall(),
                       connection.execute("SELECT * FROM sqlite_sequence").fetchall()))
    assert tables[0] == tables[1] and len(tables[0][0]) == 257
