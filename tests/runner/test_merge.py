"""``evalgate merge``: shard results (JSON and SQLite) → one run whose verdict equals an unsharded run."""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from evalgate.errors import UserError
from evalgate.runner.merge import add_judge_spend, merge_runs, recorded_thresholds
from evalgate.store.reader import load_document
from tests.servers.github_fake import GitHubFake
from tests.support.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
DATASETS = [ROOT / "datasets" / name for name in ("brand-mentions", "wikipedia-agent", "failing")]
SHARDS = 3
COMPARED = ("summary", "metrics", "thresholds", "thresholds_passed", "breakdowns")


def evaluate(output_dir: Path, *extra: str) -> int:
    dataset_args = [arg for path in DATASETS for arg in ("-d", str(path))]
    code, _, err = run_cli("run", *dataset_args, "-o", output_dir, "--progress", "none", *extra)
    assert code in (0, 1), err
    return code


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def save(document: Mapping[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One unsharded run and the same cases as 3 shards (real ``evalgate run`` invocations)."""
    root = tmp_path_factory.mktemp("merge")
    full_code = evaluate(root / "full")
    for index in range(1, SHARDS + 1):
        evaluate(root / f"shard{index}", "--shard", f"{index}/{SHARDS}")
    return {"root": root, "full_code": full_code, "full": load(root / "full" / "results.json")}


def shard_json(runs: Mapping[str, Any], index: int) -> Path:
    return runs["root"] / f"shard{index}" / "results.json"


def shard_db(runs: Mapping[str, Any], index: int) -> Path:
    return runs["root"] / f"shard{index}" / "results.db"


def by_case(document: Mapping[str, Any]) -> dict[tuple[str, int], Any]:
    return {(r["id"], r["repeat"]): r for r in document["results"]}


def assert_same_run(merged: Mapping[str, Any], full: Mapping[str, Any]) -> None:
    """Equal gate, summary, metric table, breakdowns and per-case results (run ids/timestamps aside)."""
    assert merged["gate"]["passed"] == full["gate"]["passed"]
    assert merged["gate"]["exit_code"] == full["gate"]["exit_code"]
    # critical-failure reasons follow completion order in a concurrent run: compare as multisets
    assert sorted(merged["gate"]["reasons"]) == sorted(full["gate"]["reasons"])
    for key in COMPARED:
        assert merged[key] == full[key], key
    assert sorted(merged["critical_failures"], key=lambda c: c["id"]) == sorted(
        full["critical_failures"], key=lambda c: c["id"])
    assert by_case(merged) == by_case(full)
    assert [r["id"] for r in merged["results"]] == [r["id"] for r in full["results"]]


# ---------------------------------------------------------------------------------------------
# equivalence


def test_shards_partition_the_suite(runs: dict[str, Any]) -> None:
    ids = [set(r["id"] for r in load(shard_json(runs, i))["results"]) for i in range(1, SHARDS + 1)]
    assert all(ids), "every shard should hold some cases"
    assert sum(len(s) for s in ids) == len(set().union(*ids)) == len(runs["full"]["results"])


def test_merged_verdict_equals_unsharded_run(runs: dict[str, Any], tmp_path: Path) -> None:
    full = runs["full"]
    assert full["gate"]["passed"] is False and full["summary"]["critical_failures"] >= 1
    shards = [shard_json(runs, i) for i in (3, 1, 2)]  # input order must not matter
    html = tmp_path / "report.html"
    code, out, err = run_cli("merge", *shards, "--output-dir", tmp_path / "merged", "--html", html)
    assert code == runs["full_code"] == 1, err
    merged = load(tmp_path / "merged" / "results.json")
    assert merged["status"] == "merged"
    assert merged["run_id"] != full["run_id"]
    assert_same_run(merged, full)
    assert "Merged 3 input(s)" in out
    report = html.read_text(encoding="utf-8")
    assert "evalgate failed" in report and "Merged from 3 run(s)" in report


def test_download_artifact_directories_are_inputs(runs: dict[str, Any], tmp_path: Path) -> None:
    """``actions/download-artifact`` without a name: DIR/<artifact name>/results.json and results.db."""
    downloaded = tmp_path / "shards"
    for index in (1, 2, 3):
        artifact = downloaded / f"evalgate-results-shard-{index}"
        artifact.mkdir(parents=True)
        for name in ("results.json", "results.db"):
            shutil.copyfile(runs["root"] / f"shard{index}" / name, artifact / name)
    code, _, err = run_cli("merge", downloaded, "--output-dir", downloaded / "merged")
    assert code == runs["full_code"], err
    merged = load(downloaded / "merged" / "results.json")
    assert_same_run(merged, runs["full"])
    assert [m["source"] for m in merged["metadata"]["merged_from"]] == [
        str(downloaded / f"evalgate-results-shard-{i}" / "results.json") for i in (1, 2, 3)]
    # one artifact's directory (download-artifact with name:) is one input; a rerun skips its own output
    code, _, err = run_cli("merge", downloaded / "evalgate-results-shard-1", downloaded / "evalgate-results-shard-2",
                           downloaded / "evalgate-results-shard-3", "--output-dir", tmp_path / "again")
    assert code == runs["full_code"], err
    code, _, err = run_cli("merge", downloaded, "--output-dir", downloaded / "merged")
    assert code == runs["full_code"], err
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run_cli("merge", empty, "--output-dir", tmp_path / "x")
    assert code == 2 and "no results.json or results.db in this directory or below it" in err


def test_sqlite_inputs_give_the_same_run(runs: dict[str, Any], tmp_path: Path) -> None:
    outcome = merge_runs([shard_db(runs, 1), shard_json(runs, 2), shard_db(runs, 3)], output_dir=tmp_path)
    assert_same_run(load(outcome.results_path), runs["full"])
    sources = [m["source"] for m in outcome.document["metadata"]["merged_from"]]
    assert sources[0].startswith(f"{shard_db(runs, 1)}#") and sources[1] == str(shard_json(runs, 2))
    assert [m["shard"] for m in outcome.document["metadata"]["merged_from"]] == ["1/3", "2/3", "3/3"]
    assert "shard" not in outcome.document["metadata"]["config"]
    assert outcome.document["metadata"]["selected_cases"] == len(runs["full"]["results"])


def test_merged_run_is_stored_in_sqlite(runs: dict[str, Any], tmp_path: Path) -> None:
    db = tmp_path / "history.db"
    outcome = merge_runs([shard_json(runs, i) for i in (1, 2, 3)], output_dir=tmp_path / "out", db_path=db)
    assert outcome.db_path == db
    summary = runs["full"]["summary"]
    with contextlib.closing(sqlite3.connect(db)) as conn:
        status, document = conn.execute("SELECT status, document FROM eg_runs").fetchone()
        assert status == "merged" and json.loads(document)["gate"] == outcome.document["gate"]
        totals = conn.execute("SELECT total_test_cases, total_passed, pass_rate FROM eval_runs").fetchone()
        assert totals == (summary["total_test_cases"], summary["total_passed"], summary["pass_rate"])
        cases = conn.execute("SELECT case_id, record FROM eg_cases ORDER BY idx").fetchall()
        assert [json.loads(record) for _, record in cases] == load(outcome.results_path)["results"]
        failing = conn.execute(  # seed 001's "find failing tests" works on the merged run
            "SELECT test_description, COUNT(*) FROM eval_results WHERE overall_passed = 0 GROUP BY test_description"
        ).fetchall()
        assert len(failing) == summary["total_failed"] + summary["total_errored"]
    # reports read the merged run; a merge input must name it (merges skip merged runs by default)
    assert load_document(db) == load(outcome.results_path)
    with pytest.raises(UserError, match="no finished run in this database"):
        merge_runs([db], output_dir=tmp_path / "again")
    again = merge_runs([f"{db}#{outcome.document['run_id']}"], output_dir=tmp_path / "again")
    assert_same_run(load(again.results_path), runs["full"])


def test_merged_results_match_the_schema(runs: dict[str, Any], tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    outcome = merge_runs([shard_json(runs, i) for i in (1, 2, 3)], output_dir=tmp_path)
    schema = json.loads((ROOT / "evalgate" / "schemas" / "results.schema.json").read_text(encoding="utf-8"))
    jsonschema.validate(load(outcome.results_path), schema)


def test_json_format_prints_the_merged_document(runs: dict[str, Any], tmp_path: Path) -> None:
    code, out, _ = run_cli("merge", *(shard_json(runs, i) for i in (1, 2, 3)), "-o", tmp_path, "--format", "json")
    assert code == 1
    assert json.loads(out) == load(tmp_path / "results.json")


def test_unsharded_partitions_merge_too(runs: dict[str, Any], tmp_path: Path) -> None:
    full = runs["full"]
    half = len(full["results"]) // 2
    first = save({**full, "results": full["results"][:half]}, tmp_path / "a.json")
    second = save({**full, "results": full["results"][half:]}, tmp_path / "b.json")
    outcome = merge_runs([second, first], output_dir=tmp_path / "out")
    assert_same_run(load(outcome.results_path), full)


# ---------------------------------------------------------------------------------------------
# refusals


def test_duplicate_case_ids_are_refused(runs: dict[str, Any], tmp_path: Path) -> None:
    full = runs["full"]
    first = save({**full, "results": full["results"][:10]}, tmp_path / "a.json")
    overlap = save({**full, "results": full["results"][5:]}, tmp_path / "b.json")
    with pytest.raises(UserError, match=r"case id '.+' is also in .*a\.json; shards must not overlap"):
        merge_runs([first, overlap], output_dir=tmp_path / "out")
    assert not (tmp_path / "out" / "results.json").exists()


def test_the_same_shard_twice_is_refused(runs: dict[str, Any], tmp_path: Path) -> None:
    code, _, err = run_cli("merge", shard_json(runs, 1), shard_db(runs, 1), shard_json(runs, 2), "-o", tmp_path)
    assert code == 2
    assert "shard 1/3 is given twice" in err


def test_missing_shard_needs_allow_partial(runs: dict[str, Any], tmp_path: Path) -> None:
    code, _, err = run_cli("merge", shard_json(runs, 1), shard_json(runs, 3), "-o", tmp_path / "a")
    assert code == 2 and "shard(s) 2/3 missing" in err and "--allow-partial" in err
    code, _, _ = run_cli("merge", shard_json(runs, 1), shard_json(runs, 3), "-o", tmp_path / "b", "--allow-partial")
    merged = load(tmp_path / "b" / "results.json")
    assert code == 1
    assert "shard(s) 2/3 missing: the merged results are partial" in merged["gate"]["reasons"]


def test_thresholds_must_agree(runs: dict[str, Any], tmp_path: Path) -> None:
    evaluate(tmp_path / "loose", "--shard", f"2/{SHARDS}", "--metric-thresholds", '{"mrr": 0.5}')
    with pytest.raises(UserError, match=r"threshold for 'mrr' is .*0\.5.* but .*0\.7"):
        merge_runs([shard_json(runs, 1), tmp_path / "loose" / "results.json", shard_json(runs, 3)],
                   output_dir=tmp_path / "out")


def test_gate_settings_must_agree(runs: dict[str, Any], tmp_path: Path) -> None:
    document = load(shard_json(runs, 3))
    document["metadata"]["config"]["min_pass_rate"] = 0.5
    edited = save(document, tmp_path / "s3.json")
    with pytest.raises(UserError, match=r"min_pass_rate differs between shards: 0\.5 here, null in"):
        merge_runs([shard_json(runs, 1), shard_json(runs, 2), edited], output_dir=tmp_path / "out")


def test_dataset_change_is_refused(runs: dict[str, Any], tmp_path: Path) -> None:
    document = load(shard_json(runs, 2))
    document["metadata"]["datasets"] = document["metadata"]["datasets"][1:]
    edited = save(document, tmp_path / "s2.json")
    with pytest.raises(UserError, match="datasets differs between shards"):
        merge_runs([shard_json(runs, 1), edited, shard_json(runs, 3)], output_dir=tmp_path / "out")


def test_mislabelled_shard_is_refused(runs: dict[str, Any], tmp_path: Path) -> None:
    one, two = load(shard_json(runs, 1)), load(shard_json(runs, 2))
    one["metadata"]["config"]["shard"], two["metadata"]["config"]["shard"] = "2/3", "1/3"
    with pytest.raises(UserError, match=r"belongs to shard 1/3, not 2/3"):
        merge_runs([save(one, tmp_path / "1.json"), save(two, tmp_path / "2.json"), shard_json(runs, 3)],
                   output_dir=tmp_path / "out")


def test_shard_and_unsharded_run_do_not_mix(runs: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(UserError, match="cannot merge with the unsharded run"):
        merge_runs([runs["root"] / "full" / "results.json", shard_json(runs, 1)], output_dir=tmp_path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "not valid JSON"),
        (b'{"schema_version": 1}', "not an evalgate results document"),
        (b'{"schema_version": 9, "run_id": "x", "summary": {}, "gate": {}, "metrics": {}, "results": []}',
         "schema_version 9 is not 1"),
    ],
)
def test_unreadable_inputs_are_user_errors(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    code, _, err = run_cli("merge", path, "-o", tmp_path / "out")
    assert code == 2
    assert err.startswith(f"evalgate: error: {path}") and message in err and "Traceback" not in err


def test_missing_file_and_unknown_run(runs: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(UserError, match="shard results not found"):
        merge_runs([tmp_path / "nope.json"], output_dir=tmp_path)
    with pytest.raises(UserError, match="no run 'nope' in this database"):
        merge_runs([f"{shard_db(runs, 1)}#nope"], output_dir=tmp_path)
    plain = tmp_path / "plain.db"
    with contextlib.closing(sqlite3.connect(plain)) as conn:
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(UserError, match="no evalgate runs in this database"):
        merge_runs([plain], output_dir=tmp_path)


def test_invalid_case_record_names_its_position(runs: dict[str, Any], tmp_path: Path) -> None:
    document = load(shard_json(runs, 1))
    document["results"][2]["status"] = "exploded"
    with pytest.raises(UserError, match=r"s1\.json: results\[2\]: invalid case record: status"):
        merge_runs([save(document, tmp_path / "s1.json")], output_dir=tmp_path / "out")


# ---------------------------------------------------------------------------------------------
# shard-level gate reasons, spend and publishing


def test_cancelled_shard_fails_the_merged_gate(runs: dict[str, Any], tmp_path: Path) -> None:
    full = runs["full"]
    passing = [r for r in full["results"] if r["passed"]]
    base = {**full, "status": "completed", "metadata": {**full["metadata"], "cost": {"budget_exceeded": False}}}
    first = save({**base, "results": passing[:3]}, tmp_path / "a.json")
    outcome = merge_runs([first], output_dir=tmp_path / "ok")
    assert outcome.verdict.passed, outcome.verdict.reasons
    cancelled = save({**base, "status": "cancelled", "results": passing[3:6]}, tmp_path / "b.json")
    over_budget = save({**base, "metadata": {**base["metadata"], "cost": {"budget_exceeded": True}},
                        "results": passing[6:9]}, tmp_path / "c.json")
    outcome = merge_runs([first, cancelled, over_budget], output_dir=tmp_path / "out")
    assert not outcome.verdict.passed
    assert outcome.verdict.reasons == [f"{cancelled}: run cancelled before every case finished",
                                       f"{over_budget}: max_cost reached: the shard stopped before exceeding the budget"]


def test_judge_spend_is_summed() -> None:
    summary: dict[str, Any] = {"cost_usd": 0.5, "tokens": {"total": 10}}
    shards = [
        {"summary": {"judge_calls": {"made": 3, "cached": 1, "cost_usd": 0.25},
                     "tokens": {"judge_prompt": 100, "judge_completion": 20}}},
        {"summary": {"tokens": {"total": 5}}},
        {"summary": {"judge_calls": {"made": 2, "cached": 0, "cost_usd": 0.125},
                     "tokens": {"judge_prompt": 50, "judge_completion": 5}}},
    ]
    add_judge_spend(summary, shards)
    assert summary["cost_usd"] == 0.875
    assert summary["judge_calls"] == {"made": 5, "cached": 1, "cost_usd": 0.375}
    assert summary["tokens"] == {"total": 10, "judge_prompt": 150, "judge_completion": 25}


def test_recorded_thresholds_include_informational_metrics() -> None:
    document = {"metrics": {"a": {"threshold": {"min": 0.5}}, "b": {"threshold": None}},
                "thresholds": {"a": {"min": 0.5}, "c": {"max": 3}}}
    assert recorded_thresholds(document) == {"a": {"min": 0.5}, "b": None, "c": {"max": 3}}


def test_comment_is_posted_once_with_the_merged_verdict(
    runs: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = "ghs_merge_comment_token_123"
    event = save({"pull_request": {"number": 7, "head": {"sha": "abc123", "ref": "feature",
                                                         "repo": {"full_name": "octo/hello"}},
                                   "base": {"ref": "main", "repo": {"full_name": "octo/hello"}}},
                  "repository": {"full_name": "octo/hello"}}, tmp_path / "event.json")
    summary = tmp_path / "summary.md"
    with GitHubFake(token=token) as fake:
        for key, value in {"GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": "pull_request",
                           "GITHUB_EVENT_PATH": str(event), "GITHUB_REPOSITORY": "octo/hello",
                           "GITHUB_API_URL": fake.url, "GITHUB_RUN_ID": "99", "GITHUB_TOKEN": token,
                           "GITHUB_STEP_SUMMARY": str(summary)}.items():
            monkeypatch.setenv(key, value)
        shards = [shard_json(runs, i) for i in (1, 2, 3)]
        for attempt in range(2):
            code, _, err = run_cli("merge", *shards, "-o", tmp_path / f"out{attempt}", "--comment")
            assert code == 1
            assert f"PR comment {'created' if attempt == 0 else 'updated'}" in err
        comments = fake.comments_on("octo/hello", 7)
    assert len(comments) == 1
    body = comments[0]["body"]
    assert body.startswith("<!-- evalgate:comment tag=default -->")
    assert "evalgate failed" in body and token not in body
    assert "https://github.com/octo/hello/actions/runs/99" in body
    assert "evalgate failed" in summary.read_text(encoding="utf-8")


def test_comment_without_pull_request_is_a_warning(
    runs: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in ("GITHUB_EVENT_PATH", "GITHUB_EVENT_NAME", "GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(key, raising=False)
    code, _, err = run_cli("merge", shard_json(runs, 1), shard_json(runs, 2), shard_json(runs, 3),
                           "-o", tmp_path / "out", "--comment")
    assert code == 1
    assert "evalgate: warning: PR comment skipped: " in err and "no pull request" in err


def test_directory_inputs_carry_every_shards_judge_cache(runs: dict[str, Any], tmp_path: Path) -> None:
    """A directory of artifacts merges each artifact's ``judge-cache.db`` (beside its results), not one next to
    the directory."""
    from evalgate.store.judge_cache import CachedReply, CacheKey, JudgeCache

    downloaded = tmp_path / "shards"
    keys = [CacheKey("local", "http://127.0.0.1:9/v1", "m", "relevancy@1", f"h{i}") for i in (1, 2, 3)]
    for index, key in zip((1, 2, 3), keys, strict=True):
        artifact = downloaded / f"evalgate-results-shard-{index}"
        artifact.mkdir(parents=True)
        shutil.copyfile(runs["root"] / f"shard{index}" / "results.json", artifact / "results.json")
        cache = JudgeCache(artifact / "judge-cache.db")
        cache.put(key, CachedReply(f"verdict of shard {index}", 5, 6))
        cache.close()
    merge_runs([downloaded], output_dir=tmp_path / "merged")
    merged = JudgeCache(tmp_path / "merged" / "judge-cache.db")
    try:
        assert [getattr(merged.get(key), "reply", None) for key in keys] == [
            f"verdict of shard {index}" for index in (1, 2, 3)]
    finally:
        merged.close()
