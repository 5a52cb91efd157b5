"""Judge only what changed: the base branch's judge cache travels in its results artifact and is restored
before a pull request's run, so unchanged prompts cost no call; a changed judge model, template or rubric
never hits it (the key prevents it)."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from evalgate.calls.runtime import Runtime
from evalgate.config.settings import Settings
from evalgate.github import publish
from evalgate.github.baseline import read_judge_cache_zip
from evalgate.judges import prompts
from evalgate.judges.factory import build_judge
from evalgate.model import Answer, Case
from evalgate.runner.reuse import restore_base_cache
from evalgate.store.judge_cache import BaseCache, CachedReply, CacheKey, JudgeCache
from evalgate.store.reader import BaselineLookup
from tests.servers.github_artifacts_fake import GitHubArtifactsFake, zip_bytes
from tests.servers.openai_server import Judge, OpenAIServer

KEY = "sk-reuse-test-key-31337-do-not-leak"
BASE_SHA = "b" * 40
REPO_ROOT = Path(__file__).resolve().parents[2]
CRITERIA = "The answer names the topic of the question and gives a next step."


def case_rows(changed: set[int] = frozenset(), n: int = 6) -> list[dict[str, Any]]:
    rows = []
    for i in range(n):
        answer = f"Answer {i}: open the settings page and follow the check."
        if i in changed:
            answer = f"Answer {i}: a different reply written on the pull request branch."
        rows.append({"id": f"case-{i}", "input": f"Question {i}: how do I rotate the key?", "output": answer,
                     "passing_criteria": CRITERIA, "metrics": ["relevancy"]})
    return rows


def write_dataset(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def evalgate(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_", "EVALGATE_"))}
    full_env |= {"LOCAL_JUDGE_API_KEY": KEY, "NO_COLOR": "1", "EVALGATE_JUDGE_SHARED_CACHE": "none", **(env or {})}
    return subprocess.run([sys.executable, "-m", "evalgate", "run", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=120)


def judged_run(server: OpenAIServer, dataset: Path, out: Path, *extra: str, env: dict[str, str] | None = None
               ) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    done = evalgate("-d", str(dataset), "--output-dir", str(out), "--judge-provider", "local",
                    "--judge-base-url", server.base_url + "/v1", "--progress", "none", *extra, cwd=out.parent,
                    env={"EVALGATE_PRICES": json.dumps({"local-model": {"input": 2.5, "output": 10.0}}), **(env or {})})
    assert done.returncode in (0, 1), done.stderr
    return done, json.loads((out / "results.json").read_text(encoding="utf-8"))


def scores(document: dict[str, Any]) -> dict[str, float]:
    return {r["id"]: r["metrics"]["relevancy"]["value"] for r in document["results"]}


def by_answer(prompt: str) -> float:
    """A verdict that depends on the answer, so a changed answer gets a different score."""
    return 0.4 if "different reply" in prompt else 0.9


@pytest.fixture()
def judge_server() -> Iterator[OpenAIServer]:
    with OpenAIServer(api_key=KEY, judge=Judge(score=by_answer)) as server:
        yield server


# --- the artifact carries the cache; a PR run restores it from the base branch's artifact -----------------


def test_upload_includes_the_judge_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("results.json", "results.db", "judge-cache.db"):
        (tmp_path / name).write_bytes(b"x")
    uploaded: list[list[Path]] = []

    def fake_upload(name: str, files: list[Path], **_: Any) -> publish.UploadResult:
        uploaded.append(files)
        return publish.UploadResult(uploaded=False)

    monkeypatch.setattr(publish, "upload_artifact", fake_upload)
    publish._upload(tmp_path / "results.json", tmp_path / "results.db", publish.PublishOptions(), {}, lambda _: None,
                    lambda _: None)
    assert [p.name for p in uploaded[0]] == ["results.json", "results.db", "judge-cache.db"]


def test_a_pr_run_reuses_the_base_artifacts_verdicts(tmp_path: Path, judge_server: OpenAIServer) -> None:
    base_out, pr_out, full_out = tmp_path / "base", tmp_path / "pr", tmp_path / "full"
    _, base = judged_run(judge_server, write_dataset(tmp_path / "base.jsonl", case_rows()), base_out)
    assert base["summary"]["judge_calls"]["made"] == 6
    files = {name: (base_out / name).read_bytes() for name in ("results.json", "results.db", "judge-cache.db")}
    assert KEY.encode() not in files["judge-cache.db"]  # the artifact never carries the key
    with GitHubArtifactsFake() as gh:
        gh.add_artifact("evalgate-results", zip_bytes(files), head_branch="main", head_sha=BASE_SHA)
        judge_server.reset()
        pr_data = write_dataset(tmp_path / "pr.jsonl", case_rows(changed={1, 4}))
        pr_env = gh.pull_request_env(tmp_path, BASE_SHA, number=7, head_ref="topic")
        done, pr = judged_run(judge_server, pr_data, pr_out, "--baseline", "auto", env=pr_env)
        assert all("authorization" not in r.headers for r in gh.log if r.path.startswith("/blob/"))
    calls = judge_server.chat_requests()
    assert len(calls) == 2  # exactly the two changed answers were judged
    assert sorted("different reply" in json.dumps(c) for c in calls) == [True, True]
    reuse = pr["summary"]["judge_calls"]["base_cache"]
    assert (reuse["reused"], reuse["verdicts"], reuse["source"]) == (4, 6, "main @ bbbbbbb")
    assert reuse["saved_usd"] > 0
    assert "4 of 6 verdicts reused from main @ bbbbbbb, $" in done.stdout
    assert pr["baseline"]["found"]
    judge_server.reset()  # the same PR answers judged in full: the same scores and verdict
    _, full = judged_run(judge_server, pr_data, full_out, "--no-cache")
    assert len(judge_server.chat_requests()) == 6
    assert scores(full) == scores(pr) and full["gate"]["passed"] == pr["gate"]["passed"]
    assert pr["summary"]["cost_usd"] < full["summary"]["cost_usd"] * 0.4
    with closing(sqlite3.connect(pr_out / "judge-cache.db")) as db:  # the PR's own cache holds all six verdicts
        assert db.execute("SELECT count(*) FROM judge_cache").fetchone()[0] == 6


def test_judge_cache_path_setting_and_none(tmp_path: Path, judge_server: OpenAIServer) -> None:
    base_out = tmp_path / "base"
    judged_run(judge_server, write_dataset(tmp_path / "base.jsonl", case_rows()), base_out)
    saved = tmp_path / "restored"
    saved.mkdir()
    (saved / "judge-cache.db").write_bytes((base_out / "judge-cache.db").read_bytes())
    data = write_dataset(tmp_path / "pr.jsonl", case_rows(changed={0}))
    judge_server.reset()
    _, from_dir = judged_run(judge_server, data, tmp_path / "a", "--judge-cache", str(saved))
    assert len(judge_server.chat_requests()) == 1
    assert from_dir["summary"]["judge_calls"]["base_cache"]["reused"] == 5
    judge_server.reset()
    _, beside = judged_run(judge_server, data, tmp_path / "b", "--baseline", str(base_out / "results.json"))
    assert len(judge_server.chat_requests()) == 1  # a baseline path brings the cache beside it
    assert beside["summary"]["judge_calls"]["base_cache"]["source"] == str(base_out / "results.json")
    judge_server.reset()
    _, none = judged_run(judge_server, data, tmp_path / "c", "--baseline", str(base_out / "results.json"),
                         "--judge-cache", "none")
    assert len(judge_server.chat_requests()) == 6 and "base_cache" not in none["summary"]["judge_calls"]
    judge_server.reset()
    done, _ = judged_run(judge_server, data, tmp_path / "d", "--judge-cache", str(tmp_path / "nowhere"))
    assert len(judge_server.chat_requests()) == 6 and "no such file; every verdict is judged" in done.stderr + done.stdout


def test_the_artifacts_cache_member_is_read_only_when_it_is_sqlite() -> None:
    assert read_judge_cache_zip(zip_bytes({"results.json": "{}", "judge-cache.db": b"not sqlite"})) is None
    assert read_judge_cache_zip(zip_bytes({"results.json": "{}"})) is None
    assert read_judge_cache_zip(b"not a zip") is None
    good = b"SQLite format 3\x00" + b"\x00" * 100
    assert read_judge_cache_zip(zip_bytes({"deep/judge-cache.db": b"SQLite format 3\x00", "judge-cache.db": good})) == good
    assert read_judge_cache_zip(zip_bytes({"judge-cache.db": good}), max_member_bytes=10) is None


def test_restore_is_skipped_without_a_judge_or_with_no_cache(tmp_path: Path) -> None:
    lookup = BaselineLookup({"results": []}, source="x", label="main @ 1234567", judge_cache=b"SQLite format 3\x00")
    assert restore_base_cache(Settings(judge_provider="none"), lookup).cache is None
    assert restore_base_cache(Settings(judge_provider="local", no_cache=True), lookup).cache is None
    restored = restore_base_cache(Settings(judge_provider="local"), lookup)
    assert restored.cache is not None and restored.cache.label == "main @ 1234567"
    scratch = restored.cache.path.parent
    restored.close()
    assert not scratch.exists()
    bare = restore_base_cache(Settings(judge_provider="local"), BaselineLookup({"results": []}, label="main @ 7"))
    assert bare.cache is None and "carries no judge-cache.db" in (bare.notice or "")


# --- the key: a changed judge model, template or rubric never hits the restored cache ------------------------


CASE = Case(id="c1", input="Is the waiver wire worth it this week?")
ANSWER = Answer(output="Yes: two starters are available.")


def score_with(server: OpenAIServer, out: Path, *, model: str | None = None, base: Path | None = None,
               metric: str = "relevancy", rubric: str | None = None) -> tuple[float, bool, int]:
    """(value, whether it came from a cache, base-cache hits) of one judged score."""
    settings = Settings(judge_provider="local", judge_base_url=server.base_url + "/v1", judge_model=model,
                        output_dir=str(out), api_retries=0)

    async def go() -> tuple[float, bool, int]:
        judge = build_judge(settings, Runtime.from_settings(settings), {"LOCAL_JUDGE_API_KEY": KEY},
                            base_cache=BaseCache(base, "main @ 1234567") if base else None)
        assert judge is not None
        try:
            result = await judge.score(metric, CASE, ANSWER, rubric=rubric)
            return result.value, bool(result.details["cached"]), judge.cache.base_hits
        finally:
            await judge.aclose()

    return asyncio.run(go())


@pytest.fixture()
def base_cache(tmp_path: Path) -> Iterator[tuple[OpenAIServer, Path]]:
    def score(prompt: str) -> float:
        return 4.0 if "1–5 scale" in prompt else 0.8

    with OpenAIServer(api_key=KEY, judge=Judge(score=score)) as server:
        score_with(server, tmp_path / "base")
        score_with(server, tmp_path / "base", metric="response_quality", rubric="5: perfect, 1: useless")
        server.reset()
        yield server, tmp_path / "base" / "judge-cache.db"


def test_an_unchanged_prompt_hits_the_restored_cache(base_cache: tuple[OpenAIServer, Path], tmp_path: Path) -> None:
    server, base = base_cache
    assert score_with(server, tmp_path / "pr", base=base) == (0.8, True, 1)
    assert score_with(server, tmp_path / "pr2", base=base, metric="response_quality",
                      rubric="5: perfect, 1: useless")[1:] == (True, 1)
    assert server.chat_requests() == []


def test_a_changed_judge_model_never_hits(base_cache: tuple[OpenAIServer, Path], tmp_path: Path) -> None:
    server, base = base_cache
    assert score_with(server, tmp_path / "pr", base=base, model="another-model")[1:] == (False, 0)
    assert len(server.chat_requests()) == 1


def test_a_changed_rubric_never_hits(base_cache: tuple[OpenAIServer, Path], tmp_path: Path) -> None:
    server, base = base_cache
    assert score_with(server, tmp_path / "pr", base=base, metric="response_quality",
                      rubric="5: perfect, 3: fine, 1: useless")[1:] == (False, 0)
    assert len(server.chat_requests()) == 1


def test_a_changed_template_never_hits(base_cache: tuple[OpenAIServer, Path], tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    server, base = base_cache
    original = prompts._source

    def edited(name: str) -> str:  # a release that only edits the relevancy template's comment
        return original(name) + ("\n{# reworded #}\n" if name.startswith("relevancy") else "")

    monkeypatch.setattr(prompts, "_source", edited)
    prompts.template_version.cache_clear()
    try:
        assert score_with(server, tmp_path / "pr", base=base)[1:] == (False, 0)
    finally:
        prompts.template_version.cache_clear()
    assert len(server.chat_requests()) == 1


def test_an_unreadable_base_cache_is_ignored(tmp_path: Path) -> None:
    broken = tmp_path / "broken.db"
    broken.write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)
    cache = JudgeCache(tmp_path / "own" / "judge-cache.db", base=broken, base_label="main @ 1")
    key = CacheKey("local", "http://127.0.0.1:1/v1", "m", "relevancy@1", "h")
    assert cache.get(key) is None and cache.base_error
    cache.put(key, CachedReply("r", 1, 1))
    assert cache.get(key) == CachedReply("r", 1, 1)
    cache.close()


def test_merge_carries_every_shards_verdicts(tmp_path: Path) -> None:
    from evalgate.store.judge_cache import merge_cache_files

    keys = [CacheKey("local", "http://127.0.0.1:9/v1", "m", "relevancy@1", f"h{i}") for i in range(3)]
    for shard, owned in (("a", keys[:2]), ("b", keys[1:])):
        cache = JudgeCache(tmp_path / shard / "judge-cache.db")
        for key in owned:
            cache.put(key, CachedReply(f"reply {key.prompt_hash} from {shard}", 5, 6))
        cache.close()
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "judge-cache.db").write_bytes(b"not a database")
    added = merge_cache_files([tmp_path / s / "judge-cache.db" for s in "abcd"], tmp_path / "merged" / "judge-cache.db")
    assert added == 3
    merged = JudgeCache(tmp_path / "merged" / "judge-cache.db")
    assert [merged.get(k).reply for k in keys] == ["reply h0 from a", "reply h1 from a", "reply h2 from b"]  # type: ignore[union-attr]
    merged.close()
