#!/usr/bin/env bash
# evalgate for the host-mode action: a virtual environment built from this checkout of the action
# (the ref in `uses: evalgate/evalgate/host@REF`), so host mode always runs the same code as the
# container action of that ref.
#   install.sh plan     → step outputs venv=<dir> and key=<cache key>
#   install.sh install  → create the environment unless a complete one is already there
# The environment lives in RUNNER_TOOL_CACHE (kept by self-hosted runners and act; actions/cache keeps it
# on GitHub-hosted runners), keyed by the Python version, the CPU and a hash of the dependency lock, so
# the dependencies (the slow part) survive evalgate updates; evalgate itself is reinstalled whenever its
# sources differ from the ones recorded in the environment. Dependencies come from requirements.lock
# with hashes checked.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source_dir=$(cd "$here/.." && pwd)
python=${EVALGATE_PYTHON:-python3}

fail() { echo "::error title=evalgate host mode::$1"; exit 2; }

command -v "$python" >/dev/null 2>&1 || fail "no $python on PATH: add actions/setup-python (3.11 or newer) before this step, or set input python"
pyver=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || fail "evalgate needs Python 3.11 or newer; $python is $pyver"

case "${1:-}" in
  plan)
    digest=$(sha256sum "$source_dir/requirements.lock" | cut -c1-16)
    arch=$(uname -m)
    key="evalgate-host-deps-py${pyver}-${arch}-${digest}"
    venv="${RUNNER_TOOL_CACHE:-${RUNNER_TEMP:-/tmp}}/evalgate/${key}"
    echo "venv=$venv" >> "$GITHUB_OUTPUT"
    echo "key=$key" >> "$GITHUB_OUTPUT"
    echo "evalgate host mode: environment $venv"
    ;;
  install)
    venv=${EVALGATE_VENV:?EVALGATE_VENV is not set}
    sources=$(cd "$source_dir" && find pyproject.toml setup.py evalgate entrypoint datasets -type f \
                -not -path '*/__pycache__/*' -not -name '*.pyc' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum \
                | sha256sum | cut -c1-16)
    started=$(date +%s)
    export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
    if [ -f "$venv/.evalgate-deps" ] && "$venv/bin/python" -c 'import pydantic, aiohttp' 2>/dev/null; then
      deps="cached dependencies"
    else
      rm -rf "$venv"
      "$python" -m venv "$venv"
      "$venv/bin/python" -m pip install -q --no-deps --require-hashes --only-binary=:all: -r "$source_dir/requirements.lock"
      touch "$venv/.evalgate-deps"
      deps="dependencies installed"
    fi
    if [ "$(cat "$venv/.evalgate-source" 2>/dev/null)" = "$sources" ] && "$venv/bin/python" -c 'import evalgate, entrypoint' 2>/dev/null; then
      echo "evalgate host mode: cached environment ($("$venv/bin/evalgate" --version), $deps)"
      exit 0
    fi
    "$venv/bin/python" -m pip install -q --no-deps --force-reinstall "$source_dir"
    "$venv/bin/python" -m pip check >/dev/null
    echo "$sources" > "$venv/.evalgate-source"
    echo "evalgate host mode: $deps, installed $("$venv/bin/evalgate" --version) from this ref in $(( $(date +%s) - started )) s"
    ;;
  *)
    echo "usage: install.sh plan|install" >&2
    exit 2
    ;;
esac
