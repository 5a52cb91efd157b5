"""Limits on the shape of YAML documents, checked before anything is built from them.

A YAML file can be small and still be hostile: nesting 50,000 levels deep (≈ 100 KB) overflows the C
stack of PyYAML's composer (the process dies with SIGSEGV), and a "billion laughs" alias bomb (anchors
of anchors, ≈ 1 KB) is built as shared references in no time but expands to billions of nodes the
moment anything walks it (serialising a case for a command target, dumping results). So every YAML
text evalgate reads (datasets, ``evalgate.yaml``) first goes through ``check_yaml``: one pass over the
parser's events (libyaml's parser keeps its own stack, so the pass never recurses) that measures

* **depth**: nested mappings and sequences, at most ``MAX_DEPTH`` (100) levels;
* **expanded size**: the nodes the document stands for when every alias is replaced by what it refers
  to, at most ``max(ALIAS_NODE_BUDGET, ALIAS_FACTOR × its own nodes)`` (1,000,000, or 10 × the nodes
  written): ordinary anchors (shared defaults, ``<<: *base``) stay far below, a bomb goes over within a
  few of its lines. An alias inside the very node it refers to (a recursive structure) is refused too.

The first violation raises ``StructureError`` with the 1-based line where it was found.
"""

from __future__ import annotations

from typing import Any

MAX_DEPTH = 100
ALIAS_NODE_BUDGET = 1_000_000
ALIAS_FACTOR = 10


class StructureError(ValueError):
    """A YAML document over a limit; ``line`` is 1-based."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = max(1, line)
        self.message = message


def check_yaml(text: str, *, max_depth: int = MAX_DEPTH) -> None:
    """Raise ``StructureError`` when ``text`` nests deeper than ``max_depth`` or its aliases expand past
    the budget (module docstring). Syntax errors are left to the loader that follows (this pass stops
    quietly at the first one)."""
    import yaml  # lazy: pyyaml (~25 ms) only for YAML files

    # libyaml's event parser; without libyaml, PyYAML's pure-Python one (also non-recursive)
    parser_class: Any = getattr(yaml, "CBaseLoader", yaml.BaseLoader)
    try:
        parser = parser_class(text)
    except yaml.YAMLError:
        return  # unreadable text: the loader reports it with its own line
    starts = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
    ends = (yaml.MappingEndEvent, yaml.SequenceEndEvent)
    scalar, alias, stream_end = yaml.ScalarEvent, yaml.AliasEvent, yaml.StreamEndEvent
    frames: list[list[Any]] = [[None, 0]]  # [anchor, expanded nodes] per open collection
    open_anchors: set[str] = set()
    sizes: dict[str, int] = {}
    written = 0
    expanded = 0
    try:
        while True:
            event = parser.get_event()
            kind = event.__class__
            if kind is scalar:
                written += 1
                frames[-1][1] += 1
                if event.anchor is not None:
                    sizes[event.anchor] = 1
                continue
            if kind in starts:
                written += 1
                if len(frames) > max_depth:
                    raise StructureError(event.start_mark.line + 1,
                                         f"nested more than {max_depth} levels deep")
                if event.anchor is not None:
                    open_anchors.add(event.anchor)
                frames.append([event.anchor, 1])
                continue
            if kind in ends:
                anchor, size = frames.pop()
                frames[-1][1] += size
                if anchor is not None:
                    open_anchors.discard(anchor)
                    sizes[anchor] = size
                continue
            if kind is alias:
                name = event.anchor
                if name in open_anchors:
                    raise StructureError(event.start_mark.line + 1,
                                         f"alias *{name} refers to a node that contains it (a recursive structure)")
                size = sizes.get(name, 1)  # an undefined alias is the loader's error to report
                frames[-1][1] += size
                expanded += size - 1
                if expanded > max(ALIAS_NODE_BUDGET, ALIAS_FACTOR * written):
                    raise StructureError(event.start_mark.line + 1,
                                         f"aliases expand to more than {max(ALIAS_NODE_BUDGET, ALIAS_FACTOR * written):,} "
                                         f"nodes (at *{name}, {size:,} nodes); is this an alias bomb?")
                continue
            if kind is stream_end:
                return
    except yaml.YAMLError:
        return  # a syntax error: the loader reports it with its own line
    finally:
        dispose = getattr(parser, "dispose", None)
        if dispose is not None:
            dispose()


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` after ``check_yaml`` (C loader when available): raises ``StructureError`` or
    ``yaml.YAMLError``; a RecursionError or another exception PyYAML raises on odd input becomes a
    ``yaml.YAMLError`` too."""
    import yaml  # lazy: pyyaml (~25 ms) only for YAML files

    check_yaml(text)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        return loader.get_single_data()
    except yaml.YAMLError:
        raise
    except Exception as exc:  # ValueError for 2024-13-45, TypeError for odd tags, RecursionError …
        raise yaml.YAMLError(f"{type(exc).__name__}: {exc}") from None
    finally:
        loader.dispose()
