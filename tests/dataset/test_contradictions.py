"""Contradictory expectations are dataset errors at load time, reported as ``file:line: case 'id': field``:
a brand in both ``brands_mine`` and ``brands_competitors`` (case-insensitive), and a name in both
``*_should_include`` and ``*_should_exclude`` (agents and tools)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalgate.cli.main import main as cli_main
from evalgate.dataset.load import DatasetError, load_datasets
from evalgate.errors import UserError


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def load_error(name: str, base: Path) -> str:
    with pytest.raises(DatasetError) as info:
        load_datasets([name], base_dir=base)
    assert isinstance(info.value, UserError) and "\n" not in str(info.value)
    return str(info.value)


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        (
            "brands.yaml",
            "cases:\n  - id: fine\n    brands_mine: [Zoho]\n"
            "  - id: t\n    brands_mine: [HubSpot, Zoho]\n    brands_competitors: [Salesforce, HUBSPOT]\n",
            "brands.yaml:4: case 't': brands_competitors: 'HUBSPOT' is also in brands_mine (as 'HubSpot')",
        ),
        (
            "spaced.json",
            '[\n  {"id": "s", "brands_mine": ["Monday.com"],\n   "brands_competitors": ["monday.COM"]}\n]\n',
            "spaced.json:2: case 's': brands_competitors: 'monday.COM' is also in brands_mine",
        ),
        (
            "agents.yaml",
            "cases:\n  - id: w1\n    input: plan my trip\n    agents_should_include: [research, booking]\n"
            "    agents_should_exclude: [Booking]\n",
            "agents.yaml:2: case 'w1': agents_should_exclude: 'Booking' is also in agents_should_include (as 'booking')",
        ),
        (
            "tools.jsonl",
            '{"id": "ok", "input": "a"}\n{"id": "w2", "input": "b", "tools_should_include": ["pdf_retrieval"], '
            '"tools_should_exclude": [" PDF_Retrieval "]}\n',
            "tools.jsonl:2: case 'w2': tools_should_exclude: ' PDF_Retrieval ' is also in tools_should_include",
        ),
    ],
)
def test_contradictions_name_file_line_case_and_field(tmp_path: Path, name: str, text: str, expected: str) -> None:
    write(tmp_path, name, text)
    message = load_error(name, tmp_path)
    assert message.startswith(expected), message


@pytest.mark.parametrize(
    "text",
    [
        "- id: a\n  brands_mine: [HubSpot]\n  brands_competitors: [HubSpot CRM, Hub]\n",
        "- id: b\n  input: x\n  agents_should_include: [research]\n  tools_should_exclude: [research]\n",
        "- id: c\n  input: x\n  tools_should_include: ['']\n  tools_should_exclude: ['  ']\n",
    ],
)
def test_different_names_or_sides_are_not_contradictions(tmp_path: Path, text: str) -> None:
    write(tmp_path, "ok.yaml", text)
    assert len(load_datasets(["ok.yaml"], base_dir=tmp_path).cases) == 1


def test_validate_reports_the_contradiction_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "suite/x.yaml", "- id: a\n  input: q\n- id: b\n  input: q2\n  agents_should_include: [x]\n"
                                    "  agents_should_exclude: [X]\n")
    code = cli_main(["validate", "-d", str(tmp_path / "suite")])
    err = capsys.readouterr().err
    assert code == 2
    assert "x.yaml:3: case 'b': agents_should_exclude: 'X' is also in agents_should_include" in err
    assert "Traceback" not in err
