"""Recording each finished case: its results.json record (a spool line) and its SQLite rows."""

from __future__ import annotations

from evalgate.model import CaseResult
from evalgate.safety.redact import redact_exact
from evalgate.store.results_json import CaseSpool
from evalgate.store.sqlite import SQLiteStore


class CaseRecorder:
    """A sink that serialises each result once (redacted) and writes it to the spool and the database.

    ``redact_exact``: every untrusted part of a result (answer, error, judge reply) was already redacted
    with ``redact`` (fragments included) where it entered, so the whole record needs only the exact pass."""

    def __init__(self, spool: CaseSpool, store: SQLiteStore) -> None:
        self.spool = spool
        self.store = store

    def add(self, result: CaseResult) -> None:
        record = redact_exact(result.model_dump_json())
        self.spool.add(result.index, result.repeat, record)
        self.store.add(result, record)
