#!/usr/bin/env bash
# evalgate for the host-mode action: a virtual environment built from this checkout of the action
# (the ref in `uses: evalgate/evalgate/host@REF`), so host mode always runs the same code as the
# container action of that ref.
#   install.sh plan      → step outputs venv=<dir> and key=<cache key>
#   install.sh install   → create the environment unless a complete one is already there
#   install.sh artifact  → step outputs upload=true|false (upload-artifacts read by evalgate's own parser;
#                          false with a notice on GitHub Enterprise Server), name=<artifact name> and
#                          judge-cache=<file>
# Linux and macOS runners (bash 3.2, BSD tools: no GNU-only options); Windows stops at plan with an error.
# The environment lives in RUNNER_TOOL_CACHE (kept by self-hosted runners and act; actions/cache keeps it
# on GitHub-hosted runners), keyed by the OS, the full Python version (a venv points at its interpreter: a
# patch update needs a new one), the CPU and a hash of the dependency lock, so
# the dependencies (the slow part) survive evalgate updates; evalgate itself is reinstalled whenever its
# sources differ from the ones recorded in the environment. Dependencies come from requirements.lock
# with hashes checked.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source_dir=$(cd "$here/.." && pwd)
python=${EVALGATE_PYTHON:-python3}

fail() { echo "::error title=evalgate host mode::$1"; exit 2; }
# sha256 of stdin or of the files named, in sha256sum's format (macOS has shasum, not sha256sum); an array,
# not a function, so that xargs can run it
if command -v sha256sum >/dev/null 2>&1; then sha256=(sha256sum); else sha256=(shasum -a 256); fi

case "${RUNNER_OS:-$(uname -s)}" in
  Windows|MINGW*|MSYS*|CYGWIN*)
    fail "host mode runs on Linux and macOS runners, not Windows: run the job on ubuntu-latest or macos-latest (or use the container action on Linux)" ;;
esac
command -v "$python" >/dev/null 2>&1 || fail "no $python on PATH: add actions/setup-python (3.11 or newer) before this step, or set input python"
pyver=$("$python" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || fail "evalgate needs Python 3.11 or newer; $python is $pyver"

case "${1:-}" in
  plan)
    digest=$("${sha256[@]}" < "$source_dir/requirements.lock" | cut -c1-16)
    arch=$(uname -m)
    os=$(uname -s | tr '[:upper:]' '[:lower:]')
    key="evalgate-host-deps-${os}-py${pyver}-${arch}-${digest}"
    venv="${RUNNER_TOOL_CACHE:-${RUNNER_TEMP:-/tmp}}/evalgate/${key}"
    echo "venv=$venv" >> "$GITHUB_OUTPUT"
    echo "key=$key" >> "$GITHUB_OUTPUT"
    echo "evalgate host mode: environment $venv"
    ;;
  install)
    venv=${EVALGATE_VENV:?EVALGATE_VENV is not set}
    sources=$(cd "$source_dir" && find pyproject.toml setup.py evalgate entrypoint datasets -type f \
                -not -path '*/__pycache__/*' -not -name '*.pyc' -print0 | LC_ALL=C sort -z | xargs -0 "${sha256[@]}" \
                | "${sha256[@]}" | cut -c1-16)
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
  artifact)
    venv=${EVALGATE_VENV:?EVALGATE_VENV is not set}
    # evalgate's own rules: the boolean parser and the artifact name (artifact-name, else from comment-tag)
    decided=$("$venv/bin/python" -P - <<'PY'
import os
import sys

from evalgate.errors import UserError
from evalgate.github.publish import default_artifact_name, parse_bool

try:
    upload = parse_bool(os.environ.get("EVALGATE_UPLOAD"), "upload-artifacts", default=True)
except UserError as exc:
    print(f"::error title=evalgate host mode::{exc}")
    sys.exit(2)
name = (os.environ.get("EVALGATE_ARTIFACT_NAME") or "").strip()
tag = (os.environ.get("EVALGATE_COMMENT_TAG") or "").strip() or "default"
print("true" if upload else "false", name or default_artifact_name(tag))
PY
) || { echo "$decided"; exit 2; }
    read -r upload name <<EOF2
$decided
EOF2
    server=${GITHUB_SERVER_URL:-https://github.com}
    case "$server" in
      https://github.com|https://*.ghe.com) ;;
      *)
        if [ "$upload" = true ]; then
          echo "::notice title=evalgate host mode::GitHub Enterprise Server ($server) has no artifacts v4: results not uploaded (they stay in the workspace); docs/targets.md#github-enterprise-server"
        fi
        upload=false ;;
    esac
    db=${EVALGATE_RESULTS_DB:-}
    echo "upload=$upload" >> "$GITHUB_OUTPUT"
    echo "name=$name" >> "$GITHUB_OUTPUT"
    echo "judge-cache=${db:+$(dirname "$db")/judge-cache.db}" >> "$GITHUB_OUTPUT"
    ;;
  *)
    echo "usage: install.sh plan|install|artifact" >&2
    exit 2
    ;;
esac
