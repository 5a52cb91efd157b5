"""Errors a user can fix, and the exit statuses. The CLI prints a ``UserError``'s one-line message and
exits 2, never a traceback.

Exit status (one rule for the CLI, the Action step and results.json's ``gate.exit_code``):

* 0 ``EXIT_PASS``: the gate passed;
* 1 ``EXIT_GATE_FAILED``: the gate failed: a threshold, a critical case, errored cases beyond
  ``max_errored`` (a target that answered with errors included), a regression, the budget; also a
  crash of evalgate itself (results ``status: crashed``), which never passes;
* 2 ``EXIT_USER_ERROR``: a configuration or dataset error, or a target or judge that could not be
  reached at all before any case ran (nothing is evaluated, no results are written);
* 130 ``EXIT_INTERRUPTED``: SIGINT or SIGTERM (or the caller's stop event) ended the run early; the
  partial results say ``status: cancelled``.
"""

from __future__ import annotations

EXIT_PASS = 0
EXIT_GATE_FAILED = 1
EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130


class UserError(Exception):
    """A configuration, dataset or environment problem, worded as ``where: what``."""

    def __init__(self, message: str, *, where: str | None = None) -> None:
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)
