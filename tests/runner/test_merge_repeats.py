"""``evalgate merge`` of repeated runs: each case's repeats count once, and a run split into shards and
merged equals the unsharded run (verdict, summary with repeats and confidence intervals, flaky list).

The answers are recorded; the judge is the loopback OpenAI server, scripted per case: "flaky" cases get a
failing score on their second judge call only, so with ``--repeat 2 --concurrency 1`` (repeat 1 is the
second call) they pass one repeat of two — a flaky case that fails under the majority rule.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalgate.runner.merge import merge_runs, summed_calls
from tests.servers.openai_server import Judge, OpenAIServer
from tests.support.cli import run_cli

KEY = "sk-merge-repeats-judge-0123456789"
SHARDS = 3
RISKS = ("critical", "high", "medium", "low")
FLAKY = {"c01", "c04", "c07", "c10"}
ALWAYS_FAILING = {"c05"}
CASES = [
    {"id": f"c{i:02d}", "input": f"What should I know about item-{i:02d}?", "output": f"Item {i:02d} is fine.",
     "risk_level": RISKS[i % len(RISKS)], "category": "odd" if i % 2 else "even", "metrics": ["relevancy"]}
    for i in range(12)
]


class ScriptedJudge:
    """Relevancy per case and call: ALWAYS_FAILING → 0.2; FLAKY → 0.3 on the case's 2nd call; else 0.9."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}

    def __call__(self, prompt: str) -> float:
        found = re.search(r"item-(\d\d)", prompt)
        assert found is not None, "the judge prompt carries the case input"
        case_id = f"c{found.group(1)}"
        self.calls[case_id] = self.calls.get(case_id, 0) + 1
        if case_id in ALWAYS_FAILING:
            return 0.2
        return 0.3 if case_id in FLAKY and self.calls[case_id] == 2 else 0.9


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One unsharded repeated run and the same run as 3 shards, each against a fresh judge script."""
    root = tmp_path_factory.mktemp("merge-repeats")
    dataset = root / "cases.json"
    dataset.write_text(json.dumps(CASES), encoding="utf-8")
    script = ScriptedJudge()
    with pytest.MonkeyPatch.context() as patch, OpenAIServer(api_key=KEY, judge=Judge(score=script)) as server:
        patch.setenv("LOCAL_JUDGE_API_KEY", KEY)
        patch.setenv("EVALGATE_CALIBRATION", "trust")  # relevancy gates (the judge is not calibrated)

        def evaluate(output: Path, *extra: str) -> int:
            script.calls.clear()
            code, _, err = run_cli("run", "-d", dataset, "-o", output, "--progress", "none", "--repeat", "2",
                                   "--concurrency", "1", "--judge-provider", "local", "--judge-base-url",
                                   server.base_url + "/v1", *extra)
            assert code in (0, 1), err
            return code

        full_code = evaluate(root / "full")
        for index in range(1, SHARDS + 1):
            evaluate(root / f"shard{index}", "--shard", f"{index}/{SHARDS}")
        yield {"root": root, "full_code": full_code, "full": load(root / "full" / "results.json")}


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def shard_json(runs: dict[str, Any], index: int) -> Path:
    return runs["root"] / f"shard{index}" / "results.json"


def by_record(document: dict[str, Any]) -> dict[tuple[str, int], Any]:
    return {(r["id"], r["repeat"]): r for r in document["results"]}


def test_the_unsharded_run_counts_cases_and_lists_flaky_ones(runs: dict[str, Any]) -> None:
    full = runs["full"]
    summary = full["summary"]
    assert len(full["results"]) == 2 * len(CASES)
    assert (summary["total_test_cases"], summary["total_passed"], summary["total_failed"]) == (12, 7, 5)
    assert summary["repeats"]["flaky_cases"] == len(FLAKY)
    assert [f["id"] for f in full["flaky"]] == ["c04", "c01", "c10", "c07"]  # critical, high, medium, low
    assert all(f["outcomes"] == ["passed", "failed"] for f in full["flaky"])
    assert runs["full_code"] == 1 and any("critical case c04 failed" in r for r in full["gate"]["reasons"])


def test_merged_repeated_run_equals_the_unsharded_run(runs: dict[str, Any], tmp_path: Path) -> None:
    shards = [shard_json(runs, i) for i in (2, 3, 1)]
    assert all(load(path)["results"] for path in shards), "every shard should hold some cases"
    code, _, err = run_cli("merge", *shards, "-o", tmp_path / "merged")
    full, merged = runs["full"], load(tmp_path / "merged" / "results.json")
    assert code == runs["full_code"] == 1, err
    assert merged["gate"]["passed"] is full["gate"]["passed"] is False
    assert sorted(merged["gate"]["reasons"]) == sorted(full["gate"]["reasons"])
    assert merged["summary"] == full["summary"]
    assert merged["summary"]["total_test_cases"] == len(CASES), "repeats must not count as cases"
    assert merged["summary"]["confidence_intervals"]["metrics"]["relevancy"]["cases"] == len(CASES)
    assert merged["flaky"] == full["flaky"]
    for key in ("metrics", "thresholds", "thresholds_passed", "breakdowns"):
        assert merged[key] == full[key], key
    assert by_record(merged) == by_record(full)


def test_merged_call_counters_and_judge_spend_are_sums(runs: dict[str, Any], tmp_path: Path) -> None:
    outcome = merge_runs([shard_json(runs, i) for i in (1, 2, 3)], output_dir=tmp_path)
    full_calls = runs["full"]["metadata"]["calls"]
    merged_calls = outcome.document["metadata"]["calls"]
    assert merged_calls == {key: full_calls[key] for key in merged_calls}
    assert merged_calls["calls"] == 2 * len(CASES)
    assert outcome.document["summary"]["judge_calls"] == runs["full"]["summary"]["judge_calls"]


def test_summed_calls_ignore_missing_counters() -> None:
    documents = [{"metadata": {"calls": {"calls": 3, "retries": 2, "rate_limited_429": 1}}}, {"metadata": {}},
                 {"metadata": {"calls": {"calls": 4, "timeouts": 1, "failed": True}}}]
    assert summed_calls(documents) == {"calls": 7, "attempts": 0, "retries": 2, "rate_limited_429": 1,
                                       "failed": 0, "timeouts": 1}


def test_a_case_missing_a_repeat_is_counted_once_and_reported_incomplete(runs: dict[str, Any], tmp_path: Path) -> None:
    shard = load(shard_json(runs, 1))
    dropped = next(r for r in shard["results"] if r["repeat"] == 1)
    shard["results"] = [r for r in shard["results"] if r is not dropped]
    shard["status"] = "cancelled"
    edited = tmp_path / "shard1.json"
    edited.write_text(json.dumps(shard), encoding="utf-8")
    outcome = merge_runs([edited, shard_json(runs, 2), shard_json(runs, 3)], output_dir=tmp_path / "out")
    summary = outcome.document["summary"]
    assert summary["total_test_cases"] == len(CASES)
    assert summary["repeats"]["incomplete_cases"] == 1
    assert f"{edited}: run cancelled before every case finished" in outcome.verdict.reasons


def test_confidence_intervals_do_not_depend_on_the_order_cases_finish_in() -> None:
    """A concurrent run and a merge feed the sink in different orders; the intervals must agree."""
    import random

    from evalgate.model import CaseResult, CaseStatus, MetricResult, MetricStatus
    from evalgate.verdict.aggregate import RunAggregate
    from evalgate.verdict.repeats import RepeatSink

    rng = random.Random(7)
    records = []
    for index in range(40):
        for repeat in range(2):
            value = round(rng.random(), 3)
            passed = value >= 0.5
            records.append(CaseResult(
                id=f"c{index}", index=index, source=f"x.yaml:{index}", repeat=repeat, passed=passed,
                status=CaseStatus.passed if passed else CaseStatus.failed,
                metrics={"m": MetricResult(value=value, passed=passed,
                                           status=MetricStatus.passed if passed else MetricStatus.failed)}))

    def intervals(order: list[CaseResult]) -> dict[str, Any]:
        sink = RepeatSink(RunAggregate(), repeat=2)
        for record in order:
            sink.add(record)
        sink.finish()
        return sink.confidence_intervals(resamples=2000)

    shuffled = records[:]
    rng.shuffle(shuffled)
    in_order, out_of_order = intervals(records), intervals(shuffled)
    assert in_order["metrics"]["m"]["low"] < in_order["metrics"]["m"]["high"]
    assert in_order["pass_rate"] == out_of_order["pass_rate"]
    assert in_order["metrics"]["m"]["low"] == out_of_order["metrics"]["m"]["low"]
    assert in_order["metrics"]["m"]["high"] == out_of_order["metrics"]["m"]["high"]
