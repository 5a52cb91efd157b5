"""Large datasets are validated once: packed cases come back equal, the two-process scan of one big
JSONL file gives what the usual scan gives, and any problem sends it the usual way (same errors)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

import evalgate.dataset.parallel as parallel
from evalgate.dataset.compact import pack_case, unpack_case
from evalgate.dataset.load import DatasetError, DatasetStream
from evalgate.dataset.stream import scan
from evalgate.model import Case

REPO = Path(__file__).resolve().parents[1]


def same_case(got: Case, want: Case) -> bool:
    return (got == want and vars(got) == vars(want) and got.model_fields_set == want.model_fields_set
            and [type(v) for v in vars(got).values()] == [type(v) for v in vars(want).values()]
            and got.__pydantic_extra__ == want.__pydantic_extra__
            and all(a.model_fields_set == b.model_fields_set for a, b in zip(got.rules, want.rules, strict=True))
            and got.model_dump_json() == want.model_dump_json() and got.location == want.location)


def test_every_bundled_case_packs_and_comes_back_equal() -> None:
    count = 0
    for root in (REPO / "datasets", REPO / "tests" / "fixtures" / "datasets"):
        for case in DatasetStream([str(root)], REPO, fail_fast=False):
            data = pack_case(case)
            assert data is not None and same_case(unpack_case(data), case), case.id
            count += 1
    assert count > 50


@pytest.mark.parametrize("extra", [{"when": dt.date(2024, 1, 2)}, {"tags_set": {"a", "b"}}, {"deep": [[{"s": frozenset()}]]}])
def test_values_that_would_not_come_back_equal_do_not_pack(extra: dict[str, Any]) -> None:
    case = Case.model_validate({"id": "c", "input": "q", **extra})
    assert pack_case(case) is None


def test_large_datasets_read_back_packed_cases(tmp_path: Path) -> None:
    rows = [{"id": f"c{i}", "input": f"q{i}", "output": "a", "rules": [{"type": "contains", "value": "a"}],
             "mentions": [{"brand": "B", "rank": 1}], "metadata": {"note": {"k": [1, 2.5, None]}}} for i in range(30)]
    (tmp_path / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    packed = scan(["cases.jsonl"], tmp_path, keep_in_memory=5)
    kept = scan(["cases.jsonl"], tmp_path, keep_in_memory=1000)
    assert packed.cases.packed is not None and kept.cases.kept is not None
    assert all(same_case(a, b) for a, b in zip(packed.cases, kept.cases, strict=True))
    assert [c.index for c in packed.cases] == list(range(30)) == [c.index for c in packed.cases]


def write_big(path: Path, n: int, *, bad: dict[int, str] | None = None) -> None:
    lines = []
    for i in range(n):
        row = {"id": f"c{i:05d}", "input": f"q{i}", "output": "answer", "category": ["a", "b"][i % 2],
               "metrics": ["keyword_coverage"] if i % 7 == 0 else None, "expected_keywords": ["answer"]}
        lines.append((bad or {}).get(i, json.dumps(row)))
        if i % 11 == 0:
            lines.append("   ")  # blank lines are skipped, yet count for line numbers
    path.write_text("\ufeff" + "\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture
def small_parallel_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 1)


def usual_scan(paths: list[str], base: Path, **kwargs: Any) -> Any:
    original = parallel.PARALLEL_MIN_BYTES
    parallel.PARALLEL_MIN_BYTES = 1 << 62
    try:
        return scan(paths, base, **kwargs)
    finally:
        parallel.PARALLEL_MIN_BYTES = original


@pytest.mark.usefixtures("small_parallel_threshold")
def test_the_two_process_scan_equals_the_usual_scan(tmp_path: Path) -> None:
    write_big(tmp_path / "big.jsonl", 400)
    fast = parallel.parallel_scan(["big.jsonl"], tmp_path)
    assert fast is not None and len(fast.packed) == 2
    got, want = scan(["big.jsonl"], tmp_path, keep_in_memory=0), usual_scan(["big.jsonl"], tmp_path, keep_in_memory=0)
    assert got.files == want.files and got.case_metrics == want.case_metrics and got.total == want.total == 400
    assert len(got.cases) == len(want.cases) and got.suites == want.suites == {}
    assert all(same_case(a, b) for a, b in zip(got.cases, want.cases, strict=True))
    assert [c.index for c in got.cases] == list(range(400))


@pytest.mark.usefixtures("small_parallel_threshold")
@pytest.mark.parametrize("bad", [{390: "{not json"}, {5: '{"id": 3.5}'}, {380: json.dumps({"id": "c00002", "input": "q"})},
                                 {200: json.dumps({"id": "c00201", "input": "q"})}, {3: json.dumps({"index": 1, "id": "x"})}])
def test_a_dataset_with_problems_reports_them_as_the_usual_scan_does(tmp_path: Path, bad: dict[int, str]) -> None:
    write_big(tmp_path / "big.jsonl", 400, bad=bad)
    assert parallel.parallel_scan(["big.jsonl"], tmp_path) is None
    with pytest.raises(DatasetError) as got:
        scan(["big.jsonl"], tmp_path)
    with pytest.raises(DatasetError) as want:
        usual_scan(["big.jsonl"], tmp_path)
    assert str(got.value) == str(want.value) and got.value.errors == want.value.errors


@pytest.mark.usefixtures("small_parallel_threshold")
def test_selections_and_other_files_keep_the_usual_scan(tmp_path: Path) -> None:
    write_big(tmp_path / "big.jsonl", 50)
    (tmp_path / "more.jsonl").write_text(json.dumps({"id": "z", "input": "q"}) + "\n")
    assert parallel.parallel_scan(["big.jsonl", "more.jsonl"], tmp_path) is None
    (tmp_path / "cases.json").write_text(json.dumps([{"id": "y", "input": "q"}]))
    assert parallel.parallel_scan(["cases.json"], tmp_path) is None
    chosen = scan(["big.jsonl"], tmp_path, select=lambda refs: refs[:3], keep_in_memory=0)
    assert [c.id for c in chosen.cases] == ["c00000", "c00001", "c00002"]
