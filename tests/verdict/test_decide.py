"""``verdict.decide``: the reasons a run's end adds to the gate, in their order, from hand-written ends."""

from __future__ import annotations

from evalgate.config.sections import GateSettings
from evalgate.config.settings import Settings
from evalgate.verdict.aggregate import RunAggregate
from evalgate.verdict.decide import RunEnd, decide, end_reasons, gate_policy, no_gate_fails
from evalgate.verdict.gate import NO_GATE, GatePolicy

GATE = GateSettings.of(Settings())


def test_a_completed_run_adds_only_calibration_failures() -> None:
    end = RunEnd("completed", (), 10, 10)
    assert not end.interrupted
    assert end_reasons(end, ["judge x — calibration: required"], None, GATE) == ["judge x — calibration: required"]


def test_a_signal_names_itself_and_says_whether_every_case_finished() -> None:
    mid = RunEnd("cancelled", ("SIGTERM", "SIGTERM", "SIGINT"), 4, 10)
    assert mid.interrupted
    assert end_reasons(mid, [], None, GATE) == ["interrupted by SIGTERM and SIGINT: run cancelled before every case "
                                                "finished"]
    late = RunEnd("cancelled", ("SIGINT",), 10, 10)
    assert end_reasons(late, [], None, GATE)[0].startswith("interrupted by SIGINT as the run was finishing")
    by_caller = RunEnd("cancelled", (), 3, 10)
    assert end_reasons(by_caller, [], None, GATE) == ["interrupted by the caller: run cancelled before every case "
                                                      "finished"]


def test_the_spending_limit_is_not_an_interruption_and_counts_the_cases_not_run() -> None:
    end = RunEnd("cancelled", (), 6, 10, budget_stop="max_cost $1.00 reached")
    assert not end.interrupted
    assert end_reasons(end, [], None, GATE) == ["run cancelled before every case finished",
                                                "max_cost $1.00 reached; the cases in progress finished, 4 case(s) "
                                                "not run"]


def test_no_gate_fails_only_when_asked() -> None:
    end = RunEnd("completed", (), 1, 1)
    assert end_reasons(end, [], NO_GATE, GATE) == []  # auto, calibration auto: a notice, not a failure
    failing = GateSettings.of(Settings(no_gate="fail"))
    assert no_gate_fails(failing) and end_reasons(end, [], NO_GATE, failing) == [f"{NO_GATE} — no_gate: fail"]
    assert no_gate_fails(GateSettings.of(Settings(calibration="required")))
    assert not no_gate_fails(GateSettings.of(Settings(no_gate="pass", calibration="required")))


def test_the_verdict_follows_the_sections_rules() -> None:
    gate = GateSettings.of(Settings(strict_metrics=True, fail_on_critical=False, min_pass_rate=0.5, max_errored=2))
    assert gate_policy(gate) == GatePolicy(strict=True, fail_on_critical=False, min_pass_rate=0.5, max_errored=2)
    verdict = decide(GATE, RunAggregate(), {}, ["run crashed before every case finished"],
                     RunEnd("crashed", (), 0, 1))
    assert not verdict.passed and verdict.exit_code == 1
    assert verdict.reasons == ["no case was evaluated", "run crashed before every case finished"]
    interrupted = decide(GATE, RunAggregate(), {}, ["x"], RunEnd("cancelled", ("SIGINT",), 0, 1))
    assert interrupted.exit_code == 130
