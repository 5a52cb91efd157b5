"""The house rules of the package layout (issue #14), checked on the source tree: the root holds only
the leaf records, errors and entry points; only store/ speaks SQL; only the edges read the process
environment; the merge pipeline does not load the console renderer."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "evalgate"
EDGES = ("cli", "github", "config", "demo")
"""Packages allowed to read the process environment (``demo`` runs its own servers)."""
SQL = re.compile(r"\bSELECT\b[\s\S]*\bFROM\b|\bINSERT (OR \w+ )?INTO\b|\bCREATE (TABLE|INDEX)\b|\bPRAGMA\b")
"""SQL as this code base writes it (upper-case keywords)."""


def modules(*, outside: tuple[str, ...] = ()) -> list[tuple[Path, ast.Module]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).parts
        if relative[0] in outside:
            continue
        found.append((path, ast.parse(path.read_text(encoding="utf-8"), str(path))))
    return found


def test_the_package_root_holds_only_the_leaves_the_dialect_interface_and_the_entry_points() -> None:
    files = {p.name for p in PACKAGE.iterdir() if p.suffix == ".py"}
    assert files == {"__init__.py", "__main__.py", "model.py", "errors.py", "dialect.py"}


def test_only_store_speaks_sql() -> None:
    offenders = []
    for path, tree in modules(outside=("store",)):
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
                if any(n and n.split(".")[0] in ("sqlite3", "sqlite_utils") for n in names):
                    offenders.append(f"{path}:{node.lineno}")
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL.search(node.value):
                offenders.append(f"{path}:{node.lineno}")
    assert offenders == []


def test_only_the_edges_read_the_process_environment() -> None:
    offenders = []
    for path, tree in modules(outside=EDGES):
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb") \
                    and isinstance(node.value, ast.Name) and node.value.id == "os":
                offenders.append(f"{path}:{node.lineno}")
    assert offenders == []


def test_merging_runs_does_not_load_the_console_renderer() -> None:
    code = "import sys, evalgate.runner.merge; print(sorted({'rich', 'sqlite_utils'} & set(sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            cwd=PACKAGE.parent).stdout.strip()
    assert loaded == "[]"
