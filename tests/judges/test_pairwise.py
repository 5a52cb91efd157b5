"""Pairwise regression judging (judges.pairwise, verdict.pairwise, runner.pairwise): both orders, a preference
only when they agree, wins/losses/ties with an exact sign test, against the demo judge on 127.0.0.1."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from scipy import stats

from evalgate.cli.main import main as cli_main
from evalgate.demo.judge import judge_server
from evalgate.judges.pairwise import combine
from evalgate.verdict.pairwise import summarize

KEY = "sk-pairwise-test"
FACTS = [("Tyrese Maxey", "28.4 points"), ("Alex Caruso", "1.7 steals"), ("Domantas Sabonis", "13.7 rebounds"),
         ("Stephen Curry", "4.8 threes"), ("Nikola Jokic", "22 triple-doubles"), ("Victor Wembanyama", "3.6 blocks"),
         ("Anthony Edwards", "35.1 minutes")]


def test_combine_needs_both_orders_to_agree() -> None:
    assert combine("B", "A") == "head" and combine("A", "B") == "base"
    assert combine("A", "A") == "tie" == combine("B", "B")  # the judge kept its position: no preference
    assert combine("tie", "A") == "tie" == combine("B", "tie")


def test_summary_and_sign_test() -> None:
    rows = [("correctness", "base")] * 6 + [("correctness", "head")] + [("correctness", "tie")] * 3
    summary = summarize(rows)["correctness"]
    assert (summary["wins"], summary["losses"], summary["ties"]) == (1, 6, 3)
    assert summary["p_worse"] == pytest.approx(stats.binomtest(6, 7, 0.5, alternative="greater").pvalue, abs=1e-6)
    assert summary["p_two_sided"] == pytest.approx(stats.binomtest(1, 7, 0.5).pvalue, abs=1e-6)


def write(path: Path, outputs: list[str]) -> None:
    cases = [{"id": f"c{i}", "category": "audit", "input": f"What is {name}'s key number?",
              "expected_output": f"{name} averages {figure}.", "output": output, "metrics": ["correctness"]}
             for i, ((name, figure), output) in enumerate(zip(FACTS, outputs, strict=True))]
    path.write_text(json.dumps(cases), encoding="utf-8")


def cli(*argv: Any) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main([str(a) for a in argv])
    return code, out.getvalue() + err.getvalue()


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("LOCAL_JUDGE_API_KEY", KEY)
    monkeypatch.setenv("EVALGATE_CALIBRATION", "trust")  # correctness gates, so a lost comparison can fail the run
    for name in ("GITHUB_ACTIONS", "GITHUB_EVENT_PATH", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(name, raising=False)
    good = [f"{name} averages {figure}." for name, figure in FACTS]
    worse = [*["I am not sure, check the box score."] * 6, good[6]]  # 6 answers changed for the worse
    write(tmp_path / "base.json", good)
    write(tmp_path / "head.json", worse)

    def evaluate(mode: str, *extra: str) -> tuple[int, dict[str, Any], str]:
        with judge_server(mode=mode) as judge:
            args = ["--judge-provider", "local", "--judge-base-url", judge.base_url + "/v1", "--judge-model", mode,
                    "--progress", "none", "--no-cache"]
            assert cli("run", "-d", tmp_path / "base.json", "-o", tmp_path / "base", *args)[0] == 0
            code, text = cli("run", "-d", tmp_path / "head.json", "-o", tmp_path / "head", *args, "--pairwise",
                             "--baseline", tmp_path / "base" / "results.json", *extra)
        return code, json.loads((tmp_path / "head" / "results.json").read_text(encoding="utf-8")), text

    return evaluate


def test_worse_answers_lose_in_both_orders_and_can_fail_the_gate(runs: Any) -> None:
    code, document, text = runs("scripted", "--fail-on-regression")
    pairwise = document["pairwise"]
    assert pairwise["compared_cases"] == 6  # the unchanged answer is not compared
    row = pairwise["metrics"]["correctness"]
    assert (row["wins"], row["losses"], row["ties"]) == (0, 6, 0)
    assert row["p_worse"] == pytest.approx(1 / 64)
    case = pairwise["cases"][0]
    assert case["preferred"] == "base" and (case["base_first"], case["head_first"]) == ("A", "B")
    assert code == 1
    assert "Pairwise vs base (6 changed answer(s), both orders): correctness 0 better, 6 worse, 0 tie(s)" in text
    from evalgate.report.markdown import render_comment

    family = document["comparison"]["family"]  # one weighted Holm family: the pairwise test is one of its members
    test = next(t for t in family["tests"] if t["kind"] == "pairwise")
    assert (test["name"], test["p_value"], test["rejected"]) == ("correctness", 1 / 64, True)
    assert row["family_size"] == family["size"] and row["p_adjusted"] == test["p_adjusted"] >= row["p_worse"]
    shown = "correctness 0 better, 6 worse, 0 tie(s) (sign test p 0.016, adjusted p 0.031 over 3 tests)"
    assert shown in render_comment(document, run_url=None, artifact_url=None, tag="t")
    assert any(r.startswith("correctness: the judge preferred the base branch's answer 6 time(s)")
               for r in document["gate"]["reasons"]), document["gate"]["reasons"]


def test_a_judge_that_always_prefers_the_first_answer_only_ties(runs: Any) -> None:
    _code, document, _text = runs("first", "--fail-on-regression")
    row = document["pairwise"]["metrics"]["correctness"]
    assert (row["wins"], row["losses"], row["ties"]) == (0, 0, 6)
    assert row["p_worse"] == 1.0
    assert all(c["base_first"] == "A" and c["head_first"] == "A" and c["preferred"] == "tie"
               for c in document["pairwise"]["cases"])
    assert not any("the judge preferred" in r for r in document["gate"]["reasons"])


def test_pairwise_preferences_are_calibrated_against_human_ones(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Human pairwise labels (datasets/live/correctness-pairwise.labels.yaml) calibrate ``pairwise:correctness``;
    under ``auto`` a pairwise comparison fails the gate only when that calibration meets its floor."""
    live = Path(__file__).resolve().parents[2] / "datasets" / "live"
    for name in ("correctness.labels.yaml", "correctness-pairwise.labels.yaml"):
        (tmp_path / name).write_text((live / name).read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setenv("LOCAL_JUDGE_API_KEY", KEY)
    for name in ("EVALGATE_CALIBRATION", "GITHUB_ACTIONS", "GITHUB_EVENT_PATH", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(name, raising=False)
    good = [f"{name} averages {figure}." for name, figure in FACTS]
    worse = [*["I am not sure, check the box score."] * 6, good[6]]
    suite = ("suite:\n  name: p\n  calibration: [correctness.labels.yaml, correctness-pairwise.labels.yaml]\n"
             "  metrics: [correctness]\n")

    def write_suite(path: Path, outputs: list[str]) -> None:
        cases = [{"id": f"c{i}", "category": "audit", "input": f"What is {n}'s key number?",
                  "expected_output": f"{n} averages {f}.", "output": o}
                 for i, ((n, f), o) in enumerate(zip(FACTS, outputs, strict=True))]
        path.write_text(suite + "cases: " + json.dumps(cases) + "\n", encoding="utf-8")

    write_suite(tmp_path / "base.yaml", good)
    write_suite(tmp_path / "head.yaml", worse)
    with judge_server(mode="first") as judge:  # pure position bias: every preference a tie, κ 0
        code, text = cli("calibrate", "-d", tmp_path / "base.yaml", "-o", tmp_path / "c", "--judge-provider",
                         "local", "--judge-base-url", judge.base_url + "/v1", "--judge-model", "biased",
                         "--metric", "pairwise:correctness")
        assert code == 1 and "✗ pairwise:correctness  judge biased@pairwise:correctness-" in text
        assert "κ 0.00 on 32 labels (needs κ ≥ 0.6)" in text and "label → judge: A → tie 16, B → tie 16" in text
    with judge_server() as judge:
        args = ["--judge-provider", "local", "--judge-base-url", judge.base_url + "/v1", "--judge-model", "demo-judge",
                "--progress", "none"]
        code, text = cli("calibrate", "-d", tmp_path / "base.yaml", "-o", tmp_path / "c", *args[:6])
        assert code == 0, text
        assert "✓ pairwise:correctness  judge demo-judge@pairwise:correctness-" in text and "κ 0.88 on 32" in text
        assert cli("run", "-d", tmp_path / "base.yaml", "-o", tmp_path / "base", *args)[0] == 0
        head = ["run", "-d", tmp_path / "head.yaml", "-o", tmp_path / "head", *args, "--pairwise",
                "--fail-on-regression", "--baseline", tmp_path / "base" / "results.json"]
        cli(*head)
        document = json.loads((tmp_path / "head" / "results.json").read_text(encoding="utf-8"))
        assert document["calibration"]["pairwise"]["correctness"]["status"] == "calibrated"
        assert any(r.startswith("correctness: the judge preferred the base branch's answer 6 time(s)")
                   for r in document["gate"]["reasons"])
        monkeypatch.setenv("EVALGATE_CALIBRATION_FLOORS", json.dumps({"pairwise:correctness": {"min_kappa": 0.95}}))
        cli(*head)
        document = json.loads((tmp_path / "head" / "results.json").read_text(encoding="utf-8"))
    assert document["calibration"]["pairwise"]["correctness"]["status"] == "below_floor"
    assert document["pairwise"]["metrics"]["correctness"]["losses"] == 6  # still measured and shown …
    assert not any("the judge preferred" in r for r in document["gate"]["reasons"])  # … but it does not gate
    import jsonschema

    schema = Path(__file__).resolve().parents[2] / "evalgate" / "schemas" / "results.schema.json"
    jsonschema.validate(document, json.loads(schema.read_text(encoding="utf-8")))
