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
def test_small_samples_give_numpys_percentile_exactly(values: list[float], q: float) -> None:
    sketch = QuantileSketch()
    for value in values:
        sketch.add(value)
    assert sketch.quantile(q) == pytest.approx(float(np.percentile(np.array(values), q * 100)), rel=1e-12, abs=1e-9)


@settings(max_examples=100, deadline=None)
@given(values=st.lists(st.floats(min_value=0.0, max_value=1e7, allow_nan=False), min_size=1, max_size=400),
       q=st.sampled_from([0.0, 0.5, 0.9, 0.95, 0.99, 1.0]))
def test_past_the_exact_limit_each_quantile_is_within_one_percent_of_numpys(values: list[float], q: float) -> None:
    sketch = QuantileSketch(exact_limit=0)  # the sketch alone, as for runs of more than EXACT_LIMIT cases
    for value in values:
        sketch.add(value)
    exact = float(np.percentile(np.array(values), q * 100))
    estimate = sketch.quantile(q)
    assert estimate is not None and sketch.values is None
    if exact <= 1e-9:
        assert estimate <= 1e-9  # the zero bucket (values up to MIN_VALUE)
    else:
        assert abs(estimate - exact) <= 0.01 * exact + 1e-9


def test_one_case_is_its_own_percentiles_and_small_samples_interpolate() -> None:
    """The issue's run: one 6,240 ms case reported p50 and p95 6,187 ms (its bucket's estimate)."""
    one = QuantileSketch()
    one.add(6240.0)
    assert one.quantile(0.5) == one.quantile(0.95) == 6240.0
    two = QuantileSketch()
    for value in (100.0, 300.0):
        two.add(value)
    assert two.quantile(0.5) == 200.0 == float(np.percentile([100.0, 300.0], 50))
    assert two.quantile(0.95) == pytest.approx(290.0) and float(np.percentile([100.0, 300.0], 95)) == pytest.approx(290.0)
    sketch_only = QuantileSketch(exact_limit=0)
    sketch_only.add(6240.0)
    assert sketch_only.quantile(0.95) == 6240.0  # clamped to the values seen


def test_hand_computed_percentiles_and_flat_memory() -> None:
    sketch = QuantileSketch()
    assert sketch.quantile(0.5) is None
    for value in range(1, 101):  # 1 … 100 ms: h = q·99; p50 = 50 + 0.5·(51 − 50) = 50.5, p95 = 95 + 0.05 = 95.05
        sketch.add(float(value))
    assert sketch.quantile(0.5) == pytest.approx(50.5)
    assert sketch.quantile(0.95) == pytest.approx(95.05)
    big = QuantileSketch()
    for i in range(200_000):
        big.add(1.0 + (i % 10_000))  # 1 … 10,000 ms, 200,000 values
    assert big.values is None and len(big.buckets) < 500  # ≈ ln(10⁴)/(2 · 0.01) buckets, whatever the count
    assert big.quantile(0.5) == pytest.approx(5000.5, rel=0.01)


def test_the_run_reports_p50_and_p95(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = [{"id": f"c{i}", "input": "q", "output": "ok", "latency_ms": float(i * 10)} for i in range(1, 21)]
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    assert cli_main(["run", "-d", str(tmp_path / "cases.json"), "-o", str(tmp_path / "out"), "--progress",
                     "none"]) == 0
    out = capsys.readouterr().out
    latency = json.loads((tmp_path / "out" / "results.json").read_text())["summary"]["latency_ms"]
    # 10 … 200 ms: h = q·19; p50 = 100 + 0.5·10 = 105, p95 = 190 + 0.05·10 = 190.5 (numpy's percentile)
    assert latency["average"] == 105.0
    assert latency["p50"] == pytest.approx(105) and latency["p95"] == pytest.approx(190.5, abs=0.5)
    assert re.search(r"Latency: average 105 ms, p50 105 ms, p95 19[01] ms", out), out
