"""The benchmark harness: ``python -m bench`` (see bench/README.md for the flags and what is measured).

Every measurement is a child process measured by ``bench.measure``; repeats are interleaved across the
tools (evalgate, promptfoo, DeepEval, evalgate, …) so slow drifts in machine load hit all tools alike,
and the median of the repeats is reported. Results go to ``bench/results/latest.json`` and a table to
stdout; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import math
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import cases as content
from bench import report
from bench.incremental import INCREMENTAL_HEADERS, IncrementalSpec, incremental_rows, incremental_tools, run_incremental
from bench.limits import LIMITS_HEADERS, LimitsSpec, limits_rows, run_limits
from bench.measure import run_measured
from bench.peers.install import PeerUnavailable, ensure_deepeval, ensure_promptfoo
from bench.servers import Endpoints, loopback_endpoints
from bench.tools import (
    DeepEval,
    Evalgate,
    Floor,
    Invocation,
    Promptfoo,
    Scenario,
    Tool,
    evalgate_command,
    exit_problem,
    read_results_head,
)

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
SCRATCH = BENCH_DIR / "scratch"
RESULTS = BENCH_DIR / "results" / "latest.json"
DEFAULT_GRID: tuple[tuple[float, int], ...] = ((50.0, 8), (50.0, 64), (2.0, 64))
DEFAULT_CASES = 1000
SCALE_SIZES = (10_000, 30_000, 100_000)
QUICK_SCALE_SIZES = (2_000, 5_000, 10_000)
ALL_SCENARIOS = ("judged", "rules", "limits", "incremental", "batch", "scale", "startup", "clients", "view")
PEER_SCENARIOS = ("judged", "rules", "limits", "incremental")
"""Scenarios the peers take part in (the others measure evalgate alone)."""
DEFAULT_TIME_SCALE = 4.0
LIMITS_CONCURRENCY = 16
CLIENT_CALLS = 2000
CLIENT_CONCURRENCY = 64
ALL_TOOLS = ("evalgate", "promptfoo", "deepeval", "floor")
CONTROLS = ("evalgate", "floor")
"""Not peers: evalgate itself and the floor control."""
RUN_TIMEOUT_S = 1200.0
TARGET_EFFICIENCY = 0.9
TARGET_SPEEDUP = 2.0
TARGET_SCALE_SECONDS = 20.0
TARGET_SCALE_RSS_MB = 300.0
TARGET_FLAT_RSS = 1.15
"""Memory is "flat" when peak RSS at the largest size ≤ 1.15 × peak RSS at the smallest."""
TARGET_LINEAR_RESIDUAL = 0.10
"""Wall time grows linearly when every size is within 10 % of the least-squares line a + b·n."""
TARGET_VERSION_SECONDS = 0.3

Log = Callable[[str], None]


def log_stderr(message: str) -> None:
    print(f"[bench {dt.datetime.now():%H:%M:%S}] {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Options:
    cases: int
    repeats: int
    grid: tuple[tuple[float, int], ...]
    jitter_fraction: float
    scenarios: tuple[str, ...]
    tools: tuple[str, ...]
    scale_sizes: tuple[int, ...]
    install: bool
    quick: bool
    scratch: Path
    results: Path
    time_scale: float = DEFAULT_TIME_SCALE
    view_size: tuple[int, int] = (100, 10_000)
    """``view`` scenario: runs × cases per run (default the issue's 1,000,000 cases × 100 runs)."""


# --- HTTP scenarios ----------------------------------------------------------------------------------------


def build_tools(names: Sequence[str], scratch: Path, install: bool, log: Log) -> tuple[list[Tool], dict[str, str]]:
    """The tools that can run, and for each one that cannot, the reason."""
    tools: list[Tool] = []
    missing: dict[str, str] = {}
    for name in names:
        try:
            if name == "evalgate":
                tools.append(Evalgate())
            elif name == "floor":
                tools.append(Floor())
            elif not install:
                missing[name] = "peer installs skipped (--no-install)"
            elif name == "promptfoo":
                log("preparing promptfoo in bench/scratch/promptfoo (npm)")
                tools.append(Promptfoo(ensure_promptfoo(scratch)))
            elif name == "deepeval":
                log("preparing DeepEval in bench/scratch/deepeval-venv (pip)")
                tools.append(DeepEval(ensure_deepeval(scratch)))
        except PeerUnavailable as exc:
            missing[name] = str(exc)
            log(f"{name} unavailable: {exc}")
    return tools, missing


def call_problems(counts: dict[str, dict[str, int]], scenario: Scenario) -> list[str]:
    """Differences between the calls counted at the servers and the calls the scenario requires, and any
    server that saw more than C calls at once (every tool is held to the same concurrency)."""
    problems = []
    for server, expected in (("agent", scenario.expected_agent_calls), ("judge", scenario.expected_judge_calls)):
        seen = counts[server]
        if seen["ok"] != expected:
            problems.append(f"{server} served {seen['ok']} calls, expected {expected}")
        if seen["failed"]:
            problems.append(f"{server} answered {seen['failed']} calls with an error")
        if seen.get("peak_in_flight", 0) > scenario.concurrency:
            problems.append(f"{server} had {seen['peak_in_flight']} calls in flight at once, more than C = "
                            f"{scenario.concurrency}")
    return problems


def measure_once(invocation: Invocation, scenario: Scenario, endpoints: Endpoints, log_dir: Path, tag: str,
                 timeout_s: float = RUN_TIMEOUT_S) -> dict[str, Any]:
    """One measured run of one tool: fresh outputs, zeroed server counters, then the checks."""
    invocation.reset()
    endpoints.reset()
    run = run_measured(invocation.argv, cwd=invocation.cwd, env=invocation.env, log_dir=log_dir, name=tag,
                       timeout_s=timeout_s)
    counts = endpoints.counts()
    check = invocation.check(run)
    return {"wall_s": round(run.wall_s, 4), "cpu_s": round(run.cpu_s, 4), "peak_rss_mb": round(run.peak_rss_mb, 1),
            "returncode": run.returncode, "calls": counts, "scored": check.scored,
            "problems": [*check.problems, *call_problems(counts, scenario)]}


def run_scenario(scenario: Scenario, tools: Sequence[Tool], missing: dict[str, str], endpoints: Endpoints,
                 workroot: Path, repeats: int, log: Log) -> dict[str, Any]:
    """Every tool on one scenario, repeats interleaved; medians and derived figures per tool."""
    runnable = [tool for tool in tools if scenario.kind in tool.kinds]
    invocations = {tool.name: tool.prepare(scenario, endpoints, _workdir(workroot, scenario, tool.name))
                   for tool in runnable}
    runs: dict[str, list[dict[str, Any]]] = {tool.name: [] for tool in runnable}
    for repeat in range(repeats):
        for tool in runnable:
            tag = f"{scenario.slug}-{tool.name}-r{repeat}"
            result = measure_once(invocations[tool.name], scenario, endpoints, workroot / "logs", tag)
            runs[tool.name].append(result)
            log(f"{scenario.name} {tool.name} #{repeat + 1}: {result['wall_s']:.2f}s "
                f"{result['peak_rss_mb']:.0f}MB {'; '.join(result['problems']) or 'ok'}")
    return summarise_scenario(scenario, runs, missing, tools)


def _workdir(root: Path, scenario: Scenario, tool: str) -> Path:
    path = root / scenario.slug / tool
    path.mkdir(parents=True, exist_ok=True)
    return path


def summarise_scenario(scenario: Scenario, runs: dict[str, list[dict[str, Any]]], missing: dict[str, str],
                       tools: Sequence[Tool]) -> dict[str, Any]:
    summaries = {name: report.summarise_runs(r) for name, r in runs.items()}
    evalgate_wall = summaries.get("evalgate", {}).get("wall_s")
    results: dict[str, Any] = {}
    for name, summary in summaries.items():
        results[name] = report.derive(summary, cases=scenario.cases, calls=scenario.calls,
                                      latency_ms=scenario.latency_ms, concurrency=scenario.concurrency,
                                      evalgate_wall_s=evalgate_wall) | {"runs": runs[name]}
    for name, reason in missing.items():
        results[name] = {"unavailable": reason}
    for tool in tools:
        if scenario.kind not in tool.kinds:
            results[tool.name] = {"unavailable": f"{tool.name} has no {scenario.kind} equivalent (not applicable)"}
    return {"name": scenario.name, "kind": scenario.kind, "latency_ms": scenario.latency_ms,
            "jitter_ms": scenario.jitter_ms, "concurrency": scenario.concurrency, "cases": scenario.cases,
            "calls": scenario.calls, "ideal_s": report.ideal_seconds(scenario.calls, scenario.latency_ms,
                                                                    scenario.concurrency),
            "tools": results}


def run_http(options: Options, tools: Sequence[Tool], missing: dict[str, str], log: Log) -> list[dict[str, Any]]:
    """Every (latency, C) of the grid × every requested HTTP scenario kind; servers restart per latency."""
    kinds = [k for k in ("judged", "rules") if k in options.scenarios]
    workroot = options.scratch / "runs"
    results = []
    for latency, concurrency in options.grid if kinds else ():
        jitter = latency * options.jitter_fraction
        with loopback_endpoints(workroot / "servers", content.agent_script(options.cases), latency_ms=latency,
                                jitter_ms=jitter) as endpoints:
            for kind in kinds:
                scenario = Scenario(kind, latency, jitter, concurrency, options.cases)  # type: ignore[arg-type]
                load = os.getloadavg()[0]
                outcome = run_scenario(scenario, tools, missing, endpoints, workroot, options.repeats, log)
                results.append(outcome | {"load_before": round(load, 2), "load_after": round(os.getloadavg()[0], 2)})
    return results


# --- scale and start-up ---------------------------------------------------------------------------------------


def run_scale(sizes: Sequence[int], repeats: int, workroot: Path, log: Log) -> dict[str, Any]:
    """``evalgate run`` on N deterministic recorded cases for each N; medians, fit and growth."""
    datasets = {n: workroot / f"deterministic-{n}.jsonl" for n in sizes}
    for n, path in datasets.items():
        content.write_jsonl(path, content.cases(content.deterministic_case, n))
    runs: dict[int, list[dict[str, Any]]] = {n: [] for n in sizes}
    for repeat in range(repeats):
        for n in sizes:
            out = workroot / f"out-{n}"
            shutil.rmtree(out, ignore_errors=True)
            argv = [*evalgate_command(), "run", "-d", str(datasets[n]), "--output-dir", str(out), "--progress", "none"]
            run = run_measured(argv, cwd=workroot, env=dict(os.environ), log_dir=workroot / "logs",
                               name=f"scale-{n}-r{repeat}", timeout_s=RUN_TIMEOUT_S)
            problems = [*exit_problem(run, {0, 1}), *scale_problems(out / "results.json", n)]
            runs[n].append({"wall_s": round(run.wall_s, 3), "cpu_s": round(run.cpu_s, 3),
                            "peak_rss_mb": round(run.peak_rss_mb, 1), "returncode": run.returncode,
                            "problems": problems})
            log(f"scale {n}: {run.wall_s:.2f}s cpu {run.cpu_s:.2f}s {run.peak_rss_mb:.0f}MB {'; '.join(problems) or 'ok'}")
    return summarise_scale(runs)


def scale_problems(results: Path, expected: int) -> list[str]:
    """results.json must hold every case, none errored."""
    try:
        summary = read_results_head(results)["summary"]
    except (OSError, ValueError, KeyError) as exc:
        return [f"no results.json ({type(exc).__name__})"]
    if summary["total_test_cases"] != expected or summary["total_errored"]:
        return [f"{summary['total_test_cases']} cases ({summary['total_errored']} errored), expected {expected}"]
    return []


def summarise_scale(runs: dict[int, list[dict[str, Any]]]) -> dict[str, Any]:
    sizes = {n: report.summarise_runs(r) | {"runs": r} for n, r in runs.items()}
    for n, summary in sizes.items():
        wall = summary["wall_s"]
        summary["us_per_case"] = None if wall is None else wall / n * 1e6
    points = [(float(n), s["wall_s"]) for n, s in sizes.items() if s["wall_s"] is not None]
    result: dict[str, Any] = {"sizes": {str(n): s for n, s in sizes.items()}}
    if len(points) >= 2:
        fit = report.linear_fit(points)
        smallest, largest = min(sizes), max(sizes)
        rss_small, rss_large = sizes[smallest]["peak_rss_mb"], sizes[largest]["peak_rss_mb"]
        result |= {
            "fit_intercept_s": fit[0], "fit_us_per_case": fit[1] * 1e6,
            "max_relative_residual": report.max_relative_residual(points, fit),
            "rss_growth": None if not rss_small or rss_large is None else rss_large / rss_small,
            "wall_growth": None if not sizes[smallest]["wall_s"] or sizes[largest]["wall_s"] is None
            else sizes[largest]["wall_s"] / sizes[smallest]["wall_s"],
            "size_growth": largest / smallest,
            "marginal_us_per_case": marginal_costs(points),
        }
    return result


def marginal_costs(points: Sequence[tuple[float, float]]) -> dict[str, float]:
    """µs per extra case between consecutive sizes: (wall₂ − wall₁) / (n₂ − n₁) · 10⁶. Equal values mean
    linear growth; rising values mean super-linear."""
    ordered = sorted(points)
    return {f"{int(a)}-{int(b)}": (wb - wa) / (b - a) * 1e6 for (a, wa), (b, wb) in itertools.pairwise(ordered)}


def run_startup(repeats: int, workroot: Path, log: Log) -> dict[str, Any]:
    """``evalgate --version`` and ``evalgate validate`` (the bundled demo suites), plus the interpreter floor,
    then ``evalgate run`` on one judged case against 0 ms servers: the fixed cost every run pays (start-up,
    imports, opening the pools, writing the results) on top of its calls."""
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "evalgate --version": [*evalgate_command(), "--version"],
        "evalgate validate": [*evalgate_command(), "validate"],
    }
    results: dict[str, Any] = {}
    count = max(repeats, 5)
    for label, argv in commands.items():
        runs = []
        for repeat in range(count):
            run = run_measured(argv, cwd=REPO_ROOT, env=dict(os.environ), log_dir=workroot / "logs",
                               name=f"startup-{label.split()[-1].strip('-')}-r{repeat}", timeout_s=120)
            problem = [] if run.returncode == 0 else [f"exit {run.returncode}: {run.stderr_tail(200).strip()[-160:]}"]
            runs.append({"wall_s": round(run.wall_s, 4), "cpu_s": round(run.cpu_s, 4),
                         "peak_rss_mb": round(run.peak_rss_mb, 1), "problems": problem})
        results[label] = report.summarise_runs(runs) | {"argv": argv[-1:] if label.startswith("python") else argv[1:],
                                                        "runs": runs}
        log(f"startup {label}: median {results[label]['wall_s']} s {'; '.join(results[label]['problems']) or ''}")
    results[FIXED_COST_LABEL] = run_fixed_cost(count, workroot, log)
    return results


FIXED_COST_LABEL = "evalgate run, 1 judged case, 0 ms servers"


def run_clients(repeats: int, log: Log) -> dict[str, Any]:
    """CPU per call of each HTTP client (``bench.clients``), each in a fresh interpreter against a 0 ms
    judge server, ``CLIENT_CALLS`` calls at ``CLIENT_CONCURRENCY``; medians of the repeats, and each
    client's CPU per call relative to evalgate's default judge client."""
    from bench.clients import KINDS
    from tests.servers._http import SubprocessServer

    results: dict[str, Any] = {}
    with SubprocessServer("tests.servers.openai_server", []) as server:
        for kind in KINDS:
            samples, problems = [], []
            for _ in range(repeats):
                done = subprocess.run([sys.executable, "-m", "bench.clients", kind, server.base_url,
                                       str(CLIENT_CALLS), str(CLIENT_CONCURRENCY)],
                                      cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
                if done.returncode != 0:
                    problems.append(f"exit {done.returncode}: {done.stderr.strip()[-160:]}")
                    continue
                samples.append(json.loads(done.stdout.strip().splitlines()[-1]))
            results[kind] = {"cpu_ms_per_call": report.median([s["cpu_ms_per_call"] for s in samples]),
                             "wall_s": report.median([s["wall_s"] for s in samples]), "problems": problems}
            log(f"clients {kind}: {results[kind]['cpu_ms_per_call']} ms CPU per call")
    reference = results.get("evalgate-direct", {}).get("cpu_ms_per_call")
    for entry in results.values():
        value = entry["cpu_ms_per_call"]
        entry["ratio_to_evalgate_direct"] = None if not reference or value is None else value / reference
    return {"calls": CLIENT_CALLS, "concurrency": CLIENT_CONCURRENCY, "clients": results}


def run_fixed_cost(count: int, workroot: Path, log: Log) -> dict[str, Any]:
    """Median wall time of a judged run of one case (two calls) against servers that answer at once."""
    scenario = Scenario("judged", 0.0, 0.0, 8, 1)
    with loopback_endpoints(workroot / "servers", content.agent_script(1), latency_ms=0.0, jitter_ms=0.0) as endpoints:
        invocation = Evalgate().prepare(scenario, endpoints, _workdir(workroot, scenario, "evalgate"))
        runs = [measure_once(invocation, scenario, endpoints, workroot / "logs", f"fixed-cost-r{repeat}", timeout_s=120)
                for repeat in range(count)]
    summary = report.summarise_runs(runs) | {"argv": invocation.argv[1:], "runs": runs}
    log(f"startup {FIXED_COST_LABEL}: median {summary['wall_s']} s {'; '.join(summary['problems']) or ''}")
    return summary


def efficiency_ceiling(scenario: Mapping[str, Any], fixed_s: float | None) -> float | None:
    """The best efficiency a tool with fixed cost ``fixed_s`` can reach: ideal / (⌈calls / C⌉ · latency +
    fixed), since at most C calls are in flight and each lasts ``latency`` (jitter ignored)."""
    if fixed_s is None:
        return None
    rounds = math.ceil(scenario["calls"] / scenario["concurrency"])
    return scenario["ideal_s"] / (rounds * scenario["latency_ms"] / 1000 + fixed_s)


# --- targets, output -------------------------------------------------------------------------------------------


def evaluate_targets(http: Sequence[dict[str, Any]], scale: dict[str, Any] | None,
                     startup: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Each target of issue #6 with the measured number and whether it is met (None: not measured)."""
    targets: list[dict[str, Any]] = []
    fixed = (startup or {}).get(FIXED_COST_LABEL, {}).get("wall_s")
    for scenario in http:
        if scenario["kind"] != "judged":
            continue
        mine = scenario["tools"].get("evalgate", {})
        if scenario["latency_ms"] == 50:
            value = mine.get("efficiency")
            targets.append({"target": f"efficiency ≥ {TARGET_EFFICIENCY} at 50 ms, C={scenario['concurrency']}",
                            "measured": value, "met": None if value is None else value >= TARGET_EFFICIENCY,
                            "floor_efficiency": scenario["tools"].get("floor", {}).get("efficiency"),
                            "evalgate_fixed_cost_s": fixed, "evalgate_ceiling": efficiency_ceiling(scenario, fixed)})
        if scenario["latency_ms"] == 2 and scenario["concurrency"] == 64:
            peers = [r.get("cases_per_s") for n, r in scenario["tools"].items() if n not in CONTROLS]
            best = max((p for p in peers if p), default=None)
            value = mine.get("cases_per_s")
            speedup = None if not best or value is None else value / best
            targets.append({"target": f"≥ {TARGET_SPEEDUP}× the cases/s of the faster peer at 2 ms, C=64",
                            "measured": speedup, "evalgate_cases_per_s": value, "fastest_peer_cases_per_s": best,
                            "met": None if speedup is None else speedup >= TARGET_SPEEDUP})
    if scale and scale.get("sizes"):
        largest = max(scale["sizes"], key=int)
        top = scale["sizes"][largest]
        targets.append({"target": f"{int(largest):,} deterministic cases in < {TARGET_SCALE_SECONDS:g} s",
                        "measured": top["wall_s"],
                        "met": None if top["wall_s"] is None or int(largest) < 100_000
                        else top["wall_s"] < TARGET_SCALE_SECONDS})
        targets.append({"target": f"peak RSS < {TARGET_SCALE_RSS_MB:g} MB at {int(largest):,} cases",
                        "measured": top["peak_rss_mb"],
                        "met": None if top["peak_rss_mb"] is None else top["peak_rss_mb"] < TARGET_SCALE_RSS_MB})
        growth = scale.get("rss_growth")
        targets.append({"target": f"memory flat from smallest to largest size (RSS growth ≤ {TARGET_FLAT_RSS}×)",
                        "measured": growth, "met": None if growth is None else growth <= TARGET_FLAT_RSS})
        residual = scale.get("max_relative_residual")
        targets.append({"target": f"wall time linear in cases (residual ≤ {TARGET_LINEAR_RESIDUAL:.0%})",
                        "measured": residual, "met": None if residual is None else residual <= TARGET_LINEAR_RESIDUAL})
    if startup and "evalgate --version" in startup:
        value = startup["evalgate --version"]["wall_s"]
        targets.append({"target": f"evalgate --version < {TARGET_VERSION_SECONDS} s", "measured": value,
                        "met": None if value is None else value < TARGET_VERSION_SECONDS})
    return targets


def environment_facts(tools_versions: dict[str, str]) -> dict[str, Any]:
    def git_head() -> str | None:
        try:
            return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                                  text=True, check=False).stdout.strip() or None
        except OSError:
            return None

    return {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
            "git_head": git_head(), "load_average": [round(x, 2) for x in os.getloadavg()],
            "tools": tools_versions}


def view_targets(view: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Issue 34: every page of ``evalgate view`` < 2 s and the server < 300 MB at the measured size."""
    if not view:
        return []
    size = f"{view['total_cases']:,} cases × {view['runs']} runs"
    slowest = max(view["slowest_page_s"], view["open_s"])
    return [{"target": f"evalgate view: slowest page < 2 s ({size})", "measured": slowest, "met": slowest < 2.0},
            {"target": f"evalgate view: peak RSS < 300 MB ({size})", "measured": view["peak_rss_mb"],
             "met": view["peak_rss_mb"] < 300.0}]


def render(document: dict[str, Any]) -> str:
    """The stdout summary: HTTP scenarios, scale, start-up and targets."""
    parts = []
    if document["http"]:
        parts += ["HTTP scenarios (median of repeats; ratio = peer wall / evalgate wall)",
                  report.render_table(report.HTTP_HEADERS, report.http_rows(document["http"])), ""]
    limits = document.get("limits")
    if limits:
        parts += [f"Rate limits ({limits['description']}); minimum = the limit-implied time, "
                  "60 s × max(calls / rpm, tokens / tpm), counted at the servers",
                  report.render_table(LIMITS_HEADERS, limits_rows(limits)), ""]
    incremental = document.get("incremental")
    if incremental:
        spec = incremental["spec"]
        parts += [f"Incremental ({spec['cases']:,} judged cases, {spec['changed_cases']:,} answers changed on the PR; "
                  "cost = tokens counted at the judge × gpt-4o-mini's price)",
                  report.render_table(INCREMENTAL_HEADERS, incremental_rows(incremental)), ""]
    batch = document.get("batch")
    if batch:
        rows = [[mode, r["wall_s"], r["judge_requests_direct"], r["judge_requests_batched"], r["cost_usd"],
                 r["evalgate_reported_usd"]] for mode, r in batch["runs"].items()]
        parts += [f"Batch (the base run, {batch['cases']:,} judged cases; verdicts identical: "
                  f"{batch['verdicts_identical']})",
                  report.render_table(("judge_mode", "wall s", "direct requests", "batched requests", "cost $",
                                       "evalgate's own $"), rows), ""]
    scale = document.get("scale")
    if scale and scale.get("sizes"):
        rows = [[int(n), s["wall_s"], s["cpu_s"], s["peak_rss_mb"], s["us_per_case"], "; ".join(s["problems"])]
                for n, s in scale["sizes"].items()]
        parts += ["Deterministic scale (evalgate run, recorded answers)",
                  report.render_table(("cases", "wall s", "cpu s", "peak MB", "µs/case", "notes"), rows), ""]
    startup = document.get("startup")
    if startup:
        rows = [[label, s["wall_s"], s["cpu_s"], s["peak_rss_mb"], "; ".join(s["problems"])[:60]]
                for label, s in startup.items()]
        parts += ["Start-up", report.render_table(("command", "wall s", "cpu s", "peak MB", "notes"), rows), ""]
    clients = document.get("clients")
    if clients:
        rows = [[kind, c["cpu_ms_per_call"], c["ratio_to_evalgate_direct"], c["wall_s"], "; ".join(c["problems"])[:60]]
                for kind, c in clients["clients"].items()]
        parts += [f"HTTP clients ({clients['calls']} chat calls at C={clients['concurrency']}, 0 ms server)",
                  report.render_table(("client", "CPU ms/call", "× evalgate-direct", "wall s", "notes"), rows), ""]
    view = document.get("view")
    if view:
        rows = [[page, seconds] for page, seconds in {"open (start to URL)": view["open_s"], **view["pages_s"]}.items()]
        parts += [f"evalgate view ({view['total_cases']:,} cases × {view['runs']} runs, {view['database_mb']:,} MiB "
                  f"database; median of repeats; server peak RSS {view['peak_rss_mb']} MiB)",
                  report.render_table(("page", "wall s"), rows), ""]
    if document["targets"]:
        rows = [[t["target"], t["measured"], {True: "met", False: "NOT met", None: "not measured"}[t["met"]],
                 _bounds(t)] for t in document["targets"]]
        parts += ["Targets (issues #6 and #16)", report.render_table(("target", "measured", "status", "bounds"), rows)]
    return "\n".join(parts)


def _bounds(target: Mapping[str, Any]) -> str:
    """What bounds an efficiency target: the floor control's efficiency and evalgate's ceiling."""
    parts = []
    if target.get("floor_efficiency") is not None:
        parts.append(f"floor {target['floor_efficiency']:.3f}")
    if target.get("evalgate_ceiling") is not None:
        parts.append(f"ceiling {target['evalgate_ceiling']:.3f} (fixed cost {target['evalgate_fixed_cost_s']:.2f} s)")
    return ", ".join(parts)


def write_results(path: Path, document: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(document, indent=1, default=str) + "\n", encoding="utf-8")
    temporary.replace(path)


def byte_compile_evalgate(log: Log) -> None:
    """Write evalgate's bytecode, as ``pip install`` and the Dockerfile do: an editable checkout run with
    ``PYTHONDONTWRITEBYTECODE=1`` (this sandbox sets it) would otherwise recompile every edited module on
    every measured start (≈ 0.25 s per run on this machine)."""
    import compileall

    import evalgate

    package = Path(evalgate.__file__).resolve().parent
    if not compileall.compile_dir(str(package), quiet=1):
        log("warning: some evalgate modules did not byte-compile")


def run(options: Options, log: Log = log_stderr) -> dict[str, Any]:
    started = dt.datetime.now(dt.UTC)
    byte_compile_evalgate(log)
    wants_peers = any(kind in options.scenarios for kind in PEER_SCENARIOS)
    tools, missing = build_tools(options.tools, options.scratch, options.install, log) if wants_peers else ([], {})
    http = run_http(options, tools, missing, log)
    limits = incremental = None
    if "limits" in options.scenarios:
        spec = LimitsSpec(cases=options.cases, concurrency=LIMITS_CONCURRENCY, time_scale=options.time_scale)
        limits = run_limits(tools, {k: v for k, v in missing.items() if k != "floor"}, spec,
                            content.agent_script(options.cases), options.scratch / "runs", options.repeats, log,
                            RUN_TIMEOUT_S)
    if "incremental" in options.scenarios:
        incremental = run_incremental(incremental_tools(tools), {k: v for k, v in missing.items() if k != "floor"},
                                      IncrementalSpec(cases=options.cases), options.scratch / "runs", options.repeats,
                                      log)
    batch = None
    if "batch" in options.scenarios:
        from bench.batch import run_batch_scenario

        (options.scratch / "batch").mkdir(parents=True, exist_ok=True)
        batch = run_batch_scenario(options.cases, options.scratch / "batch")
        log(f"batch: base run ${batch['runs']['direct']['cost_usd']:.4f} direct, ${batch['runs']['batch']['cost_usd']:.4f} "
            f"batched; verdicts {'identical' if batch['verdicts_identical'] else 'DIFFERENT'}")
    scale = (run_scale(options.scale_sizes, options.repeats, options.scratch / "scale", log)
             if "scale" in options.scenarios else None)
    startup = run_startup(options.repeats, options.scratch / "startup", log) if "startup" in options.scenarios else None
    clients = run_clients(options.repeats, log) if "clients" in options.scenarios else None
    view = None
    if "view" in options.scenarios:
        from bench.view import run_view

        runs, cases = options.view_size
        view = run_view(runs, cases, options.scratch / "view", options.repeats, log)
    return {
        "schema": 1,
        "started": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "finished": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "options": {"cases": options.cases, "repeats": options.repeats, "grid": options.grid,
                    "time_scale": options.time_scale,
                    "jitter_fraction": options.jitter_fraction, "scenarios": options.scenarios,
                    "tools": options.tools, "scale_sizes": options.scale_sizes, "quick": options.quick},
        "environment": environment_facts({tool.name: tool.version for tool in tools} | {
            name: f"not run: {reason}" for name, reason in missing.items()}),
        "http": http, "limits": limits, "incremental": incremental, "batch": batch, "scale": scale, "startup": startup,
        "clients": clients, "view": view,
        "targets": evaluate_targets(http, scale, startup) + (limits or {}).get("targets", [])
        + (incremental or {}).get("targets", []) + view_targets(view),
    }


# --- command line ------------------------------------------------------------------------------------------------


def parse_grid(text: str) -> tuple[tuple[float, int], ...]:
    """``"50x8,50x64,2x64"`` → ((50.0, 8), (50.0, 64), (2.0, 64)): latency ms × concurrency."""
    grid = []
    for item in text.split(","):
        latency, _, concurrency = item.strip().partition("x")
        try:
            grid.append((float(latency), int(concurrency)))
        except ValueError:
            raise argparse.ArgumentTypeError(f"grid entry {item!r} must look like LATENCYxC, e.g. 50x8") from None
    return tuple(grid)


def _names(allowed: Sequence[str]) -> Callable[[str], tuple[str, ...]]:
    def parse(text: str) -> tuple[str, ...]:
        names = tuple(n.strip() for n in text.split(",") if n.strip())
        unknown = [n for n in names if n not in allowed]
        if unknown:
            raise argparse.ArgumentTypeError(f"unknown {unknown}; choose from {', '.join(allowed)}")
        return names

    return parse


def parse_args(argv: Sequence[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: 100 cases, scale sizes 2k/5k/10k")
    parser.add_argument("--cases", type=int, help=f"cases per HTTP scenario (default {DEFAULT_CASES})")
    parser.add_argument("--repeats", type=int, default=3, help="repeats per measurement, median reported (≥ 3)")
    parser.add_argument("--scenarios", type=_names(ALL_SCENARIOS), default=ALL_SCENARIOS,
                        help=f"comma-separated subset of {','.join(ALL_SCENARIOS)}")
    parser.add_argument("--tools", type=_names(ALL_TOOLS), default=ALL_TOOLS,
                        help=f"comma-separated subset of {','.join(ALL_TOOLS)}")
    parser.add_argument("--grid", type=parse_grid, default=DEFAULT_GRID, help="latency ms × C pairs (50x8,50x64,2x64)")
    parser.add_argument("--jitter", type=float, default=0.1, help="jitter as a fraction of the latency (default 0.1)")
    parser.add_argument("--scale-sizes", type=lambda t: tuple(int(x) for x in t.split(",")), default=None)
    parser.add_argument("--no-install", action="store_true", help="do not install peers (they are reported as not run)")
    parser.add_argument("--time-scale", type=float, default=DEFAULT_TIME_SCALE,
                        help="limits scenario: limits × K and latency ÷ K, the run compressed K-fold (default 4)")
    parser.add_argument("--view-size", type=lambda t: tuple(int(x) for x in t.lower().split("x")), default=None,
                        metavar="RUNSxCASES", help="view scenario: runs × cases per run (default 100x10000; --quick 10x2000)")
    parser.add_argument("--output", type=Path, default=RESULTS, help="results file (default bench/results/latest.json)")
    args = parser.parse_args(argv)
    if args.repeats < 3:
        parser.error("--repeats must be at least 3 (the median of three or more runs is reported)")
    cases = args.cases or (100 if args.quick else DEFAULT_CASES)
    if cases < 1:
        parser.error("--cases must be at least 1")
    sizes = args.scale_sizes or (QUICK_SCALE_SIZES if args.quick else SCALE_SIZES)
    if args.time_scale <= 0:
        parser.error("--time-scale must be positive")
    return Options(cases=cases, repeats=args.repeats, grid=args.grid, jitter_fraction=args.jitter,
                   scenarios=args.scenarios, tools=args.tools, scale_sizes=sizes, install=not args.no_install,
                   quick=args.quick, scratch=SCRATCH, results=args.output, time_scale=args.time_scale,
                   view_size=args.view_size or ((10, 2000) if args.quick else (100, 10_000)))


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_args(argv)
    document = run(options)
    write_results(options.results, document)
    print(render(document))
    print(f"\nwritten: {options.results}")
    return 0
