"""Build hook: the demo suites in ``datasets/`` (the one copy, kept at the repository root where the docs
and workflows point) are copied into the package as ``evalgate/demo/datasets`` when a wheel is built, so
``pip install .``, pipx and any non-editable install can run ``evalgate run`` with no dataset. Everything
else is configured in pyproject.toml."""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
IGNORED = shutil.ignore_patterns("evalgate-results*", "__pycache__", "*.pyc", "*.db")


class BuildWithDemoSuites(build_py):
    """``build_py`` plus ``datasets/`` → ``<build>/evalgate/demo/datasets``."""

    def run(self) -> None:
        super().run()
        source = ROOT / "datasets"
        if not source.is_dir():  # building from an sdist made without them would lose the demo
            raise SystemExit(f"{source} is missing: the demo suites must ship with the package")
        target = Path(self.build_lib) / "evalgate" / "demo" / "datasets"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(source, target, ignore=IGNORED)


setup(cmdclass={"build_py": BuildWithDemoSuites})
