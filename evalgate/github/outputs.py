"""Step outputs (``GITHUB_OUTPUT``) and the job summary (``GITHUB_STEP_SUMMARY``).

Outputs use the heredoc form the runner parses::

    name<<ghadelimiter_<uuid4>
    value lines
    ghadelimiter_<uuid4>

with a fresh delimiter per value; a name or value that contains its delimiter is refused (as the
toolkit does). The runner uploads nothing when the summary file exceeds 1024 KiB, so evalgate keeps
it under ``SUMMARY_LIMIT_BYTES`` = 1,000,000 UTF-8 bytes, dropping case details first.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalgate.errors import UserError
from evalgate.report.markdown import SourceLinks, render_summary, utf8_len

SUMMARY_LIMIT_BYTES = 1_000_000
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def format_output(name: str, value: str, delimiter: str | None = None) -> str:
    """One heredoc output record (ending with a newline)."""
    if not _NAME.fullmatch(name):
        raise ValueError(f"invalid output name {name!r}: use letters, digits, '_' and '-'")
    delimiter = delimiter or f"ghadelimiter_{uuid.uuid4()}"
    if delimiter in name:
        raise ValueError(f"output name must not contain the delimiter {delimiter}")
    if delimiter in value:
        raise ValueError(f"output {name!r}: value must not contain the delimiter {delimiter}")
    return f"{name}<<{delimiter}\n{value}\n{delimiter}\n"


def write_outputs(path: str | Path | None, outputs: Mapping[str, Any]) -> bool:
    """Append every output (``str(value)``, booleans as ``true``/``false``) to ``GITHUB_OUTPUT``.

    Returns False when ``path`` is unset (not running in Actions); an unwritable file is a ``UserError``.
    """
    if not path:
        return False
    records = "".join(format_output(name, _output_text(value)) for name, value in outputs.items())
    _append(path, records, "GITHUB_OUTPUT")
    return True


def append_summary(path: str | Path | None, markdown: str, *, limit: int = SUMMARY_LIMIT_BYTES) -> bool:
    """Append ``markdown`` to ``GITHUB_STEP_SUMMARY`` if the file stays within ``limit`` bytes.

    Returns False when ``path`` is unset; raises ``ValueError`` when the text would not fit (use
    ``write_summary_report``, which sizes the report to the remaining room).
    """
    if not path:
        return False
    if existing_size(path) + utf8_len(markdown) > limit:
        raise ValueError(f"job summary would exceed {limit} bytes")
    _append(path, markdown, "GITHUB_STEP_SUMMARY")
    return True


def write_summary_report(
    path: str | Path | None,
    results: Mapping[str, Any],
    *,
    run_url: str | None,
    artifact_url: str | None,
    tag: str = "",
    template_path: Path | None = None,
    source_links: SourceLinks | None = None,
    limit: int = SUMMARY_LIMIT_BYTES,
) -> str | None:
    """Render the report into the room left in the summary file (details dropped first) and append it.

    Returns the Markdown written, or None when ``path`` is unset or the file is already full.
    """
    if not path:
        return None
    room = limit - existing_size(path) - 1  # one byte for the separating newline
    if room <= 0:
        return None
    markdown = render_summary(
        results,
        run_url=run_url,
        artifact_url=artifact_url,
        tag=tag,
        template_path=template_path,
        max_bytes=room,
        source_links=source_links,
    )
    append_summary(path, "\n" + markdown, limit=limit)
    return markdown


def existing_size(path: str | Path) -> int:
    """Current size of ``path`` in bytes (0 when it does not exist)."""
    try:
        return Path(path).stat().st_size
    except FileNotFoundError:
        return 0


def _output_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _append(path: str | Path, text: str, variable: str) -> None:
    try:
        with open(path, "a", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
    except OSError as exc:
        raise UserError(f"cannot append: {exc.strerror}", where=f"{variable}={path}") from None
