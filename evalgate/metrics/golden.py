"""Golden-dataset metrics: specialist routing, keyword coverage, data-source usage, response quality
and their weighted composite.

Text matching here is case-insensitive and whole-word: a term matches when it occurs in the
case-folded text and is not glued to a neighbouring letter or digit (``sap`` does not match
``sapphire``, ``mes`` does not match ``times``). Whitespace inside a term matches any whitespace.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from evalgate.metrics.registry import MetricContext, MetricSkipped, MetricUnavailable, Score, metric
from evalgate.model import dialect_fields

if TYPE_CHECKING:
    from evalgate.model import Answer, Case

EXPECTED_AGENT, REFERENCE = "expected_agent", "reference_answer"
"""The roles (``DialectField.role``) of the agent a query should be routed to and of the verified answer."""

FAMILY = "golden"
COMPONENTS: tuple[str, ...] = (
    "specialist_match",
    "keyword_coverage",
    "data_source_match",
    "response_quality",
)
QUALITY_RANGE: tuple[float, float] = (1.0, 5.0)

# --- text helpers ---------------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def _term_pattern(term: str) -> re.Pattern[str] | None:
    """Whole-word pattern for ``term`` (already case-folded); None for a blank term."""
    words = term.split()
    if not words:
        return None
    body = r"\s+".join(re.escape(w) for w in words)
    head = r"(?<!\w)" if re.match(r"\w", words[0]) else ""
    tail = r"(?!\w)" if re.search(r"\w$", words[-1]) else ""
    return re.compile(head + body + tail)


def has_term(text: str, term: str) -> bool:
    """True when ``term`` occurs in ``text`` as whole words, ignoring case."""
    return _has_folded_term(text.casefold(), term)


def _has_folded_term(folded_text: str, term: str) -> bool:
    """``has_term`` on a text that is already case-folded (fold once, test many terms)."""
    pattern = _term_pattern(term.casefold())
    return pattern is not None and pattern.search(folded_text) is not None


def _unique(items: Iterable[str]) -> list[str]:
    """Non-blank items, stripped, first spelling kept, duplicates (ignoring case) dropped."""
    seen: set[str] = set()
    kept: list[str] = []
    for item in items:
        text = item.strip()
        if text:
            key = text.casefold()
            if key not in seen:
                seen.add(key)
                kept.append(text)
    return kept


def _require_output(answer: Answer) -> str:
    if answer.output is None:
        raise MetricUnavailable("the target returned no output text")
    return answer.output


_SEPARATORS = re.compile(r"[\W_]+")

# --- specialist_match -----------------------------------------------------------------------------


def _specialist_key(name: str) -> str:
    """``Procedure-Expert``, ``procedure_expert`` and ``ProcedureExpertAgent`` → ``procedureexpert``."""
    key = _SEPARATORS.sub("", name.casefold())
    return key[: -len("agent")] if key.endswith("agent") and len(key) > len("agent") else key


def _has_specialist(case: Case) -> bool:
    expected = case.role_value(EXPECTED_AGENT)
    return bool(expected and expected.strip())


@metric("specialist_match", family=FAMILY, threshold=0.85, applies=_has_specialist)
def specialist_match(case: Case, answer: Answer, ctx: MetricContext) -> Score:
    """1.0 when the answering agent (answer.agent_id) is the agent the case expects, else 0.0.

    Names compare ignoring case, separators (``-``, ``_``, spaces) and a trailing ``Agent``, so the
    seed's agent class name (``ProcedureExpertAgent``) matches its id (``procedure_expert``).
    """
    expected = (case.role_value(EXPECTED_AGENT) or "").strip()
    if not expected:
        raise MetricSkipped(f"the case has no {dialect_fields().role_field(EXPECTED_AGENT)}")
    if answer.agent_id is None or not answer.agent_id.strip():
        raise MetricUnavailable("the target reported no agent_id", {"expected": expected})
    matched = _specialist_key(answer.agent_id) == _specialist_key(expected)
    return Score(1.0 if matched else 0.0, {"expected": expected, "actual": answer.agent_id})


# --- keyword_coverage -----------------------------------------------------------------------------


def keyword_hits(text: str, keywords: Sequence[str]) -> dict[str, list[str]]:
    """Split ``keywords`` into found / missing in ``text``.

    A keyword is found when it occurs as a whole phrase, or — for a multi-word keyword — when every
    one of its words occurs somewhere in the text (those are also listed under ``scattered``).
    """
    found: list[str] = []
    missing: list[str] = []
    scattered: list[str] = []
    folded = text.casefold()
    for keyword in _unique(keywords):
        if _has_folded_term(folded, keyword):
            found.append(keyword)
        elif len(keyword.split()) > 1 and all(_has_folded_term(folded, word) for word in keyword.split()):
            found.append(keyword)
            scattered.append(keyword)
        else:
            missing.append(keyword)
    return {"found": found, "missing": missing, "scattered": scattered}


def _has_keywords(case: Case) -> bool:
    return bool(_unique(case.expected_keywords or []))


@metric("keyword_coverage", family=FAMILY, threshold=0.60, applies=_has_keywords)
def keyword_coverage(case: Case, answer: Answer, ctx: MetricContext) -> Score:
    """Fraction of expected_keywords found in the answer: found / len(expected_keywords), in [0, 1].

    Matching is case-insensitive and whole-word; a multi-word keyword also counts when all of its
    words appear anywhere in the answer. Duplicate keywords count once.
    """
    keywords = _unique(case.expected_keywords or [])
    if not keywords:
        raise MetricSkipped("the case has no expected_keywords")
    hits = keyword_hits(_require_output(answer), keywords)
    return Score(len(hits["found"]) / len(keywords), hits)


# --- data_source_match ----------------------------------------------------------------------------


def source_evidence(source: str, answer: Answer, indicators: dict[str, list[str]]) -> dict[str, Any]:
    """How ``source`` was judged used: ``{"used", "via", "indicator"}``.

    ``via`` is ``data_sources`` (the target reported it), ``output`` or ``citation`` (an indicator
    of that source occurs there), or None when unused.
    """
    key = source.casefold()
    if any(reported.strip().casefold() == key for reported in answer.data_sources or []):
        return {"used": True, "via": "data_sources", "indicator": None}
    vocabulary = next((words for name, words in indicators.items() if name.casefold() == key), [])
    places = [("output", answer.output or "")] + [("citation", cite) for cite in answer.sources or []]
    for via, text in places:
        for indicator in vocabulary:
            if has_term(text, indicator):
                return {"used": True, "via": via, "indicator": indicator}
    return {"used": False, "via": None, "indicator": None}


def _has_data_sources(case: Case) -> bool:
    return bool(_unique(case.expected_data_sources or []))


@metric("data_source_match", family=FAMILY, threshold=0.70, applies=_has_data_sources)
def data_source_match(case: Case, answer: Answer, ctx: MetricContext) -> Score:
    """Fraction of expected_data_sources the answer used: used / len(expected_data_sources), in [0, 1].

    A source counts as used when the target lists it in answer.data_sources, or when the answer text
    or one of its citations contains one of that source's indicators (options
    ``data_source_indicators``; defaults: the golden-dataset dialect's rag / sap / mes vocabularies).
    """
    expected = _unique(case.expected_data_sources or [])
    if not expected:
        raise MetricSkipped("the case has no expected_data_sources")
    if answer.output is None and answer.data_sources is None and answer.sources is None:
        raise MetricUnavailable("the target returned no output, citations or data_sources")
    indicators: dict[str, list[str]] = ctx.options.data_source_indicators
    per_source = {source: source_evidence(source, answer, indicators) for source in expected}
    used = [s for s, evidence in per_source.items() if evidence["used"]]
    missing = [s for s, evidence in per_source.items() if not evidence["used"]]
    return Score(len(used) / len(expected), {"sources": per_source, "used": used, "missing": missing})


# --- response_quality -----------------------------------------------------------------------------

LENGTH_FULL_CREDIT_WORDS = 60
"""Answers of at least this many words get the full length component."""
QUALITY_WEIGHTS: dict[str, float] = {"length": 0.3, "overlap": 0.5, "structure": 0.2}

_STOPWORDS = frozenset(
    re.split(
        r"\s+",
        """a an the and or but nor of to in on at by for with from into onto over under about as is are was
    were be been being it its this that these those there their they them he she his her you your we
    our us i me my not no yes do does did done can could should would may might must will shall than
    then so such also any all each every some more most less least very just only own same other
    which who whom whose what when where why how if else while per via within without between""",
    )
)
_WORD = re.compile(r"\w+")
_BULLET_LINE = re.compile(r"^\s*(?:[-*•▪◦]|\d{1,3}[.)])\s+\S", re.MULTILINE)
_NUMBERED_LINE = re.compile(r"^\s*\d{1,3}[.)]\s+\S", re.MULTILINE)
_UNIT = re.compile(
    r"(?:[$€£]\s?\d)|(?:\d(?:[.,]\d+)?\s?(?:%|°\s?[cf](?!\w)|(?:ppm|mm|µm|um|cm|km|kg|lbs?|nm|bar|psi|mpa|"
    r"kpa|rpm|hz|khz|kw|kwh|ms|secs?|seconds?|mins?|minutes?|h|hrs?|hours?|days?|weeks?|months?|pcs|"
    r"units|parts|eur|usd)(?!\w)))"
)
_SEQUENCE_WORDS = frozenset({"first", "firstly", "second", "secondly", "then", "next", "finally", "afterwards"})
_STEP_WORDS = frozenset({"step", "steps"})


def content_terms(text: str) -> list[str]:
    """Distinct case-folded words of ``text`` with at least 3 characters that are not stopwords."""
    return _unique(w for w in _WORD.findall(text.casefold()) if len(w) >= 3 and w not in _STOPWORDS)


def structure_indicators(text: str) -> dict[str, bool]:
    """The four structural indicators of the quality heuristic.

    list: ≥ 2 bullet or numbered lines; numbers: any digit; units: a number with a unit or currency
    (``12 mm``, ``3.5%``, ``€40``); steps: a numbered line, the word ``step(s)``, or ≥ 2 distinct
    sequence words (first, second, then, next, finally, …).
    """
    folded = text.casefold()
    return _structure(text, folded, set(_WORD.findall(folded)))


def _structure(text: str, folded: str, words: set[str]) -> dict[str, bool]:
    """``structure_indicators`` from the text, its case-folded form and the set of its folded words."""
    return {
        "list": len(_BULLET_LINE.findall(text)) >= 2,
        "numbers": any(map(str.isdigit, text)),
        "units": _UNIT.search(folded) is not None,
        "steps": bool(_NUMBERED_LINE.search(text)) or bool(words & _STEP_WORDS) or len(words & _SEQUENCE_WORDS) >= 2,
    }


def _reference_terms(case: Case) -> tuple[list[str], str | None]:
    """Content terms of the case's reference answer, else of expected_keywords, and which field it was."""
    candidates = (
        (case.role_value(REFERENCE) or "", dialect_fields().role_field(REFERENCE)),
        (" ".join(case.expected_keywords or []), "expected_keywords"),
    )
    for text, field in candidates:
        terms = content_terms(text)
        if terms:
            return terms, field
    return [], None


def heuristic_quality(case: Case, answer: Answer) -> Score:
    """Response quality on a 1–5 scale without a judge.

    ``quality = 1 + 4 · (0.3·L + 0.5·O + 0.2·S) / W`` where
    L = min(1, words / 60) (words = ``\\w+`` tokens of the answer);
    O = fraction of the reference's content terms (words of ≥ 3 characters, stopwords removed) that occur
    in the answer, the reference being the case's reference answer (a dialect field), else expected_keywords;
    S = (list + numbers + units + steps) / 4 over the structural indicators;
    W = 1, or 0.5 (O's weight dropped) when the case has no reference terms.
    Appending text to an answer (after a line break) never lowers its score.
    """
    text = _require_output(answer)
    folded = text.casefold()
    words = _WORD.findall(folded)
    present = set(words)
    length = min(1.0, len(words) / LENGTH_FULL_CREDIT_WORDS)
    structure = _structure(text, folded, present)
    structure_score = sum(structure.values()) / len(structure)
    reference, reference_field = _reference_terms(case)
    weighted = QUALITY_WEIGHTS["length"] * length + QUALITY_WEIGHTS["structure"] * structure_score
    weight = QUALITY_WEIGHTS["length"] + QUALITY_WEIGHTS["structure"]
    overlap: float | None = None
    if reference:
        found = [t for t in reference if t in present]
        overlap = len(found) / len(reference)
        weighted += QUALITY_WEIGHTS["overlap"] * overlap
        weight += QUALITY_WEIGHTS["overlap"]
    value = QUALITY_RANGE[0] + (QUALITY_RANGE[1] - QUALITY_RANGE[0]) * weighted / weight
    details: dict[str, Any] = {
        "method": "heuristic",
        "words": len(words),
        "length_score": round(length, 4),
        "overlap_score": None if overlap is None else round(overlap, 4),
        "overlap_reference": reference_field,
        "overlap_missing": [t for t in reference if t not in present][:20],
        "structure": structure,
        "structure_score": structure_score,
    }
    return Score(min(QUALITY_RANGE[1], max(QUALITY_RANGE[0], value)), details)


def _is_golden_case(case: Case) -> bool:
    return bool(case.role_value(EXPECTED_AGENT) or case.role_value(REFERENCE))


async def _judged_quality(case: Case, answer: Answer, ctx: MetricContext) -> Score:
    # the judge cache keys replies by repeat index (JudgeClient.score(metric, case, answer, *, repeat))
    rubric = getattr(ctx.options, "response_quality_rubric", None)
    if rubric:
        scored = await ctx.judge.score("response_quality", case, answer, repeat=ctx.repeat, rubric=rubric)
    else:
        scored = await ctx.judge.score("response_quality", case, answer, repeat=ctx.repeat)
    value = getattr(scored, "value", None)
    low, high = QUALITY_RANGE
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise MetricUnavailable(f"the judge returned {value!r} for response_quality, not a number in {low:g}–{high:g}",
                                {"judge_failure": "unreadable"})
    return Score(float(value), {**dict(getattr(scored, "details", None) or {}), "method": "judge"})


@metric(
    "response_quality",
    family=FAMILY,
    threshold=3.5,
    applies=_is_golden_case,
    value_range=QUALITY_RANGE,
    uses_judge=True,
)
async def response_quality(case: Case, answer: Answer, ctx: MetricContext) -> Score:
    """Answer quality on a 1–5 scale: the judge's rubric score, or without a judge — none configured, or one
    that could not score this answer — a heuristic ``1 + 4·(0.3·length + 0.5·summary-overlap + 0.2·structure)``
    (see ``heuristic_quality``).

    details.method says which one produced the value: ``judge`` or ``heuristic``; when the judge was
    configured but could not score the answer, details.judge_unavailable says why (and the gate treats the
    verdict as missing: the case is errored).
    """
    if ctx.judge is None:
        return heuristic_quality(case, answer)
    try:
        return await _judged_quality(case, answer, ctx)
    except MetricUnavailable as exc:
        if answer.output is None:
            raise
        reason = str(exc)
        fallback = heuristic_quality(case, answer)
        ctx.judge_fallbacks["response_quality"] = reason
        return Score(fallback.value, {**fallback.details, "judge_unavailable": reason,
                                      "judge_failure": exc.details.get("judge_failure"),
                                      "judge_details": {k: v for k, v in exc.details.items() if k != "method"}})


# --- composite ------------------------------------------------------------------------------------


@metric(
    "composite",
    family=FAMILY,
    threshold=0.75,
    applies=_is_golden_case,
    depends_on=COMPONENTS,
)
def composite(case: Case, answer: Answer, ctx: MetricContext) -> Score:
    """Weighted composite in [0, 1]: 0.30·specialist_match + 0.25·keyword_coverage +
    0.20·data_source_match + 0.25·(response_quality / 5).

    Weights come from options ``composite_weights``; a component that did not produce a value makes
    the composite unavailable; a response_quality scored by the heuristic because the judge failed is
    used, and details.judge_unavailable says so.
    """
    missing = [name for name in COMPONENTS if ctx.values.get(name) is None]
    if missing:
        raise MetricUnavailable(f"composite needs {', '.join(missing)}, which produced no value", {"missing": missing})
    weights = ctx.options.composite_weights
    fallbacks = {name: ctx.judge_fallbacks[name] for name in COMPONENTS if name in ctx.judge_fallbacks}
    normalised = {name: float(ctx.values[name]) for name in COMPONENTS}
    normalised["response_quality"] /= QUALITY_RANGE[1]
    contributions = {name: getattr(weights, name) * normalised[name] for name in COMPONENTS}
    value = sum(contributions.values())
    details: dict[str, Any] = {
        "components": normalised,
        "weights": {name: getattr(weights, name) for name in COMPONENTS},
        "contributions": {name: round(c, 6) for name, c in contributions.items()},
    }
    if fallbacks:  # a component came from the heuristic because the judge could not score it
        details["judge_unavailable"] = "; ".join(f"{name} scored by the heuristic: {why}" for name, why in fallbacks.items())
    return Score(min(1.0, max(0.0, value)), details)
