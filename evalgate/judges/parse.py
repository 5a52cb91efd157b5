"""Reading a judge's reply: the last JSON object in it that validates against the verdict model.

Judges are asked for ``{"reasoning": ..., <scores or verdict lists>}`` with the reasoning first and the
score last. A reply may wrap the object in a code fence, put prose around it, or (thinking aloud) write
several objects: the parser takes the final one that validates ("the final verdict"). Inside one object a
repeated key keeps its last value, as ``json.loads`` does. A raw control character (a line break) inside a
string is accepted: llama.cpp's JSON grammar lets a small model write one, and the verdict is no less clear.

Prompt-only replies (no structured output) may also state a single score in prose instead of JSON. With
``words=True`` and a verdict that is one ``score`` (plus reasoning), a reply holding no usable JSON object is
read from its text when it states exactly one score value (``score: 4``, ``Rating: 0.8``, ``I rate it 4 out
of 5``) and that value lies on the verdict's scale; a stated denominator must be the scale's top (``4/5`` on
1–5, never ``8/10`` on 0–1). Two different values, a value off the scale, a number that runs on
(``4.5.1``) or a ``"score"`` key (a broken JSON verdict, perhaps cut short inside its number) leave the reply
unreadable: nothing is rescaled or clamped.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)
RAW_KEPT_CHARS = 2000
"""How much of an unreadable reply is kept in a metric's details."""


class VerdictError(ValueError):
    """The reply holds no JSON object that matches the verdict schema; ``problem`` says why."""

    def __init__(self, problem: str, raw: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.raw = raw


def json_objects(text: str) -> list[dict[str, Any]]:
    """Every top-level JSON object in ``text``, in order (objects nested in an earlier one are skipped)."""
    decoder = json.JSONDecoder(strict=False)  # a raw newline inside a string: llama.cpp's grammar lets
    found: list[dict[str, Any]] = []
    position = text.find("{")
    while position != -1:
        try:
            value, end = decoder.raw_decode(text, position)
        except json.JSONDecodeError:
            position = text.find("{", position + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
        position = text.find("{", end)
    return found


def parse_verdict(text: str, model: type[M], *, words: bool = False) -> M:
    """The last JSON object in ``text`` that validates as ``model``; with ``words``, else a single score
    stated in the text (module doc); ``VerdictError`` otherwise."""
    text = text or ""
    objects = json_objects(text)
    problem = "the reply contains no JSON object"
    first_error: str | None = None
    for candidate in reversed(objects):
        try:
            return model.model_validate(candidate)
        except ValidationError as exc:
            first_error = first_error or _one_line(exc)
    if first_error is not None:
        problem = f"the JSON does not match the verdict schema: {first_error}"
    if words:
        verdict = verdict_in_words(text, model)
        if verdict is not None:
            return verdict
    raise VerdictError(problem, text)


_SCORE_WORDS = re.compile(
    r"\b(?:score|rating|rated|rate|grade)\b[^0-9\n]{0,24}?(?<![\w.])(-?\d+(?:\.\d+)?)(?!\w|\.\d)"
    r"(?:\s*(?:/|out\s+of)\s*(\d+(?:\.\d+)?))?",
    re.IGNORECASE,
)


def score_bounds(model: type[BaseModel]) -> tuple[float, float] | None:
    """(low, high) of a verdict that is one bounded ``score`` besides ``reasoning``; None for any other."""
    fields = model.model_fields
    if set(fields) != {"reasoning", "score"}:
        return None
    low = high = None
    for rule in fields["score"].metadata:
        low = getattr(rule, "ge", low)
        high = getattr(rule, "le", high)
    return (float(low), float(high)) if low is not None and high is not None else None


def score_in_words(text: str, bounds: tuple[float, float]) -> float | None:
    """The one score value ``text`` states on the scale ``bounds`` (module doc), else None."""
    low, high = bounds
    values = set()
    for match in _SCORE_WORDS.finditer(text):
        value, denominator = float(match.group(1)), match.group(2)
        if denominator is not None and float(denominator) != high:
            return None  # a score on another scale: never rescaled
        values.add(value)
    if len(values) != 1:
        return None
    value = values.pop()
    return value if low <= value <= high else None


def verdict_in_words(text: str, model: type[M]) -> M | None:
    """``model`` from a lone score stated in ``text`` (module doc; the whole text becomes the reasoning), or
    None when ``model`` is not a one-score verdict, the text states no single score on its scale, or it holds
    a ``"score"`` key (a JSON verdict that broke, e.g. cut short: its number may be cut too)."""
    bounds = score_bounds(model)
    if bounds is None or '"score"' in text:
        return None
    value = score_in_words(text, bounds)
    if value is None:
        return None
    return model.model_validate({"reasoning": text.strip(), "score": value})


def _one_line(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"]) or "reply"
    return f"{where}: {error['msg']}"


def schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s JSON schema with every ``$ref`` inlined (some servers do not resolve references).

    A fresh copy each call (callers may extend it) of a schema generated once per model class."""
    return json.loads(_schema_text(model))


@lru_cache(maxsize=64)
def _schema_text(model: type[BaseModel]) -> str:
    schema = model.model_json_schema()
    definitions = schema.pop("$defs", {})
    return json.dumps(_inline(schema, definitions))


def _inline(node: Any, definitions: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        if "$ref" in node:
            name = str(node["$ref"]).rsplit("/", 1)[-1]
            return _inline(definitions[name], definitions)
        return {key: _inline(value, definitions) for key, value in node.items()}
    if isinstance(node, list):
        return [_inline(item, definitions) for item in node]
    return node


def kept_raw(text: str) -> str:
    """The reply as stored in details: at most ``RAW_KEPT_CHARS`` characters."""
    return text if len(text) <= RAW_KEPT_CHARS else text[:RAW_KEPT_CHARS] + f"… [{len(text) - RAW_KEPT_CHARS} more]"
