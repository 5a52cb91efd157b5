"""``python -m bench.otel``: the trace receiver's cost and memory (issue #27).

* **cost** — ``evalgate run --target http`` against ``bench.otel_agent`` (50 ms per answer, C = 8,
  ``--cases`` cases, default 1,000), once with ``traces: true`` (each case's call carries a traceparent
  and the agent exports 10 spans of it as OTLP/protobuf before answering) and once without (no
  traceparent; the agent sends the same spans to a null sink of its own, so its work is the same), alternated ``--repeats`` times (median). Reported: the wall-time overhead
  (on − off) / on, and the receiver's own time on the run's event loop (decoding and sorting spans plus
  summarising each case's: ``metadata.traces.seconds`` + ``summary_seconds``) as a share of the wall
  time. Target: ≤ 5 %.
* **memory** — peak RSS of the evalgate process at 1,000 and 10,000 cases (0 ms answers, C = 8, 10 spans
  per case), traces on and off: flat means the 10,000-case run's peak exceeds the 1,000-case run's by
  about as much with traces as without (spans are dropped once their case is scored).

Results: ``bench/results/otel.json``. About 2–3 minutes on a 2-core machine.

    python -m bench.otel [--cases 1000] [--repeats 3] [--memory-sizes 1000,10000]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.measure import run_measured

REPO = Path(__file__).resolve().parents[1]
OUTPUT = REPO / "bench" / "results" / "otel.json"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_agent(latency_ms: float, spans: int, otlp: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen([sys.executable, "-m", "bench.otel_agent", "--latency-ms", str(latency_ms),
                                "--spans", str(spans), "--otlp", otlp], cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    port = process.stdout.readline().strip()
    return process, f"http://127.0.0.1:{port}/chat"


def write_cases(path: Path, count: int) -> None:
    with path.open("w") as out:
        for i in range(count):
            out.write(json.dumps({"id": f"c{i:05d}", "input": f"question {i}",
                                  "trajectory": {"max_tool_calls": 100}}) + "\n")


def one_run(work: Path, name: str, cases: Path, url: str, traces_port: int | None, concurrency: int) -> dict[str, Any]:
    out = work / name
    argv = [sys.executable, "-m", "evalgate", "run", "-d", str(cases), "--target", "http", "--target-url", url,
            "--concurrency", str(concurrency), "--output-dir", str(out), "--progress", "none"]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    if traces_port is not None:
        env |= {"EVALGATE_TRACES": "true", "EVALGATE_TRACES_PORT": str(traces_port)}
    run = run_measured(argv, cwd=work, env=env, log_dir=work / "logs", name=name, timeout_s=900)
    document = json.loads((out / "results.json").read_text())
    traces = document["metadata"].get("traces") or {}
    statuses = {r["status"] for r in document["results"]}
    expected = {"passed"} if traces_port is not None else {"errored"}  # without traces: unavailable → errored
    if run.returncode not in (0, 1) or statuses != expected:
        raise SystemExit(f"{name}: exit {run.returncode}, statuses {statuses}: {run.stderr_tail()}")
    return {"wall_s": run.wall_s, "cpu_s": run.cpu_s, "peak_rss_mb": round(run.peak_rss_mb, 1),
            "receiver_s": traces.get("seconds"), "summary_s": traces.get("summary_seconds"), "spans": traces.get("spans"),
            "ignored_spans": traces.get("ignored_spans")}


def cost(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    cases = work / "cost.jsonl"
    write_cases(cases, args.cases)
    port = free_port()
    on_agent, on_url = start_agent(50, 10, f"http://127.0.0.1:{port}")
    off_agent, off_url = start_agent(50, 10, "self")
    runs: dict[str, list[dict[str, Any]]] = {"on": [], "off": []}
    try:
        for repeat in range(args.repeats):
            runs["on"].append(one_run(work, f"cost-on-{repeat}", cases, on_url, port, 8))
            runs["off"].append(one_run(work, f"cost-off-{repeat}", cases, off_url, None, 8))
            print(f"cost repeat {repeat + 1}: on {runs['on'][-1]['wall_s']:.2f}s, off {runs['off'][-1]['wall_s']:.2f}s",
                  file=sys.stderr)
    finally:
        for agent in (on_agent, off_agent):
            agent.terminate()
            agent.wait()
    on = statistics.median(r["wall_s"] for r in runs["on"])
    off = statistics.median(r["wall_s"] for r in runs["off"])
    receiver = statistics.median(r["receiver_s"] + r["summary_s"] for r in runs["on"])
    return {"cases": args.cases, "latency_ms": 50, "concurrency": 8, "spans_per_case": 10,
            "wall_on_s": round(on, 3), "wall_off_s": round(off, 3),
            "overhead_share": round((on - off) / on, 4), "receiver_share": round(receiver / on, 4),
            "target_share": 0.05, "passed": (on - off) / on <= 0.05 and receiver / on <= 0.05, "runs": runs}


def memory(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    sizes = [int(s) for s in args.memory_sizes.split(",")]
    port = free_port()
    on_agent, on_url = start_agent(0, 10, f"http://127.0.0.1:{port}")
    off_agent, off_url = start_agent(0, 10, "self")
    rows: dict[str, dict[str, Any]] = {}
    try:
        for size in sizes:
            cases = work / f"mem-{size}.jsonl"
            write_cases(cases, size)
            rows[f"on-{size}"] = one_run(work, f"mem-on-{size}", cases, on_url, port, 8)
            rows[f"off-{size}"] = one_run(work, f"mem-off-{size}", cases, off_url, None, 8)
            print(f"memory {size}: on {rows[f'on-{size}']['peak_rss_mb']} MB, off {rows[f'off-{size}']['peak_rss_mb']} MB",
                  file=sys.stderr)
    finally:
        for agent in (on_agent, off_agent):
            agent.terminate()
            agent.wait()
    small, large = sizes[0], sizes[-1]
    growth_on = rows[f"on-{large}"]["peak_rss_mb"] - rows[f"on-{small}"]["peak_rss_mb"]
    growth_off = rows[f"off-{large}"]["peak_rss_mb"] - rows[f"off-{small}"]["peak_rss_mb"]
    return {"sizes": sizes, "rows": rows, "growth_on_mb": round(growth_on, 1), "growth_off_mb": round(growth_off, 1),
            "extra_growth_from_traces_mb": round(growth_on - growth_off, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--memory-sizes", default="1000,10000")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args()
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="bench-otel-") as tmp:
        work = Path(tmp)
        result = {"cost": cost(work, args), "memory": memory(work, args),
                  "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
                  "seconds": round(time.time() - started, 1)}
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    c, m = result["cost"], result["memory"]
    print(f"cost: wall on {c['wall_on_s']}s / off {c['wall_off_s']}s → overhead {c['overhead_share']:.1%}, "
          f"receiver {c['receiver_share']:.2%} of wall (≤ 5 %: {'yes' if c['passed'] else 'NO'})")
    print(f"memory: peak RSS growth {m['sizes'][0]:,} → {m['sizes'][-1]:,} cases: traces on {m['growth_on_mb']} MB, "
          f"off {m['growth_off_mb']} MB")


if __name__ == "__main__":
    main()
