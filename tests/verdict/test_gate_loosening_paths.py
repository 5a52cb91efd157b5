"""Issue 30, items 1 and 2: every way a pull request turned its own failing gate into a pass with nothing
listed, tried as its author would. For each path: the base branch's run passes; the PR's bad answers alone
fail (exit 1); the same bad answers plus the one change, as a pull_request run with ``--gate-changes fail``
and the base run as baseline, end with the change listed (gate.loosened, or the dataset changes and the
threshold on the base's cases) and exit 1 — through ``evalgate run`` (``evalgate.cli.main``, in an
Actions pull_request environment) and through the Action's entry module (``evalgate.cli.action.run_action``,
what ``python -m entrypoint.main`` calls).

Live answers come from an agent on a loopback port (``JsonServer``, port 0); judged metrics from the demo
judge (``evalgate.demo.judge``) behind a router that answers every score at its maximum for the model
``lenient`` (a judge a PR might prefer)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalgate.demo.judge import CHAT_PATHS, make_chat
from evalgate.demo.server import JsonServer
from evalgate.verdict.policy import loosenings
from tests.support.action import make_workspace, runner_env
from tests.support.gate import ENV, JUDGE, PR_ENV, Ran, Suite, case, full, ids, policy, pr_event, results

# ---- the system under test and its judge, on loopback -------------------------------------------------------

@dataclass
class Agent:
    """``POST /ask`` ``{"message": …}`` → ``{"response", "sources"}``. ``mode``: ``good`` answers every
    question with its source; ``bad`` gives the wrong source for the ``bad`` ids' questions; ``flaky`` gives
    the right one on a question's first call only."""

    mode: str = "good"
    bad: tuple[str, ...] = ()
    calls: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reset(self, mode: str, bad: tuple[str, ...] = ()) -> None:
        with self.lock:
            self.mode, self.bad, self.calls = mode, bad, {}

    def route(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
        message = str(body.get("message") or "")
        case_id = message.rsplit(" ", 1)[-1]
        with self.lock:
            self.calls[case_id] = seen = self.calls.get(case_id, 0) + 1
        wrong = (self.mode == "bad" and case_id in self.bad) or (self.mode == "flaky" and case_id in self.bad
                                                               and seen > 1)
        return 200, {"response": f"answer for {case_id}", "sources": [f"wrong-{case_id}" if wrong else f"doc-{case_id}"]}


@pytest.fixture(scope="module")
def agent() -> Iterator[tuple[Agent, str]]:
    state = Agent()
    with JsonServer({"/ask": state.route}) as server:
        yield state, f"{server.base_url}/ask"


def routed_judge() -> JsonServer:
    """The demo judge (``scripted``) for every model but ``lenient``, whose replies put every score field at
    the top of its scale."""
    scripted = make_chat(None)

    def chat(body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
        status, reply = scripted(body, headers)
        if body.get("model") != "lenient" or status != 200:
            return status, reply
        content = json.loads(reply["choices"][0]["message"]["content"])
        for key, value in list(content.items()):
            if isinstance(value, int | float) and not isinstance(value, bool):
                content[key] = 5 if value > 1 or (key == "score" and value > 1) else 1
        reply["choices"][0]["message"]["content"] = json.dumps(content)
        return status, reply

    return JsonServer({path: chat for path in CHAT_PATHS})


@pytest.fixture(scope="module")
def judge() -> Iterator[str]:
    with routed_judge() as server:
        yield f"{server.base_url}/v1"


# ---- datasets ---------------------------------------------------------------------------------------------

# ---- the attacks ------------------------------------------------------------------------------------------

def with_config(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**base, **changes}


def c01(edit: Callable[[dict[str, Any]], None]) -> Callable[[list[dict[str, Any]], Path], None]:
    def apply(cases: list[dict[str, Any]], folder: Path) -> None:
        edit(next(c for c in cases if c["id"] in ("c01", "c0001")))

    return apply


def move_c01_to_lenient_suite(cases: list[dict[str, Any]], folder: Path) -> None:
    moved = next(c for c in cases if c["id"] == "c01")
    cases.remove(moved)
    (folder / "more.yaml").write_text(yaml.safe_dump({"suite": {"name": "lenient", "exclude_metrics": ["hit_rate"]},
                                                      "test_cases": [moved]}), encoding="utf-8")


def add_easy_cases(cases: list[dict[str, Any]], folder: Path) -> None:
    cases += [case(f"easy{i:02d}", bad=False, critical=False) for i in range(1, 21)]


def swap_critical(cases: list[dict[str, Any]], folder: Path) -> None:
    cases[0].pop("risk_level")  # the failing critical case is demoted …
    cases[-1]["risk_level"] = "critical"  # … and another promoted: the same number of critical cases


@dataclass
class Attack:
    """``base``: the base branch's suite (and flags); ``pr``: the PR's suite without the change (bad answers);
    ``loose``: the same with the change; ``listed``: a text every run with the change must show."""

    name: str
    base: Suite
    pr: Suite
    loose: Suite
    listed: str
    flags: tuple[str, ...] = ()
    inputs: dict[str, str] = field(default_factory=dict)
    agent: tuple[str, str, str] | None = None
    """The agent's mode for the base, the PR and the loosened PR (an http target)."""


HTTP = {"thresholds": {"hit_rate": 0.8}, "target": "http", "target_url": "{agent}"}
JUDGED = {"metrics": ["correctness"], "thresholds": {"correctness": 0.6}, "judge_provider": "openai",
          "judge_model": "strict", "judge_base_url": "{judge}"}
CHECK = {"metrics": ["file://checks.py:exact"], "thresholds": {"exact": 1.0}}
EXACT = "def exact(case, answer):\n    return float(answer.output == case.expected_output)\n"
LENIENT = "def exact(case, answer):\n    return 1.0\n"


def shard_without_c01() -> str:
    """The shard of 2 that leaves c01 out (the selection is a pure function of the ids)."""
    from evalgate.dataset.select import shard_of

    return "2/2" if shard_of("c01", 2) == 1 else "1/2"


def write_checks(text: str) -> Callable[[list[dict[str, Any]], Path], None]:
    def apply(cases: list[dict[str, Any]], folder: Path) -> None:
        (folder / "checks.py").write_text(text, encoding="utf-8")

    return apply


def attacks() -> list[Attack]:
    bad = ("c01",)
    plain = {"thresholds": {"hit_rate": 0.8}}
    out: list[Attack] = [
        Attack("significance_level", Suite(n=40), Suite(n=40, bad=("c03", "c05", "c07", "c09", "c11", "c13")),
               Suite(n=40, bad=("c03", "c05", "c07", "c09", "c11", "c13"),
                     config=with_config(plain, significance_level=0.000001)),
               "significance_level (α) 0.05 → 1e-06", flags=("--fail-on-regression",),
               inputs={"fail-on-regression": "true"}),
        Attack("shard", Suite(), Suite(bad=bad), Suite(bad=bad, config=with_config(plain, shard="SHARD")),
               "cases selected by shard: SHARD"),
        Attack("critical swap among 1,100 critical cases", Suite(n=1101, critical=tuple(ids(1101)[:1100])),
               Suite(n=1101, critical=tuple(ids(1101)[:1100]), bad=("c0001",)),
               Suite(n=1101, critical=tuple(ids(1101)[:1100]), bad=("c0001",), edit=swap_critical),
               "1 case(s) no longer risk_level critical: c0001 (cases.yaml:"),
        Attack("case-level assert threshold 0", Suite(), Suite(bad=bad),
               Suite(bad=bad, edit=c01(lambda c: c.update({"assert": [{"metric": "hit_rate", "threshold": 0}]}))),
               "1 case(s) with edited expectations (expected values, rules, assert, metrics, suite or risk level): c01"),
        Attack("moved into a suite with exclude_metrics", Suite(), Suite(bad=bad),
               Suite(bad=bad, edit=move_c01_to_lenient_suite), "1 case(s) with edited expectations"),
        Attack("expected_sources deleted", Suite(), Suite(bad=bad),
               Suite(bad=bad, edit=c01(lambda c: c.pop("expected_sources"))), "1 case(s) with edited expectations"),
        Attack("expected values edited to match", Suite(), Suite(bad=bad),
               Suite(bad=bad, edit=c01(lambda c: c.update({"expected_sources": ["wrong-c01"]}))),
               "1 case(s) with edited expectations"),
        Attack("20 easy cases added", Suite(), Suite(bad=("c02", "c03", "c04")),
               Suite(bad=("c02", "c03", "c04"), edit=add_easy_cases),
               "hit_rate on the 10 case(s) the base run had: average 0.700 misses threshold min 0.8"),
        Attack("repeat 3 → 1 with a flaky agent", Suite(config={**HTTP, "repeat": 3}),
               Suite(config={**HTTP, "repeat": 3}), Suite(config={**HTTP, "repeat": 1}),
               "repeat 3 → 1 (repeat_rule majority: fewer tries to show a flaky case)",
               agent=("good", "flaky", "flaky")),
        Attack("target http → recorded", Suite(config=HTTP), Suite(config=HTTP), Suite(config=plain),
               "target http → recorded: the answers are read from files instead of the live system",
               agent=("good", "bad", "bad")),
        Attack("judge_provider none", Suite(expected_output=True, config=JUDGED),
               Suite(expected_output=True, config=JUDGED, bad=bad),
               Suite(expected_output=True, config={**JUDGED, "judge_provider": "none"}, bad=bad),
               "judge_provider openai → none: judged metrics are skipped, not scored",
               flags=("--calibration", "trust"), inputs={"calibration": "trust"}),
        Attack("another judge model", Suite(expected_output=True, config=JUDGED),
               Suite(expected_output=True, config=JUDGED, bad=bad),
               Suite(expected_output=True, config={**JUDGED, "judge_model": "lenient"}, bad=bad),
               "another judge: model strict → lenient", flags=("--calibration", "trust"),
               inputs={"calibration": "trust"}),
        Attack("file:// metric rewritten", Suite(expected_output=True, config=CHECK, edit=write_checks(EXACT)),
               Suite(expected_output=True, config=CHECK, bad=bad, edit=write_checks(EXACT)),
               Suite(expected_output=True, config=CHECK, bad=bad, edit=write_checks(LENIENT)),
               "metric exact's definition changed (file://checks.py:exact)"),
    ]
    return out


ATTACKS = attacks()


def configure(suite: Suite, agent_url: str, judge_url: str) -> Suite:
    config = {key: (value.replace("{agent}", agent_url).replace("{judge}", judge_url).replace("SHARD",
                                                                                               shard_without_c01())
                    if isinstance(value, str) else value) for key, value in suite.config.items()}
    return Suite(n=suite.n, critical=suite.critical, bad=suite.bad, config=config,
                 expected_output=suite.expected_output, edit=suite.edit)


def listed_text(attack: Attack) -> str:
    return attack.listed.replace("SHARD", shard_without_c01())


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory, agent: tuple[Agent, str], judge: str) -> dict[str, Path]:
    """Each attack's base branch run (exit 0), by attack name; through ``evalgate run`` in this process."""
    from evalgate.cli.main import main

    state, url = agent
    made: dict[str, Path] = {}
    for attack in ATTACKS:
        folder = configure(attack.base, url, judge).write(tmp_path_factory.mktemp("base"))
        if attack.agent:
            state.reset(attack.agent[0], ("c01",))
        with pytest.MonkeyPatch.context() as patch:
            for name, value in {"EVALGATE_JUDGE_SHARED_CACHE": "none", **ENV}.items():
                patch.setenv(name, value)
            patch.chdir(folder)
            code = main(["run", "-d", "cases.yaml", "-o", "out", "--progress", "none", *attack.flags])
        assert code == 0, attack.name
        made[attack.name] = folder / "out"
    return made


def run_cli(cli: Callable[..., Ran], suite: Suite, folder: Path, base: Path, attack: Attack,
            agent: tuple[Agent, str], judge: str, mode: str | None, changes: str = "fail"
            ) -> tuple[Ran, dict[str, Any]]:
    state, url = agent
    configure(suite, url, judge).write(folder)
    if mode is not None:
        state.reset(mode, ("c01",))
    run = cli("run", "-d", "cases.yaml", *(["-d", "more.yaml"] if (folder / "more.yaml").exists() else []),
              "-o", "out", "--baseline", str(base / "results.json"), "--gate-changes", changes, *attack.flags,
              cwd=folder, env={**PR_ENV, **ENV})
    return run, results(folder / "out")


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_the_bad_answers_alone_fail_and_with_the_change_the_cli_lists_it_and_fails(
        attack: Attack, bases: dict[str, Path], tmp_path: Path, cli: Callable[..., Ran],
        agent: tuple[Agent, str], judge: str) -> None:
    base = bases[attack.name]
    modes = attack.agent or (None, None, None)
    alone, document = run_cli(cli, attack.pr, tmp_path / "pr", base, attack, agent, judge, modes[1])
    assert alone.returncode == 1, alone.stdout + alone.stderr
    loose, document = run_cli(cli, attack.loose, tmp_path / "loose", base, attack, agent, judge, modes[2])
    text = listed_text(attack)
    gate = document["gate"]
    shown = [item["text"] for item in gate.get("loosened") or []] + gate["reasons"]
    assert any(text in line for line in shown), (attack.name, shown)
    assert loose.returncode == 1, loose.stdout + loose.stderr
    assert text in loose.stdout  # the console says it too
    if attack.name == "20 easy cases added":
        assert gate["dataset_changes"]["added"] == 20
        assert "ℹ dataset changes against the base run: 20 case(s) added: easy01 (cases.yaml:" in loose.stdout
    if attack.name != "20 easy cases added":  # the change does pass the gate: only its listing stops it
        reported, document = run_cli(cli, attack.loose, tmp_path / "reported", base, attack, agent, judge, modes[2],
                                     changes="report")
        assert reported.returncode == 0, reported.stdout + reported.stderr
        assert any(text in item["text"] for item in document["gate"]["loosened"])


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_the_action_lists_each_change_and_fails_without_the_label(
        attack: Attack, bases: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        agent: tuple[Agent, str], judge: str) -> None:
    from evalgate.cli.action import run_action

    state, url = agent
    ws = make_workspace(tmp_path / "runner", ())
    configure(attack.loose, url, judge).write(ws.workspace)
    (ws.workspace / "base").mkdir()
    for name in ("results.json", "results.db"):
        (ws.workspace / "base" / name).write_bytes((bases[attack.name] / name).read_bytes())
    datasets = "cases.yaml\nmore.yaml" if (ws.workspace / "more.yaml").exists() else "cases.yaml"
    env = runner_env(ws, event_name="pull_request", payload=pr_event(["bug"]), api_url="http://127.0.0.1:9",
                     inputs={"dataset": datasets, "baseline": "base/results.json", "comment": "never",
                             "upload-artifacts": "false", "gate-changes": "fail", **attack.inputs},
                     extra={**ENV, "EVALGATE_JUDGE_SHARED_CACHE": "none"})
    if attack.agent:
        state.reset(attack.agent[2], ("c01",))
    lines: list[str] = []
    with monkeypatch.context() as patch:
        patch.chdir(ws.workspace)
        code = run_action(env, emit=lines.append)
    document = results(ws.workspace / "evalgate-results")
    text = listed_text(attack)
    gate = document["gate"]
    shown = [item["text"] for item in gate.get("loosened") or []] + gate["reasons"]
    assert any(text in line for line in shown), (attack.name, shown)
    assert code == 1, "\n".join(lines)
    assert text.replace("_", "\\_") in ws.summary() or text in ws.summary()
    if attack.name == "20 easy cases added":  # the comment's and the summary's dataset line
        assert "dataset changes against the base run: 20 case(s) added: easy01 (cases.yaml:" in ws.summary()


# ---- the pure comparison of the settings added ------------------------------------------------------------

@pytest.mark.parametrize(("change", "text"), [
    ({"repeat": 1}, "repeat 3 → 1 (repeat_rule majority: fewer tries to show a flaky case)"),
    ({"answer_source": {"target": "recorded", "identity": "b"}},
     "target http → recorded: the answers are read from files instead of the live system"),
    ({"answer_source": {"target": "command", "identity": "b"}}, "target http → command: the answers come from "
                                                               "another system"),
    ({"answer_source": {"target": "http", "identity": "b"}},
     "target http: the answers come from elsewhere (its endpoint, command, model or response mapping changed)"),
    ({"judge": {**JUDGE, "provider": "none"}}, "judge_provider openai → none: judged metrics are skipped, not scored"),
    ({"judge": {**JUDGE, "temperature": 1.0}}, "another judge: temperature 0 → 1 (its scores are not the base's "
                                               "evidence)"),
    ({"judge": {**JUDGE, "temperatures": {"correctness": 1.5}}}, "another judge: temperatures {} → {correctness: 1.5}"
                                                                 " (its scores are not the base's evidence)"),
    ({"judge": {**JUDGE, "samples": 3, "seed": 2}}, "another judge: samples 1 → 3, seed 1 → 2 (its scores are not "
                                                    "the base's evidence)"),
    ({"judge": {**JUDGE, "base_url": "http://127.0.0.1:9999"}}, "another judge: base_url https://judge.example → "
                                                                "http://127.0.0.1:9999 (its scores are not the base's "
                                                                "evidence)"),
    ({"judge": {**JUDGE, "output": "prompt"}}, "another judge: output auto → prompt (its scores are not the base's "
                                               "evidence)"),
    ({"simulator": "sim-b"}, "simulated user model sim-a → sim-b"),
    ({"metric_definitions": {"exact": {"digest": "d2", "origin": "file://checks.py:exact"}}},
     "metric exact's definition changed (file://checks.py:exact)"),
    ({"suites": {"": "s0", "support": "s2"}}, "suite support's metric settings changed (metrics, exclude_metrics, "
                                              "options, category_metrics, kind or valid)"),
    ({"suites": {"": "s9", "support": "s1"}}, "evalgate.yaml's metric settings changed (metrics, exclude_metrics, "
                                              "options, category_metrics, kind or valid)"),
    ({"max_answer_chars": 1_000_000}, "max_answer_chars 20000 → 1000000 (longer answers are scored instead of "
                                      "errored)"),
    ({"traces": False}, "traces on → off (trajectory cases are checked from the answer's own tool list)"),
    ({"pairwise": False}, "pairwise on → off (the judge's pairwise tests leave the regression decision)"),
])
def test_each_recorded_run_setting_that_loosens_is_listed_once(change: dict[str, Any], text: str) -> None:
    found = loosenings(full(), full(**change))
    assert [item["text"] for item in found] == [text]


@pytest.mark.parametrize("change", [
    {"repeat": 5}, {"answer_source": {"target": "http", "identity": "a"}}, {"max_answer_chars": 5000},
    {"traces": True}, {"suites": {"": "s0", "support": "s1", "new": "s3"}},
    {"metric_definitions": {"exact": {"digest": "d1", "origin": "file://checks.py:exact"},
                            "new": {"digest": "d9", "origin": "x"}}},
    {"judge": {**JUDGE}},
])
def test_unchanged_or_stricter_run_settings_are_not_listed(change: dict[str, Any]) -> None:
    assert loosenings(full(), full(**change)) == []


def test_with_repeat_rule_any_more_repeats_are_the_looser_way() -> None:
    base = full(repeat_rule="any")
    assert [i["kind"] for i in loosenings(base, full(repeat_rule="any", repeat=5))] == ["repeat"]
    assert loosenings(base, full(repeat_rule="any", repeat=1)) == []


def test_a_judge_added_where_the_base_had_none_is_not_a_loosening() -> None:
    assert loosenings(full(judge={**JUDGE, "provider": "none"}), full()) == []


def test_a_base_policy_of_version_1_compares_what_it_recorded_only() -> None:
    assert loosenings(policy(), full(repeat=1, judge={**JUDGE, "provider": "none"})) == []


# ---- the expectation digest and the dataset comparison ------------------------------------------------------

def test_the_expectation_digest_follows_expectations_not_answers_nor_descriptions() -> None:
    from evalgate.model import Case
    from evalgate.runner.engine import CasePlan
    from evalgate.runner.expectations import ExpectationDigests

    digests = ExpectationDigests()
    plan, other_plan = CasePlan(metrics=[], options=None), CasePlan(metrics=[], options=None, thresholds={"x": None})
    base = {"id": "c1", "input": "q", "expected_sources": ["a"], "output": "ans", "sources": ["a"]}
    first = digests.digest(Case(**base), plan)
    assert len(first) == 16 and first == digests.digest(Case(**base), plan)
    same = [{"output": "another answer", "sources": ["b"], "tools_used": ["t"], "latency_ms": 3.0},
            {"description": "reworded", "difficulty": "hard"}, {"risk_level": "critical"}]
    for change in same:
        assert digests.digest(Case(**{**base, **change}), plan) == first, change
    edited = [{"expected_sources": ["b"]}, {"input": "an easier question"}, {"expected_sources": None},
              {"suite": "lenient"}, {"assert": [{"metric": "hit_rate", "threshold": 0}]},
              {"rules": [{"type": "contains", "value": "x"}]}, {"retrieval_context": ["c"]}]
    for change in edited:
        assert digests.digest(Case(**{**base, **change}), plan) != first, change
    assert digests.digest(Case(**base), other_plan) != first  # another plan: metrics, per-case thresholds


def record(case_id: str, value: float, *, risk: str = "medium", expectation: str | None = "e",
           source: str = "cases.yaml:1") -> dict[str, Any]:
    return {"id": case_id, "source": source, "risk_level": risk, "status": "passed" if value >= 0.8 else "failed",
            "passed": value >= 0.8, "repeat": 0, "expectation": expectation,
            "metrics": {"hit_rate": {"value": value}}}


def test_the_comparison_finds_edited_demoted_and_added_cases_exactly() -> None:
    from evalgate.verdict.compare import compare_runs

    base = {"results": [record("a", 1.0, risk="critical"), record("b", 1.0), record("c", 1.0, expectation=None),
                        record("gone", 1.0, source="cases.yaml:9")],
            "thresholds": {"hit_rate": {"min": 0.8}}}
    head = {"results": [record("a", 0.0, source="cases.yaml:2"), record("b", 1.0, expectation="f",
                                                                        source="cases.yaml:5"),
                        record("c", 1.0), record("new", 1.0, source="cases.yaml:7")],
            "thresholds": {"hit_rate": {"min": 0.8}}}
    comparison = compare_runs(base, head)
    assert comparison["dataset"] == {"edited": ["b"], "demoted": ["a"], "expectations_unknown": 1,
                                     "located": {"b": "cases.yaml:5", "a": "cases.yaml:2", "new": "cases.yaml:7",
                                                 "gone": "cases.yaml:9"}}
    assert comparison["cases"]["new"] == ["new"] and comparison["cases"]["removed"] == ["gone"]


def test_a_threshold_must_hold_on_the_base_runs_cases_when_new_ones_lift_the_average() -> None:
    from evalgate.verdict.compare import compare_runs, diluted_reasons

    values = [1.0] * 7 + [0.0] * 3  # 0.7 on the base's cases, 27/30 = 0.9 with 20 new perfect cases
    base = {"results": [record(f"c{i}", 1.0) for i in range(10)], "thresholds": {"hit_rate": {"min": 0.8}}}
    head = {"results": [record(f"c{i}", v) for i, v in enumerate(values)]
            + [record(f"easy{i}", 1.0) for i in range(20)], "thresholds": {"hit_rate": {"min": 0.8}}}
    comparison = compare_runs(base, head)
    assert comparison["diluted"] == [{"metric": "hit_rate", "cases": 10, "average": pytest.approx(0.7),
                                      "threshold": {"min": 0.8}, "new": 20}]
    assert diluted_reasons(comparison) == ["hit_rate on the 10 case(s) the base run had: average 0.700 misses "
                                           "threshold min 0.8 (the 20 new case(s) do not count towards it)"]
    no_new = {**head, "results": head["results"][:10]}  # the run's own average already fails: said once, there
    assert compare_runs(base, no_new)["diluted"] == []
    lower = {**head, "thresholds": {"hit_rate": {"max": 0.75}}}  # an upper bound: 0.7 holds on the base's cases
    assert compare_runs(base, lower)["diluted"] == []


def test_the_dataset_line_names_the_first_cases_with_file_and_line() -> None:
    from evalgate.verdict.policy import dataset_line

    cases = {"new": [f"n{i}" for i in range(7)], "edited": ["b"], "removed": [],
             "located": {"n0": "cases.yaml:3", "b": "cases.yaml:5"}}
    assert dataset_line(cases) == {
        "added": 7, "edited": 1, "removed": 0,
        "text": "dataset changes against the base run: 7 case(s) added: n0 (cases.yaml:3), n1, n2, n3, n4 (+2 more); "
                "1 case(s) with edited expectations: b (cases.yaml:5)"}
    assert dataset_line({"new": [], "edited": [], "removed": []}) is None


# ---- loosening paths found by review (issue 30's "ten more"), through evalgate run ---------------------------

def outputs_file(name: str) -> Callable[[list[dict[str, Any]], Path], None]:
    """Answers moved out of the dataset into ``name`` (the recorded target's ``outputs_file``)."""
    def apply(cases: list[dict[str, Any]], folder: Path) -> None:
        lines = [json.dumps({"id": c["id"], "output": c.pop("output"), "sources": c.pop("sources")}) for c in cases]
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")

    return apply


def both(*edits: Callable[[list[dict[str, Any]], Path], None]) -> Callable[[list[dict[str, Any]], Path], None]:
    def apply(cases: list[dict[str, Any]], folder: Path) -> None:
        for edit in edits:
            edit(cases, folder)

    return apply


PLAIN = {"thresholds": {"hit_rate": 0.8}}
REVIEWED: list[tuple[str, Suite, Suite, str]] = [
    ("evalgate.yaml options (k)", Suite(config={**PLAIN, "options": {"k": 5}}),
     Suite(config={**PLAIN, "options": {"k": 50}}), "evalgate.yaml's metric settings changed"),
    ("evalgate.yaml exclude_metrics", Suite(), Suite(config={**PLAIN, "exclude_metrics": ["mrr"]}),
     "evalgate.yaml's metric settings changed"),
    ("max_answer_chars raised", Suite(), Suite(config={**PLAIN, "max_answer_chars": 5_000_000}),
     "max_answer_chars 1000000 → 5000000"),
    ("a case's input edited", Suite(), Suite(edit=c01(lambda c: c.update({"input": "an easier question"}))),
     "1 case(s) with edited expectations"),
    ("another outputs file", Suite(config={**PLAIN, "outputs_file": "a.jsonl"}, edit=outputs_file("a.jsonl")),
     Suite(config={**PLAIN, "outputs_file": "b.jsonl"}, edit=outputs_file("b.jsonl")),
     "target recorded: the answers come from elsewhere (the outputs file changed)"),
    ("judge temperature", Suite(expected_output=True, config=JUDGED),
     Suite(expected_output=True, config={**JUDGED, "judge_temperature": 1.5}), "another judge: temperature 0 → 1.5"),
    ("judge samples", Suite(expected_output=True, config=JUDGED),
     Suite(expected_output=True, config={**JUDGED, "judge_samples": 3}), "another judge: samples 1 → 3"),
    ("judge base URL", Suite(expected_output=True, config=JUDGED), Suite(expected_output=True, config=JUDGED),
     "another judge: base_url"),
]


@pytest.mark.parametrize(("name", "before", "after", "text"), REVIEWED, ids=[r[0] for r in REVIEWED])
def test_a_reviewed_setting_changed_by_the_pr_is_listed_and_fails(
        name: str, before: Suite, after: Suite, text: str, tmp_path: Path, cli: Callable[..., Ran],
        judge: str) -> None:
    base_folder = configure(before, "", judge).write(tmp_path / "base")
    flags = ("--calibration", "trust")
    assert cli("run", "-d", "cases.yaml", "-o", "out", *flags, cwd=base_folder, env=ENV).returncode == 0
    if name == "judge base URL":  # the same judge reached under another host name
        after = Suite(expected_output=True, config={**JUDGED, "judge_base_url": judge.replace("127.0.0.1",
                                                                                               "localhost")})
    folder = configure(after, "", judge).write(tmp_path / "pr")
    run = cli("run", "-d", "cases.yaml", "-o", "out", "--baseline", str(base_folder / "out" / "results.json"),
              "--gate-changes", "fail", *flags, cwd=folder, env={**PR_ENV, **ENV})
    loosened = [item["text"] for item in results(folder / "out")["gate"]["loosened"]]
    assert any(text in line for line in loosened), loosened
    assert run.returncode == 1, run.stdout + run.stderr


def test_target_and_judge_settings_the_workflow_gives_per_run_are_not_the_prs_changes(
        tmp_path: Path, cli: Callable[..., Ran], agent: tuple[Agent, str], judge: str) -> None:
    """An agent and a judge started by the workflow on free ports: their URLs differ from run to run, set by the
    workflow (``EVALGATE_TARGET_URL``, ``EVALGATE_JUDGE_BASE_URL``), which the pull request cannot change."""
    state, url = agent
    state.reset("good")
    config = {"thresholds": {"hit_rate": 0.8}, "target": "http", "judge_provider": "openai", "judge_model": "strict"}
    suite = Suite(config=config)
    base_folder = suite.write(tmp_path / "base")
    flags = ("--calibration", "trust")
    env = {**ENV, "EVALGATE_TARGET_URL": url, "EVALGATE_JUDGE_BASE_URL": judge}
    assert cli("run", "-d", "cases.yaml", "-o", "out", *flags, cwd=base_folder, env=env).returncode == 0
    folder = suite.write(tmp_path / "pr")
    moved = {**env, "EVALGATE_TARGET_URL": url.replace("127.0.0.1", "localhost"),
             "EVALGATE_JUDGE_BASE_URL": judge.replace("127.0.0.1", "localhost")}
    run = cli("run", "-d", "cases.yaml", "-o", "out", "--baseline", str(base_folder / "out" / "results.json"),
              "--gate-changes", "fail", *flags, cwd=folder, env={**PR_ENV, **moved})
    assert run.returncode == 0, run.stdout + run.stderr
    assert results(folder / "out")["gate"]["loosened"] == []
    # the same URLs written by the pull request into its evalgate.yaml are its change: listed
    Suite(config={**config, "target_url": moved["EVALGATE_TARGET_URL"]}).write(folder)
    run = cli("run", "-d", "cases.yaml", "-o", "out", "--baseline", str(base_folder / "out" / "results.json"),
              "--gate-changes", "fail", *flags, cwd=folder,
              env={**PR_ENV, **{k: v for k, v in env.items() if k != "EVALGATE_TARGET_URL"}})
    assert [item["kind"] for item in results(folder / "out")["gate"]["loosened"]] == ["answer_source"]
    assert run.returncode == 1
