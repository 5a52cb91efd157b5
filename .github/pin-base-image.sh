#!/usr/bin/env bash
# Refresh the release's base image pin: BASE_IMAGE in .github/workflows/release.yml becomes the
# Dockerfile's base tag (ARG PYTHON_IMAGE) at the digest of its current multi-platform index.
# Needs docker with buildx and registry access. Run it, review the diff, commit; a release built
# afterwards uses the new base. tests/test_release.py checks the pin's shape and tag.
set -euo pipefail
cd "$(dirname "$0")/.."
tag=$(sed -n 's/^ARG PYTHON_IMAGE=//p' Dockerfile)
digest=$(docker buildx imagetools inspect "$tag" --format '{{json .Manifest}}' \
  | python3 -c 'import json, sys; print(json.load(sys.stdin)["digest"])')
case "$digest" in sha256:*) ;; *) echo "no digest for $tag: $digest" >&2; exit 1 ;; esac
sed -i -E "s#^(  BASE_IMAGE: ).*#\1${tag}@${digest}#" .github/workflows/release.yml
grep -n 'BASE_IMAGE:' .github/workflows/release.yml
