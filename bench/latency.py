"""``python -m bench.latency``: is ``latency_ms`` the target's time? evalgate's recorded latency against the
agent's own handling time, per case.

The agent (``tests.servers.agent_server``) and the judge (``tests.servers.openai_server``) run as their own
processes; the agent logs, per request, the time from having read the whole request to handing the whole
response to its socket (``GET /_requests`` → ``handled_ms``). ``evalgate run`` runs as it does in CI (a
fresh process, ``--target http``, the judge on, ``--concurrency C``), and each case's ``latency_ms`` in
results.json is paired with the agent's figure for the same question. Reported: medians and 95th
percentiles of the server-side time, the recorded time and their difference (recorded − server), and
the first and last cases' differences (start-up effects). Repeats are run and each figure is the median
over them.

``--src DIR`` measures the evalgate package found in ``DIR`` instead of this checkout (e.g. an exported
older commit, for a before/after comparison); the servers always come from this checkout.

    python -m bench.latency                       # 300 cases, C = 8, judge on, 3 repeats
    python -m bench.latency --no-judge --cases 200
    python -m bench.latency --src /tmp/old-evalgate --output bench/results/latency-before.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.servers._http import SubprocessServer

REPO = Path(__file__).resolve().parents[1]
AGENT_PATH = "/api/agent/chat"
DEFAULT_OUTPUT = REPO / "bench" / "results" / "latency.json"


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile by the nearest-rank rule on the sorted values."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def write_cases(path: Path, count: int, judged: bool) -> None:
    extra = {"passing_criteria": "The answer responds to the question.", "metrics": ["relevancy"]} if judged else {"expected_keywords": ["Answer"]}
    path.write_text(json.dumps([{"id": f"lat-{i:05d}", "input": f"Latency question {i}: how do I reset it?", **extra}
                                for i in range(count)]))


def run_once(args: argparse.Namespace, work: Path, agent: SubprocessServer, judge: SubprocessServer) -> dict[str, Any]:
    """One evalgate run; the per-case pairs summarised."""
    agent.reset()
    judge.reset()
    cases = work / "cases.json"
    write_cases(cases, args.cases, judged=not args.no_judge)
    out = work / "out"
    command = [sys.executable, "-m", "evalgate", "run", "-d", str(cases), "--target", "http", "--target-url",
               agent.base_url + AGENT_PATH, "--concurrency", str(args.concurrency), "--output-dir", str(out),
               "--progress", "none", "--format", "json"]
    if not args.no_judge:
        command += ["--judge-provider", "local", "--judge-base-url", judge.base_url + "/v1", "--no-cache"]
    env = dict(os.environ, LOCAL_JUDGE_API_KEY="sk-bench", PYTHONPATH=os.pathsep.join(
        [str(args.src)] if args.src else [str(REPO)]))
    done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise SystemExit(f"evalgate exited {done.returncode}: {done.stderr[-2000:]}")
    served = {json.loads(r["body"])["message"]: r["handled_ms"] for r in agent.requests() if r["path"] == AGENT_PATH}
    results = json.loads((out / "results.json").read_text())["results"]
    pairs = [(r["latency_ms"], served[r["input"]]) for r in sorted(results, key=lambda r: r["index"])
             if r["latency_ms"] is not None and served.get(r["input"]) is not None]
    diffs = [recorded - server for recorded, server in pairs]
    first = diffs[: args.concurrency]
    return {
        "cases": len(pairs),
        "server_ms": {"median": statistics.median(s for _, s in pairs), "p95": quantile([s for _, s in pairs], 0.95)},
        "recorded_ms": {"median": statistics.median(r for r, _ in pairs), "p95": quantile([r for r, _ in pairs], 0.95),
                        "max": max(r for r, _ in pairs)},
        "difference_ms": {"median": statistics.median(diffs), "p95": quantile(diffs, 0.95), "max": max(diffs),
                          "min": min(diffs), "first_cases_median": statistics.median(first),
                          "last_cases_median": statistics.median(diffs[-args.concurrency:])},
    }


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over the runs."""
    summary: dict[str, Any] = {"cases": runs[0]["cases"]}
    for group in ("server_ms", "recorded_ms", "difference_ms"):
        summary[group] = {key: round(statistics.median(run[group][key] for run in runs), 2) for key in runs[0][group]}
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.latency", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--agent-latency-ms", type=float, default=5.0)
    parser.add_argument("--agent-jitter-ms", type=float, default=3.0)
    parser.add_argument("--judge-latency-ms", type=float, default=20.0)
    parser.add_argument("--no-judge", action="store_true")
    parser.add_argument("--src", type=Path, help="directory holding the evalgate package to measure")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    agent_args = ["--latency-ms", str(args.agent_latency_ms), "--jitter-ms", str(args.agent_jitter_ms), "--seed", "7",
                  "--record-limit", str(max(1000, args.cases))]
    judge_args = ["--latency-ms", str(args.judge_latency_ms), "--jitter-ms", str(args.judge_latency_ms / 4),
                  "--seed", "3"]
    runs = []
    with SubprocessServer("tests.servers.agent_server", agent_args) as agent, \
            SubprocessServer("tests.servers.openai_server", judge_args) as judge, \
            tempfile.TemporaryDirectory(prefix="evalgate-latency-") as scratch:
        for index in range(args.repeats):
            runs.append(run_once(args, Path(scratch), agent, judge))
            print(f"run {index + 1}/{args.repeats}: {json.dumps(runs[-1])}", file=sys.stderr)
    document = {"settings": {key: (str(value) if isinstance(value, Path) else value) for key, value in vars(args).items()},
                "load_average": os.getloadavg(), "median_of_runs": median_of(runs), "runs": runs}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(document, indent=2) + "\n")
    summary = document["median_of_runs"]
    print(f"{summary['cases']} cases, C={args.concurrency}, judge {'off' if args.no_judge else 'on'} "
          f"(medians of {args.repeats} runs)")
    for group in ("server_ms", "recorded_ms", "difference_ms"):
        print(f"  {group:14s} " + "  ".join(f"{key} {value:.2f}" for key, value in summary[group].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
