"""Keep secrets out of everything evalgate prints or writes: the one redaction layer every exit uses.

What is a secret:

* values of environment variables whose names look like keys, tokens or passwords (``looks_secret``:
  ``OPENAI_API_KEY``, ``GITHUB_TOKEN``, ``DB_PASSWORD`` …), registered by ``register_environment``, which
  the edges (the CLI, the Action, ``build_settings``) call with the environment they were given: nothing
  here reads the process environment;
* values registered at run time (``register_secret``): credential header values and the credential
  after ``Bearer``/``Basic``, provider keys, ``${NAME}`` substitutions, secret-named ``eval_context``
  values, the Action's tokens;
* URL credentials (``split_credentials``): the user and password of ``scheme://user:password@host``,
  raw and percent-decoded, ``user:password`` and its base64 (the ``Authorization: Basic`` form, padded
  and not).

``redact(text)`` replaces every secret (longest first) with ``***`` and then every stretch of 8 or more
characters copied from a token-like secret (``FRAGMENT_CHARS``): a provider error cut at 300 characters
that ends with the first 25 characters of a key loses them too. A secret is token-like when a run of at
least ``FRAGMENT_SOURCE_CHARS`` letters, digits, ``-`` or ``_`` in it mixes two of lower case, upper case
and digits (a random key, not ``production`` or a path); only such runs give fragments, so a URL-valued
or path-valued secret never masks every ``https://`` or ``/home/runner`` of a report. A copied stretch
must mix two of them too, so an ordinary word that happens to sit inside a key (``evalgate`` in
``ghs_evalgateToken01…``, ``sk-proj-``) is left alone; 8 characters of a random key are mixed in all but
≈ 0.2 % of cases, longer ones practically always.

How fragments are found in linear time: every 4-character piece of every token-like run is indexed; the
text is probed at every 5th position (a stretch of ≥ 8 copied characters always contains an aligned
probe), and each probe that hits is extended both ways along the secret it came from. A text with no hit
costs one set lookup per 5 characters.

URL query parameters with secret-looking names (``?api_key=…``, ``&token=…``, ``&sig=…``) are a secret
form of their own: their values are registered when a URL setting is read (``split_credentials``) and
``redact`` masks the value of any such parameter in any text (``redact_query``), registered or not.

``redact_exact`` does the first step only: for records whose every untrusted part was already redacted
with ``redact`` where it entered (answers, errors, judge replies), so storing 100k records does not
probe each one again.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|SIGNATURE|SIG)\b|_KEY_|_TOKEN_", re.I)
MIN_SECRET_LENGTH = 6
MASK = "***"
FRAGMENT_CHARS = 8
"""Characters copied from a secret that are masked wherever they appear."""
FRAGMENT_SOURCE_CHARS = 10
"""Shortest run of a secret that gives fragments (shorter secrets are masked whole only)."""
_PROBE = 4
_STRIDE = FRAGMENT_CHARS - _PROBE + 1
"""A stretch of ``FRAGMENT_CHARS`` characters contains the probe at every ``_STRIDE``-th position."""
_TOKEN_RUN = re.compile(r"[A-Za-z0-9_\-]{" + str(FRAGMENT_SOURCE_CHARS) + ",}")

_registered: set[str] = set()
_frozen: frozenset[str] = frozenset()
_ordered: tuple[str, ...] = ()
"""The registered secrets, longest first (so a secret inside a longer one never leaves a piece behind)."""


@lru_cache(maxsize=4096)
def looks_secret(name: str) -> bool:
    """True when a variable or setting name suggests it holds a secret (memoised: names repeat)."""
    return bool(SECRET_NAME.search(name.replace("-", "_")))


SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key"})
SECRET_HEADER_PART = re.compile(r"authoriz|api[-_]?key|token|secret|cookie|password|passwd|signature|credential", re.I)


def is_secret_header(name: str) -> bool:
    """The one rule (CLI and Action alike) for headers whose values are secrets: ``Authorization``,
    cookies, API-key headers, and any name containing a key, token, secret, password, signature or
    credential word (``X-Auth``, ``Ocp-Apim-Subscription-Key``, ``X-Goog-Api-Key`` …)."""
    lowered = name.strip().lower()
    return lowered in SECRET_HEADERS or looks_secret(lowered) or bool(SECRET_HEADER_PART.search(lowered))


def register_secret(value: str | None) -> None:
    """Remember a value that must never be printed (only values of 6+ characters, to avoid noise)."""
    global _frozen, _ordered
    if value and len(value) >= MIN_SECRET_LENGTH and value not in _registered:
        _registered.add(value)
        _frozen = frozenset(_registered)
        _ordered = tuple(sorted(_registered, key=len, reverse=True))


def register_mapping_secrets(data: Any) -> None:
    """Register every text value under a secret-looking key of ``data`` (nested mappings and lists too):
    ``eval_context: {session_token: …}`` is masked in answers that echo it, not only in metadata."""
    if isinstance(data, Mapping):
        for key, value in data.items():
            if looks_secret(str(key)) and isinstance(value, str | int) and not isinstance(value, bool):
                register_secret(str(value))
            else:
                register_mapping_secrets(value)
    elif isinstance(data, list | tuple):
        for item in data:
            register_mapping_secrets(item)


QUERY_PARAMETER = re.compile(r"(?<=[?&;])([A-Za-z0-9_.\-\[\]]{1,64})=([^&#\s\"'<>]+)")
"""``name=value`` in a URL's query (after ``?``, ``&`` or ``;``)."""


def query_secrets(url: str | None) -> list[str]:
    """Values of a URL's query parameters whose names look secret (``?api_key=…``, ``&sig=…``,
    ``access_token``, ``X-Amz-Signature`` …: ``looks_secret``), raw and percent-decoded."""
    if not url or "=" not in url:
        return []
    found: list[str] = []
    for name, value in QUERY_PARAMETER.findall(url.partition("#")[0]):
        if looks_secret(unquote(name)):
            found += [value, unquote(value)]
    return found


def redact_query(text: str) -> str:
    """``text`` with the value of every secret-named URL query parameter replaced by ``***`` (one rule
    for every output: ``?api_key=abc`` → ``?api_key=***``), whether or not it was registered."""
    if "=" not in text:
        return text
    return QUERY_PARAMETER.sub(lambda m: f"{m[1]}={MASK}" if looks_secret(unquote(m[1])) else m[0], text)


def split_credentials(url: str) -> tuple[str, str | None]:
    """``url`` without its ``user:password@`` part, and the ``Authorization`` value that carries them
    (``Basic`` + base64 of ``user:password``, percent-decoded), or None when the URL has none. Every form
    of the credentials is registered as a secret. An unparseable URL is returned as it is."""
    for found in query_secrets(url):  # ``?api_key=…`` in a target or judge URL
        register_secret(found)
    try:
        parts = urlsplit(url)
        username, password = parts.username, parts.password
    except ValueError:
        return url, None
    if username is None and password is None:
        return url, None
    user, secret = unquote(username or ""), unquote(password or "")
    for value in (username, password, user, secret):
        register_secret(value)
    pair = f"{user}:{secret}"
    encoded = base64.b64encode(pair.encode()).decode()
    for value in (pair, encoded, encoded.rstrip("="), f"Basic {encoded}"):
        register_secret(value)
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment)), f"Basic {encoded}"


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


def _longest_first(secrets: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(secrets, key=len, reverse=True))


class _FragmentIndex:
    """Every ``_PROBE``-character piece of the token-like runs of a set of secrets → (run, offset)s."""

    __slots__ = ("pieces", "runs")

    def __init__(self, secrets: Iterable[str]) -> None:
        self.runs = sorted({run for secret in secrets for run in _TOKEN_RUN.findall(secret) if _mixed(run)})
        self.pieces: dict[str, list[tuple[str, int]]] = {}
        for run in self.runs:
            for offset in range(len(run) - _PROBE + 1):
                self.pieces.setdefault(run[offset : offset + _PROBE], []).append((run, offset))

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Disjoint sorted ``[start, end)`` stretches of ``text`` of ≥ ``FRAGMENT_CHARS`` characters copied
        from one run."""
        pieces = self.pieces
        last = len(text) - _PROBE
        if last < 0 or pieces.keys().isdisjoint(map(text.__getitem__, _probes(last))):
            return []
        found: list[tuple[int, int]] = []
        for position in range(0, last + 1, _STRIDE):
            for run, offset in pieces.get(text[position : position + _PROBE], ()):
                before = _common_suffix(text, position, run, offset)
                after = _common_prefix(text, position + _PROBE, run, offset + _PROBE)
                start, end = position - before, position + _PROBE + after
                if end - start >= FRAGMENT_CHARS and _mixed(text[start:end]):
                    found.append((start, end))
        found.sort()
        merged: list[tuple[int, int]] = []
        for start, end in found:
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
            else:
                merged.append((start, end))
        return merged


def _mixed(run: str) -> bool:
    """True when ``run`` mixes at least two of lower case, upper case and digits (a key, not a word)."""
    kinds = (any(c.islower() for c in run), any(c.isupper() for c in run), any(c.isdigit() for c in run))
    return sum(kinds) >= 2


_PROBE_SLICES: list[slice] = []


def _probes(last: int) -> list[slice]:
    """Slices of every ``_STRIDE``-th probe up to position ``last`` (kept and grown: built once)."""
    count = last // _STRIDE + 1
    while len(_PROBE_SLICES) < count:
        start = len(_PROBE_SLICES) * _STRIDE
        _PROBE_SLICES.append(slice(start, start + _PROBE))
    return _PROBE_SLICES[:count]


def _common_suffix(text: str, end: int, run: str, run_end: int) -> int:
    """How many characters before ``text[end]`` equal those before ``run[run_end]``."""
    count = 0
    while count < end and count < run_end and text[end - count - 1] == run[run_end - count - 1]:
        count += 1
    return count


def _common_prefix(text: str, start: int, run: str, run_start: int) -> int:
    """How many characters from ``text[start]`` equal those from ``run[run_start]``."""
    count = 0
    limit = min(len(text) - start, len(run) - run_start)
    while count < limit and text[start + count] == run[run_start + count]:
        count += 1
    return count


@lru_cache(maxsize=16)
def _fragment_index(secrets: frozenset[str]) -> _FragmentIndex:
    return _FragmentIndex(secrets)


def redact_exact(text: str, extra: Iterable[str] = ()) -> str:
    """Replace every known secret (longest first) in ``text`` with ``***``; no fragment search."""
    if not text:
        return text
    secrets = _ordered if not extra else _longest_first(_frozen | set(extra))
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def redact(text: str, extra: Iterable[str] = ()) -> str:
    """Replace every known secret (longest first) in ``text`` with ``***``, then every stretch of
    ``FRAGMENT_CHARS`` or more characters copied from a token-like secret (see the module docstring)."""
    if not text:
        return text
    text = redact_query(redact_exact(text, extra))
    index = _fragment_index(_frozen if not extra else _frozen | set(extra))
    if not index.runs:
        return text
    spans = index.spans(text)
    if not spans:
        return text
    pieces: list[str] = []
    kept = 0
    for start, end in spans:
        pieces += [text[kept:start], MASK]
        kept = end
    pieces.append(text[kept:])
    return "".join(pieces)


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
