"""Issue #31 item 5: the structured-output mode a judge endpoint takes is learnt once and remembered with the
judge cache, so a server that refuses ``json_schema`` (llama-cpp-python's answers HTTP 500) costs no request in
that mode on the next run; a refusal that says so plainly is not retried on the first run either. Through the
CLI against the loopback OpenAI server, counting the requests it received."""

from __future__ import annotations

import contextlib
import io
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli.main import main as cli_main
from evalgate.judges.output import OutputNegotiator, clearly_refused
from evalgate.store.judge_cache import CACHE_FILE, JudgeCache, RememberedMode, endpoint_id, merge_cache_files
from tests.servers.openai_server import Judge, OpenAIServer, Rule, openai_error

KEY = "sk-output-memory-5e4d3c2b1a"
LLAMA_500 = ("1 validation error: {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
             "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', "
             "'ctx': {'expected': \"'text' or 'json_object'\"}}")
"""What llama-cpp-python's server (0.3.x) answers, with HTTP 500, to ``response_format.type: json_schema``
(tests/realmodel/FINDINGS.md, b)."""


def mode_of(payload: dict[str, Any]) -> str:
    return ((payload.get("response_format") or {}).get("type")) or "prompt"


def refuse(kind: str, status: int, message: str) -> Rule:
    return Rule(where=lambda payload: mode_of(payload) == kind, status=status,
                body=json.dumps(openai_error(status, message)))


def run(tmp_path: Path, server: OpenAIServer, answers: list[str], *extra: str) -> tuple[int, dict[str, Any]]:
    """``evalgate run`` on one relevancy case per answer, output in ``tmp_path/out`` (the same each time)."""
    dataset = tmp_path / "cases.json"
    dataset.write_text(json.dumps([{"id": f"c{i}", "input": "Is the press safe to reset?", "output": answer,
                                    "passing_criteria": "says to lock out first", "metrics": ["relevancy"]}
                                   for i, answer in enumerate(answers)]), encoding="utf-8")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
        code = cli_main(["run", "-d", str(dataset), "-o", str(tmp_path / "out"), "--progress", "none",
                         "--judge-provider", "local", "--judge-base-url", server.base_url + "/v1", *extra])
    path = tmp_path / "out" / "results.json"
    assert path.is_file(), err.getvalue()
    return code, json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCAL_JUDGE_API_KEY", KEY)
    monkeypatch.setenv("EVALGATE_CALIBRATION", "trust")
    monkeypatch.setenv("EVALGATE_JUDGE_SHARED_CACHE", "none")


def test_a_server_refusing_json_schema_costs_one_request_once_and_none_on_the_next_run(tmp_path: Path) -> None:
    with OpenAIServer([refuse("json_schema", 500, LLAMA_500)], api_key=KEY, judge=Judge(score=0.9)) as server:
        code, first = run(tmp_path, server, [f"Lock it out first ({i})." for i in range(3)])
        modes_first = [mode_of(p) for p in server.chat_requests()]
        code_2, second = run(tmp_path, server, [f"Lock it out, then reset ({i})." for i in range(3)])  # new answers
        modes_second = [mode_of(p) for p in server.chat_requests()][len(modes_first):]
    assert code == 0 and code_2 == 0
    # first run: the clear 500 is not retried (the default api_retries would have sent it 4 times)
    assert modes_first == ["json_schema"] + ["json_object"] * 3
    assert first["metadata"]["judge"]["output"]["refused"][0]["status"] == 500
    assert "remembered" not in first["metadata"]["judge"]["output"]
    # second run: three fresh verdicts, none asked for in json_schema
    assert modes_second == ["json_object"] * 3
    output = second["metadata"]["judge"]["output"]
    assert output["mode"] == "json_object" and output["refused"] == [] and output["calls"] == {"json_object": 3}
    assert output["remembered"]["mode"] == "json_object" and output["remembered"]["refused"] == ["json_schema"]
    assert {r["metrics"]["relevancy"]["details"]["output_mode"] for r in second["results"]} == {"json_object"}


def test_the_next_run_finds_its_cached_verdicts_at_once(tmp_path: Path) -> None:
    """Remembering the mode also keys the first verdicts of the next run by the mode that made them."""
    answers = [f"Lock it out first ({i})." for i in range(4)]
    with OpenAIServer([refuse("json_schema", 500, LLAMA_500)], api_key=KEY, judge=Judge(score=0.9)) as server:
        run(tmp_path, server, answers)
        sent = len(server.chat_requests())
        code, second = run(tmp_path, server, answers)
        assert len(server.chat_requests()) == sent  # every verdict from the cache: no request at all
    assert code == 0 and second["metadata"]["judge"]["cache"]["hits"] == 4


def test_the_memory_is_the_cache_file_and_holds_no_secret(tmp_path: Path) -> None:
    with OpenAIServer([refuse("json_schema", 500, LLAMA_500)], api_key=KEY, judge=Judge(score=0.9)) as server:
        run(tmp_path, server, ["Lock it out first."])
        base_url = server.base_url + "/v1"
    with sqlite3.connect(tmp_path / "out" / CACHE_FILE) as db:
        rows = db.execute("SELECT provider, endpoint, model, mode, refused FROM judge_output_mode").fetchall()
        dump = "\n".join(db.iterdump())
    assert [row[:1] + row[2:] for row in rows] == [("local", rows[0][2], "json_object", "json_schema")]
    assert rows[0][1] == endpoint_id(base_url)
    assert KEY not in dump and "127.0.0.1" not in dump and "Input should be" not in dump


def test_a_remembered_mode_refused_later_continues_down_the_chain(tmp_path: Path) -> None:
    changed = {"json_object": False}  # the server (same endpoint) later refuses json_object as well
    rules = [refuse("json_schema", 500, LLAMA_500),
             Rule(where=lambda p: changed["json_object"] and mode_of(p) == "json_object", status=400,
                  body=json.dumps(openai_error(400, "'response_format' of type 'json_object' is not supported")))]
    with OpenAIServer(rules, api_key=KEY, judge=Judge(score=0.9)) as server:
        run(tmp_path, server, ["Lock it out first."])
        sent = len(server.chat_requests())
        changed["json_object"] = True
        code, document = run(tmp_path, server, ["Lock it out first, again.", "Reset after lockout."])
        modes = [mode_of(p) for p in server.chat_requests()][sent:]
        code_3, third = run(tmp_path, server, ["A third answer.", "A fourth."])
        later = [mode_of(p) for p in server.chat_requests()][sent + len(modes):]
    assert code == 0 and modes == ["json_object", "prompt", "prompt"]
    assert [r["mode"] for r in document["metadata"]["judge"]["output"]["refused"]] == ["json_object"]
    assert code_3 == 0 and later == ["prompt", "prompt"]
    assert third["metadata"]["judge"]["output"]["remembered"]["refused"] == ["json_schema", "json_object"]


def test_another_endpoint_or_model_learns_for_itself(tmp_path: Path) -> None:
    with OpenAIServer([refuse("json_schema", 500, LLAMA_500)], api_key=KEY, judge=Judge(score=0.9)) as server:
        run(tmp_path, server, ["Lock it out first."])
    with OpenAIServer(api_key=KEY, judge=Judge(score=0.9)) as other:  # another port: another endpoint
        code, document = run(tmp_path, other, ["Lock it out first."])
        assert [mode_of(p) for p in other.chat_requests()] == ["json_schema"]
    assert code == 0 and "remembered" not in document["metadata"]["judge"]["output"]


def test_a_forced_mode_ignores_the_memory(tmp_path: Path) -> None:
    with OpenAIServer([refuse("json_schema", 500, LLAMA_500)], api_key=KEY, judge=Judge(score=0.9)) as server:
        run(tmp_path, server, ["Lock it out first."])
        sent = len(server.chat_requests())
        run(tmp_path, server, ["Another answer."], "--judge-output", "prompt")
        assert [mode_of(p) for p in server.chat_requests()][sent:] == ["prompt"]


def test_an_unclear_server_error_is_still_retried_and_not_remembered(tmp_path: Path) -> None:
    rules = [Rule(status=500, body=json.dumps(openai_error(500, "internal error: out of memory")), times=1)]
    with OpenAIServer(rules, api_key=KEY, judge=Judge(score=0.9)) as server:
        code, document = run(tmp_path, server, ["Lock it out first."], "--api-retries", "1")
        modes = [mode_of(p) for p in server.chat_requests()]
    assert code == 0 and modes == ["json_schema", "json_schema"]  # retried in the same mode, which then worked
    assert document["metadata"]["judge"]["output"]["refused"] == []
    with sqlite3.connect(tmp_path / "out" / CACHE_FILE) as db:
        assert db.execute("SELECT count(*) FROM judge_output_mode").fetchone()[0] == 0


def test_clear_refusals_by_hand() -> None:
    assert clearly_refused("json_schema", 500, f"HTTP 500: {LLAMA_500}")
    assert clearly_refused("json_schema", 400, "HTTP 400: Invalid parameter: 'response_format' of type "
                                               "'json_schema' is not supported with this model.")
    assert clearly_refused("json_object", 422, "HTTP 422: response_format: extra inputs are not permitted")
    assert not clearly_refused("prompt", 400, "HTTP 400: response_format unsupported")  # nothing to refuse
    assert not clearly_refused("json_schema", 503, "HTTP 503: response_format invalid, server overloaded")
    assert not clearly_refused("json_schema", 429, "HTTP 429: rate limit (response_format unsupported)")
    assert not clearly_refused("json_schema", None, "connection error: invalid response_format")
    assert not clearly_refused("json_schema", 500, "HTTP 500: internal error while applying response_format")
    assert not clearly_refused("json_schema", 500, "HTTP 500: invalid state")  # does not name the field


def test_memory_by_hand(tmp_path: Path) -> None:
    cache = JudgeCache(tmp_path / CACHE_FILE)
    url = "http://127.0.0.1:8080/v1"
    assert cache.output_mode("local", url, "m") is None
    cache.remember_output_mode("local", url, "m", "json_object", ("json_schema",))
    found = cache.output_mode("local", url, "m")
    assert found is not None and (found.mode, found.refused) == ("json_object", ("json_schema",))
    assert cache.output_mode("local", url, "other-model") is None
    assert cache.output_mode("local", "http://127.0.0.1:8081/v1", "m") is None
    assert cache.output_mode("local", "HTTP://127.0.0.1:8080/v1/", "m") is not None  # the same endpoint
    cache.remember_output_mode("local", url, "old", "prompt", ("json_schema",), since="2020-01-01T00:00:00Z")
    assert cache.output_mode("local", url, "old") is None  # older than MODE_MEMORY_DAYS: tried afresh
    cache.close()
    # the negotiator starts from a remembered mode only when it is one of its own
    negotiator = OutputNegotiator(("json_schema", "prompt"), start=RememberedMode("json_object", ("json_schema",), ""))
    assert negotiator.mode == "json_schema" and "remembered" not in negotiator.metadata()
    negotiator = OutputNegotiator(("json_schema", "json_object", "prompt"), forced=False,
                                  start=RememberedMode("json_object", ("json_schema",), "2026-11-28T00:00:00Z"))
    assert negotiator.mode == "json_object" and negotiator.metadata()["remembered"]["mode"] == "json_object"


def test_the_base_cache_and_merged_shards_carry_the_memory(tmp_path: Path) -> None:
    url = "http://127.0.0.1:8080/v1"
    shard = JudgeCache(tmp_path / "shard" / CACHE_FILE)
    shard.remember_output_mode("local", url, "m", "json_object", ("json_schema",))
    shard.close()
    merge_cache_files([tmp_path / "shard" / CACHE_FILE], tmp_path / "merged" / CACHE_FILE)
    base = tmp_path / "merged" / CACHE_FILE
    fresh = JudgeCache(tmp_path / "run" / CACHE_FILE, base=base, base_label="main @ abc")
    found = fresh.output_mode("local", url, "m")
    assert found is not None and found.mode == "json_object" and found.from_base
    fresh.close()
    again = JudgeCache(tmp_path / "run" / CACHE_FILE)  # copied into the run's own cache
    own = again.output_mode("local", url, "m")
    assert own is not None and not own.from_base and own.since == found.since
    again.close()
