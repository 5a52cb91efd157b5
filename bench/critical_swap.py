"""``python -m bench.critical_swap [--cases 1000000]``: a swap of one critical case id among ``--cases`` critical
cases (issue 30) — the base run's last case medium, the PR's case 123,456 demoted and the last promoted, so the
critical count is equal — found and named by the comparison's case records (``verdict.compare._collapse`` of both
runs, as ``compare_runs`` pairs them, then ``dataset_changes`` and ``verdict.policy.loosenings``). Prints the
loosening, the time of each step and the process's peak RSS (most of it the two collapsed runs, which the
comparison holds anyway: bench/README.md, "Not done").
"""

from __future__ import annotations

import argparse
import resource
import time
from collections.abc import Iterator
from typing import Any

from evalgate.verdict.compare import _collapse, dataset_changes
from evalgate.verdict.policy import loosenings


def records(cases: int, medium: int) -> Iterator[dict[str, Any]]:
    for i in range(cases):
        yield {"id": f"case-{i:07d}", "source": f"cases.jsonl:{i + 1}",
               "risk_level": "medium" if i == medium else "critical", "status": "passed", "passed": True,
               "repeat": 0, "expectation": f"{i:016x}", "metrics": {}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=1_000_000)
    cases = parser.parse_args(argv).cases
    swapped = 123_456 % cases
    started = time.perf_counter()
    base = _collapse(records(cases, cases - 1), "majority")
    head = _collapse(records(cases, swapped), "majority")
    collapsed = time.perf_counter()
    changes = dataset_changes(base, head, [case_id for case_id in head if case_id in base])
    compared = time.perf_counter()
    critical = {"count": cases - 1, "digest": "a", "ids": None}
    found = loosenings({"cases": {"count": cases, "digest": "x", "ids": None, "critical": critical}},
                       {"cases": {"count": cases, "digest": "x", "ids": None, "critical": {**critical, "digest": "b"}}},
                       [], cases={"removed": [], **changes})
    print(f"{cases:,} critical cases: {[item['text'] for item in found]}")
    print(f"collapse both runs {collapsed - started:.1f} s, dataset_changes {compared - collapsed:.2f} s, "
          f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MB")
    return 0 if [item["kind"] for item in found] == ["critical_demoted"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
