"""Keep secrets out of everything evalgate prints or writes.

Secrets are collected from the environment (names that look like keys/tokens/passwords) and from
values registered at run time; ``redact(text)`` replaces each with ``***``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|SIGNATURE|SIG)\b|_KEY_|_TOKEN_", re.I)
MIN_SECRET_LENGTH = 6
MASK = "***"

_registered: set[str] = set()


@lru_cache(maxsize=4096)
def looks_secret(name: str) -> bool:
    """True when a variable or setting name suggests it holds a secret (memoised: names repeat)."""
    return bool(SECRET_NAME.search(name.replace("-", "_")))


def register_secret(value: str | None) -> None:
    """Remember a value that must never be printed (only values of 6+ characters, to avoid noise)."""
    if value and len(value) >= MIN_SECRET_LENGTH:
        _registered.add(value)


def secrets_from_env(env: Mapping[str, str] | None = None) -> set[str]:
    if env is None:
        return set(_environ_secrets())
    return {v for k, v in env.items() if looks_secret(k) and v and len(v) >= MIN_SECRET_LENGTH}


_environ_seen: dict[Any, Any] | None = None
_environ_found: frozenset[str] = frozenset()


def _environ_secrets() -> frozenset[str]:
    """Secrets in ``os.environ``, rescanned only when the environment changed since the last scan.

    ``redact`` runs once per case or more; scanning (and decoding) every variable each time cost ~1/7
    of a 10k-case deterministic run. The change test compares the raw mapping behind ``os.environ``
    (~1 µs), so ``setenv``/``putenv`` through ``os.environ`` are always seen."""
    global _environ_seen, _environ_found
    raw = getattr(os.environ, "_data", None)
    if raw is None:  # not CPython's os._Environ: no cheap change test, scan every time
        return frozenset(v for k, v in os.environ.items() if looks_secret(k) and v and len(v) >= MIN_SECRET_LENGTH)
    if raw != _environ_seen:
        _environ_found = frozenset(
            v for k, v in os.environ.items() if looks_secret(k) and v and len(v) >= MIN_SECRET_LENGTH
        )
        _environ_seen = dict(raw)
    return _environ_found


def known_secrets() -> set[str]:
    return _registered | _environ_secrets()


@lru_cache(maxsize=64)
def _longest_first(secrets: frozenset[str]) -> tuple[str, ...]:
    return tuple(sorted(secrets, key=len, reverse=True))


def redact(text: str, extra: Iterable[str] = ()) -> str:
    """Replace every known secret (longest first) in ``text`` with ``***``."""
    if not text:
        return text
    secrets = known_secrets()
    if extra:
        secrets |= set(extra)
    for secret in _longest_first(frozenset(secrets)):
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
