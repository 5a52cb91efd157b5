"""Seed behaviour lives in ``evalgate/dialects/`` only (issue 35 item 1).

Every module under ``evalgate/`` outside ``evalgate/dialects/`` is read as Python (``ast``): its code — string
literals and f-string parts, names, attributes, arguments, keywords, imports, function and class names —
must not name a seed (``seed000`` … ``seed004``, ``seed 000`` …), a seed's environment or config spelling
(``FANVISE_*``, ``EVAL_JUDGE_API_KEY``, ``eval_config``) or a seed-only case field. Documentation (module,
class, function and attribute docstrings, ``help=`` / ``description=`` texts) and comments may describe the
dialects. The one exception is the
registry's entry points (``evalgate.dialect.BUILTIN``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "evalgate"

SEED_WORDS = re.compile(
    r"seed\s?00[0-4]|FANVISE_|EVAL_JUDGE_API_KEY|eval_config|team_name|teamName|active_team_id|activeTeamId"
    r"|active_league_id|activeLeagueId|brands_|expected_specialist|verified_answer_summary|intent_id|llm_answer_text",
    re.IGNORECASE)
"""Seed names, seed environment/config spellings and the seed-only case fields."""

PENDING_OUTPUT_SIDE: frozenset[str] = frozenset()
"""Output-side files still naming a seed while their move into the dialects is under way (none)."""

PENDING_CASE_FIELDS: frozenset[str] = frozenset()
"""Files that still name seed-only case fields in code (none: they are ``Case.dialect_data``, and the metrics
read them by role, ``Case.role_value``)."""


DOCUMENTING_KEYWORDS = frozenset({"help", "description"})
"""Keyword arguments whose text documents (``argparse`` help, pydantic ``Field(description=...)``)."""


def _documentation(tree: ast.AST) -> set[int]:
    """ids of the string constants that are documentation: a bare string statement (docstrings, and the
    attribute docstrings under an assignment) and the text of a ``help=`` / ``description=`` argument."""
    found = {id(node.value) for node in ast.walk(tree)
             if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)}
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in DOCUMENTING_KEYWORDS:
            found |= {id(part) for part in ast.walk(node.value) if isinstance(part, ast.Constant)}
    return found


def _builtin_entries(tree: ast.AST) -> set[int]:
    """ids of the constants in ``BUILTIN = (...)`` (the registry's entry points)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(target, ast.Name) and target.id == "BUILTIN" and node.value is not None:  # type: ignore[attr-defined]
            found |= {id(c) for c in ast.walk(node.value) if isinstance(c, ast.Constant)}  # type: ignore[attr-defined]
    return found


def code_words(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every piece of code in ``path`` that names a seed (see the module docstring)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _documentation(tree) | _builtin_entries(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        texts: list[str] = []
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            texts.append(node.value)
        elif isinstance(node, ast.Name):
            texts.append(node.id)
        elif isinstance(node, ast.Attribute):
            texts.append(node.attr)
        elif isinstance(node, ast.arg | ast.keyword):
            texts.append(node.arg or "")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            texts.append(node.name)
        elif isinstance(node, ast.alias):
            texts += [node.name, node.asname or ""]
        elif isinstance(node, ast.ImportFrom):
            texts.append(node.module or "")
        for text in texts:
            if SEED_WORDS.search(text):
                found.append((getattr(node, "lineno", 0), text))
    return found


def _modules() -> list[str]:
    return sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                  if p.relative_to(PACKAGE).parts[0] != "dialects")


@pytest.mark.parametrize("module", [m for m in _modules() if m not in PENDING_OUTPUT_SIDE | PENDING_CASE_FIELDS])
def test_no_seed_names_outside_the_dialects(module: str) -> None:
    found = code_words(PACKAGE / module)
    assert not found, f"evalgate/{module} names seeds outside evalgate/dialects/: {found[:5]}"


def test_pending_lists_name_files_that_still_need_them() -> None:
    """A pending file that no longer names a seed must leave its list (so the lists only shrink)."""
    clean = sorted(m for m in PENDING_OUTPUT_SIDE | PENDING_CASE_FIELDS
                   if (PACKAGE / m).is_file() and not code_words(PACKAGE / m))
    assert not clean, f"no longer name a seed, remove from the pending lists: {clean}"


def test_the_check_finds_a_seed_in_code_but_not_in_documentation(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text('"""Seed 004 and seed001 in a docstring."""\nX = 1\n"""seed002 here too."""\n'
                     'def f(case):\n    return case.brands_mine or {"compat": ["seed004"]}\n', encoding="utf-8")
    assert [text for _, text in code_words(probe)] == ["brands_mine", "seed004"]
    assert code_words(PACKAGE / "dialect.py") == [] or "dialect.py" in PENDING_CASE_FIELDS
