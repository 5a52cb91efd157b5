"""Scenario ``incremental``: a judged suite on the base branch, then a pull request that changed 10 % of the answers.

Cases: ``cases`` (1,000) recorded answers, each judged once (evalgate: ``relevancy`` from
``passing_criteria``; promptfoo: ``llm-rubric`` on the ``echo`` provider's output; DeepEval: one GEval
metric on the given ``actual_output``). The PR's answers differ from the base's for every case with
``i % 10 == 3`` (10 %). The judge (``tests.servers.openai_server``, 50 ms ± 5 ms, C = 16) scores a prompt by
its sha256 (``Judge.spread``), so every prompt keeps its score and about a third of the cases fail: a
reused verdict that belonged to another prompt would change the verdict.

Per tool, three runs against the same judge, counted at the server:

1. **base**: the base answers, the tool's cache on (its normal state);
2. **PR**: the PR answers with what the base run left:
   * evalgate: the base run's ``results.json``, ``results.db`` and ``judge-cache.db`` zipped as its results
     artifact on a fake GitHub API (``tests.servers.github_artifacts_fake``) for branch ``main``; the PR run
     is ``--baseline auto`` in a pull_request event (``GITHUB_*``), exactly as in Actions;
   * promptfoo: its cache directory (``PROMPTFOO_CACHE_PATH``) kept from the base run, as a user would keep
     it with ``actions/cache``; DeepEval: its ``.deepeval`` cache folder kept likewise;
3. **full**: the PR answers with every cache off (a full re-judge).

Measured: judge calls in the PR run (target: exactly the changed cases' calls), the PR run's cost as a
share of the full run's (tokens the server counted × gpt-4o-mini's list price, the same for every tool;
target ≤ 12 %), and whether the PR run's verdict (every case's pass/fail, and the gate) equals the full
re-judge's (target: identical).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench import cases as content
from bench import report
from bench.measure import ProcessRun, run_measured
from bench.peers.install import DeepEvalInstall, PromptfooInstall
from bench.servers import DEEPEVAL_JUDGE_MODEL, DEEPEVAL_VERDICT
from bench.tools import (
    EVALGATE_JUDGE_MODEL,
    LOOPBACK_KEY,
    PROMPTFOO_FAILED_EXIT,
    PROMPTFOO_JUDGE_MODEL,
    RUNNER,
    Tool,
    base_env,
    evalgate_command,
    exit_problem,
    read_results_head,
)
from tests.servers._http import SubprocessServer
from tests.servers.github_artifacts_fake import GitHubArtifactsFake, zip_bytes

Log = Callable[[str], None]
PRICE_INPUT, PRICE_OUTPUT = 0.15, 0.60
"""USD per 1M tokens (gpt-4o-mini's list price), applied to the tokens the judge counted for every tool."""
TARGET_COST_SHARE = 0.12
BASE_SHA = "c0ffee" + "0" * 34
ARTIFACT = "evalgate-results"


@dataclass(frozen=True)
class IncrementalSpec:
    cases: int = 1000
    changed_every: int = 10
    concurrency: int = 16
    latency_ms: float = 50.0
    jitter_ms: float = 5.0

    def changed(self, i: int) -> bool:
        return i % self.changed_every == 3

    @property
    def changed_count(self) -> int:
        return sum(1 for i in range(self.cases) if self.changed(i))


def answer(i: int, pr: bool, spec: IncrementalSpec) -> str:
    if pr and spec.changed(i):
        return f"Answer {i}: reworded on the pull request: see the {content.pick(content.TOPICS, i, 3)} page first."
    return content.agent_answer(i)


def cost_usd(usage: Mapping[str, int]) -> float:
    return (usage.get("prompt_tokens", 0) * PRICE_INPUT + usage.get("completion_tokens", 0) * PRICE_OUTPUT) / 1e6


@dataclass
class Outcome:
    """One run: wall time, judge calls and tokens counted at the server, per-case verdicts, problems."""

    wall_s: float
    judge_calls: int
    usage: dict[str, int]
    verdicts: list[bool | None]
    gate: bool | None
    problems: list[str]
    own_cost_usd: float | None = None
    reuse: str | None = None


class IncrementalTool:
    """How one tool makes its three runs (module doc)."""

    name = "tool"

    def run(self, stage: str, spec: IncrementalSpec, judge_url: str, workdir: Path, logs: Path,
            gh: GitHubArtifactsFake) -> tuple[ProcessRun, Callable[[], tuple[list[bool | None], bool | None, list[str]]]]:
        raise NotImplementedError


def _cases(spec: IncrementalSpec, pr: bool) -> Iterator[tuple[int, str, str]]:
    for i in range(spec.cases):
        yield i, content.question(i), answer(i, pr, spec)


class EvalgateIncremental(IncrementalTool):
    name = "evalgate"

    def run(self, stage: str, spec: IncrementalSpec, judge_url: str, workdir: Path, logs: Path,
            gh: GitHubArtifactsFake) -> tuple[ProcessRun, Callable[[], tuple[list[bool | None], bool | None, list[str]]]]:
        pr = stage != "base"
        dataset = workdir / f"{'pr' if pr else 'base'}.jsonl"
        content.write_jsonl(dataset, ({"id": content.case_id(i), "input": q, "output": a,
                                       "passing_criteria": content.JUDGED_CRITERIA, "metrics": ["relevancy"]} for i, q, a in _cases(spec, pr)))
        out = workdir / stage
        shutil.rmtree(out, ignore_errors=True)
        argv = [*evalgate_command(), "run", "-d", str(dataset), "--output-dir", str(out), "--progress", "none",
                "--judge-provider", "openai", "--judge-model", EVALGATE_JUDGE_MODEL, "--judge-base-url", judge_url,
                "--concurrency", str(spec.concurrency)]
        env = base_env(OPENAI_API_KEY=LOOPBACK_KEY, EVALGATE_PRICES=json.dumps(
            {EVALGATE_JUDGE_MODEL: {"input": PRICE_INPUT, "output": PRICE_OUTPUT}}))
        if stage == "pr":
            argv += ["--baseline", "auto"]
            env |= gh.pull_request_env(workdir, BASE_SHA)
        elif stage == "full":
            argv += ["--no-cache"]
        run = run_measured(argv, cwd=workdir, env=env, log_dir=logs, name=f"incremental-evalgate-{stage}", timeout_s=600)
        if stage == "base" and run.returncode in (0, 1):
            files = {name: (out / name).read_bytes() for name in ("results.json", "results.db", "judge-cache.db")}
            gh.add_artifact(ARTIFACT, zip_bytes(files), head_branch="main", head_sha=BASE_SHA)

        def check() -> tuple[list[bool | None], bool | None, list[str]]:
            problems = exit_problem(run, {0, 1})
            try:
                document = json.loads((out / "results.json").read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                return [], None, [*problems, f"no results.json ({type(exc).__name__})"]
            verdicts = [r.get("passed") if r.get("status") != "errored" else None for r in document["results"]]
            if document["summary"]["total_errored"]:
                problems.append(f"{document['summary']['total_errored']} errored cases")
            if stage == "pr" and not (document.get("baseline") or {}).get("found"):
                problems.append(f"no baseline: {(document.get('baseline') or {}).get('warning')}")
            return verdicts, bool(document["gate"]["passed"]), problems

        return run, check


class PromptfooIncremental(IncrementalTool):
    name = "promptfoo"

    def __init__(self, install: PromptfooInstall) -> None:
        self.install = install

    def run(self, stage: str, spec: IncrementalSpec, judge_url: str, workdir: Path, logs: Path,
            gh: GitHubArtifactsFake) -> tuple[ProcessRun, Callable[[], tuple[list[bool | None], bool | None, list[str]]]]:
        pr = stage != "base"
        config = {"description": "evalgate bench incremental", "prompts": ["{{answer}}"], "providers": ["echo"],
                  "defaultTest": {"options": {"provider": {"id": f"openai:chat:{PROMPTFOO_JUDGE_MODEL}", "config": {
                      "apiBaseUrl": judge_url, "apiKey": LOOPBACK_KEY}}}},
                  "tests": [{"vars": {"question": q, "answer": a},
                             "assert": [{"type": "llm-rubric", "value": content.RUBRIC}]} for _, q, a in _cases(spec, pr)]}
        config_path = workdir / f"promptfooconfig-{stage}.yaml"
        config_path.write_text(json.dumps(config), encoding="utf-8")
        out, state, cache = workdir / stage, workdir / f"home-{stage}", workdir / "promptfoo-cache"
        for folder in (out, state):
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
        if stage == "base":
            shutil.rmtree(cache, ignore_errors=True)
        argv = [*self.install.argv(), "eval", "-c", str(config_path), "-j", str(spec.concurrency),
                "-o", str(out / "results.json"), "--no-table", "--no-progress-bar", "--no-share"]
        if stage == "full":
            argv.append("--no-cache")
        env = base_env(PROMPTFOO_DISABLE_TELEMETRY="1", PROMPTFOO_DISABLE_UPDATE="1", PROMPTFOO_CONFIG_DIR=str(state),
                       PROMPTFOO_DISABLE_SHARING="1", OPENAI_API_KEY=LOOPBACK_KEY, HOME=str(state),
                       PROMPTFOO_CACHE_PATH=str(cache))
        run = run_measured(argv, cwd=workdir, env=env, log_dir=logs, name=f"incremental-promptfoo-{stage}",
                           timeout_s=900)

        def check() -> tuple[list[bool | None], bool | None, list[str]]:
            problems = exit_problem(run, {0, PROMPTFOO_FAILED_EXIT})
            try:
                document = json.loads((out / "results.json").read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                return [], None, [*problems, f"no promptfoo output ({type(exc).__name__})"]
            rows = sorted(document["results"]["results"], key=lambda row: row.get("testIdx", 0))
            verdicts = [None if row.get("error") else bool(row.get("success")) for row in rows]
            if len(rows) != spec.cases:
                problems.append(f"{len(rows)} results, expected {spec.cases}")
            return verdicts, all(v for v in verdicts), problems

        return run, check


class DeepEvalIncremental(IncrementalTool):
    name = "deepeval"

    def __init__(self, install: DeepEvalInstall) -> None:
        self.install = install

    def run(self, stage: str, spec: IncrementalSpec, judge_url: str, workdir: Path, logs: Path,
            gh: GitHubArtifactsFake) -> tuple[ProcessRun, Callable[[], tuple[list[bool | None], bool | None, list[str]]]]:
        pr = stage != "base"
        answers = workdir / f"answers-{'pr' if pr else 'base'}.jsonl"
        content.write_jsonl(answers, ({"question": q, "answer": a} for _, q, a in _cases(spec, pr)))
        out = workdir / stage
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        state = workdir / ("home-full" if stage == "full" else "home")  # PR runs where the base run left its cache
        if stage != "pr":
            shutil.rmtree(state, ignore_errors=True)
            state.mkdir(parents=True)
        argv = [str(self.install.python), str(RUNNER), "--answers", str(answers), "--judge-base-url", judge_url,
                "--model", DEEPEVAL_JUDGE_MODEL, "--concurrency", str(spec.concurrency), "--out",
                str(out / "summary.json")] + (["--use-cache"] if stage != "full" else [])
        env = base_env(DEEPEVAL_TELEMETRY_OPT_OUT="1", DEEPEVAL_UPDATE_WARNING_OPT_IN="0", HOME=str(state),
                       DEEPEVAL_NO_INSPECT_PROMPT="1", ERROR_REPORTING="0")
        env.pop("CONFIDENT_API_KEY", None)
        run = run_measured(argv, cwd=state, env=env, log_dir=logs, name=f"incremental-deepeval-{stage}", timeout_s=900)

        def check() -> tuple[list[bool | None], bool | None, list[str]]:
            problems = exit_problem(run, {0})
            try:
                summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                return [], None, [*problems, f"no runner summary ({type(exc).__name__})"]
            verdicts = list(summary.get("verdicts") or [])
            if summary.get("errors"):
                problems.append(f"{summary['errors']} errored ({summary.get('first_error')})")
            return verdicts, all(v for v in verdicts), problems

        return run, check


@contextmanager
def judge_endpoint(script_dir: Path, spec: IncrementalSpec) -> Iterator[SubprocessServer]:
    """The judge: evalgate's and promptfoo's models scored by prompt hash (0.3–1.0), DeepEval's by its
    GEval shape (a fixed 0–10 verdict)."""
    script_dir.mkdir(parents=True, exist_ok=True)
    script = script_dir / "judge-incremental.json"
    script.write_text(json.dumps({"rules": [{"model": DEEPEVAL_JUDGE_MODEL, "reply": DEEPEVAL_VERDICT}],
                                  "judge": {"spread": [0.3, 1.0]}}), encoding="utf-8")
    args = ["--latency-ms", f"{spec.latency_ms:g}", "--jitter-ms", f"{spec.jitter_ms:g}", "--seed", "5",
            "--script", str(script)]
    with SubprocessServer("tests.servers.openai_server", args) as server:
        yield server


def judge_counts(stats: Mapping[str, Any]) -> tuple[int, dict[str, int]]:
    ok = sum(int(count) for statuses in stats.get("paths", {}).values()
             for status, count in statuses.items() if str(status).startswith("2"))
    return ok, {k: int(v) for k, v in (stats.get("usage") or {}).items()}


def measure_stage(tool: IncrementalTool, stage: str, spec: IncrementalSpec, judge: SubprocessServer, workdir: Path,
                  logs: Path, gh: GitHubArtifactsFake) -> Outcome:
    judge.reset()
    run, check = tool.run(stage, spec, judge.base_url + "/v1", workdir, logs, gh)
    calls, usage = judge_counts(judge.stats())
    verdicts, gate, problems = check()
    outcome = Outcome(round(run.wall_s, 3), calls, usage, verdicts, gate, problems)
    if tool.name == "evalgate":
        try:
            head = read_results_head(workdir / stage / "results.json")
            outcome.own_cost_usd = head["summary"].get("cost_usd")
            base = (head["summary"].get("judge_calls") or {}).get("base_cache") or {}
            if base:
                outcome.reuse = f"{base.get('reused')} of {base.get('verdicts')} verdicts reused from {base.get('source')}"
        except (OSError, ValueError, KeyError):
            pass
    return outcome


def run_incremental(tools: Sequence[IncrementalTool], missing: Mapping[str, str], spec: IncrementalSpec,
                    workroot: Path, repeats: int, log: Log) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {tool.name: [] for tool in tools}
    with judge_endpoint(workroot / "servers-incremental", spec) as judge:
        for repeat in range(repeats):
            for tool in tools:
                workdir = workroot / "incremental" / tool.name
                workdir.mkdir(parents=True, exist_ok=True)
                with GitHubArtifactsFake() as gh:
                    stages = {stage: measure_stage(tool, stage, spec, judge, workdir, workroot / "logs", gh)
                              for stage in ("base", "pr", "full")}
                result = judge_result(stages, spec)
                runs[tool.name].append(result)
                log(f"incremental {tool.name} #{repeat + 1}: PR {result['pr_judge_calls']} judge calls "
                    f"(changed {spec.changed_count}), cost {result['cost_share']:.1%} of a full re-judge, verdict "
                    f"{'identical' if result['verdict_identical'] else 'DIFFERENT'}; "
                    f"{'; '.join(result['problems']) or 'ok'}")
    return summarise_incremental(spec, runs, missing)


def judge_result(stages: Mapping[str, Outcome], spec: IncrementalSpec) -> dict[str, Any]:
    base, pr, full = stages["base"], stages["pr"], stages["full"]
    full_cost = cost_usd(full.usage)
    problems = sorted({f"{name}: {p}" for name, o in stages.items() for p in o.problems})
    for name, outcome in stages.items():
        if len(outcome.verdicts) != spec.cases:
            problems.append(f"{name}: {len(outcome.verdicts)} verdicts, expected {spec.cases}")
    verdicts = max(1, full.judge_calls)
    return {
        "per_verdict": {"prompt_tokens": round(full.usage.get("prompt_tokens", 0) / verdicts, 1),
                        "completion_tokens": round(full.usage.get("completion_tokens", 0) / verdicts, 1)},
        "base_cost_usd": round(cost_usd(base.usage), 6),
        "pr_judge_calls": pr.judge_calls, "changed_cases": spec.changed_count,
        "base_judge_calls": base.judge_calls, "full_judge_calls": full.judge_calls,
        "pr_cost_usd": round(cost_usd(pr.usage), 6), "full_cost_usd": round(full_cost, 6),
        "cost_share": cost_usd(pr.usage) / full_cost if full_cost else None,
        "verdict_identical": pr.verdicts == full.verdicts and pr.gate == full.gate and None not in pr.verdicts,
        "failing_cases": sum(1 for v in full.verdicts if v is False),
        "wall_s": {"base": base.wall_s, "pr": pr.wall_s, "full": full.wall_s},
        "evalgate_reported": {"pr_cost_usd": pr.own_cost_usd, "full_cost_usd": full.own_cost_usd,
                              "reuse": pr.reuse} if pr.own_cost_usd is not None else None,
        "problems": problems,
    }


def summarise_incremental(spec: IncrementalSpec, runs: Mapping[str, list[dict[str, Any]]],
                          missing: Mapping[str, str]) -> dict[str, Any]:
    tools: dict[str, Any] = {}
    for name, results in runs.items():
        tools[name] = {
            "repeats": len(results),
            "pr_judge_calls": report.median([r["pr_judge_calls"] for r in results]),
            "prompt_tokens_per_verdict": report.median([r["per_verdict"]["prompt_tokens"] for r in results]),
            "completion_tokens_per_verdict": report.median([r["per_verdict"]["completion_tokens"] for r in results]),
            "full_cost_usd": report.median([r["full_cost_usd"] for r in results]),
            "pr_cost_usd": report.median([r["pr_cost_usd"] for r in results]),
            "cost_share": report.median([r["cost_share"] for r in results if r["cost_share"] is not None]),
            "verdict_identical": all(r["verdict_identical"] for r in results) if results else None,
            "pr_wall_s": report.median([r["wall_s"]["pr"] for r in results]),
            "full_wall_s": report.median([r["wall_s"]["full"] for r in results]),
            "problems": sorted({p for r in results for p in r["problems"]}),
            "runs": list(results),
        }
    for name, reason in missing.items():
        tools[name] = {"unavailable": reason}
    mine = tools.get("evalgate", {})
    calls, share, same = mine.get("pr_judge_calls"), mine.get("cost_share"), mine.get("verdict_identical")
    targets = [
        {"target": f"incremental: PR judge calls = the {spec.changed_count} changed cases' calls", "measured": calls,
         "met": None if calls is None else calls == spec.changed_count},
        {"target": f"incremental: PR cost ≤ {TARGET_COST_SHARE:.0%} of a full run", "measured": share,
         "met": None if share is None else share <= TARGET_COST_SHARE},
        {"target": "incremental: verdict identical to a full re-judge", "measured": same, "met": same},
    ]
    return {"spec": asdict(spec) | {"changed_cases": spec.changed_count}, "tools": tools, "targets": targets}


INCREMENTAL_HEADERS = ("tool", "PR judge calls", "changed", "PR cost / full", "verdict = full re-judge",
                       "PR wall s", "full wall s", "tokens/verdict prompt+completion", "full run $", "notes")


def incremental_rows(result: Mapping[str, Any]) -> list[list[Any]]:
    rows = []
    changed = result["spec"]["changed_cases"]
    for name, entry in result["tools"].items():
        if "unavailable" in entry:
            rows.append([name, None, changed, None, None, None, None, None, None, entry["unavailable"][:70]])
            continue
        share = entry["cost_share"]
        tokens = f"{entry.get('prompt_tokens_per_verdict')} + {entry.get('completion_tokens_per_verdict')}"
        rows.append([name, entry["pr_judge_calls"], changed, None if share is None else f"{share:.1%}",
                     entry["verdict_identical"], entry["pr_wall_s"], entry["full_wall_s"], tokens,
                     entry.get("full_cost_usd"), "; ".join(entry["problems"])[:70]])
    return rows


def incremental_tools(tools: Sequence[Tool]) -> list[IncrementalTool]:
    """The incremental runners of the tools that could be prepared (``bench.run.build_tools``)."""
    found: list[IncrementalTool] = []
    for tool in tools:
        if tool.name == "evalgate":
            found.append(EvalgateIncremental())
        elif tool.name == "promptfoo":
            found.append(PromptfooIncremental(tool.install))  # type: ignore[attr-defined]
        elif tool.name == "deepeval":
            found.append(DeepEvalIncremental(tool.install))  # type: ignore[attr-defined]
    return found

