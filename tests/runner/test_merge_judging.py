"""``evalgate merge`` of judged shards (runner.shard_judging): real ``evalgate run --shard i/N`` runs against the
demo judge on 127.0.0.1, calibrated with the shipped labels; shards must agree on the judge's settings, template
versions and calibration, and a shard that lacked the calibration makes the merged one the weakest."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from evalgate.demo.judge import judge_server
from tests.support.cli import run_cli as cli

KEY = "sk-merge-judging-test"
FACTS = [("Tyrese Maxey", "28.4 points"), ("Alex Caruso", "1.7 steals"), ("Domantas Sabonis", "13.7 rebounds"),
         ("Stephen Curry", "4.8 threes"), ("Nikola Jokic", "22 triple-doubles"), ("Victor Wembanyama", "3.6 blocks")]
LIVE = Path(__file__).resolve().parents[2] / "datasets" / "live"


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Calibrate ``correctness`` (κ 0.88 on 32 labels), run shards 1/2 and 2/2 with that calibration, and shard 2/2
    again after the calibration file went missing (as on a runner that did not get it)."""
    root = tmp_path_factory.mktemp("merge-judging")
    shutil.copy(LIVE / "correctness.labels.yaml", root / "correctness.labels.yaml")
    cases = [{"id": f"c{i}", "category": "audit", "input": f"What is {n}'s key number?",
              "expected_output": f"{n} averages {f}.", "output": f"{n} averages {f}."} for i, (n, f) in enumerate(FACTS)]
    (root / "suite.yaml").write_text("suite:\n  name: m\n  calibration: [correctness.labels.yaml]\n"
                                     "  metrics: [correctness]\ncases: " + json.dumps(cases) + "\n", encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch, judge_server() as judge:
        patch.setenv("LOCAL_JUDGE_API_KEY", KEY)
        for name in ("EVALGATE_CALIBRATION", "GITHUB_ACTIONS", "GITHUB_EVENT_PATH", "GITHUB_STEP_SUMMARY"):
            patch.delenv(name, raising=False)
        args = ["--judge-provider", "local", "--judge-base-url", judge.base_url + "/v1", "--judge-model", "demo-judge"]
        code, out, err = cli("calibrate", "-d", root / "suite.yaml", "-o", root / "cal", *args, "--metric", "correctness")
        assert code == 0, out + err
        for index in (1, 2):
            code, out, err = cli("run", "-d", root / "suite.yaml", "-o", root / f"s{index}", *args, "--progress", "none",
                                 "--no-cache", "--shard", f"{index}/2")
            assert code == 0, out + err
        (root / "judge-calibration.json").rename(root / "elsewhere.json")
        code, out, err = cli("run", "-d", root / "suite.yaml", "-o", root / "bare", *args, "--progress", "none",
                             "--no-cache", "--shard", "2/2")
        assert code == 0, out + err
    return {"root": root, "s1": root / "s1" / "results.json", "s2": root / "s2" / "results.json",
            "bare": root / "bare" / "results.json"}


def test_calibrated_shards_merge_with_their_calibration(shards: dict[str, Path]) -> None:
    code, out, err = cli("merge", shards["s1"], shards["s2"], "-o", shards["root"] / "m")
    assert code == 0, out + err
    merged = json.loads((shards["root"] / "m" / "results.json").read_text(encoding="utf-8"))
    entry = merged["calibration"]["metrics"]["correctness"]
    assert (entry["status"], entry["gating"], entry["n"]) == ("calibrated", True, 32)
    assert merged["thresholds"]["correctness"] is not None
    assert merged["gate"]["notes"] == [f"correctness: judge {entry['judge']} calibrated on human labels: κ 0.88 on 32 "
                                       "labels — gates"]


def test_a_shard_without_the_calibration_makes_the_merged_one_the_weakest(shards: dict[str, Path]) -> None:
    bare = json.loads(shards["bare"].read_text(encoding="utf-8"))
    assert bare["calibration"]["metrics"]["correctness"]["status"] == "missing"  # the shard itself did not gate
    code, out, err = cli("merge", shards["s1"], shards["bare"], "-o", shards["root"] / "weak")
    assert code == 0, out + err
    merged = json.loads((shards["root"] / "weak" / "results.json").read_text(encoding="utf-8"))
    entry = merged["calibration"]["metrics"]["correctness"]
    assert (entry["status"], entry["gating"], entry["kappa"]) == ("missing", False, None)
    assert merged["metrics"]["correctness"]["threshold"] is None  # shown, not gating
    assert merged["gate"]["notes"] == [
        f"correctness: judge calibration missing in shard {shards['bare']} (calibrated in {shards['s1']}) — the merged "
        "run takes the weakest: verdicts shown, not gating"]
    assert "the merged run takes the weakest" in out
    # the order of the shards does not matter
    assert cli("merge", shards["bare"], shards["s1"], "-o", shards["root"] / "weak2")[0] == 0
    again = json.loads((shards["root"] / "weak2" / "results.json").read_text(encoding="utf-8"))
    assert again["calibration"]["metrics"]["correctness"]["gating"] is False


def _edited(shards: dict[str, Path], name: str, edit: Any) -> Path:
    document = json.loads(shards["s2"].read_text(encoding="utf-8"))
    edit(document)
    path = shards["root"] / "edited" / name / "results.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


@pytest.mark.parametrize(("name", "edit", "field"), [
    ("kappa", lambda d: d["calibration"]["metrics"]["correctness"].update(kappa=0.61, n=40),
     "calibration of correctness: kappa differs between shards: 0.61 here"),
    ("key", lambda d: d["calibration"]["metrics"]["correctness"].update(key="0123abcd"),
     'calibration of correctness: key differs between shards: "0123abcd" here'),
    ("template", lambda d: d["metadata"]["judge"]["templates"].update(correctness="correctness-v0"),
     "judge template 'correctness' version differs between shards"),
    ("temperature", lambda d: d["metadata"]["judge"].update(temperature=0.7),
     "judge temperature differs between shards: 0.7 here"),
    ("significance", lambda d: d["metadata"]["config"].update(significance_level=0.1),
     "significance_level differs between shards: 0.1 here, 0.05 in"),
    ("calibration mode", lambda d: d["metadata"]["config"].update(calibration="off"),
     'calibration differs between shards: "off" here, "auto" in'),
])
def test_shards_that_judged_differently_are_refused(shards: dict[str, Path], name: str, edit: Any, field: str) -> None:
    edited = _edited(shards, name, edit)
    code, out, err = cli("merge", shards["s1"], edited, "-o", shards["root"] / "refused")
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and field in lines[0], err
    assert str(edited) in lines[0] and str(shards["s1"]) in lines[0]  # both shard files named


def test_a_shard_with_no_calibration_block_is_the_weakest_and_required_makes_it_a_failure() -> None:
    """Pure ``JudgingAgreement``: a shard whose results have no ``calibration`` entry for a metric another shard
    calibrated counts as missing; under ``calibration: required`` the merged gate gets the failure line."""
    from evalgate.runner.shard_judging import JudgingAgreement

    entry = {"judge": "demo@correctness-1", "key": "k1", "min_kappa": 0.6, "min_labels": 30, "status": "calibrated",
             "kappa": 0.88, "n": 32, "created": "2026-11-26T00:00:00Z", "gating": True, "reason": "κ 0.88 on 32"}
    calibrated = {"metadata": {"judge": {"temperature": 0.0}},
                  "calibration": {"mode": "required", "metrics": {"correctness": entry}}}
    bare = {"metadata": {"judge": {"temperature": 0.0}}, "calibration": {"mode": "required", "metrics": {}}}
    agreement = JudgingAgreement()
    agreement.add("a.json", calibrated)
    agreement.add("b.json", bare)
    assert agreement.missing_in("b.json", "correctness") and not agreement.missing_in("a.json", "correctness")
    assert agreement.not_gating() == {"correctness"}
    block, notes, reasons = agreement.merged(calibrated["calibration"], {})
    assert block["metrics"]["correctness"]["status"] == "missing" and block["metrics"]["correctness"]["gating"] is False
    assert "missing in shard b.json (calibrated in a.json)" in notes["correctness"]
    assert reasons == ["correctness: judge not calibrated for demo@correctness-1: no calibration in shard b.json "
                       "(found in a.json): the merged run takes the weakest — calibration: required"]
    agreement = JudgingAgreement()  # agreeing shards: the entry as found, no note, no reason
    agreement.add("a.json", calibrated)
    agreement.add("c.json", calibrated)
    assert agreement.merged(calibrated["calibration"], {}) == (calibrated["calibration"], {}, [])


def test_the_shards_pairwise_preferences_join_the_merged_family(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Head shards judged pairwise against one base run: ``evalgate merge --baseline`` sums their wins, losses
    and ties, and the summed sign test is a member of the merged comparison's one family."""
    monkeypatch.setenv("LOCAL_JUDGE_API_KEY", KEY)
    monkeypatch.setenv("EVALGATE_CALIBRATION", "trust")  # correctness gates unchecked: its comparison counts
    for name in ("GITHUB_ACTIONS", "GITHUB_EVENT_PATH", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(name, raising=False)

    def write(path: Path, worse: bool) -> None:
        cases = [{"id": f"c{i}", "category": "audit", "input": f"What is {n}'s key number?",
                  "expected_output": f"{n} averages {f}.", "metrics": ["correctness"],
                  "output": "I am not sure, check the box score." if worse else f"{n} averages {f}."}
                 for i, (n, f) in enumerate(FACTS)]
        path.write_text(json.dumps(cases), encoding="utf-8")

    write(tmp_path / "base.json", worse=False)
    write(tmp_path / "head.json", worse=True)
    with judge_server() as judge:
        args = ["--judge-provider", "local", "--judge-base-url", judge.base_url + "/v1", "--judge-model", "demo",
                "--progress", "none", "--no-cache"]
        assert cli("run", "-d", tmp_path / "base.json", "-o", tmp_path / "base", *args)[0] == 0
        base = tmp_path / "base" / "results.json"
        for index in (1, 2):
            cli("run", "-d", tmp_path / "head.json", "-o", tmp_path / f"h{index}", *args, "--shard", f"{index}/2",
                "--pairwise", "--baseline", base)
    shard_rows = [json.loads((tmp_path / f"h{i}" / "results.json").read_text(encoding="utf-8"))["pairwise"]["metrics"]
                  ["correctness"] for i in (1, 2)]
    assert all(row["losses"] > 0 for row in shard_rows)
    code, out, err = cli("merge", tmp_path / "h1", tmp_path / "h2", "-o", tmp_path / "m", "--baseline", base,
                         "--fail-on-regression")
    merged = json.loads((tmp_path / "m" / "results.json").read_text(encoding="utf-8"))
    row = merged["pairwise"]["metrics"]["correctness"]
    assert (row["wins"], row["losses"], row["ties"]) == (0, len(FACTS), 0) == (
        sum(r["wins"] for r in shard_rows), sum(r["losses"] for r in shard_rows), sum(r["ties"] for r in shard_rows))
    assert merged["pairwise"]["compared_cases"] == len(FACTS)
    test = next(t for t in merged["comparison"]["family"]["tests"] if t["kind"] == "pairwise")
    assert test["p_value"] == 2.0 ** -len(FACTS) and row["p_adjusted"] == test["p_adjusted"]
    assert code == 1 and any(r.startswith("correctness: the judge preferred the base branch's answer 6 time(s)")
                             for r in merged["gate"]["reasons"]), out + err
    # against another baseline the shards' preferences are not evidence: left out, with a warning
    other = tmp_path / "other.json"
    document = json.loads(base.read_text(encoding="utf-8"))
    document["run_id"] = "another-run"
    other.write_text(json.dumps(document), encoding="utf-8")
    code, out, err = cli("merge", tmp_path / "h1", tmp_path / "h2", "-o", tmp_path / "m2", "--baseline", other)
    assert "not the baseline's another-run: the merged comparison has no pairwise tests" in err
    merged = json.loads((tmp_path / "m2" / "results.json").read_text(encoding="utf-8"))
    assert "pairwise" not in merged and merged["comparison"]["pairwise"] == {}


def test_evalgate_compare_keeps_the_pairwise_tests_of_a_run_against_its_own_base(tmp_path: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """``evalgate compare BASE HEAD`` decides as the run did: HEAD's pairwise sign test (judged against BASE) is a
    member of the same family, with the same adjusted p."""
    monkeypatch.setenv("LOCAL_JUDGE_API_KEY", KEY)
    monkeypatch.setenv("EVALGATE_CALIBRATION", "trust")  # correctness gates unchecked: its comparison counts
    for name in ("GITHUB_ACTIONS", "GITHUB_EVENT_PATH", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(name, raising=False)
    for worse, name in ((False, "base"), (True, "head")):
        cases = [{"id": f"c{i}", "input": f"What is {n}'s key number?", "expected_output": f"{n} averages {f}.",
                  "metrics": ["correctness"],
                  "output": "I am not sure, check the box score." if worse else f"{n} averages {f}."}
                 for i, (n, f) in enumerate(FACTS)]
        (tmp_path / f"{name}.json").write_text(json.dumps(cases), encoding="utf-8")
    with judge_server() as judge:
        args = ["--judge-provider", "local", "--judge-base-url", judge.base_url + "/v1", "--judge-model", "demo",
                "--progress", "none", "--no-cache"]
        assert cli("run", "-d", tmp_path / "base.json", "-o", tmp_path / "base", *args)[0] == 0
        cli("run", "-d", tmp_path / "head.json", "-o", tmp_path / "head", *args, "--pairwise",
            "--baseline", tmp_path / "base" / "results.json")
    run = json.loads((tmp_path / "head" / "results.json").read_text(encoding="utf-8"))["comparison"]["family"]
    code, out, _err = cli("compare", tmp_path / "base" / "results.json", tmp_path / "head" / "results.json",
                          "--format", "json", "--fail-on-regression")
    again = json.loads(out)["family"]
    assert code == 1 and again["tests"] == run["tests"]
    assert any(t["kind"] == "pairwise" and t["rejected"] for t in again["tests"])
