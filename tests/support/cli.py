"""``evalgate ARGS`` in this process (``evalgate.cli.main.main``, what the console script calls), its output
captured."""

from __future__ import annotations

import contextlib
import io
from typing import Any

from evalgate.cli.main import main as cli_main


def run_cli(*argv: Any) -> tuple[int, str, str]:
    """The exit code, stdout and stderr of ``evalgate *argv`` (each argument as ``str``, so paths do)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()
