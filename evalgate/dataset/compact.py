"""Validated cases as compact bytes, so a large dataset is parsed and validated once.

``scan`` validates every case; for a dataset too large to keep in memory it also writes each case,
packed, to a temporary file, and the run reads the cases back from there instead of parsing and
validating the files a second time (unpacking costs a fraction of validating).

A packed case is ``marshal`` data of the case's field values (nested rules and mentions as their own
field values; enums as their values) with the sets of fields given explicitly. ``marshal`` takes
exact builtin types only, so a case that packs unpacks into an equal ``Case`` whose values have the
same types and order; a case holding anything else (say a YAML date in an extra key) does not pack,
and the caller reads the files again instead. A set in an extra key packs but may come back in
another iteration order, so sets do not pack either.
"""

from __future__ import annotations

import marshal
import os
from collections.abc import Iterator
from operator import itemgetter
from typing import IO, Any

from evalgate.model import Case, Mention, RiskLevel, RuleCheck, trusted

CASE_FIELDS = tuple(Case.model_fields)
RULE_FIELDS = tuple(RuleCheck.model_fields)
MENTION_FIELDS = tuple(Mention.model_fields)
_RISK = CASE_FIELDS.index("risk_level")
_RULES = CASE_FIELDS.index("rules")
_MENTIONS = CASE_FIELDS.index("mentions")
_SIZE = 4
_case_values = itemgetter(*CASE_FIELDS)
_rule_values = itemgetter(*RULE_FIELDS)
_mention_values = itemgetter(*MENTION_FIELDS)
_RISK_TEXT = {level: level.value for level in RiskLevel}
_RISK_LEVEL = {level.value: level for level in RiskLevel}
"""Bytes of the length prefix of each packed case in a file (little-endian)."""


def pack_case(case: Case) -> bytes | None:
    """``case`` as bytes, or None when it holds a value that would not come back equal."""
    values = list(_case_values(vars(case)))
    values[_RISK] = _RISK_TEXT[case.risk_level]
    if case.rules:
        values[_RULES] = tuple((tuple(rule.__pydantic_fields_set__), _rule_values(vars(rule)))
                               for rule in case.rules)
    else:
        values[_RULES] = ()
    if case.mentions is not None:
        values[_MENTIONS] = tuple((tuple(mention.__pydantic_fields_set__), _mention_values(vars(mention)))
                                  for mention in case.mentions)
    extra = case.__pydantic_extra__
    plain = (tuple(case.__pydantic_fields_set__), tuple(values), extra)
    if _has_set(case.metadata) or (extra and _has_set(extra)):
        return None
    try:
        return marshal.dumps(plain)
    except ValueError:
        return None


def unpack_case(data: bytes) -> Case:
    """The ``Case`` that ``pack_case`` packed."""
    fields_set, values, extra = marshal.loads(data)
    fields = dict(zip(CASE_FIELDS, values, strict=True))
    fields["risk_level"] = _RISK_LEVEL[fields["risk_level"]]
    fields["rules"] = [trusted(RuleCheck, dict(zip(RULE_FIELDS, rule, strict=True)), set(given))
                       for given, rule in fields["rules"]]
    if fields["mentions"] is not None:
        fields["mentions"] = [trusted(Mention, dict(zip(MENTION_FIELDS, mention, strict=True)), set(given))
                              for given, mention in fields["mentions"]]
    case = trusted(Case, fields, set(fields_set))
    object.__setattr__(case, "__pydantic_extra__", extra)
    return case


def _has_set(value: Any) -> bool:
    """True when ``value`` is or holds a set or frozenset (at any depth)."""
    kind = type(value)
    if kind is dict:
        return any(_has_set(item) for item in value.values())
    if kind is list or kind is tuple:
        return any(_has_set(item) for item in value)
    return kind is set or kind is frozenset


def write_packed(out: IO[bytes], data: bytes) -> None:
    out.write(len(data).to_bytes(_SIZE, "little"))
    out.write(data)


def read_packed(fd: int, chunk: int = 1 << 20) -> Iterator[Case]:
    """Every case packed into the file open as ``fd``, from its start, read with ``os.pread`` (so
    several readers may read one file at once)."""
    offset = 0
    buffer = b""
    start = 0
    while True:
        if len(buffer) - start < _SIZE:
            more = os.pread(fd, chunk, offset)
            if not more:
                return
            buffer, start, offset = buffer[start:] + more, 0, offset + len(more)
            continue
        size = int.from_bytes(buffer[start:start + _SIZE], "little")
        end = start + _SIZE + size
        if len(buffer) < end:
            more = os.pread(fd, max(chunk, end - len(buffer)), offset)
            if not more:
                return
            buffer, start, offset = buffer[start:] + more, 0, offset + len(more)
            continue
        yield unpack_case(buffer[start + _SIZE:end])
        start = end
