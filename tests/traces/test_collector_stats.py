"""The receiver's counters as results.json's ``metadata.traces`` writes them: every key, in its order, the
seconds rounded to 4 decimals."""

from __future__ import annotations

import json
from pathlib import Path

from evalgate.traces.receiver import Collector, CollectorStats

KEYS = ["requests", "spans", "ignored_spans", "late_spans", "failed_attempt_spans", "dropped_spans",
        "rejected_requests", "seconds", "summary_seconds"]


def test_the_counters_document_keeps_its_keys_order_and_four_decimals() -> None:
    stats = CollectorStats(requests=3, spans=10, ignored_spans=2, late_spans=1, failed_attempt_spans=4,
                           dropped_spans=5, rejected_requests=1, seconds=0.123456, summary_seconds=2.0)
    assert list(stats.as_dict()) == KEYS
    assert json.dumps(stats.as_dict()) == (
        '{"requests": 3, "spans": 10, "ignored_spans": 2, "late_spans": 1, "failed_attempt_spans": 4, '
        '"dropped_spans": 5, "rejected_requests": 1, "seconds": 0.1235, "summary_seconds": 2.0}')


def test_a_trace_file_that_is_not_otlp_json_counts_as_a_rejected_request(tmp_path: Path) -> None:
    collector = Collector()
    bad = tmp_path / "trace.json"
    bad.write_text("not json", encoding="utf-8")
    collector.ingest_file(bad, max_bytes=1_000)
    assert collector.stats.as_dict() == dict.fromkeys(KEYS, 0) | {"rejected_requests": 1}
    assert not bad.exists()
