"""Issue #22, item 2: integrity under concurrency and kills, through the CLI in fresh processes.

Two runs on one output directory: the second stops at once with exit 2 naming the first (or waits
with ``--wait``), and the directory ends with one complete, valid results.json. A run killed with
SIGKILL: ``evalgate history`` reads its row as ``incomplete`` with the cases it stored, and the next run
in that directory removes what it left behind."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

from tests.hostile.helpers import write_cases
from tests.hostile.servers import Loopback, Out, Seen

REPO = Path(__file__).resolve().parents[2]
ENV = {**{k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "EVALGATE_", "INPUT_"))},
       "PYTHONPATH": str(REPO), "NO_COLOR": "1", "EVALGATE_JUDGE_SHARED_CACHE": "none"}
CASES = 40


def slowish(seen: Seen) -> Out:
    return Out({"response": f"answer to {seen.json()['message']}"}, delay=0.1)


def slower(seen: Seen) -> Out:
    """Long enough (≈ 6 s for the run) for a second process to start while the first one runs."""
    return Out({"response": f"answer to {seen.json()['message']}"}, delay=0.3)


def command(dataset: Path, out: Path, url: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "evalgate", "run", "--dataset", str(dataset), "--output-dir", str(out),
            "--progress", "none", "--target", "http", "--target-url", url + "/chat", "--concurrency", "2", *extra]


def dataset(tmp_path: Path) -> Path:
    return write_cases(tmp_path / "cases.json", [{"id": f"c{i:03d}", "input": f"q {i}", "expected_keywords": ["answer"]}
                                                 for i in range(CASES)])


def stored_cases(db: Path) -> int:
    try:
        with closing(sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)) as conn:
            return int(conn.execute("SELECT count(*) FROM eg_cases").fetchone()[0])
    except sqlite3.Error:
        return 0


def wait_for_cases(db: Path, process: subprocess.Popen[str], at_least: int) -> None:
    deadline = time.monotonic() + 60
    while stored_cases(db) < at_least and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    assert stored_cases(db) >= at_least


def valid_results(out: Path) -> dict:
    document = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert document["status"] == "completed"
    assert len(document["results"]) == document["summary"]["total_test_cases"] == CASES
    return document


def test_a_second_run_on_a_busy_output_directory_is_refused_naming_the_first(tmp_path: Path) -> None:
    data, out = dataset(tmp_path), tmp_path / "out"
    with Loopback(slower) as server:
        first = subprocess.Popen(command(data, out, server.url), env=ENV, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
        wait_for_cases(out / "results.db", first, 1)
        second = subprocess.run(command(data, out, server.url), env=ENV, capture_output=True, text=True, timeout=60)
        _, first_err = first.communicate(timeout=120)
    assert first.returncode == 0, first_err
    assert second.returncode == 2, second.stderr
    lines = [line for line in second.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "is in use by run " in lines[0] and "--wait" in lines[0], second.stderr
    first_run = valid_results(out)["run_id"]
    assert first_run in lines[0]
    assert not list(out.glob("*.tmp")) and not list(out.glob(".cases*"))


def test_with_wait_the_second_run_waits_and_both_finish(tmp_path: Path) -> None:
    data, out = dataset(tmp_path), tmp_path / "out"
    with Loopback(slower) as server:
        first = subprocess.Popen(command(data, out, server.url), env=ENV, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
        wait_for_cases(out / "results.db", first, 1)
        second = subprocess.Popen(command(data, out, server.url, "--wait"), env=ENV, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)
        _, first_err = first.communicate(timeout=120)
        _, second_err = second.communicate(timeout=120)
    assert (first.returncode, second.returncode) == (0, 0), first_err + second_err
    assert "waiting for run " in second_err
    document = valid_results(out)
    with closing(sqlite3.connect(out / "results.db")) as conn:
        rows = conn.execute("SELECT run_id, status FROM eg_runs ORDER BY timestamp").fetchall()
        per_run = dict(conn.execute("SELECT run_id, count(*) FROM eg_cases GROUP BY run_id").fetchall())
    assert [status for _, status in rows] == ["completed", "completed"]
    assert document["run_id"] == rows[-1][0] and set(per_run.values()) == {CASES}


def test_a_sigkilled_run_reads_incomplete_and_the_next_run_cleans_up(tmp_path: Path) -> None:
    data, out = dataset(tmp_path), tmp_path / "out"
    with Loopback(slowish) as server:
        victim = subprocess.Popen(command(data, out, server.url), env=ENV, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        wait_for_cases(out / "results.db", victim, 4)
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(timeout=30)
        stored = stored_cases(out / "results.db")
        assert list(out.glob(".cases.*.jsonl"))  # the killed run's spool is left behind
        history = subprocess.run([sys.executable, "-m", "evalgate", "history", "--db", str(out / "results.db"),
                                  "--format", "json"], env=ENV, capture_output=True, text=True, timeout=60)
        assert history.returncode == 0, history.stderr
        runs = json.loads(history.stdout)["runs"]
        assert [(r["status"], r["total"]) for r in runs] == [("incomplete", stored)]
        again = subprocess.run(command(data, out, server.url), env=ENV, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    valid_results(out)
    assert not list(out.glob(".cases*")) and not list(out.glob("*.tmp"))
    with closing(sqlite3.connect(out / "results.db")) as conn:  # the next writer recorded it too
        statuses = [row[0] for row in conn.execute("SELECT status FROM eg_runs ORDER BY timestamp")]
    assert statuses == ["incomplete", "completed"]


def test_a_signal_ends_the_wait_with_exit_130_and_nothing_written(tmp_path: Path) -> None:
    data, out = dataset(tmp_path), tmp_path / "out"
    with Loopback(slower) as server:
        first = subprocess.Popen(command(data, out, server.url), env=ENV, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        wait_for_cases(out / "results.db", first, 1)
        second = subprocess.Popen(command(data, out, server.url, "--wait"), env=ENV, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)
        assert second.stderr is not None
        line = second.stderr.readline()  # printed once it waits
        assert "waiting for run " in line, line
        second.send_signal(signal.SIGTERM)
        _, rest = second.communicate(timeout=30)
        first.wait(timeout=120)
    assert second.returncode == 130, rest
    with closing(sqlite3.connect(out / "results.db")) as conn:
        assert conn.execute("SELECT count(*) FROM eg_runs").fetchone()[0] == 1  # only the first run's
    valid_results(out)
