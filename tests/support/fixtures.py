"""The fixtures more than one test module asks for, defined once (a pytest plugin: tests/conftest.py registers it
in ``pytest_plugins``). A module that needs a different variant defines its own under the same name, with a
comment saying why; tests/house/test_tests_layout.py lists the names allowed twice."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.servers.artifact_service import ArtifactService
from tests.servers.github_fake import GitHubFake
from tests.support.action import TOKEN
from tests.support.artifacts import have_artifact_tools, running_azurite
from tests.support.calibration import CASES, KEY, LABELS
from tests.support.gate import Ran


@pytest.fixture
def github() -> Iterator[GitHubFake]:
    """The stateful GitHub fake on loopback, accepting the runner's token (``TOKEN``)."""
    with GitHubFake(token=TOKEN) as fake:
        yield fake


@pytest.fixture(scope="module")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Azurite blob service for the module's tests (skipped without the npm tools); its endpoint."""
    if not have_artifact_tools():
        pytest.skip("needs node and tests/node/node_modules (azurite, @actions/artifact): run `npm ci` in tests/node")
    with running_azurite(tmp_path_factory.mktemp("azurite")) as endpoint:
        yield endpoint


@pytest.fixture
def artifacts(azurite: str) -> Iterator[ArtifactService]:
    """The artifacts v4 fake (Twirp) over the module's Azurite, fresh for each test."""
    service = ArtifactService(blob_endpoint=azurite, run_backend_id=str(uuid.uuid4()),
                              job_backend_id=str(uuid.uuid4())).start()
    yield service
    service.stop()


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Callable[..., Ran]:
    """``evalgate ARGS`` in this process (``evalgate.cli.main.main``, what the console script calls): the
    same parser, settings layers and run, without a new interpreter's start-up."""
    from evalgate.cli.main import main

    def run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Ran:
        with monkeypatch.context() as patch:
            for name in [n for n in os.environ if n.startswith(("EVALGATE_", "GITHUB_", "INPUT_"))]:
                patch.delenv(name)
            for name, value in {"EVALGATE_JUDGE_SHARED_CACHE": "none", **(env or {})}.items():
                patch.setenv(name, value)
            patch.chdir(cwd)
            capsys.readouterr()
            code = main([*args, "--progress", "none"] if args[0] == "run" else list(args))
            out = capsys.readouterr()
        return Ran(code, out.out, out.err)

    return run


@pytest.fixture
def suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The judge-calibration suite (tests/support/calibration.py) in ``tmp_path``, the working directory: its
    labels a copy of the shipped ones (so the shipped calibration file is never written)."""
    (tmp_path / "labels").mkdir()
    for name in ("policy.labels.yaml", "correctness.labels.yaml"):
        (tmp_path / "labels" / name).write_text((LABELS / name).read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "cases.yaml").write_text(CASES, encoding="utf-8")
    monkeypatch.setenv("LOCAL_JUDGE_API_KEY", KEY)
    for name in ("EVALGATE_CALIBRATION", "GITHUB_ACTIONS", "GITHUB_EVENT_PATH", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path
