"""The user's judge cache shared across output directories (evalgate/store/shared_cache.py): a second output
directory re-pays nothing, ``--no-cache`` still judges, a pull-request run in Actions never reads it, and
the file is kept under its size bound by dropping the oldest replies."""

from __future__ import annotations

import contextlib
import io
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli.main import main as cli_main
from evalgate.store.judge_cache import CachedReply, CacheKey, JudgeCache
from evalgate.store.shared_cache import prune, shared_cache_path
from tests.servers.agent_server import AgentServer
from tests.servers.openai_server import Judge, OpenAIServer

KEY = "sk-shared-cache-8642"


def run(root: Path, out: str, agent: AgentServer, judge: OpenAIServer, *extra: str) -> dict[str, Any]:
    dataset = root / "cases.json"
    dataset.write_text(json.dumps([{"id": f"c{i}", "input": f"question {i}", "passing_criteria": "answers", "metrics": ["relevancy"]}
                                   for i in range(4)]))
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = cli_main(["run", "--dataset", str(dataset), "--target", "http", "--target-url",
                         agent.base_url + "/api/agent/chat", "--judge-provider", "openai", "--judge-base-url",
                         judge.base_url + "/v1", "--output-dir", str(root / out), "--progress", "none", *extra])
    assert code == 0
    return json.loads((root / out / "results.json").read_text())


@pytest.fixture
def user_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("EVALGATE_JUDGE_SHARED_CACHE", "")  # the default: the user's cache directory
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    return tmp_path / "xdg" / "evalgate" / "judge-cache.db"


def test_a_second_output_directory_pays_for_nothing(tmp_path: Path, user_cache: Path) -> None:
    with AgentServer({"question": "an answer"}) as agent, OpenAIServer(api_key=KEY, judge=Judge(score=0.9)) as judge:
        first = run(tmp_path, "one", agent, judge)
        after_first = len(judge.chat_requests())
        second = run(tmp_path, "two", agent, judge)
        after_second = len(judge.chat_requests())
        run(tmp_path, "three", agent, judge, "--no-cache")
        after_no_cache = len(judge.chat_requests())
    assert after_first == 4 and after_second == 4 and after_no_cache == 8
    assert user_cache.is_file()
    assert second["summary"]["judge_calls"] == {"made": 0, "cached": 4, "cost_usd": 0.0}
    assert second["metadata"]["judge"]["cache"]["shared"]["hits"] == 4
    values = [{r["id"]: r["metrics"]["relevancy"]["value"] for r in d["results"]} for d in (first, second)]
    assert values[0] == values[1]
    own = sqlite3.connect(tmp_path / "two" / "judge-cache.db")  # copied into the run's own: the artifact has it
    assert own.execute("SELECT count(*) FROM judge_cache").fetchone()[0] == 4


def test_a_pull_request_run_in_actions_never_reads_it(tmp_path: Path, user_cache: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    explicit = tmp_path / "planted.db"
    assert shared_cache_path(str(explicit), {"GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": "push"})[0] == explicit
    assert shared_cache_path("", {"GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": "push"}) == (None, None)
    assert shared_cache_path("none", {}) == (None, None)
    for event in ("pull_request", "pull_request_target"):
        assert shared_cache_path(str(explicit), {"GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": event})[0] is None
    with AgentServer({"question": "an answer"}) as agent, OpenAIServer(api_key=KEY, judge=Judge(score=0.9)) as judge:
        run(tmp_path, "local", agent, judge, "--judge-shared-cache", str(explicit))  # fills the file
        monkeypatch.setenv("GITHUB_ACTIONS", "true")
        monkeypatch.setenv("GITHUB_EVENT_NAME", "pull_request")
        run(tmp_path, "pr", agent, judge, "--judge-shared-cache", str(explicit), "--baseline", "none")
        calls = len(judge.chat_requests())
    assert calls == 8  # the PR run judged all four cases itself


def test_the_shared_file_is_pruned_oldest_first_under_its_bound(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    cache = JudgeCache(path)
    for i in range(400):
        cache.put(CacheKey("openai", "e", "m", "t@1", f"{i:064d}", 0, 0), CachedReply("x" * 2000, 10, 5))
    cache.close()
    size = path.stat().st_size
    dropped = prune(path, size // 2)
    db = sqlite3.connect(path)
    left = [row[0] for row in db.execute("SELECT prompt_hash FROM judge_cache ORDER BY rowid")]
    assert dropped > 200 and len(left) == 400 - dropped and path.stat().st_size <= size // 2
    assert left[-1] == f"{399:064d}"  # the newest replies stay
    assert prune(path, size * 10) == 0
