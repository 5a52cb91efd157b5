"""Keep secrets out of everything evalgate prints or writes.

Secrets are collected from the environment (names that look like keys/tokens/passwords) and from
values registered at run time; ``redact(text)`` replaces each with ``***``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|SIGNATURE|SIG)\b|_KEY_|_TOKEN_", re.I)
MIN_SECRET_LENGTH = 6
MASK = "***"

_registered: set[str] = set()


def looks_secret(name: str) -> bool:
    """True when a variable or setting name suggests it holds a secret."""
    return bool(SECRET_NAME.search(name.replace("-", "_")))


def register_secret(value: str | None) -> None:
    """Remember a value that must never be printed (only values of 6+ characters, to avoid noise)."""
    if value and len(value) >= MIN_SECRET_LENGTH:
        _registered.add(value)


def secrets_from_env(env: Mapping[str, str] | None = None) -> set[str]:
    env = os.environ if env is None else env
    return {v for k, v in env.items() if looks_secret(k) and v and len(v) >= MIN_SECRET_LENGTH}


def known_secrets() -> set[str]:
    return _registered | secrets_from_env()


def redact(text: str, extra: Iterable[str] = ()) -> str:
    """Replace every known secret (longest first) in ``text`` with ``***``."""
    if not text:
        return text
    for secret in sorted(known_secrets() | set(extra), key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def redact_mapping(data: Any) -> Any:
    """Copy ``data`` with values under secret-looking keys masked and known secrets redacted."""
    if isinstance(data, Mapping):
        return {
            k: (MASK if looks_secret(str(k)) and v not in (None, "", False) else redact_mapping(v))
            for k, v in data.items()
        }
    if isinstance(data, list | tuple):
        return [redact_mapping(v) for v in data]
    if isinstance(data, str):
        return redact(data)
    return data
