"""Keep every path the Action reads or writes inside the job's own directories.

In a workflow, inputs and ``evalgate.yaml`` may come from the pull request under test, so a path
setting is untrusted. Before anything is read or written, every path setting is resolved (relative to
``GITHUB_WORKSPACE``, symbolic links followed) and must lie inside the workspace or the runner's temp
directory (``RUNNER_TEMP``); else the step stops with exit 2 naming the setting and where it was set.
Writes get two more rules: never onto a runner file-command file (``GITHUB_OUTPUT``, ``GITHUB_ENV``,
``GITHUB_PATH``, ``GITHUB_STATE``, ``GITHUB_STEP_SUMMARY``) or the event file, nor into the directory
holding them; and never through a symbolic link (a link committed as ``evalgate-results/results.json``
would otherwise redirect the write).

Checked: ``output_dir`` and every file evalgate writes in it, ``db`` (and the judge cache beside it),
``compat_output``; read: ``dataset`` entries (globs by their fixed prefix), ``config``, ``outputs_file``,
a ``baseline`` path, a ``judge_cache`` path, a ``file://`` target, the ``comment-template`` input. The bundled demo suites (the
default dataset) are part of the action and always allowed. The configuration file itself (named, or the
default ``./evalgate.yaml``) is checked before it is read (``confine_config``).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from evalgate.config.settings import Settings
from evalgate.dataset.load import resolve_paths
from evalgate.dialect import output_files as dialect_output_files
from evalgate.errors import UserError

FILE_COMMAND_VARIABLES = ("GITHUB_OUTPUT", "GITHUB_ENV", "GITHUB_PATH", "GITHUB_STATE", "GITHUB_STEP_SUMMARY",
                          "GITHUB_EVENT_PATH")
RUN_FILES = ("results.json", "results.json.tmp", ".cases.jsonl", ".evalgate.lock", "results.db", "results.db-journal",
             "results.db-wal", "results.db-shm", "judge-cache.db", "judge-cache.db-journal",
             "judge-cache.db-wal", "judge-cache.db-shm")
BATCH_FILES = ("judge-batch.json", "judge-batch.tmp")


def output_files() -> tuple[str, ...]:
    """What a run may write inside ``output_dir`` (and, for the databases, beside ``db``): its own files and
    the dialects' output documents (``evalgate.dialect.output_files``)."""
    return (*RUN_FILES, *dialect_output_files(), *BATCH_FILES)


class Confinement:
    """The directories a step may use and the runner's own files it must never touch."""

    def __init__(self, env: Mapping[str, str], workspace: Path) -> None:
        self.workspace = _real(workspace)
        self.roots = [self.workspace]
        temp = env.get("RUNNER_TEMP")
        if temp:
            self.roots.append(_real(Path(temp)))
        self.forbidden = {_real(Path(env[name])) for name in FILE_COMMAND_VARIABLES if env.get(name)}
        # the directory of the file-command files (``_runner_file_commands``), unless it holds a root itself
        self.forbidden_dirs = {path.parent for path in self.forbidden
                               if not any(root.is_relative_to(path.parent) for root in self.roots)}

    def describe(self) -> str:
        names = ["the workspace (" + str(self.workspace) + ")"]
        if len(self.roots) > 1:
            names.append("the runner temp directory (" + str(self.roots[1]) + ")")
        return " or ".join(names)

    def resolve(self, value: str | os.PathLike[str]) -> Path:
        path = Path(value)
        return _real(path if path.is_absolute() else self.workspace / path)

    def inside(self, path: Path) -> bool:
        return any(path == root or path.is_relative_to(root) for root in self.roots)

    def check_read(self, value: str, origin: str) -> None:
        resolved = self.resolve(value)
        if not self.inside(resolved):
            raise UserError(f"{value!r} resolves to {resolved}, outside {self.describe()}; evalgate reads and "
                            "writes only there", where=origin)

    def check_write(self, value: str | os.PathLike[str], origin: str) -> None:
        """``value`` (a file or directory evalgate writes) is inside the roots, is not a runner file, and
        is not a symbolic link."""
        path = Path(value) if Path(value).is_absolute() else self.workspace / Path(value)
        resolved = _real(path)
        if not self.inside(resolved):
            raise UserError(f"{str(value)!r} resolves to {resolved}, outside {self.describe()}; evalgate reads "
                            "and writes only there", where=origin)
        if resolved in self.forbidden or any(resolved == d or resolved.is_relative_to(d)
                                             for d in self.forbidden_dirs):
            raise UserError(f"{str(value)!r} is the runner's own file ({resolved}); evalgate never writes there",
                            where=origin)
        if os.path.islink(path):
            raise UserError(f"{str(value)!r} is a symbolic link (to {os.readlink(path)}); evalgate does not write "
                            "through links", where=origin)


def confine(settings: Settings, env: Mapping[str, str], workspace: Path, *,
            comment_template: Path | None = None, bundled: Iterable[Path] = ()) -> None:
    """Raise ``UserError`` (exit 2) for the first path setting that leaves the job's directories (see the
    module docstring). ``bundled``: directories shipped with the action (the demo suites)."""
    box = Confinement(env, workspace)
    box.roots.extend(_real(path) for path in bundled)
    output_dir = settings.output_path
    box.check_write(output_dir, settings.origin("output_dir"))
    files = output_files()
    for name in files:
        box.check_write(output_dir / name, settings.origin("output_dir"))
    db = settings.db_path
    db_origin = settings.origin("db") if settings.db else settings.origin("output_dir")
    box.check_write(db, db_origin)
    for suffix in ("-journal", "-wal", "-shm"):
        box.check_write(db.with_name(db.name + suffix), db_origin)
    for name in files:
        if name.startswith("judge-cache"):
            box.check_write(db.parent / name, db_origin)
    if settings.compat_output:
        box.check_write(settings.compat_output, settings.origin("compat_output"))
    for entry in settings.dataset:
        box.check_read(_fixed_prefix(entry), settings.origin("dataset"))
    if settings.dataset:  # every file a directory or glob stands for, links followed (``..`` after a ``*`` too)
        for source in resolve_paths(settings.dataset, box.workspace, on_error=lambda exc: None):
            if not box.inside(_real(source.path)):
                raise UserError(f"dataset file {source.display!r} resolves to {_real(source.path)}, outside "
                                f"{box.describe()}", where=settings.origin("dataset"))
    for name in ("config", "outputs_file"):
        value = getattr(settings, name)
        if value:
            box.check_read(value, settings.origin(name))
    if settings.baseline_kind == "path":
        box.check_read(settings.baseline, settings.origin("baseline"))
    if settings.judge_cache.strip() and settings.judge_cache.strip().lower() != "none":
        box.check_read(settings.judge_cache.strip(), settings.origin("judge_cache"))
    if settings.target.startswith("file://"):
        box.check_read(settings.target.removeprefix("file://").rpartition(":")[0] or ".", settings.origin("target"))
    if comment_template is not None:
        box.check_read(str(comment_template), "input 'comment-template'")


def confine_config(env: Mapping[str, str], workspace: Path, named: Iterable[tuple[str, str]]) -> None:
    """Before any configuration file is read: each file named (``(value, origin)``: the ``config`` input,
    ``EVALGATE_CONFIG``, a ``--config`` argument) and the default ``./evalgate.yaml`` (a pull request may
    commit it as a symbolic link to any file of the runner) must resolve inside the job's directories."""
    box = Confinement(env, workspace)
    for value, origin in named:
        if value and value.strip():
            box.check_read(value.strip(), origin)
    default = box.workspace / "evalgate.yaml"
    if os.path.lexists(default):
        box.check_read(str(default), "evalgate.yaml in the workspace")


def _fixed_prefix(entry: str) -> str:
    """A dataset entry's path, or a glob's fixed directory prefix (``data/**/*.yaml`` → ``data``)."""
    entry = entry.strip()
    if not glob.has_magic(entry):
        return entry
    fixed: list[str] = []
    for part in Path(entry).parts:
        if glob.has_magic(part):
            break
        fixed.append(part)
    return str(Path(*fixed)) if fixed else "."


def _real(path: Path) -> Path:
    """``path`` absolute, normalised, with every symbolic link resolved (missing parts kept as written)."""
    return Path(os.path.realpath(path))
