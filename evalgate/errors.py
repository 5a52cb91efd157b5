"""Errors a user can fix. The CLI prints their one-line message and exits 2, never a traceback."""

from __future__ import annotations

EXIT_PASS = 0
EXIT_GATE_FAILED = 1
EXIT_USER_ERROR = 2


class UserError(Exception):
    """A configuration, dataset or environment problem, worded as ``where: what``."""

    def __init__(self, message: str, *, where: str | None = None) -> None:
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)
