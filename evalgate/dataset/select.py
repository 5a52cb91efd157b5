"""Choose which loaded cases run.

Order of application (the result always keeps dataset order):

1. ``case_ids`` — only the named cases; an unknown id is a UserError. When set, ``first_n`` is ignored
   (as a dialect's ``CASE_IDS`` overrides its ``FIRST_N``).
2. ``categories`` — a case matches when its category is any of the listed ones (case-insensitive).
3. ``tags`` — a case matches when it carries any of the listed tags (case-insensitive).
4. ``shard`` ``(i, n)`` — keeps the cases with ``int(sha1(id)[:8], 16) % n == i - 1``; a case's shard
   depends only on its id, so shards stay stable as the dataset grows and the n shards partition it.
5. ``first_n`` — the first N of what is left (a size cap for smoke runs).

A selection that leaves no case is a UserError naming the filters that removed them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, TypeVar

from evalgate.config.suite import did_you_mean
from evalgate.errors import UserError


class Selectable(Protocol):
    """What selection reads of a case: a ``Case``, or a light ``dataset.stream.CaseRef``."""

    @property
    def id(self) -> str: ...
    @property
    def category(self) -> str | None: ...
    @property
    def tags(self) -> list[str]: ...


S = TypeVar("S", bound=Selectable)

MAX_LISTED_UNKNOWN = 10


def split_list(value: str | Iterable[str] | None) -> list[str] | None:
    """``"a, b,,c"`` or ``["a", "b,c"]`` → ``["a", "b", "c"]``; None or nothing → None."""
    if value is None:
        return None
    parts = [value] if isinstance(value, str) else list(value)
    items = [item.strip() for part in parts for item in str(part).split(",") if item.strip()]
    return items or None


def parse_shard(text: str, where: str = "shard") -> tuple[int, int]:
    """``"2/4"`` → ``(2, 4)``; the index is 1-based and must lie in 1..n."""
    head, sep, tail = text.strip().partition("/")
    try:
        if not sep:
            raise ValueError
        index, count = int(head), int(tail)
    except ValueError:
        raise UserError(f"expected 'i/n' such as '1/4' (got {text!r})", where=where) from None
    return check_shard((index, count), where)


def check_shard(shard: tuple[int, int], where: str = "shard") -> tuple[int, int]:
    index, count = shard
    if count < 1 or not 1 <= index <= count:
        raise UserError(f"shard {index}/{count} is out of range: need 1 ≤ i ≤ n", where=where)
    return index, count


def shard_of(case_id: str, count: int) -> int:
    """The 1-based shard of ``case_id`` among ``count``: ``int(sha1(id)[:8], 16) % count + 1``."""
    digest = hashlib.sha1(case_id.encode("utf-8", "surrogatepass")).hexdigest()
    return int(digest[:8], 16) % count + 1


def _fold(values: Iterable[str]) -> set[str]:
    return {value.casefold() for value in values}


def _pick_ids(cases: list[S], case_ids: list[str]) -> list[S]:
    """The cases named in ``case_ids`` (dataset order); unknown ids raise with close matches."""
    wanted = set(case_ids)
    known = {case.id for case in cases}
    unknown = [case_id for case_id in dict.fromkeys(case_ids) if case_id not in known]
    if unknown:
        shown = [f"{case_id!r}{did_you_mean(case_id, known)}" for case_id in unknown[:MAX_LISTED_UNKNOWN]]
        more = len(unknown) - len(shown)
        label = "case id" if len(unknown) == 1 else "case ids"
        tail = f" and {more} more" if more else ""
        raise UserError(f"unknown {label} {', '.join(shown)}{tail}", where="case_ids")
    return [case for case in cases if case.id in wanted]


def _filters(
    categories: list[str] | None, tags: list[str] | None, shard: tuple[int, int] | None
) -> list[tuple[str, Callable[[Selectable], bool]]]:
    """(label, predicate) for each active filter, in application order."""
    steps: list[tuple[str, Callable[[Selectable], bool]]] = []
    if categories:
        wanted_categories = _fold(categories)
        steps.append(
            (
                f"categories {', '.join(categories)}",
                lambda case: (case.category or "").casefold() in wanted_categories,
            )
        )
    if tags:
        wanted_tags = _fold(tags)
        steps.append((f"tags {', '.join(tags)}", lambda case: not wanted_tags.isdisjoint(_fold(case.tags))))
    if shard:
        index, count = check_shard(shard)
        steps.append((f"shard {index}/{count}", lambda case: shard_of(case.id, count) == index))
    return steps


def select_cases(
    cases: Iterable[S],
    *,
    case_ids: Sequence[str] | str | None = None,
    first_n: int | None = None,
    categories: Sequence[str] | str | None = None,
    tags: Sequence[str] | str | None = None,
    shard: tuple[int, int] | None = None,
) -> list[S]:
    """The cases to run, in dataset order (see the module docstring for the rules)."""
    pool = list(cases)
    ids, category_list, tag_list = split_list(case_ids), split_list(categories), split_list(tags)
    if first_n is not None and (isinstance(first_n, bool) or first_n < 1):
        raise UserError(f"must be a positive integer (got {first_n!r})", where="first_n")
    trail = [f"{len(pool)} loaded"]
    if ids:
        pool = _pick_ids(pool, ids)
        trail.append(f"case_ids → {len(pool)}")
    for label, keep in _filters(category_list, tag_list, shard):
        pool = [case for case in pool if keep(case)]
        trail.append(f"{label} → {len(pool)}")
    if first_n is not None and not ids:
        pool = pool[:first_n]
        trail.append(f"first_n {first_n} → {len(pool)}")
    if not pool:
        raise UserError(f"the selection leaves no cases to run ({'; '.join(trail)})", where="selection")
    return pool
