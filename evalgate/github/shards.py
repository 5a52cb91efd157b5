"""Sharding in the Action: a shard job uploads ``<artifact>-shard-<i>-of-<n>`` and posts no comment; the
merge step (``mode: merge``) finds this workflow run's shard artifacts and downloads them.

Listing and download go through the same artifacts v4 service the upload uses (Twirp ``ListArtifacts`` and
``GetSignedArtifactURL`` with the job's ``ACTIONS_RUNTIME_TOKEN``, as ``actions/download-artifact`` does
for its own run), so the merge step needs no ``actions: read`` and sees artifacts of jobs that finished
moments ago. Each zip is read with a size cap and only ``results.json``, ``results.db`` and
``judge-cache.db`` are written out (one directory per shard); anything else in it is ignored.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Mapping
from pathlib import Path

import httpx

from evalgate import __version__
from evalgate.errors import UserError
from evalgate.github.artifacts import (
    RESULTS_URL_VAR,
    TOKEN_VAR,
    ArtifactServiceError,
    RetryPolicy,
    TwirpClient,
    backend_ids,
    response_field,
)
from evalgate.github.baseline import MAX_MEMBER_BYTES, BaselineUnavailable, fetch_without_auth
from evalgate.safety.redact import register_secret

SHARD_FILES = ("results.json", "results.db", "judge-cache.db")
MAX_SHARD_ZIP_BYTES = MAX_MEMBER_BYTES * 3


def shard_artifact_name(base: str, shard: tuple[int, int]) -> str:
    """``<base>-shard-<i>-of-<n>``: one name per shard, so parallel uploads never collide (409)."""
    return f"{base}-shard-{shard[0]}-of-{shard[1]}"


def shard_of_name(base: str, name: str) -> tuple[int, int] | None:
    """``(i, n)`` when ``name`` is a shard artifact of ``base``, else None."""
    match = re.fullmatch(re.escape(base) + r"-shard-(\d+)-of-(\d+)", name)
    return (int(match.group(1)), int(match.group(2))) if match else None


def download_shards(base: str, destination: Path, env: Mapping[str, str], *,
                    timeout: float = 60.0) -> list[Path]:
    """Download this run's ``<base>-shard-*`` artifacts into ``destination/<name>/``; returns the
    directories in shard order. A ``UserError`` when the service is unreachable or none exists."""
    token, results_url = env.get(TOKEN_VAR), env.get(RESULTS_URL_VAR)
    if not token or not results_url:
        raise UserError(f"{TOKEN_VAR} and {RESULTS_URL_VAR} are not set: mode merge runs as a step of the "
                        "workflow whose shard jobs uploaded their results", where="input 'mode'")
    register_secret(token)
    try:
        ids = backend_ids(token)
        identity = {"workflow_run_backend_id": ids.workflow_run, "workflow_job_run_backend_id": ids.workflow_job_run}
        with httpx.Client(timeout=timeout, headers={"User-Agent": f"evalgate/{__version__}"}) as client:
            twirp = TwirpClient(client, results_url, token, RetryPolicy())
            listed = response_field(twirp.call("ListArtifacts", identity), "artifacts") or []
            names = sorted({str(a.get("name")) for a in listed if isinstance(a, dict)
                            and shard_of_name(base, str(a.get("name")))},
                           key=lambda name: shard_of_name(base, name) or (0, 0))
            if not names:
                raise UserError(f"no artifact named {base}-shard-<i>-of-<n> in this workflow run: run the shard "
                                "jobs first (needs:) with the same artifact-name and comment-tag", where="input 'mode'")
            directories = []
            for name in names:
                signed = response_field(twirp.call("GetSignedArtifactURL", {**identity, "name": name}), "signed_url")
                if not isinstance(signed, str) or not signed:
                    raise ArtifactServiceError(f"GetSignedArtifactURL: no signed_url for {name}")
                directories.append(extract(fetch_without_auth(signed, max_bytes=MAX_SHARD_ZIP_BYTES),
                                           destination / name, where=name))
    except (ArtifactServiceError, BaselineUnavailable) as exc:
        raise UserError(f"shard artifacts not downloaded: {exc}", where="input 'mode'") from None
    return directories


def extract(data: bytes, directory: Path, *, where: str) -> Path:
    """Write the zip's ``SHARD_FILES`` (top level, each at most ``MAX_MEMBER_BYTES``) into ``directory``."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise BaselineUnavailable(f"{where}: not a zip file") from None
    directory.mkdir(parents=True, exist_ok=True)
    with archive:
        members = {info.filename: info for info in archive.infolist() if not info.is_dir()}
        if "results.json" not in members and "results.db" not in members:
            raise BaselineUnavailable(f"{where}: no results.json or results.db in the artifact")
        for name in SHARD_FILES:
            info = members.get(name)
            if info is None:
                continue
            if info.file_size > MAX_MEMBER_BYTES:
                raise BaselineUnavailable(f"{where}: {name} is larger than {MAX_MEMBER_BYTES} bytes")
            with archive.open(info) as source, (directory / name).open("wb") as target:
                copied = 0
                while chunk := source.read(1 << 20):
                    copied += len(chunk)
                    if copied > MAX_MEMBER_BYTES:
                        raise BaselineUnavailable(f"{where}: {name} is larger than {MAX_MEMBER_BYTES} bytes")
                    target.write(chunk)
    return directory
