"""``repeat: adaptive``: sequential boundaries against scipy, the critical SPRT's exact operating
characteristics, the adaptive comparison's three-valued verdict, and whole runs against a scripted flaky
agent over loopback HTTP (its one flipped critical case resolved by re-trials, both ways; a budget cap)."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import random
import textwrap
from pathlib import Path
from typing import Any

import pytest
from scipy.stats import binom, multivariate_normal, norm

from evalgate.config.budget import AUTO_CRITICAL_TRIALS, parse_budget
from evalgate.config.settings import Settings
from evalgate.errors import UserError
from evalgate.report.html import render_html
from evalgate.report.markdown import render_comment, render_comparison, render_summary
from evalgate.verdict import sequential
from evalgate.verdict.compare import compare_runs
from tests.servers.agent_server import AgentServer


@pytest.mark.parametrize("spending", ["obrien-fleming", "pocock"])
@pytest.mark.parametrize("alpha", [0.05, 0.05 * 2 / 3, 0.01])
def test_two_look_bounds_spend_alpha_as_scipy_integrates_it(alpha: float, spending: Any) -> None:
    c1, c2 = sequential.boundaries(alpha, (0.7, 1.0), spending)
    first = sequential.spent(0.7, alpha, spending)
    assert math.isclose(norm.sf(c1), first, rel_tol=1e-9)
    rho = math.sqrt(0.7)
    joint = multivariate_normal([0, 0], [[1, rho], [rho, 1]])
    second = norm.cdf(c1) - joint.cdf([c1, c2])  # P(Z1 < c1, Z2 ≥ c2)
    assert math.isclose(second, alpha - first, abs_tol=2e-6)


def test_three_looks_and_the_known_obrien_fleming_values() -> None:
    fractions = (1 / 3, 2 / 3, 1.0)
    bounds = sequential.boundaries(0.025, fractions)
    cov = [[math.sqrt(min(a, b) / max(a, b)) for b in fractions] for a in fractions]
    crossed = 1 - multivariate_normal([0, 0, 0], cov, abseps=1e-7).cdf(list(bounds))
    assert math.isclose(crossed, 0.025, abs_tol=5e-5)
    assert [round(b, 2) for b in bounds] == [3.71, 2.51, 1.99]  # Lan–DeMets OBF, one-sided 0.025 (gsDesign)


def test_the_sequential_p_value_is_the_level_at_which_the_design_just_rejects() -> None:
    c1, c2 = sequential.boundaries(0.03)
    t1 = sequential.DESIGN.fractions[0]
    assert math.isclose(sequential.sequential_p([norm.sf(c1)]), 0.03, rel_tol=1e-6)
    z2 = (c2 - math.sqrt(t1) * 1.0) / math.sqrt(1 - t1)
    assert math.isclose(sequential.sequential_p([norm.sf(1.0), norm.sf(z2)]), 0.03, rel_tol=1e-5)
    assert sequential.look([norm.sf(1.0), norm.sf(z2 + 0.01)], 0.03) == "regression"
    assert sequential.look([norm.sf(1.0), norm.sf(z2 - 0.01)], 0.03) == "no regression"
    assert sequential.look([0.7], 0.03) == "no regression"  # futility: Z1 = −0.52 ≤ −0.3
    assert sequential.look([0.1], 0.03) == "continue"


def test_the_critical_sprt_operating_characteristics_exactly() -> None:
    m = 10
    alpha_case = 0.05 / m
    fine = sequential.critical_operating(0.9, 0.9, alpha_case)
    broken = sequential.critical_operating(0.5, 0.9, alpha_case)
    assert 1 - (1 - fine["fails"]) ** m <= 0.05  # 10 unchanged critical cases at p = 0.9
    assert broken["fails"] >= broken["blocked"] >= 0.95  # a broken one (p = 0.5) is caught
    # the DP against brute force over every sequence of 12 trials (max_trials = 12)
    for p in (0.9, 0.6):
        dp = sequential.critical_operating(p, 0.9, alpha_case, max_trials=12)
        blocked = sum(p ** sum(seq) * (1 - p) ** (12 - sum(seq))
                      for seq in itertools.product([True, False], repeat=12)
                      if sequential.critical_sprt(seq, 0.9, alpha_case, max_trials=12).decision == "blocked")
        assert math.isclose(dp["blocked"], blocked, rel_tol=1e-9)
    # Ville: blocked at ln(1/α) — every failure-only start blocks after k failures, k = ⌈ln(1/α)/ln 5⌉
    walk = sequential.critical_sprt([False] * 5, 0.9, alpha_case)
    assert walk.decision == "blocked" and walk.trials == math.ceil(math.log(1 / alpha_case) / math.log(5))
    two = sequential.critical_operating(0.9, 0.9, 0.04, max_trials=2)  # LR after 2 failures: 25 = 1/0.04
    assert math.isclose(two["blocked"], binom.pmf(2, 2, 0.1), rel_tol=1e-12)


def test_budget_forms_and_errors() -> None:
    assert parse_budget("50%", 201).trials == 101 and parse_budget("auto", 200, 10).trials == 100 + 390
    assert AUTO_CRITICAL_TRIALS == sequential.CRITICAL_MAX_TRIALS - 1
    assert parse_budget("$2.5", 10).dollars == 2.5 and parse_budget("7", 10).trials == 7
    with pytest.raises(UserError, match="adaptive_budget"):
        parse_budget("lots", 10)
    assert Settings(repeat="adaptive").adaptive and Settings(repeat="adaptive").repeat == 1  # type: ignore[arg-type]


def _doc(records: list[dict[str, Any]], adaptive: bool = False) -> dict[str, Any]:
    return {"results": records, "metadata": {"config": {"adaptive": adaptive}}}


def test_an_adaptive_comparison_without_its_second_look_is_inconclusive_and_does_not_fail() -> None:
    rng = random.Random(3)
    base = [{"id": f"c{i}", "status": "passed" if i % 5 else "failed", "repeat": r} for i in range(200) for r in range(3)]
    # head: 10 cases flip to fail, 3 to pass: McNemar p = 0.046, Z1 = 1.68 between futility (−0.3) and c1 (2.51)
    worse = [i for i in range(200) if i % 5][:10]
    head = [{"id": f"c{i}", "status": "failed" if (i % 5 == 0 and i >= 15) or i in worse else "passed",
             "repeat": 0} for i in range(200)]
    rng.shuffle(head)
    comparison = compare_runs(_doc(base), _doc(head, True), resamples=200)
    assert comparison["adaptive"]["decision"] == "inconclusive" and not comparison["regression"]
    assert comparison["verdict"] == "inconclusive"
    assert comparison["inconclusive"][0]["name"] == "pass rate" and "Inconclusive" in comparison["summary"]
    # the re-trials of look 2 decide it: every flipped case fails again against passing base runs 1, 2
    flipped = [r["id"] for r in head if r["status"] == "failed" and int(r["id"][1:]) % 5]
    retried = head + [{"id": i, "status": "failed", "repeat": 1} for i in flipped]
    decided = compare_runs(_doc(base), _doc(retried, True), resamples=200)
    assert len(decided["adaptive"]["looks"]) == 2 and decided["regression"] and decided["verdict"] == "regression"


def test_one_flipped_case_without_adaptive_is_listed_inconclusive() -> None:
    base = [{"id": f"c{i}", "status": "passed", "repeat": 0, "risk_level": "critical" if i == 0 else "medium"}
            for i in range(10)]
    head = [dict(r, status="failed") if r["id"] == "c0" else r for r in base]
    comparison = compare_runs(_doc(base), _doc(head), resamples=200)
    assert comparison["verdict"] == "inconclusive" and not comparison["regression"]
    assert {e["name"] for e in comparison["inconclusive"]} == {"pass rate", "critical cases"}
    assert "repeat: adaptive" in comparison["summary"]


# ── whole runs against a scripted flaky agent over loopback HTTP ──

DATASET = textwrap.dedent("""\
    cases:
      - id: steady-{n}
        input: steady question {n}
        rules: [{{type: regex, value: "Hold"}}]
""")


def _write_dataset(path: Path) -> Path:
    lines = ["cases:"]
    for n in range(4):
        lines += [f"  - id: steady-{n}", f"    input: steady question {n}", '    rules: [{type: regex, value: "Hold"}]']
    lines += ["  - id: wobbly", "    input: wobbly question", "    risk_level: critical",
              '    rules: [{type: regex, value: "Hold"}]']
    path.write_text("\n".join(lines) + "\n")
    return path


def _run(tmp_path: Path, name: str, url: str, **extra: Any) -> dict[str, Any]:
    from evalgate.runner.run import execute

    extra.setdefault("db", str(tmp_path / f"{name}.db"))
    settings = Settings(dataset=[str(tmp_path / "cases.yaml")], target="http", target_url=url,
                        output_dir=str(tmp_path / name), concurrency=1, metric_thresholds={"rules": 0.5}, **extra)
    outcome = asyncio.run(execute(settings, {}, cwd=tmp_path, install_signal_handlers=False))
    return json.loads(outcome.results_path.read_text())


@pytest.mark.parametrize("broken", [False, True])
def test_a_flipped_critical_case_is_resolved_by_re_trials(tmp_path: Path, broken: bool) -> None:
    _write_dataset(tmp_path / "cases.yaml")
    calls = {"wobbly": 0}

    def wobbly(request: dict[str, Any]) -> str:
        calls["wobbly"] += 1
        if calls["wobbly"] <= 3:  # the base run: 3 repeats, every one good
            return "Hold."
        if broken or calls["wobbly"] == 4:  # the PR: its first trial fails; broken: every trial
            return "Drop."
        return "Hold."

    with AgentServer({"steady": "Hold.", "wobbly": wobbly}) as agent:
        url = agent.base_url + "/api/agent/chat"
        _run(tmp_path, "base", url, repeat=3)
        head = _run(tmp_path, "head", url, repeat="adaptive", adaptive_budget="40",
                    baseline=str(tmp_path / "base" / "results.json"),
                    fail_on_regression=True)
    import jsonschema

    from evalgate.store.results_json import SCHEMA_PATH

    jsonschema.validate(head, json.loads(SCHEMA_PATH.read_text()))
    adaptive = head["adaptive"]
    wobbly_trials = [r for r in head["results"] if r["id"] == "wobbly"]
    assert adaptive["trials"]["wobbly"] == len(wobbly_trials) == calls["wobbly"] - 3
    assert all(len([r for r in head["results"] if r["id"] == f"steady-{n}"]) == 1 for n in range(4))
    assert adaptive["critical"]["wobbly"]["decision"] == ("blocked" if broken else "cleared")
    assert head["gate"]["passed"] is (not broken)
    if broken:
        assert len(wobbly_trials) == 2  # two failures: LR 25 ≥ 1/α = 20
        assert any("critical case wobbly failed" in r and "below the required 0.9" in r for r in head["gate"]["reasons"])
    else:
        assert len(wobbly_trials) > 2 and wobbly_trials[0]["status"] == "failed"
    comparison = head["comparison"]
    assert comparison["verdict"] in ("no regression", "inconclusive", "regression")
    # every report shows the re-trials per case
    comment = render_comment(head, run_url=None, artifact_url=None, tag="")
    summary = render_summary(head, run_url=None, artifact_url=None)
    page = render_html(head)
    for text in (comment, summary, page):
        assert "repeat: adaptive" in text and "wobbly" in text
    row = f"| `wobbly` | {len(wobbly_trials)} | {sum(r['status'] == 'passed' for r in wobbly_trials)} |"
    assert row in comment and row in summary
    assert f'<td class="n">{len(wobbly_trials)}</td>' in page


def test_reports_list_the_inconclusive_comparisons_with_what_would_resolve_them() -> None:
    base = [{"id": f"c{i}", "status": "passed", "repeat": 0, "risk_level": "critical" if i == 0 else "medium",
             "source": f"cases.yaml:{i}"} for i in range(10)]
    head = [dict(r, status="failed") if r["id"] == "c0" else r for r in base]
    comparison = compare_runs(_doc(base), _doc(head), resamples=200)
    doc = {"run_id": "r", "results": head, "comparison": comparison, "gate": {"passed": True, "reasons": []},
           "summary": {}, "metrics": {}}
    text = render_comparison(comparison)
    comment = render_comment(doc, run_url=None, artifact_url=None, tag="")
    page = render_html(doc)
    for rendered in (text, comment, page):
        assert "Inconclusive" in rendered and "would resolve: repeat: adaptive" in rendered


def test_a_budget_cap_ends_the_re_trials_and_missing_evidence_does_not_pass(tmp_path: Path) -> None:
    _write_dataset(tmp_path / "cases.yaml")
    seen = {"n": 0}

    def wobbly(request: dict[str, Any]) -> str:
        seen["n"] += 1
        return "Drop." if seen["n"] == 1 else "Hold."

    with AgentServer({"steady": "Hold.", "wobbly": wobbly}) as agent:
        head = _run(tmp_path, "head", agent.base_url + "/api/agent/chat", repeat="adaptive", adaptive_budget="2")
    assert head["adaptive"]["budget_spent"] and head["adaptive"]["retrials"] == 2
    assert head["adaptive"]["critical"]["wobbly"]["decision"] == "undecided"
    assert not head["gate"]["passed"]  # no baseline, a failure, no decision: not a pass
    assert any("re-trials ended before" in r for r in head["gate"]["reasons"])


def test_history_gives_each_case_a_flake_rate_with_its_interval(tmp_path: Path) -> None:
    import subprocess
    import sys

    from statsmodels.stats.proportion import proportion_confint

    from evalgate.store.history import build_history, flaky_case_ids

    _write_dataset(tmp_path / "cases.yaml")
    calls = {"n": 0}

    def wobbly(request: dict[str, Any]) -> str:
        calls["n"] += 1
        return "Drop." if calls["n"] == 2 else "Hold."  # trials: pass fail pass | pass pass

    with AgentServer({"steady": "Hold.", "wobbly": wobbly}) as agent:
        url = agent.base_url + "/api/agent/chat"
        _run(tmp_path, "one", url, repeat=3, db=str(tmp_path / "history.db"))
        _run(tmp_path, "two", url, repeat=2, db=str(tmp_path / "history.db"))
    history = build_history(tmp_path / "history.db")
    assert [(f.case_id, f.passes, f.trials, f.runs) for f in history.flaky] == [("wobbly", 4, 5, 2)]
    flaky = history.flaky[0]
    assert flaky.flake_rate == 1 / 5  # the one failing trial against the majority (passed)
    low, high = proportion_confint(1, 5, alpha=0.05, method="wilson")
    assert math.isclose(flaky.interval[0], low, rel_tol=1e-9) and math.isclose(flaky.interval[1], high, rel_tol=1e-9)
    assert flaky_case_ids(tmp_path / "history.db") == {"wobbly"}
    assert flaky_case_ids(tmp_path / "missing.db") == frozenset()
    shown = subprocess.run([sys.executable, "-m", "evalgate", "history", "--db", str(tmp_path / "history.db")],
                           capture_output=True, text=True, check=True).stdout
    assert "Flakiest cases" in shown and "wobbly" in shown and "4/5" in shown and "20%" in shown


def test_cases_flaky_in_history_join_the_second_look() -> None:
    from evalgate.verdict.adaptive import Plan

    plan = Plan(alpha=0.05, level=0.05 * 2 / 3, flaky_history=frozenset({"c1"}))
    for i in range(40):  # 4 flips to fail, 1 to pass: McNemar p = 6/32, Z1 = 0.89, between −0.3 and c1 = 2.51
        plan.add(f"c{i}", False, i >= 6 or i in (0, 1), [i != 0, True, True])
    plan.first_look()
    # c0 flipped to pass (base run 0 failed), c2…c5 to fail, c1 did not flip but is flaky in history
    assert plan.decision == "continue" and set(plan.stage2) == {f"c{i}" for i in range(6)}
    assert set(plan.wanted()) == set(plan.stage2)


def test_a_score_near_its_threshold_is_uncertain() -> None:
    from evalgate.model import MetricResult, MetricStatus, Threshold
    from evalgate.verdict.adaptive import near_threshold
    from evalgate.verdict.tolerance import Tolerance

    def scored(value: float, bound: float) -> dict[str, MetricResult]:
        return {"relevancy": MetricResult(value=value, threshold=Threshold(op="min", value=bound),
                                          status=MetricStatus.passed)}

    assert near_threshold(scored(0.72, 0.7), {}) and near_threshold(scored(0.65, 0.7), {})
    assert not near_threshold(scored(0.9, 0.7), {}) and not near_threshold(scored(1.0, 0.5), {})
    assert near_threshold(scored(0.85, 0.7), {"relevancy": Tolerance(absolute=0.2)})
    latency = {"latency_ms": MetricResult(value=1100.0, threshold=Threshold(op="max", value=1000.0),
                                          status=MetricStatus.failed)}  # 100 ms off; 5 % of 1000 ms is 50
    assert not near_threshold(latency, {}) and near_threshold(latency, {"latency_ms": Tolerance(absolute=150)})


def test_a_dollar_budget_and_merging_adaptive_shards(tmp_path: Path) -> None:
    import subprocess
    import sys

    _write_dataset(tmp_path / "cases.yaml")
    with AgentServer({"steady": "Hold.", "wobbly": "Drop."}) as agent:
        url = agent.base_url + "/api/agent/chat"
        spent = _run(tmp_path, "dollars", url, repeat="adaptive", adaptive_budget="$0")
        shards = [_run(tmp_path, f"shard{i}", url, repeat="adaptive", adaptive_budget="$0", shard=f"{i}/2")
                  for i in (1, 2)]
    assert spent["adaptive"]["retrials"] == 0 and spent["adaptive"]["budget_spent"]
    assert not spent["gate"]["passed"]  # the critical case failed its one trial: no evidence it meets 0.9
    assert len(shards) == 2
    merged = subprocess.run([sys.executable, "-m", "evalgate", "merge", str(tmp_path / "shard1" / "results.json"),
                             str(tmp_path / "shard2" / "results.json"), "-o", str(tmp_path / "merged")],
                            capture_output=True, text=True)
    assert merged.returncode == 2 and "repeat: adaptive cannot be merged" in merged.stderr
    assert "Traceback" not in merged.stderr
