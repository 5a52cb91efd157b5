"""Scenario ``limits``: the judged scenario against servers that enforce rate limits, as hosted providers do.

* judge (``tests.servers.openai_server``): 600 requests/min and 150,000 tokens/min; agent
  (``tests.servers.agent_server``): 1,200 requests/min; both answer in 300–800 ms (uniform, seeded),
  send OpenAI's ``x-ratelimit-*`` headers on every reply and answer 429 with ``Retry-After`` /
  ``retry-after-ms`` when a bucket is short (``tests.servers.limits``: the judge reserves the prompt's
  tokens plus ``max_tokens`` on arrival and settles to the reply's usage);
* the buckets start **empty** (and are emptied before every measured run), so the budget binds from the
  first call and the limit-implied minimum below is a true lower bound of the run's time (with full
  buckets the first minute's budget could be spent in one burst);
* **time scale** k (default 4): every limit × k and the latency ÷ k (2,400 requests/min, 600,000 tokens/min,
  75–200 ms): the same run compressed k-fold in time, so it fits the bench's budget; the output says so;
* every tool does the judged scenario's work (``bench.tools``) at the same concurrency C (default 16),
  which is more than the limits allow at this latency, so a tool that ignores them meets 429s.

Per run: wall time, the limit-implied minimum = 60 s × max(agent calls / agent rpm, judge calls /
judge rpm, judge tokens / judge tpm) with the calls and tokens the servers counted (2xx replies), the
ratio wall / minimum, the 429s both servers sent and the cases the tool could not score (errored).
Targets for evalgate: ratio ≤ 1.05, 429s ≤ 1 % of its calls, no errored case; the peers are measured.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench import report
from bench.measure import run_measured
from bench.servers import Endpoints, write_scripts
from bench.tools import Scenario, Tool
from tests.servers._http import SubprocessServer

Log = Callable[[str], None]
TARGET_RATIO = 1.05
TARGET_429_SHARE = 0.01


@dataclass(frozen=True)
class LimitsSpec:
    """The scenario's real-world figures and the time scale they are run at."""

    cases: int = 1000
    concurrency: int = 16
    time_scale: float = 4.0
    judge_rpm: float = 600.0
    judge_tpm: float = 150_000.0
    agent_rpm: float = 1200.0
    latency_low_ms: float = 300.0
    latency_high_ms: float = 800.0
    seed: int = 11

    @property
    def scaled(self) -> dict[str, float]:
        """What the servers enforce: limits × k, latency ÷ k (midpoint ± half-width, in ms)."""
        k = self.time_scale
        return {"judge_rpm": self.judge_rpm * k, "judge_tpm": self.judge_tpm * k, "agent_rpm": self.agent_rpm * k,
                "latency_ms": (self.latency_low_ms + self.latency_high_ms) / 2 / k,
                "jitter_ms": (self.latency_high_ms - self.latency_low_ms) / 2 / k}

    def describe(self) -> str:
        s = self.scaled
        text = (f"judge {self.judge_rpm:,.0f} req/min + {self.judge_tpm:,.0f} tokens/min, agent {self.agent_rpm:,.0f} "
                f"req/min, latency {self.latency_low_ms:g}–{self.latency_high_ms:g} ms, C={self.concurrency}, "
                f"{self.cases:,} cases, buckets empty at start")
        if self.time_scale != 1:
            text += (f"; time-scaled ×{self.time_scale:g} (a minute lasts {60 / self.time_scale:g} s): limits "
                     f"{s['judge_rpm']:,.0f} req/min + {s['judge_tpm']:,.0f} tokens/min and {s['agent_rpm']:,.0f} "
                     f"req/min, latency {s['latency_ms'] - s['jitter_ms']:g}–{s['latency_ms'] + s['jitter_ms']:g} ms")
        return text


@contextmanager
def limited_endpoints(script_dir: Path, agent_script: Mapping[str, Any], spec: LimitsSpec) -> Iterator[Endpoints]:
    """Both servers with the scaled limits (buckets empty at start and after every reset) and latency."""
    agent_path, judge_path = write_scripts(script_dir, agent_script)
    s = spec.scaled
    timing = ["--latency-ms", f"{s['latency_ms']:g}", "--jitter-ms", f"{s['jitter_ms']:g}", "--seed", str(spec.seed),
              "--limits-start", "empty"]
    with ExitStack() as stack:
        agent = stack.enter_context(SubprocessServer("tests.servers.agent_server", [
            *timing, "--script", str(agent_path), "--rpm", f"{s['agent_rpm']:g}"]))
        judge = stack.enter_context(SubprocessServer("tests.servers.openai_server", [
            *timing, "--script", str(judge_path), "--rpm", f"{s['judge_rpm']:g}", "--tpm", f"{s['judge_tpm']:g}"]))
        yield Endpoints(agent=agent, judge=judge, latency_ms=s["latency_ms"], jitter_ms=s["jitter_ms"])


def server_counts(stats: Mapping[str, Any]) -> dict[str, int]:
    """``/_stats`` of a limited server → 2xx replies, 429s, other failures and the tokens it counted."""
    ok = limited = other = 0
    for statuses in stats.get("paths", {}).values():
        for status, count in statuses.items():
            if str(status).startswith("2"):
                ok += int(count)
            elif str(status) == "429":
                limited += int(count)
            else:
                other += int(count)
    limits = stats.get("limits") or {}
    usage = stats.get("usage") or {}
    return {"ok": ok, "rate_limited_429": limited, "other_failures": other, "tokens": int(limits.get("tokens", 0)),
            "prompt_tokens": int(usage.get("prompt_tokens", 0)), "completion_tokens": int(usage.get("completion_tokens", 0)),
            "peak_in_flight": int(stats.get("peak_in_flight", 0))}


PRICE_INPUT, PRICE_OUTPUT = 0.15, 0.60
"""USD per 1M tokens (gpt-4o-mini's list price), applied to the tokens the judge counted for every tool."""


def judge_spend(judge: Mapping[str, int]) -> dict[str, float]:
    """Prompt and completion tokens per verdict (the judge's 2xx replies) and the run's judge cost in USD."""
    verdicts = max(1, judge["ok"])
    return {"prompt_tokens_per_verdict": round(judge.get("prompt_tokens", 0) / verdicts, 1),
            "completion_tokens_per_verdict": round(judge.get("completion_tokens", 0) / verdicts, 1),
            "cost_usd": round((judge.get("prompt_tokens", 0) * PRICE_INPUT
                               + judge.get("completion_tokens", 0) * PRICE_OUTPUT) / 1e6, 6)}


def minimum_seconds(agent: Mapping[str, int], judge: Mapping[str, int], spec: LimitsSpec) -> float:
    """60 s × max(agent calls / agent rpm, judge calls / judge rpm, judge tokens / judge tpm), scaled limits."""
    s = spec.scaled
    return 60.0 * max(agent["ok"] / s["agent_rpm"], judge["ok"] / s["judge_rpm"], judge["tokens"] / s["judge_tpm"])


def measure_limited(tool: Tool, spec: LimitsSpec, endpoints: Endpoints, workdir: Path, logs: Path, tag: str,
                    timeout_s: float) -> dict[str, Any]:
    """One measured run of ``tool``: emptied buckets and zeroed counters, then wall, minimum and 429s."""
    scenario = Scenario("judged", endpoints.latency_ms, endpoints.jitter_ms, spec.concurrency, spec.cases)
    invocation = tool.prepare(scenario, endpoints, workdir)
    invocation.reset()
    endpoints.reset()
    run = run_measured(invocation.argv, cwd=invocation.cwd, env=invocation.env, log_dir=logs, name=tag,
                       timeout_s=timeout_s)
    agent, judge = server_counts(endpoints.agent.stats()), server_counts(endpoints.judge.stats())
    check = invocation.check(run)
    minimum = minimum_seconds(agent, judge, spec)
    calls = agent["ok"] + judge["ok"]
    limited = agent["rate_limited_429"] + judge["rate_limited_429"]
    return {"wall_s": round(run.wall_s, 3), "cpu_s": round(run.cpu_s, 3), "peak_rss_mb": round(run.peak_rss_mb, 1),
            "returncode": run.returncode, "minimum_s": round(minimum, 3),
            "ratio": round(run.wall_s / minimum, 4) if minimum else None, "calls": calls,
            "rate_limited_429": limited, "share_429": round(limited / max(1, calls + limited), 5),
            "errored_cases": spec.cases - check.scored, "scored": check.scored, "agent": agent, "judge": judge,
            **judge_spend(judge), "problems": check.problems}


def run_limits(tools: Sequence[Tool], missing: Mapping[str, str], spec: LimitsSpec, agent_script: Mapping[str, Any],
               workroot: Path, repeats: int, log: Log, timeout_s: float) -> dict[str, Any]:
    """Every tool on the scenario, repeats interleaved; medians per tool."""
    runnable = [tool for tool in tools if "judged" in tool.kinds]
    runs: dict[str, list[dict[str, Any]]] = {tool.name: [] for tool in runnable if tool.name != "floor"}
    log(f"limits: {spec.describe()}")
    with limited_endpoints(workroot / "servers-limits", agent_script, spec) as endpoints:
        for repeat in range(repeats):
            for tool in runnable:
                if tool.name == "floor":
                    continue  # the control makes its calls blindly; it says nothing about pacing
                workdir = workroot / "limits" / tool.name
                workdir.mkdir(parents=True, exist_ok=True)
                result = measure_limited(tool, spec, endpoints, workdir, workroot / "logs",
                                         f"limits-{tool.name}-r{repeat}", timeout_s)
                runs[tool.name].append(result)
                log(f"limits {tool.name} #{repeat + 1}: {result['wall_s']:.1f}s (minimum {result['minimum_s']:.1f}s, "
                    f"×{result['ratio']}), {result['rate_limited_429']} × 429, {result['errored_cases']} errored"
                    f"{'; ' + '; '.join(result['problems']) if result['problems'] else ''}")
    return summarise_limits(spec, runs, missing)


def summarise_limits(spec: LimitsSpec, runs: Mapping[str, list[dict[str, Any]]],
                     missing: Mapping[str, str]) -> dict[str, Any]:
    tools: dict[str, Any] = {}
    for name, results in runs.items():
        finished = [r for r in results if r["returncode"] is not None and r["scored"] > 0]
        tools[name] = {
            "repeats": len(results),
            "wall_s": report.median([r["wall_s"] for r in finished]),
            "minimum_s": report.median([r["minimum_s"] for r in finished]),
            "ratio": report.median([r["ratio"] for r in finished if r["ratio"] is not None]),
            "rate_limited_429": report.median([r["rate_limited_429"] for r in finished]),
            "share_429": report.median([r["share_429"] for r in finished]),
            "errored_cases": report.median([r["errored_cases"] for r in results]),
            "cpu_s": report.median([r["cpu_s"] for r in finished]),
            "peak_rss_mb": report.median([r["peak_rss_mb"] for r in finished]),
            "prompt_tokens_per_verdict": report.median([r["prompt_tokens_per_verdict"] for r in finished]),
            "completion_tokens_per_verdict": report.median([r["completion_tokens_per_verdict"] for r in finished]),
            "judge_cost_usd": report.median([r["cost_usd"] for r in finished]),
            "problems": sorted({p for r in results for p in r["problems"]}),
            "runs": list(results),
        }
    for name, reason in missing.items():
        tools[name] = {"unavailable": reason}
    return {"spec": asdict(spec) | {"scaled": spec.scaled}, "description": spec.describe(), "tools": tools,
            "targets": limits_targets(tools.get("evalgate", {}))}


def limits_targets(mine: Mapping[str, Any]) -> list[dict[str, Any]]:
    ratio, share, errored = mine.get("ratio"), mine.get("share_429"), mine.get("errored_cases")
    return [
        {"target": f"limits: wall ≤ {TARGET_RATIO} × the limit-implied minimum", "measured": ratio,
         "met": None if ratio is None else ratio <= TARGET_RATIO},
        {"target": f"limits: 429s ≤ {TARGET_429_SHARE:.0%} of calls", "measured": share,
         "met": None if share is None else share <= TARGET_429_SHARE},
        {"target": "limits: 0 errored cases", "measured": errored, "met": None if errored is None else errored == 0},
    ]


def limits_rows(result: Mapping[str, Any]) -> list[list[Any]]:
    """Table rows: tool, wall, minimum, ratio, 429s (share), errored, notes."""
    rows = []
    for name, entry in result["tools"].items():
        if "unavailable" in entry:
            rows.append([name, None, None, None, None, None, None, None, entry["unavailable"][:70]])
            continue
        share = entry["share_429"]
        tokens = f"{entry.get('prompt_tokens_per_verdict')} + {entry.get('completion_tokens_per_verdict')}"
        rows.append([name, entry["wall_s"], entry["minimum_s"], entry["ratio"],
                     f"{entry['rate_limited_429']} ({share:.1%})" if share is not None else None,
                     entry["errored_cases"], tokens, entry.get("judge_cost_usd"), "; ".join(entry["problems"])[:70]])
    return rows


LIMITS_HEADERS = ("tool", "wall s", "minimum s", "wall/minimum", "429s (share)", "errored",
                  "tokens/verdict prompt+completion", "judge $ per run", "notes")
