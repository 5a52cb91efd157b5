"""Keep the release in step, and keep every reference a user copies resolvable.

The version lives in ``evalgate/__init__.py`` (pyproject reads it). On the development branch action.yml
builds its image from the Dockerfile (``image: Dockerfile``), so the repository's own workflows
(``uses: ./``) run the commit under test and never pull an image that is not released yet. Only the
commit the release workflow tags names the published image, **by digest**
(``docker://ghcr.io/evalgate/evalgate@sha256:…``): pinning the action by tag or commit SHA pins the code
that runs. docs/releasing.md walks through a release.

    python -m tools.release check [--tag vX.Y.Z] [--release]   exit 1 with one line per problem
    python -m tools.release bump X.Y.Z                         write the version
    python -m tools.release pin sha256:…                       action.yml runs the published image by digest
    python -m tools.release tags                               the tags a release creates: vX.Y.Z and vX
    python -m tools.release references                         every `uses:` of this action; exit 1 if one
                                                               names a ref no release creates
    python -m tools.release dist DIR                           DIR holds exactly this version's sdist and wheel
                                                               of evalgate-action, each complete (the PyPI upload)
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INIT = ROOT / "evalgate" / "__init__.py"
ACTION = ROOT / "action.yml"
EXAMPLES = ROOT / ".github" / "workflows" / "examples.yml"
"""Its ``services:`` run the demo agent of the newest released image: by major tag on the development branch,
by the digest in a release commit (``pin``), so a release's example runs pull exactly what it published."""
REPOSITORY = "evalgate/evalgate"
"""The action's GitHub repository: what users write in ``uses:``."""
IMAGE_REPOSITORY = "ghcr.io/evalgate/evalgate"
"""Where the release workflow pushes (``ghcr.io/<owner>/<repo>``, lower case)."""
DEVELOPMENT_IMAGE = "Dockerfile"
VERSION_RE = re.compile(r'^__version__ = "([^"]+)"$', re.M)
IMAGE_RE = re.compile(r"^(  image:[ \t]*)(\S+)[ \t]*$", re.M)
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
SERVICE_IMAGE_RE = re.compile(r"^(\s*image:\s*)ghcr\.io/evalgate/evalgate(?::\d+|@sha256:[0-9a-f]{64})(?=\s|$)", re.M)
"""A ``services:`` image of this action's repository in examples.yml (major tag or digest)."""
SEMVER = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")
USES_RE = re.compile(r"uses:\s*['\"]?(?P<owner>[\w.-]+)/(?P<name>evalgate)(?P<sub>/[\w./-]+)?@(?P<ref>[^\s'\"#`,)]*)",
                     re.I)
"""A ``uses:`` of this action (any owner: a placeholder owner is the error to catch)."""
SCANNED_SUFFIXES = (".md", ".yml", ".yaml", ".j2")
"""Where users copy from: every Markdown page, workflow, example and ``evalgate init`` template."""
SKIPPED_DIRS = {".git", ".venv", "node_modules", "build", "dist", ".pytest_cache", ".pytest-tmp", "site"}


def package_version(init: Path = INIT) -> str:
    """``__version__`` from ``evalgate/__init__.py``."""
    match = VERSION_RE.search(init.read_text(encoding="utf-8"))
    if not match:
        raise SystemExit(f"{init}: no __version__ line")
    return match.group(1)


def release_tags(version: str) -> tuple[str, str]:
    """The tags a release of ``version`` creates: ``vX.Y.Z`` (never moved) and the major tag ``vX``."""
    match = SEMVER.match(version)
    if not match:
        raise SystemExit(f"not a version: {version!r} (expected X.Y.Z)")
    return f"v{version}", f"v{match.group(1)}"


def action_image(action: Path = ACTION) -> str:
    """``runs.image`` of action.yml: ``Dockerfile`` (development) or ``docker://REPOSITORY@sha256:…``."""
    match = IMAGE_RE.search(action.read_text(encoding="utf-8"))
    if not match:
        raise SystemExit(f"{action}: no runs.image line")
    return match.group(2)


def problems(tag: str | None = None, *, release: bool = False, init: Path = INIT,
             action: Path = ACTION, examples: Path = EXAMPLES) -> list[str]:
    """Every way the files disagree with the release rules (and with the tag ``vX.Y.Z``, when given).
    ``release``: this commit is the one to tag, so action.yml must run the published image by digest."""
    version = package_version(init)
    image = action_image(action)
    found = []
    match = SEMVER.match(version)
    if not match:
        found.append(f"evalgate/__init__.py: version {version!r} is not X.Y.Z")
    elif int(match.group(1)) < 1:
        found.append(f"evalgate/__init__.py: version {version!r}: releases start at 1.0.0 so that @v1 exists")
    pinned = image.startswith(f"docker://{IMAGE_REPOSITORY}@") and DIGEST_RE.match(image.split("@", 1)[1])
    if release and not pinned:
        found.append(f"action.yml: image {image!r}: a release commit runs docker://{IMAGE_REPOSITORY}@sha256:…")
    elif not release and image != DEVELOPMENT_IMAGE and not pinned:
        found.append(f"action.yml: image {image!r}: expected {DEVELOPMENT_IMAGE} (development) or "
                     f"docker://{IMAGE_REPOSITORY}@sha256:… (a release commit); never a movable tag")
    if release:
        found += [f"examples.yml: service image {name!r}: a release commit pulls {IMAGE_REPOSITORY}@sha256:…"
                  for name in service_images(examples) if "@sha256:" not in name]
    if tag is not None and tag != f"v{version}":
        found.append(f"git tag {tag!r} but the package version is {version!r} (expected v{version})")
    return found


def bump(version: str, *, init: Path = INIT) -> None:
    """Write ``version`` into ``evalgate/__init__.py``."""
    release_tags(version)
    init.write_text(VERSION_RE.sub(f'__version__ = "{version}"', init.read_text(encoding="utf-8")), encoding="utf-8")


def pin(digest: str, *, action: Path = ACTION, examples: Path | None = EXAMPLES) -> str:
    """Make action.yml run ``IMAGE_REPOSITORY@digest``, and examples.yml's services pull it by that digest;
    returns the new image reference."""
    if not DIGEST_RE.match(digest):
        raise SystemExit(f"not an image digest: {digest!r} (expected sha256: and 64 hex digits)")
    image = f"docker://{IMAGE_REPOSITORY}@{digest}"
    text = action.read_text(encoding="utf-8")
    action.write_text(IMAGE_RE.sub(lambda m: m.group(1) + image, text, count=1), encoding="utf-8")
    if examples is not None and examples.is_file():
        text = examples.read_text(encoding="utf-8")
        examples.write_text(SERVICE_IMAGE_RE.sub(lambda m: f"{m.group(1)}{IMAGE_REPOSITORY}@{digest}", text),
                            encoding="utf-8")
    return image


def service_images(examples: Path = EXAMPLES) -> list[str]:
    """The images of this repository that examples.yml's services pull (``ghcr.io/evalgate/evalgate:1`` or
    ``…@sha256:…``)."""
    text = examples.read_text(encoding="utf-8") if examples.is_file() else ""
    return [m.group(0).split("image:", 1)[1].strip() for m in SERVICE_IMAGE_RE.finditer(text)]


@dataclass(frozen=True)
class Reference:
    """One ``uses:`` of this action in a file users copy from."""

    path: str
    line: int
    text: str
    owner: str
    subpath: str
    ref: str


def scanned_files(root: Path = ROOT) -> Iterator[Path]:
    """The Markdown, YAML and template files under ``root`` (tool and dependency directories pruned)."""
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d not in SKIPPED_DIRS and not d.endswith(".egg-info"))
        for name in sorted(files):
            if name.endswith(SCANNED_SUFFIXES):
                yield Path(directory) / name


def references(root: Path = ROOT) -> Iterator[Reference]:
    """Every ``uses: OWNER/evalgate[/sub]@REF`` in the Markdown, YAML and template files under ``root``."""
    for path in scanned_files(root):
        relative = path.relative_to(root).as_posix()
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            for match in USES_RE.finditer(line):
                yield Reference(relative, number, match.group(0), match.group("owner"),
                                (match.group("sub") or "").lstrip("/"), match.group("ref"))


def reference_problems(root: Path = ROOT, *, version: str | None = None) -> list[str]:
    """``path:line: why`` for each reference no release creates (wrong owner, unknown ref, a sub-action
    that does not exist)."""
    exact, major = release_tags(version or package_version(root / "evalgate" / "__init__.py"))
    found = []
    for ref in references(root):
        where = f"{ref.path}:{ref.line}: {ref.text}"
        if f"{ref.owner}/evalgate" != REPOSITORY:
            found.append(f"{where}: the action is {REPOSITORY} ({ref.owner!r} is a placeholder or another project)")
        elif ref.ref not in (major, exact) and not re.fullmatch(r"[0-9a-f]{40}", ref.ref):
            found.append(f"{where}: @{ref.ref} is not a tag the release creates ({major} or {exact}) "
                         "or a full commit SHA")
        elif ref.subpath and not (root / ref.subpath / "action.yml").is_file():
            found.append(f"{where}: no action at {ref.subpath}/action.yml")
    return found


DISTRIBUTION = "evalgate_action"
"""The normalised name of the ``evalgate-action`` distribution in file names (``evalgate`` on PyPI is another project)."""
WHEEL_MUST_HAVE = ("evalgate/__init__.py", "evalgate/cli/main.py", "evalgate/cli/templates/init/starter.yaml.j2",
                   "evalgate/demo/datasets/brand-mentions/fixtures.yaml", "entrypoint/main.py")
SDIST_MUST_HAVE = ("pyproject.toml", "setup.py", "LICENSE", "README.md", "datasets/brand-mentions/fixtures.yaml",
                   "evalgate/__init__.py")


def dist_problems(directory: Path, version: str | None = None) -> list[str]:
    """Why ``directory`` is not exactly what the release uploads to PyPI: one sdist and one pure wheel of this
    version (``package_version()``), the wheel with the code, templates, demo suites and the ``evalgate``
    command, the sdist with what builds that wheel."""
    import tarfile
    import zipfile

    version = version or package_version()
    files = sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []
    sdist, wheel = f"{DISTRIBUTION}-{version}.tar.gz", f"{DISTRIBUTION}-{version}-py3-none-any.whl"
    found = [] if files == sorted([sdist, wheel]) else [f"{directory}: expected {sdist} and {wheel}, found {files}"]
    if wheel in files:
        with zipfile.ZipFile(directory / wheel) as archive:
            names = set(archive.namelist())
            found += [f"{wheel}: no {name}" for name in WHEEL_MUST_HAVE if name not in names]
            entry = f"{DISTRIBUTION}-{version}.dist-info/entry_points.txt"
            if entry not in names or "evalgate = evalgate.cli.main:console_main" not in archive.read(entry).decode():
                found.append(f"{wheel}: no evalgate console script")
            metadata = archive.read(f"{DISTRIBUTION}-{version}.dist-info/METADATA").decode() if \
                f"{DISTRIBUTION}-{version}.dist-info/METADATA" in names else ""
            if "Name: evalgate-action" not in metadata or "License-Expression: Apache-2.0" not in metadata:
                found.append(f"{wheel}: METADATA does not name evalgate-action under Apache-2.0")
    if sdist in files:
        with tarfile.open(directory / sdist) as archive:
            prefix = f"{DISTRIBUTION}-{version}/"
            names = {name.removeprefix(prefix) for name in archive.getnames()}
            found += [f"{sdist}: no {name}" for name in SDIST_MUST_HAVE if name not in names]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.release", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    check = sub.add_parser("check", help="exit 1 when action.yml, the package and the tag disagree")
    check.add_argument("--tag", help="the tag to create, e.g. v1.2.3")
    check.add_argument("--release", action="store_true", help="this is the release commit: image by digest")
    sub.add_parser("image", help="print the image action.yml runs")
    sub.add_parser("tags", help="print the tags a release of this version creates")
    sub.add_parser("references", help="check every uses: of this action in docs, workflows and templates")
    bumper = sub.add_parser("bump", help="set the version in evalgate/__init__.py")
    bumper.add_argument("version")
    pinner = sub.add_parser("pin", help="action.yml runs the published image by this digest")
    pinner.add_argument("digest")
    dist = sub.add_parser("dist", help="check the sdist and wheel the release uploads to PyPI")
    dist.add_argument("directory", type=Path)
    args = parser.parse_args(argv)
    if args.verb == "dist":
        for line in dist_problems(args.directory):
            print(f"release dist: {line}", file=sys.stderr)
        if dist_problems(args.directory):
            return 1
        print(f"release dist: {', '.join(sorted(p.name for p in args.directory.iterdir()))}")
        return 0
    if args.verb == "bump":
        bump(args.version)
        return 0
    if args.verb == "pin":
        print(pin(args.digest))
        return 0
    if args.verb == "image":
        print(action_image())
        return 0
    if args.verb == "tags":
        print(*release_tags(package_version()))
        return 0
    found = reference_problems() if args.verb == "references" else problems(args.tag, release=args.release)
    for line in found:
        print(f"release {args.verb}: {line}", file=sys.stderr)
    if not found:
        print(f"release {args.verb}: version {package_version()}, tags {' '.join(release_tags(package_version()))}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
