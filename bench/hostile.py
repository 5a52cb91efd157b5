"""``python -m bench.hostile``: the figures of issue #12 (hostile answers, datasets and signals), measured.

* **mentions**: the built-in mention detector (``metrics.mentions.detect_brands``) on answers with 8k, 16k,
  32k and 64k mentions of five brands (a fifth inside longer names); median of ``--repeats`` runs.
* **redaction**: ``redact`` (secrets, their derived forms and 8+ character fragments) and ``redact_exact`` on
  a 2.4 KB results record and on 1 MB of text, with ten 40-character keys registered (µs / ms per call).
* **structures**: ``evalgate validate`` in a fresh process on YAML nested 50,000 levels, an alias bomb and
  JSON nested 100,000 levels: exit status, wall and CPU seconds, peak RSS.
* **big answer**: ``evalgate run`` (http target, C = 8, 2 s per attempt, no retries) on 40 ordinary cases and
  one whose answer is 10 MB: wall time, errored cases other than the big one, attempt timeouts.
* **judge reply cap**: a judge that streams its reply without end: the run's exit status, wall time, peak
  RSS, and the reason its verdicts carry (``judge_max_reply_bytes``, 1 MiB by default).
* **sparse dataset**: ``evalgate validate`` on a 2 GB sparse JSONL file (a good case, then one line of NUL
  bytes): exit status, message, peak RSS (bounded by the 64 MiB per-record cap, not the file's size).
* **memory** (``--memory``): peak RSS (``VmHWM``) of a recorded run of ``--memory-cases`` cases (default
  1,000,000), of ``evalgate report`` on its results.json (Markdown and HTML) and of the Action's whole step
  (run, job summary, outputs, annotations) on the same dataset, each in a fresh process; then
  ``bench.streaming`` at the same size: merge, ``--compat``, the Langfuse export, publish mode, compare.
* **signals** (``--signals``): SIGTERM at a random moment of a recorded run of ``--signal-cases`` cases,
  ``--trials`` times (trial i in the i-th of ``--trials`` equal slices of an uninterrupted run's wall time,
  so every phase is hit: start-up, reading and checking the datasets, running, writing): seconds from the
  signal to the process's exit, exit status, results status, and whether results.json and SQLite hold
  the same finished cases.

    python -m bench.hostile                                   # all but signals, ~1 min
    python -m bench.hostile --signals --signal-cases 100000 --trials 20
    python -m bench.hostile --memory --memory-cases 1000000              # + ~35 min
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sqlite3
import statistics
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import streaming
from bench.cases import recorded_dataset
from bench.peak import REPO, measured_process

DEFAULT_OUTPUT = REPO / "bench" / "results" / "hostile.json"


def mentions(repeats: int) -> dict[str, Any]:
    from evalgate.metrics.mentions import BrandBook, detect_brands
    from evalgate.model import Case

    terms = ["HubSpot", "HubSpot CRM", "Salesforce", "Zoho", "HubSpot.com"]
    case = Case(id="m", input="q", brands_mine=terms[:2] + terms[4:], brands_competitors=terms[2:4])
    book = BrandBook.from_case(case)
    out: dict[str, Any] = {}
    for count in (8_000, 16_000, 32_000, 64_000):
        text = " and ".join(terms[i % len(terms)] for i in range(count))
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            found = detect_brands(text, book)
            times.append(time.perf_counter() - started)
        assert sum(found.occurrences.values()) == count
        out[str(count)] = {"seconds": round(statistics.median(times), 4), "chars": len(text)}
    return out


def redaction(repeats: int) -> dict[str, Any]:
    from evalgate.safety import redact as module

    rng = random.Random(12)
    alphabet = string.ascii_letters + string.digits
    saved = set(module._registered)
    try:
        for _ in range(10):
            module.register_secret("".join(rng.choice(alphabet) for _ in range(40)))
        record = json.dumps({"id": "case-1", "input": "What is the refund policy for damaged items? " * 8,
                             "output": "You can return any product within 30 days of delivery. " * 20,
                             "metrics": {f"m{i}": {"value": 0.5, "status": "passed", "reason": None} for i in range(8)}})
        text = ("An ordinary answer about products, prices and policies. " * 20_000)[:1_000_000]
        out: dict[str, Any] = {"record_chars": len(record)}
        for name, fn in (("redact", module.redact), ("redact_exact", module.redact_exact)):
            calls = 2_000
            started = time.perf_counter()
            for _ in range(calls):
                fn(record)
            out[f"{name}_record_us"] = round((time.perf_counter() - started) / calls * 1e6, 2)
            times = []
            for _ in range(repeats):
                started = time.perf_counter()
                fn(text)
                times.append(time.perf_counter() - started)
            out[f"{name}_1mb_ms"] = round(statistics.median(times) * 1000, 2)
        return out
    finally:
        module._registered.clear()
        module._registered.update(saved)


def structures(work: Path) -> dict[str, Any]:
    from tests.hostile.test_datasets import alias_bomb, nested_json, nested_yaml

    files = {"yaml_nested_50000.yaml": nested_yaml(50_000), "alias_bomb.yaml": alias_bomb(),
             "json_nested_100000.json": nested_json(100_000)}
    out = {}
    for name, content in files.items():
        (work / name).write_text(content)
        out[name] = measured_process(["validate", "--dataset", name], work)
    return out


def big_answer(work: Path) -> dict[str, Any]:
    from tests.hostile import test_big_answers as scenario
    from tests.hostile.helpers import write_cases
    from tests.hostile.servers import Loopback

    dataset = write_cases(work / "big" / "cases.json", scenario.cases())
    with Loopback(scenario.agent) as server:
        measured = measured_process(["run", "--dataset", str(dataset), "--target", "http", "--target-url",
                               server.url + "/chat", "--concurrency", "8", "--api-timeout-seconds", "2",
                               "--api-retries", "0", "--output-dir", str(work / "big" / "out"), "--progress", "none"],
                              work)
    results = json.loads((work / "big" / "out" / "results.json").read_text())
    records = {r["id"]: r for r in results["results"]}
    huge = records.pop("huge")
    return {**measured, "huge_status": huge["status"], "huge_truncated": huge["answer"].get("truncated"),
            "other_cases": len(records), "other_errored": sum(r["status"] == "errored" for r in records.values()),
            "timeouts": results["metadata"]["calls"]["timeouts"],
            "results_json_bytes": (work / "big" / "out" / "results.json").stat().st_size,
            "results_db_bytes": (work / "big" / "out" / "results.db").stat().st_size}


def signal_command(dataset: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "evalgate", "run", "--dataset", str(dataset), "--output-dir", str(out),
            "--progress", "none"]


def signal_trial(dataset: Path, out: Path, delay: float) -> dict[str, Any]:
    """``evalgate run`` in a fresh process, SIGTERM ``delay`` seconds after its start: seconds from the
    signal to the exit, exit status, the last line of stderr and what it left (``check_partial``);
    ``finished_first`` when the process had already exited (no signal was sent)."""
    process = subprocess.Popen(signal_command(dataset, out), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               env={**os.environ, "PYTHONPATH": str(REPO)})
    time.sleep(delay)
    finished_first = process.poll() is not None
    sent = time.monotonic()
    if not finished_first:
        process.send_signal(signal.SIGTERM)
    try:
        _, err = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        _, err = process.communicate()
    lines = err.decode(errors="replace").strip().splitlines()
    return {"out": out.name, "signal_at_s": round(delay, 3), "exit_after_s": round(time.monotonic() - sent, 3),
            "exit": process.returncode, "finished_first": finished_first, "stderr": lines[-1][:300] if lines else "",
            **check_partial(out)}


def signals(work: Path, cases: int, trials: int, seed: int) -> dict[str, Any]:
    """SIGTERM at stratified random moments of a recorded run of ``cases`` cases: trial i at a random
    moment of the i-th of ``trials`` equal slices of an uninterrupted run's wall time (measured once), so
    every phase gets hit. A trial whose process had already finished (a warm run is quicker than the
    measured one) is tried again 15 % earlier, up to five times: every trial counted got its signal."""
    dataset = recorded_dataset(work / "signal-cases.jsonl", cases)
    full = measured_process(signal_command(dataset, work / "full")[3:], work)
    rng = random.Random(seed)
    runs = []
    for trial in range(trials):
        delay = (trial + rng.random()) * full["wall_s"] / trials
        for _ in range(6):
            outcome = signal_trial(dataset, work / f"sig{trial}", delay)
            if not outcome["finished_first"]:
                break
            shutil.rmtree(work / f"sig{trial}", ignore_errors=True)
            delay *= 0.85
        runs.append(outcome)
    cancelled = [r for r in runs if r["exit"] == 130 and r["exit_after_s"] <= 1.0 and r["consistent"]]
    return {"cases": cases, "uninterrupted": full, "trials": runs,
            "signalled": sum(not r["finished_first"] for r in runs),
            "exit_130_within_1s_and_consistent": len(cancelled),
            "with_partial_results": sum(r["status"] == "cancelled" for r in runs),
            "nothing_written": sum(r["status"] is None for r in runs),
            "complete_when_signalled": sum(r["status"] == "completed" for r in runs),
            "max_exit_after_s": max(r["exit_after_s"] for r in runs)}


def check_partial(out: Path) -> dict[str, Any]:
    """What a signalled run left: results.json's status and case count, and whether SQLite agrees."""
    results_path, db_path = out / "results.json", out / "results.db"
    if not results_path.is_file():
        return {"status": None, "cases": 0, "consistent": not db_path.exists()}
    document = json.loads(results_path.read_text())
    ids = {(r["id"], r["repeat"]) for r in document["results"]}
    connection = sqlite3.connect(db_path)
    try:
        stored = {(row[0], row[1]) for row in connection.execute(
            "SELECT case_id, repeat FROM eg_cases WHERE run_id = ?", (document["run_id"],))}
        status = connection.execute("SELECT status FROM eg_runs WHERE run_id = ?", (document["run_id"],)).fetchone()
    finally:
        connection.close()
    return {"status": document["status"], "cases": len(ids),
            "consistent": stored == ids and status is not None and status[0] == document["status"]}


ACTION_PEAK_REPORTING = ("import os, sys\nfrom evalgate.cli.action import run_action\ncode = run_action(os.environ)\n"
                         "peak = [line for line in open('/proc/self/status') if line.startswith('VmHWM')]\n"
                         "sys.stderr.write(peak[0] if peak else 'VmHWM: 0 kB\\n')\nsys.exit(code)")
"""The Action's step (``run_action``: run, then publish) reporting its own peak RSS."""


def memory(work: Path, cases: int) -> dict[str, Any]:
    """Peak RSS of a recorded run of ``cases`` cases, of ``evalgate report`` (Markdown and HTML) on its
    results.json, and of the Action's whole step (run + job summary + outputs + annotations) on the same
    dataset, each in a fresh process."""
    folder = work / "memory"
    workspace = folder / "ws"
    (workspace / "evals").mkdir(parents=True)
    dataset = recorded_dataset(workspace / "evals" / "cases.jsonl", cases)
    out = folder / "out"
    figures: dict[str, Any] = {"cases": cases, "dataset_bytes": dataset.stat().st_size}
    figures["run"] = measured_process(["run", "--dataset", str(dataset), "-o", str(out), "--progress", "none"], folder)
    figures["results_json_bytes"] = (out / "results.json").stat().st_size
    for fmt in ("markdown", "html"):
        figures[f"report_{fmt}"] = measured_process(["report", str(out / "results.json"), "--format", fmt, "-o",
                                                     str(folder / f"report.{fmt}")], folder)
    shutil.rmtree(out)
    commands = folder / "file_commands"
    commands.mkdir()
    for name in ("output", "summary"):
        (commands / name).write_text("")
    env = {**os.environ, "PYTHONPATH": str(REPO), "GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(workspace),
           "GITHUB_EVENT_NAME": "push", "GITHUB_REPOSITORY": "o/r", "GITHUB_OUTPUT": str(commands / "output"),
           "GITHUB_STEP_SUMMARY": str(commands / "summary"), "INPUT_DATASET": "evals", "INPUT_COMMENT": "never",
           "INPUT_UPLOAD-ARTIFACTS": "false", "INPUT_BASELINE": "none", "INPUT_PROGRESS": "none"}
    started = time.monotonic()
    process = subprocess.Popen([sys.executable, "-c", ACTION_PEAK_REPORTING], cwd=workspace, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert process.stderr is not None
    err = process.stderr.read().decode()
    _, status, usage = os.wait4(process.pid, 0)
    figures["action"] = {"exit": os.waitstatus_to_exitcode(status), "wall_s": round(time.monotonic() - started, 3),
                         "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
                         "peak_rss_mb": round(int(err.rpartition("VmHWM:")[2].split()[0]) / 1024, 1),
                         "summary_bytes": (commands / "summary").stat().st_size}
    return figures


def sparse_dataset(work: Path, size: int = 2 << 30) -> dict[str, Any]:
    """``evalgate validate`` on a sparse JSONL file of ``size`` bytes (one line of NUL bytes after a good
    case): exit status, the message, peak RSS — bounded by the per-record cap, not the file's size."""
    folder = work / "sparse"
    folder.mkdir()
    path = folder / "cases.jsonl"
    with path.open("wb") as handle:
        handle.write(json.dumps({"id": "ok", "input": "q", "output": "a", "expected_keywords": ["a"]}).encode() + b"\n")
        handle.truncate(size)
    figures = measured_process(["validate", "--dataset", str(path)], folder)
    path.unlink()
    return {"bytes": size, **figures}


def judge_reply_cap(work: Path) -> dict[str, Any]:
    """A judge streaming its reply without end: the run's peak RSS and the reason its verdicts carry."""
    from tests.hostile.test_judge_reply_cap import run_with

    folder = work / "reply-cap"
    folder.mkdir()
    started = time.monotonic()
    code, peak_mb, document = run_with(folder)
    reasons = {str(m.get("reason")) for r in document["results"] for m in r["metrics"].values() if m.get("reason")}
    return {"exit": code, "wall_s": round(time.monotonic() - started, 3), "peak_rss_mb": round(peak_mb, 1),
            "reasons": sorted(reasons)[:2]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hostile", description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--signals", action="store_true", help="also the SIGTERM trials")
    parser.add_argument("--signal-cases", type=int, default=100_000)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--memory", action="store_true", help="also the peak-memory figures at --memory-cases")
    parser.add_argument("--memory-cases", type=int, default=1_000_000)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    figures: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                               "load_average": os.getloadavg(), "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="evalgate-hostile-") as name:
        work = Path(name)
        figures["mentions"] = mentions(args.repeats)
        figures["redaction"] = redaction(args.repeats)
        figures["structures"] = structures(work)
        figures["big_answer"] = big_answer(work)
        figures["judge_reply_cap"] = judge_reply_cap(work)
        figures["sparse_dataset"] = sparse_dataset(work)
        if args.memory:
            figures["memory"] = memory(work, args.memory_cases)
            (work / "streaming").mkdir()
            figures["streaming"] = streaming.measure(work / "streaming", args.memory_cases, 200, 4, set())
        if args.signals:
            figures["signals"] = signals(work, args.signal_cases, args.trials, args.seed)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
