"""References to the user's own Python code: ``package.module:attribute`` (an importable module) and
``file://path/to/checks.py:attribute`` (a file, resolved relative to the file that names it).

Both load the module once per run and process (a file is imported under a private module name derived
from its absolute path, with its directory on ``sys.path`` while it is imported, so it may import its
neighbours). Every problem — no such module or file, an import that raises, no such attribute — is a
``UserError`` worded ``where: reference: problem`` with a "did you mean" for a misspelt attribute.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.util
import sys
import threading
from pathlib import Path
from typing import Any

from evalgate.errors import UserError

FILE_PREFIX = "file://"
_LOCK = threading.Lock()
_REFUSAL: list[str] = []
"""Why user code must not be loaded in this process (set by the Action under ``pull_request_target`` with
the pull request's code checked out); empty: references load."""


def refuse_user_code(reason: str | None) -> None:
    """From now on every reference raises ``UserError(reason)`` (None lifts the refusal)."""
    _REFUSAL[:] = [reason] if reason else []


def is_reference(text: str) -> bool:
    """True for ``module:attribute`` or ``file://path:attribute`` (a plain metric name has no colon)."""
    return text.startswith(FILE_PREFIX) or (":" in text and not text.startswith(":"))


def split_reference(text: str) -> tuple[str, str]:
    """``(module or path, attribute)``; the attribute follows the last colon."""
    body = text.removeprefix(FILE_PREFIX) if text.startswith(FILE_PREFIX) else text
    where, _, attribute = body.rpartition(":")
    return where, attribute


def resolve_reference(text: str, *, base_dir: Path | None, where: str) -> Any:
    """The object ``text`` names. ``base_dir``: the directory a ``file://`` path is relative to."""
    if _REFUSAL:
        raise UserError(f"{text!r} not loaded: {_REFUSAL[0]}", where=where)
    module_part, attribute = split_reference(text)
    if not module_part or not attribute:
        raise UserError(f"{text!r}: a reference is 'package.module:function' or 'file://path.py:function'",
                        where=where)
    if text.startswith(FILE_PREFIX):
        path = Path(module_part)
        if not path.is_absolute():
            path = (base_dir or Path.cwd()) / path
        module = load_file(path.resolve(), text, where)
    else:
        module = import_module(module_part, text, where)
    target: Any = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            names = [name for name in dir(target) if not name.startswith("_")]
            close = difflib.get_close_matches(part, names, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise UserError(f"{text!r}: {module_part} has no {part!r}{hint}", where=where)
        target = getattr(target, part)
    return target


def import_module(name: str, text: str, where: str) -> Any:
    """Import ``name``; the current directory is searched after the installed packages."""
    cwd = str(Path.cwd())
    if cwd not in sys.path and "" not in sys.path:
        sys.path.append(cwd)
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and name.startswith(exc.name):
            raise UserError(f"{text!r}: no module named {exc.name!r} (installed packages and the current "
                            "directory were searched)", where=where) from None
        raise UserError(f"{text!r}: importing {name} failed: {_one_line(exc)}", where=where) from None
    except Exception as exc:
        raise UserError(f"{text!r}: importing {name} failed: {_one_line(exc)}", where=where) from None


def load_file(path: Path, text: str, where: str) -> Any:
    """Import the Python file at ``path`` once (a private module name per absolute path)."""
    if not path.is_file():
        raise UserError(f"{text!r}: no such file {path}", where=where)
    if path.suffix != ".py":
        raise UserError(f"{text!r}: {path.name} is not a .py file", where=where)
    module_name = "evalgate_user_" + hashlib.sha256(str(path).encode()).hexdigest()[:16]
    with _LOCK:
        if module_name in sys.modules:
            return sys.modules[module_name]
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise UserError(f"{text!r}: cannot import {path}", where=where)
        module = importlib.util.module_from_spec(spec)
        directory = str(path.parent)
        added = directory not in sys.path
        if added:
            sys.path.insert(0, directory)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException as exc:
            del sys.modules[module_name]
            if not isinstance(exc, Exception):
                raise
            raise UserError(f"{text!r}: importing {path.name} failed: {_one_line(exc)}", where=where) from None
        finally:
            if added:
                sys.path.remove(directory)
        return module


def _one_line(exc: BaseException) -> str:
    message = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__
