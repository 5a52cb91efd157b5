"""Large datasets are validated once: packed cases come back equal to the validated ones."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from evalgate.dataset.compact import pack_case, unpack_case
from evalgate.dataset.load import DatasetStream
from evalgate.dataset.stream import scan
from evalgate.model import Case

REPO = Path(__file__).resolve().parents[2]


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
