"""Import modules in a background thread while the main thread does something else: set-up work that
imports nothing new, or waiting on the network.

Two uses. At the start of a run that makes HTTP calls, aiohttp (≈ 0.12 s on the bench machine, half of
it OpenSSL reading the CA bundle with the GIL released) loads while the dataset is read and the target,
judge and stores are built, instead of after them, before the first request. During the run, the
report's modules (rich, ≈ 35 ms) load while the run waits on its target and judge, instead of after the
last case. Imports are thread-safe in CPython (a module another thread is importing is waited for, not
imported twice); aiohttp's thread starts once the run's own module-level imports are done, and the
report's modules (rich, evalgate.report) are imported by nothing else during a run, so no two threads
enter an import cycle from opposite ends. A failure here is ignored: the caller's own import later
reports it where it happens.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Sequence

REPORT_DELAY_S = 0.5
"""Start loading the report after the run's own start-up (dataset, first calls); a run shorter than this
loads it at its end, as it would without the thread."""


def preload(modules: Sequence[str], delay: float = 0.0) -> threading.Timer:
    """Import ``modules`` in a daemon thread after ``delay`` seconds. ``cancel()`` the returned timer
    when its modules are no longer wanted before it fired."""

    def load() -> None:
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception:  # the caller's own import reports it
                continue

    timer = threading.Timer(delay, load)
    timer.name = "evalgate-preload"
    timer.daemon = True
    timer.start()
    return timer
