"""Issue #31 item 5 against the real llama.cpp server: it refuses ``response_format.type: json_schema`` with an
HTTP 500 naming the field; the first run sends that request once (not retried: the message says the value is
invalid), moves to ``json_object`` and remembers it in the judge cache; the next run sends no ``json_schema``
request at all. Requests are counted by a loopback proxy in front of the server."""

from __future__ import annotations

from pathlib import Path

import pytest

from .harness import JudgeProxy, run_evalgate

REPO = Path(__file__).resolve().parents[2]
GOLDEN = str(REPO / "datasets" / "golden-dataset")


@pytest.mark.realmodel
def test_a_refused_json_schema_is_learnt_once_and_remembered(llama_server: str, tmp_path: Path) -> None:
    with JudgeProxy(llama_server) as proxy:
        first = run_evalgate(["-d", GOLDEN, "--first-n", "2"], workdir=tmp_path, judge_url=proxy.base_url)
        sent_first = list(proxy.modes)
        # the same output directory (its judge-cache.db); --no-cache: every verdict is asked again
        second = run_evalgate(["-d", GOLDEN, "--first-n", "2", "--no-cache"], workdir=tmp_path,
                              judge_url=proxy.base_url)
        sent_second = proxy.modes[len(sent_first):]
    assert first.results is not None and second.results is not None, first.stderr[-2000:] + second.stderr[-2000:]
    assert sent_first[0] == "json_schema" and sent_first.count("json_schema") == 1, sent_first  # no retries
    assert set(sent_first[1:]) == {"json_object"}
    output = first.results["metadata"]["judge"]["output"]
    assert output["refused"][0]["mode"] == "json_schema" and output["refused"][0]["status"] == 500
    assert sent_second and set(sent_second) == {"json_object"}, sent_second
    remembered = second.results["metadata"]["judge"]["output"]["remembered"]
    assert remembered["mode"] == "json_object" and remembered["refused"] == ["json_schema"]
