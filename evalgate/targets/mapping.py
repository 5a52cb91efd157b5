"""Dotted-path response mapping: where in a target's JSON reply each answer field is found.

A path is dot-separated keys and list indexes: ``data.answer``, ``choices.0.message.content``,
``items[-1]`` (negative indexes count from the end);
``[*]`` or ``*`` maps over a list (``tool_calls[*].function.name``); ``a|b`` tries ``a`` then ``b``
(the first path that exists wins). ``settings.target_response_map`` maps answer fields to paths and
overrides ``DEFAULT_RESPONSE_MAP`` field by field; an empty path switches a field off.

The defaults read the in-house frameworks' replies (``evalgate.dialects``) without configuration: the
black-box agent's ``POST /api/agent/chat`` reply (``response``, ``agent``, ``tools_used``,
``agents_called``, ``debug_context``, ``sources``, ``usage``), the golden-dataset agent's ``POST
{api-url}/chat`` reply (``response``, ``agent_id`` — also under ``metadata``, ``debug`` or ``trace`` —,
``citations``, ``data_sources``) and a brand-mention extractor's reply (``mentions``: objects with ``brand``, ``is_mine``,
``rank``; ``ranked_list``).

Values are coerced to the answer's types: text fields take strings (objects become JSON text); list
fields take lists (a single value becomes a one-item list); a list item that is an object becomes its
``title``/``name``/``id``/``url``/``source`` (sources, agents, tools) or its ``content``/``text``
(context), else JSON text; token counts must be integers ≥ 0; ``mentions`` items are objects with a
``brand`` (or ``name``) text, an ``is_mine`` bool and an optional integer ``rank`` (a bare string is a brand
not flagged as mine).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evalgate.errors import UserError
from evalgate.safety.redact import redact_mapping

DEFAULT_RESPONSE_MAP: dict[str, str] = {
    "output": "response|answer|output|text|content|choices.0.message.content|message",
    "sources": "sources|citations",
    "agents_called": "agents_called",
    "tools_used": "tools_used|tool_calls[*].function.name|tool_calls[*].name",
    "agent_id": "agent_id|agent|specialist|metadata.agent_id|debug.agent_id|trace.agent_id",
    "data_sources": "data_sources",
    "debug_context": "debug_context|retrieval_context|context",
    "mentions": "mentions",
    "ranked_list": "ranked_list",
    "num_tokens": "usage.total_tokens|num_tokens",
    "prompt_tokens": "usage.prompt_tokens|usage.input_tokens",
    "completion_tokens": "usage.completion_tokens|usage.output_tokens",
}
TEXT_FIELDS = frozenset({"output", "agent_id"})
LIST_FIELDS = frozenset({"sources", "agents_called", "tools_used", "data_sources", "debug_context", "ranked_list"})
INT_FIELDS = frozenset({"num_tokens", "prompt_tokens", "completion_tokens"})
MENTION_FIELDS = frozenset({"mentions"})
FIELDS = TEXT_FIELDS | LIST_FIELDS | INT_FIELDS | MENTION_FIELDS
MENTION_BRAND_KEYS = ("brand", "name", "normalized_name")
NAME_KEYS = ("title", "name", "id", "url", "source")
TEXT_KEYS = ("content", "text", "page_content", "chunk")
_SEGMENT = re.compile(r"[^.\[\]]+|\[\*\]|\[-?\d+\]")
_INDEX = re.compile(r"-?\d+")
WILDCARD = "*"


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


@dataclass(frozen=True, slots=True)
class Path:
    text: str
    segments: tuple[str | int, ...]


def parse_path(text: str, where: str = "target_response_map") -> Path:
    """``"a.b[0].c"`` → segments ``("a", "b", 0, "c")``; ``[*]``/``*`` is the wildcard."""
    stripped = text.strip()
    if not stripped:
        raise UserError("empty path", where=where)
    raw = _SEGMENT.findall(stripped)
    if "".join(raw) != stripped.replace(".", ""):
        raise UserError(f"invalid path {text!r}: use dots, [n] indexes and [*]", where=where)
    segments: list[str | int] = []
    for part in raw:
        if part == "[*]" or part == WILDCARD:
            segments.append(WILDCARD)
        elif part.startswith("["):
            segments.append(int(part[1:-1]))
        elif _INDEX.fullmatch(part):
            segments.append(int(part))
        else:
            segments.append(part)
    return Path(stripped, tuple(segments))


def parse_alternatives(text: str, where: str = "target_response_map") -> tuple[Path, ...]:
    """``"a|b.c"`` → the alternatives in order; an empty text means "never"."""
    return tuple(parse_path(part, where) for part in text.split("|") if part.strip())


def extract(data: Any, path: Path) -> Any:
    """The value at ``path`` in ``data``, or ``MISSING``."""
    return _walk(data, path.segments)


def _walk(node: Any, segments: tuple[str | int, ...]) -> Any:
    if not segments:
        return node
    head, rest = segments[0], segments[1:]
    if head == WILDCARD:
        if not isinstance(node, list):
            return MISSING
        values = [_walk(item, rest) for item in node]
        return [v for v in values if v is not MISSING]
    if isinstance(head, int):
        if isinstance(node, list) and -len(node) <= head < len(node):
            return _walk(node[head], rest)
        if isinstance(node, Mapping) and str(head) in node:
            return _walk(node[str(head)], rest)
        return MISSING
    if isinstance(node, Mapping) and head in node:
        return _walk(node[head], rest)
    return MISSING


def first_present(data: Any, alternatives: tuple[Path, ...]) -> Any:
    """The value of the first alternative that exists and is not null."""
    for path in alternatives:
        value = extract(data, path)
        if value is not MISSING and value is not None:
            return value
    return MISSING


@dataclass(frozen=True, slots=True)
class ResponseMap:
    """Answer field → alternative paths, validated once at startup."""

    fields: dict[str, tuple[Path, ...]]

    @classmethod
    def build(cls, overrides: Mapping[str, str] | None = None, where: str = "target_response_map") -> ResponseMap:
        merged = dict(DEFAULT_RESPONSE_MAP)
        for name, text in (overrides or {}).items():
            if name not in FIELDS:
                raise UserError(f"unknown answer field {name!r}; known: {', '.join(sorted(FIELDS))}", where=where)
            if not isinstance(text, str):
                raise UserError(f"{name}: the path must be a string", where=where)
            merged[name] = text
        return cls({name: parse_alternatives(text, f"{where}.{name}") for name, text in merged.items()})

    def apply(self, data: Any) -> dict[str, Any]:
        """The answer fields found in ``data``, coerced, with known secrets masked (a target that echoes a
        key must not carry it into results or judge prompts); raises ``ValueError`` naming a bad value."""
        found: dict[str, Any] = {}
        for name, alternatives in self.fields.items():
            value = first_present(data, alternatives)
            if value is not MISSING:
                found[name] = redact_mapping(coerce(name, value))
        return found

    def describe(self) -> dict[str, str]:
        return {name: "|".join(p.text for p in paths) for name, paths in self.fields.items()}


def coerce(field: str, value: Any) -> Any:
    """``value`` converted to the type of answer field ``field`` (see the module docstring)."""
    if field in TEXT_FIELDS:
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if field in LIST_FIELDS:
        items = value if isinstance(value, list) else [value]
        keys = TEXT_KEYS if field == "debug_context" else NAME_KEYS
        return [_item_text(item, keys) for item in items if item is not None]
    if field in MENTION_FIELDS:
        items = value if isinstance(value, list) else [value]
        return [_mention(item) for item in items if item is not None]
    if field in INT_FIELDS:
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 or int(value) != value:
            raise ValueError(f"{field} must be an integer ≥ 0, got {value!r}")
        return int(value)
    return value


def _mention(item: Any) -> dict[str, Any]:
    """One reported brand mention as ``{"brand", "is_mine", "rank"}``: an object with ``brand`` (or ``name`` /
    ``normalized_name``), ``is_mine`` (true/false) and an optional integer ``rank``; other keys are ignored.
    A bare string is a brand without an ``is_mine`` flag, which counts as not mine."""
    if isinstance(item, str):
        return {"brand": item, "is_mine": False}
    if not isinstance(item, Mapping):
        raise ValueError(f"mentions: each mention must be an object with 'brand' and 'is_mine', got {item!r}")
    brand = next((item[key] for key in MENTION_BRAND_KEYS if isinstance(item.get(key), str)), None)
    if brand is None:
        raise ValueError(f"mentions: a mention has no 'brand' text: {item!r}")
    is_mine = item.get("is_mine", False)
    if not isinstance(is_mine, bool):
        raise ValueError(f"mentions: 'is_mine' must be true or false, got {is_mine!r}")
    mention: dict[str, Any] = {"brand": brand, "is_mine": is_mine}
    rank = item.get("rank")
    if rank is not None:
        if isinstance(rank, bool) or not isinstance(rank, int | float) or int(rank) != rank:
            raise ValueError(f"mentions: 'rank' must be an integer, got {rank!r}")
        mention["rank"] = int(rank)
    return mention


def _item_text(item: Any, keys: tuple[str, ...]) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, Mapping):
        for key in keys:
            if isinstance(item.get(key), str | int | float) and not isinstance(item.get(key), bool):
                return str(item[key])
    return json.dumps(item, ensure_ascii=False, sort_keys=True)
