"""The release is in step: action.yml runs the image of the package version, the release workflow
builds what it should, every doc names one repository, and the image built like the release's
reports the version action.yml names."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from evalgate import __version__
from tests.docker_support import BUILD_SECONDS, REPO_ROOT, build_release_image, docker_available
from tools import release

WORKFLOWS = REPO_ROOT / ".github" / "workflows"
DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md")),
        *sorted((REPO_ROOT / "datasets").rglob("*.md")), REPO_ROOT / "host" / "README.md"]
CANONICAL = "evalgate/evalgate"


def workflow(name: str) -> dict:
    document = yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))
    document["on"] = document.pop(True, document.get("on"))  # YAML 1.1 reads the key `on` as True
    return document


def test_action_yml_package_and_pyproject_name_one_version() -> None:
    assert release.problems() == []
    assert release.action_image() == ("ghcr.io/evalgate/evalgate", __version__)
    pyproject = (REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'dynamic = ["version"]' in pyproject and 'version = {attr = "evalgate.__version__"}' in pyproject


def test_check_names_each_mismatch(tmp_path: Path) -> None:
    init, action = tmp_path / "__init__.py", tmp_path / "action.yml"
    init.write_text('__version__ = "1.2.3"\n', encoding="utf-8")
    action.write_text("runs:\n  using: docker\n  image: docker://ghcr.io/evalgate/evalgate:1.2.2\n", encoding="utf-8")
    found = release.problems("v1.2.4", init=init, action=action)
    assert found == ["action.yml: image tag '1.2.2' but the package version is '1.2.3'",
                     "git tag 'v1.2.4' but the package version is '1.2.3' (expected v1.2.3)"]


def test_bump_writes_both_files(tmp_path: Path) -> None:
    init, action = tmp_path / "__init__.py", tmp_path / "action.yml"
    shutil.copy(REPO_ROOT / "evalgate" / "__init__.py", init)
    shutil.copy(REPO_ROOT / "action.yml", action)
    release.bump("2.0.0", init=init, action=action)
    assert release.problems("v2.0.0", init=init, action=action) == []
    assert "image: docker://ghcr.io/evalgate/evalgate:2.0.0\n" in action.read_text(encoding="utf-8")
    assert (REPO_ROOT / "action.yml").read_text(encoding="utf-8").count("image: docker://") == 1


def test_release_workflow_builds_both_platforms_from_a_pinned_base() -> None:
    flow = workflow("release.yml")
    assert flow["on"] == {"push": {"tags": ["v[0-9]+.[0-9]+.[0-9]+"]}}
    steps = flow["jobs"]["release"]["steps"]
    text = (WORKFLOWS / "release.yml").read_text(encoding="utf-8")
    assert 'python -m tools.release check --tag "$GITHUB_REF_NAME"' in text
    build = next(s for s in steps if str(s.get("uses", "")).startswith("docker/build-push-action@"))["with"]
    assert build["platforms"] == "linux/amd64,linux/arm64"
    assert build["push"] is True and build["provenance"] == "mode=max" and build["sbom"] is True
    assert build["build-args"] == "PYTHON_IMAGE=${{ env.BASE_IMAGE }}"
    assert build["labels"] == "${{ steps.meta.outputs.labels }}"
    base = flow["env"]["BASE_IMAGE"]
    tag = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", (REPO_ROOT / "Dockerfile").read_text(encoding="utf-8"), re.M)
    assert tag and re.fullmatch(re.escape(tag.group(1)) + r"@sha256:[0-9a-f]{64}", base), base
    assert 'git tag --force "$MAJOR" "$GITHUB_SHA"' in text and "gh release create" in text
    assert flow["jobs"]["release"]["permissions"]["packages"] == "write"


def test_workflows_pass_actionlint() -> None:
    if shutil.which("actionlint") is None:
        pytest.skip("actionlint not installed (pip install -e '.[test]' brings it)")
    done = subprocess.run(["actionlint", "-no-color"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_doc_names_one_repository_and_no_index_install() -> None:
    uses = re.compile(r"uses:\s*([\w.-]+/[\w.-]+)(?:/[\w./-]+)?@")
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for match in uses.finditer(text):
            if "evalgate" in match.group(1).lower():
                assert match.group(1) == CANONICAL, f"{path.name}: {match.group(0)}"
        assert not re.search(r"pip install (-U |--upgrade )?['\"]?evalgate['\"]?(\s|$)", text), path.name
        assert "org/evalgate" not in text, path.name


def test_release_image_reports_the_version_action_yml_names() -> None:
    reason = docker_available()
    if reason:
        pytest.skip(reason)
    image = build_release_image()
    assert image == f"ghcr.io/evalgate/evalgate:{__version__}"
    version = subprocess.run(["docker", "run", "--rm", image, "--version"], capture_output=True, text=True,
                             timeout=120, check=False)
    assert version.stdout.strip() == f"evalgate {__version__}", version.stdout + version.stderr
    labels = subprocess.run(["docker", "image", "inspect", "--format", "{{json .Config.Labels}}", image],
                            capture_output=True, text=True, timeout=60, check=True).stdout
    assert '"org.opencontainers.image.source":"https://github.com/evalgate/evalgate"' in labels
    assert f'"org.opencontainers.image.version":"{__version__}"' in labels
    print(f"release image build: {BUILD_SECONDS.get('release image', 0):.1f} s")
