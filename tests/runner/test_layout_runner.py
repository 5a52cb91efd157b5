"""The run reads as stages (issue #35): no function in evalgate/runner/ over ``MAX_FUNCTION_LINES`` lines, and
the stage modules import what they use at the top (an import inside a function only for an optional or heavy
dependency, saying so in a trailing ``# optional:`` / ``# lazy:`` comment)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

RUNNER = Path(__file__).resolve().parents[2] / "evalgate" / "runner"
MAX_FUNCTION_LINES = 60
"""Lines from ``def`` to the function's last line, docstring included."""
ELSEWHERE: frozenset[str] = frozenset()
"""Files left out of the check (none: the case record's restructuring brought engine, conversation, finish, api
and merge under it)."""


def functions(path: Path) -> list[tuple[str, int, int]]:
    """(qualified name, first line, length in lines) of every function and method in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: list[tuple[str, int, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                assert child.end_lineno is not None
                found.append((name, child.lineno, child.end_lineno - child.lineno + 1))
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def checked() -> list[Path]:
    return [path for path in sorted(RUNNER.glob("*.py")) if path.name not in ELSEWHERE]


def test_the_check_sees_the_runner_package() -> None:
    names = {path.name for path in checked()}
    assert {"run.py", "setup.py", "calibrate.py", "engine.py", "conversation.py", "finish.py", "api.py", "merge.py",
            "record.py"} <= names and not names & ELSEWHERE


def test_the_length_check_counts_nested_functions_and_methods(tmp_path: Path) -> None:
    body = "\n".join(f"        x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    source = tmp_path / "sample.py"
    source.write_text(f"class A:\n    def short(self):\n        def inner():\n{body.replace('        ', '            ')}\n"
                      f"        return inner\n")
    found = {name: length for name, _, length in functions(source)}
    assert found["A.short.inner"] == MAX_FUNCTION_LINES + 1 and found["A.short"] == MAX_FUNCTION_LINES + 3


@pytest.mark.parametrize("path", checked(), ids=lambda path: path.name)
def test_no_runner_function_is_longer_than_the_limit(path: Path) -> None:
    long = [f"{path.name}:{line} {name} ({length} lines)" for name, line, length in functions(path)
            if length > MAX_FUNCTION_LINES]
    assert long == [], f"split into stages of at most {MAX_FUNCTION_LINES} lines: {long}"


@pytest.mark.parametrize("path", checked(), ids=lambda path: path.name)
def test_imports_inside_functions_say_why(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    tree = ast.parse("\n".join(lines), str(path))
    unexplained = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Import | ast.ImportFrom):
                assert node.end_lineno is not None
                text = lines[node.end_lineno - 1]
                if "# optional:" not in text and "# lazy:" not in text:
                    unexplained.append(f"{path.name}:{node.lineno} {lines[node.lineno - 1].strip()}")
    assert unexplained == [], "import at the top, or say why not (# optional: … / # lazy: …)"
