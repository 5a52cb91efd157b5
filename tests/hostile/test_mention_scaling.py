"""Item 1 of issue #12: matching brand mentions is linear in the mentions found.

Before the fix every match was checked against every span claimed so far (16k mentions 3.2 s, 32k
11.5 s). The cost is asserted here by counting operations — regex scans and claimed-span comparisons —
for 8k and 32k mentions (the wall time of 32k mentions is measured by ``python -m bench.hostile``)."""

from __future__ import annotations

import bisect
import re
from typing import Any

import pytest

from evalgate.metrics import text as text_module
from evalgate.metrics.mentions import BrandBook, detect_brands
from evalgate.metrics.text import find_terms
from evalgate.model import Case

TERMS = ["HubSpot", "HubSpot CRM", "Salesforce", "Zoho", "HubSpot.com"]


def mentions_text(count: int) -> str:
    """``count`` mentions, a fifth of them inside longer names that claim them first."""
    return " and ".join(TERMS[i % len(TERMS)] for i in range(count))


class CountingPattern:
    """A compiled pattern that counts its searches."""

    def __init__(self, pattern: re.Pattern[str], counter: dict[str, int]) -> None:
        self.pattern = pattern
        self.counter = counter

    def search(self, text: str, pos: int = 0) -> Any:
        self.counter["searches"] += 1
        return self.pattern.search(text, pos)


def operations(count: int, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    counter = {"searches": 0, "comparisons": 0}
    real_pattern = text_module.term_pattern

    def counting_bisect(items: list[int], value: int, *args: Any) -> int:
        counter["comparisons"] += max(1, len(items).bit_length())  # what a binary search may compare
        return bisect.bisect_left(items, value, *args)

    with monkeypatch.context() as patch:
        patch.setattr(text_module, "term_pattern", lambda term: CountingPattern(real_pattern(term), counter))
        patch.setattr(text_module, "bisect_left", counting_bisect)
        matches = find_terms(mentions_text(count), TERMS)
    assert len(matches) == count
    return counter


def test_work_per_mention_stays_flat_from_8k_to_32k_mentions(monkeypatch: pytest.MonkeyPatch) -> None:
    small, large = operations(8_000, monkeypatch), operations(32_000, monkeypatch)
    # each occurrence of each term is searched for about once (the shorter "HubSpot" also finds the places
    # where a longer name claimed it), whatever the number of mentions
    assert small["searches"] <= 2 * 8_000 + len(TERMS) and large["searches"] <= 2 * 32_000 + len(TERMS)
    # claimed spans are compared by binary search: n log n, not n² (32k² ≈ 10⁹)
    assert large["comparisons"] <= 2 * 32_000 * 17
    assert large["comparisons"] / small["comparisons"] < 4 * 1.3


def test_32k_mentions_are_all_found_with_the_overlap_rules() -> None:
    text = mentions_text(32_000)
    case = Case(id="m", input="q", brands_mine=["HubSpot", "HubSpot CRM", "HubSpot.com"],
                brands_competitors=["Salesforce", "Zoho"])
    detection = detect_brands(text, BrandBook.from_case(case))
    assert detection.occurrences == {"HubSpot": 6_400, "HubSpot CRM": 6_400, "Salesforce": 6_400, "Zoho": 6_400,
                                     "HubSpot.com": 6_400}
