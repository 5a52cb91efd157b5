"""How modules import each other (issue #35, item 4), checked on the source tree with ``ast``:

* no module imports another module's ``_private`` name (``from evalgate.x import _name``): what two modules
  share is public, or lives in the module both import;
* an import inside a function is the exception, and says why on its line: ``# optional: <why>`` for a
  dependency that is not installed with evalgate (an extra: starlette, uvicorn, matplotlib) or
  ``# lazy: <why>`` for a heavy third-party module a command that does not need it should not load
  (numpy, openai, jinja2, tiktoken, rich's live display, protobuf). evalgate's own modules are imported at the
  top: an import inside a function hid the circles the ``acyclic_siblings`` contract now forbids. The one
  exception is the command line's edge (``EDGE``: ``evalgate/cli/``, ``evalgate/__init__.py``, ``__main__.py``):
  ``--help`` and ``--version`` must not load the run stack (pydantic, httpx), so a command loads its own work
  inside the command, each such import marked ``# lazy: <why>``.

Circles themselves are import-linter's (``lint-imports``: the "No circles inside a package" contract).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "evalgate"

PENDING: tuple[str, ...] = ()
"""Paths (under evalgate/) whose in-function imports other helpers are moving this round; the orchestrator
empties this list after merging their branches."""

EDGE = ("cli/", "__init__.py", "__main__.py")
"""The command line's edge: here a command may import evalgate's own (heavy) modules inside the command when
the import says ``# lazy: <why>`` (``--help`` and ``--version`` load neither pydantic nor the run stack)."""

REASON = re.compile(r"#\s*(optional|lazy):\s*\S")
"""The comment an import inside a function carries: ``# optional: <why>`` or ``# lazy: <why>``."""


def sources() -> list[tuple[str, str, ast.Module]]:
    """(path relative to evalgate/, text, tree) of every module."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        found.append((path.relative_to(PACKAGE).as_posix(), text, ast.parse(text, str(path))))
    return found


def module_name(relative: str) -> str:
    return "evalgate." + relative.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def function_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement inside a function or method (nested functions included, each once)."""
    seen: dict[int, ast.Import | ast.ImportFrom] = {}
    for function in ast.walk(tree):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(function):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    seen[id(node)] = node
    return sorted(seen.values(), key=lambda node: node.lineno)


def internal(node: ast.Import | ast.ImportFrom) -> bool:
    names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [alias.name for alias in node.names]
    relative = isinstance(node, ast.ImportFrom) and node.level > 0
    return relative or any(name == "evalgate" or name.startswith("evalgate.") for name in names)


def comment_of(text: str, node: ast.stmt) -> str:
    """The comments on the import's lines (its first line, or the closing line of a parenthesised one)."""
    lines = text.splitlines()
    return " ".join(lines[n - 1].partition("#")[2] and "#" + lines[n - 1].partition("#")[2]
                    for n in {node.lineno, node.end_lineno or node.lineno})


def under(relative: str, paths: tuple[str, ...]) -> bool:
    return any(relative == path or (path.endswith("/") and relative.startswith(path)) for path in paths)


def pending(relative: str) -> bool:
    return under(relative, PENDING)


def internal_allowed(relative: str, comment: str) -> bool:
    """An import of evalgate's own module inside a function: ``# optional:`` anywhere, ``# lazy:`` at the edge."""
    if re.search(r"#\s*optional:\s*\S", comment):
        return True
    return under(relative, EDGE) and re.search(r"#\s*lazy:\s*\S", comment) is not None


def test_no_module_imports_another_modules_private_names() -> None:
    offenders = []
    for relative, _, tree in sources():
        if pending(relative):
            continue
        here = module_name(relative)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("evalgate") \
                    and node.module != here:
                private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                if private:
                    offenders.append(f"{relative}:{node.lineno}: {node.module} {', '.join(private)}")
    assert not offenders, "make the shared name public (or move it):\n" + "\n".join(offenders)


def test_imports_inside_functions_say_why_and_never_hide_evalgates_own_modules() -> None:
    offenders = []
    for relative, text, tree in sources():
        if pending(relative):
            continue
        for node in function_imports(tree):
            comment = comment_of(text, node)
            if internal(node):
                if not internal_allowed(relative, comment):
                    offenders.append(f"{relative}:{node.lineno}: evalgate's own module imported inside a function")
            elif not REASON.search(comment):
                offenders.append(f"{relative}:{node.lineno}: no '# optional: <why>' or '# lazy: <why>'")
    assert not offenders, "\n".join(offenders)


def test_the_checks_see_what_they_look_for() -> None:
    """The detectors on a hand-written module: each rule fires on its case and only there."""
    text = ("from evalgate.x import _hidden, shown\n"
            "def f():\n"
            "    import numpy  # lazy: numpy costs 100 ms\n"
            "    import yaml\n"
            "    from evalgate.y import z\n"
            "    from evalgate.w import v  # optional: the view extra (starlette)\n")
    tree = ast.parse(text)
    found = [(node.lineno, internal(node), bool(REASON.search(comment_of(text, node))))
             for node in function_imports(tree)]
    assert found == [(3, False, True), (4, False, False), (5, True, False), (6, True, True)]
    assert under("runner/run.py", ("runner/",)) and not under("runners.py", ("runner/",))
    assert internal_allowed("cli/main.py", "# lazy: the run stack") and internal_allowed("__main__.py", "# lazy: x")
    assert not internal_allowed("runner/run.py", "# lazy: the run stack") and not internal_allowed("cli/main.py", "")
    assert not internal_allowed("dialects/cli.py", "# lazy: x") and internal_allowed("runner/run.py", "# optional: x")
