"""Item 5 of issue #12: SIGINT/SIGTERM are honoured within a second at any size and in every phase.

Before the fix a 100k-case recorded run ignored SIGTERM altogether (it finished with exit 0 8–16 s
later): its cases never wait on the event loop, and the loop's signal handler only runs when the loop
gets a turn; the same held while the datasets were read and checked.

Here: a recorded run in a fresh process gets SIGTERM at stratified random moments (trial i in the i-th
slice of an uninterrupted run's wall time, so start-up, the dataset checks, the run and the writing all
get hit); it must be gone with exit 130 (the 1 s target is bench.hostile's: no timed test, see ``LIMIT_S``), and
what it left must be consistent: nothing at all
(interrupted before any case ran), or results.json with status ``cancelled`` whose cases are exactly the
ones SQLite holds for the run. CI runs 10,000 cases and 6 trials; ``EVALGATE_SLOW=1`` runs the issue's
100,000 cases and 20 trials (≈ 4–7 minutes on 2 busy cores; figures in bench/results/hostile.json). In-process tests
pin the two phases a random moment rarely hits: a long dataset check and a baseline lookup that hangs."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from bench.cases import recorded_dataset
from bench.hostile import check_partial, signal_command, signals
from evalgate.config.settings import build_settings
from evalgate.errors import RunInterrupted
from evalgate.runner import results as results_module
from evalgate.runner import run as run_module
from evalgate.store.reader import BaselineLookup
from tests.hostile.helpers import write_cases
from tests.hostile.servers import Loopback, Out, Seen

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "evalgate" / "schemas" / "results.schema.json").read_text())
LIMIT_S = 5.0
"""Gone well before the work a signal interrupts would have ended (10 s of dataset checking, a 10 s hanging
lookup, slow calls in flight): these tests check that a signal unwinds the run, not how fast on this machine's
load. The 1 s target is measured by ``python -m bench.hostile --signals`` (exit_130_within_1s_and_consistent,
bench/README.md, "Issue #12"), never by a timed test."""
LAST_MOMENTS_S = 0.25
"""A signal this close to the exit may come after the last line evalgate prints, while the interpreter
exits (≤ 0.06 s measured at 10k cases): it is dropped (``Interrupt.hold``), the exit status stands."""


def check(outcome: dict[str, Any], work: Path) -> None:
    """Every signalled trial: gone (well within ``LIMIT_S``), and what it left is consistent: nothing at all (before
    any case ran, exit 130), a schema-valid results.json with status ``cancelled`` (exit 130) whose cases
    are exactly the ones SQLite holds for the run, or — the signal came after the results were written —
    complete results and the verdict's exit status."""
    assert not outcome["finished_first"], outcome  # every trial got its signal
    assert outcome["exit_after_s"] <= LIMIT_S, outcome
    assert outcome["consistent"], outcome
    if outcome["status"] is None:
        # -15: the signal came before the interpreter ran evalgate's first line (≈ 40 ms): nothing written
        assert outcome["exit"] in (130, -signal.SIGTERM), outcome
        if outcome["exit"] == 130:
            assert "before any case ran" in outcome["stderr"], outcome
        return
    document = json.loads((work / outcome["out"] / "results.json").read_text())
    jsonschema.validate(document, SCHEMA)
    assert document["gate"]["exit_code"] == outcome["exit"], outcome
    if outcome["status"] == "completed":
        noted = "after the results were written" in outcome["stderr"] or "as evalgate was finishing" in \
            outcome["stderr"]
        assert noted or outcome["exit_after_s"] <= LAST_MOMENTS_S, outcome  # else in the interpreter's exit
        assert len(document["results"]) == document["summary"]["total_test_cases"] > 0
        return
    assert outcome["status"] == "cancelled" and outcome["exit"] == 130, outcome
    assert "interrupted by SIGTERM" in outcome["stderr"], outcome
    # first, or after "no case was evaluated" when the signal came before the first case finished
    assert any("interrupted by SIGTERM" in reason for reason in document["gate"]["reasons"]), document["gate"]
    assert len(document["results"]) > 0 or "no case was evaluated" in document["gate"]["reasons"]


def test_sigterm_at_random_moments_of_a_10k_recorded_run(tmp_path: Path) -> None:
    figures = signals(tmp_path, 10_000, 6, seed=12)
    for outcome in figures["trials"]:
        check(outcome, tmp_path)
    assert figures["with_partial_results"] >= 1  # some trials hit the running cases
    assert figures["nothing_written"] >= 1  # and some the start-up or the dataset checks


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_sigterm_at_random_moments_of_a_100k_recorded_run(tmp_path: Path) -> None:
    if not os.environ.get("EVALGATE_SLOW"):
        pytest.skip("100,000 cases × 20 trials take ≈ 4–7 minutes: EVALGATE_SLOW=1 runs them")
    figures = signals(tmp_path, 100_000, 20, seed=20)
    print(json.dumps({k: v for k, v in figures.items() if k != "trials"}, indent=1))
    for outcome in figures["trials"]:
        check(outcome, tmp_path)
    # the target: every one cancelled with exit 130 (one landing in the ≈ 0.1 s after the results were
    # written would be complete instead; check() allows it, and the figures count it)
    assert figures["exit_130_within_1s_and_consistent"] + figures["complete_when_signalled"] == 20


def signal_self_after(seconds: float) -> threading.Timer:
    timer = threading.Timer(seconds, lambda: os.kill(os.getpid(), signal.SIGTERM))
    timer.start()
    return timer


def interrupted_within(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **settings_values: Any) -> float:
    """Run ``execute`` in this process with a SIGTERM 0.3 s in; returns seconds from the signal to the
    ``RunInterrupted`` it must raise."""
    dataset = recorded_dataset(tmp_path / "cases.jsonl", 20)
    settings, suite, _ = build_settings(cli={"dataset": [str(dataset)], "output_dir": str(tmp_path / "out"),
                                             **settings_values}, env={})
    before = signal.getsignal(signal.SIGTERM)
    timer = signal_self_after(0.3)
    started = time.monotonic()
    try:
        with pytest.raises(RunInterrupted, match="SIGTERM"):
            asyncio.run(run_module.execute(settings, suite))
    finally:
        timer.cancel()
    elapsed = time.monotonic() - started - 0.3
    assert not (tmp_path / "out" / "results.json").exists()
    assert signal.getsignal(signal.SIGTERM) == before  # the run's handler is gone again
    return elapsed


def test_a_signal_during_a_long_dataset_check_unwinds_it_at_once(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    real_prepare = run_module.prepare

    def slow_prepare(*args: Any, **kwargs: Any) -> Any:
        until = time.monotonic() + 10  # ten seconds of plain Python work, as checking 1M cases would be
        while time.monotonic() < until:
            sum(range(1000))
        return real_prepare(*args, **kwargs)

    monkeypatch.setattr(run_module, "prepare", slow_prepare)
    assert interrupted_within(tmp_path, monkeypatch) < LIMIT_S


def test_a_signal_during_a_hanging_baseline_lookup_cancels_it(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    def hanging(setting: Any, **kwargs: Any) -> BaselineLookup:
        time.sleep(10)  # a download that does not come back
        return BaselineLookup(None, warning="late")

    monkeypatch.setattr("evalgate.store.reader.resolve_baseline", hanging)
    assert interrupted_within(tmp_path, monkeypatch, baseline="results.json") < LIMIT_S


def test_a_signal_while_results_json_is_written_marks_the_results_cancelled(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Every case finished, then SIGTERM while results.json is written: it is written again with status
    ``cancelled`` (exit 130), and SQLite agrees."""
    real_write = results_module.write_results
    writes: list[str] = []

    def write_then_signal(path: Path, document: dict[str, Any], spool: Any, *rest: Any) -> None:
        writes.append(document["status"])
        real_write(path, document, spool, *rest)
        if len(writes) == 1:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)  # the handler runs in this thread at the next bytecode

    monkeypatch.setattr(results_module, "write_results", write_then_signal)
    dataset = recorded_dataset(tmp_path / "cases.jsonl", 30)
    settings, suite, _ = build_settings(cli={"dataset": [str(dataset)], "output_dir": str(tmp_path / "out")}, env={})
    outcome = asyncio.run(run_module.execute(settings, suite))
    assert writes == ["completed", "cancelled"] and outcome.signals == ["SIGTERM"]
    assert outcome.verdict.exit_code == 130
    document = json.loads((tmp_path / "out" / "results.json").read_text())
    assert document["status"] == "cancelled" and len(document["results"]) == 30
    assert "every case finished" in document["gate"]["reasons"][0]
    assert check_partial(tmp_path / "out")["consistent"]


def slow_agent(seen: Seen) -> Out:
    """The first four questions are answered at once, the others after 3 s (calls still in flight at the signal)."""
    message = seen.json()["message"]
    return Out({"response": f"answer to {message}"}, delay=0.01 if message.startswith("fast") else 3)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_with_calls_in_flight_ends_the_run_within_a_second(tmp_path: Path, sig: signal.Signals) -> None:
    """Calls that would take 3 s more are cancelled after ``SIGNAL_GRACE_SECONDS``: the process is gone
    within a second with the four answered cases written as ``cancelled`` results."""
    cases = [{"id": f"c{i:02d}", "input": f"{'fast' if i < 4 else 'slow'} {i}", "expected_keywords": ["answer"]}
             for i in range(20)]
    dataset = write_cases(tmp_path / "cases.json", cases)
    out = tmp_path / "out"
    with Loopback(slow_agent) as server:
        process = subprocess.Popen(
            [*signal_command(dataset, out), "--target", "http", "--target-url", server.url + "/chat",
             "--concurrency", "4", "--api-timeout-seconds", "120"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)})
        deadline = time.monotonic() + 60
        while len(server.seen) < 8 and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.02)  # the four quick cases answered, four slow calls in flight
        time.sleep(0.1)
        sent = time.monotonic()
        process.send_signal(sig)
        _, err = process.communicate(timeout=30)
        exit_after = time.monotonic() - sent
    assert process.returncode == 130, err
    assert exit_after <= LIMIT_S, exit_after
    partial = check_partial(out)
    assert partial["status"] == "cancelled" and partial["consistent"] and partial["cases"] == 4, partial
    document = json.loads((out / "results.json").read_text())
    assert f"interrupted by {sig.name}" in document["gate"]["reasons"][0]
