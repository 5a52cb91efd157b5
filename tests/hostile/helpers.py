"""Shared steps of the hostile suite: write a dataset, run the CLI in this process, read what it wrote."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalgate.cli.main import main


@dataclass
class Ran:
    """One in-process CLI run: exit status, stdout, stderr and the output directory."""

    code: int
    out: str
    err: str
    output_dir: Path

    def results(self) -> dict[str, Any]:
        return json.loads((self.output_dir / "results.json").read_text(encoding="utf-8"))

    def cases(self) -> dict[str, dict[str, Any]]:
        return {record["id"]: record for record in self.results()["results"]}


def write_cases(path: Path, cases: Sequence[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(list(cases)), encoding="utf-8")
    return path


def run_cli(args: Sequence[str], output_dir: Path | None = None) -> Ran:
    """``evalgate ARGS`` in this process; with ``output_dir`` (a run) also ``--output-dir`` and no progress."""
    out, err = io.StringIO(), io.StringIO()
    extra = ["--output-dir", str(output_dir), "--progress", "none"] if output_dir is not None else []
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([*args, *extra])
        except SystemExit as exc:  # argparse
            code = int(exc.code or 0)
    return Ran(code, out.getvalue(), err.getvalue(), output_dir or Path("."))
