"""``evalgate init [DIR] [--force] [--action REF] [--branch NAME] [--dataset-dir DIR]``: a starter project.

Writes ``evalgate.yaml`` (settings, thresholds, one custom judged metric; the judge off, with the lines
that turn it on), ``evals/starter.yaml`` (one case per common check: keywords, sources, a rule, a one-off
judged check, a critical case; answers recorded so it runs offline) and ``.github/workflows/evalgate.yml``
(the action on pull requests and on pushes to the default branch, with the permissions the README lists).
Existing files are never overwritten without ``--force``: then nothing is written and the exit is 2.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from evalgate import __version__
from evalgate.errors import DOCS_SITE, UserError

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates" / "init"
DEFAULT_ACTION = f"evalgate/evalgate@v{__version__.split('.')[0]}"
"""The action reference the README's workflow uses: the major tag the release of this version moves
(tools/release.py; tests/house/test_action_references.py checks it)."""


def add_init(verbs: Any) -> None:
    text = "write a starter evalgate.yaml, dataset and GitHub workflow"
    parser = verbs.add_parser("init", help=text, description=text[0].upper() + text[1:] + ".",
                              epilog="Exit status: 0 written, 2 a file exists (use --force) or cannot be written.")
    parser.add_argument("directory", nargs="?", default=".", help="project directory (default: the current one)")
    parser.add_argument("--force", action="store_true", help="overwrite files that exist")
    parser.add_argument("--action", default=DEFAULT_ACTION, metavar="REF",
                        help=f"the action's uses: reference (default {DEFAULT_ACTION})")
    parser.add_argument("--branch", default=None, metavar="NAME",
                        help="default branch whose pushes keep the baseline (default: the repository's, from "
                             "origin/HEAD, else the current branch, else git's init.defaultBranch, else main)")
    parser.add_argument("--dataset-dir", default="evals", metavar="DIR", help="where the dataset goes (default evals)")
    parser.set_defaults(func=cmd_init)


def default_branch(directory: Path) -> str:
    """The repository's default branch as git knows it in ``directory``: ``origin/HEAD`` (set by a clone), else
    the branch checked out (an unborn one included), else ``init.defaultBranch``, else ``main``."""
    import subprocess  # lazy: only to ask git for the default branch

    def git(*args: str) -> str:
        try:
            done = subprocess.run(["git", *args], cwd=directory if directory.is_dir() else None, capture_output=True,
                                  text=True, timeout=10, check=False)
        except (OSError, subprocess.SubprocessError):
            return ""
        return done.stdout.strip() if done.returncode == 0 else ""

    remote = git("symbolic-ref", "--quiet", "refs/remotes/origin/HEAD")
    if remote.startswith("refs/remotes/origin/"):
        return remote.removeprefix("refs/remotes/origin/")
    return git("symbolic-ref", "--quiet", "--short", "HEAD") or git("config", "init.defaultBranch") or "main"


def scaffold(directory: Path, *, action: str = DEFAULT_ACTION, branch: str | None = None, dataset_dir: str = "evals",
             force: bool = False) -> list[Path]:
    """Write the starter files under ``directory``; returns their paths. A ``UserError`` names every file
    that exists (nothing is written) unless ``force``. ``branch`` None: ``default_branch(directory)``."""
    import jinja2  # lazy: jinja2 (~40 ms) only for evalgate init

    branch = default_branch(directory) if branch is None else branch
    if not dataset_dir.strip() or Path(dataset_dir).is_absolute() or ".." in Path(dataset_dir).parts:
        raise UserError("must be a relative directory inside the project", where="--dataset-dir")
    for value, name in ((action, "--action"), (branch, "--branch")):
        if not value.strip() or any(ch in value for ch in "\n\r'\"{}"):
            raise UserError(f"invalid value {value!r}", where=name)
    files = {
        directory / "evalgate.yaml": "evalgate.yaml.j2",
        directory / dataset_dir / "starter.yaml": "starter.yaml.j2",
        directory / ".github" / "workflows" / "evalgate.yml": "workflow.yml.j2",
    }
    existing = [path for path in files if path.exists()]
    if existing and not force:
        listed = ", ".join(str(path) for path in existing)
        raise UserError(f"{listed} already exist{'s' if len(existing) == 1 else ''}; nothing was written "
                        "(use --force to overwrite)", where="evalgate init")
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, autoescape=False)
    values = {"action": action.strip(), "branch": branch.strip(), "dataset_dir": Path(dataset_dir).as_posix(),
              "docs": DOCS_SITE}
    written: list[Path] = []
    for path, template in files.items():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(env.get_template(template).render(**values), encoding="utf-8")
        except OSError as exc:
            raise UserError(f"cannot write {path} ({exc.strerror or exc})", where="evalgate init") from None
        written.append(path)
    return written


def cmd_init(args: argparse.Namespace) -> int:
    directory = Path(args.directory)
    written = scaffold(directory, action=args.action, branch=args.branch, dataset_dir=args.dataset_dir,
                       force=args.force)
    for path in written:
        print(f"wrote {path}")
    where = "" if directory == Path(".") else f"cd {directory} && "
    print(f"""
Next:
  {where}evalgate validate     check the configuration and the dataset (no network call)
  {where}evalgate run          evaluate offline: recorded answers, judged metrics skipped
Turn the judge on: set judge_provider in evalgate.yaml (openai, gemini, ollama or local) and export its key
(e.g. OPENAI_API_KEY); in the workflow pass it as a secret (see the comment in {written[2].name}).""")
    return 0
