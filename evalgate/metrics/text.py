"""Shared text helpers for metrics: normalisation, order-preserving de-duplication and term matching
with word boundaries that also work for names containing punctuation ("C++", "AT&T", "Monday.com").

Term matching rules (``term_pattern``/``find_terms``):

* case-insensitive (Unicode-aware), and any run of whitespace in a term matches any run of whitespace
  (including a line break) in the text;
* a word boundary is required on each edge of the term whose edge character is a word character
  (letter, digit or underscore): "hub" never matches inside "GitHub", "HubSpot" not inside
  "HubSpotter", "Box" not inside "Dropbox". Punctuation next to the term is a boundary, so
  "Salesforce's", "(HubSpot)", "**HubSpot**" and "HubSpot-powered" all contain "HubSpot";
* an edge that is itself punctuation needs no boundary: "C++" is found in "C++17", ".NET" in "ASP.NET";
* ``find_terms`` matches longer terms first and never lets two matches overlap, so "HubSpot" is found
  only where it stands on its own, not inside a match of "HubSpot CRM" or "HubSpot.com".
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeVar

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)

_WORD_CHAR = re.compile(r"\w")


def collapse_whitespace(text: str) -> str:
    """Strip ``text`` and replace every run of whitespace with one space (``str.split`` and ``\\s``
    agree on what whitespace is)."""
    return " ".join(text.split())


@lru_cache(maxsize=8192)
def fold(text: str) -> str:
    """Comparison key for names: whitespace collapsed, then Unicode case-folded ("HubSpot " → "hubspot").
    Memoised: the same brand and source names are folded over and over."""
    return " ".join(text.split()).casefold()


def unique(items: Iterable[T], key: Callable[[T], K]) -> list[T]:
    """``items`` without repeats under ``key``, keeping each first occurrence in its original order."""
    seen: set[K] = set()
    kept: list[T] = []
    for item in items:
        k = key(item)
        if k not in seen:
            seen.add(k)
            kept.append(item)
    return kept


def is_word_char(char: str) -> bool:
    """True for a letter, digit or underscore (regex ``\\w``, Unicode)."""
    return bool(_WORD_CHAR.fullmatch(char))


@lru_cache(maxsize=4096)
def term_pattern(term: str) -> re.Pattern[str]:
    """Compiled case-insensitive pattern for ``term`` with the edge-aware word boundaries above.

    Raises ``ValueError`` for a term that is empty after whitespace is collapsed.
    """
    cleaned = collapse_whitespace(term)
    if not cleaned:
        raise ValueError("empty term")
    body = r"\s+".join(re.escape(part) for part in cleaned.split(" "))
    left = r"(?<!\w)" if is_word_char(cleaned[0]) else ""
    right = r"(?!\w)" if is_word_char(cleaned[-1]) else ""
    return re.compile(left + body + right, re.IGNORECASE)


def contains_term(text: str, term: str) -> bool:
    """True when ``term`` occurs in ``text`` under the matching rules (empty term → False)."""
    if not collapse_whitespace(term):
        return False
    return term_pattern(term).search(text) is not None


@dataclass(frozen=True, slots=True)
class TermMatch:
    """One occurrence of ``terms[term_index]`` at ``text[start:end]``."""

    term_index: int
    start: int
    end: int
    matched: str


class _Claimed:
    """Spans already claimed by longer terms: disjoint ``[start, end)`` intervals kept sorted by start,
    so an overlap test is one binary search (O(log n)) instead of a scan of every span."""

    __slots__ = ("ends", "starts")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def overlap_end(self, start: int, end: int) -> int | None:
        """The end of a claimed span overlapping ``[start, end)`` (the one starting last before ``end``),
        else None. Claimed spans are disjoint and sorted, so only that span and its predecessor can
        overlap without a later one overlapping too."""
        i = bisect_left(self.starts, end) - 1  # the last span starting before ``end``
        if i >= 0 and self.ends[i] > start:
            return self.ends[i]
        return None

    def add_all(self, spans: list[tuple[int, int]]) -> None:
        """Merge ``spans`` (sorted, disjoint from each other and from the claimed ones): one linear
        merge of two sorted runs (``sorted`` detects the runs)."""
        if not spans:
            return
        merged = sorted([*zip(self.starts, self.ends, strict=True), *spans])
        self.starts = [s for s, _ in merged]
        self.ends = [e for _, e in merged]


def _claim(text: str, pattern: re.Pattern[str], claimed: _Claimed) -> list[tuple[int, int]]:
    """Every occurrence of ``pattern`` not overlapping ``claimed``, left to right. After an occurrence
    that starts inside a claimed span the scan resumes at that span's end; after one that merely runs
    into a claimed span, one character on (so an occurrence right before or behind a claimed span is
    still found). Each regex search moves the scan forward, so the cost is linear in the text plus
    O(log n) per occurrence."""
    spans: list[tuple[int, int]] = []
    pos = 0
    while (found := pattern.search(text, pos)) is not None:  # a term is never blank: no empty match
        start, end = found.span()
        blocked = claimed.overlap_end(start, end)
        if blocked is not None:
            claimed_start = claimed.starts[bisect_left(claimed.starts, end) - 1]
            pos = blocked if claimed_start <= start else start + 1
            continue
        spans.append((start, end))  # own matches never overlap: the scan resumes at their end
        pos = end
    return spans


def find_terms(text: str, terms: Sequence[str]) -> list[TermMatch]:
    """All non-overlapping occurrences of ``terms`` in ``text``, sorted by position.

    Longer terms (by collapsed length) claim their spans first; ties go to the earlier term. Blank terms
    are ignored. Cost: one left-to-right regex scan per term, plus O(log m) per occurrence (m spans
    claimed so far) and one linear merge per term: O(len(terms) · len(text) + m log m) overall.
    """
    cleaned = [collapse_whitespace(t) for t in terms]
    order = sorted((i for i, c in enumerate(cleaned) if c), key=lambda i: (-len(cleaned[i]), i))
    claimed = _Claimed()
    matches: list[TermMatch] = []
    for index in order:
        spans = _claim(text, term_pattern(terms[index]), claimed)
        claimed.add_all(spans)
        matches.extend(TermMatch(index, s, e, text[s:e]) for s, e in spans)
    return sorted(matches, key=lambda m: (m.start, m.term_index))


def first_positions(text: str, terms: Sequence[str]) -> dict[int, int]:
    """Term index → offset of its first non-overlapping occurrence (terms never found are absent)."""
    first: dict[int, int] = {}
    for match in find_terms(text, terms):
        first.setdefault(match.term_index, match.start)
    return first
