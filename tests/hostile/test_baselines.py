"""Item 1 of issue #12 (caps): a baseline is read only within a size and a record count; beyond them the
run goes on with "no baseline" and says why. The caps are lowered here so small files exceed them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalgate.store import reader
from tests.hostile.helpers import run_cli, write_cases

CASES = [{"id": f"c{i}", "input": "q", "output": "an answer", "expected_keywords": ["answer"]} for i in range(12)]


@pytest.fixture
def baseline(tmp_path: Path) -> tuple[Path, Path]:
    """A dataset and a finished run of it (results.json and results.db) to compare with."""
    dataset = write_cases(tmp_path / "cases.json", CASES)
    first = run_cli(["run", "--dataset", str(dataset)], tmp_path / "base")
    assert first.code == 0, first.err
    return dataset, tmp_path / "base"


@pytest.mark.parametrize("name", ["results.json", "results.db"])
def test_a_baseline_with_too_many_records_is_not_read(baseline: tuple[Path, Path], tmp_path: Path, name: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    dataset, base = baseline
    monkeypatch.setattr(reader, "MAX_BASELINE_RECORDS", 10)
    ran = run_cli(["run", "--dataset", str(dataset), "--baseline", str(base / name)], tmp_path / "head")
    assert ran.code == 0, ran.err
    warning = ran.results()["baseline"]["warning"]
    assert "12 case records, more than the 10 read" in warning


def test_a_baseline_file_larger_than_the_cap_is_not_read(baseline: tuple[Path, Path], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    dataset, base = baseline
    monkeypatch.setattr(reader, "MAX_BASELINE_BYTES", 1_000)
    ran = run_cli(["run", "--dataset", str(dataset), "--baseline", str(base / "results.json")], tmp_path / "head")
    assert ran.code == 0 and "more than the 1,000 read" in ran.results()["baseline"]["warning"]


def test_a_baseline_within_the_caps_is_compared(baseline: tuple[Path, Path], tmp_path: Path) -> None:
    dataset, base = baseline
    ran = run_cli(["run", "--dataset", str(dataset), "--baseline", str(base / "results.json")], tmp_path / "head")
    info = ran.results()["baseline"]
    assert ran.code == 0 and info["found"] and info["warning"] is None, json.dumps(info)
