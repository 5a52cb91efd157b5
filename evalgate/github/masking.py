"""Find every secret value a run knows and mask it before anything else is printed.

Sources: the ``github-token`` input (``INPUT_GITHUB-TOKEN``), the runner's ``ACTIONS_RUNTIME_TOKEN`` and
``ACTIONS_ID_TOKEN_REQUEST_TOKEN``, every variable whose name looks like a key or token (judge keys such
as ``OPENAI_API_KEY``), then — once settings exist — secret-looking ``target-headers`` values and
passwords embedded in URLs. Each value of at least ``MIN_SECRET_LENGTH`` characters is registered
with :mod:`evalgate.safety.redact` and announced with ``::add-mask::``.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Mapping
from urllib.parse import unquote, urlsplit

from evalgate.config.settings import CREDENTIAL_URLS, Settings
from evalgate.github.commands import add_mask
from evalgate.safety.redact import (
    MIN_SECRET_LENGTH,
    is_secret_header,
    looks_secret,
    query_secrets,
    register_secret,
    secrets_from_env,
    split_credentials,
)

ALWAYS_SECRET = ("INPUT_GITHUB-TOKEN", "ACTIONS_RUNTIME_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_TOKEN", "GITHUB_TOKEN")


def env_secrets(env: Mapping[str, str]) -> list[str]:
    """Secret values in the environment, longest first (so a mask never hides part of a longer one)."""
    values = set(secrets_from_env(env))
    values |= {env[name] for name in ALWAYS_SECRET if env.get(name)}
    return _usable(values)


def settings_secrets(settings: Settings) -> list[str]:
    """Credential header values (and their part after a scheme such as ``Bearer``), URL passwords, and the keys
    given as settings (the judge's from a dialect's config file, Langfuse's secret key)."""
    secret = [value for name, value in settings.target_headers.items() if is_secret_header(name)]
    values = set(secret) | {value.split(" ", 1)[1].strip() for value in secret if " " in value.strip()}
    for name in CREDENTIAL_URLS:
        values |= set(url_credentials(settings.credentialed_url(name)))
        values |= set(query_secrets(settings.credentialed_url(name)))
    values |= {key for key in (settings.judge_api_key, settings.langfuse_secret_key) if key}
    values |= set(_secret_values(settings.eval_context))
    return _usable(values)


def url_password(url: str | None) -> list[str]:
    """The password of ``scheme://user:password@host`` (raw and percent-decoded), else nothing."""
    if not url:
        return []
    try:
        password = urlsplit(url).password
    except ValueError:
        return []
    return [password, unquote(password)] if password else []


def url_credentials(url: str | None) -> list[str]:
    """Every form of a URL's credentials: the password (raw, percent-decoded), ``user:password`` and its
    base64 (the ``Authorization: Basic`` value, padded and not)."""
    authorization = split_credentials(url)[1] if url else None
    if authorization is None:
        return []
    encoded = authorization.removeprefix("Basic ")
    pair = base64.b64decode(encoded).decode("utf-8", "replace")
    return [*url_password(url), pair, encoded, encoded.rstrip("=")]


def _secret_values(data: object) -> Iterable[str]:
    """Text values under secret-looking keys of ``data`` (``eval_context: {session_token: …}``)."""
    if isinstance(data, Mapping):
        for key, value in data.items():
            if looks_secret(str(key)) and isinstance(value, str | int) and not isinstance(value, bool):
                yield str(value)
            else:
                yield from _secret_values(value)
    elif isinstance(data, list | tuple):
        for item in data:
            yield from _secret_values(item)


def mask_all(values: Iterable[str], emit: Callable[[str], None]) -> int:
    """Register each value with the redactor and print its ``::add-mask::``; returns how many."""
    count = 0
    for value in values:
        register_secret(value)
        emit(add_mask(value))
        count += 1
    return count


def _usable(values: Iterable[str]) -> list[str]:
    kept = {v for v in values if v and v.strip() and len(v) >= MIN_SECRET_LENGTH}
    return sorted(kept, key=lambda v: (-len(v), v))
