"""Issue #31 with the real tiny model: SmolLM2-135M is refused by its controls alone (no human labels anywhere),
on a demo suite (the golden dataset's ``response_quality``, seed 004's kind, which used to gate on a never-calibrated
judge) and on a relevancy suite whose wrong answers it scored 1.0 under ``calibration: off``. The controls are capped
at 12 per metric (``EVALGATE_CONTROLS_MAX_ITEMS``): the model takes ≈ 10 s a verdict on two shared cores.
Measured figures are printed (``pytest -s``) and recorded in docs/judge-calibration.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .harness import run_evalgate

REPO = Path(__file__).resolve().parents[2]
GOLDEN = str(REPO / "datasets" / "golden-dataset")
CAP = {"EVALGATE_CONTROLS_MAX_ITEMS": "12", "EVALGATE_CALIBRATION": "auto"}
RELEVANCY = [
    {"id": "capital", "input": "What is the capital of Australia?", "expected_output": "The capital of Australia is "
     "Canberra.", "output": "Bananas are rich in potassium."},
    {"id": "boiling", "input": "At what temperature does water boil at sea level?", "expected_output": "Water boils "
     "at 100 degrees Celsius at sea level.", "output": "Water boils at 100 degrees Celsius at sea level."},
    {"id": "planet", "input": "Which planet is closest to the Sun?", "expected_output": "Mercury is the planet "
     "closest to the Sun.", "output": "The stock market closed higher today."},
    {"id": "author", "input": "Who wrote Pride and Prejudice?", "expected_output": "Jane Austen wrote Pride and "
     "Prejudice.", "output": "Jane Austen wrote Pride and Prejudice."},
]


def controls_of(results: dict, metric: str) -> dict:
    entry = results["calibration"]["metrics"][metric]
    assert entry["evidence"] == "controls" and entry["gating"] is False, json.dumps(entry)[:1500]
    assert entry["status"] == "missing"  # no human labels: the controls alone refused it
    controls = entry["controls"]
    assert controls["n"] > 0, controls.get("first_unavailable")  # refused on its verdicts, not for want of a judge
    return controls


@pytest.mark.realmodel
@pytest.mark.timeout(1800)
def test_the_tiny_model_fails_its_controls_on_the_golden_demo_suite(llama_server: str, tmp_path: Path) -> None:
    run = run_evalgate(["-d", GOLDEN, "--first-n", "3", "--concurrency", "2"], workdir=tmp_path,
                       judge_url=llama_server, extra_env=CAP)
    assert run.results is not None, run.stderr[-2000:]
    controls = controls_of(run.results, "response_quality")
    assert controls["status"] in ("failed", "insufficient")
    assert "response_quality" not in run.results["thresholds"]
    print(f"SmolLM2-135M response_quality controls (golden, seed 004): {controls['status']}, κ {controls['kappa']} "
          f"{controls['kappa_ci']} on {controls['n']} of {controls['items']}; kinds {controls['kinds']}; first "
          f"unavailable {controls.get('first_unavailable')}")


@pytest.mark.realmodel
@pytest.mark.timeout(1800)
def test_the_tiny_model_fails_its_relevancy_controls_and_does_not_pass_the_banana(llama_server: str,
                                                                                  tmp_path: Path) -> None:
    (tmp_path / "cases.json").write_text(json.dumps([{**case, "metrics": ["relevancy"]} for case in RELEVANCY]),
                                         encoding="utf-8")
    for mode in ("auto", "off"):  # off no longer lets an unproven judge decide
        run = run_evalgate(["-d", "cases.json", "--concurrency", "2", "--calibration", mode], workdir=tmp_path,
                           judge_url=llama_server, extra_env=CAP)
        assert run.results is not None, run.stderr[-2000:]
        controls = controls_of(run.results, "relevancy")
        assert controls["status"] in ("failed", "insufficient")
        assert run.results["gate"].get("no_gate", "").startswith("nothing could decide")  # and the run says so
        print(f"SmolLM2-135M relevancy controls ({mode}): {controls['status']}, κ {controls['kappa']} "
              f"{controls['kappa_ci']} on {controls['n']} of {controls['items']}; kinds {controls['kinds']}; first "
          f"unavailable {controls.get('first_unavailable')}")
    required = run_evalgate(["-d", "cases.json", "--concurrency", "2", "--calibration", "required"],
                            workdir=tmp_path, judge_url=llama_server, extra_env=CAP)
    assert required.returncode == 1 and any("relevancy: judge" in r and r.endswith("calibration: required")
                                            for r in required.reasons), required.reasons
