"""Keep secrets out of everything evalgate prints or writes.

Secrets are registered: values found in an environment under names that look like keys, tokens or
passwords (``register_environment``, called by the edges with the environment they were given) and
values known at run time (``register_secret``); ``redact(text)`` replaces each with ``***``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|SIGNATURE|SIG)\b|_KEY_|_TOKEN_", re.I)
MIN_SECRET_LENGTH = 6
MASK = "***"

_registered: set[str] = set()
_ordered: tuple[str, ...] = ()
"""The registered secrets, longest first (so a secret inside a longer one never leaves a piece behind)."""


@lru_cache(maxsize=4096)
def looks_secret(name: str) -> bool:
    """True when a variable or setting name suggests it holds a secret (memoised: names repeat)."""
    return bool(SECRET_NAME.search(name.replace("-", "_")))


def register_secret(value: str | None) -> None:
    """Remember a value that must never be printed (only values of 6+ characters, to avoid noise)."""
    global _ordered
    if value and len(value) >= MIN_SECRET_LENGTH and value not in _registered:
        _registered.add(value)
        _ordered = tuple(sorted(_registered, key=len, reverse=True))


def secrets_from_env(env: Mapping[str, str]) -> set[str]:
    """The values of ``env`` whose names look secret (6+ characters)."""
    return {v for k, v in env.items() if looks_secret(k) and v and len(v) >= MIN_SECRET_LENGTH}


def register_environment(env: Mapping[str, str]) -> None:
    """Register the secrets of an environment. The edges (the CLI, the Action, ``build_settings``) and
    the run (``Settings.environment``) call it with the environment they were given; nothing here
    reads the process environment."""
    for value in secrets_from_env(env):
        register_secret(value)


def known_secrets() -> set[str]:
    return set(_registered)


def redact(text: str, extra: Iterable[str] = ()) -> str:
    """Replace every registered secret (longest first) and every ``extra`` one in ``text`` with ``***``."""
    if not text:
        return text
    secrets = _ordered
    if extra:
        secrets = tuple(sorted(set(secrets) | set(extra), key=len, reverse=True))
    for secret in secrets:
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
