"""Item 6 of issue #12: a 200 reply whose Content-Type says JSON but whose body does not parse is a failed
attempt (retried like a 5xx), never an answer; ``target_response_format`` says how replies are read.

Before the fix an HTML page or a truncated JSON body served as ``application/json`` was scored as the
answer text: in a 1,000-case fault run 129 cases became quality failures instead of errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile.helpers import run_cli, write_cases
from tests.hostile.servers import Loopback, Out, Respond

HTML = "<html><body>502 Bad Gateway (upstream)</body></html>"


def run(tmp_path: Path, respond: Respond, *extra: str) -> tuple[dict[str, object], int]:
    dataset = write_cases(tmp_path / "cases.json", [{"id": "a", "input": "q", "expected_keywords": ["answer"]}])
    with Loopback(respond) as server:
        ran = run_cli(["run", "--dataset", str(dataset), "--target", "http", "--target-url", server.url + "/chat",
                       "--api-retries", "2", *extra], tmp_path / "out")
        attempts = len(server.seen)
    assert ran.code in (0, 1), ran.err
    return ran.cases()["a"], attempts


@pytest.mark.parametrize(("body", "content_type"), [
    (HTML, "application/json"),
    ('{"response": "the ans', "application/json; charset=utf-8"),
    ("not json at all", "application/problem+json"),
    ("", "text/json"),
])
def test_a_body_that_breaks_its_json_content_type_is_retried_and_then_errored(
        tmp_path: Path, body: str, content_type: str) -> None:
    case, attempts = run(tmp_path, lambda seen: Out(body, content_type=content_type))
    assert attempts == 3  # api_retries 2: retried like a 5xx
    assert case["status"] == "errored" and case["output"] is None
    assert "HTTP 200 with an unreadable body" in str(case["error"]) and "is not JSON" in str(case["error"])


def test_a_broken_reply_followed_by_a_good_one_passes(tmp_path: Path) -> None:
    replies = iter([Out(HTML, content_type="application/json"), Out({"response": "the answer"})])
    case, attempts = run(tmp_path, lambda seen: next(replies))
    assert attempts == 2 and case["status"] == "passed" and case["output"] == "the answer"


def test_plain_text_replies_are_answers_in_auto_and_text_mode(tmp_path: Path) -> None:
    case, _ = run(tmp_path, lambda seen: Out("the answer, in plain text", content_type="text/plain"))
    assert case["status"] == "passed" and case["output"] == "the answer, in plain text"
    text_agent = Out('{"not": "parsed"} the answer', content_type="application/json")
    case, attempts = run(tmp_path / "text", lambda seen: text_agent, "--target-response-format", "text")
    assert attempts == 1 and case["output"] == '{"not": "parsed"} the answer'


def test_json_mode_requires_json_whatever_the_content_type(tmp_path: Path) -> None:
    case, attempts = run(tmp_path, lambda seen: Out("the answer", content_type="text/plain"),
                         "--target-response-format", "json")
    assert attempts == 3 and case["status"] == "errored" and "target_response_format json" in str(case["error"])


def test_a_reply_larger_than_the_limit_is_not_read(tmp_path: Path) -> None:
    big = Out("x" * 40_000, content_type="text/plain")  # more than 16 × 2,000 bytes
    case, attempts = run(tmp_path, lambda seen: big, "--max-answer-chars", "2000")
    assert attempts == 1 and case["status"] == "errored" and "more than the 32,000 allowed" in str(case["error"])
