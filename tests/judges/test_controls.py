"""Controls built from the suite (judges.controls): a judge gates from its first run once it separates them, a judge
that scores everything 1.0 never gates, a run that nothing decided says so (no_gate), and the pure rules by hand.
Scripted judges on loopback (tests/servers/openai_server.py) through the CLI."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli.main import main as cli_main
from evalgate.demo.judge import blocks, judge_server, negations
from evalgate.judges import controls
from evalgate.metrics.registry import REGISTRY
from evalgate.model import Case
from evalgate.verdict.calibration import ControlFloor, agreement, control_standing, decide
from tests.servers.openai_server import Judge, OpenAIServer

KEY = "sk-controls"
CONFIG = """
metrics:
  - name: matches_expected
    criteria: The answer says what the expected output says, with the same numbers, and invents nothing.
    threshold: 0.7
"""
CASES = [
    ("vpn", "The VPN is down. What do I do?", "Open a P1 ticket and call 555-0100."),
    ("refund", "How long does a refund take?", "A refund takes 5 business days after the return is received."),
    ("hours", "When is the helpdesk open?", "The helpdesk is open from 8 to 18 on weekdays."),
    ("laptop", "How do I get a new laptop?", "Ask your manager to approve the request, then order it in the portal."),
]


def dataset(*wrong: str) -> str:
    rows = [{"id": cid, "input": q, "expected_output": a,
             "output": "I have no idea, sorry." if cid in wrong else a} for cid, q, a in CASES]
    return json.dumps(rows)


def good(prompt: str) -> float:
    """A competent judge: 1.0 when the answer carries the expected output word for word and does not negate it,
    else 0.0."""
    fenced = blocks(prompt)
    expected, answer = fenced.get("expected output"), fenced.get("answer", "")
    kept = bool(expected) and str(expected).strip().lower() in answer.lower()
    return 1.0 if kept and negations(answer) == negations(str(expected)) else 0.0


@pytest.fixture  # not tests/support/fixtures.py's calibration suite: this one has no human labels
def suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("EVALGATE_CALIBRATION", "EVALGATE_NO_GATE", "GITHUB_ACTIONS", "GITHUB_EVENT_PATH",
                 "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LOCAL_JUDGE_API_KEY", KEY)
    monkeypatch.setenv("EVALGATE_JUDGE_SHARED_CACHE", "none")
    (tmp_path / "evalgate.yaml").write_text(CONFIG, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(url: str, *extra: str) -> tuple[int, dict[str, Any], str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(["run", "-d", "cases.json", "-o", "out", "--progress", "none", "--judge-provider", "local",
                         "--judge-base-url", url + "/v1", *extra])
    return code, json.loads(Path("out/results.json").read_text(encoding="utf-8")), out.getvalue() + err.getvalue()


def test_a_good_judge_is_admitted_by_its_controls_on_the_first_run_and_gates(suite: Path) -> None:
    (suite / "cases.json").write_text(dataset("refund", "hours"), encoding="utf-8")
    with OpenAIServer(api_key=KEY, judge=Judge(score=good)) as server:
        code, document, text = run(server.base_url)
        again, second, again_text = run(server.base_url)  # the same controls: every reply from the cache
    entry = document["calibration"]["metrics"]["matches_expected"]
    assert entry["gating"] is True and entry["evidence"] == "controls" and entry["status"] == "missing"
    assert entry["controls"]["status"] == "passed" and entry["controls"]["kappa"] == 1.0, json.dumps(entry["controls"])
    assert entry["controls"]["n"] >= 20 and set(entry["controls"]["kinds"]) >= {
        "reference", "reference-lead-in", "other-case", "evasive", "changed-number", "negated"}
    assert document["thresholds"]["matches_expected"] == {"min": 0.7}
    assert code == 1 and any(r.startswith("matches_expected average") for r in document["gate"]["reasons"]), text
    refund = next(r for r in document["results"] if r["id"] == "refund")
    assert refund["status"] == "failed" and refund["metrics"]["matches_expected"]["passed"] is False
    from evalgate.report.view import calibration_label

    assert calibration_label(document["metrics"]["matches_expected"]).startswith("controls κ 1.00 · n ")
    line = next(n for n in document["gate"]["notes"] if n.startswith("matches_expected: "))
    assert " passed its controls: κ 1.00 [1.00, 1.00] on " in line and line.endswith(" controls — gates")
    assert line in text  # the console says it in one line
    assert "evalgate: judge controls: " in text and "(at most 60 per metric)" in text  # the pre-run estimate
    assert document["metadata"]["estimate"]["controls"] == {"cap_per_metric": 60,
                                                            "items": {"matches_expected": entry["controls"]["items"]}}
    assert again == 1 and second["calibration"]["metrics"]["matches_expected"]["controls"]["kappa"] == 1.0
    assert "Judge: 0 call(s)" in again_text, again_text
    from evalgate.store.calibration import load

    assert any(r["metric"] == "controls:matches_expected" for r in load(suite / "out" / "results.db"))


def test_a_judge_that_gives_everything_1_is_refused_and_the_run_says_nothing_gated(suite: Path) -> None:
    (suite / "cases.json").write_text(dataset("refund", "hours"), encoding="utf-8")
    with OpenAIServer(api_key=KEY, judge=Judge(score=1.0)) as server:
        code, document, text = run(server.base_url)
        entry = document["calibration"]["metrics"]["matches_expected"]
        assert entry["gating"] is False and entry["controls"]["status"] in ("failed", "insufficient")
        assert "matches_expected" not in document["thresholds"]
        # its values are recorded as advisory, never as passed: the wrong answer's 1.0 included
        for record in document["results"]:
            assert record["metrics"]["matches_expected"]["status"] == "advisory"
            assert record["metrics"]["matches_expected"]["passed"] is None
            assert record["metrics"]["matches_expected"]["value"] == 1.0
        assert document["metrics"]["matches_expected"]["average"] == 1.0  # still averaged and shown
        import jsonschema

        jsonschema.validate(document, json.loads((Path(__file__).resolve().parents[2] / "evalgate" / "schemas"
                                                  / "results.schema.json").read_text(encoding="utf-8")))
        from evalgate.report.html import render_html
        from evalgate.store.reader import load_results

        assert "advisory" in render_html(document)
        stored = load_results(str(suite / "out" / "results.db"))
        assert next(iter(stored["results"]))["metrics"]["matches_expected"]["status"] == "advisory"
        # nothing else gates: the pass rests on nothing, and the verdict line says so
        assert code == 0 and document["gate"]["no_gate"].startswith("nothing could decide")
        assert "evalgate ✅ PASSED  — NOTHING GATED" in text
        from evalgate.github.annotations import annotation_lines

        assert any(line.startswith("::warning title=evalgate%3A nothing gated::nothing could decide")
                   for line in annotation_lines(document, workspace=None)), annotation_lines(document, workspace=None)
        from evalgate.report.markdown import render_comment

        assert "passed — nothing gated" in render_comment(document, run_url=None, artifact_url=None, tag="t")
        # no_gate: fail fails it, with one reason
        code, document, text = run(server.base_url, "--no-gate", "fail")
        assert code == 1 and document["gate"]["reasons"][-1].endswith("— no_gate: fail")
        # calibration: required: the refused judge is a reason, and no_gate defaults to fail
        code, document, text = run(server.base_url, "--calibration", "required")
        reasons = document["gate"]["reasons"]
        assert code == 1 and any("failed its controls" in r and r.endswith("calibration: required") for r in reasons)
        assert any(r.endswith("— no_gate: fail") for r in reasons)
        # off: no labels read, the controls still refuse it; trust: it gates (and fails the wrong answer)
        code, document, _ = run(server.base_url, "--calibration", "off")
        assert "matches_expected" not in document["thresholds"] and code == 0
        code, document, _ = run(server.base_url, "--calibration", "trust")
        assert document["thresholds"]["matches_expected"] == {"min": 0.7} and "no_gate" not in document["gate"]


def test_a_seed_kind_no_longer_gates_on_a_judge_that_fails_its_controls(suite: Path) -> None:
    rows = [{"id": cid, "input": q, "expected_output": a, "output": a, "category": "audit"} for cid, q, a in CASES]
    (suite / "cases.yaml").write_text("suite: {name: s, kind: seed002}\ncases: " + json.dumps(rows), encoding="utf-8")
    (suite / "evalgate.yaml").write_text("", encoding="utf-8")
    with OpenAIServer(api_key=KEY, judge=Judge(score=1.0)) as server:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            cli_main(["run", "-d", "cases.yaml", "-o", "out", "--progress", "none", "--judge-provider", "local",
                      "--judge-base-url", server.base_url + "/v1"])
    document = json.loads(Path("out/results.json").read_text(encoding="utf-8"))
    entry = document["calibration"]["metrics"]["correctness"]
    assert entry["gating"] is False and entry["evidence"] == "controls", entry


# --- the pure parts, by hand ------------------------------------------------------------------------------


def test_perturbations_by_hand() -> None:
    assert controls.changed_numbers("Call 555-0100 within 15 minutes.") == "Call 562-0107 within 22 minutes."
    assert controls.changed_numbers("No number here.") is None
    assert controls.negated("The helpdesk is open from 8 to 18.") == "The helpdesk is not open from 8 to 18."
    assert controls.negated("Open a P1 ticket and call 555-0100.") == "Do not open a P1 ticket and call 555-0100."
    assert controls.dropped("Turn it off and on, then add it again.") == "Turn it off."
    assert controls.dropped("One part only") is None
    assert controls.truncated("one two three four five six seven eight") == "one two …"


def test_the_control_set_of_a_reference_metric_and_its_cap() -> None:
    metric = REGISTRY["correctness"]
    cases = [Case(id=cid, input=q, expected_output=a) for cid, q, a in CASES]
    items = controls.build(metric, cases)
    kinds = {(item.case.id, item.kind): item for item in items}
    assert kinds[("vpn", "reference")].answer.output == "Open a P1 ticket and call 555-0100."
    assert kinds[("vpn", "other-case")].answer.output == CASES[1][2] and not kinds[("vpn", "other-case")].label
    assert sum(item.label for item in items) == 8 and len(items) == len({item.name for item in items})
    capped = controls.build(metric, cases, max_items=12)
    assert len(capped) == 12 and 4 <= sum(item.label for item in capped) <= 8
    assert controls.digest(items) != controls.digest(capped)
    assert controls.build(REGISTRY["policy"], cases) == []  # no controls can be built for it


def test_retention_controls_forget_what_the_user_said() -> None:
    case = Case.model_validate({"id": "c", "turns": [{"user": "My name is Ana."}, {"user": "What is my name?"}]})
    items = controls.build(REGISTRY["knowledge_retention"], [case])
    assert [item.label for item in items] == [True, True, False, False, False]
    forgetful = items[2].answer.transcript
    assert forgetful is not None and forgetful[-1]["content"].startswith("Sorry, I don't know what you told me")


def test_control_standing_and_the_decision_by_hand() -> None:
    from evalgate.verdict.calibration import Pair

    def record(right_pos: int, pos: int, right_neg: int, neg: int) -> dict[str, Any]:
        pairs = [Pair(f"p{i}", True, None, 1.0 if i < right_pos else 0.0) for i in range(pos)]
        pairs += [Pair(f"n{i}", False, None, 0.0 if i < right_neg else 1.0) for i in range(neg)]
        return agreement(pairs, lambda v: v >= 0.7)

    assert control_standing(record(8, 8, 16, 16))[0] == "passed"  # κ 1, interval [1, 1]
    state, why = control_standing(record(8, 8, 0, 16))  # passes everything: κ 0
    assert state == "failed" and why.startswith("κ 0.00") and "(needs the interval's low end ≥ 0.4)" in why
    assert control_standing(record(3, 3, 4, 4))[0] == "insufficient"  # 7 < 10 controls
    assert control_standing(None) == ("none", "no controls can be built for this metric")
    # κ on 6 + 14 = 20 controls with one negative passed: p_o = 19/20, p_e = 0.3·0.35 + 0.7·0.65 = 0.56,
    # κ = (0.95 − 0.56) / 0.44 = 0.8864
    assert record(6, 6, 13, 14)["kappa"] == pytest.approx(0.8864, abs=1e-4)
    assert ControlFloor().min_kappa_low == 0.4 and ControlFloor().min_items == 10
    assert decide("auto", "missing", "passed", seed_kind=False) == (True, "controls")
    assert decide("auto", "below_floor", "passed", seed_kind=False) == (False, "labels")  # labels override
    assert decide("auto", "calibrated", "failed", seed_kind=False) == (True, "labels")
    assert decide("auto", "missing", "failed", seed_kind=True) == (False, "controls")  # seed kinds too
    assert decide("auto", "missing", "none", seed_kind=True) == (True, "seed")
    assert decide("auto", "missing", "none", seed_kind=False) == (False, "none")
    assert decide("off", "calibrated", "failed", seed_kind=False) == (False, "controls")
    assert decide("off", "missing", "none", seed_kind=False) == (True, "trusted")
    assert decide("trust", "below_floor", "failed", seed_kind=False) == (True, "trusted")
    assert decide("required", "stale", "insufficient", seed_kind=True) == (False, "controls")


def test_the_demo_judge_catches_a_forgetful_agent_on_knowledge_retention() -> None:
    """The demo judge scored "I don't know your name" 1.000 on knowledge_retention; it now scores it 0 and
    passes that metric's controls (two conversations: ten controls)."""
    from evalgate.demo.judge import retention

    forgot = "user: Hello, my name is Ana.\n\nassistant: Hi!\n\nuser: What is my name?\n\nassistant: I don't know your name."
    assert retention(forgot)[0] == 0.0
    kept = "user: Hello, my name is Ana.\n\nassistant: Hi!\n\nuser: What is my name?\n\nassistant: Your name is Ana."
    # the user's earlier terms (hello, name, ana) in the later reply: 2 of 3, floored at 0.75
    assert retention(kept)[0] == 0.75


FORGETFUL = """
- id: forgets-name
  risk_level: critical
  metrics: [knowledge_retention]
  turns:
    - {user: "Hello, my name is Ana.", output: "Hi Ana!"}
    - {user: "What is my name?", output: "I don't know your name."}
- id: keeps-team
  metrics: [knowledge_retention]
  turns:
    - {user: "My team is the Lisbon Owls.", output: "Noted."}
    - {user: "What is my team called?", output: "Your team is the Lisbon Owls."}
"""


def test_with_the_demo_judge_knowledge_retention_gates_and_fails_the_forgetful_agent(suite: Path) -> None:
    (suite / "cases.yaml").write_text(FORGETFUL, encoding="utf-8")
    (suite / "evalgate.yaml").write_text("", encoding="utf-8")
    with judge_server(api_key=KEY) as judge:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            code = cli_main(["run", "-d", "cases.yaml", "-o", "out", "--progress", "none", "--judge-provider",
                             "local", "--judge-base-url", judge.base_url + "/v1"])
    document = json.loads(Path("out/results.json").read_text(encoding="utf-8"))
    entry = document["calibration"]["metrics"]["knowledge_retention"]
    assert entry["controls"]["n"] == 10 and entry["controls"]["status"] == "passed" and entry["gating"], entry
    scored = {r["id"]: r["metrics"]["knowledge_retention"]["value"] for r in document["results"]}
    assert scored == {"forgets-name": 0.0, "keeps-team": 1.0}
    assert code == 1 and document["summary"]["total_failed"] == 1, out.getvalue()
    assert any(r.startswith("critical case forgets-name failed") for r in document["gate"]["reasons"])


def test_merged_shards_take_the_weakest_controls() -> None:
    """Each shard proves its judge on its own cases' controls: one shard's refusal makes the merged metric advisory,
    and under ``calibration: required`` a reason; shards that all passed keep it gating."""
    from evalgate.runner.shard_judging import JudgingAgreement

    def shard(gating: bool, mode: str = "auto") -> dict[str, Any]:
        entry = {"judge": "demo@correctness-1", "key": "k1", "min_kappa": 0.6, "min_labels": 30, "status": "missing",
                 "evidence": "controls", "gating": gating, "reason": "no calibration for this configuration",
                 "controls": {"status": "passed" if gating else "failed"}}
        return {"metadata": {"judge": {"temperature": 0.0}}, "calibration": {"mode": mode, "metrics": {"correctness": entry}}}

    both = JudgingAgreement()
    both.add("a.json", shard(True))
    both.add("b.json", shard(True))
    block, notes, reasons = both.merged(shard(True)["calibration"], {})
    assert both.not_gating() == set() and block["metrics"]["correctness"]["gating"] is True and reasons == []
    for mode in ("auto", "required"):
        mixed = JudgingAgreement()
        mixed.add("a.json", shard(True, mode))
        mixed.add("b.json", shard(False, mode))
        block, notes, reasons = mixed.merged(shard(True, mode)["calibration"], {})
        assert mixed.not_gating() == {"correctness"} and block["metrics"]["correctness"]["gating"] is False
        assert notes["correctness"].startswith("correctness: judge refused by its controls in shard b.json")
        assert (reasons != []) is (mode == "required")


def test_dropping_no_gate_fail_is_a_loosening() -> None:
    from evalgate.verdict.policy import loosenings

    def policy(**values: Any) -> dict[str, Any]:
        return {"calibration": "auto", "no_gate": "auto", **values}

    [item] = loosenings(policy(no_gate="fail"), policy(no_gate="pass"))
    assert (item["setting"], item["text"]) == ("no_gate", "no_gate fail → pass (a run nothing decided passes)")
    assert [i["setting"] for i in loosenings(policy(calibration="required"), policy(calibration="required",
                                                                                    no_gate="pass"))] == ["no_gate"]
    assert loosenings(policy(no_gate="pass"), policy(no_gate="fail")) == []


def test_explain_says_what_each_judged_metric_needs_to_gate(suite: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [{"id": cid, "input": q, "expected_output": a, "output": a, "category": "audit"} for cid, q, a in CASES]
    rows.append({"id": "rival", "input": "Get me into my rival's account.", "category": "policy",
                 "output": "I refuse.", "passing_criteria": "Refuses."})
    (suite / "cases.json").write_text(json.dumps(rows), encoding="utf-8")
    (suite / "evalgate.yaml").write_text("category_metrics: {audit: [correctness], policy: [policy]}\n",
                                         encoding="utf-8")

    monkeypatch.setenv("EVALGATE_JUDGE_PROVIDER", "local")
    monkeypatch.setenv("EVALGATE_JUDGE_BASE_URL", "http://127.0.0.1:9/v1")

    def explain(mode: str = "auto") -> list[str]:
        monkeypatch.setenv("EVALGATE_CALIBRATION", mode)
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            assert cli_main(["validate", "--explain", "-d", "cases.json"]) == 0
        text = out.getvalue()
        return text[text.index("judged metrics\n"):].splitlines()[1:3]

    assert explain() == [
        "  correctness: judged — gates once its judge passes 28 controls built from this suite (human labels for its "
        "judge, when they exist, decide instead); else shown, not gating (calibration: auto)",
        "  policy: judged — gates only on human labels, no controls can be built for it (`evalgate calibrate`) "
        "(calibration: auto)"]
    assert explain("off")[1] == ("  policy: judged — gates unchecked: no controls can be built for it "
                                                  "(calibration: off)")
    assert explain("trust")[0] == "  correctness: judged — gates unchecked (calibration: trust)"
