#!/usr/bin/env bash
# Refresh the release's base image pin by hand (Dependabot proposes the same change weekly):
# .github/base-image/Dockerfile becomes FROM <the Dockerfile's base tag>@<its current multi-platform digest>.
# Needs docker with buildx and registry access. Run it, review the diff, commit; the next release builds
# on the new base. tests/house/test_release.py checks the pin's shape and tag.
set -euo pipefail
cd "$(dirname "$0")/.."
tag=$(sed -n 's/^ARG PYTHON_IMAGE=//p' Dockerfile)
digest=$(docker buildx imagetools inspect "$tag" --format '{{json .Manifest}}' \
  | python3 -c 'import json, sys; print(json.load(sys.stdin)["digest"])')
case "$digest" in sha256:*) ;; *) echo "no digest for $tag: $digest" >&2; exit 1 ;; esac
sed -i -E "s#^FROM .*#FROM ${tag}@${digest}#" .github/base-image/Dockerfile
grep -n '^FROM' .github/base-image/Dockerfile
