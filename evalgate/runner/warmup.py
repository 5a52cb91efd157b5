"""Import a module in a background thread while the main thread does set-up work that imports nothing new.

At the start of a run that makes HTTP calls, aiohttp loads while the dataset is read and the target,
judge and stores are built, instead of after them, before the first request (part of that import is
OpenSSL reading the CA bundle with the GIL released; the measured gain is in bench/README.md).
Imports are thread-safe in CPython (a module another thread is importing is waited for, not imported
twice), and the thread starts once the run's own module-level imports are done, so no two threads
enter an import cycle from opposite ends. A failure here is ignored: the caller's own import later
reports it where it happens.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Sequence


def preload(modules: Sequence[str]) -> threading.Thread:
    """Import ``modules`` in a daemon thread."""

    def load() -> None:
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception:  # the caller's own import reports it
                continue

    thread = threading.Thread(target=load, name="evalgate-preload", daemon=True)
    thread.start()
    return thread
