"""The ``view`` row of ``python -m bench``: ``evalgate view`` over a large results database — how long each page
takes and how much memory the server holds.

The database is generated straight into evalgate's schema (``store.schema.migrate``, then one transaction of
multi-row inserts): ``runs`` runs × ``cases`` cases, each case a realistic record (~0.9 kB: input, expected
output, answer, two metrics with a judge's reasoning), 5 % failed at random per run and 2 % of the cases
flaky; every run's document carries metrics, thresholds, a branch (three branches) and a comparison block.

Measured: ``python -m evalgate view DB --no-open`` as a child process; **open** = from its start to the URL on
stdout; then each page is fetched ``repeats`` times over loopback and the median wall time reported (the
client's view: request to last byte); **peak RSS** = the server's ``VmHWM`` (/proc) after every page was
served. Targets (issue 34): every page < 2 s, peak RSS < 300 MB at 1,000,000 cases × 100 runs.

Stand-alone: ``python -m bench.view --runs 100 --cases 10000`` (the full size, ≈ 1 GB of database);
``python -m bench --scenarios view`` uses ``--view-runs``/``--view-cases`` (default the full size).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sqlite3
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

TARGET_PAGE_SECONDS = 2.0
TARGET_RSS_MB = 300.0
BRANCHES = ("main", "feature-a", "feature-b")
METRICS = ("relevancy", "rules")
REASONING = ("The answer names the account settings page and the rotation step, but it does not say that the old key "
             "stops working after one hour; the question asks for both, so the answer is mostly but not fully relevant.")


def _record(run: int, index: int, status: str, rng: random.Random) -> str:
    relevancy = round(rng.uniform(0.2, 0.6) if status == "failed" else rng.uniform(0.72, 1.0), 3)
    return json.dumps({
        "id": f"case-{index:06d}", "index": index, "suite": f"suite-{index % 7}", "category": f"cat-{index % 11}",
        "risk_level": "critical" if index % 97 == 0 else "medium", "tags": ["bench"], "description": None,
        "source": f"datasets/bench/cases.jsonl:{index + 1}", "status": status, "passed": status == "passed",
        "error": None, "reasons": [] if status == "passed" else [f"relevancy {relevancy} misses threshold ≥ 0.7"],
        "input": f"Question {index}: how do I rotate the API key of workspace {index % 500} without downtime?",
        "expected": {"expected_output": "Open Settings → API keys, create a new key, deploy it, then revoke the old one."},
        "output": f"Run {run}: open Settings, API keys, create a key, deploy it and revoke the old key (case {index}).",
        "answer": {}, "num_tokens": 180 + index % 50, "latency_ms": 800.0 + index % 300, "cost_usd": 0.0004,
        "repeat": 0, "conversation": None,
        "metrics": {
            "relevancy": {"value": relevancy, "threshold": {"min": 0.7}, "passed": status == "passed",
                          "status": status, "reason": None, "details": {"reasoning": REASONING, "method": "judge"}},
            "rules": {"value": 1.0, "threshold": {"min": 1.0}, "passed": True, "status": "passed", "reason": None,
                      "details": {"checks": [{"label": "no-secret", "type": "not_regex", "passed": True}]}},
        },
    }, ensure_ascii=False)


def _document(run_id: str, timestamp: str, branch: str, run: int, passed: int, total: int, base: str | None) -> str:
    rate = passed / total
    return json.dumps({
        "schema_version": 1, "run_id": run_id, "timestamp": timestamp, "status": "completed",
        "summary": {"pass_rate": rate, "weighted_pass_rate": rate, "total_test_cases": total, "total_passed": passed,
                    "total_failed": total - passed, "total_errored": 0, "total_skipped": 0, "critical_failures": 0,
                    "average_scores": {}, "tokens": {"total": total * 200}, "cost_usd": total * 0.0004,
                    "judged_unavailable": 0},
        "metrics": {"relevancy": {"average": 0.8 + 0.02 * ((run % 5) - 2), "threshold": {"min": 0.7}, "count": total,
                                  "failed": total - passed, "direction": "higher", "kind": "judged", "passed": True},
                    "rules": {"average": 1.0, "threshold": {"min": 1.0}, "count": total, "failed": 0,
                              "direction": "higher", "kind": "deterministic", "passed": True}},
        "gate": {"passed": rate >= 0.9, "exit_code": 0 if rate >= 0.9 else 1,
                 "reasons": [] if rate >= 0.9 else [f"pass rate {rate:.3f} below 0.9"]},
        "gate_policy": {"min_pass_rate": 0.9},
        "breakdowns": {}, "critical_failures": [], "thresholds": {}, "thresholds_passed": True,
        "metadata": {"git": {"branch": branch, "commit": f"{run:040x}"}, "finished": timestamp,
                     "versions": {"evalgate": "bench"}, "datasets": [], "config": {}},
        **({"comparison": {"baseline": {"run_id": base}, "cases": {"regressions": [], "fixes": []},
                           "summary": "bench"}} if base else {}),
    })


def build_database(path: Path, runs: int, cases: int, seed: int = 1) -> float:
    """Write the database (replacing ``path``); returns the seconds it took."""
    from evalgate.store.schema import migrate

    started = time.perf_counter()
    path.unlink(missing_ok=True)
    connection = sqlite3.connect(str(path), isolation_level=None)
    connection.execute("PRAGMA journal_mode=OFF")
    connection.execute("PRAGMA synchronous=OFF")
    migrate(connection, str(path))
    rng = random.Random(seed)
    flaky = set(rng.sample(range(cases), max(1, cases // 50)))
    connection.execute("BEGIN")
    base: str | None = None
    for run in range(runs):
        moment = time.gmtime(1_764_000_000 + run * 3600)
        timestamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", moment)
        run_id = time.strftime("%Y%m%dT%H%M%SZ", moment) + f"-{run:06x}"
        passed = 0
        rows: list[tuple[Any, ...]] = []
        for index in range(cases):
            fails = rng.random() < (0.5 if index in flaky else 0.05)
            status = "failed" if fails else "passed"
            passed += not fails
            rows.append((run_id, f"case-{index:06d}", 0, index, status, int(not fails), "medium",
                         f"datasets/bench/cases.jsonl:{index + 1}", _record(run, index, status, rng)))
            if len(rows) >= 2000:
                connection.executemany("INSERT INTO eg_cases VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
                rows = []
        connection.executemany("INSERT INTO eg_cases VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        branch = BRANCHES[run % len(BRANCHES)]
        connection.execute("INSERT INTO eg_runs VALUES (?, ?, ?, ?)",
                           (run_id, timestamp, "completed", _document(run_id, timestamp, branch, run, passed, cases, base)))
        base = run_id
    connection.execute("COMMIT")
    connection.close()
    return time.perf_counter() - started


def _fetch(url: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=600) as response:
        response.read()
        if response.status != 200:
            raise RuntimeError(f"{url}: HTTP {response.status}")
    return time.perf_counter() - started


def _peak_rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) / 1024  # type: ignore[union-attr]


def measure(db: Path, repeats: int = 3) -> dict[str, Any]:
    """Serve ``db`` and time every page (module docstring)."""
    connection = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    run_ids = [r[0] for r in connection.execute("SELECT run_id FROM eg_runs ORDER BY timestamp DESC")]
    failing = connection.execute("SELECT case_id FROM eg_cases WHERE run_id = ? AND status = 'failed' LIMIT 1",
                                 (run_ids[0],)).fetchone()[0]
    total = connection.execute("SELECT count(*) FROM eg_cases WHERE run_id = ?", (run_ids[0],)).fetchone()[0]
    connection.close()
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "evalgate", "view", str(db), "--no-open"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        opened = time.perf_counter() - started
        found = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
        if not found:
            raise RuntimeError(f"evalgate view did not start: {line!r} {process.stderr.read() if process.stderr else ''}")
        url = found.group(1)
        pages = {
            "runs": url,
            "run": url + "run?" + urlencode({"id": run_ids[0]}),
            "run, all cases, last page": url + "run?" + urlencode({"id": run_ids[0], "status": "all",
                                                                  "page": str(max(1, -(-total // 50)))}),
            "case": url + "case?" + urlencode({"run": run_ids[0], "id": failing}),
            "compare (two newest runs)": url + "compare?" + urlencode({"base": run_ids[1], "head": run_ids[0]}),
            "trends": url + "trends",
            "flaky (30 runs)": url + "flaky",
        }
        timings: dict[str, float] = {}
        for name, page in pages.items():
            timings[name] = round(statistics.median(_fetch(page) for _ in range(repeats)), 3)
        peak = round(_peak_rss_mb(process.pid), 1)
    finally:
        process.terminate()
        process.wait(timeout=60)
    slowest = max(timings.values())
    return {"open_s": round(opened, 3), "pages_s": timings, "slowest_page_s": slowest, "peak_rss_mb": peak,
            "targets": {"page_s": TARGET_PAGE_SECONDS, "rss_mb": TARGET_RSS_MB,
                        "met": slowest < TARGET_PAGE_SECONDS and opened < TARGET_PAGE_SECONDS and peak < TARGET_RSS_MB}}


def run_view(runs: int, cases: int, scratch: Path, repeats: int = 3, log: Any = print) -> dict[str, Any]:
    """Build (or reuse, when it has the same size) the database and measure it."""
    scratch.mkdir(parents=True, exist_ok=True)
    db = scratch / f"view-{runs}x{cases}.db"
    built = None
    if not db.is_file():
        log(f"view: writing {runs} runs × {cases:,} cases to {db}")
        built = round(build_database(db, runs, cases), 1)
        log(f"view: database written in {built} s ({db.stat().st_size / 2**20:,.0f} MiB)")
    result = measure(db, repeats)
    log(f"view: open {result['open_s']} s, slowest page {result['slowest_page_s']} s, peak RSS {result['peak_rss_mb']} MiB")
    return {"runs": runs, "cases_per_run": cases, "total_cases": runs * cases,
            "database_mb": round(db.stat().st_size / 2**20, 1), "build_s": built, **result}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.view", description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--cases", type=int, default=10_000, help="cases per run (default 10,000)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scratch", type=Path, default=Path(__file__).resolve().parent / "scratch")
    parser.add_argument("--output", type=Path, help="also write the result as JSON here")
    args = parser.parse_args(argv)
    result = run_view(args.runs, args.cases, args.scratch, args.repeats)
    text = json.dumps(result, indent=2)
    print(text)
    if args.output:
        args.output.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
