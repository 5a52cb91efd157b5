"""Seed 004 (golden dataset routed to specialists) as a dialect.

Adds its 1–5 ``response_quality`` (judge, or its heuristic without one; gated ≥ 3.5) and its weighted
``composite`` (0.30 specialist + 0.25 keywords + 0.20 data sources + 0.25 quality/5; gated ≥ 0.75) on its
golden cases. Its ``eval_config.yaml``, ``EVAL_JUDGE_API_KEY`` and runner flags live in ``config/legacy.py``
and the CLI; its results document in ``report/compat.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evalgate.dialect import Dialect


def _detect(data: Mapping[str, Any], wrapper: str | None) -> str | None:
    """Seed 004's spellings: ``expected_specialist`` with ``query``."""
    return "it uses seed 004's field names" if "expected_specialist" in data and "query" in data else None


DIALECT = Dialect(
    name="seed004",
    label="seed 004 (golden dataset)",
    owns=("response_quality", "composite"),
    owned_when={"response_quality": "the case has expected_specialist or verified_answer_summary",
                "composite": "the case has expected_specialist or verified_answer_summary"},
    detect=_detect,
    detect_order=20,
    markers=frozenset({"expected_specialist"}),
    elsewhere="eval_config.yaml and EVAL_JUDGE_API_KEY in config/legacy.py, seed004-results.json in report/compat.py",
)
