"""The tests are laid out like the code (issue 35, item 5): ``tests/<package>/test_<topic>.py`` for each package
of ``evalgate/``, a few named folders for what crosses packages, nothing but ``conftest.py`` (and the package
marker) directly in ``tests/``, one folder per package, and no file repeating its folder's package in its name.

Shared code has one place: no module under ``tests/`` imports a ``test_*`` module (importing one couples two
modules' tests and runs its module-level code twice; helpers go to ``tests/support/``), and a fixture name is
defined once (the shared ones in ``tests/support/fixtures.py``) unless ``ALLOWED_TWICE`` says why not.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CROSS_CUTTING = {
    "e2e": "whole runs: the Action's entry module, nektos/act workflows, the image, the examples, the tutorial",
    "house": "the repository's own rules: layout, packaging, release, docs, workflows, Dockerfile",
    "bench": "bench/: the benchmark harness and its judge model",
    "hostile": "attacks across packages: hostile datasets, replies, paths, secrets, signals",
    "realmodel": "the real-model judge (SmolLM2 under llama.cpp)",
    "servers": "the loopback servers the tests run against, and their own tests",
    "support": "shared helper modules, named after what they hold, and the shared fixtures (fixtures.py)",
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


# Fixture names defined in more than one module on purpose: each definition a different thing under a generic
# name, local to the modules that use it (a module's own fixture wins over tests/support/fixtures.py's).
ALLOWED_TWICE = {
    "agent": "a command target (targets/test_command) and a loopback HTTP agent (verdict/test_gate_loosening_paths)",
    "artifacts": "e2e/test_docker_image's yields None without the npm tools (the image's upload then warns); "
                 "the shared one skips",
    "azurite": "github/test_artifacts' keeps Azurite's debug log to check the requests it received",
    "baseline": "a finished run per test (hostile/test_baselines) or per module (verdict/test_regression_gate)",
    "env": "each judge module's own environment (judges/test_batch, judges/test_estimate_accuracy)",
    "fake": "the GitHub fake with a module's own token (github/test_api, test_comment), the artifacts fake "
            "(github/test_baseline)",
    "image": "the Action's release image (e2e/test_docker_image), the stock Debian image (house/test_readme_stock_debian)",
    "images": "the images each act module builds (e2e/test_act_traces, e2e/test_act_workflows)",
    "judge": "a scripted judge per module (hostile/test_trust, verdict/test_gate_loosening_paths)",
    "run": "each report's own run (report/test_html, report/test_spend)",
    "runs": "each module's own runs (judges/test_pairwise, runner/test_merge, runner/test_merge_repeats, view/test_browser)",
    "suite": "judges/test_controls' suite without labels; the calibration suite is tests/support/fixtures.py's",
}
IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+(?P<source>tests(?:\.\w+)*)[ \t]+import[ \t]+(?P<names>\([^)]*\)|[^\n]*)"
                    r"|import[ \t]+(?P<module>tests(?:\.\w+)*))", re.M)


def modules(tests: Path) -> list[Path]:
    """Every Python file under ``tests`` (npm's and Python's caches left out)."""
    return sorted(path for path in tests.rglob("*.py") if not IGNORED & set(path.relative_to(tests).parts))


def import_problems(tests: Path) -> list[str]:
    """Each import of a ``test_*`` module by a module under ``tests``, one line each."""
    problems = []
    for path in modules(tests):
        text = path.read_text(encoding="utf-8")
        for match in IMPORT.finditer(text):
            module = match["source"] or match["module"]
            names = [name.split(" as ")[0].strip() for name in re.split(r"[,\s()]+", (match["names"] or "").split("#")[0])]
            imported = [module] if any(part.startswith("test_") for part in module.split(".")) else []
            imported += [f"{module}.{name}" for name in names if name.startswith("test_")]
            if imported:
                line = text.count("\n", 0, match.start()) + 1
                problems.append(f"{path.relative_to(tests.parent)}:{line}: imports the test module {imported[0]}; "
                                f"move what it needs to tests/support/ (fixtures: tests/support/fixtures.py)")
    return problems


def fixture_names(path: Path) -> list[str]:
    """The names of the fixtures ``path`` defines (``@pytest.fixture``, with ``name=`` honoured)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for decorator in node.decorator_list:
                call = decorator if isinstance(decorator, ast.Call) else None
                if ast.unparse(call.func if call else decorator) in {"pytest.fixture", "fixture"}:
                    named = [kw.value.value for kw in (call.keywords if call else []) if kw.arg == "name"
                             and isinstance(kw.value, ast.Constant)]
                    names.append(named[0] if named else node.name)
    return names


def fixture_problems(tests: Path, allowed: dict[str, str]) -> list[str]:
    """Each fixture name defined in more than one place and not in ``allowed``, and each name ``allowed`` no
    longer needs, one line each."""
    where: dict[str, list[str]] = {}
    for path in modules(tests):
        for name in fixture_names(path):
            where.setdefault(name, []).append(str(path.relative_to(tests.parent)))
    problems = [f"fixture {name!r} defined {len(places)} times ({', '.join(places)}): define it once in "
                f"tests/support/fixtures.py, or give it a name of its own, or say in ALLOWED_TWICE why not"
                for name, places in sorted(where.items()) if len(places) > 1 and name not in allowed]
    problems += [f"ALLOWED_TWICE[{name!r}]: defined {len(where.get(name, []))} time(s) now; drop the entry"
                 for name in sorted(allowed) if len(where.get(name, [])) < 2]
    return problems


def test_no_module_imports_a_test_module() -> None:
    assert import_problems(ROOT / "tests") == []


def test_a_fixture_is_defined_once_unless_allowed() -> None:
    assert fixture_problems(ROOT / "tests", ALLOWED_TWICE) == []


def test_the_sharing_rules_report_what_breaks_them(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    for folder in ("judges", "support", "node/node_modules/pkg"):
        (tests / folder).mkdir(parents=True)
    (tests / "support" / "fixtures.py").write_text("import pytest\n\n\n@pytest.fixture\ndef github():\n    return 1\n")
    (tests / "judges" / "test_health.py").write_text(
        "import pytest\nfrom tests.support.action import TOKEN\n\n\n@pytest.fixture(scope='module')\ndef suite():\n"
        "    return 2\n")
    (tests / "node" / "node_modules" / "pkg" / "test_x.py").write_text("from tests.judges.test_health import suite\n")
    assert import_problems(tests) == []
    assert fixture_problems(tests, {}) == []

    (tests / "judges" / "test_chat.py").write_text(
        "import pytest\nfrom tests.judges.test_health import suite  # the fixture\nfrom tests.judges import (\n"
        "    helpers,\n    test_client as client,\n)\n\n\ndef run():\n    import tests.e2e.test_entrypoint\n\n\n"
        "@pytest.fixture(name='github')\ndef other_github():\n    return 3\n")
    assert import_problems(tests) == [
        "tests/judges/test_chat.py:2: imports the test module tests.judges.test_health; move what it needs to "
        "tests/support/ (fixtures: tests/support/fixtures.py)",
        "tests/judges/test_chat.py:3: imports the test module tests.judges.test_client; move what it needs to "
        "tests/support/ (fixtures: tests/support/fixtures.py)",
        "tests/judges/test_chat.py:10: imports the test module tests.e2e.test_entrypoint; move what it needs to "
        "tests/support/ (fixtures: tests/support/fixtures.py)",
    ]
    assert fixture_problems(tests, {"suite": "two suites"}) == [
        "fixture 'github' defined 2 times (tests/judges/test_chat.py, tests/support/fixtures.py): define it once in "
        "tests/support/fixtures.py, or give it a name of its own, or say in ALLOWED_TWICE why not",
        "ALLOWED_TWICE['suite']: defined 1 time(s) now; drop the entry",
    ]
    assert fixture_problems(tests, {"github": "a different fake"}) == []


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
