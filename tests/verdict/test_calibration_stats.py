"""Agreement statistics (evalgate.verdict.calibration) against hand-computed values and scipy."""

from __future__ import annotations

import random

import pytest
from scipy import stats

from evalgate.verdict.calibration import (
    Floor,
    Pair,
    agreement,
    cohen_kappa,
    confusion,
    gates,
    kappa_interval,
    kendall_tau_b,
    nominal_kappa,
    preference_agreement,
    sign_test,
    spearman,
    standing,
    wilson_interval,
)


def test_kappa_by_hand() -> None:
    # 20 pairs: 7 pass/pass, 3 pass/fail, 2 fail/pass, 8 fail/fail.
    labels = [True] * 10 + [False] * 10
    verdicts = [True] * 7 + [False] * 3 + [True] * 2 + [False] * 8
    # p_o = 15/20 = 0.75; p_l = 0.5, p_j = 0.45; p_e = 0.5·0.45 + 0.5·0.55 = 0.5; κ = 0.25/0.5 = 0.5
    assert cohen_kappa(labels, verdicts) == pytest.approx(0.5)
    assert confusion(labels, verdicts) == {"pass_pass": 7, "pass_fail": 3, "fail_pass": 2, "fail_fail": 8}


def test_kappa_textbook_example() -> None:
    # Wikipedia's worked example: 20 yes/yes, 5 yes/no, 10 no/yes, 15 no/no → κ = 0.4
    labels = [True] * 25 + [False] * 25
    verdicts = [True] * 20 + [False] * 5 + [True] * 10 + [False] * 15
    assert cohen_kappa(labels, verdicts) == pytest.approx(0.4)


def test_kappa_edges() -> None:
    assert cohen_kappa([True, True], [True, True]) is None  # p_e = 1: undefined
    assert cohen_kappa([True, False], [False, True]) == pytest.approx(-1.0)
    assert cohen_kappa([True, False, True, False], [True, False, True, False]) == pytest.approx(1.0)
    assert cohen_kappa([], []) is None


def test_kappa_interval_is_seeded_and_covers_the_estimate() -> None:
    labels = [True] * 25 + [False] * 25
    verdicts = [True] * 20 + [False] * 5 + [True] * 10 + [False] * 15
    interval = kappa_interval(labels, verdicts)
    assert interval is not None and interval == kappa_interval(labels, verdicts)
    low, high = interval
    assert low < 0.4 < high
    # asymptotic SE ≈ sqrt(p_o(1−p_o)/(n(1−p_e)²)) = sqrt(.7·.3/(50·.25)) ≈ 0.13: the interval is about ±0.25
    assert 0.35 < high - low < 0.65


def test_wilson_interval_by_hand() -> None:
    low, high = wilson_interval(8, 10)
    assert low == pytest.approx(0.4902, abs=1e-4)
    assert high == pytest.approx(0.9433, abs=1e-4)


@pytest.mark.parametrize("seed", range(6))
def test_spearman_and_kendall_match_scipy(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(5, 40)
    x = [rng.choice([0.0, 0.25, 0.5, 0.75, 1.0]) for _ in range(n)]  # ties on purpose
    y = [min(1.0, max(0.0, v + rng.gauss(0, 0.3))) for v in x]
    y = [round(v, 1) for v in y]
    rho, tau = spearman(x, y), kendall_tau_b(x, y)
    assert rho == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-9)
    assert tau == pytest.approx(stats.kendalltau(x, y).statistic, abs=1e-9)


def test_kendall_by_hand() -> None:
    # x 1..4, y 1,3,2,4: 5 concordant, 1 discordant of 6 pairs → τ = 4/6
    assert kendall_tau_b([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(4 / 6)
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)  # 1 − 6·2/(4·15)
    assert spearman([1, 1, 1], [1, 2, 3]) is None


def test_sign_test_against_scipy() -> None:
    for wins, losses in [(0, 0), (3, 9), (9, 3), (5, 5), (0, 7), (12, 1)]:
        p = sign_test(wins, losses)
        n = wins + losses
        if n:
            assert p["p_two_sided"] == pytest.approx(stats.binomtest(wins, n, 0.5).pvalue)
            assert p["p_worse"] == pytest.approx(stats.binomtest(losses, n, 0.5, alternative="greater").pvalue)
        else:
            assert p == {"p_two_sided": 1.0, "p_worse": 1.0}


def test_agreement_report() -> None:
    pairs = [Pair(f"e{i}", label_pass=i < 5, label_value=1.0 if i < 5 else 0.0, judge_value=v, reasoning=f"r{i}")
             for i, v in enumerate([0.9, 0.8, 0.9, 0.2, 1.0, 0.1, 0.0, 0.95, 0.2, 0.3])]
    pairs.append(Pair("none", True, None, None))
    report = agreement(pairs, lambda v: v >= 0.5)
    assert report["n"] == 10 and report["unavailable"] == 1
    assert report["confusion"] == {"pass_pass": 4, "pass_fail": 1, "fail_pass": 1, "fail_fail": 4}
    assert report["accuracy"] == 0.8 and report["kappa"] == pytest.approx(0.6)
    worst = report["disagreements"]
    assert [d["example"] for d in worst] == ["e7", "e3"]  # |0 − .95| before |1 − .2|
    assert worst[0]["label"] == "fail" and worst[0]["verdict"] == "pass" and worst[0]["reasoning"] == "r7"


def test_standing_and_gating() -> None:
    floor = Floor(0.6, 30)
    assert standing(None, None, floor)[0] == "missing"
    assert standing(None, {"changed": ["model"]}, floor) == ("stale", "calibrated for another configuration "
                                                                      "(changed: model)")
    assert standing({"kappa": 0.21, "n": 40}, None, floor) == ("below_floor", "κ 0.21 on 40 labels (needs κ ≥ 0.6)")
    assert standing({"kappa": 0.9, "n": 12}, None, floor)[0] == "below_floor"
    assert standing({"kappa": 0.9, "n": 40}, None, floor) == ("calibrated", "κ 0.90 on 40 labels")
    assert gates("off", "missing", seed_kind=False)
    assert not gates("auto", "missing", seed_kind=False)
    assert gates("auto", "missing", seed_kind=True)
    assert not gates("auto", "below_floor", seed_kind=True)
    assert not gates("required", "missing", seed_kind=True)
    assert gates("required", "calibrated", seed_kind=False)


def test_nominal_kappa_by_hand() -> None:
    # 10 pairs over A / B / tie: labels A×4, B×4, tie×2; judge agrees on 7 (A 3, B 3, tie 1)
    labels = ["A"] * 4 + ["B"] * 4 + ["tie"] * 2
    verdicts = ["A", "A", "A", "B", "B", "B", "B", "tie", "tie", "A"]
    # p_o = 7/10; judge A×4, B×4, tie×2 → p_e = .4·.4 + .4·.4 + .2·.2 = 0.36; κ = (0.7 − 0.36)/0.64 = 0.53125
    assert nominal_kappa(labels, verdicts) == pytest.approx(0.53125)
    assert nominal_kappa([True, False] * 5, [True, False] * 5) == cohen_kappa([True, False] * 5, [True, False] * 5)
    rows = [(f"e{i}", v, label, "") for i, (label, v) in enumerate(zip(labels, verdicts, strict=True))]
    report = preference_agreement([*rows, ("none", None, "A", "")])
    assert report["n"] == 10 and report["unavailable"] == 1 and report["accuracy"] == 0.7
    assert report["confusion"] == {"A_A": 3, "A_B": 1, "B_B": 3, "B_tie": 1, "tie_A": 1, "tie_tie": 1}
    low, high = report["kappa_ci"]
    assert low < 0.53125 < high
