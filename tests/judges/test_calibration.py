"""Judge calibration end to end: labelled examples, ``evalgate calibrate`` against the demo judge on 127.0.0.1,
the stored records (SQLite + JSON), the gate's policy (calibrated / missing / stale / below floor; auto,
required, off), judge health, the reports, and the example examples/judge-calibration/run.sh."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evalgate.config.settings import build_settings
from evalgate.demo.judge import judge_server
from evalgate.errors import UserError
from tests.servers.openai_server import Judge, OpenAIServer
from tests.support.calibration import CASES, KEY, ROOT, cli, judge_args, run

EXAMPLE = ROOT / "examples" / "judge-calibration" / "run.sh"
def test_calibrate_with_the_demo_judge_stores_agreement_and_the_calibrated_judge_gates(suite: Path) -> None:
    with judge_server() as judge:
        code, out, err = cli("calibrate", "-d", "cases.yaml", "-o", "out", *judge_args(judge.base_url))
        assert code == 0, out + err
        assert "✓ policy  judge demo-judge@policy-" in out and "κ 0.81 on 32 labels" in out
        assert "✓ correctness" in out and "Spearman 0.89" in out
        assert "✗ reid-start-reversed" in out  # a worst disagreement, with the judge's reasoning
        stored = json.loads((suite / "labels" / "judge-calibration.json").read_text(encoding="utf-8"))
        assert stored["schema"] == "evalgate-calibration/1"
        records = {r["metric"]: r for r in stored["calibrations"]}
        assert records["policy"]["n"] == 32 and records["policy"]["confusion"] == {
            "pass_pass": 12, "pass_fail": 3, "fail_pass": 0, "fail_fail": 17}
        assert records["correctness"]["parts"]["model"] == "demo-judge"
        assert records["policy"]["labels"] == ["labels/correctness.labels.yaml", "labels/policy.labels.yaml"]
        from evalgate.store.calibration import load

        assert {r["metric"] for r in load(suite / "out" / "results.db")} == {"policy", "correctness"}

        code, document, text = run(judge.base_url)
    assert code == 0, text
    block = document["calibration"]["metrics"]
    assert block["policy"]["status"] == "calibrated" and block["policy"]["gating"] is True
    assert document["thresholds"]["policy"] == {"min": 0.8}
    # by hand from the confusion matrix: p_o = 29/32, p_e = (15/32)(12/32) + (17/32)(20/32) = 0.5078125,
    # κ = (0.90625 − 0.5078125) / (1 − 0.5078125) = 0.8095
    assert document["metrics"]["policy"]["calibration"]["kappa"] == pytest.approx(0.8095, abs=1e-4)
    assert "relevancy" not in document["thresholds"]  # never calibrated, generic suite: shown, not gating
    assert document["gate"]["notes"] == [  # one line per judged metric: whether it gates and why
        f"correctness: judge {block['correctness']['judge']} calibrated on human labels: κ 0.88 on 32 labels — gates",
        f"policy: judge {block['policy']['judge']} calibrated on human labels: κ 0.81 on 32 labels — gates",
        f"relevancy: judge not calibrated for {block['relevancy']['judge']}: no calibration for this configuration; "
        "no controls could be built from the suite — verdicts shown, not gating"]
    assert "Judge calibration: correctness κ 0.88 · n 32" in text and "relevancy" in text
    import jsonschema

    jsonschema.validate(document, json.loads((ROOT / "evalgate" / "schemas" / "results.schema.json").read_text()))


def test_a_changed_model_template_or_criteria_makes_the_calibration_stale(suite: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from evalgate.judges import prompts

    with judge_server() as judge:
        assert cli("calibrate", "-d", "cases.yaml", "-o", "out", *judge_args(judge.base_url))[0] == 0
        # another model: stale, names what changed, does not gate
        _code, document, _ = run(judge.base_url, model="demo-judge-2")
        policy = document["calibration"]["metrics"]["policy"]
        assert policy["status"] == "stale" and "changed: model" in policy["reason"] and not policy["gating"]
        assert "policy" not in document["thresholds"]
        # an edited template (its version hashes the template's source)
        original = prompts.template_version

        def edited(file: str) -> str:
            return original(file) + ("-edited" if file == "policy.j2" else "")

        monkeypatch.setattr(prompts, "template_version", edited)
        _, document, _ = run(judge.base_url)
        policy = document["calibration"]["metrics"]["policy"]
        assert policy["status"] == "stale" and policy["reason"].endswith("(changed: template)")
        assert document["calibration"]["metrics"]["correctness"]["status"] == "calibrated"
        monkeypatch.setattr(prompts, "template_version", original)
        # temperature is part of the key too
        _, document, _ = run(judge.base_url, "--metric-thresholds", "{}")
        assert document["calibration"]["metrics"]["policy"]["status"] == "calibrated"
        monkeypatch.setenv("EVALGATE_JUDGE_TEMPERATURES", json.dumps({"policy": 0.7}))
        _, document, _ = run(judge.base_url)
        assert document["calibration"]["metrics"]["policy"]["reason"].endswith("(changed: temperature)")


def test_changed_criteria_of_a_declared_metric_change_its_key() -> None:
    from evalgate.judges.calibration import changed_parts, key_of, key_parts
    from evalgate.metrics.criteria import criteria_metric, definition_of
    from evalgate.model import MetricDeclaration

    class FakeJudge:
        provider, model, samples = "local", "m", 1

        def temperature_for(self, template: str) -> float:
            return 0.0

    def metric(criteria: str) -> Any:
        return criteria_metric(definition_of("tone", MetricDeclaration(name="tone", criteria=criteria), "x.yaml:1"))

    first = key_parts(FakeJudge(), metric("Is the answer polite?"), None)  # type: ignore[arg-type]
    same = key_parts(FakeJudge(), metric("Is the answer polite?"), None)  # type: ignore[arg-type]
    other = key_parts(FakeJudge(), metric("Is the answer polite and brief?"), None)  # type: ignore[arg-type]
    assert key_of(first) == key_of(same) != key_of(other)
    assert changed_parts(first, other) == ["criteria"]


def test_a_random_judge_is_below_the_floor_and_required_fails_naming_kappa_and_n(suite: Path) -> None:
    with judge_server(mode="random") as judge:
        code, out, err = cli("calibrate", "-d", "cases.yaml", "-o", "out", *judge_args(judge.base_url, "random"))
        assert code == 1, out + err
        assert "evalgate: calibration: policy: κ" in err and "on 32 labels (needs κ ≥ 0.6)" in err
        # auto (the default): reported, not gating; the run passes on what gates
        code, document, text = run(judge.base_url, model="random")
        assert code == 0, text
        assert document["calibration"]["metrics"]["policy"]["status"] == "below_floor"
        assert any(note.startswith("policy: judge not calibrated for random@policy-") and "on 32 labels" in note
                   for note in document["gate"]["notes"])
        # required: the run fails with one line per metric, naming κ and n
        code, document, text = run(judge.base_url, "--calibration", "required", model="random")
        assert code == 1
        reasons = document["gate"]["reasons"]
        assert any(r.startswith("policy: judge not calibrated for random@policy-") and "on 32 labels (needs κ ≥ 0.6) "
                   "— calibration: required" in r for r in reasons), reasons
        # off: no labels read; a metric without controls gates unchecked, and each says so in one line
        code, document, text = run(judge.base_url, "--calibration", "off", model="random")
        assert document["thresholds"]["policy"] == {"min": 0.8}
        assert any(n.startswith("policy: judge random@policy-") and n.endswith("gates unchecked (no controls could "
                                                                            "be built; calibration: off)")
                   for n in document["gate"]["notes"]), document["gate"]
        # trust: every judge gates, nothing checked (the old ``off``)
        code, document, text = run(judge.base_url, "--calibration", "trust", model="random")
        assert document["thresholds"]["policy"] == {"min": 0.8}
        assert document["calibration"]["mode"] == "trust"
        assert document["calibration"]["metrics"]["policy"] == {"status": "trusted", "gating": True,
                                                               "evidence": "trusted", "threshold": {"min": 0.8}}


def test_a_seed_kind_keeps_an_uncalibrated_judge_gating(suite: Path) -> None:
    text = (suite / "cases.yaml").read_text(encoding="utf-8").replace("  name: calib\n", "  name: calib\n  kind: seed002\n")
    (suite / "cases.yaml").write_text(text, encoding="utf-8")
    with judge_server() as judge:
        code, document, out = run(judge.base_url)
    assert code == 0, out
    assert document["thresholds"]["policy"] == {"min": 0.8}  # never calibrated, but seed 002 gated on it
    assert document["calibration"]["metrics"]["policy"]["status"] == "missing"
    assert document["calibration"]["metrics"]["policy"]["gating"] is True
    assert any("gating as the seed frameworks did" in note for note in document["gate"]["notes"])


def test_floors_are_configurable_per_metric(suite: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with judge_server() as judge:
        assert cli("calibrate", "-d", "cases.yaml", "-o", "out", *judge_args(judge.base_url))[0] == 0
        monkeypatch.setenv("EVALGATE_CALIBRATION_FLOORS", json.dumps({"policy": {"min_kappa": 0.9}}))
        _, document, _ = run(judge.base_url)
    policy = document["calibration"]["metrics"]["policy"]
    assert policy["status"] == "below_floor" and policy["reason"] == "κ 0.81 on 32 labels (needs κ ≥ 0.9)"
    assert document["calibration"]["metrics"]["correctness"]["status"] == "calibrated"


def test_a_dataset_directory_leaves_labels_and_the_calibration_file_out() -> None:
    from evalgate.dataset.load import load_datasets

    loaded = load_datasets([str(ROOT / "datasets" / "live")])
    assert [f.path.rsplit("/", 1)[-1] for f in loaded.files] == ["live.yaml"]
    assert (ROOT / "datasets" / "live" / "policy.labels.yaml").is_file()
    assert (ROOT / "datasets" / "live" / "judge-calibration.json").is_file()


def test_labels_file_errors_name_the_file_and_line(suite: Path) -> None:
    (suite / "labels" / "policy.labels.yaml").write_text(
        "cases:\n  - id: a\n    input: q\n    output: x\n    labels: {policy: maybe}\n", encoding="utf-8")
    code, _, err = cli("calibrate", "-d", "cases.yaml", "-o", "out", *judge_args("http://127.0.0.1:9"))
    assert code == 2
    assert err.strip() == ("evalgate: error: labels/policy.labels.yaml:2: example 'a': label for 'policy' must be "
                           "pass, fail or a number (got 'maybe')")
    (suite / "labels" / "policy.labels.yaml").write_text(
        "cases:\n  - id: a\n    input: q\n    output: x\n    labels: {mention_f1: pass}\n", encoding="utf-8")
    code, _, err = cli("calibrate", "-d", "cases.yaml", "-o", "out", *judge_args("http://127.0.0.1:9"))
    assert code == 2 and "labels/policy.labels.yaml:2: label for 'mention_f1': not a judged metric" in err
    code, _, err = cli("validate", "-d", "cases.yaml")  # validate reads the labels too, without any call
    assert code == 2 and "labels/policy.labels.yaml:2: label for 'mention_f1': not a judged metric" in err


def test_placeholder_reasoning_is_no_verdict_and_health_is_reported(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The real tiny model's failure: a score with the template's placeholder as its reasoning."""
    from evalgate.report.html import render_html
    from evalgate.report.markdown import render_comment

    monkeypatch.setenv("LOCAL_JUDGE_API_KEY", KEY)
    monkeypatch.setenv("EVALGATE_CALIBRATION", "off")  # a gating judge: an unusable verdict errors its case
    cases = [{"id": f"c{i}", "input": f"question {i}?", "output": f"answer {i}", "passing_criteria": "answers it",
              "metrics": ["relevancy"]} for i in range(4)]
    (tmp_path / "cases.json").write_text(json.dumps(cases), encoding="utf-8")

    def verdict(prompt: str, score: float) -> Any:
        placeholder = "question 0?" in prompt or "question 1?" in prompt
        return {"reasoning": "<your step-by-step reasoning>" if placeholder else "The same words for every case.",
                "score": 0.9}

    with OpenAIServer(api_key=KEY, judge=Judge(verdict=verdict)) as server:
        code, out, _err = cli("run", "-d", tmp_path / "cases.json", "-o", tmp_path / "out", "--progress", "none",
                             "--judge-provider", "local", "--judge-base-url", server.base_url + "/v1")
    document = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))
    health = document["metrics"]["relevancy"]["judge_health"]
    assert health["verdicts"] == 4 and health["placeholder_reasoning"] == 2 and health["unusable"] == 2
    assert health["duplicate_reasoning"] == 1  # c2 and c3 gave the same reasoning: counted, the verdict stands
    assert document["summary"]["judge_health"]["placeholder_reasoning"] == 2
    first = next(r for r in document["results"] if r["id"] == "c0")
    assert first["status"] == "errored" and first["metrics"]["relevancy"]["status"] == "unavailable"
    assert first["metrics"]["relevancy"]["details"]["judge_failure"] == "unhealthy"
    assert "placeholder text" in first["metrics"]["relevancy"]["reason"]
    assert code == 1 and "2 case(s) errored (allowed: 0)" in document["gate"]["reasons"]  # the existing rule
    assert "⚠ relevancy: 2 of 4 unusable (placeholder reasoning 2, duplicate reasoning 1)" in out
    comment = render_comment(document, run_url=None, artifact_url=None, tag="t")
    assert "Judge health: 4 verdict(s), 2 unusable — `relevancy` 2 of 4 (placeholder reasoning 2" in comment
    assert 'id="judge-health"' in render_html(document)


def test_health_checks_by_hand() -> None:
    from evalgate.judges.health import HealthCheck, cause_of
    from evalgate.judges.prompts import template_for_metric
    from evalgate.judges.samples import Sample
    from evalgate.model import Case
    from evalgate.targets.recorded import answer_from_case

    case = Case(id="x", input="Is it raining?", output="Yes, bring an umbrella.", passing_criteria="answers")
    prompt = template_for_metric("relevancy").render(case, answer_from_case(case))
    check = HealthCheck()

    def sample(reasoning: str, value: float = 0.9) -> Sample:
        return Sample({"relevancy": value}, reasoning, {}, False, False, "json_schema")

    assert check.check(prompt, [sample("")])[0] == ("empty_reasoning", "the judge gave no reasoning for its score")
    assert check.check(prompt, [sample("<brief explanation>")])[0][0] == "placeholder_reasoning"  # type: ignore[index]
    assert check.check(prompt, [sample("The answer says to bring an umbrella.")]) == (None, [])
    # the case's own text is fenced (untrusted): quoting it is not copying the prompt
    assert check.check(prompt, [sample("Yes, bring an umbrella.")]) == (None, [])
    low, high = "It says yes without a reason.", "It answers and says to bring an umbrella."
    assert check.check(prompt, [sample(low, 0.1), sample(high, 0.9)]) == (None, ["inconsistent"])
    assert check.check(prompt, [sample(low, 0.5), sample(high, 0.9)]) == (None, [])
    assert cause_of({"judge_failure": "unreadable", "raw_reply": "I'm sorry, I can't help with that."}, "") == "refusal"
    assert cause_of({"judge_failure": "unreadable", "raw_reply": "{}"},
                    "the JSON does not match the verdict schema: score: Input should be less than or equal to 1"
                    ) == "out_of_scale"
    assert cause_of({"judge_failure": "unreadable", "raw_reply": "hmm"}, "no JSON object") == "parse_failure"
    assert cause_of({"judge_failure": "unreachable"}, "") == "call_failed"


def test_calibrate_needs_labels_and_a_judge(suite: Path) -> None:
    (suite / "cases.yaml").write_text(CASES.replace("  calibration: [labels/policy.labels.yaml, "
                                                    "labels/correctness.labels.yaml]\n", ""), encoding="utf-8")
    code, _, err = cli("calibrate", "-d", "cases.yaml", "-o", "out", *judge_args("http://127.0.0.1:9"))
    assert code == 2 and "no labelled examples: name a labels file in a suite block" in err
    settings, config, _ = build_settings(cli={"dataset": ["cases.yaml"]})
    from evalgate.runner.calibrate import calibrate

    (suite / "cases.yaml").write_text(CASES, encoding="utf-8")
    settings, config, _ = build_settings(cli={"dataset": ["cases.yaml"]})
    with pytest.raises(UserError, match="calibration needs a judge"):
        asyncio.run(calibrate(settings, config, suite))


@pytest.mark.parametrize(("judge", "status"), [("scripted", 0), ("random", 1)])
def test_the_example_runs(judge: str, status: int) -> None:
    env = {**os.environ, "PYTHON": sys.executable, "JUDGE": judge, "NO_COLOR": "1"}
    for name in ("EVALGATE_CALIBRATION", "GITHUB_ACTIONS", "GITHUB_EVENT_PATH", "GITHUB_STEP_SUMMARY"):
        env.pop(name, None)
    done = subprocess.run(["bash", str(EXAMPLE)], env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == status, done.stdout + done.stderr
    if judge == "random":
        assert "policy: judge not calibrated for random-judge@policy-" in done.stdout
        assert "on 32 labels (needs κ ≥ 0.6) — calibration: required" in done.stdout
    else:
        assert "✅ PASSED" in done.stdout and "policy κ 0.81 · n 32" in done.stdout


def test_the_live_demo_gates_on_its_shipped_calibration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """datasets/live/judge-calibration.json vouches for the demo judge as the templates are now. When a
    template, the system message or a default changes, regenerate it (and review the κ it reports):
    python -m evalgate.demo.judge --port 8012 &  LOCAL_JUDGE_API_KEY=x evalgate calibrate -d datasets/live
    --judge-provider local --judge-base-url http://127.0.0.1:8012/v1 --judge-model demo-judge -o /tmp/calibrate"""
    from evalgate.demo.live import main as demo_main

    for name in ("EVALGATE_CALIBRATION", "GITHUB_ACTIONS", "GITHUB_EVENT_PATH", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(name, raising=False)
    out = tmp_path / "live"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert demo_main(["--output-dir", str(out), "--progress", "none"]) == 0
    block = json.loads((out / "results.json").read_text(encoding="utf-8"))["calibration"]["metrics"]
    for name in ("policy", "correctness"):
        assert block[name]["status"] == "calibrated" and block[name]["gating"], (
            f"{name}: {block[name]['reason']} — regenerate datasets/live/judge-calibration.json "
            "(see this test's docstring)")
    # the live suite is seed 002's (kind seed002): an uncalibrated metric keeps gating as that framework did
    assert block["safety"]["status"] == "missing" and block["safety"]["gating"] is True
