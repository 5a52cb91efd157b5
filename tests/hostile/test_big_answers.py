"""Item 1 of issue #12: one big answer must not stall the other cases, and nothing grows with it.

A loopback agent answers 40 ordinary cases after 50 ms and one case with 10 MB of text; the run has a 2 s
limit per attempt and no retries, so any stall of the event loop longer than that would error an
ordinary case (before the fix: 11 of 40 errored, token counting alone took ≈ 4.7 s on the loop)."""

from __future__ import annotations

import json
from pathlib import Path

from evalgate.config.settings import DEFAULT_MAX_ANSWER_CHARS
from tests.hostile.helpers import run_cli, write_cases
from tests.hostile.servers import Loopback, Out, Seen

HUGE_CHARS = 10 * 1024 * 1024
HUGE_TEXT = ("Acme and Globex " * (HUGE_CHARS // 16 + 1))[:HUGE_CHARS]
HUGE_BODY = json.dumps({"response": HUGE_TEXT}).encode()
NORMAL = 40


def agent(seen: Seen) -> Out:
    message = seen.json()["message"]
    if message == "huge":
        return Out(HUGE_BODY, content_type="application/json")
    return Out({"response": f"the answer to {message} mentions Acme"}, delay=0.05)


def cases() -> list[dict[str, object]]:
    """40 ordinary cases and the huge one, all with token counting, mentions and rules to score."""
    scored = {"brands_mine": ["Acme"], "brands_competitors": ["Globex"], "expected_my_mentions": ["Acme"],
              "expected_competitor_mentions": [],
              "rules": [{"type": "contains", "value": "Acme"}, {"type": "max_tokens", "value": 100_000_000}]}
    normal = [{"id": f"n{i:02d}", "input": f"question {i}", **scored} for i in range(NORMAL)]
    return [*normal[:20], {"id": "huge", "input": "huge", **scored}, *normal[20:]]


def run(tmp_path: Path, *extra: str, timeout: str = "2") -> tuple[dict[str, dict[str, object]], Path]:
    """``timeout``: the per-attempt limit; 2 s where the test is that a huge answer never holds up the others'
    replies (scoring off the event loop), more where only the cap is tested (a loaded machine is slow)."""
    dataset = write_cases(tmp_path / "cases.json", cases())
    with Loopback(agent) as server:
        ran = run_cli(["run", "--dataset", str(dataset), "--target", "http", "--target-url", server.url + "/chat",
                       "--concurrency", "8", "--api-timeout-seconds", timeout, "--api-retries", "0", *extra],
                      tmp_path / "out")
    assert ran.code in (0, 1), ran.err
    return ran.cases(), tmp_path / "out"


def test_a_10_mb_answer_is_cut_to_the_cap_errored_and_the_other_40_cases_are_not(tmp_path: Path) -> None:
    records, out = run(tmp_path, timeout="30")
    huge = records.pop("huge")
    assert huge["status"] == "errored" and "answer too large" in str(huge["error"])
    assert huge["answer"]["truncated"] == {"output": HUGE_CHARS}
    assert len(str(huge["output"])) == DEFAULT_MAX_ANSWER_CHARS and huge["metrics"] == {}  # kept, never scored
    assert len(records) == NORMAL
    assert [case_id for case_id, record in records.items() if record["status"] == "errored"] == []
    assert all(record["status"] == "passed" for record in records.values())
    # what is stored grows with the cap, not with the answer
    assert (out / "results.json").stat().st_size < 3 * DEFAULT_MAX_ANSWER_CHARS
    assert (out / "results.db").stat().st_size < 4 * DEFAULT_MAX_ANSWER_CHARS
    calls = json.loads((out / "results.json").read_text())["metadata"]["calls"]
    assert calls["timeouts"] == 0 and calls["failed"] == 0


def test_a_10_mb_answer_under_a_raised_cap_is_scored_off_the_event_loop(tmp_path: Path) -> None:
    """With the cap above 10 MB the huge answer is scored (token counting, 655k mentions, rules) in a
    worker thread within the case's 2 s: the other cases' replies are still read on time."""
    records, out = run(tmp_path, "--max-answer-chars", str(2 * HUGE_CHARS))
    huge = records.pop("huge")
    assert "truncated" not in huge["answer"] and len(str(huge["output"])) == HUGE_CHARS
    for metric in huge["metrics"].values():  # each one computed, or errored by the case's scoring deadline
        assert metric["status"] in ("passed", "failed") or "scoring" in metric["reason"] \
            or "not scored" in metric["reason"]
    assert [case_id for case_id, record in records.items() if record["status"] != "passed"] == []
    assert json.loads((out / "results.json").read_text())["metadata"]["calls"]["timeouts"] == 0
