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
from tests.support.docker import BUILD_SECONDS, REPO_ROOT, build_release_image, docker_available
from tools import release

WORKFLOWS = REPO_ROOT / ".github" / "workflows"
DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md")),
        *sorted((REPO_ROOT / "datasets").rglob("*.md")), REPO_ROOT / "host" / "README.md"]
CANONICAL = "evalgate/evalgate"


def workflow(name: str) -> dict:
    document = yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))
    document["on"] = document.pop(True, document.get("on"))  # YAML 1.1 reads the key `on` as True
    return document


def test_action_yml_builds_this_commit_and_the_package_names_the_version() -> None:
    assert release.problems() == []
    assert release.action_image() == "Dockerfile"  # the development branch never pulls an unreleased image
    assert release.release_tags(__version__) == (f"v{__version__}", f"v{__version__.split('.')[0]}")
    assert int(__version__.split(".")[0]) >= 1, "releases start at 1.0.0 so that @v1 exists"
    pyproject = (REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'dynamic = ["version"]' in pyproject and 'version = {attr = "evalgate.__version__"}' in pyproject


def test_check_names_each_problem(tmp_path: Path) -> None:
    init, action = tmp_path / "__init__.py", tmp_path / "action.yml"
    init.write_text('__version__ = "0.3.0"\n', encoding="utf-8")
    action.write_text("runs:\n  using: docker\n  image: docker://ghcr.io/evalgate/evalgate:0.3.0\n", encoding="utf-8")
    found = release.problems("v0.3.1", init=init, action=action)
    assert found == ["evalgate/__init__.py: version '0.3.0': releases start at 1.0.0 so that @v1 exists",
                     "action.yml: image 'docker://ghcr.io/evalgate/evalgate:0.3.0': expected Dockerfile (development) "
                     "or docker://ghcr.io/evalgate/evalgate@sha256:… (a release commit); never a movable tag",
                     "git tag 'v0.3.1' but the package version is '0.3.0' (expected v0.3.0)"]


def test_bump_then_pin_makes_the_release_commit(tmp_path: Path) -> None:
    init, action, examples = tmp_path / "__init__.py", tmp_path / "action.yml", tmp_path / "examples.yml"
    shutil.copy(REPO_ROOT / "evalgate" / "__init__.py", init)
    shutil.copy(REPO_ROOT / "action.yml", action)
    shutil.copy(release.EXAMPLES, examples)
    release.bump("2.0.0", init=init)
    assert release.problems("v2.0.0", init=init, action=action, examples=examples) == []
    assert release.service_images(examples) == ["ghcr.io/evalgate/evalgate:1"] * 2  # development: the major tag
    assert release.problems(release=True, init=init, action=action, examples=examples) == [
        "action.yml: image 'Dockerfile': a release commit runs docker://ghcr.io/evalgate/evalgate@sha256:…",
        *["examples.yml: service image 'ghcr.io/evalgate/evalgate:1': a release commit pulls "
          "ghcr.io/evalgate/evalgate@sha256:…"] * 2]
    digest = "sha256:" + "ab" * 32
    assert release.pin(digest, action=action, examples=examples) == f"docker://ghcr.io/evalgate/evalgate@{digest}"
    assert release.problems("v2.0.0", release=True, init=init, action=action, examples=examples) == []
    assert release.service_images(examples) == [f"ghcr.io/evalgate/evalgate@{digest}"] * 2  # by digest, not :1
    changed = [(x, y) for x, y in zip(release.EXAMPLES.read_text(encoding="utf-8").splitlines(),
                                      examples.read_text(encoding="utf-8").splitlines(), strict=True) if x != y]
    assert [y.split("#")[0].strip() for _, y in changed] == [f"image: ghcr.io/evalgate/evalgate@{digest}"] * 2
    before = (REPO_ROOT / "action.yml").read_text(encoding="utf-8").splitlines()
    after = action.read_text(encoding="utf-8").splitlines()
    assert [(x, y) for x, y in zip(before, after, strict=True) if x != y] == [
        ("  image: Dockerfile", f"  image: docker://ghcr.io/evalgate/evalgate@{digest}")]
    with pytest.raises(SystemExit):
        release.pin("sha256:short", action=action, examples=examples)


def test_release_workflow_tags_only_a_pullable_image_by_digest() -> None:
    flow = workflow("release.yml")
    assert set(flow["on"]) == {"workflow_dispatch"} and flow["permissions"] == {}
    jobs = flow["jobs"]
    assert jobs["verify"]["needs"] == "image" and jobs["tag"]["needs"] == ["image", "verify"]
    assert jobs["verify"]["permissions"] == {}  # the pull is anonymous: a private package fails here
    assert jobs["tag"]["permissions"] == {"contents": "write"}
    assert "contents" not in jobs["image"]["permissions"] or jobs["image"]["permissions"]["contents"] == "read"
    build = next(s for s in jobs["image"]["steps"] if str(s.get("uses", "")).startswith("docker/build-push-action@"))
    assert build["with"]["platforms"] == "linux/amd64,linux/arm64"
    assert build["with"]["push"] is True and build["with"]["provenance"] == "mode=max" and build["with"]["sbom"] is True
    assert build["with"]["build-args"] == "PYTHON_IMAGE=${{ steps.version.outputs.base }}"
    text = (WORKFLOWS / "release.yml").read_text(encoding="utf-8")
    for line in ('python -m tools.release pin "$DIGEST"', 'python -m tools.release check --tag "v$VERSION" --release',
                 "python -m tools.release references", 'docker pull "$image"', "gh release create"):
        assert line in text, line
    for job in jobs.values():
        for step in job["steps"]:
            if str(step.get("uses", "")).startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False
    base = (REPO_ROOT / ".github" / "base-image" / "Dockerfile").read_text(encoding="utf-8")
    pinned = re.search(r"^FROM (\S+)$", base, re.M)
    tag = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", (REPO_ROOT / "Dockerfile").read_text(encoding="utf-8"), re.M)
    assert pinned and tag and re.fullmatch(re.escape(tag.group(1)) + r"@sha256:[0-9a-f]{64}", pinned.group(1))


PINNED = re.compile(r"^\s*(?:-\s*)?uses:\s*(\S+)(.*)$")


def test_third_party_actions_are_pinned_by_commit_sha_with_the_version_in_a_comment() -> None:
    files = [*sorted(WORKFLOWS.glob("*.yml")), REPO_ROOT / "host" / "action.yml"]
    seen = 0
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            match = PINNED.match(line)
            if not match or match.group(1).startswith(("./", "evalgate/evalgate")) or "${" in match.group(1):
                continue
            seen += 1
            assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", match.group(1)), f"{path.name}:{number}: {line}"
            assert re.fullmatch(r"\s*# v\d+\.\d+\.\d+", match.group(2)), f"{path.name}:{number}: no version comment"
    assert seen >= 15
    dependabot = yaml.safe_load((REPO_ROOT / ".github" / "dependabot.yml").read_text(encoding="utf-8"))
    ecosystems = {u["package-ecosystem"]: u for u in dependabot["updates"]}
    assert set(ecosystems) == {"github-actions", "pip", "docker"}
    assert "/host" in ecosystems["github-actions"]["directories"]
    assert ecosystems["docker"]["directory"] == "/.github/base-image"


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
    assert image == f"ghcr.io/evalgate/evalgate:{__version__}"  # what the release pushes and pins by digest
    version = subprocess.run(["docker", "run", "--rm", image, "--version"], capture_output=True, text=True,
                             timeout=120, check=False)
    assert version.stdout.strip() == f"evalgate {__version__}", version.stdout + version.stderr
    labels = subprocess.run(["docker", "image", "inspect", "--format", "{{json .Config.Labels}}", image],
                            capture_output=True, text=True, timeout=60, check=True).stdout
    assert '"org.opencontainers.image.source":"https://github.com/evalgate/evalgate"' in labels
    assert f'"org.opencontainers.image.version":"{__version__}"' in labels
    print(f"release image build: {BUILD_SECONDS.get('release image', 0):.1f} s")


def test_pypi_job_publishes_the_checked_dists_by_trusted_publishing_after_the_tags() -> None:
    """The upload job holds nothing but an OIDC token (no stored PyPI token, no checkout, no build): it takes
    the dist job's checked sdist and wheel and runs pypa/gh-action-pypi-publish, after the tag job."""
    workflow = yaml.safe_load((WORKFLOWS / "release.yml").read_text(encoding="utf-8"))
    dist, pypi = workflow["jobs"]["dist"], workflow["jobs"]["pypi"]
    assert dist["permissions"] == {"contents": "read"}
    script = "\n".join(str(step.get("run", "")) for step in dist["steps"])
    assert "python -m build --outdir dist ." in script and "python -m tools.release dist dist" in script
    assert 'python -m tools.release check --tag "v$VERSION"' in script
    assert pypi["permissions"] == {"id-token": "write"} and set(pypi["needs"]) == {"dist", "tag"}
    assert pypi["environment"]["name"] == "pypi" and "evalgate-action" in pypi["environment"]["url"]
    uses = [str(step.get("uses", "")) for step in pypi["steps"]]
    assert uses[-1].startswith("pypa/gh-action-pypi-publish@") and not any("checkout" in u for u in uses)
    assert "password" not in yaml.dump(pypi) and "secrets." not in yaml.dump(pypi)


def test_dist_check_names_each_problem(tmp_path: Path) -> None:
    import zipfile

    from tools.release import DISTRIBUTION, dist_problems

    (tmp_path / f"{DISTRIBUTION}-0.9.0.tar.gz").write_bytes(b"")
    assert "expected evalgate_action-1.0.0.tar.gz and evalgate_action-1.0.0-py3-none-any.whl" in \
        dist_problems(tmp_path, "1.0.0")[0]
    (tmp_path / f"{DISTRIBUTION}-0.9.0.tar.gz").unlink()
    with zipfile.ZipFile(tmp_path / f"{DISTRIBUTION}-1.0.0-py3-none-any.whl", "w") as archive:
        archive.writestr("evalgate/__init__.py", "")
    import tarfile

    with tarfile.open(tmp_path / f"{DISTRIBUTION}-1.0.0.tar.gz", "w:gz") as archive:
        archive.add(REPO_ROOT / "pyproject.toml", f"{DISTRIBUTION}-1.0.0/pyproject.toml")
    problems = "\n".join(dist_problems(tmp_path, "1.0.0"))
    assert "no evalgate/demo/datasets/brand-mentions/fixtures.yaml" in problems
    assert "no evalgate console script" in problems and "METADATA" in problems
    assert "tar.gz: no datasets/brand-mentions/fixtures.yaml" in problems and "no setup.py" in problems


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_release_dist_job_dry_run_under_act(tmp_path: Path) -> None:
    """The release workflow's dist job, run by nektos/act as GitHub runs it on workflow_dispatch (a dry run:
    nothing is uploaded; act skips the upload step as it skips every remote action): it builds the sdist and
    the wheel with python -m build and checks them with tools.release dist. Needs the package index
    (EVALGATE_SLOW=1)."""
    import json
    import os

    from tests.support.act import RUNNER_IMAGE, act_unavailable, repository_copy, runner_image, stub_actions

    if not os.environ.get("EVALGATE_SLOW"):
        pytest.skip("EVALGATE_SLOW=1 runs the release's dist job under act (it installs build from the index)")
    reason = act_unavailable()
    if reason:
        pytest.skip(reason)
    runner_image()
    repo = repository_copy(tmp_path / "repo")
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"inputs": {"version": __version__},
                                 "repository": {"default_branch": "main", "full_name": "evalgate/evalgate"}}),
                     encoding="utf-8")
    command = ["act", "workflow_dispatch", "-W", ".github/workflows/release.yml", "-j", "dist", "-e", str(event),
               "-P", f"ubuntu-latest={RUNNER_IMAGE}", "--pull=false", "--rebuild=false", "--bind",
               "--action-offline-mode", "--no-cache-server", "--container-daemon-socket", "-", "--rm",
               *stub_actions(tmp_path / "stubs")]
    done = subprocess.run(command, cwd=repo, capture_output=True, text=True, timeout=1200, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0 and "🏁  Job succeeded" in output, output[-4000:]
    assert f"release dist: evalgate_action-{__version__}-py3-none-any.whl, evalgate_action-{__version__}.tar.gz" \
        in output, output[-4000:]
    assert release.dist_problems(repo / "dist") == []
