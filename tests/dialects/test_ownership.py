"""Seed behaviour lives in ``evalgate/dialects/`` only (issue 35 item 1).

A plain text search over every file under ``evalgate/`` outside ``evalgate/dialects/`` — Python, templates,
JSON schemas, Markdown, whatever is there: code, docstrings, comments and help texts alike — must not find a
seed's name (``seed000`` … ``seed004``, ``seed 000`` …), a seed's environment or config spelling
(``FANVISE*``, ``EVAL_JUDGE_API_KEY``, ``eval_config``) or a seed-only case field (and its camelCase
request name). Generic text describes the behaviour (``metrics.mentions``: "a brand-mention extractor's
fields"); where a user sees a seed's name — ``--compat``'s help, a metric's or a setting's description in
``docs/reference/`` — the text is produced from the registry (``evalgate.dialect.DIALECTS``, the dialects'
``metric_docs`` / ``setting_docs``).

The one exception: the registry's entry points, the lines of ``evalgate.dialect.BUILTIN`` that name a
built-in dialect's module (``"evalgate.dialects.seed000:DIALECT",``). ``evalgate/schemas/`` gets no
exception: the results document's schema names no dialect field (a case record's dialect fields are
``additionalProperties``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "evalgate"
REGISTRY = PACKAGE / "dialect.py"

SEED_WORDS = re.compile(
    r"seeds?\s*00[0-4]|\b00[0-4]'s\b|FANVISE|EVAL_JUDGE_API_KEY|eval_config|team_name|teamName|active_team_id|activeTeamId"
    r"|active_league_id|activeLeagueId|brands_|expected_specialist|verified_answer_summary|intent_id"
    r"|llm_answer_text",
    re.IGNORECASE)
"""Seed names (also wrapped over two lines, and "004's"), seed environment/config spellings and the seed-only
case fields."""


def entry_point_lines(path: Path = REGISTRY) -> set[int]:
    """Line numbers of ``BUILTIN``'s entries in ``path``: each line holds exactly one entry, ``"module:DIALECT",``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    lines = path.read_text(encoding="utf-8").splitlines()
    found: set[int] = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.AnnAssign | ast.Assign) and node.value is not None
                and any(isinstance(t, ast.Name) and t.id == "BUILTIN"
                        for t in (node.targets if isinstance(node, ast.Assign) else [node.target]))
                and isinstance(node.value, ast.Tuple)):
            for element in node.value.elts:
                if (isinstance(element, ast.Constant) and isinstance(element.value, str)
                        and re.fullmatch(r"evalgate\.dialects\.\w+:DIALECT", element.value)
                        and lines[element.lineno - 1].strip() == f'"{element.value}",'):
                    found.add(element.lineno)
    return found


def seed_words(root: Path, registry: Path) -> list[str]:
    """``path:line: text`` of every line under ``root`` (but ``root/dialects/`` and ``__pycache__``) naming a
    seed, but the registry's entry points."""
    allowed = entry_point_lines(registry) if registry.is_file() else set()
    found: list[str] = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if not path.is_file() or relative.parts[0] == "dialects" or "__pycache__" in relative.parts:
            continue
        text = path.read_bytes().decode("utf-8", errors="replace")
        lines = text.splitlines()
        for match in SEED_WORDS.finditer(text):
            number = text.count("\n", 0, match.start()) + 1
            if not (path == registry and number in allowed):
                found.append(f"{relative}:{number}: {lines[number - 1].strip()}")
    return list(dict.fromkeys(found))


def test_nothing_outside_the_dialects_names_a_seed() -> None:
    found = seed_words(PACKAGE, REGISTRY)
    assert not found, "seed names outside evalgate/dialects/ (move them into the seed's module):\n" + "\n".join(found)


def test_the_registry_names_every_builtin_dialect_on_its_own_line() -> None:
    """The exception covers exactly the five built-in entry points (so it cannot grow unnoticed)."""
    assert len(entry_point_lines()) == 5


def test_the_search_finds_a_seed_in_any_file_and_text(tmp_path: Path) -> None:
    (tmp_path / "dialects").mkdir()
    (tmp_path / "dialects" / "seed004.py").write_text('NAME = "seed004"\n', encoding="utf-8")
    (tmp_path / "generic.py").write_text('"""Seed 004 in a docstring."""\nX = 1  # FANVISE_MODE in a comment\n'
                                         'def f(case):\n    return case.brands_mine\n'
                                         '# as the\n# 003\'s scores, or (seed\n# 002)\n', encoding="utf-8")
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "comment.md.j2").write_text("{{ case.expected_specialist }}\n", encoding="utf-8")
    (tmp_path / "schema.json").write_text('{"properties": {"teamName": {}}}\n', encoding="utf-8")
    registry = tmp_path / "dialect.py"
    registry.write_text('BUILTIN: tuple[str, ...] = (\n    "evalgate.dialects.seed000:DIALECT",\n'
                        '    "evalgate.dialects.seed001:DIALECT",  # seed001 in a comment is not an entry\n)\n'
                        '"""The seed000 entry point."""\n', encoding="utf-8")
    assert entry_point_lines(registry) == {2}
    assert seed_words(tmp_path, registry) == [
        "dialect.py:3: \"evalgate.dialects.seed001:DIALECT\",  # seed001 in a comment is not an entry",
        'dialect.py:5: """The seed000 entry point."""',
        'generic.py:1: """Seed 004 in a docstring."""',
        "generic.py:2: X = 1  # FANVISE_MODE in a comment",
        "generic.py:4: return case.brands_mine",
        "generic.py:6: # 003's scores, or (seed",
        'schema.json:1: {"properties": {"teamName": {}}}',
        "templates/comment.md.j2:1: {{ case.expected_specialist }}",
    ]
