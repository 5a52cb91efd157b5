"""Load test cases from YAML, JSON and JSONL dataset files, remembering where each case came from.

Paths: each entry is a file, a directory (every ``*.yaml``, ``*.yml``, ``*.json``, ``*.jsonl`` below it,
recursively, hidden entries skipped, sorted by relative path) or a glob (``datasets/**/*.yaml``).
Relative paths are resolved against ``base_dir`` (default: the current directory).

File shapes: a list of cases; a mapping with ``cases:`` (or a dialect's wrapper, e.g. ``test_cases:``) and an optional
``suite:`` block (``evalgate.config.suite.SuiteConfig``); JSONL, one case per line (blank lines allowed).

Every case gets its provenance:

* ``source_file`` — relative to ``base_dir`` (or the current directory) when inside it, else absolute;
  POSIX separators;
* ``source_line`` — 1-based line where the case's mapping starts (YAML node marks; for JSON the line of
  the element's opening ``{``; for JSONL the line number);
* ``index`` — 0-based position across all files in load order;
* ``suite`` — the case's own ``suite:`` value, else the file's ``suite.name``, else the name of the
  directory holding the file when the file sits in a sub-directory of a dataset directory (or of a
  glob's fixed prefix), else the file's stem.

Problems become ``DatasetError`` (a ``UserError``) worded ``file:line: message``. ``load_datasets``
reads everything, collects up to 20 problems in ``.errors`` and raises once, its message being the
first problem plus ``(and N more errors)``; ``iter_cases`` streams and stops at the first problem.
"""

from __future__ import annotations

import gc
import glob
import hashlib
import itertools
import json
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, NoReturn

from pydantic import ValidationError

from evalgate.config.suite import (
    SuiteConfig,
    case_keys,
    did_you_mean,
    format_validation_error,
    locate_field,
    one_line,
    parse_suite_config,
    show_value,
    yaml_line,
)
from evalgate.dataset.kinds import KindCheck
from evalgate.dialect import case_dialect, case_fields
from evalgate.errors import Interrupt, UserError
from evalgate.model import Case
from evalgate.safety.redact import redact
from evalgate.safety.structure import StructureError, check_yaml

DATASET_SUFFIXES: tuple[str, ...] = (".yaml", ".yml", ".json", ".jsonl")
CASE_LIST_KEYS: tuple[str, ...] = ("test_cases", "cases")
TOP_LEVEL_KEYS: tuple[str, ...] = (*CASE_LIST_KEYS, "suite")
RESERVED_CASE_KEYS: tuple[str, ...] = ("source_file", "source_line", "index", "dialect")
CASE_KEYS: frozenset[str] = frozenset(case_keys(Case)) - set(RESERVED_CASE_KEYS) - {"dialect_data"}
"""Every key a case may have: Case's fields and their seed aliases. Anything else belongs under
``metadata:`` (an unknown key is a typo until proven otherwise: ``expected_my_mention`` must not
silently drop an expectation)."""
INFER_ONLY = KindCheck()
MAX_REPORTED_ERRORS = 20

_JSON = json.JSONDecoder()
_JSON_WS = re.compile(r"[ \t\n\r]*")
_TOP_SHAPE = "a list of cases or a mapping with 'test_cases:' or 'cases:'"


# --- public records ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DatasetFile:
    """One loaded file: display path, sha256 of its bytes (hex), number of cases, suite name."""

    path: str
    sha256: str
    cases: int
    suite: str

    def as_metadata(self) -> dict[str, Any]:
        """The ``metadata.datasets[]`` entry of results.json."""
        return {"path": self.path, "sha256": self.sha256, "cases": self.cases}


@dataclass(slots=True)
class LoadedDatasets:
    """Every case in load order, the files they came from and the suite blocks those files declared."""

    cases: list[Case]
    files: list[DatasetFile]
    suites: dict[str, SuiteConfig]

    def metadata(self) -> list[dict[str, Any]]:
        return [f.as_metadata() for f in self.files]

    def suite_for(self, case: Case) -> SuiteConfig:
        """The suite block that governs ``case`` (a default one when its suite declared none)."""
        return self.suites.get(case.suite or "") or SuiteConfig(name=case.suite)


class DatasetError(UserError):
    """Dataset problems: the message is the first one (+ how many more); ``errors`` lists ≤ 20."""

    def __init__(self, problems: list[tuple[str, str]], total: int) -> None:
        where, message = problems[0]
        more = total - 1
        if more:
            message += f" (and {more} more error{'s' if more > 1 else ''})"
        super().__init__(one_line(redact(message)), where=one_line(redact(where)) if where else None)
        self.errors: list[str] = [one_line(redact(f"{w}: {m}" if w else m)) for w, m in problems]
        self.total = total


@dataclass(frozen=True, slots=True)
class DatasetSource:
    """A dataset file found from the user's paths; ``root`` is the directory it was found under."""

    path: Path
    display: str
    root: Path | None = None
    named_directory: bool = False
    """True when the user named ``root`` itself as the dataset (not a glob's fixed prefix)."""

    def default_suite(self) -> str:
        """The sub-directory of ``root`` holding the file; for files directly inside a directory the
        user named, that directory's name; else the file stem."""
        if self.root is not None and self.path.parent != self.root:
            return self.path.parent.name
        if self.named_directory and self.root is not None:
            return self.root.name
        return self.path.stem


# --- path resolution --------------------------------------------------------------------------------


def _has_magic(text: str) -> bool:
    return any(ch in text for ch in "*?[")


def _absolute(path: Path) -> Path:
    return Path(os.path.abspath(path))


def display_path(path: Path, base: Path) -> str:
    """``path`` relative to ``base`` when inside it, else absolute; POSIX separators."""
    path = _absolute(path)
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return path.as_posix()


def _is_dataset_file(path: Path) -> bool:
    """A dataset file of a directory walk or a glob. One named like a dataset file that is not a regular
    file (a device, FIFO or socket, a link to one or to nothing) is a ``UserError`` naming it: skipping it
    would drop its cases unseen, reading it could block or never end (a link to /dev/zero)."""
    if path.suffix.lower() not in DATASET_SUFFIXES or is_calibration_file(path.name):
        return False
    if path.is_file():
        return True
    if path.is_dir():
        return False
    raise UserError(f"dataset path {str(path)!r} is {_kind_of(path)}, not a regular file: remove it or rename it")


def _kind_of(path: Path) -> str:
    """What a non-regular path is, in words (``a FIFO``, ``a link to a character device`` …)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return "a link to nothing" if path.is_symlink() else "unreadable"
    kind = ("a character device" if stat.S_ISCHR(mode) else "a block device" if stat.S_ISBLK(mode)
            else "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
    return f"a link to {kind}" if path.is_symlink() else kind


CALIBRATION_FILE = re.compile(r"(\.labels\.(ya?ml|jsonl?)|(^|/)judge-calibration\.json)$", re.I)
"""Files a directory walk or a glob leaves out: human-labelled examples (``*.labels.yaml``, ``.yml``, ``.json``,
``.jsonl``: ``evalgate.dataset.labels``) and the stored calibration (``judge-calibration.json``), kept beside
the suite they calibrate. Named one by one as a dataset, they are read (and rejected) like any file."""


def is_calibration_file(name: str) -> bool:
    return CALIBRATION_FILE.search(name) is not None


def _walk_directory(directory: Path) -> list[Path]:
    """Dataset files below ``directory``, hidden entries skipped, sorted by relative POSIX path."""
    found: list[tuple[str, Path]] = []
    for current, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in files:
            path = Path(current, name)
            if not name.startswith(".") and _is_dataset_file(path):
                found.append((path.relative_to(directory).as_posix(), path))
    return [path for _, path in sorted(found)]


def _glob_root(pattern: str, base: Path) -> Path:
    """The fixed directory prefix of a glob pattern (``datasets/**/*.yaml`` → ``base/datasets``)."""
    fixed: list[str] = []
    for part in Path(pattern).parts[:-1]:
        if _has_magic(part):
            break
        fixed.append(part)
    root = Path(*fixed) if fixed else Path()
    return _absolute(root if root.is_absolute() else base / root)


def _expand_glob(pattern: str, base: Path) -> list[tuple[Path, Path]]:
    root = _glob_root(pattern, base)
    if os.path.isabs(pattern):
        matches = [Path(m) for m in glob.glob(pattern, recursive=True)]
    else:
        matches = [base / m for m in glob.glob(pattern, root_dir=base, recursive=True)]
    files: list[Path] = []
    for match in matches:
        if match.is_dir():
            files.extend(_walk_directory(match))
        elif _is_dataset_file(match):
            files.append(match)
    return [(path, root) for path in sorted(set(map(_absolute, files)), key=lambda p: p.as_posix())]


def _expand(text: str, base: Path) -> list[DatasetSource]:
    """The dataset files one user path stands for; a path matching nothing is a UserError."""
    text = text.strip()
    if not text:
        raise UserError("an empty dataset path was given", where="datasets")
    if _has_magic(text):
        pairs = _expand_glob(text, base)
        if not pairs:
            raise UserError(f"dataset glob {text!r} matches no {'/'.join(DATASET_SUFFIXES)} files")
        return [DatasetSource(p, display_path(p, base), root) for p, root in pairs]
    path = _absolute(Path(text) if os.path.isabs(text) else base / text)
    if path.is_dir():
        files = _walk_directory(path)
        if not files:
            raise UserError(f"dataset directory {text!r} holds no {'/'.join(DATASET_SUFFIXES)} files")
        return [DatasetSource(p, display_path(p, base), path, named_directory=True) for p in files]
    if path.is_file():
        return [DatasetSource(path, display_path(path, base))]
    if path.exists():
        raise UserError(f"dataset path {text!r} is {_kind_of(path)}, neither a regular file nor a directory")
    if path.is_symlink():
        raise UserError(f"dataset path {text!r} is a link to nothing")
    raise UserError(f"dataset path {text!r} does not exist")


def resolve_paths(
    paths: Iterable[str], base_dir: Path | None = None, *, on_error: Callable[[UserError], None] | None = None
) -> list[DatasetSource]:
    """Every dataset file named by ``paths``, in order, each once. Unmatched paths raise a UserError
    (or are handed to ``on_error`` when given)."""
    base = _absolute(base_dir or Path.cwd())
    sources: list[DatasetSource] = []
    seen: set[str] = set()
    for text in paths:
        try:
            expanded = _expand(text, base)
        except UserError as exc:
            if on_error is None:
                raise
            on_error(exc)
            continue
        for source in expanded:
            key = os.path.realpath(source.path)
            if key not in seen:
                seen.add(key)
                sources.append(source)
    return sources


# --- parsing ----------------------------------------------------------------------------------------


class Problem(Exception):
    """A problem at a line of the file being read (turned into ``file:line: message``)."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = max(1, line)
        self.message = message


@dataclass(slots=True)
class RawCase:
    data: Any
    line: int
    duplicate_key: str | None = None
    text_keys: bool = False
    """True when the parser guarantees text keys (JSON)."""
    key_lines: dict[str, int] | None = None
    """Line of each top-level key of the case (YAML), for problems about one key."""


@dataclass(slots=True)
class _Parsed:
    """A parsed file: its suite block (raw) and its cases (or per-line problems, for JSONL)."""

    items: Iterable[RawCase | Problem]
    suite: Any = None
    suite_line: int = 1
    wrapper: str | None = None
    """The case-list key (``test_cases`` or ``cases``); None for a top-level list or JSONL."""


@dataclass(slots=True)
class _Document:
    """A parsed YAML/JSON document with the lines the loader reports."""

    top: Any
    top_line: int = 1
    key_lines: dict[Any, int] = field(default_factory=dict)
    """Top-level mapping key → line of its value."""
    item_lines: dict[Any, list[int]] = field(default_factory=dict)
    """Case list (key, or None for a top-level list) → line of each element."""
    duplicates: dict[Any, dict[int, str]] = field(default_factory=dict)
    """Case list → element position → a key that element repeats (YAML only)."""
    case_key_lines: dict[Any, dict[int, dict[str, int]]] = field(default_factory=dict)
    """Case list → element position → line of each of its keys (YAML only)."""
    text_keys: bool = False
    """True when every mapping key is text by construction (JSON)."""


class _LineCounter:
    """Character offset → 1-based line number, linear overall for increasing offsets."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.line = 1

    def at(self, pos: int) -> int:
        if pos < self.pos:
            self.pos, self.line = 0, 1
        self.line += self.text.count("\n", self.pos, pos)
        self.pos = pos
        return self.line


def _decode(data: bytes) -> str:
    """UTF-8 text (BOM dropped); undecodable bytes are a Problem at their line."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise Problem(line, f"not valid UTF-8 (byte {exc.start}: {exc.reason})") from None


MAX_DOCUMENT_BYTES = 256 * 1024 * 1024
"""Largest YAML or JSON dataset file read (it is parsed whole); JSONL is read line by line."""
MAX_LINE_BYTES = 64 * 1024 * 1024
"""Largest JSONL line (one case record) read; a longer line is a problem at its line, skipped in chunks,
so memory is bounded by this, not by the file's size."""
SKIP_CHUNK = 1 << 20


def _read_bytes(path: Path, digest: Any) -> bytes:
    try:
        size = path.stat().st_size
        if size > MAX_DOCUMENT_BYTES:
            raise Problem(1, f"the file is {size:,} bytes, more than the {MAX_DOCUMENT_BYTES:,} read for a YAML or "
                              "JSON dataset; split it, or write it as JSONL (one case per line)")
        data = path.read_bytes()
    except OSError as exc:
        raise Problem(1, f"cannot read file: {exc.strerror or exc}") from None
    digest.update(data)
    return data


# YAML


def _yaml_problem(exc: Exception, text: str) -> Problem:
    import yaml  # lazy: pyyaml (~25 ms) only for YAML files

    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if isinstance(exc, yaml.MarkedYAMLError) and mark is not None:
        context = f"{exc.context}: " if exc.context else ""
        return Problem(mark.line + 1, f"invalid YAML: {context}{exc.problem} (column {mark.column + 1})")
    if isinstance(exc, yaml.reader.ReaderError):
        line = text.count("\n", 0, max(0, exc.position)) + 1
        return Problem(line, f"invalid YAML: {exc.reason} (character {exc.character!r})")
    return Problem(1, f"invalid YAML: {type(exc).__name__}: {exc}")


def _yaml_lines(node: Any, doc: _Document) -> None:
    import yaml  # lazy: pyyaml (~25 ms) only for YAML files

    doc.top_line = node.start_mark.line + 1
    if isinstance(node, yaml.SequenceNode):
        _yaml_items(None, node, doc)
    elif isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue
            doc.key_lines[key_node.value] = value_node.start_mark.line + 1
            if key_node.value in CASE_LIST_KEYS and isinstance(value_node, yaml.SequenceNode):
                _yaml_items(key_node.value, value_node, doc)


def _yaml_items(key: Any, seq: Any, doc: _Document) -> None:
    import yaml  # lazy: pyyaml (~25 ms) only for YAML files

    doc.item_lines[key] = [item.start_mark.line + 1 for item in seq.value]
    duplicates: dict[int, str] = {}
    key_lines: dict[int, dict[str, int]] = {}
    for position, item in enumerate(seq.value):
        if isinstance(item, yaml.MappingNode):
            seen: dict[str, int] = {}
            entries: dict[str, int] = {}
            for key_node, value_node in item.value:
                if isinstance(key_node, yaml.ScalarNode) and key_node.value != "<<":
                    if key_node.value in seen:
                        duplicates[position] = key_node.value
                        break
                    seen[key_node.value] = key_node.start_mark.line + 1
                    if isinstance(value_node, yaml.SequenceNode):  # rules[1]: the line of that entry
                        entries.update((f"{key_node.value}[{i}]", entry.start_mark.line + 1)
                                       for i, entry in enumerate(value_node.value))
            key_lines[position] = {**seen, **entries}
    doc.duplicates[key] = duplicates
    doc.case_key_lines[key] = key_lines


def _parse_yaml(text: str) -> _Document:
    """Parse with PyYAML's C loader when built (its pure-Python SafeLoader otherwise); yaml is imported
    here, not at module level, so runs over JSON/JSONL datasets never load it."""
    import yaml  # lazy: pyyaml (~25 ms) only for YAML files


    try:
        check_yaml(text)  # depth and alias expansion, before the C composer (recursive) sees the text
    except StructureError as exc:
        raise Problem(exc.line, f"invalid YAML: {exc.message}") from None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return _Document(top=None)
        doc = _Document(top=None)
        _yaml_lines(node, doc)  # before construction, which flattens merge keys into the nodes
        doc.top = loader.construct_document(node)
        return doc
    # PyYAML raises more than YAMLError on hostile input (ValueError for 2024-13-45, RecursionError
    # for deep nesting, TypeError/AttributeError for odd explicit tags): all mean "this is not valid".
    except Exception as exc:
        raise _yaml_problem(exc, text) from None
    finally:
        loader.dispose()


# JSON


def _json_problem(exc: Exception, lines: _LineCounter | None = None, pos: int = 0) -> Problem:
    if isinstance(exc, json.JSONDecodeError):
        return Problem(exc.lineno, f"invalid JSON: {exc.msg} (column {exc.colno})")
    line = lines.at(pos) if lines is not None else 1
    if isinstance(exc, RecursionError):
        return Problem(line, "invalid JSON: nested too deeply")
    return Problem(line, f"invalid JSON: {exc}")


def _skip_ws(text: str, pos: int) -> int:
    match = _JSON_WS.match(text, pos)
    return match.end() if match else pos


def _expect(text: str, pos: int, what: str) -> NoReturn:
    raise json.JSONDecodeError(f"Expecting {what}", text, pos)


def _scan_array(text: str, pos: int, lines: _LineCounter) -> tuple[list[Any], list[int], int]:
    """Decode the array opening at ``pos``; returns its items, each item's line and the end offset."""
    items: list[Any] = []
    item_lines: list[int] = []
    pos = _skip_ws(text, pos + 1)
    if text.startswith("]", pos):
        return items, item_lines, pos + 1
    while True:
        item_lines.append(lines.at(pos))
        item, pos = _JSON.raw_decode(text, pos)
        items.append(item)
        pos = _skip_ws(text, pos)
        if text.startswith("]", pos):
            return items, item_lines, pos + 1
        if not text.startswith(",", pos):
            _expect(text, pos, "',' delimiter")
        pos = _skip_ws(text, pos + 1)


def _scan_object(text: str, pos: int, lines: _LineCounter, doc: _Document) -> tuple[dict[str, Any], int]:
    """Decode the top-level object at ``pos``, scanning case lists element by element."""
    result: dict[str, Any] = {}
    pos = _skip_ws(text, pos + 1)
    if text.startswith("}", pos):
        return result, pos + 1
    while True:
        if not text.startswith('"', pos):
            _expect(text, pos, "property name enclosed in double quotes")
        key, pos = _JSON.raw_decode(text, pos)
        pos = _skip_ws(text, pos)
        if not text.startswith(":", pos):
            _expect(text, pos, "':' delimiter")
        pos = _skip_ws(text, pos + 1)
        doc.key_lines[key] = lines.at(pos)
        if key in CASE_LIST_KEYS and text.startswith("[", pos):
            result[key], doc.item_lines[key], pos = _scan_array(text, pos, lines)
        else:
            result[key], pos = _JSON.raw_decode(text, pos)
        pos = _skip_ws(text, pos)
        if text.startswith("}", pos):
            return result, pos + 1
        if not text.startswith(",", pos):
            _expect(text, pos, "',' delimiter")
        pos = _skip_ws(text, pos + 1)


def _parse_json(text: str) -> _Document:
    lines = _LineCounter(text)
    pos = _skip_ws(text, 0)
    doc = _Document(top=None, top_line=lines.at(pos), text_keys=True)
    if pos == len(text):
        return doc
    try:
        if text.startswith("[", pos):
            doc.top, doc.item_lines[None], end = _scan_array(text, pos, lines)
        elif text.startswith("{", pos):
            doc.top, end = _scan_object(text, pos, lines, doc)
        else:
            doc.top, end = _JSON.raw_decode(text, pos)
        end = _skip_ws(text, end)
        if end != len(text):
            _expect(text, end, "end of data")
    except (ValueError, RecursionError) as exc:
        raise _json_problem(exc, lines, pos) from None
    return doc


# document → suite block + raw cases


def _raw_items(doc: _Document, key: Any, items: list[Any], fallback: int) -> list[RawCase]:
    lines = doc.item_lines.get(key)
    if lines is None or len(lines) != len(items):
        lines = [fallback] * len(items)
    duplicates = doc.duplicates.get(key, {})
    key_lines = doc.case_key_lines.get(key, {})
    pairs = enumerate(zip(items, lines, strict=True))
    return [RawCase(item, line, duplicates.get(i), doc.text_keys, key_lines.get(i)) for i, (item, line) in pairs]


def _split(doc: _Document) -> _Parsed:
    """The suite block and the raw cases of a parsed YAML/JSON document."""
    top = doc.top
    if top is None:
        return _Parsed(items=[])
    if isinstance(top, list):
        return _Parsed(items=_raw_items(doc, None, top, doc.top_line))
    if not isinstance(top, dict):
        raise Problem(doc.top_line, f"the top level must be {_TOP_SHAPE} (got {show_value(top)})")
    for key in top:
        if key not in TOP_LEVEL_KEYS:
            hint = did_you_mean(str(key), TOP_LEVEL_KEYS)
            line = doc.key_lines.get(key, doc.top_line)
            raise Problem(line, f"unknown top-level key {key!r}{hint}; expected {', '.join(TOP_LEVEL_KEYS)}")
    list_keys = [key for key in CASE_LIST_KEYS if key in top]
    if len(list_keys) != 1:
        problem = "both 'test_cases:' and 'cases:' are present" if list_keys else f"expected {_TOP_SHAPE}"
        raise Problem(doc.top_line, problem)
    key = list_keys[0]
    items, line = top[key], doc.key_lines.get(key, doc.top_line)
    if not isinstance(items, list):
        raise Problem(line, f"'{key}' must be a list of cases (got {show_value(items)})")
    suite_line = doc.key_lines.get("suite", doc.top_line)
    return _Parsed(items=_raw_items(doc, key, items, line), suite=top.get("suite"), suite_line=suite_line,
                   wrapper=key)


def _read_yaml(path: Path, digest: Any) -> _Parsed:
    text = _decode(_read_bytes(path, digest))
    return _split(_parse_yaml(text))


def _read_json(path: Path, digest: Any) -> _Parsed:
    text = _decode(_read_bytes(path, digest))
    return _split(_parse_json(text))


def _jsonl_lines(handle: IO[bytes], digest: Any, first_line: int = 1,
                 limit: int | None = None) -> Iterator[RawCase | Problem]:
    """One raw case per non-blank line, streamed; bad lines become Problem items. ``first_line``: the
    number of the handle's first line; ``limit``: stop after this many bytes (at a line end)."""
    consumed = 0
    with handle:
        for number in itertools.count(first_line):
            raw = handle.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            if limit is not None:
                if consumed >= limit:
                    return
                consumed += len(raw)
            digest.update(raw)
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                while rest := handle.readline(SKIP_CHUNK):  # the rest of the line, a chunk at a time
                    digest.update(rest)
                    consumed += len(rest)
                    if rest.endswith(b"\n"):
                        break
                yield Problem(number, f"the line is longer than {MAX_LINE_BYTES:,} bytes (the largest case record "
                                       "read)")
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield Problem(number, f"not valid UTF-8 (byte {exc.start} of the line: {exc.reason})")
                continue
            text = text.rstrip("\r\n")
            if number == 1:
                text = text.removeprefix("\ufeff")
            if not text.strip():
                continue
            try:
                data = json.loads(text)
            except (ValueError, RecursionError) as exc:
                yield Problem(number, _json_problem(exc).message)
                continue
            yield RawCase(data, number, text_keys=True)


def _read_jsonl(path: Path, digest: Any) -> _Parsed:
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise Problem(1, f"cannot read file: {exc.strerror or exc}") from None
    return _Parsed(items=_jsonl_lines(handle, digest))


READERS: dict[str, Callable[[Path, Any], _Parsed]] = {
    ".yaml": _read_yaml,
    ".yml": _read_yaml,
    ".json": _read_json,
    ".jsonl": _read_jsonl,
}


# --- cases ------------------------------------------------------------------------------------------


ID_KEYS: tuple[str, ...] = ("id", *(spelling for spelling, name in case_fields().renames.items() if name == "id"),
                            "case_id")
"""The keys a raw case's id may be under (a dialect's spelling before ``case_id``, as ``Case`` reads them)."""


def _case_label(data: dict[Any, Any], position: int) -> str:
    for key in ID_KEYS:
        value = data.get(key)
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value).strip():
            return f"case {str(value)!r}"
    return f"case #{position}"


def _precheck(raw: RawCase, data: dict[Any, Any]) -> str | None:
    """Problems pydantic would word poorly: non-text keys, repeated keys, loader-owned keys, unknown keys
    (for an unknown key ``raw.line`` is moved to the key's own line when known)."""
    if not raw.text_keys:
        bad_key = next((key for key in data if not isinstance(key, str)), None)
        if bad_key is not None:
            return f"key {show_value(bad_key)} is not text"
    if raw.duplicate_key is not None:
        return f"key {raw.duplicate_key!r} appears twice"
    reserved = next((key for key in RESERVED_CASE_KEYS if key in data), None)
    if reserved is not None:
        return f"key {reserved!r} is reserved (set by the loader)"
    if CASE_KEYS.issuperset(data):  # one C-level check for the usual case
        return None
    unknown = next(key for key in data if key not in CASE_KEYS)  # one exists: not a superset
    raw.line = (raw.key_lines or {}).get(str(unknown), raw.line)
    return f"unknown key {unknown!r}{did_you_mean(str(unknown), CASE_KEYS)}; put extra fields under 'metadata:'"


def _field_line(raw: RawCase, exc: ValidationError) -> int:
    """The line of the field the first problem of ``exc`` is about (``rules[1].type`` → that rule's entry), from
    the YAML lines of the case's keys and list entries; the case's own line when none is known (JSON)."""
    if not raw.key_lines:
        return raw.line
    errors = exc.errors(include_url=False)
    where = locate_field(errors[0], Case) if errors else ""
    while where:
        if where in raw.key_lines:
            return raw.key_lines[where]
        cut = max(where.rfind("."), where.rfind("["))
        where = where[:cut] if cut > 0 else ""
    return raw.line


def validate_case(raw: RawCase, position: int, check: KindCheck = INFER_ONLY) -> Case:
    """``raw`` as a Case; every problem becomes a Problem naming the case and the field. ``check``:
    the kind rules of its file (required fields, value sets; ``evalgate.dataset.kinds``)."""
    data = raw.data
    if not isinstance(data, dict):
        raise Problem(raw.line, f"case #{position} is not a mapping (got {show_value(data)})")
    problem = _precheck(raw, data)
    if problem is not None:
        raise Problem(raw.line, f"{_case_label(data, position)}: {problem}")
    try:
        case = Case.model_validate(data)
    except ValidationError as exc:
        problem = format_validation_error(exc, Case)
        raw.line = _field_line(raw, exc)
    # Validators outside pydantic's control (re.compile, str.encode) may raise these on odd input.
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        problem = f"invalid ({type(exc).__name__}: {exc})"
    else:
        kind_problem = check.problem(case, data)
        if kind_problem is None:
            return case
        problem = kind_problem
    raise Problem(raw.line, f"{_case_label(data, position)}: {problem}")


class _ErrorLog:
    """Collects problems (keeping the first ``limit``) or raises at the first one (``fail_fast``)."""

    def __init__(self, fail_fast: bool, limit: int = MAX_REPORTED_ERRORS) -> None:
        self.fail_fast = fail_fast
        self.limit = limit
        self.kept: list[tuple[str, str]] = []
        self.total = 0

    def add(self, where: str, message: str) -> None:
        self.total += 1
        if len(self.kept) < self.limit:
            self.kept.append((where, message))
        if self.fail_fast:
            self.raise_if_any()

    def add_user_error(self, exc: UserError) -> None:
        where = exc.where or ""
        text = str(exc)
        self.add(where, text[len(where) + 2 :] if where and text.startswith(f"{where}: ") else text)

    def raise_if_any(self) -> None:
        if self.total:
            raise DatasetError(self.kept, self.total)


class DatasetStream:
    """Iterate the cases of dataset files in load order, recording per-file metadata and suite blocks
    as it goes (``files``, ``suites`` are complete once iteration ends).

    With ``fail_fast`` the first problem raises; otherwise problems are collected and raised together
    when iteration ends.
    """

    def __init__(self, paths: Iterable[str] | str, base_dir: Path | None = None, *, fail_fast: bool = True,
                 checked: bool = False, base: SuiteConfig | None = None):
        self.paths = [paths] if isinstance(paths, str) else list(paths)
        self.base_dir = base_dir
        self.checked = checked
        """True when these files were already read in full without a problem (a scan): the checks that
        span cases (duplicate ids) and the files' sha256 are skipped, so no per-case state is kept."""
        self.base = base
        """evalgate.yaml's suite-level keys: its ``kind`` / ``valid`` apply to files that declare none."""
        self.files: list[DatasetFile] = []
        self.suites: dict[str, SuiteConfig] = {}
        self.count = 0
        self._errors = _ErrorLog(fail_fast)
        self._suite_where: dict[str, str] = {}
        self.suite_where = self._suite_where
        """Suite name → ``file:line`` of the block that configured it."""
        self._first_seen: dict[str, str] = {}

    def __iter__(self) -> Iterator[Case]:
        sources = resolve_paths(self.paths, self.base_dir, on_error=self._errors.add_user_error)
        for source in sources:
            yield from self._read_file(source)
        if self.count == 0 and self._errors.total == 0:
            # one file: point at it (line 1); several: name what the user gave
            where = f"{sources[0].display}:1" if len(sources) == 1 else ", ".join(self.paths) or "datasets"
            self._errors.add(where, "the dataset is empty: no test cases found")
        self._errors.raise_if_any()

    def _read_file(self, source: DatasetSource) -> Iterator[Case]:
        reader = READERS.get(source.path.suffix.lower())
        if reader is None:
            self._errors.add(source.display, f"unsupported dataset file type (use {', '.join(DATASET_SUFFIXES)})")
            return
        digest: Any = _NoDigest() if self.checked else hashlib.sha256()
        try:
            parsed = reader(source.path, digest)
        except Problem as problem:
            self._errors.add(f"{source.display}:{problem.line}", problem.message)
            return
        suite = self._register_suite(source, parsed)
        check = self._kind_check(suite, parsed.wrapper)
        cases = 0
        for position, item in enumerate(parsed.items, start=1):
            Interrupt.check()  # a signal deferred by its handler is honoured here, between two cases
            case = self._admit(source, item, position, suite, check)
            if case is not None:
                cases += 1
                yield case
        self.files.append(DatasetFile(source.display, digest.hexdigest(), cases, suite))

    def _kind_check(self, suite: str, wrapper: str | None) -> KindCheck:
        """The kind rules for a file of ``suite``: its suite block's kind and valid sets, else evalgate.yaml's."""
        config = self.suites.get(suite)
        base = self.base
        kind = (config.kind if config is not None else None) or (base.kind if base is not None else None)
        valid = {**(base.valid if base is not None else {}), **(config.valid if config is not None else {})}
        if kind is None and not valid and wrapper is None:
            return INFER_ONLY
        return KindCheck(kind=kind, valid=valid, wrapper=wrapper)

    def _admit(self, source: DatasetSource, item: RawCase | Problem, position: int, suite: str,
               check: KindCheck = INFER_ONLY) -> Case | None:
        """Validate one raw case and stamp its provenance; None (and a recorded error) if invalid."""
        try:
            if isinstance(item, Problem):
                raise item
            case = validate_case(item, position, check)
        except Problem as problem:
            self._errors.add(f"{source.display}:{problem.line}", problem.message)
            return None
        if not self.checked:
            location = f"{source.display}:{item.line}"
            first = self._first_seen.get(case.id)
            if first is not None:
                self._errors.add(location, f"duplicate case id {case.id!r} (first defined at {first})")
                return None
            self._first_seen[case.id] = location
        # Provenance fields are excluded from dumps and never validated; writing the instance dict
        # skips pydantic's __setattr__ (noticeable per field on a 100k-case load).
        fields = vars(case)
        fields.update(source_file=source.display, source_line=item.line, index=self.count,
                      dialect=case_dialect(check.kind, item.data, check.wrapper))
        if fields["suite"] is None:  # what ``case.suite = suite`` does (no validate_assignment), faster
            fields["suite"] = suite
            case.__pydantic_fields_set__.add("suite")
        self.count += 1
        return case

    def _register_suite(self, source: DatasetSource, parsed: _Parsed) -> str:
        """Parse the file's suite block (if any) and return the suite name of its cases."""
        derived = source.default_suite()
        if parsed.suite is None:
            return derived
        where = f"{source.display}:{parsed.suite_line}"

        def locate(keys: list[Any]) -> str | None:
            line = yaml_line(source.path, ("suite", *keys))
            return f"{source.display}:{line}" if line else None

        try:
            config = parse_suite_config(parsed.suite, where, locate=locate)
        except UserError as exc:
            self._errors.add_user_error(exc)
            return derived
        name = config.name or derived
        config = config.model_copy(update={"name": name})
        previous = self.suites.get(name)
        if previous is not None and previous != config:
            self._errors.add(where, f"suite {name!r} is configured differently at {self._suite_where[name]}")
        elif previous is None:
            self.suites[name] = config
            self._suite_where[name] = where
        return name


class _NoDigest:
    """Stands in for ``hashlib.sha256()`` when the digest is not needed."""

    def update(self, data: bytes) -> None:
        return None

    def hexdigest(self) -> str:
        return ""


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many acyclic objects (a large load otherwise
    spends much of its time in repeated full collections); restores the previous state."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def iter_cases(paths: Iterable[str] | str, base_dir: Path | None = None) -> Iterator[Case]:
    """Stream the cases of ``paths`` in load order; the first problem raises a DatasetError."""
    return iter(DatasetStream(paths, base_dir, fail_fast=True))


def load_datasets(paths: Iterable[str] | str, base_dir: Path | None = None) -> LoadedDatasets:
    """Load every case of ``paths`` with file metadata and suite blocks; all problems (≤ 20 listed)
    are raised together as one DatasetError."""
    stream = DatasetStream(paths, base_dir, fail_fast=False)
    with gc_paused():
        cases = list(stream)
    return LoadedDatasets(cases=cases, files=stream.files, suites=stream.suites)
