# evalgate as a Docker container action (action.yml: runs.using docker, image Dockerfile).
# GitHub's guidance for action images: run as root (no USER), do not rely on WORKDIR (the runner mounts
# the workspace at /github/workspace and makes it the working directory), exec-form ENTRYPOINT so the
# runner's args are appended. Layers go from least to most often changed: lock → dependencies →
# tiktoken encodings → code → bundled demo datasets.
#
# PYTHON_IMAGE: the base image. Local and fork builds take the tag; the release workflow
# (.github/workflows/release.yml) passes the same tag pinned by digest (BASE_IMAGE there, refreshed
# with .github/pin-base-image.sh), so a published image never changes under a moving tag.
ARG PYTHON_IMAGE=python:3.12-slim
FROM ${PYTHON_IMAGE}

# The release workflow adds version, revision, created and the base image's digest (docker/metadata-action).
LABEL org.opencontainers.image.title="evalgate" \
      org.opencontainers.image.description="Gate pull requests on the quality of LLM and agent systems" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/evalgate/evalgate" \
      org.opencontainers.image.documentation="https://github.com/evalgate/evalgate#readme"

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONPATH=/opt/evalgate
# DL3064 matches "TOKEN" inside the name; this is tiktoken's cache directory, a path and no secret.
# hadolint ignore=DL3064
ENV TIKTOKEN_CACHE_DIR=/opt/evalgate/tiktoken-cache

COPY requirements.lock /opt/evalgate/requirements.lock
RUN pip install --no-cache-dir --no-deps --require-hashes --only-binary=:all: -r /opt/evalgate/requirements.lock \
    && pip check

COPY entrypoint/cache_encodings.py /opt/evalgate/build/cache_encodings.py
RUN python /opt/evalgate/build/cache_encodings.py --timeout 60

COPY evalgate/ /opt/evalgate/evalgate/
COPY entrypoint/ /opt/evalgate/entrypoint/
RUN python -m compileall -q /opt/evalgate/evalgate /opt/evalgate/entrypoint \
    && ln -s /opt/evalgate/entrypoint/demo-agent /usr/local/bin/evalgate-demo-agent

COPY datasets/ /opt/evalgate/datasets/

# -P: never put the working directory (the user's checkout) on sys.path ahead of evalgate's own modules.
ENTRYPOINT ["python", "-P", "-m", "entrypoint.main"]
