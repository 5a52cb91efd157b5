"""Selected cases stream from their files when large, and iterate the same either way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalgate.dataset.stream import scan, selector
from evalgate.errors import UserError


def write_cases(path: Path, n: int) -> None:
    with path.open("w") as handle:
        for i in range(n):
            handle.write(json.dumps({"id": f"c{i}", "input": f"q{i}", "output": "a", "category": "odd" if i % 2 else "even",
                                     "tags": ["t3"] if i % 3 == 0 else []}) + "\n")


@pytest.mark.parametrize("keep", [0, 1_000])
def test_streamed_and_kept_selections_agree(tmp_path: Path, keep: int) -> None:
    write_cases(tmp_path / "cases.jsonl", 60)
    choose = selector(case_ids=None, first_n=None, categories=["odd"], tags=["t3"], shard=None)
    scanned = scan(["cases.jsonl"], tmp_path, select=choose, keep_in_memory=keep)
    expected = [f"c{i}" for i in range(60) if i % 2 and i % 3 == 0]
    assert len(scanned.cases) == len(expected) and scanned.total == 60
    assert [c.id for c in scanned.cases] == expected
    assert [c.id for c in scanned.cases] == expected  # iterable again
    assert (scanned.cases.kept is None) == (keep == 0)


def test_everything_selected_streams_without_an_index_set(tmp_path: Path) -> None:
    write_cases(tmp_path / "cases.jsonl", 10)
    scanned = scan(["cases.jsonl"], tmp_path, keep_in_memory=0)
    assert scanned.cases.indexes is None and [c.index for c in scanned.cases] == list(range(10))
    assert scanned.files[0].cases == 10


def test_selection_errors_still_name_the_setting(tmp_path: Path) -> None:
    write_cases(tmp_path / "cases.jsonl", 5)
    choose = selector(case_ids=["c9"], first_n=None, categories=None, tags=None, shard=None)
    with pytest.raises(UserError, match="case_ids: unknown case id 'c9'"):
        scan(["cases.jsonl"], tmp_path, select=choose, keep_in_memory=0)
