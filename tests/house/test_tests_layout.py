"""The tests are laid out like the code (issue 35, item 5): ``tests/<package>/test_<topic>.py`` for each package
of ``evalgate/``, a few named folders for what crosses packages, nothing but ``conftest.py`` (and the package
marker) directly in ``tests/``, one folder per package, and no file repeating its folder's package in its name.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CROSS_CUTTING = {
    "e2e": "whole runs: the Action's entry module, nektos/act workflows, the image, the examples, the tutorial",
    "house": "the repository's own rules: layout, packaging, release, docs, workflows, Dockerfile",
    "bench": "bench/: the benchmark harness and its judge model",
    "hostile": "attacks across packages: hostile datasets, replies, paths, secrets, signals",
    "realmodel": "the real-model judge (SmolLM2 under llama.cpp)",
    "servers": "the loopback servers the tests run against, and their own tests",
    "support": "shared helper modules (act, docker, traced agents, workflow blocks)",
    "fixtures": "data files",
    "node": "npm tools (tests/node/package.json)",
}
TOP_LEVEL_FILES = {"conftest.py", "__init__.py"}
IGNORED = {"__pycache__", "node_modules"}


def packages(source: Path) -> set[str]:
    """The packages of ``source`` (``evalgate/``): its folders holding an ``__init__.py``."""
    return {path.name for path in source.iterdir() if (path / "__init__.py").is_file()}


def stem(name: str) -> str:
    """``judges`` and ``judge`` name one package: a folder name without a plural ``s``."""
    return name[:-1] if name.endswith("s") else name


def layout_problems(tests: Path, source: Path) -> list[str]:
    """Every way ``tests`` breaks the layout, one line each (empty: laid out like ``source``)."""
    known = packages(source)
    problems = [f"tests/{path.name}: a module directly in tests/; move it to tests/<package>/ (helpers: tests/support/)"
                for path in sorted(tests.glob("*.py")) if path.name not in TOP_LEVEL_FILES]
    folders = sorted(path.name for path in tests.iterdir()
                     if path.is_dir() and path.name not in IGNORED and not path.name.startswith("."))
    for folder in folders:
        if folder not in known and folder not in CROSS_CUTTING:
            problems.append(f"tests/{folder}/: neither a package of evalgate/ ({', '.join(sorted(known))}) nor a "
                            f"cross-cutting folder ({', '.join(sorted(CROSS_CUTTING))})")
    by_stem: dict[str, list[str]] = {}
    for folder in folders:
        by_stem.setdefault(stem(folder), []).append(folder)
    problems += [f"tests/{' and tests/'.join(names)}/: two folders for one package"
                 for names in by_stem.values() if len(names) > 1]
    for folder in sorted(known & set(folders)):
        if (tests / folder / "__init__.py").exists():
            problems.append(f"tests/{folder}/__init__.py: package folders hold none (pytest imports by path)")
        for path in sorted((tests / folder).rglob("test_*.py")):
            prefix = path.name.removeprefix("test_").split("_")[0]
            if prefix in {folder, stem(folder)}:
                problems.append(f"{path.relative_to(tests.parent)}: the folder already says {folder!r}; "
                                f"name it test_{path.name.removeprefix('test_' + prefix + '_')}")
    return problems


def test_the_tests_are_laid_out_like_the_code() -> None:
    assert layout_problems(ROOT / "tests", ROOT / "evalgate") == []


def test_each_rule_reports_what_breaks_it(tmp_path: Path) -> None:
    source = tmp_path / "evalgate"
    for package in ("judges", "metrics"):
        (source / package).mkdir(parents=True)
        (source / package / "__init__.py").write_text("")
    tests = tmp_path / "tests"
    for folder in ("judges", "metrics", "e2e", "node/node_modules", "__pycache__"):
        (tests / folder).mkdir(parents=True)
    (tests / "conftest.py").write_text("")
    (tests / "__init__.py").write_text("")
    (tests / "judges" / "test_health.py").write_text("")
    assert layout_problems(tests, source) == []

    (tests / "test_flat.py").write_text("")
    (tests / "judge").mkdir()
    (tests / "misc").mkdir()
    (tests / "metrics" / "__init__.py").write_text("")
    (tests / "judges" / "test_judges_cache.py").write_text("")
    (tests / "judges" / "test_judge_output.py").write_text("")
    assert layout_problems(tests, source) == [
        "tests/test_flat.py: a module directly in tests/; move it to tests/<package>/ (helpers: tests/support/)",
        "tests/judge/: neither a package of evalgate/ (judges, metrics) nor a cross-cutting folder "
        f"({', '.join(sorted(CROSS_CUTTING))})",
        "tests/misc/: neither a package of evalgate/ (judges, metrics) nor a cross-cutting folder "
        f"({', '.join(sorted(CROSS_CUTTING))})",
        "tests/judge and tests/judges/: two folders for one package",
        "tests/judges/test_judge_output.py: the folder already says 'judges'; name it test_output.py",
        "tests/judges/test_judges_cache.py: the folder already says 'judges'; name it test_cache.py",
        "tests/metrics/__init__.py: package folders hold none (pytest imports by path)",
    ]
