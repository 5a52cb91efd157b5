"""An artifact's results.json checked against the results schema before anything is rendered from it.

In publish mode (``github.relay``) results.json comes from a pull request's artifact: the fork that
produced it controls every byte. ``prune`` walks the document along ``evalgate/schemas/results.schema.json``
and removes every value whose type, enum, range or pattern the schema does not allow — a number given as
a string with newlines, a list where an object belongs — with one warning each (the first
``MAX_WARNINGS`` are kept); nothing else is changed. The renderers read every field with a default, so a
removed field shows as missing, never as a traceback.

The schema features read are the ones the results schema uses: ``type`` (one or a list), ``$ref`` to
``#/$defs/…``, ``properties``, ``additionalProperties`` (a schema), ``items``, ``enum``, ``const``,
``minimum``/``maximum`` and their exclusive forms, ``minLength``, ``pattern``, ``oneOf``/``anyOf`` (the
value must conform to one branch) and ``allOf`` (each member applies; ``if``/``then`` are not read).
jsonschema itself is a test dependency only: the test suite checks real documents with it.
"""

from __future__ import annotations

import functools
import json
import math
import re
from typing import Any

from evalgate.store.results_json import SCHEMA_PATH

MAX_WARNINGS = 20


@functools.cache
def results_schema() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return data


def prune(document: dict[str, Any]) -> list[str]:
    """Remove from ``document`` (in place) every value the results schema does not allow; returns one
    warning per removed value (``summary.pass_rate: a string where the schema wants number``)."""
    schema = results_schema()
    warnings: list[str] = []
    _Pruner(schema, warnings).walk(document, schema, "")
    return warnings


def prune_head(head: dict[str, Any]) -> list[str]:
    """``prune`` for a document's fields other than ``results`` (read apart from its records)."""
    schema = results_schema()
    warnings: list[str] = []
    _Pruner(schema, warnings).walk(head, {**schema, "properties": {
        k: v for k, v in (schema.get("properties") or {}).items() if k != "results"}}, "")
    return warnings


def prune_record(record: Any, position: int, warnings: list[str]) -> bool:
    """``prune`` for ``results[position]`` alone (in place); False when the record itself must be left out.
    The same warnings, in the same words, as ``prune`` of the whole document gives."""
    schema = results_schema()
    pruner = _Pruner(schema, warnings)
    items = pruner.resolve((schema.get("properties") or {}).get("results") or {}).get("items")
    return not isinstance(items, dict) or pruner.walk(record, items, f"results[{position}]")


class _Pruner:
    def __init__(self, root: dict[str, Any], warnings: list[str]) -> None:
        self.root = root
        self.warnings = warnings

    def resolve(self, schema: Any) -> dict[str, Any]:
        while isinstance(schema, dict) and "$ref" in schema:
            ref = str(schema["$ref"])
            target: Any = self.root
            for part in ref.removeprefix("#/").split("/"):
                target = target.get(part, {}) if isinstance(target, dict) else {}
            schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        return schema if isinstance(schema, dict) else {}

    def problem(self, value: Any, schema: Any) -> str | None:
        """Why ``value`` itself (not its members) does not fit ``schema``, or None."""
        schema = self.resolve(schema)
        branches = schema.get("oneOf") or schema.get("anyOf")
        if branches and not any(self.conforms(value, branch) for branch in branches):
            return f"{_kind(value)} matching none of the allowed forms"
        for member in schema.get("allOf") or []:
            found = self.problem(value, member)
            if found:
                return found
        kinds = schema.get("type")
        if kinds is not None:
            allowed = [kinds] if isinstance(kinds, str) else list(kinds)
            if not any(_is(value, kind) for kind in allowed):
                return f"{_kind(value)} where the schema wants {' or '.join(allowed)}"
        if "const" in schema and value != schema["const"]:
            return f"{value!r:.40} instead of {schema['const']!r}"
        if "enum" in schema and value not in schema["enum"]:
            return f"{_kind(value)} {value!r:.40} not one of {', '.join(map(repr, schema['enum'][:6]))}"
        if _is(value, "number"):
            for key, fails in (("minimum", lambda v, b: v < b), ("maximum", lambda v, b: v > b),
                               ("exclusiveMinimum", lambda v, b: v <= b), ("exclusiveMaximum", lambda v, b: v >= b)):
                bound = schema.get(key)
                if isinstance(bound, int | float) and not math.isnan(value) and fails(value, bound):
                    return f"{value!r} outside the schema's {key} {bound}"
        if isinstance(value, str):
            if len(value) < int(schema.get("minLength", 0)):
                return "a string shorter than allowed"
            pattern = schema.get("pattern")
            if pattern and not re.search(pattern, value):
                return f"a string not matching {pattern}"
        return None

    def conforms(self, value: Any, schema: Any) -> bool:
        """``value`` and all its members fit ``schema`` (nothing would be removed)."""
        probe: list[str] = []
        copy = json.loads(json.dumps(value)) if isinstance(value, dict | list) else value
        return self.problem(value, schema) is None and (
            not isinstance(copy, dict | list) or (_Pruner(self.root, probe).walk(copy, schema, "") or not probe))

    def walk(self, value: Any, schema: Any, where: str) -> bool:
        """Prune the members of ``value`` along ``schema``; False when ``value`` itself does not fit."""
        schema = self.resolve(schema)
        found = self.problem(value, schema)
        if found is not None:
            self.warn(where or "the document", found)
            return False
        branches = schema.get("oneOf") or schema.get("anyOf")
        if branches:  # conforms to a branch as a whole: nothing inside to remove
            return True
        for member in schema.get("allOf") or []:
            self.walk(value, member, where)
        if isinstance(value, dict):
            properties = schema.get("properties") or {}
            extra = schema.get("additionalProperties")
            for key in list(value):
                sub = properties.get(key, extra if isinstance(extra, dict) else None)
                if sub is not None and not self.walk(value[key], sub, f"{where}.{key}" if where else str(key)):
                    del value[key]
        elif isinstance(value, list) and isinstance(schema.get("items"), dict):
            kept = [item for position, item in enumerate(value)
                    if self.walk(item, schema["items"], f"{where}[{position}]")]
            value[:] = kept
        return True

    def warn(self, where: str, problem: str) -> None:
        self.warnings.append(f"{where}: {problem}; left out")


def _is(value: Any, kind: str) -> bool:
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer())
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    return True


def _kind(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
            dict: "an object", type(None): "null"}.get(type(value), type(value).__name__)
