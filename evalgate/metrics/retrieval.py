"""Source-retrieval metrics (hit rate and MRR, the diagnostic ``context_mrr`` over debug_context, precision@k and
recall@k): how well the sources a target returned, in rank order, cover a case's ``expected_sources``.

Sources are compared by a normalised key (``normalize_source``):

1. a Wikipedia-style URL (``[scheme://]host/wiki/Title``, any language or mobile host) becomes its
   title: the part after ``/wiki/`` up to any ``?`` or ``#``;
2. any other URL (``scheme://host/path?query#fragment``) becomes ``host/path`` without query,
   fragment or trailing ``/``;
3. the result is percent-decoded (UTF-8), underscores become spaces, whitespace runs collapse to one
   space and the text is Unicode case-folded.

So ``https://en.wikipedia.org/wiki/Consumer_behaviour``, ``Consumer_behaviour`` and
``consumer behaviour`` are the same source. A source returned more than once counts once, at its
first rank: ranks are positions in the de-duplicated returned list, starting at 1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from evalgate.metrics.registry import MetricContext, MetricUnavailable, Score, metric
from evalgate.metrics.text import fold, unique

if TYPE_CHECKING:
    from evalgate.model import Answer, Case

DETAILS_LIST_LIMIT = 20
"""Returned sources listed in a metric's details (the rest are counted, not listed)."""

_WIKI_PREFIX = re.compile(r"^(?:[a-z][a-z0-9+.\-]*://)?[^\s/?#]+\.[^\s/?#]+/wiki/", re.IGNORECASE)
_URL = re.compile(r"^[a-z][a-z0-9+.\-]*://(?P<host>[^/?#\s]*)(?P<path>[^?#]*)", re.IGNORECASE)
_MEMO_KEY = "retrieval:sources"
_DETAILS_KEY = "retrieval:details"


@lru_cache(maxsize=8192)
def normalize_source(source: str) -> str:
    """The comparison key of a source title or URL (rules in the module docstring). Memoised: the same
    sources come back case after case."""
    text = source.strip()
    wiki = _WIKI_PREFIX.match(text)
    if wiki:
        text = re.split(r"[?#]", text[wiki.end() :], maxsplit=1)[0]
    else:
        url = _URL.match(text)
        if url:
            text = url.group("host").lower() + url.group("path").rstrip("/")
    return fold(unquote(text).replace("_", " "))


@dataclass(frozen=True, slots=True)
class SourceMatch:
    """Expected and returned sources of one case after normalisation and de-duplication.

    ``ranks`` maps each matched expected key to its 1-based rank among the de-duplicated returned keys.
    """

    expected: tuple[str, ...]
    returned: tuple[str, ...]
    returned_raw: tuple[str, ...]
    ranks: dict[str, int]

    @property
    def first_rank(self) -> int | None:
        return min(self.ranks.values()) if self.ranks else None

    def relevant_in_top(self, k: int) -> int:
        """Number of expected sources among the first ``k`` de-duplicated returned sources."""
        return sum(1 for rank in self.ranks.values() if rank <= k)

    def details(self) -> dict[str, Any]:
        """Matched sources (as returned, rank order), first rank and the returned list (≤ 20 shown)."""
        by_rank = sorted(self.ranks.items(), key=lambda item: item[1])
        return {
            "matched": [self.returned_raw[rank - 1] for _, rank in by_rank],
            "first_rank": self.first_rank,
            "expected": len(self.expected),
            "returned": list(self.returned_raw[:DETAILS_LIST_LIMIT]),
            "returned_count": len(self.returned_raw),
        }


def match_sources(expected: list[str], returned: list[str]) -> SourceMatch:
    """Normalise, de-duplicate (first occurrence wins) and rank-match ``returned`` against ``expected``.

    Blank entries (empty after normalisation) are dropped on both sides.
    """
    expected_keys = unique((k for k in map(normalize_source, expected) if k), key=lambda k: k)
    pairs = unique(((normalize_source(r), r) for r in returned), key=lambda pair: pair[0])
    pairs = [(key, raw) for key, raw in pairs if key]
    wanted = set(expected_keys)
    ranks = {key: rank for rank, (key, _) in enumerate(pairs, start=1) if key in wanted}
    return SourceMatch(
        expected=tuple(expected_keys),
        returned=tuple(key for key, _ in pairs),
        returned_raw=tuple(raw for _, raw in pairs),
        ranks=ranks,
    )


def _has_expected_sources(case: Case) -> bool:
    return bool(case.expected_sources)


def _source_match(case: Case, answer: Answer, ctx: MetricContext) -> SourceMatch:
    """The case's ``SourceMatch``, computed once per case and kept in ``ctx.memo``."""
    cached = ctx.memo.get(_MEMO_KEY)
    if isinstance(cached, SourceMatch):
        return cached
    if answer.sources is None:
        raise MetricUnavailable("target returned no sources")
    found = match_sources(case.expected_sources or [], answer.sources)
    if not found.expected:
        raise MetricUnavailable("expected_sources holds only blank entries")
    ctx.memo[_MEMO_KEY] = found
    return found


def _details(found: SourceMatch, ctx: MetricContext, k: int | None = None) -> dict[str, Any]:
    """``found.details()`` (plus ``k``), built once per case and cutoff; shared read-only by the metrics."""
    memo: dict[int | None, dict[str, Any]] = ctx.memo.setdefault(_DETAILS_KEY, {})
    if k not in memo:
        memo[k] = found.details() if k is None else {**_details(found, ctx), "k": k}
    return memo[k]


def _cutoff(ctx: MetricContext) -> int:
    return int(getattr(ctx.options, "k", 5))


@metric("hit_rate", family="retrieval", threshold=0.80, applies=_has_expected_sources)
def hit_rate(case: Case, answer: Answer, ctx: MetricContext) -> Score:
    """Hit rate: 1.0 when at least one expected source is among the returned sources, else 0.0; the
    suite average is (questions with an expected source found) / (questions). Default threshold
    ≥ 0.80.

    A dialect may set a stricter bound (its ``thresholds``; its ``metric_docs`` names it).

    Sources are compared after normalisation (URL prefix stripped, percent-decoded, underscores as
    spaces, case-folded).
    """
    found = _source_match(case, answer, ctx)
    return Score(1.0 if found.ranks else 0.0, _details(found, ctx))


@metric("mrr", family="retrieval", applies=_has_expected_sources)
def mrr(case: Case, answer: Answer, ctx: MetricContext) -> Score:
    """Reciprocal rank: 1/rank of the first expected source among the returned sources (ranks from 1,
    duplicates counted once), 0.0 when none is returned; the suite average is the MRR. Informational by
    default.

    A dialect may set a bound (its ``thresholds``; its ``metric_docs`` names it).
    """
    found = _source_match(case, answer, ctx)
    first = found.first_rank
    return Score(1.0 / first if first else 0.0, _details(found, ctx))


@metric("precision_at_k", family="retrieval", applies=_has_expected_sources)
def precision_at_k(case: Case, answer: Answer, ctx: MetricContext) -> Score:
    """Precision@k: (expected sources among the first k returned) / k, with k from the ``k`` metric
    option (default 5); fewer than k returned sources still divide by k.
    """
    k = _cutoff(ctx)
    found = _source_match(case, answer, ctx)
    return Score(found.relevant_in_top(k) / k, _details(found, ctx, k))


@metric("recall_at_k", family="retrieval", applies=_has_expected_sources)
def recall_at_k(case: Case, answer: Answer, ctx: MetricContext) -> Score:
    """Recall@k: (expected sources among the first k returned) / (distinct expected sources), with k
    from the ``k`` metric option (default 5).
    """
    k = _cutoff(ctx)
    found = _source_match(case, answer, ctx)
    return Score(found.relevant_in_top(k) / len(found.expected), _details(found, ctx, k))


# --- a diagnostic MRR over the target's debug_context -------------------------------------------

_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> set[str]:
    """Lower-cased ASCII letter/digit runs of ``text`` (the tokenisation of the MRR ``context_mrr`` follows)."""
    return set(_WORD.findall(text.lower()))


def context_reciprocal_rank(chunks: list[str], reference: str, min_overlap: float) -> tuple[float, dict[str, Any]]:
    """1/rank of the first chunk whose keyword overlap with ``reference`` reaches ``min_overlap``.

    overlap(chunk) = |words(reference) ∩ words(chunk)| / |words(reference)|, words = lower-cased
    ``[a-z0-9]+`` runs; ranks start at 1 in the order the chunks were returned; 0.0 when no chunk
    reaches ``min_overlap``, when there is no chunk, or when the reference has no word.
    """
    expected = _words(reference)
    overlaps: list[float] = []
    first: int | None = None
    if expected:
        for rank, chunk in enumerate(chunks, start=1):
            found = _words(chunk)
            overlap = len(expected & found) / len(expected) if found else 0.0
            overlaps.append(round(overlap, 6))
            if first is None and found and overlap >= min_overlap:
                first = rank
    details = {"first_relevant_rank": first, "chunks": len(chunks), "overlaps": overlaps[:DETAILS_LIST_LIMIT],
               "min_overlap": min_overlap, "reference_words": len(expected)}
    return (1.0 / first if first else 0.0), details


def _has_expected_output(case: Case) -> bool:
    return bool(case.expected_output and case.expected_output.strip())


@metric("context_mrr", family="retrieval", applies=_has_expected_output)
def context_mrr(case: Case, answer: Answer, ctx: MetricContext) -> Score:
    """A deterministic keyword-overlap approximation: 1/rank of the first chunk of the target's
    ``debug_context`` whose words cover at least ``context_mrr_min_overlap`` (default 0.25) of the words
    of ``expected_output``, else 0.0 (also when the target returned no debug_context, as in the MRR it
    approximates). Diagnostic: no threshold by default; the suite average is the MRR.
    """
    min_overlap = float(getattr(ctx.options, "context_mrr_min_overlap", 0.25))
    chunks = [chunk for chunk in answer.debug_context or [] if chunk is not None]
    value, details = context_reciprocal_rank(chunks, case.expected_output or "", min_overlap)
    if not chunks:
        details["reason"] = "the target returned no debug_context"
    return Score(value, details)
