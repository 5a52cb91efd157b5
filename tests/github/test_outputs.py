"""GITHUB_OUTPUT heredoc records and the size-capped job summary."""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path
from typing import Any

import pytest

from evalgate.errors import UserError
from evalgate.github.outputs import (
    SUMMARY_LIMIT_BYTES,
    append_summary,
    format_output,
    write_outputs,
    write_summary_report,
)
from tests.support.reports import failing_case, results_doc


def runner_read_outputs(text: str) -> dict[str, str]:
    """Parse a GITHUB_OUTPUT file as the runner does (``name=value`` or ``name<<DELIM`` heredocs)."""
    lines = text.split("\n")
    assert lines[-1] == "", "EOF marker missing new line"
    lines.pop()
    outputs: dict[str, str] = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        eq, heredoc = line.find("="), line.find("<<")
        if eq >= 0 and (heredoc < 0 or eq < heredoc):
            outputs[line[:eq]] = line[eq + 1:]
            i += 1
            continue
        name, delimiter = line[:heredoc], line[heredoc + 2:]
        assert name and delimiter, f"invalid line {line!r}"
        end = lines.index(delimiter, i + 1)  # ValueError = "Matching delimiter not found"
        outputs[name] = "\n".join(lines[i + 1: end])
        i = end + 1
    return outputs


def test_heredoc_record_format() -> None:
    record = format_output("verdict", "failed", delimiter="ghadelimiter_fixed")
    assert record == "verdict<<ghadelimiter_fixed\nfailed\nghadelimiter_fixed\n"


def test_outputs_round_trip_through_the_runner_format(tmp_path: Path) -> None:
    path = tmp_path / "set_output_1"
    path.write_text("earlier=1\n", encoding="utf-8")
    values: dict[str, Any] = {
        "passed": False,
        "pass-rate": 0.8,
        "summary": "line one\nline two = with equals << and arrows\n\nlast",
        "empty": "",
        "report_url": None,
    }
    assert write_outputs(path, values) is True
    text = path.read_text(encoding="utf-8")
    assert runner_read_outputs(text) == {
        "earlier": "1",
        "passed": "false",
        "pass-rate": "0.8",
        "summary": values["summary"],
        "empty": "",
        "report_url": "",
    }
    delimiters = re.findall(r"<<(ghadelimiter_[0-9a-f-]{36})\n", text)
    assert len(delimiters) == 5
    assert len(set(delimiters)) == 5, "every value gets a fresh delimiter"


def test_value_containing_its_delimiter_is_refused() -> None:
    with pytest.raises(ValueError, match="must not contain the delimiter"):
        format_output("x", "a\nghadelimiter_abc\nb", delimiter="ghadelimiter_abc")
    for bad in ("", "a=b", "a<<b", "a\nb", "has space"):
        with pytest.raises(ValueError):
            format_output(bad, "v")


def test_outputs_without_github_output_are_skipped() -> None:
    assert write_outputs(None, {"a": "b"}) is False
    assert append_summary("", "# x") is False


def test_unwritable_output_file_is_a_user_error(tmp_path: Path) -> None:
    target = tmp_path / "missing-dir" / "out"
    with pytest.raises(UserError, match=r"GITHUB_OUTPUT=.*missing-dir/out: cannot append"):
        write_outputs(target, {"a": "b"})


def test_summary_report_is_appended(tmp_path: Path) -> None:
    path = tmp_path / "step_summary_1"
    path.write_text("# earlier step output\n", encoding="utf-8")
    markdown = write_summary_report(path, results_doc(), run_url="https://github.com/o/r/actions/runs/1", artifact_url=None)
    text = path.read_text(encoding="utf-8")
    assert markdown is not None
    assert text.startswith("# earlier step output\n")
    assert text.endswith(markdown)
    assert "evalgate:comment" not in text
    assert "### Failed cases" in text


def test_summary_stays_under_one_million_bytes_dropping_details_first(tmp_path: Path) -> None:
    doc = results_doc()
    base = failing_case("crit-0", risk="critical", index=0)
    cases = [base] + [
        {**copy.deepcopy(failing_case(f"case-{i}", risk="medium", index=i)), "output": "é" * 6000} for i in range(1, 400)
    ]
    doc["results"] = cases
    path = tmp_path / "step_summary_2"
    path.write_bytes(b"x" * 50_000)
    markdown = write_summary_report(path, doc, run_url=None, artifact_url=None)
    assert markdown is not None
    size = os.path.getsize(path)
    assert size <= SUMMARY_LIMIT_BYTES
    assert size > SUMMARY_LIMIT_BYTES - 60_000, "the room should be used, not wasted"
    match = re.search(r"(\d+) case details omitted", markdown)
    assert match and 0 < int(match.group(1)) < 400
    assert "crit-0" in markdown.split("case details omitted")[0], "critical details are kept longest"


def test_append_summary_refuses_to_overflow(tmp_path: Path) -> None:
    path = tmp_path / "summary"
    path.write_bytes(b"y" * 90)
    with pytest.raises(ValueError):
        append_summary(path, "z" * 20, limit=100)
    assert append_summary(path, "z" * 10, limit=100) is True
    assert write_summary_report(path, results_doc(), run_url=None, artifact_url=None, limit=100) is None
