"""Dotted-path response mapping (pure)."""

from __future__ import annotations

import pytest

from evalgate.errors import UserError
from evalgate.targets.mapping import (
    DEFAULT_RESPONSE_MAP,
    MISSING,
    ResponseMap,
    coerce,
    extract,
    first_present,
    parse_alternatives,
    parse_path,
)

DATA = {
    "data": {"answer": "42", "items": [{"name": "a"}, {"name": "b"}, {"other": 1}]},
    "choices": [{"message": {"content": "hello"}}],
    "usage": {"total_tokens": 12},
    "nothing": None,
    "0": "zero-key",
}


def test_paths_parse_keys_indexes_and_wildcards() -> None:
    assert parse_path("a.b[0].c").segments == ("a", "b", 0, "c")
    assert parse_path("choices.0.message").segments == ("choices", 0, "message")
    assert parse_path("items[*].name").segments == ("items", "*", "name")
    assert parse_path("items.*.name").segments == ("items", "*", "name")


@pytest.mark.parametrize("bad", ["", "   ", "a[x]", "a]"])
def test_bad_paths_are_user_errors(bad: str) -> None:
    with pytest.raises(UserError):
        parse_path(bad)


def test_extract_follows_paths() -> None:
    assert extract(DATA, parse_path("data.answer")) == "42"
    assert extract(DATA, parse_path("choices.0.message.content")) == "hello"
    assert extract(DATA, parse_path("choices[-1].message.content")) == "hello"
    assert extract(DATA, parse_path("data.items[*].name")) == ["a", "b"]
    assert extract(DATA, parse_path("data.missing")) is MISSING
    assert extract(DATA, parse_path("choices.5")) is MISSING
    assert extract(DATA, parse_path("0")) == "zero-key"
    assert extract(DATA, parse_path("data.answer.deeper")) is MISSING


def test_alternatives_take_the_first_present_non_null_value() -> None:
    assert first_present(DATA, parse_alternatives("nothing|missing|data.answer")) == "42"
    assert first_present(DATA, parse_alternatives("nothing|missing")) is MISSING
    assert parse_alternatives("") == ()


def test_coercion_to_answer_types() -> None:
    assert coerce("output", {"a": 1}) == '{"a": 1}'
    assert coerce("sources", "one") == ["one"]
    assert coerce("sources", [{"title": "T", "url": "u"}, {"url": "only-url"}, 3, None]) == ["T", "only-url", "3"]
    assert coerce("debug_context", [{"content": "chunk"}, {"x": 1}]) == ["chunk", '{"x": 1}']
    assert coerce("num_tokens", 12.0) == 12
    for bad in (-1, 1.5, "12", True):
        with pytest.raises(ValueError, match="integer"):
            coerce("num_tokens", bad)


def test_default_map_reads_seed_002_and_004_replies() -> None:
    mapping = ResponseMap.build()
    seed_002 = {"response": "Start Reid.", "agent": "optimizer", "tools_used": ["get_my_roster"],
                "agents_called": ["supervisor", "optimizer"], "debug_context": ["Reid: 24 ppg"],
                "sources": [{"title": "ESPN"}], "usage": {"prompt_tokens": 5, "completion_tokens": 7,
                                                           "total_tokens": 12}}
    assert mapping.apply(seed_002) == {
        "output": "Start Reid.", "agent_id": "optimizer", "tools_used": ["get_my_roster"],
        "agents_called": ["supervisor", "optimizer"], "debug_context": ["Reid: 24 ppg"], "sources": ["ESPN"],
        "num_tokens": 12, "prompt_tokens": 5, "completion_tokens": 7,
    }
    seed_004 = {"answer": "Check SPC.", "agent_id": "quality_inspector", "data_sources": ["mes"],
                "citations": [{"source": "SOP-12"}]}
    assert mapping.apply(seed_004) == {"output": "Check SPC.", "agent_id": "quality_inspector",
                                       "data_sources": ["mes"], "sources": ["SOP-12"]}


def test_overrides_replace_fields_and_empty_switches_off() -> None:
    mapping = ResponseMap.build({"output": "data.answer", "sources": "", "tools_used": "data.items[*].name"})
    assert mapping.apply({**DATA, "sources": ["x"]}) == {"output": "42", "tools_used": ["a", "b"], "num_tokens": 12}
    assert mapping.describe()["sources"] == ""
    assert set(mapping.describe()) == set(DEFAULT_RESPONSE_MAP)


def test_unknown_fields_in_the_map_are_user_errors() -> None:
    with pytest.raises(UserError, match="unknown answer field 'answer_text'"):
        ResponseMap.build({"answer_text": "a"})
    with pytest.raises(UserError, match=r"target_response_map\.output"):
        ResponseMap.build({"output": "a[x]"})
