"""bench.calibration: the judge model behind the calibration floor's error rates, and the published table."""

from __future__ import annotations

import json
import random

import pytest

from bench.calibration import DOC, RESULTS, admission_rate, flip_rate, table, true_kappa


def test_the_judge_model_by_hand() -> None:
    # p = 0.5, e = 0.2: q = 0.5, p_e = 0.5, p_o = 0.8, κ = (0.8 − 0.5) / 0.5 = 0.6
    assert true_kappa(0.5, 0.2) == pytest.approx(0.6)
    # p = 0.3, e = 0.1: q = 0.34, p_e = 0.3·0.34 + 0.7·0.66 = 0.564, κ = (0.9 − 0.564) / 0.436
    assert true_kappa(0.3, 0.1) == pytest.approx((0.9 - 0.564) / 0.436)
    assert true_kappa(0.5, 0.0) == 1.0 and true_kappa(0.5, 0.5) == pytest.approx(0.0)
    for p in (0.5, 0.3):
        for kappa in (0.2, 0.6, 0.9):
            assert true_kappa(p, flip_rate(p, kappa)) == pytest.approx(kappa, abs=1e-9)


def test_the_floor_admits_good_judges_and_refuses_poor_ones_through_standing() -> None:
    rng = random.Random(7)
    assert admission_rate(0.5, 0.9, 100, 300, rng) > 0.95
    assert admission_rate(0.5, 0.2, 100, 300, rng) < 0.02
    at_floor = admission_rate(0.5, 0.6, 200, 400, rng)
    assert 0.4 < at_floor < 0.6  # a coin toss at the floor itself


def test_the_documented_table_is_the_stored_run() -> None:
    figures = json.loads(RESULTS.read_text(encoding="utf-8"))
    assert table(figures) in DOC.read_text(encoding="utf-8")
    cells = {(c["pass_share"], c["true_kappa"], c["n"]): c["admitted"] for c in figures["cells"]}
    assert cells[(0.5, 0.4, 30)] < 0.15 and cells[(0.5, 0.8, 30)] > 0.9  # what docs/judge-calibration.md says in words


def test_the_controls_floor_through_agreement_and_control_standing() -> None:
    from bench.calibration import control_admission_rate, control_table

    rng = random.Random(11)
    assert control_admission_rate(1.0, 20, 50, rng) == 1.0  # right on every control: admitted at any size
    assert control_admission_rate(0.2, 60, 300, rng) < 0.02
    figures = json.loads(RESULTS.read_text(encoding="utf-8"))["controls"]
    assert control_table(figures) in DOC.read_text(encoding="utf-8")
    cells = {(c["true_kappa"], c["n"]): c["admitted"] for c in figures["cells"]}
    default = figures["default_size"]
    assert default == 60
    assert cells[(0.4, default)] <= 0.05 and 1 - cells[(0.8, default)] <= 0.05  # the bounds, as measured
