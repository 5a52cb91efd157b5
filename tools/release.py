"""Keep the release in step: the version lives in ``evalgate/__init__.py`` (pyproject reads it) and
``action.yml`` names the published image of that same version.

    python -m tools.release check [--tag vX.Y.Z]   exit 1 with one line per mismatch
    python -m tools.release bump X.Y.Z             write the version into both files
    python -m tools.release image                  print the image action.yml runs

The release workflow runs ``check --tag "$GITHUB_REF_NAME"`` before it builds anything, and
``tests/test_release.py`` runs ``check`` on every commit, so a tag can never publish an action whose
``action.yml`` points at another version's image.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INIT = ROOT / "evalgate" / "__init__.py"
ACTION = ROOT / "action.yml"
IMAGE_REPOSITORY = "ghcr.io/evalgate/evalgate"
"""Where the release workflow pushes (``ghcr.io/<owner>/<repo>``, lower case)."""
VERSION_RE = re.compile(r'^__version__ = "([^"]+)"$', re.M)
IMAGE_RE = re.compile(r"^(\s*image:\s*)docker://(\S+?):(\S+)\s*$", re.M)
SEMVER = re.compile(r"^\d+\.\d+\.\d+(?:[-.]?(?:a|b|rc)\d+)?$")


def package_version(init: Path = INIT) -> str:
    """``__version__`` from ``evalgate/__init__.py``."""
    match = VERSION_RE.search(init.read_text(encoding="utf-8"))
    if not match:
        raise SystemExit(f"{init}: no __version__ line")
    return match.group(1)


def action_image(action: Path = ACTION) -> tuple[str, str]:
    """``(repository, tag)`` of ``runs.image: docker://REPOSITORY:TAG`` in action.yml."""
    match = IMAGE_RE.search(action.read_text(encoding="utf-8"))
    if not match:
        raise SystemExit(f"{action}: runs.image is not docker://REPOSITORY:TAG")
    return match.group(2), match.group(3)


def problems(tag: str | None = None, *, init: Path = INIT, action: Path = ACTION) -> list[str]:
    """Every way the files disagree with each other (and with the pushed tag ``vX.Y.Z``, when given)."""
    version = package_version(init)
    repository, image_tag = action_image(action)
    found = []
    if not SEMVER.match(version):
        found.append(f"evalgate/__init__.py: version {version!r} is not X.Y.Z")
    if repository != IMAGE_REPOSITORY:
        found.append(f"action.yml: image repository {repository!r}, expected {IMAGE_REPOSITORY!r}")
    if image_tag != version:
        found.append(f"action.yml: image tag {image_tag!r} but the package version is {version!r}")
    if tag is not None and tag != f"v{version}":
        found.append(f"git tag {tag!r} but the package version is {version!r} (expected v{version})")
    return found


def bump(version: str, *, init: Path = INIT, action: Path = ACTION) -> None:
    """Write ``version`` into ``evalgate/__init__.py`` and action.yml's image tag."""
    if not SEMVER.match(version):
        raise SystemExit(f"not a version: {version!r} (expected X.Y.Z)")
    init.write_text(VERSION_RE.sub(f'__version__ = "{version}"', init.read_text(encoding="utf-8")), encoding="utf-8")
    text = action.read_text(encoding="utf-8")
    action.write_text(IMAGE_RE.sub(lambda m: f"{m.group(1)}docker://{IMAGE_REPOSITORY}:{version}", text),
                      encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.release", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    check = sub.add_parser("check", help="exit 1 when action.yml, the package and the tag disagree")
    check.add_argument("--tag", help="the pushed tag, e.g. v1.2.3")
    sub.add_parser("image", help="print the image action.yml runs")
    bumper = sub.add_parser("bump", help="set the version in evalgate/__init__.py and action.yml")
    bumper.add_argument("version")
    args = parser.parse_args(argv)
    if args.verb == "bump":
        bump(args.version)
        return 0
    if args.verb == "image":
        repository, tag = action_image()
        print(f"{repository}:{tag}")
        return 0
    found = problems(args.tag)
    for line in found:
        print(f"release check: {line}", file=sys.stderr)
    if not found:
        print(f"release check: version {package_version()} everywhere")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
