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

import signal
import threading
from typing import Any, ClassVar

EXIT_PASS = 0
EXIT_GATE_FAILED = 1
EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130


DOCS_SITE = "https://evalgate.github.io/evalgate/"
"""The documentation site (mkdocs.yml's ``site_url``; GitHub Pages of evalgate/evalgate, built from docs/): what
messages and the files ``evalgate init`` writes link to, since a user's repository has no docs/ directory.
``docs/a/b.md`` is at ``DOCS_SITE + "a/b/"``."""


class UserError(Exception):
    """A configuration, dataset or environment problem, worded as ``where: what``."""

    def __init__(self, message: str, *, where: str | None = None) -> None:
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)


class Interrupt:
    """SIGINT / SIGTERM received by this process, as a request the code honours at a safe moment.

    The signal handlers (``Interrupt.install`` for the command line's start-up, then
    ``runner.run.Interruption`` during a run) append the signal's name to ``received`` and raise
    ``RunInterrupted`` on the spot only where that is safe: in plain Python code, before any result is
    written (``unwind``), never inside an import (``importing``: an exception in the middle of a module's
    initialisation — pydantic-core's, say — can leave it broken and turn a clean exit into a crash) nor
    inside the event loop. Long synchronous loops call ``check()`` at each step (the dataset reader, once
    per case), so a deferred request is honoured within milliseconds."""

    received: ClassVar[list[str]] = []
    unwind: ClassVar[bool] = True
    """Whether the start-up handler may raise: a run sets it false once it may write results (from then
    on a signal is a request the run, then its caller, reads from ``received``)."""

    @classmethod
    def check(cls) -> None:
        """Raise ``RunInterrupted`` if a signal arrived."""
        if cls.received:
            raise RunInterrupted(cls.received[0])

    @classmethod
    def reset(cls) -> None:
        cls.received.clear()
        cls.unwind = True

    @classmethod
    def install(cls) -> dict[int, Any]:
        """SIGINT and SIGTERM interrupt the start-up (``RunInterrupted``, exit 130) until a run installs its
        own handlers; returns the handlers replaced (for ``restore``; none outside the main thread)."""
        if threading.current_thread() is not threading.main_thread():
            return {}
        cls.reset()
        return {sig: signal.signal(sig, cls._startup) for sig in (signal.SIGINT, signal.SIGTERM)}

    @classmethod
    def record_only(cls) -> dict[int, Any]:
        """SIGINT and SIGTERM are only recorded in ``received`` (what the console script keeps while the
        process exits, once ``main`` handed back its handlers: the exit status stands)."""
        if threading.current_thread() is not threading.main_thread():
            return {}
        return {sig: signal.signal(sig, cls._record) for sig in (signal.SIGINT, signal.SIGTERM)}

    @classmethod
    def _record(cls, signum: int, frame: Any) -> None:
        cls.received.append(signal.Signals(signum).name)

    @staticmethod
    def hold() -> None:
        """Block SIGINT and SIGTERM for the rest of the process's life (an ``atexit`` hook of the console
        script: non-daemon threads are joined by then). Python puts the default handlers back as it
        finalises, so a signal in those last milliseconds would otherwise end a finished run by the
        signal instead of its exit status; blocked, it is dropped with the process."""
        if threading.current_thread() is threading.main_thread():
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})

    @staticmethod
    def restore(previous: dict[int, Any]) -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)

    @classmethod
    def _startup(cls, signum: int, frame: Any) -> None:
        cls.received.append(signal.Signals(signum).name)
        if cls.unwind and not cls.importing(frame):  # else honoured by the next check() (or the run)
            cls.check()

    @staticmethod
    def importing(frame: object) -> bool:
        """True when ``frame`` (the one a signal interrupted) is inside an import."""
        current = frame
        while current is not None:
            if getattr(getattr(current, "f_code", None), "co_filename", "").startswith("<frozen importlib"):
                return True
            current = getattr(current, "f_back", None)
        return False


class RunInterrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived before any case ran (reading and checking the datasets, the baseline
    lookup, the pre-flight check): nothing was evaluated and no results are written; exit 130. A
    ``KeyboardInterrupt``, so every layer that lets Ctrl-C through lets it through."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name
