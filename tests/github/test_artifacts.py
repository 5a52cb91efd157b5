"""Artifact v4 upload against a loopback Twirp fake + real Azurite, verified with the official Node client."""

from __future__ import annotations

import base64
import itertools
import json
import math
import os
import random
import re
import shutil
import socket
import sqlite3
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote, unquote

import pytest

from evalgate.errors import UserError
from evalgate.github.artifacts import (
    AZURE_STORAGE_VERSION,
    BLOCK_SIZE,
    ArtifactServiceError,
    RetryPolicy,
    backend_ids,
    block_id,
    expiry,
    retry_delay,
    rfc3339,
    upload_artifact,
    validate_artifact_name,
)
from tests.servers.artifact_service import ArtifactService, make_runtime_token
from tests.support.ports import free_port

NODE_DIR = Path(__file__).parent.parent / "node"
AZURITE_BIN = NODE_DIR / "node_modules" / ".bin" / "azurite-blob"
ARTIFACT_PKG = NODE_DIR / "node_modules" / "@actions" / "artifact" / "package.json"
DOWNLOAD_SCRIPT = NODE_DIR / "download_artifact.mjs"
ARTIFACT = "evalgate-results"
SMALL_BLOCK = 64 * 1024

ecosystem = pytest.mark.skipif(
    not (AZURITE_BIN.exists() and ARTIFACT_PKG.exists() and shutil.which("node")),
    reason="needs node and tests/node/node_modules (azurite, @actions/artifact): run `npm ci` in tests/node",
)


def no_sleep_policy(sleeps: list[float] | None = None) -> RetryPolicy:
    record = sleeps if sleeps is not None else []
    return RetryPolicy(base_delay=0.01, sleep=record.append)


# ---- fixtures -------------------------------------------------------------------------------------------


@dataclass
class Azurite:
    endpoint: str
    debug_log: Path


@pytest.fixture(scope="module")  # not tests/support/fixtures.py's: this one keeps Azurite's debug log
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite]:
    if not (AZURITE_BIN.exists() and shutil.which("node")):
        pytest.skip("needs node and tests/node/node_modules/.bin/azurite-blob: run `npm ci` in tests/node")
    workdir = tmp_path_factory.mktemp("azurite")
    port = free_port()
    debug_log = workdir / "debug.log"
    command = [str(AZURITE_BIN), "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location",
               str(workdir / "data"), "--silent", "--skipApiVersionCheck", "--loose", "--disableTelemetry",
               "--debug", str(debug_log)]
    (workdir / "data").mkdir()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        _wait_for_port(port, proc)
        yield Azurite(f"http://127.0.0.1:{port}", debug_log)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            output = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
            raise RuntimeError(f"azurite exited early ({proc.returncode}): {output[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("azurite did not start listening within 30 s")


@pytest.fixture
def service(azurite: Azurite) -> Iterator[ArtifactService]:
    fake = ArtifactService(blob_endpoint=azurite.endpoint, run_backend_id=str(uuid.uuid4()),
                           job_backend_id=str(uuid.uuid4())).start()
    yield fake
    fake.stop()


def actions_env(service: ArtifactService) -> dict[str, str]:
    return {
        "ACTIONS_RUNTIME_TOKEN": service.token,
        "ACTIONS_RESULTS_URL": f"{service.url}/this/path/is/ignored/",
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_REPOSITORY": "octo/evalgate-demo",
        "GITHUB_RUN_ID": "4242",
        "GITHUB_RETENTION_DAYS": "30",
    }


@pytest.fixture
def result_files(tmp_path: Path) -> list[Path]:
    """results.json (~200 KB, compressible) and a real SQLite results.db (~300 KB, mostly random bytes)."""
    out = tmp_path / "evalgate-results"
    out.mkdir()
    rng = random.Random(1234)
    results = {"schema_version": 1, "results": [
        {"id": f"case_{i:05d}", "status": rng.choice(["passed", "failed"]), "output": "ok " * rng.randint(1, 40),
         "metrics": {"mention_f1": {"value": rng.random()}}} for i in range(1500)]}
    (out / "results.json").write_text(json.dumps(results, indent=1))
    with sqlite3.connect(out / "results.db") as db:
        db.execute("CREATE TABLE blobs (id INTEGER PRIMARY KEY, payload BLOB)")
        db.executemany("INSERT INTO blobs (payload) VALUES (?)", [(rng.randbytes(2000),) for _ in range(150)])
    db.close()
    return [out / "results.json", out / "results.db"]


# ---- helpers over the request logs ----------------------------------------------------------------------

START = re.compile(r"^\S+ (\S+) info: BlobStorageContextMiddleware: RequestMethod=(\w+) RequestURL=(\S+) "
                   r"RequestHeaders:(\{.*?\}) ClientIP")
END = re.compile(r"^\S+ (\S+) info: EndMiddleware: End response\. .*StatusCode=(\d+)")


@dataclass
class BlobRequest:
    context: str
    url: str
    headers: dict[str, str]
    start: int
    end: int | None = None
    status: int | None = None


def azurite_requests(log: Path, blob_path: str, timeout: float = 10.0) -> list[BlobRequest]:
    """PUT comp=block/blocklist requests for ``blob_path`` from Azurite's debug log, in log order."""
    deadline = time.monotonic() + timeout
    while True:
        requests = _parse_debug_log(log.read_text(errors="replace").splitlines(), blob_path)
        done = requests and requests[-1].url.endswith("comp=blocklist") and requests[-1].end is not None
        if done or time.monotonic() > deadline:
            return requests
        time.sleep(0.1)


def _parse_debug_log(lines: list[str], blob_path: str) -> list[BlobRequest]:
    by_context: dict[str, BlobRequest] = {}
    for index, line in enumerate(lines):
        if (start := START.match(line)) and start[2] == "PUT" and f"/{blob_path}?" in start[3] \
                and "comp=block" in start[3]:
            by_context[start[1]] = BlobRequest(start[1], start[3], json.loads(start[4]), index)
        elif (end := END.match(line)) and end[1] in by_context:
            by_context[end[1]].end, by_context[end[1]].status = index, int(end[2])
    return sorted(by_context.values(), key=lambda r: r.start)


def printed_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def run_official_download(env: dict[str, str], directory: Path) -> subprocess.CompletedProcess[str]:
    node_env = {"PATH": os.environ.get("PATH", ""), "HOME": str(directory.parent), **env}
    return subprocess.run(["node", str(DOWNLOAD_SCRIPT), ARTIFACT, str(directory)], env=node_env,
                          capture_output=True, text=True, timeout=120, cwd=NODE_DIR)


# ---- end to end -----------------------------------------------------------------------------------------


@ecosystem
@pytest.mark.ecosystem
@pytest.mark.parametrize("block_size", [BLOCK_SIZE, SMALL_BLOCK], ids=["one-block", "multi-block"])
def test_upload_is_downloadable_by_the_official_client(
    block_size: int, service: ArtifactService, azurite: Azurite, result_files: list[Path],
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    env = actions_env(service)
    before = datetime.now(UTC)
    result = upload_artifact(ARTIFACT, result_files, env=env, retention_days=45, block_size=block_size,
                             retry=no_sleep_policy())
    printed = capsys.readouterr()

    assert result.uploaded, result.warning
    assert result.warning is not None and "using 30 days" in result.warning
    stored = service.artifacts[ARTIFACT]
    assert result.artifact_id == stored.database_id
    assert result.url == f"https://github.com/octo/evalgate-demo/actions/runs/4242/artifacts/{stored.database_id}"

    # Twirp bodies: as the toolkit sends them; the ACTIONS_RESULTS_URL path is discarded.
    create = service.calls("CreateArtifact")[0]
    assert create["path"].startswith("/twirp/github.actions.results.api.v1.ArtifactService/")
    assert create["body"]["version"] == 7 and create["body"]["mime_type"] == "application/zip"
    expires = datetime.fromisoformat(create["body"]["expires_at"])
    assert timedelta(days=30, seconds=-1) <= expires - before <= timedelta(days=30, minutes=5)
    finalize = service.calls("FinalizeArtifact")[0]["body"]
    assert finalize["size"] == str(result.size) and finalize["hash"] == result.digest

    # The blob: application/zip, committed as equal-length ids in order.
    blob = service.read_blob(stored.blob_path)
    assert blob.headers["content-type"] == "application/zip" and len(blob.content) == result.size
    expected_blocks = math.ceil(result.size / block_size)
    committed = re.findall(r"<Name>([^<]+)</Name><Size>(\d+)</Size>", service.block_list(stored.blob_path).text)
    assert [name for name, _ in committed] == [block_id(i) for i in range(expected_blocks)]
    assert len({len(name) for name, _ in committed}) == 1
    assert all(int(size) == block_size for _, size in committed[:-1])

    # Azurite's own log: each Put Block ended before the next began, in index order, then the list.
    requests = azurite_requests(azurite.debug_log, stored.blob_path)
    assert len(requests) == expected_blocks + 1
    assert all(r.status == 201 and r.headers.get("x-ms-version") == AZURE_STORAGE_VERSION for r in requests)
    assert [quote(block_id(i), safe="") for i in range(expected_blocks)] == [
        re.search(r"blockid=([^&]+)", r.url)[1] for r in requests[:-1]]
    assert all(r.end is not None and r.end < nxt.start for r, nxt in itertools.pairwise(requests))
    assert requests[-1].headers["x-ms-blob-content-type"] == "application/zip"
    if block_size == SMALL_BLOCK:
        assert expected_blocks >= 5

    # The official client finds it by name, checks the digest, unzips; bytes are identical.
    target = tmp_path / "downloaded"
    node = run_official_download(env, target)
    assert node.returncode == 0, node.stderr
    summary = json.loads(node.stdout.strip().splitlines()[-1])
    assert summary["id"] == result.artifact_id and summary["size"] == result.size
    assert summary["digest"] == result.digest and summary["digestMismatch"] is False
    for original in result_files:
        assert (target / original.name).read_bytes() == original.read_bytes()

    # Secrets: the upload SAS signature is masked (raw and URL-encoded) and otherwise never printed.
    upload_sig = re.search(r"[?&]sig=([^&]+)", service.signed_urls[0])[1]
    raw_sig = unquote(upload_sig)
    mask_lines = [line for line in printed_lines(printed.out) if line.startswith("::add-mask::")]
    assert mask_lines == [f"::add-mask::{raw_sig}",
                          "::add-mask::" + quote(raw_sig, safe="-_.!~*'()").replace("%", "%25")]
    everything = printed.out + printed.err + node.stdout + node.stderr + repr(result)
    for line in printed_lines(everything):
        assert raw_sig not in line or line.startswith("::add-mask::")
    assert quote(raw_sig, safe="") not in node.stdout + node.stderr + repr(result)
    token = env["ACTIONS_RUNTIME_TOKEN"]
    for secret in (token, token.split(".")[1], token.split(".")[2]):
        assert secret not in everything


@ecosystem
@pytest.mark.ecosystem
def test_camel_case_replies_are_understood(service: ArtifactService, result_files: list[Path]) -> None:
    service.camel_case = True
    result = upload_artifact(ARTIFACT, result_files, env=actions_env(service), mask=lambda _: None,
                             retry=no_sleep_policy())
    assert result.uploaded, result.warning
    assert result.artifact_id == service.artifacts[ARTIFACT].database_id
    assert "expires_at" not in service.calls("CreateArtifact")[0]["body"]


# ---- failure paths --------------------------------------------------------------------------------------


@ecosystem
@pytest.mark.ecosystem
def test_twirp_5xx_is_retried_with_backoff(service: ArtifactService, result_files: list[Path]) -> None:
    service.inject("CreateArtifact", 500, times=2)
    service.inject("FinalizeArtifact", 503)
    sleeps: list[float] = []
    result = upload_artifact(ARTIFACT, result_files, env=actions_env(service), mask=lambda _: None,
                             retry=no_sleep_policy(sleeps))
    assert result.uploaded, result.warning
    assert [c["status"] for c in service.calls("CreateArtifact")] == [500, 500, 200]
    assert [c["status"] for c in service.calls("FinalizeArtifact")] == [503, 200]
    assert sleeps[0] == 0.01 and 0.015 <= sleeps[1] < 0.0225 and sleeps[2] == 0.01


@ecosystem
@pytest.mark.ecosystem
def test_retries_give_up_after_five_attempts(service: ArtifactService, result_files: list[Path]) -> None:
    service.inject("CreateArtifact", 502, msg="bad gateway", times=5)
    result = upload_artifact(ARTIFACT, result_files, env=actions_env(service), mask=lambda _: None,
                             retry=no_sleep_policy())
    assert not result.uploaded
    assert len(service.calls("CreateArtifact")) == 5
    assert "HTTP 502 (bad gateway) (gave up after 5 attempts)" in (result.warning or "")
    assert str(result_files[0]) in (result.warning or "")


@ecosystem
@pytest.mark.ecosystem
def test_insufficient_usage_is_not_retried(service: ArtifactService, result_files: list[Path]) -> None:
    service.inject("CreateArtifact", 429, msg="insufficient usage to create artifact", times=5)
    sleeps: list[float] = []
    result = upload_artifact(ARTIFACT, result_files, env=actions_env(service), mask=lambda _: None,
                             retry=no_sleep_policy(sleeps))
    assert not result.uploaded and sleeps == []
    assert len(service.calls("CreateArtifact")) == 1
    assert "quota exhausted" in (result.warning or "") and "was not uploaded" in (result.warning or "")


@ecosystem
@pytest.mark.ecosystem
def test_token_for_another_job_is_refused_without_retry(service: ArtifactService, result_files: list[Path]) -> None:
    env = actions_env(service) | {"ACTIONS_RUNTIME_TOKEN": make_runtime_token(service.run_backend_id, "other")}
    result = upload_artifact(ARTIFACT, result_files, env=env, mask=lambda _: None, retry=no_sleep_policy())
    assert not result.uploaded
    assert [c["status"] for c in service.calls("CreateArtifact")] == [401]
    assert "HTTP 401" in (result.warning or "")
    assert env["ACTIONS_RUNTIME_TOKEN"] not in repr(result)


@ecosystem
@pytest.mark.ecosystem
def test_unreachable_blob_store_is_a_warning(service: ArtifactService, result_files: list[Path]) -> None:
    service.upload_endpoint = f"http://127.0.0.1:{free_port()}"
    masked: list[str] = []
    result = upload_artifact(ARTIFACT, result_files, env=actions_env(service), mask=masked.append,
                             retry=no_sleep_policy())
    assert not result.uploaded
    assert "blob store Put Block 0: cannot connect" in (result.warning or "")
    assert service.calls("FinalizeArtifact") == []
    assert len(masked) == 2 and not any(m in (result.warning or "") for m in masked)


@ecosystem
@pytest.mark.ecosystem
def test_blob_store_refusal_is_a_warning(service: ArtifactService, result_files: list[Path]) -> None:
    service.upload_permissions = "r"
    result = upload_artifact(ARTIFACT, result_files, env=actions_env(service), mask=lambda _: None,
                             retry=no_sleep_policy())
    assert not result.uploaded
    assert "Put Block 0: HTTP 403 (AuthorizationPermissionMismatch)" in (result.warning or "")
    assert service.calls("FinalizeArtifact") == []


# ---- no service needed ----------------------------------------------------------------------------------


@pytest.mark.parametrize("missing", [("ACTIONS_RUNTIME_TOKEN", "ACTIONS_RESULTS_URL"), ("ACTIONS_RESULTS_URL",)])
def test_missing_runtime_environment_says_where_the_files_are(missing: tuple[str, ...],
                                                              result_files: list[Path]) -> None:
    env = {"ACTIONS_RUNTIME_TOKEN": make_runtime_token("r", "j"), "ACTIONS_RESULTS_URL": "http://127.0.0.1:9"}
    for name in missing:
        env.pop(name)
    result = upload_artifact(ARTIFACT, result_files, env=env)
    assert not result.uploaded
    warning = result.warning or ""
    assert warning.startswith("artifacts were not uploaded")
    assert all(name in warning for name in missing)
    assert all(str(path) in warning for path in result_files)


def test_ghes_is_not_contacted(result_files: list[Path]) -> None:
    env = {"ACTIONS_RUNTIME_TOKEN": make_runtime_token("r", "j"),
           "ACTIONS_RESULTS_URL": f"http://127.0.0.1:{free_port()}", "GITHUB_SERVER_URL": "https://ghe.corp.example"}
    result = upload_artifact(ARTIFACT, result_files, env=env)
    assert not result.uploaded and "Enterprise Server" in (result.warning or "")


def test_token_without_results_scope_is_a_warning(result_files: list[Path]) -> None:
    env = {"ACTIONS_RUNTIME_TOKEN": "not-a-jwt-token-value", "ACTIONS_RESULTS_URL": "http://127.0.0.1:9"}
    result = upload_artifact(ARTIFACT, result_files, env=env)
    assert not result.uploaded and "is not a JWT" in (result.warning or "")
    assert "not-a-jwt-token-value" not in repr(result)


@pytest.mark.parametrize("name", ["", "a/b", "a\\b", 'a"b', "a:b", "a<b", "a>b", "a|b", "a*b", "a?b", "a\rb", "a\nb"])
def test_bad_artifact_names_are_user_errors(name: str, result_files: list[Path]) -> None:
    with pytest.raises(UserError, match=r"^artifact name: ") as caught:
        upload_artifact(name, result_files, env={})
    assert "\n" not in str(caught.value)


def test_good_artifact_names_pass() -> None:
    for name in ("evalgate-results", "evalgate results (matrix 3.11)", "évalgate_ü"):
        validate_artifact_name(name)


def test_bad_file_paths_are_user_errors(tmp_path: Path) -> None:
    odd = tmp_path / "report:v2.json"
    odd.write_text("{}")
    with pytest.raises(UserError, match=r"artifact files: 'report:v2\.json' contains forbidden"):
        upload_artifact(ARTIFACT, [odd], env={})
    with pytest.raises(UserError, match="does not exist"):
        upload_artifact(ARTIFACT, [tmp_path / "missing.json"], env={})
    with pytest.raises(UserError, match="outside the artifact root"):
        upload_artifact(ARTIFACT, [odd], env={}, root=tmp_path / "sub")


def test_retention_is_clamped_to_the_repository_maximum() -> None:
    now = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
    assert expiry(45, {"GITHUB_RETENTION_DAYS": "30"}, now) == (
        now + timedelta(days=30), "artifact retention of 45 days exceeds the repository maximum; using 30 days")
    assert expiry(7, {"GITHUB_RETENTION_DAYS": "30"}, now) == (now + timedelta(days=7), None)
    assert expiry(120, {}, now) == (now + timedelta(days=120), None)
    assert expiry(None, {"GITHUB_RETENTION_DAYS": "30"}, now) == (None, None)
    assert expiry(0, {}, now) == (None, None)
    with pytest.raises(UserError, match="retention-days"):
        expiry(-1, {}, now)


def test_backend_ids_come_from_the_scp_claim() -> None:
    ids = backend_ids(make_runtime_token("run-uuid", "job-uuid"))
    assert (ids.workflow_run, ids.workflow_job_run) == ("run-uuid", "job-uuid")
    bad_scope = "e30." + base64.urlsafe_b64encode(b'{"scp":"Actions.Results:only-two"}').decode().rstrip("=") + ".x"
    for token in ("abc", "a.!!!.c", bad_scope):
        with pytest.raises(ArtifactServiceError):
            backend_ids(token)


def test_pure_helpers() -> None:
    assert {len(block_id(i)) for i in (0, 1, 99, 10**9)} == {28}
    assert rfc3339(datetime(2026, 11, 29, 0, 6, 19, 539999, tzinfo=UTC)) == "2026-11-29T00:06:19.539Z"
    policy = RetryPolicy(base_delay=3.0, multiplier=1.5)
    assert retry_delay(0, policy) == 3.0
    assert retry_delay(2, policy, rand=lambda: 0.0) == 6.75
    assert retry_delay(2, policy, rand=lambda: 0.999) < 10.125
