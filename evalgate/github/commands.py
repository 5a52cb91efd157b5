"""GitHub Actions workflow commands written to stdout: annotations, masks, stop-commands.

Format ``::name k=v,k=v::message`` (one line). Escaping, as the runner decodes it:
message (data): ``%`` → ``%25``, ``\\r`` → ``%0D``, ``\\n`` → ``%0A``; property values additionally
``:`` → ``%3A`` and ``,`` → ``%2C`` (``%`` first). The runner keeps at most 10 annotations per type
per step and cuts messages to 4096 characters.

Untrusted text printed to the log can carry its own commands: the runner parses ``::cmd::`` at the
start of a line (after trimming leading whitespace) and the legacy ``##[cmd]`` *anywhere* in a line.
``neutralise`` defuses both with a zero-width space; ``stop_commands`` wraps text so the runner
ignores every command in it until a random token ends the block.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping
from typing import Literal, TypedDict, Unpack

from evalgate.report.escape import strip_controls
from evalgate.safety.redact import redact

Level = Literal["error", "warning", "notice"]
MAX_MESSAGE_CHARS = 4096
ZWSP = "\u200b"



class AnnotationProperties(TypedDict, total=False):
    """Optional annotation properties (``file`` is workspace-relative or absolute; lines 1-based)."""

    file: str | None
    line: int | None
    end_line: int | None
    col: int | None
    end_column: int | None
    title: str | None


_LINE_SPLIT = re.compile(r"(\r\n|[\r\n\x0b\x0c\x1c-\x1e\x85\u2028\u2029])")


def escape_data(value: str) -> str:
    """Escape a command message: ``%`` → ``%25``, CR → ``%0D``, LF → ``%0A``."""
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    """Escape a property value: data escaping plus ``:`` → ``%3A`` and ``,`` → ``%2C``."""
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def format_command(name: str, message: str = "", properties: Mapping[str, object] | None = None) -> str:
    """``::name k=v,…::message`` with escaping; falsy property values are left out. Secrets redacted,
    NUL, control and bidirectional formatting characters dropped."""
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9-]*", name):
        raise ValueError(f"invalid workflow command name {name!r}")
    props = ",".join(
        f"{key}={escape_property(strip_controls(redact(str(value))))}"
        for key, value in (properties or {}).items()
        if value not in (None, "", False, 0)
    )
    head = f"::{name} {props}" if props else f"::{name}"
    return f"{head}::{escape_data(strip_controls(redact(message)))}"


def annotation(
    level: Level,
    message: str,
    *,
    file: str | None = None,
    line: int | None = None,
    end_line: int | None = None,
    col: int | None = None,
    end_column: int | None = None,
    title: str | None = None,
) -> str:
    """An ``::error``/``::warning``/``::notice`` line; the message is cut to 4096 characters."""
    if level not in ("error", "warning", "notice"):
        raise ValueError(f"invalid annotation level {level!r}")
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[: MAX_MESSAGE_CHARS - 1] + "…"
    properties = {
        "file": file,
        "line": line,
        "endLine": end_line,
        "col": col,
        "endColumn": end_column,
        "title": title,
    }
    return format_command(level, message, properties)


def error(message: str, **properties: Unpack[AnnotationProperties]) -> str:
    """``::error …::message`` (see ``annotation`` for the properties)."""
    return annotation("error", message, **properties)


def warning(message: str, **properties: Unpack[AnnotationProperties]) -> str:
    """``::warning …::message``."""
    return annotation("warning", message, **properties)


def notice(message: str, **properties: Unpack[AnnotationProperties]) -> str:
    """``::notice …::message``."""
    return annotation("notice", message, **properties)


def add_mask(value: str) -> str:
    """``::add-mask::value``: the runner hides ``value`` in all later log lines. Print it first.

    A multi-line value gives one command per non-blank line (the runner masks line by line).
    """
    if not value.strip():
        raise ValueError("cannot mask an empty value")
    return "\n".join(f"::add-mask::{escape_data(part)}" for part in _nonempty_lines(value))


def new_stop_token() -> str:
    """A random token for ``::stop-commands::`` (never guessable from the wrapped text)."""
    return f"evalgate-{uuid.uuid4().hex}"


def stop_commands(text: str, token: str | None = None) -> str:
    """Wrap ``text`` so the runner processes no workflow command inside it.

    ``::stop-commands::TOKEN`` … ``::TOKEN::``; the token is random and must not occur in ``text``.
    """
    token = token or new_stop_token()
    if not token or token in text:
        raise ValueError("the stop-commands token must be non-empty and absent from the text")
    body = text if text.endswith("\n") or not text else text + "\n"
    return f"::stop-commands::{token}\n{body}::{token}::"


def neutralise(text: str) -> str:
    """Defuse workflow commands in untrusted text without hiding it.

    A line whose first non-blank characters are ``::`` gets a zero-width space between the colons;
    every ``##[`` becomes ``##`` + ZWSP + ``[``. Every Unicode line break counts as a line start.
    """
    parts = _LINE_SPLIT.split(text)
    for i in range(0, len(parts), 2):
        line = parts[i]
        body = line.lstrip()
        if body.startswith("::"):
            parts[i] = line[: len(line) - len(body)] + ":" + ZWSP + body[1:]
    return "".join(parts).replace("##[", "##" + ZWSP + "[")


def _nonempty_lines(value: str) -> list[str]:
    return [part for part in re.split(r"\r\n|\r|\n", value) if part.strip()]


RUNNER_LIMIT_PER_TYPE = 10
"""The runner records at most this many errors, warnings and notices per step (the rest stay in the log)."""


class CountingEmit:
    """Wraps an emit function and counts the annotations (``::error``/``::warning``/``::notice``) it printed,
    so later, less important annotations take only what is left of the runner's per-step budget."""

    def __init__(self, emit: Callable[[str], None]) -> None:
        self.emit = emit
        self.counts: dict[str, int] = {"error": 0, "warning": 0, "notice": 0}

    def __call__(self, line: str) -> None:
        match = re.match(r"\s*::(error|warning|notice)[ :]", line)
        if match:
            self.counts[match.group(1)] += 1
        self.emit(line)

    def left(self, level: Level) -> int:
        """How many more ``level`` annotations the runner will still record in this step."""
        return max(0, RUNNER_LIMIT_PER_TYPE - self.counts[level])


def counting(emit: Callable[[str], None]) -> CountingEmit:
    """``emit`` itself when it already counts, else a counting wrapper."""
    return emit if isinstance(emit, CountingEmit) else CountingEmit(emit)
