"""Latency percentiles in flat memory (evalgate.verdict.quantiles) against numpy's exact order statistics."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalgate.cli.main import main as cli_main
from evalgate.verdict.quantiles import QuantileSketch


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.floats(min_value=0.0, max_value=1e7, allow_nan=False), min_size=1, max_size=400),
       q=st.sampled_from([0.0, 0.5, 0.9, 0.95, 0.99, 1.0]))
def test_each_quantile_is_within_one_percent_of_the_exact_lower_order_statistic(values: list[float], q: float) -> None:
    sketch = QuantileSketch()
    for value in values:
        sketch.add(value)
    exact = float(np.percentile(np.array(values), q * 100, method="lower"))
    estimate = sketch.quantile(q)
    assert estimate is not None
    if exact <= 1e-9:
        assert estimate == 0.0
    else:
        assert abs(estimate - exact) <= 0.01 * exact + 1e-12


def test_hand_computed_percentiles_and_flat_memory() -> None:
    sketch = QuantileSketch()
    assert sketch.quantile(0.5) is None
    for value in range(1, 101):  # 1 … 100 ms: lower order statistics p50 = 50 (k = 49), p95 = 95 (k = 94)
        sketch.add(float(value))
    assert sketch.quantile(0.5) == pytest.approx(50, rel=0.01)
    assert sketch.quantile(0.95) == pytest.approx(95, rel=0.01)
    big = QuantileSketch()
    for i in range(200_000):
        big.add(1.0 + (i % 10_000))  # 1 … 10,000 ms, 200,000 values
    assert len(big.buckets) < 500  # ≈ ln(10⁴)/(2 · 0.01) buckets, whatever the count


def test_the_run_reports_p50_and_p95(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = [{"id": f"c{i}", "input": "q", "output": "ok", "latency_ms": float(i * 10)} for i in range(1, 21)]
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    assert cli_main(["run", "-d", str(tmp_path / "cases.json"), "-o", str(tmp_path / "out"), "--progress",
                     "none"]) == 0
    out = capsys.readouterr().out
    latency = json.loads((tmp_path / "out" / "results.json").read_text())["summary"]["latency_ms"]
    # 10 … 200 ms: p50 = the 10th smallest (k = ⌊0.5·19⌋ = 9) = 100, p95 = k 18 = 190
    assert latency["average"] == 105.0
    assert latency["p50"] == pytest.approx(100, rel=0.01) and latency["p95"] == pytest.approx(190, rel=0.01)
    assert re.search(r"Latency: average 105 ms, p50 (99|100|101) ms, p95 (18[89]|19[012]) ms", out), out
