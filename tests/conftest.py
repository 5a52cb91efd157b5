"""Shared test hygiene."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from evalgate.calls.wire import close_all


@pytest.fixture(autouse=True)
def _close_wire_threads() -> Iterator[None]:
    """Tests that build a ``Runtime`` without closing it leave its wire thread (and the lowered
    interpreter switch interval) behind: close them after each test."""
    yield
    close_all()
