"""A calibration file cannot be forged (issue 30, item 3): κ, accuracy and their intervals are recomputed from
the record's own labels and verdicts when it is read (a hand-edited κ is not believed, and the mismatch is
named); the calibration key includes the judge's endpoint; a calibration record the base run did not use is a
gate change. Through the CLI against the demo judge on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalgate.demo.judge import judge_server
from tests.support.calibration import cli, judge_args, run

FILE = Path("labels") / "judge-calibration.json"


def records() -> dict[str, Any]:
    return json.loads(FILE.read_text(encoding="utf-8"))


def edit(metric: str, **changes: Any) -> dict[str, Any]:
    """Hand-edit every stored record of ``metric`` (``None`` deletes a field)."""
    document = records()
    for record in document["calibrations"]:
        if record["metric"] == metric:
            for name, value in changes.items():
                if value is None:
                    record.pop(name, None)
                else:
                    record[name] = value
    FILE.write_text(json.dumps(document, indent=2), encoding="utf-8")
    return document


@pytest.mark.parametrize("keep_pairs", [False, True], ids=["confusion-only", "with-pairs"])
def test_a_hand_edited_kappa_does_not_admit_an_uncalibrated_judge(suite: Path, keep_pairs: bool) -> None:
    with judge_server(mode="random") as judge:
        assert cli("calibrate", "-d", "cases.yaml", "-o", "out", *judge_args(judge.base_url, "random"))[0] == 1
        stored = next(r for r in records()["calibrations"] if r["metric"] == "policy")
        true_kappa = stored["kappa"]
        assert true_kappa < 0.6 and stored["n"] == 32
        assert len(stored["pairs"]) == 32  # each label with the judge's value: what the numbers are recomputed from
        # the attacker's edit: κ and its interval raised, the confusion matrix (and the pairs) left as they were
        edit("policy", kappa=0.95, kappa_ci=[0.9, 1.0], accuracy=0.98, pairs=None if not keep_pairs else stored["pairs"])
        Path("out/results.db").unlink()  # only the committed file vouches now
        code, document, text = run(judge.base_url, model="random")
    assert code == 0, text  # auto: an uncalibrated judge is shown, not gating; the run passes on what gates
    policy = document["calibration"]["metrics"]["policy"]
    assert policy["status"] == "below_floor" and policy["gating"] is False, policy
    assert policy["kappa"] == pytest.approx(true_kappa, abs=1e-4)
    assert "policy" not in document["thresholds"]
    assert "κ 0.95 stored" in policy["mismatch"] and f"{true_kappa:g} from its labels and verdicts" in policy["mismatch"]
    assert "calibration labels/judge-calibration.json: policy (random@policy-" in text
    assert "the recomputed values are used" in text


def test_summary_numbers_without_labels_and_verdicts_vouch_for_nothing(suite: Path) -> None:
    with judge_server() as judge:
        assert cli("calibrate", "-d", "cases.yaml", "-o", "out", *judge_args(judge.base_url))[0] == 0
        edit("policy", confusion=None, pairs=None, n=400, kappa=0.99)
        Path("out/results.db").unlink()
        code, document, _text = run(judge.base_url, "--calibration", "required")
    assert code == 1
    policy = document["calibration"]["metrics"]["policy"]
    assert policy["status"] == "below_floor" and policy["n"] == 0, policy
    assert any(r.startswith("policy: judge not calibrated") and "κ undefined on 0 labels" in r
               for r in document["gate"]["reasons"])
    assert document["calibration"]["metrics"]["correctness"]["status"] == "calibrated"  # untouched: still vouches


def test_a_calibration_measured_at_one_endpoint_does_not_admit_another(suite: Path) -> None:
    with judge_server() as judge:
        assert cli("calibrate", "-d", "cases.yaml", "-o", "out", *judge_args(judge.base_url))[0] == 0
        parts = records()["calibrations"][0]["parts"]
        assert parts["endpoint"] == "http://loopback/v1"  # a server on this machine: its port changes between runs
        # the same model name answering at another endpoint (here: another path of the same server)
        cli("run", "-d", "cases.yaml", "-o", "out", "--progress", "none", "--judge-provider", "local",
            "--judge-base-url", judge.base_url, "--judge-model", "demo-judge")
    document = json.loads(Path("out/results.json").read_text(encoding="utf-8"))
    policy = document["calibration"]["metrics"]["policy"]
    assert policy["status"] == "stale" and policy["reason"].endswith("(changed: endpoint)"), policy
    assert policy["gating"] is False


def test_endpoint_normalisation() -> None:
    from evalgate.judges.calibration import endpoint_of

    assert endpoint_of("HTTPS://user:pw@API.OpenAI.com:443/v1/?api_key=x#f") == "https://api.openai.com/v1"
    assert endpoint_of("https://api.openai.com/v1") == "https://api.openai.com/v1"
    assert endpoint_of("http://judge.example:8080/v1") == "http://judge.example:8080/v1"
    assert endpoint_of("https://judge.example:8443/v1") != endpoint_of("https://judge.example/v1")
    assert endpoint_of("http://127.0.0.1:8012/v1") == endpoint_of("http://localhost:9/v1/") == "http://loopback/v1"
    assert endpoint_of("http://[::1]:1234/v1") == "http://loopback/v1"
    assert endpoint_of("http://127.0.0.2:1/v1") == "http://loopback/v1"
    assert endpoint_of("http://10.0.0.1:1/v1") == "http://10.0.0.1:1/v1"
    assert endpoint_of(None) is None and endpoint_of(" ") is None


def test_a_calibration_record_the_base_run_did_not_use_is_a_gate_change(suite: Path) -> None:
    with judge_server() as judge:
        assert cli("calibrate", "-d", "cases.yaml", "-o", "base", *judge_args(judge.base_url))[0] == 0
        code, out, err = cli("run", "-d", "cases.yaml", "-o", "base", "--progress", "none", *judge_args(judge.base_url))
        assert code == 0, out + err
        base_policy = json.loads(Path("base/results.json").read_text(encoding="utf-8"))["gate_policy"]
        assert set(base_policy["calibrations"]) == {"policy", "correctness"}
        # the same file: nothing listed
        code, document, text = run(judge.base_url, "--baseline", "base/results.json", "--gate-changes", "fail")
        assert code == 0, text
        assert not [item for item in document["gate"].get("loosened") or [] if item["kind"] == "calibration_changed"]
        # the pull request rewrites the calibration of `policy` (consistent numbers, another record)
        edit("policy", created="2030-01-01T00:00:00Z", labels=["labels/mine.labels.yaml"])
        Path("out/results.db").unlink()
        code, document, text = run(judge.base_url, "--baseline", "base/results.json", "--gate-changes", "fail")
    changed = [item for item in document["gate"]["loosened"] if item["kind"] == "calibration_changed"]
    assert [item["setting"] for item in changed] == ["calibration of policy"], document["gate"]["loosened"]
    assert changed[0]["origin"] == "labels/judge-calibration.json"
    assert "policy's judge gates on a calibration record the base run did not use (κ 0.81 on 32 labels)" in \
        changed[0]["text"]
    assert code == 1 and any("this pull request loosens the gate" in r for r in document["gate"]["reasons"])


def test_a_pull_request_run_reads_calibrations_from_the_file_not_from_a_results_db_in_the_checkout(
        suite: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A results.db in the output directory may be the pull request's own (committed with forged records): in a
    pull-request run only the calibration file counts, and it is compared with the base run's."""
    with judge_server() as judge:
        assert cli("calibrate", "-d", "cases.yaml", "-o", "out", *judge_args(judge.base_url))[0] == 0
        FILE.unlink()  # only the database holds the records now
        _code, document, _text = run(judge.base_url)
        assert document["calibration"]["metrics"]["policy"]["status"] == "calibrated"  # locally: the database counts
        monkeypatch.setenv("GITHUB_ACTIONS", "true")
        monkeypatch.setenv("GITHUB_EVENT_NAME", "pull_request")
        _code, document, text = run(judge.base_url)
    policy = document["calibration"]["metrics"]["policy"]
    assert policy["status"] == "missing" and policy["gating"] is False, policy
    assert "calibrations in out/results.db not read in a pull-request run" in text
