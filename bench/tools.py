"""How each tool is told to do the same work, and how the harness checks that it did all of it.

A tool turns a ``Scenario`` + ``Endpoints`` into an ``Invocation``: the command line (always the same
concurrency C, the same endpoints, caches off), a ``reset`` run before every repeat (fresh output
folders, so no run reads another's results) and a ``check`` that counts the cases the tool actually
scored from its own output file.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from bench import cases as content
from bench.measure import ProcessRun
from bench.peers.install import DeepEvalInstall, PromptfooInstall
from bench.servers import DEEPEVAL_JUDGE_MODEL, Endpoints

Kind = Literal["judged", "rules"]
LOOPBACK_KEY = "sk-bench-loopback-not-a-secret"
EVALGATE_JUDGE_MODEL = "bench-judge-evalgate"
PROMPTFOO_JUDGE_MODEL = "bench-judge-promptfoo"
PROMPTFOO_FAILED_EXIT = 100
"""promptfoo's exit status when some assertion failed (the run itself completed)."""
RUNNER = Path(__file__).resolve().parent / "peers" / "deepeval_runner.py"
REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True, slots=True)
class Scenario:
    """``kind`` judged: HTTP target + one judged metric per case (2 calls per case); rules: HTTP target +
    one deterministic check per case (1 call per case)."""

    kind: Kind
    latency_ms: float
    jitter_ms: float
    concurrency: int
    cases: int

    @property
    def name(self) -> str:
        return f"{self.kind} {self.latency_ms:g}ms C={self.concurrency}"

    @property
    def slug(self) -> str:
        return f"{self.kind}-{self.latency_ms:g}ms-c{self.concurrency}"

    @property
    def expected_agent_calls(self) -> int:
        return self.cases

    @property
    def expected_judge_calls(self) -> int:
        return self.cases if self.kind == "judged" else 0

    @property
    def calls(self) -> int:
        return self.expected_agent_calls + self.expected_judge_calls


@dataclass(frozen=True, slots=True)
class Check:
    """What a tool's own output says: cases scored, and anything wrong."""

    scored: int
    problems: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Invocation:
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    reset: Callable[[], None]
    check: Callable[[ProcessRun], Check]


class Tool:
    name = "tool"
    kinds: frozenset[str] = frozenset({"judged", "rules"})
    version = ""

    def prepare(self, scenario: Scenario, endpoints: Endpoints, workdir: Path) -> Invocation:
        raise NotImplementedError


def base_env(**extra: str) -> dict[str, str]:
    """The harness's environment without proxies (everything is loopback) plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k.lower() not in {"http_proxy", "https_proxy", "all_proxy"}}
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    env["NO_COLOR"] = "1"
    env["EVALGATE_JUDGE_SHARED_CACHE"] = "none"  # each measured run pays for what its own caches lack
    return env | extra


def _fresh(*folders: Path) -> Callable[[], None]:
    def reset() -> None:
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True, exist_ok=True)

    return reset


def exit_problem(run: ProcessRun, accepted: set[int]) -> list[str]:
    if run.timed_out:
        return ["timed out"]
    if run.returncode not in accepted:
        last = run.stderr_tail(300).strip().splitlines()
        return [f"exit {run.returncode}: {last[-1] if last else 'no stderr'}"]
    return []


# --- evalgate ------------------------------------------------------------------------------------------------

RESULTS_MARKER = b',\n  "results": ['
"""Where evalgate's results.json writer starts the per-case list (everything before it is the summary)."""


def read_results_head(path: Path, chunk: int = 1 << 20) -> dict[str, Any]:
    """results.json without its ``results`` list: reads only up to the list, so a 100k-case file (~200 MB)
    is not parsed into the harness's memory. Falls back to a full parse for any other layout."""
    head = b""
    with path.open("rb") as handle:
        while RESULTS_MARKER not in head:
            block = handle.read(chunk)
            if not block:
                return dict(json.loads(head))
            head += block
    return dict(json.loads(head[: head.index(RESULTS_MARKER)] + b"}"))



def evalgate_command() -> list[str]:
    """The installed console script next to this interpreter, else ``python -m evalgate``."""
    script = Path(sys.executable).parent / "evalgate"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "evalgate"]


class Evalgate(Tool):
    name = "evalgate"

    def __init__(self) -> None:
        from evalgate import __version__

        self.version = __version__

    def prepare(self, scenario: Scenario, endpoints: Endpoints, workdir: Path) -> Invocation:
        builder = content.judged_case if scenario.kind == "judged" else content.http_rules_case
        dataset = workdir / "cases.jsonl"
        content.write_jsonl(dataset, content.cases(builder, scenario.cases))
        out = workdir / "out"
        argv = [*evalgate_command(), "run", "-d", str(dataset), "--output-dir", str(out), "--progress", "none",
                "--target", "http", "--target-url", endpoints.agent_url, "--concurrency", str(scenario.concurrency)]
        if scenario.kind == "judged":
            argv += ["--judge-provider", "openai", "--judge-model", EVALGATE_JUDGE_MODEL,
                     "--judge-base-url", endpoints.judge_base_url, "--no-cache"]
        metric = "relevancy" if scenario.kind == "judged" else "rules"
        return Invocation(argv=argv, env=base_env(OPENAI_API_KEY=LOOPBACK_KEY), cwd=workdir, reset=_fresh(out),
                          check=lambda run: check_evalgate(run, out / "results.json", metric, scenario.cases))


def check_evalgate(run: ProcessRun, results: Path, metric: str, expected: int) -> Check:
    """Exit 0/1 (gate passed/failed), every case present, not errored, and ``metric`` computed on each."""
    problems = exit_problem(run, {0, 1})
    try:
        document = read_results_head(results)
    except (OSError, ValueError) as exc:
        return Check(0, [*problems, f"no results.json ({type(exc).__name__})"])
    summary = document["summary"]
    scored = int(document.get("metrics", {}).get(metric, {}).get("count", 0))
    if summary["total_test_cases"] != expected:
        problems.append(f"{summary['total_test_cases']} cases in results.json, expected {expected}")
    if summary["total_errored"]:
        problems.append(f"{summary['total_errored']} errored cases")
    if scored != expected:
        problems.append(f"{metric} computed on {scored} of {expected} cases")
    return Check(scored, problems)


# --- promptfoo -----------------------------------------------------------------------------------------------


class Promptfoo(Tool):
    name = "promptfoo"

    def __init__(self, install: PromptfooInstall) -> None:
        self.install = install
        self.version = install.version

    def config(self, scenario: Scenario, endpoints: Endpoints) -> dict[str, Any]:
        """promptfooconfig: HTTP provider to the agent; llm-rubric graded by the same judge (or contains)."""
        provider = {"id": "http", "config": {
            "url": endpoints.agent_url, "method": "POST", "headers": {"Content-Type": "application/json"},
            "body": {"message": "{{prompt}}"}, "transformResponse": "json.response"}}
        config: dict[str, Any] = {"description": f"evalgate bench {scenario.slug}", "prompts": ["{{question}}"],
                                  "providers": [provider], "tests": []}
        if scenario.kind == "judged":
            config["defaultTest"] = {"options": {"provider": {
                "id": f"openai:chat:{PROMPTFOO_JUDGE_MODEL}",
                "config": {"apiBaseUrl": endpoints.judge_base_url, "apiKey": LOOPBACK_KEY}}}}
        for i in range(scenario.cases):
            assertion = ({"type": "llm-rubric", "value": content.RUBRIC} if scenario.kind == "judged"
                         else {"type": "contains", "value": content.answer_marker(i)})
            config["tests"].append({"vars": {"question": content.question(i)}, "assert": [assertion]})
        return config

    def prepare(self, scenario: Scenario, endpoints: Endpoints, workdir: Path) -> Invocation:
        config_path = workdir / "promptfooconfig.yaml"
        config_path.write_text(json.dumps(self.config(scenario, endpoints)), encoding="utf-8")  # JSON is YAML
        out, state = workdir / "out", workdir / "promptfoo-home"
        argv = [*self.install.argv(), "eval", "-c", str(config_path), "--no-cache", "-j", str(scenario.concurrency),
                "-o", str(out / "results.json"), "--no-table", "--no-progress-bar", "--no-share"]
        env = base_env(PROMPTFOO_DISABLE_TELEMETRY="1", PROMPTFOO_DISABLE_UPDATE="1", PROMPTFOO_CONFIG_DIR=str(state),
                       PROMPTFOO_DISABLE_SHARING="1", OPENAI_API_KEY=LOOPBACK_KEY, HOME=str(state))
        return Invocation(argv=argv, env=env, cwd=workdir, reset=_fresh(out, state),
                          check=lambda run: check_promptfoo(run, out / "results.json", scenario.cases))


def check_promptfoo(run: ProcessRun, results: Path, expected: int) -> Check:
    """Every test has a result with its one assertion graded and no error."""
    problems = exit_problem(run, {0, PROMPTFOO_FAILED_EXIT})
    try:
        document = json.loads(results.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return Check(0, [*problems, f"no promptfoo output ({type(exc).__name__})"])
    rows = document["results"]["results"]
    scored = sum(1 for row in rows if not row.get("error") and (row.get("gradingResult") or {}).get("componentResults"))
    errors = document["results"]["stats"].get("errors", 0)
    if len(rows) != expected:
        problems.append(f"{len(rows)} results, expected {expected}")
    if errors:
        problems.append(f"{errors} errored tests")
    if scored != expected:
        problems.append(f"assertion graded on {scored} of {expected} tests")
    return Check(scored, problems)


# --- DeepEval ------------------------------------------------------------------------------------------------


class DeepEval(Tool):
    name = "deepeval"
    kinds = frozenset({"judged"})

    def __init__(self, install: DeepEvalInstall) -> None:
        self.install = install
        self.version = install.version

    def prepare(self, scenario: Scenario, endpoints: Endpoints, workdir: Path) -> Invocation:
        questions = workdir / "questions.jsonl"
        content.write_jsonl(questions, ({"question": content.question(i)} for i in range(scenario.cases)))
        out, state = workdir / "out", workdir / "deepeval-home"
        argv = [str(self.install.python), str(RUNNER), "--cases", str(questions), "--agent-url", endpoints.agent_url,
                "--judge-base-url", endpoints.judge_base_url, "--model", DEEPEVAL_JUDGE_MODEL,
                "--concurrency", str(scenario.concurrency), "--out", str(out / "summary.json")]
        env = base_env(DEEPEVAL_TELEMETRY_OPT_OUT="1", DEEPEVAL_UPDATE_WARNING_OPT_IN="0", HOME=str(state),
                       DEEPEVAL_NO_INSPECT_PROMPT="1", ERROR_REPORTING="0")
        env.pop("CONFIDENT_API_KEY", None)
        return Invocation(argv=argv, env=env, cwd=state, reset=_fresh(out, state),
                          check=lambda run: check_deepeval(run, out / "summary.json", scenario.cases))


def check_deepeval(run: ProcessRun, summary_path: Path, expected: int) -> Check:
    problems = exit_problem(run, {0})
    try:
        summary: Mapping[str, Any] = json.loads(summary_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return Check(0, [*problems, f"no runner summary ({type(exc).__name__})"])
    scored = int(summary.get("scored", 0))
    if summary.get("fetched") != expected:
        problems.append(f"fetched {summary.get('fetched')} answers, expected {expected}")
    if scored != expected:
        problems.append(f"GEval scored {scored} of {expected} ({summary.get('first_error') or 'no error text'})")
    return Check(scored, problems)


# --- the floor (control) -------------------------------------------------------------------------------------


class Floor(Tool):
    """``bench.floor``: the same calls and nothing else (see that module); not a peer, a control."""

    name = "floor"
    version = "control"

    def prepare(self, scenario: Scenario, endpoints: Endpoints, workdir: Path) -> Invocation:
        questions = workdir / "questions.jsonl"
        content.write_jsonl(questions, ({"question": content.question(i)} for i in range(scenario.cases)))
        out = workdir / "out"
        argv = [sys.executable, "-m", "bench.floor", "--questions", str(questions), "--agent-url", endpoints.agent_url,
                "--concurrency", str(scenario.concurrency), "--out", str(out / "floor.json")]
        if scenario.kind == "judged":
            argv += ["--judge-base-url", endpoints.judge_base_url]
        return Invocation(argv=argv, env=base_env(), cwd=REPO_ROOT, reset=_fresh(out),
                          check=lambda run: check_floor(run, out / "floor.json", scenario.cases))


def check_floor(run: ProcessRun, summary_path: Path, expected: int) -> Check:
    problems = exit_problem(run, {0})
    try:
        scored = int(json.loads(summary_path.read_text(encoding="utf-8"))["scored"])
    except (OSError, ValueError, KeyError) as exc:
        return Check(0, [*problems, f"no floor summary ({type(exc).__name__})"])
    return Check(scored, problems if scored == expected else [*problems, f"{scored} of {expected} cases done"])
