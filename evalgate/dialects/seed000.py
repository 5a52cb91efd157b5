"""Seed 000 (Wikipedia agent: ground truth with expected sources) as a dialect.

Adds, on cases with ``expected_sources``: its LLM judge (``judge_score``, gated > 0.75), the token count
and its token-penalised ``combined_score`` (hit_rate^2 · judge_score^1.5 / (num_tokens/1000)^0.5); and
its strict minimums hit_rate > 0.80 and MRR > 0.70 as default thresholds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evalgate.dialect import CaseFormat, Dialect, Trigger
from evalgate.model import Case


def _has_sources(case: Case) -> bool:
    return case.expected_sources is not None


def _detect(data: Mapping[str, Any], wrapper: str | None) -> str | None:
    """A seed 000 ground-truth entry: ``question`` with ``expected_sources`` and no ``id`` / ``input``."""
    if "question" in data and "expected_sources" in data and not {"id", "input", "case_id"} & set(data):
        return "it is a seed 000 ground-truth entry (question, expected_sources, no id)"
    return None


DIALECT = Dialect(
    name="seed000",
    label="seed 000 (Wikipedia agent)",
    owns=("judge_score", "combined_score"),
    owned_when={"judge_score": "the case has expected_sources", "combined_score": "the case has expected_sources"},
    triggers=(Trigger("num_tokens", _has_sources, "seed 000 counts the tokens of every answer"),),
    detect=_detect,
    detect_order=30,
    markers=frozenset({"question"}),
    thresholds={"hit_rate": {"gt": 0.8}, "mrr": {"gt": 0.7}},
    elsewhere="output shape evaluation.json in report/compat.py (--compat seed000)",
    kind_aliases=("000", "wikipedia-agent"),
    compat_aliases=("000", "0"),
    case_format=CaseFormat("seed 000 ground truth", (("input", "question"), ("expected_sources", "expected_sources"))),
    written_files=("evaluation.json",),
)
