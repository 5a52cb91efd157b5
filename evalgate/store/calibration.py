"""Stored judge calibrations: the results database's ``eg_calibrations`` table and a committable JSON file.

A record (``runner.calibrate``) is one metric calibrated for one judge configuration::

    {"metric": "policy", "key": "3f2a…", "judge": "gpt-4o-mini@policy-3f2a…", "parts": {provider, model,
     template, criteria, rubric, temperature, samples}, "created": "2026-11-26T14:00:00Z", "n": 40,
     "kappa": 0.71, "accuracy": 0.88, …, "labels": ["calibration/labels.yaml"]}

The JSON file (``{"schema": "evalgate-calibration/1", "calibrations": [record, …]}``) keeps the newest record
per (metric, key), sorted, so that it diffs well when committed. Reading never fails a run: a missing file is
no record, and an unreadable one is reported as a notice by the caller (``CalibrationFileError``).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from evalgate.errors import UserError
from evalgate.store.sqlite import open_database

FILE_SCHEMA = "evalgate-calibration/1"
DEFAULT_FILE = "judge-calibration.json"


class CalibrationFileError(Exception):
    """A calibration file that exists and cannot be read (the message names it)."""


def record_digest(record: dict[str, Any]) -> str:
    """16 hex digits of sha256 over the record as stored (canonical JSON): which record admitted a judge."""
    text = json.dumps(record, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def newest(records: Iterable[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """(metric, key) → the newest record (by ``created``)."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for record in records:
        slot = (str(record.get("metric")), str(record.get("key")))
        if slot not in found or str(record.get("created", "")) >= str(found[slot].get("created", "")):
            found[slot] = record
    return found


def read_file(path: Path) -> list[dict[str, Any]]:
    """The records of a calibration file ([] when there is none)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise CalibrationFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise CalibrationFileError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("schema") != FILE_SCHEMA or not isinstance(data.get("calibrations"), list):
        raise CalibrationFileError(f"{path}: not an evalgate calibration file (schema {FILE_SCHEMA})")
    return [r for r in data["calibrations"] if isinstance(r, dict) and "metric" in r and "key" in r]


def write_file(path: Path, records: Iterable[dict[str, Any]]) -> None:
    """Merge ``records`` into the file at ``path`` (newest per metric and key kept) and write it atomically."""
    try:
        existing = read_file(path)
    except CalibrationFileError:
        existing = []
    merged = newest([*existing, *records])
    document = {"schema": FILE_SCHEMA, "calibrations": [merged[slot] for slot in sorted(merged)]}
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    try:
        temporary.write_text(json.dumps(document, indent=2, ensure_ascii=False, sort_keys=True) + "\n",
                             encoding="utf-8")
        temporary.replace(path)
    except OSError as exc:
        raise UserError(f"cannot write the calibration file ({exc.strerror or exc})", where=str(path)) from None


def save(db_path: Path, records: Iterable[dict[str, Any]]) -> None:
    """Append ``records`` to the database's ``eg_calibrations`` (created or migrated as a run's writer does)."""
    rows = [(str(r["metric"]), str(r["key"]), str(r["created"]), str(r["judge"]),
             json.dumps(r, ensure_ascii=False, sort_keys=True)) for r in records]
    connection = open_database(db_path)
    try:
        connection.executemany("INSERT OR REPLACE INTO eg_calibrations (metric, key, created, judge, record) "
                               "VALUES (?, ?, ?, ?, ?)", rows)
    finally:
        connection.close()


def load(db_path: Path) -> list[dict[str, Any]]:
    """Every calibration record in the database (read-only; [] when the file or the table is missing)."""
    if not db_path.is_file():
        return []
    try:
        connection = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    except sqlite3.Error:
        return []
    try:
        rows = connection.execute("SELECT record FROM eg_calibrations ORDER BY created").fetchall()
    except sqlite3.Error:
        return []
    finally:
        connection.close()
    records = []
    for (text,) in rows:
        try:
            record = json.loads(text)
        except ValueError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records
