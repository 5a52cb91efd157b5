"""Issue 33 item 5: ``evalgate compare`` (``runner.api.compare``: ``store.reader.load_results`` streaming both
files, ``verdict.compare.compare_runs`` on compact per-case columns) in flat memory. Measured with
tracemalloc: doubling the cases on each side must not double the peak, and each added case may cost at most
a few hundred bytes a side (the old reader held both documents: ~3 KB a case a side here). The speed and
the peak RSS at 1,000,000 cases a side are in ``bench.streaming``, not here."""

from __future__ import annotations

import gc
import json
import tracemalloc
from pathlib import Path

from evalgate.runner.api import compare

HEAD = {"schema_version": 1, "run_id": "r", "summary": {}, "gate": {},
        "metrics": {"f1": {"threshold": {"min": 0.5}}}}


def write_run(path: Path, cases: int, *, head: bool) -> Path:
    """A results.json of ``cases`` records with a 1 KB answer each; on ``head`` every 7th case flips to fail."""
    with open(path, "w", encoding="utf-8") as out:
        out.write(json.dumps(HEAD)[:-1] + ', "results": [')
        for i in range(cases):
            passed = i % 5 != 0 and not (head and i % 7 == 0)
            record = {"id": f"case-{i:07d}", "index": i, "repeat": 0, "source": f"cases/suite.jsonl:{i + 1}",
                      "risk_level": "medium", "status": "passed" if passed else "failed",
                      "expectation": f"{i:064x}", "output": "an answer " * 100,
                      "metrics": {"f1": {"value": (i % 10) / 10}, "exact": {"value": float(passed)}}}
            out.write(("," if i else "") + json.dumps(record))
        out.write("]}")
    return path


def peak_bytes(folder: Path, cases: int) -> tuple[int, dict]:
    base = write_run(folder / f"base-{cases}.json", cases, head=False)
    head = write_run(folder / f"head-{cases}.json", cases, head=True)
    compare(base, head)  # imports and caches outside the measurement
    gc.collect()
    tracemalloc.start()
    try:
        result = compare(base, head)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak, result.comparison


def test_compare_memory_is_flat_in_the_number_of_cases(tmp_path: Path) -> None:
    small, first = peak_bytes(tmp_path, 3000)
    large, second = peak_bytes(tmp_path, 6000)
    # the comparison itself is right at both sizes: every 7th case not already failing flipped to fail
    assert first["pass_rate"]["n_paired"] == 3000 and second["pass_rate"]["n_paired"] == 6000
    assert first["pass_rate"]["regressions"] == sum(1 for i in range(3000) if i % 7 == 0 and i % 5 != 0)
    assert first["regression"] and second["regression"]
    per_case = (large - small) / 3000  # both sides
    assert per_case < 800, f"{per_case:.0f} bytes a case (both runs), peaks {small:,} → {large:,}"
    assert large < 1.5 * small, f"peaks {small:,} → {large:,} at twice the cases"
