"""The judge cache key includes the provider's base URL: two loopback servers serving a model of the same
name never share cached replies; the URL is stored only as a hash; an older cache file is emptied."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from evalgate.calls.runtime import Runtime
from evalgate.config.settings import Settings
from evalgate.judges.factory import build_judge
from evalgate.model import Answer, Case
from evalgate.store.judge_cache import CachedReply, CacheKey, JudgeCache, cache_path, endpoint_id
from tests.servers.openai_server import Judge, OpenAIServer

KEY = "sk-judge-cache-test-5a4b3c2d1e"
ENV = {"LOCAL_JUDGE_API_KEY": KEY}
CASE = Case(id="c1", input="Is the waiver wire worth it this week?")
ANSWER = Answer(output="Yes: two starters are available.")


def score(server: OpenAIServer, output_dir: Path) -> Any:
    settings = Settings(judge_provider="local", judge_base_url=server.base_url + "/v1", output_dir=str(output_dir),
                        api_retries=0)

    async def go() -> Any:
        judge = build_judge(settings, Runtime.from_settings(settings), ENV)
        assert judge is not None and judge.model == "local-model"
        try:
            return await judge.score("relevancy", CASE, ANSWER)
        finally:
            await judge.aclose()

    return asyncio.run(go())


def test_servers_with_the_same_model_name_do_not_share_replies(tmp_path: Path) -> None:
    with OpenAIServer(api_key=KEY, judge=Judge(score=0.9)) as first, \
            OpenAIServer(api_key=KEY, judge=Judge(score=0.2)) as second:
        a = score(first, tmp_path)
        b = score(second, tmp_path)
        again = score(first, tmp_path)
        b_again = score(second, tmp_path)
        calls = (len(first.chat_requests()), len(second.chat_requests()))
        urls = {endpoint_id(first.base_url + "/v1"), endpoint_id(second.base_url + "/v1")}
    assert (a.value, b.value, again.value, b_again.value) == (0.9, 0.2, 0.9, 0.2)
    assert (a.details["cached"], b.details["cached"], again.details["cached"], b_again.details["cached"]) == \
        (False, False, True, True)
    assert calls == (1, 1)
    with closing(sqlite3.connect(cache_path(tmp_path / "results.db"))) as db:
        endpoints = {row[0] for row in db.execute("SELECT endpoint FROM judge_cache")}
    assert endpoints == urls and len(urls) == 2


def test_endpoint_id_normalises_scheme_host_and_trailing_slash() -> None:
    assert endpoint_id("HTTP://LocalHost:8080/v1/") == endpoint_id("http://localhost:8080/v1")
    assert endpoint_id("http://localhost:8080/v1") != endpoint_id("http://localhost:8081/v1")
    assert endpoint_id("http://localhost:8080/v1") != endpoint_id("http://localhost:8080/V1")  # paths keep case
    assert len(endpoint_id("http://x")) == 32


def test_credentials_in_a_base_url_never_reach_the_cache_file(tmp_path: Path) -> None:
    path = tmp_path / "judge-cache.db"
    cache = JudgeCache(path)
    url = "https://judge-user:sk-url-secret-777@judge.internal/v1?token=sk-query-secret-888"
    key = CacheKey("local", url, "m", "relevancy@1", "h" * 64)
    cache.put(key, CachedReply('{"score": 1}', 3, 4))
    assert cache.get(key) == CachedReply('{"score": 1}', 3, 4)
    cache.close()
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert b"sk-url-secret-777" not in stored and b"sk-query-secret-888" not in stored and b"judge.internal" not in stored


def test_a_cache_file_without_endpoints_is_emptied_and_reused(tmp_path: Path) -> None:
    path = tmp_path / "judge-cache.db"
    with closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE judge_cache (provider TEXT NOT NULL, model TEXT NOT NULL, template_version TEXT NOT "
                   "NULL, prompt_hash TEXT NOT NULL, repeat_index INTEGER NOT NULL, sample_index INTEGER NOT NULL, "
                   "reply TEXT NOT NULL, prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL, "
                   "created_utc TEXT NOT NULL, PRIMARY KEY (provider, model, template_version, prompt_hash, "
                   "repeat_index, sample_index))")
        db.execute("INSERT INTO judge_cache VALUES ('local', 'm', 'relevancy@1', 'h', 0, 0, 'old', 1, 1, 'then')")
        db.commit()
    cache = JudgeCache(path)
    assert cache.enabled and cache.errors == 0
    key = CacheKey("local", "http://127.0.0.1:9/v1", "m", "relevancy@1", "h")
    assert cache.get(key) is None
    cache.put(key, CachedReply("new", 2, 3))
    assert cache.get(key) == CachedReply("new", 2, 3)
    cache.close()
    with closing(sqlite3.connect(path)) as db:
        assert [row[0] for row in db.execute("SELECT reply FROM judge_cache")] == ["new"]
    reopened = JudgeCache(path)  # the new layout is kept as it is
    assert reopened.get(key) == CachedReply("new", 2, 3)
    reopened.close()


def test_live_demo_judge_prefers_a_stable_port_and_falls_back() -> None:
    """The preferred port when free (the demo's 8012 in use; here a port the OS hands out, so a demo judge a
    user left running on 8012 changes nothing), any free port while something holds it."""
    import socket

    from evalgate.demo.live import start_judge

    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        preferred = blocker.getsockname()[1]
        with start_judge("demo-key", preferred) as judge:
            assert not judge.base_url.endswith(f":{preferred}")
    with start_judge("demo-key", preferred) as judge:  # free again: the stable port, so reruns hit the cache
        assert judge.base_url == f"http://127.0.0.1:{preferred}"


def test_writes_are_batched_visible_before_they_reach_disk_and_flushed_on_close(tmp_path: Path) -> None:
    from evalgate.store import judge_cache as cache_module

    path = tmp_path / "judge-cache.db"
    cache = JudgeCache(path)
    keys = [CacheKey("local", "http://127.0.0.1:1/v1", "m", "v1", f"h{i}") for i in range(cache_module.FLUSH_ROWS + 3)]

    def rows_on_disk() -> int:
        with closing(sqlite3.connect(path)) as db:
            return int(db.execute("SELECT COUNT(*) FROM judge_cache").fetchone()[0])

    cache.put(keys[0], CachedReply('{"score": 1}', 10, 2))
    assert rows_on_disk() == 0  # queued, not yet written
    assert cache.get(keys[0]) == CachedReply('{"score": 1}', 10, 2)  # but a lookup already sees it
    for key in keys[1:cache_module.FLUSH_ROWS]:
        cache.put(key, CachedReply("r", 1, 1))
    assert rows_on_disk() == cache_module.FLUSH_ROWS and cache.writes == cache_module.FLUSH_ROWS
    for key in keys[cache_module.FLUSH_ROWS:]:
        cache.put(key, CachedReply("r", 1, 1))
    assert rows_on_disk() == cache_module.FLUSH_ROWS
    cache.close()
    assert rows_on_disk() == len(keys)
    reopened = JudgeCache(path)
    assert reopened.get(keys[-1]) == CachedReply("r", 1, 1)
    reopened.close()
