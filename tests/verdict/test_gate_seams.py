"""Issue 30, the seams between its pieces, tried as a pull request's author would (the base branch's run
passes; the PR's bad answers alone fail; the same plus one change, as a pull_request run with
``--gate-changes fail`` and the base run as baseline, is listed and fails — through ``evalgate run``,
``evalgate.cli.main`` in this process):

* ``expect_empty: true`` (an empty answer is the right one) added to the case whose answer went empty is an
  edited expectation; no suite block, evalgate.yaml or dataset-level default can set it;
* a code check's ``direction`` is recorded in ``gate_policy.directions`` and flipping it is listed; no
  evalgate.yaml, declaration or ``assert:`` entry can give a built-in metric a direction;
* the workflow's trust settings (``untrusted-checkout``, ``allow-pr-code``, ``comment-author``) are inputs
  only: the checkout's evalgate.yaml cannot name them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalgate.verdict.policy import loosenings
from tests.support.gate import ENV, PR_ENV, Ran, Suite, full, results

RULES = [{"type": "not_contains", "value": "password"}]


def with_rules(empty: tuple[str, ...] = (), expect_empty: tuple[str, ...] = ()
               ) -> Callable[[list[dict[str, Any]], Path], None]:
    """Every case checks its answer with ``not_contains`` rules; the ``empty`` ids answer ``""`` (their sources
    stay right); the ``expect_empty`` ids say an empty answer is the right one."""
    def apply(cases: list[dict[str, Any]], folder: Path) -> None:
        for entry in cases:
            entry["rules"] = list(RULES)
            if entry["id"] in empty:
                entry["output"] = ""
            if entry["id"] in expect_empty:
                entry["expect_empty"] = True

    return apply


def _pr(cli: Callable[..., Ran], folder: Path, base: Path, changes: str = "fail") -> tuple[Ran, dict[str, Any]]:
    run = cli("run", "-d", "cases.yaml", "-o", "out", "--baseline", str(base / "results.json"),
              "--gate-changes", changes, cwd=folder, env={**PR_ENV, **ENV})
    return run, results(folder / "out")


def test_expect_empty_added_to_the_case_whose_answer_went_empty_is_an_edited_expectation(
        tmp_path: Path, cli: Callable[..., Ran]) -> None:
    base = Suite(edit=with_rules()).write(tmp_path / "base")
    assert cli("run", "-d", "cases.yaml", "-o", "out", cwd=base, env=ENV).returncode == 0
    alone, document = _pr(cli, Suite(edit=with_rules(empty=("c01",))).write(tmp_path / "pr"), base / "out")
    assert alone.returncode == 1, alone.stdout + alone.stderr  # an empty answer is missing evidence
    assert {r["id"]: r["status"] for r in document["results"]}["c01"] == "errored"
    loose = Suite(edit=with_rules(empty=("c01",), expect_empty=("c01",)))
    run, document = _pr(cli, loose.write(tmp_path / "loose"), base / "out")
    listed = [item["text"] for item in document["gate"]["loosened"]]
    assert any(line.startswith("1 case(s) with edited expectations") and "c01 (cases.yaml:" in line
               for line in listed), listed
    assert document["gate"]["dataset_changes"]["edited"] == 1
    assert run.returncode == 1, run.stdout + run.stderr
    assert "with edited expectations" in run.stdout
    reported, document = _pr(cli, loose.write(tmp_path / "reported"), base / "out", changes="report")
    assert reported.returncode == 0, reported.stdout + reported.stderr  # the change passes: only its listing stops it
    assert {r["id"]: r["status"] for r in document["results"]}["c01"] == "passed"


def test_expect_empty_is_part_of_the_expectation_digest_on_a_case_and_on_a_turn() -> None:
    from evalgate.model import Case
    from evalgate.runner.engine import CasePlan
    from evalgate.runner.expectations import ExpectationDigests

    digests, plan = ExpectationDigests(), CasePlan(metrics=[], options=None)
    case = {"id": "c1", "input": "q", "output": ""}
    assert digests.digest(Case(**case), plan) != digests.digest(Case(**case, expect_empty=True), plan)
    turns = [{"input": "hello", "output": ""}, {"input": "and now?", "output": ""}]
    marked = [turns[0], {**turns[1], "expect_empty": True}]
    assert digests.digest(Case(id="t", turns=turns), plan) != digests.digest(Case(id="t", turns=marked), plan)
    assertion = {"check": "file://checks.py:error_rate", "direction": "lower"}
    assert digests.digest(Case(**case, assertions=[assertion]), plan) != digests.digest(
        Case(**case, assertions=[{**assertion, "direction": "higher"}]), plan)


@pytest.mark.parametrize(("where", "text", "message"), [
    ("cases.yaml", "suite: {name: support, expect_empty: true}\ncases:\n  - {id: a, input: q, output: ''}\n",
     "cases.yaml:1: suite: unknown key 'expect_empty'"),
    ("cases.yaml", "defaults: {expect_empty: true}\ncases:\n  - {id: a, input: q, output: ''}\n",
     "unknown top-level key 'defaults'"),
    ("evalgate.yaml", "expect_empty: true\n", "evalgate.yaml:1: unknown key 'expect_empty'"),
    ("evalgate.yaml", "direction: lower\n", "evalgate.yaml:1: unknown key 'direction'"),
    ("evalgate.yaml", "metrics:\n  - {name: hit_rate, check: 'file://checks.py:f', direction: lower}\n",
     "metric 'hit_rate' is a built-in metric"),
    ("cases.yaml", "cases:\n  - {id: a, input: q, output: x, assert: [{metric: hit_rate, direction: lower}]}\n",
     "'direction' is for a code check"),
    ("cases.yaml", "cases:\n  - {id: a, input: q, output: x, assert: [{check: hit_rate, direction: lower}]}\n",
     "cases.yaml:2 assert[0]: check 'hit_rate' is a built-in metric, not a code check"),
    ("evalgate.yaml", "untrusted_checkout: false\n", "evalgate.yaml:1: unknown key 'untrusted_checkout'"),
    ("evalgate.yaml", "allow_pr_code: true\n", "evalgate.yaml:1: unknown key 'allow_pr_code'"),
    ("evalgate.yaml", "comment_author: someone\n", "evalgate.yaml:1: unknown key 'comment_author'"),
])
def test_the_checkout_cannot_set_expect_empty_for_a_suite_invert_a_built_in_nor_name_a_trust_input(
        where: str, text: str, message: str, tmp_path: Path, cli: Callable[..., Ran]) -> None:
    (tmp_path / "checks.py").write_text("def f(case, answer):\n    return 1.0\n", encoding="utf-8")
    if where != "cases.yaml":
        (tmp_path / "cases.yaml").write_text("cases:\n  - {id: a, input: q, output: x}\n", encoding="utf-8")
    (tmp_path / where).write_text(text, encoding="utf-8")
    run = cli("run", "-d", "cases.yaml", "-o", "out", cwd=tmp_path, env={**PR_ENV, **ENV})
    assert run.returncode == 2, run.stdout + run.stderr
    assert message in run.stderr and "Traceback" not in run.stderr, run.stderr


ERROR_RATE = "def error_rate(case, answer):\n    return answer.output.count('ERR') / 10.0\n"


def _error_rate_suite(folder: Path, direction: str, errors: tuple[int, ...]) -> Path:
    folder.mkdir(parents=True)
    (folder / "checks.py").write_text(ERROR_RATE, encoding="utf-8")
    (folder / "evalgate.yaml").write_text(yaml.safe_dump({"metrics": [
        {"name": "error_rate", "check": "file://checks.py:error_rate", "direction": direction}]}), encoding="utf-8")
    cases = [{"id": f"c{i:02d}", "input": f"q{i}", "output": "ERR " * count + "ok"} for i, count in enumerate(errors)]
    (folder / "cases.yaml").write_text(yaml.safe_dump({"cases": cases}), encoding="utf-8")
    return folder


def test_a_check_direction_is_recorded_and_flipping_it_is_listed(tmp_path: Path, cli: Callable[..., Ran]) -> None:
    low, high = (1, 2, 1, 2, 1, 2, 1, 2) * 5, (4, 5, 4, 5, 4, 5, 4, 5) * 5  # the error rate rises 0.15 → 0.45
    base = _error_rate_suite(tmp_path / "base", "lower", low)
    assert cli("run", "-d", "cases.yaml", "-o", "out", cwd=base, env=ENV).returncode == 0
    assert results(base / "out")["gate_policy"]["directions"]["error_rate"] == "lower"
    flags = ("--fail-on-regression",)
    alone = _error_rate_suite(tmp_path / "pr", "lower", high)
    run = cli("run", "-d", "cases.yaml", "-o", "out", "--baseline", str(base / "out" / "results.json"),
              "--gate-changes", "fail", *flags, cwd=alone, env={**PR_ENV, **ENV})
    assert run.returncode == 1, run.stdout + run.stderr  # the rise is a regression
    assert not results(alone / "out")["gate"]["loosened"]
    flipped = _error_rate_suite(tmp_path / "flipped", "higher", high)
    run = cli("run", "-d", "cases.yaml", "-o", "out", "--baseline", str(base / "out" / "results.json"),
              "--gate-changes", "fail", *flags, cwd=flipped, env={**PR_ENV, **ENV})
    document = results(flipped / "out")
    assert document["gate_policy"]["directions"]["error_rate"] == "higher"
    text = "metric error_rate's direction lower → higher (a rise now counts as an improvement)"
    assert text in [item["text"] for item in document["gate"]["loosened"]]
    assert run.returncode == 1 and text in run.stdout, run.stdout + run.stderr


def test_direction_changes_are_listed_either_way_and_only_for_metrics_both_runs_have() -> None:
    base = full(directions={"error_rate": "lower", "hit_rate": "higher"})
    found = loosenings(base, full(directions={"error_rate": "higher", "hit_rate": "higher"}))
    assert [(i["kind"], i["text"]) for i in found] == [
        ("direction", "metric error_rate's direction lower → higher (a rise now counts as an improvement)")]
    found = loosenings(full(directions={"latency": "higher"}), full(directions={"latency": "lower"}))
    assert [i["text"] for i in found] == ["metric latency's direction higher → lower (a rise now counts as a "
                                          "regression)"]
    assert loosenings(base, full(directions={"error_rate": "lower", "new": "lower"})) == []
    assert loosenings(full(), full(directions={"error_rate": "higher"})) == []  # a base that recorded none


ADAPTIVE = {"on": True, "budget": "50%", "critical_pass_probability": 0.9}


def test_repeat_adaptive_turned_on_or_a_lower_critical_pass_probability_is_listed() -> None:
    fixed = full(adaptive={**ADAPTIVE, "on": False})
    assert [i["text"] for i in loosenings(fixed, full(adaptive=ADAPTIVE))] == [
        "repeat: adaptive (uncertain and critical cases re-tried until a sequential test clears them; the base run "
        "repeated a fixed number of times)"]
    lower = full(adaptive={**ADAPTIVE, "critical_pass_probability": 0.6})
    assert [i["text"] for i in loosenings(full(adaptive=ADAPTIVE), lower)] == [
        "critical_pass_probability 0.9 → 0.6 (a critical case is cleared at a lower pass rate)"]
    assert loosenings(lower, full(adaptive=ADAPTIVE)) == []  # stricter
    assert loosenings(full(adaptive=ADAPTIVE), full(adaptive={**ADAPTIVE, "budget": "200"})) == []  # recorded only
    assert loosenings(full(adaptive=ADAPTIVE), full(adaptive={**ADAPTIVE, "critical_pass_probability": 0.95})) == []
    assert loosenings(full(adaptive=ADAPTIVE), fixed) == []
    assert loosenings(full(), full(adaptive=ADAPTIVE)) == []  # a base that recorded none


def test_the_prs_repeat_adaptive_and_critical_pass_probability_are_recorded_listed_and_fail(
        tmp_path: Path, cli: Callable[..., Ran]) -> None:
    base = Suite().write(tmp_path / "base")
    assert cli("run", "-d", "cases.yaml", "-o", "out", cwd=base, env=ENV).returncode == 0
    recorded = results(base / "out")["gate_policy"]["adaptive"]
    assert recorded["on"] is False and recorded["critical_pass_probability"] == 0.9 and recorded["budget"]
    pr = Suite(config={"thresholds": {"hit_rate": 0.8}, "repeat": "adaptive",
                       "critical_pass_probability": 0.6}).write(tmp_path / "pr")
    run, document = _pr(cli, pr, base / "out")
    assert document["gate_policy"]["adaptive"] == {**recorded, "on": True, "critical_pass_probability": 0.6}
    listed = [item["text"] for item in document["gate"]["loosened"]]
    assert any(line.startswith("repeat: adaptive (") and "evalgate.yaml" in line for line in listed), listed
    assert run.returncode == 1, run.stdout + run.stderr


# ---- the workflow's untrusted-checkout mark applies to the whole run, not only to secret destinations ---------

def test_the_mark_makes_the_checkout_untrusted_in_any_event() -> None:
    from evalgate.config.trust import untrusted_checkout

    dispatch = {"GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": "workflow_dispatch"}
    assert not untrusted_checkout(dispatch)
    for value in ("true", "1", "yes"):
        assert untrusted_checkout({**dispatch, "EVALGATE_UNTRUSTED_CHECKOUT": value})
    assert untrusted_checkout({"EVALGATE_UNTRUSTED_CHECKOUT": "true"})  # a step outside Actions' event names
    assert not untrusted_checkout({**dispatch, "EVALGATE_UNTRUSTED_CHECKOUT": "false"})


LOWERED = {"thresholds": {"hit_rate": 0.5}}
THREE_BAD = ("c01", "c02", "c03")  # hit_rate 0.7: under the base's 0.8, over the PR's 0.5


def test_a_marked_dispatch_run_fails_the_prs_loosening_under_gate_changes_fail(
        tmp_path: Path, cli: Callable[..., Ran]) -> None:
    """A ``workflow_dispatch`` run that evaluates a pull request's branch (a "/evaluate" command) and marks it
    ``EVALGATE_UNTRUSTED_CHECKOUT``: the PR's lowered threshold fails like in a pull_request run (it was
    "reported only", as for a push of the repository's own code)."""
    base = Suite(critical=()).write(tmp_path / "base")
    assert cli("run", "-d", "cases.yaml", "-o", "out", cwd=base, env=ENV).returncode == 0
    dispatch = {"GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": "workflow_dispatch", **ENV}
    loose = Suite(critical=(), bad=THREE_BAD, config=LOWERED)
    args = ("run", "-d", "cases.yaml", "-o", "out", "--baseline", str(base / "out" / "results.json"),
            "--gate-changes", "fail")
    own = cli(*args, cwd=loose.write(tmp_path / "own"), env=dispatch)
    assert own.returncode == 0, own.stdout + own.stderr  # the repository's own run: reported only
    assert "hit_rate min 0.8 → min 0.5" in own.stdout
    marked = cli(*args, cwd=loose.write(tmp_path / "marked"), env={**dispatch, "EVALGATE_UNTRUSTED_CHECKOUT": "true"})
    assert marked.returncode == 1, marked.stdout + marked.stderr
    assert "this pull request loosens the gate (hit_rate min 0.8 → min 0.5" in marked.stdout


def test_the_actions_untrusted_checkout_input_marks_the_whole_run(
        tmp_path: Path, cli: Callable[..., Ran], monkeypatch: pytest.MonkeyPatch) -> None:
    from evalgate.cli.action import run_action
    from tests.support.action import make_workspace, runner_env

    base = Suite(critical=()).write(tmp_path / "base")
    assert cli("run", "-d", "cases.yaml", "-o", "out", cwd=base, env=ENV).returncode == 0
    codes = {}
    for mark in ("false", "true"):
        ws = make_workspace(tmp_path / f"runner-{mark}", ())
        Suite(critical=(), bad=THREE_BAD, config=LOWERED).write(ws.workspace)
        (ws.workspace / "base").mkdir()
        for name in ("results.json", "results.db"):
            (ws.workspace / "base" / name).write_bytes((base / "out" / name).read_bytes())
        env = runner_env(ws, event_name="workflow_dispatch", payload={"inputs": {}}, api_url="http://127.0.0.1:9",
                         inputs={"dataset": "cases.yaml", "baseline": "base/results.json", "comment": "never",
                                 "upload-artifacts": "false", "gate-changes": "fail", "untrusted-checkout": mark},
                         extra={**ENV, "EVALGATE_JUDGE_SHARED_CACHE": "none"})
        lines: list[str] = []
        with monkeypatch.context() as patch:
            patch.chdir(ws.workspace)
            codes[mark] = run_action(env, emit=lines.append)
        gate = results(ws.workspace / "evalgate-results")["gate"]
        assert any("hit_rate min 0.8 → min 0.5" in item["text"] for item in gate["loosened"]), gate
    assert codes == {"false": 0, "true": 1}


def test_the_mark_in_the_steps_env_guards_secrets_in_the_action_too(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """``EVALGATE_UNTRUSTED_CHECKOUT`` on the Action's step (not the input) is the same mark: the checkout's
    ``judge_base_url`` is refused, as with the input (before, the env made the run untrusted for evidence only)."""
    from evalgate.cli.action import run_action
    from tests.support.action import make_workspace, runner_env

    ws = make_workspace(tmp_path / "runner", ())
    Suite(config={"thresholds": {"hit_rate": 0.8}, "judge_provider": "openai",
                  "judge_base_url": "http://127.0.0.1:9/v1"}).write(ws.workspace)
    env = runner_env(ws, event_name="workflow_dispatch", payload={"inputs": {}}, api_url="http://127.0.0.1:9",
                     inputs={"dataset": "cases.yaml", "comment": "never", "upload-artifacts": "false"},
                     extra={**ENV, "EVALGATE_UNTRUSTED_CHECKOUT": "true"})
    lines: list[str] = []
    with monkeypatch.context() as patch:
        patch.chdir(ws.workspace)
        code = run_action(env, emit=lines.append)
    assert code == 2, "\n".join(lines)
    assert any("judge_base_url from the checkout refused" in line for line in lines), lines
