"""Workflow commands: escaping, annotations, masks, stop-commands and neutralising untrusted text.

``runner_parse`` models how actions/runner reads a log line (ActionCommand.TryParseV2, then the
legacy TryParse): V2 needs ``::`` at the start after trimming leading whitespace, then the next
``::`` separates ``name props`` from the data; legacy finds ``##[`` anywhere and reads to ``]``.
Properties are split on ``,`` and ``=`` and unescaped (``%3A``, ``%2C``, ``%0D``, ``%0A``, ``%25`` last).
``runner_parse`` is tests/support/action.py's, shared with the annotation tests.
"""

from __future__ import annotations

import re

import pytest

from evalgate.github.commands import (
    MAX_MESSAGE_CHARS,
    add_mask,
    annotation,
    error,
    escape_data,
    escape_property,
    format_command,
    neutralise,
    notice,
    stop_commands,
    warning,
)
from evalgate.safety.redact import register_secret
from tests.support.action import runner_parse


def runner_lines(output: str) -> list[str]:
    """Split stdout the way a .NET StreamReader.ReadLine does (CR, LF, CRLF)."""
    return re.split(r"\r\n|\r|\n", output)


HOSTILE = [
    "::error::injected",
    "   ::warning file=x::indented",
    "\t::notice::tab",
    "text ##[error]legacy anywhere",
    "##[stop-commands]token",
    "::stop-commands::abc",
    "::add-mask::hidden",
    "\u3000::error::ideographic space",
    "\u00a0::set-output name=x::y",
]


def test_escape_rules() -> None:
    assert escape_data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    assert escape_data("%0A") == "%250A"


def test_annotation_round_trips_through_the_runner_parser() -> None:
    message = "score dropped 0.91→0.82\nsecond line :: with , and %"
    line = error(message, file="evals/x,y:z.yaml", line=3, title="Regression: a, b")
    assert "\n" not in line and "\r" not in line
    parsed = runner_parse(line)
    assert parsed == ("error", {"file": "evals/x,y:z.yaml", "line": "3", "title": "Regression: a, b"}, message)


def test_annotation_properties_and_levels() -> None:
    assert warning("w") == "::warning::w"
    assert notice("n", title="T") == "::notice title=T::n"
    line = annotation("error", "m", file="a.yaml", line=2, end_line=4, col=1, end_column=9)
    assert line == "::error file=a.yaml,line=2,endLine=4,col=1,endColumn=9::m"
    with pytest.raises(ValueError):
        annotation("fatal", "m")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        format_command("bad name", "m")


def test_messages_are_cut_to_the_runner_limit() -> None:
    parsed = runner_parse(error("x" * 10_000))
    assert parsed is not None
    assert len(parsed[2]) == MAX_MESSAGE_CHARS


def test_hostile_data_cannot_inject_a_second_command() -> None:
    for hostile in HOSTILE:
        out = error(f"model said:\n{hostile}\r{hostile}", title=hostile)
        lines = runner_lines(out)
        assert len(lines) == 1
        name, props, data = runner_parse(lines[0])  # type: ignore[misc]
        assert name == "error"
        assert props == {"title": hostile}
        assert data == f"model said:\n{hostile}\r{hostile}"


@pytest.mark.parametrize("hostile", HOSTILE)
def test_neutralise_defuses_every_command_form(hostile: str) -> None:
    assert any(runner_parse(line) for line in runner_lines(hostile)), "the sample must be a live command"
    text = f"answer:\n{hostile}\r\n{hostile}\rend"
    cleaned = neutralise(text)
    assert all(runner_parse(line) is None for line in runner_lines(cleaned))
    assert cleaned.replace("\u200b", "") == text


def test_neutralise_leaves_ordinary_text_alone() -> None:
    text = "a :: b\nratio 1::2\n## heading [x]"
    assert neutralise(text) == text


def test_stop_commands_wraps_untrusted_text() -> None:
    text = "::error::inside\nplain"
    wrapped = stop_commands(text, token="tok-123")
    lines = runner_lines(wrapped)
    assert lines[0] == "::stop-commands::tok-123"
    assert lines[-1] == "::tok-123::"
    assert runner_parse(lines[0]) == ("stop-commands", {}, "tok-123")
    assert lines[1:-1] == ["::error::inside", "plain"]
    with pytest.raises(ValueError):
        stop_commands("contains tok-123", token="tok-123")


def test_stop_commands_tokens_are_fresh() -> None:
    first = runner_lines(stop_commands("x"))[0]
    second = runner_lines(stop_commands("x"))[0]
    assert first != second


def test_add_mask_escapes_and_splits_lines() -> None:
    assert add_mask("p%ss") == "::add-mask::p%25ss"
    assert add_mask("line1\nline2\n") == "::add-mask::line1\n::add-mask::line2"
    assert [runner_parse(line) for line in runner_lines(add_mask("a\r\nb"))] == [
        ("add-mask", {}, "a"),
        ("add-mask", {}, "b"),
    ]
    with pytest.raises(ValueError):
        add_mask("  ")


def test_registered_secrets_never_reach_annotations() -> None:
    secret = "sk-annotation-secret-998877"
    register_secret(secret)
    line = error(f"provider said {secret}", title=f"key {secret}")
    assert secret not in line
    assert "***" in line
