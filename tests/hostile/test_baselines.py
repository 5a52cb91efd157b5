"""Baselines at any size. Issue #12 capped a baseline file's size and record count; issue #33 item 5 streams a
baseline file instead (flat memory), so a file beyond the old caps is compared, not refused. The in-memory
record cap (an artifact's bytes) is lowered here so a small file exceeds it."""

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
def test_a_baseline_file_is_streamed_not_refused_for_its_size(baseline: tuple[Path, Path], tmp_path: Path, name: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A baseline file is read at any size (issue 33 item 5): the in-memory cap on records no longer applies to
    it, and its records are streamed from the file (``StoredRecords``), not held in a list."""
    dataset, base = baseline
    monkeypatch.setattr(reader, "MAX_BASELINE_RECORDS", 10)
    loaded = reader.load_results(base / name)
    assert isinstance(loaded["results"], reader.StoredRecords) and len(loaded["results"]) == 12
    assert [r["id"] for r in loaded["results"]] == [r["id"] for r in loaded["results"]]  # read again, same order
    ran = run_cli(["run", "--dataset", str(dataset), "--baseline", str(base / name)], tmp_path / "head")
    assert ran.code == 0, ran.err
    info = ran.results()["baseline"]
    assert info["found"] and info["warning"] is None, json.dumps(info)
    assert ran.results()["comparison"]["pass_rate"]["n_paired"] == 12


def test_a_baseline_within_the_caps_is_compared(baseline: tuple[Path, Path], tmp_path: Path) -> None:
    dataset, base = baseline
    ran = run_cli(["run", "--dataset", str(dataset), "--baseline", str(base / "results.json")], tmp_path / "head")
    info = ran.results()["baseline"]
    assert ran.code == 0 and info["found"] and info["warning"] is None, json.dumps(info)
