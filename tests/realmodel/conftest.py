"""The real-model judge for tests marked ``realmodel``: llama.cpp's server with SmolLM2-135M on loopback.

``EVALGATE_REALMODEL`` decides: ``0`` skips them; ``1`` requires them (a missing venv fails, it does not
skip); unset runs them when the venv from ``tests/realmodel/install.py`` is there and skips them otherwise.
``EVALGATE_REALMODEL_THREADS`` sets the server's threads (default 1).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from .harness import LlamaServer, server_from_env


def _wanted() -> str:
    return os.environ.get("EVALGATE_REALMODEL", "").strip()


@pytest.fixture(scope="session")
def llama_server() -> Iterator[str]:
    """Base URL (``http://127.0.0.1:PORT/v1``) of a running llama.cpp server; stopped after the session."""
    if _wanted() == "0":
        pytest.skip("real-model tests disabled by EVALGATE_REALMODEL=0")
    found = server_from_env()
    if isinstance(found, str):
        if _wanted() == "1":
            pytest.fail(f"EVALGATE_REALMODEL=1 but {found}", pytrace=False)
        pytest.skip(found)
    server = LlamaServer(*found, threads=int(os.environ.get("EVALGATE_REALMODEL_THREADS") or 1))
    try:
        yield server.start()
    finally:
        server.stop()
