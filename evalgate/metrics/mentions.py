"""Brand-mention metrics (a brand-mention extractor's fields): precision, recall, F1, rank accuracy, brand coverage and the
false ``is_mine`` rate of the brands found in an answer, against a case's expectations.

Where the brands found come from (``details["extractor"]``):

* ``"target"``: the system under test is an extractor and reported ``mentions`` (brand, is_mine, rank)
  and/or a ``ranked_list``; those are scored as reported.
* ``"builtin"``: otherwise the built-in detector reads the answer text. Every name in the case's own
  and competitor brand lists (the dialect fields with the roles ``own_brands`` / ``competitor_brands``)
  is a distinct brand entry, matched case-insensitively with the word
  boundaries of ``evalgate.metrics.text``: "hub" is never found inside "GitHub" nor "HubSpot" inside
  the compound "HubSpotter", while "Salesforce's", "AT&T", "C++" and "Monday.com" are found.
  Longer names are matched first and matches never overlap, so in "HubSpot and HubSpot CRM …
  HubSpot.com" each of "HubSpot", "HubSpot CRM" and "HubSpot.com" is found once, and "HubSpot" only
  where it stands on its own. The ranked list is the brands in order of first appearance.

Brands are compared case-insensitively (whitespace collapsed) and counted once each, however often
they appear. The expected set is ``expected_my_mentions ∪ expected_competitor_mentions``;
TP = expected brands found, FP = brands found but not expected, FN = expected brands not found.

Empty cases: a ratio whose denominator is 0 is 1.0 when expected and found agree (both empty) and 0.0
otherwise. So an answer with nothing expected and nothing found scores 1.0 everywhere (as the brand-mention
dialect's own tests expect), a detector that finds nothing when something was expected gets precision 0, recall 0 and
F1 0, and one that finds brands when none were expected gets precision 0, recall 0 and F1 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from evalgate.metrics.registry import MetricContext, MetricUnavailable, Score, metric
from evalgate.metrics.text import collapse_whitespace, find_terms, fold, unique
from evalgate.model import dialect_fields

if TYPE_CHECKING:
    from evalgate.model import Answer, Case

OWN, COMPETITORS = "own_brands", "competitor_brands"
"""The roles (``DialectField.role``) of the case's brand lists: its own company's and its competitors'."""

Extractor = Literal["builtin", "target"]
_MEMO_KEY = "mentions:detection"
_BOOK_KEY = "mentions:book"
_DETAILS_KEY = "mentions:details"


# --- pure formulas ------------------------------------------------------------------------------


def ratio(numerator: int, denominator: int, *, agree: bool) -> float:
    """``numerator / denominator``; for a zero denominator 1.0 when ``agree`` else 0.0."""
    if denominator == 0:
        return 1.0 if agree else 0.0
    return numerator / denominator


def f1(precision: float, recall: float) -> float:
    """Harmonic mean ``2·P·R / (P + R)``; 0.0 when P + R = 0."""
    total = precision + recall
    return 2.0 * precision * recall / total if total > 0 else 0.0


def rank_accuracy_of(expected: list[str], actual: list[str]) -> float:
    """(positions i with expected[i] == actual[i], case-insensitive) / len(expected); an empty
    expected list scores 1.0 when ``actual`` is empty too, else 0.0."""
    hits = sum(1 for want, got in zip(expected, actual, strict=False) if fold(want) == fold(got))
    return ratio(hits, len(expected), agree=not actual)


# --- the brand book and the detection -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrandBook:
    """The case's brand entries: folded name → (name as listed, is_mine)."""

    entries: dict[str, tuple[str, bool]]

    @classmethod
    def from_case(cls, case: Case) -> BrandBook:
        """Blank names are dropped, repeats within a list kept once; a name in both lists is an error."""
        mine = {fold(b) for b in case.role_value(OWN) or [] if fold(b)}
        entries: dict[str, tuple[str, bool]] = {}
        for name in case.role_value(OWN) or []:
            if fold(name):
                entries.setdefault(fold(name), (collapse_whitespace(name), True))
        for name in case.role_value(COMPETITORS) or []:
            key = fold(name)
            if key in mine:
                raise MetricUnavailable(f"brand {name!r} is listed in both {dialect_fields().role_field(OWN)} and "
                                        f"{dialect_fields().role_field(COMPETITORS)}")
            if key:
                entries.setdefault(key, (collapse_whitespace(name), False))
        return cls(entries)

    def names(self) -> list[str]:
        return [name for name, _ in self.entries.values()]

    def display(self, brand: str) -> str:
        """The brand as listed in the case, or as given when it is not listed."""
        return self.entries.get(fold(brand), (collapse_whitespace(brand), False))[0]

    def is_mine(self, brand: str) -> bool:
        return self.entries.get(fold(brand), ("", False))[1]


@dataclass(frozen=True, slots=True)
class Detection:
    """The brands found in one answer.

    ``found``: distinct brands, first-appearance (or reported) order; ``ranked``: the ranked list;
    ``flags``: (brand, is_mine) per reported mention, None when the target reported no flags;
    ``occurrences``: per-brand match counts (built-in detector only).
    """

    extractor: Extractor
    found: list[str]
    ranked: list[str]
    flags: list[tuple[str, bool]] | None
    occurrences: dict[str, int] = field(default_factory=dict)


def detect_brands(text: str, book: BrandBook) -> Detection:
    """Run the built-in detector over ``text`` (rules in the module docstring)."""
    names = book.names()
    occurrences: dict[str, int] = {}
    for match in find_terms(text, names):
        name = names[match.term_index]
        occurrences[name] = occurrences.get(name, 0) + 1
    found = list(occurrences)  # dicts keep insertion order, and matches come sorted by position
    return Detection(
        extractor="builtin",
        found=found,
        ranked=list(found),
        flags=[(name, book.is_mine(name)) for name in found],
        occurrences=occurrences,
    )


def reported_brands(answer: Answer, book: BrandBook) -> Detection:
    """The target's own extraction: ``mentions`` and/or ``ranked_list`` (blank brands ignored).

    Without a ranked list, mentions are ranked by their ``rank`` (mentions without one last, in
    reported order).
    """
    mentions = [m for m in answer.mentions or [] if fold(m.brand)]
    ranked_source = answer.ranked_list
    if ranked_source is None:
        by_rank = sorted(enumerate(mentions), key=lambda im: (im[1].rank is None, im[1].rank or 0, im[0]))
        ranked_source = [m.brand for _, m in by_rank]
    ranked = unique((book.display(b) for b in ranked_source if fold(b)), key=fold)
    found_source = [m.brand for m in mentions] if answer.mentions is not None else ranked
    return Detection(
        extractor="target",
        found=unique((book.display(b) for b in found_source), key=fold),
        ranked=ranked,
        flags=[(book.display(m.brand), m.is_mine) for m in mentions] if answer.mentions is not None else None,
    )


def _detection(case: Case, answer: Answer, ctx: MetricContext) -> Detection:
    """The case's ``Detection``, computed once per case and kept in ``ctx.memo``."""
    cached = ctx.memo.get(_MEMO_KEY)
    if isinstance(cached, Detection):
        return cached
    book = _book(case, ctx)
    if answer.mentions is not None or answer.ranked_list is not None:
        found = reported_brands(answer, book)
    elif answer.output is None:
        raise MetricUnavailable("target returned no answer text")
    else:
        found = detect_brands(answer.output, book)
    ctx.memo[_MEMO_KEY] = found
    return found


def _book(case: Case, ctx: MetricContext) -> BrandBook:
    """The case's ``BrandBook``, built once per case and kept in ``ctx.memo``."""
    book = ctx.memo.get(_BOOK_KEY)
    if not isinstance(book, BrandBook):
        book = ctx.memo[_BOOK_KEY] = BrandBook.from_case(case)
    return book


# --- set comparison -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Confusion:
    """Expected versus found brands, by folded name."""

    expected: list[str]
    found: list[str]
    true_positives: list[str]
    false_positives: list[str]
    false_negatives: list[str]

    @property
    def precision(self) -> float:
        """TP / (TP + FP)."""
        tp, fp = len(self.true_positives), len(self.false_positives)
        return ratio(tp, tp + fp, agree=not self.expected)

    @property
    def recall(self) -> float:
        """TP / (TP + FN)."""
        tp, fn = len(self.true_positives), len(self.false_negatives)
        return ratio(tp, tp + fn, agree=not self.found)

    def details(self, extractor: Extractor) -> dict[str, Any]:
        return {
            "extractor": extractor,
            "expected": self.expected,
            "found": self.found,
            "true_positives": self.true_positives,
            "false_positives": self.false_positives,
            "false_negatives": self.false_negatives,
        }


def expected_brands(case: Case) -> list[str]:
    """``expected_my_mentions ∪ expected_competitor_mentions``, distinct by folded name, in order."""
    listed = [*(case.expected_my_mentions or []), *(case.expected_competitor_mentions or [])]
    return unique((collapse_whitespace(b) for b in listed if fold(b)), key=fold)


def compare(expected: list[str], found: list[str]) -> Confusion:
    """Split ``expected`` and ``found`` (distinct brands) into TP, FP and FN by folded name."""
    expected_keys = {fold(b) for b in expected}
    found_keys = {fold(b) for b in found}
    return Confusion(
        expected=expected,
        found=found,
        true_positives=[b for b in expected if fold(b) in found_keys],
        false_positives=[b for b in found if fold(b) not in expected_keys],
        false_negatives=[b for b in expected if fold(b) not in found_keys],
    )


def _confusion(case: Case, answer: Answer, ctx: MetricContext) -> tuple[Confusion, dict[str, Any]]:
    """The case's ``Confusion`` and its details, computed once per case (kept in ``ctx.memo``: the
    precision, recall, F1 and coverage metrics all read them). Treat the details as read-only."""
    cached = ctx.memo.get(_DETAILS_KEY)
    if cached is not None:
        return cached
    found = _detection(case, answer, ctx)
    confusion = compare(expected_brands(case), found.found)
    cached = ctx.memo[_DETAILS_KEY] = (confusion, _details(confusion, found))
    return cached


def _details(confusion: Confusion, found: Detection) -> dict[str, Any]:
    details = confusion.details(found.extractor)
    if found.occurrences:
        details["occurrences"] = found.occurrences
    return details


# --- applicability ------------------------------------------------------------------------------


def _expects_mentions(case: Case) -> bool:
    return case.expected_my_mentions is not None or case.expected_competitor_mentions is not None


def _expects_ranking(case: Case) -> bool:
    return case.expected_ranked_list is not None


def _lists_brands(case: Case) -> bool:
    return case.role_value(OWN) is not None or case.role_value(COMPETITORS) is not None


# --- the metrics --------------------------------------------------------------------------------


@metric("mention_precision", family="mentions", threshold=0.90, applies=_expects_mentions)
def mention_precision(case: Case, answer: Answer, ctx: MetricContext) -> Score:
    """Mention precision: TP / (TP + FP) over distinct brands found versus
    expected_my_mentions ∪ expected_competitor_mentions (1.0 when nothing is expected and nothing found,
    0.0 when nothing is found but something was expected).
    """
    confusion, details = _confusion(case, answer, ctx)
    return Score(confusion.precision, details)


@metric("mention_recall", family="mentions", threshold=0.80, applies=_expects_mentions)
def mention_recall(case: Case, answer: Answer, ctx: MetricContext) -> Score:
    """Mention recall: TP / (TP + FN) over distinct expected brands (1.0 when nothing is expected and
    nothing found, 0.0 when brands are found but none was expected).
    """
    confusion, details = _confusion(case, answer, ctx)
    return Score(confusion.recall, details)


@metric("mention_f1", family="mentions", threshold=0.85, applies=_expects_mentions)
def mention_f1(case: Case, answer: Answer, ctx: MetricContext) -> Score:
    """Mention F1: 2 × (precision × recall) / (precision + recall), 0.0 when both are 0."""
    confusion, shared = _confusion(case, answer, ctx)
    details = {**shared, "precision": confusion.precision, "recall": confusion.recall}
    return Score(f1(confusion.precision, confusion.recall), details)


@metric("rank_accuracy", family="mentions", threshold=0.85, applies=_expects_ranking)
def rank_accuracy(case: Case, answer: Answer, ctx: MetricContext) -> Score:
    """Rank accuracy: (positions i where expected_ranked_list[i] equals the i-th ranked brand) /
    len(expected_ranked_list), case-insensitive; an empty expected list scores 1.0 only when no brand
    is ranked.
    """
    found = _detection(case, answer, ctx)
    expected = case.expected_ranked_list or []
    return Score(
        rank_accuracy_of(expected, found.ranked),
        {"extractor": found.extractor, "expected": expected, "actual": found.ranked},
    )


@metric("brand_coverage", family="mentions", threshold=0.90, applies=_expects_mentions)
def brand_coverage(case: Case, answer: Answer, ctx: MetricContext) -> Score:
    """Brand coverage: (distinct expected brands found) / (distinct expected brands); 1.0 when nothing
    is expected. Unlike recall it ignores brands found but not expected.
    """
    confusion, details = _confusion(case, answer, ctx)
    value = ratio(len(confusion.true_positives), len(confusion.expected), agree=True)
    return Score(value, details)


@metric(
    "false_is_mine_rate",
    family="mentions",
    direction="lower",
    threshold=0.0,
    applies=_lists_brands,
)
def false_is_mine_rate(case: Case, answer: Answer, ctx: MetricContext) -> Score:
    """False is_mine rate: (mentions flagged is_mine whose brand is not one of the case's own brands, e.g.
    a competitor) / (total mentions); 0.0 when there are no mentions. Zero tolerance by default.
    """
    found = _detection(case, answer, ctx)
    if found.flags is None:
        raise MetricUnavailable("target reported a ranked_list but no mentions with is_mine flags")
    book = _book(case, ctx)
    wrong = [brand for brand, flagged in found.flags if flagged and not book.is_mine(brand)]
    value = len(wrong) / len(found.flags) if found.flags else 0.0
    return Score(
        value,
        {"extractor": found.extractor, "false_is_mine": wrong, "total_mentions": len(found.flags)},
    )
