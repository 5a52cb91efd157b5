"""Record: the files one run writes in its output directory — the case spool (``.cases-<run>.jsonl``, read
back into results.json), the SQLite database, and results.json itself — opened before the first case
(``open_run_files``) and sealed once results.json is written (``RunFiles.seal``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalgate.config.sections import RecordSettings
from evalgate.store.outdir import clean_stale, spool_path
from evalgate.store.recorder import CaseRecorder
from evalgate.store.results_json import CaseSpool
from evalgate.store.sqlite import SQLiteStore


@dataclass(frozen=True)
class RunFiles:
    """Where one run's records go: ``recorder`` takes each case into ``spool`` and ``store``."""

    run_id: str
    timestamp: str
    """When the run started, ``%Y-%m-%dT%H:%M:%SZ`` (UTC)."""
    results_path: Path
    spool: CaseSpool
    store: SQLiteStore
    recorder: CaseRecorder

    def seal(self, document: dict[str, Any]) -> None:
        """After results.json is written: close the spool, write the run's summary row, remove the spool."""
        self.spool.close()
        self.store.finish(document)
        self.spool.path.unlink(missing_ok=True)


def open_run_files(section: RecordSettings, run_id: str, timestamp: str, marker: dict[str, Any] | None) -> RunFiles:
    """Create the output directory, remove what a killed run left there (the caller holds the directory's lock:
    no run is using them), and open the spool and the database (``marker``: the lock's holder, recorded with
    the run's history row)."""
    output_dir = section.output_path
    output_dir.mkdir(parents=True, exist_ok=True)
    clean_stale(output_dir)
    spool = CaseSpool(spool_path(output_dir, run_id))
    store = SQLiteStore(section.db_path, run_id, timestamp, marker=marker)
    return RunFiles(run_id=run_id, timestamp=timestamp, results_path=output_dir / "results.json", spool=spool,
                    store=store, recorder=CaseRecorder(spool, store))
