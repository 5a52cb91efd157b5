"""Reading a judge's reply: the last JSON object in it that validates against the verdict model.

Judges are asked for ``{"reasoning": ..., <scores or verdict lists>}`` with the reasoning first and the
score last. A reply may wrap the object in a code fence, put prose around it, or (thinking aloud) write
several objects: the parser takes the final one that validates ("the final verdict"). Inside one object a
repeated key keeps its last value, as ``json.loads`` does.
"""

from __future__ import annotations

import json
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
    decoder = json.JSONDecoder()
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


def parse_verdict(text: str, model: type[M]) -> M:
    """The last JSON object in ``text`` that validates as ``model``; ``VerdictError`` otherwise."""
    objects = json_objects(text or "")
    if not objects:
        raise VerdictError("the reply contains no JSON object", text or "")
    first_error: str | None = None
    for candidate in reversed(objects):
        try:
            return model.model_validate(candidate)
        except ValidationError as exc:
            first_error = first_error or _one_line(exc)
    raise VerdictError(f"the JSON does not match the verdict schema: {first_error}", text)


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
