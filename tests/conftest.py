"""Shared test hygiene."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

# The shared helpers' asserts report their values as a test module's do (registered before anything imports them).
pytest.register_assert_rewrite("tests.support")

from evalgate.calls.wire import close_all  # noqa: E402

# The fixtures several modules share, defined once (tests/support/fixtures.py).
pytest_plugins = ["tests.support.fixtures"]

_ROOT = Path(__file__).resolve().parents[1]

# The README runs the tests as `.venv/bin/python -m pytest` without activating the venv: the tools the test
# extra installs there (actionlint, act, evalgate itself) must be found all the same.
_SCRIPTS = str(Path(sys.executable).parent)
# Temporary files go under the project's own .pytest-tmp/ (gitignored), not the machine's /tmp/pytest-of-USER:
# pytest keeps its numbered, per-user layout and retention (tmp_path_retention_* in pyproject) there. A
# PYTEST_DEBUG_TEMPROOT or --basetemp given by the caller wins.
os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", str(_ROOT / ".pytest-tmp"))
(_ROOT / ".pytest-tmp").mkdir(exist_ok=True)
if _SCRIPTS not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = _SCRIPTS + os.pathsep + os.environ.get("PATH", "")
# The user-level judge cache shared across output directories (evalgate/store/shared_cache.py) would carry
# verdicts from one test into another and write into the home directory: off unless a test turns it on.
os.environ.setdefault("EVALGATE_JUDGE_SHARED_CACHE", "none")
# Tests bind no fixed port: the live demo's scripted judge (which prefers 8012, the port the tutorial's demo judge
# may hold) takes any free one unless a test names one.
os.environ.setdefault("EVALGATE_DEMO_JUDGE_PORT", "0")


@pytest.fixture(autouse=True)
def _no_shared_judge_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests that build ``Settings(...)`` directly bypass the environment, so the setting above does not reach
    them and the judge would fall back to the user's ``~/.cache/evalgate/judge-cache.db``: a verdict stored
    there by one test (keyed by a loopback port the OS hands out again) was served to another. Off for them
    too, unless a test names a shared cache or clears the variable (tests/judges/test_shared_cache.py)."""
    from evalgate.judges import factory
    from evalgate.store.shared_cache import shared_cache_path

    def isolated(setting: str, env: Mapping[str, str]) -> tuple[Path | None, str | None]:
        if not (setting or "").strip() and os.environ.get("EVALGATE_JUDGE_SHARED_CACHE") == "none":
            return None, None
        return shared_cache_path(setting, env)

    monkeypatch.setattr(factory, "shared_cache_path", isolated)


@pytest.fixture(autouse=True)
def _close_wire_threads() -> Iterator[None]:
    """Tests that build a ``Runtime`` without closing it leave its wire thread (and the lowered
    interpreter switch interval) behind: close them after each test."""
    yield
    close_all()



def _uses_docker(path: str, seen: dict[str, bool] = {}) -> bool:  # noqa: B006 - a cache for the session
    """Whether the test module at ``path`` (relative to the rootdir) builds or runs Docker images: marked
    ``docker``, or asking for an engine (``docker_available``, ``act_unavailable``)."""
    if path not in seen:
        try:
            text = (_ROOT / path).read_text(encoding="utf-8")
        except OSError:
            text = ""
        seen[path] = any(word in text for word in ("mark.docker", "docker_available", "act_unavailable"))
    return seen[path]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Under pytest-xdist (``-n auto``, .ci/run), each module goes whole to whichever worker is free, the modules
    with the most tests first (``--dist loadfile``: a module's fixtures are set up once, its tests run in
    order); the modules that build and run Docker images (the action's image, act's runner image, the stock
    Debian image) go to one worker together; the real-model tests, minutes each, go one by one. Each worker is
    a session of its own and ``tests/support/docker.py`` builds each image once per session: two workers would
    build the same images, and run act's containers of the same names, at once. (``--dist loadgroup`` would
    do this with ``xdist_group`` marks, but pytest-xdist 3.8 cannot rename pytest 9's node ids.)"""
    from xdist.scheduler import LoadScopeScheduling

    class DockerOnOneWorker(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            if module.startswith("tests/realmodel/"):  # minutes a test, sharing only the session's model server
                return nodeid
            return "docker" if _uses_docker(module) else module

    return DockerOnOneWorker(config, log)
