"""evalgate's comment requests validated by Prism against GitHub's own OpenAPI description.

Prism (``@stoplight/prism-cli``) mocks api.github.com from ``@octokit/openapi`` with ``--errors``:
a request that violates the description gets 422 and an ``sl-violations`` header.

Prism negotiates the response media type strictly: the description declares ``application/json``
responses, so ``Accept: application/vnd.github+json`` alone gets 406 *after* validation. The test
transport therefore appends ``, application/json;q=0.9`` to the Accept header (and records the
header evalgate really sent). Prism also answers the list with the description's *example* ``Link``
header (``<https://api.github.com/resource?page=2>; rel="next"``); the client rightly refuses to follow
a link to another origin, so the transport drops that placeholder header (pagination itself is
covered by the stateful fake). Everything else is the production client unchanged.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from evalgate.github.api import GitHubAPI
from evalgate.github.comment import upsert_comment
from tests.support.ports import free_port

NODE_DIR = Path(__file__).resolve().parents[1] / "node" / "node_modules"
PRISM = NODE_DIR / ".bin" / "prism"
SPEC_DIR = NODE_DIR / "@octokit" / "openapi" / "generated"
STARTUP_TIMEOUT = 240.0
REPO = "octo/hello"

pytestmark = [
    pytest.mark.ecosystem,
    pytest.mark.skipif(
        not PRISM.exists() or shutil.which("node") is None,
        reason="Prism is not installed: run `npm ci` in tests/node (needs node and tests/node/node_modules)",
    ),
]


def github_spec() -> Path:
    """The api.github.com description: the plain JSON (with $refs) loads faster than the dereferenced one."""
    for name in ("api.github.com.json", "api.github.com.yaml", "api.github.com.deref.json"):
        if (SPEC_DIR / name).is_file():
            return SPEC_DIR / name
    pytest.skip(f"no api.github.com description found in {SPEC_DIR}")


def wait_until_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"Prism exited with {process.returncode}: {log.read_text(errors='replace')[-2000:]}")
        try:
            httpx.get(f"{url}/zen", timeout=2.0)
            return
        except httpx.TransportError:
            time.sleep(0.5)
    pytest.fail(f"Prism did not listen within {STARTUP_TIMEOUT:.0f} s: {log.read_text(errors='replace')[-2000:]}")


@pytest.fixture(scope="module")
def prism_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    log = tmp_path_factory.mktemp("prism") / "prism.log"
    with open(log, "wb") as sink:
        process = subprocess.Popen(
            [str(PRISM), "mock", "-h", "127.0.0.1", "-p", str(port), "--errors", str(github_spec())],
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(url, process, log)
        yield url
    finally:
        stop(process)


def stop(process: subprocess.Popen[bytes]) -> None:
    """Stop the Prism process group this module started."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


class RecordingTransport(httpx.BaseTransport):
    """Sends through a real HTTP transport; records what evalgate sent and Prism's verdict."""

    def __init__(self, widen_accept: bool = True) -> None:
        self.inner = httpx.HTTPTransport()
        self.widen_accept = widen_accept
        self.exchanges: list[dict[str, Any]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        sent = dict(request.headers)
        if self.widen_accept:
            request.headers["Accept"] = request.headers["Accept"] + ", application/json;q=0.9"
        response = self.inner.handle_request(request)
        response.read()
        link = response.headers.get("link", "")
        if "https://api.github.com/resource?" in link:
            del response.headers["link"]
        self.exchanges.append(
            {
                "method": request.method,
                "url": str(request.url),
                "sent_headers": sent,
                "status": response.status_code,
                "violations": response.headers.get("sl-violations"),
                "example_link": bool(link),
            }
        )
        return response

    def close(self) -> None:
        self.inner.close()


def client(url: str, transport: RecordingTransport) -> GitHubAPI:
    return GitHubAPI(token="ghs_prism_token", base_url=url, transport=transport, max_attempts=1)


def test_list_and_create_validate_against_the_github_description(prism_url: str) -> None:
    transport = RecordingTransport()
    with client(prism_url, transport) as api:
        result = upsert_comment(api, REPO, 42, "## evalgate report\n\n| a | b |\n|---|---|\n| 1 | 2 |", tag="main")
    assert result.action == "created", result.warning
    assert result.comment_id is not None
    methods = [(x["method"], x["status"], x["violations"]) for x in transport.exchanges]
    # who evalgate posts as (GET /user), the comments, the new one, then the list again (an older one to delete?)
    assert methods == [("GET", 200, None), ("GET", 200, None), ("POST", 201, None), ("GET", 200, None)], \
        [(x["method"], x["url"]) for x in transport.exchanges]
    assert transport.exchanges[0]["url"].endswith("/user")
    listed = transport.exchanges[1]
    assert listed["example_link"], "Prism served the description's Link example"
    assert "per_page=100" in listed["url"]
    assert listed["sent_headers"]["accept"] == "application/vnd.github+json"
    assert listed["sent_headers"]["x-github-api-version"] == "2022-11-28"
    assert listed["sent_headers"]["authorization"] == "Bearer ghs_prism_token"


def test_update_validates_against_the_github_description(prism_url: str) -> None:
    transport = RecordingTransport()
    with client(prism_url, transport) as api:
        updated = api.patch(f"/repos/{REPO}/issues/comments/1234", {"body": "<!-- evalgate:comment tag=main -->\nv2"})
    assert isinstance(updated, dict) and "id" in updated and "body" in updated
    assert [(x["method"], x["status"], x["violations"]) for x in transport.exchanges] == [("PATCH", 200, None)]


def test_exact_production_headers_pass_validation(prism_url: str) -> None:
    """Without widening Accept, Prism validates first (no 422) and then cannot negotiate (406)."""
    transport = RecordingTransport(widen_accept=False)
    with client(prism_url, transport) as api:
        api.request("GET", f"/repos/{REPO}/issues/42/comments", params={"per_page": 100})
        api.request("POST", f"/repos/{REPO}/issues/42/comments", json={"body": "x"})
        api.request("PATCH", f"/repos/{REPO}/issues/comments/7", json={"body": "x"})
    assert [(x["status"], x["violations"]) for x in transport.exchanges] == [(406, None)] * 3


def test_prism_rejects_malformed_requests(prism_url: str) -> None:
    """Negative control: the same setup does flag requests that break the description."""
    transport = RecordingTransport()
    with client(prism_url, transport) as api:
        missing_body = api.request("POST", f"/repos/{REPO}/issues/42/comments", json={"text": "no body field"})
        wrong_type = api.request("PATCH", f"/repos/{REPO}/issues/comments/7", json={"body": 12})
        bad_id = api.request("PATCH", f"/repos/{REPO}/issues/comments/not-a-number", json={"body": "x"})
        bad_page = api.request("GET", f"/repos/{REPO}/issues/42/comments", params={"per_page": "many"})
    for response in (missing_body, wrong_type, bad_id, bad_page):
        assert response.status_code == 422, response.text
    violations = [json.loads(x["violations"]) for x in transport.exchanges if x["violations"]]
    assert len(violations) >= 3
    assert any("body" in json.dumps(v) for v in violations)


def test_publish_requests_validate_against_the_github_description(prism_url: str) -> None:
    """``evalgate publish``: the run, its artifacts (by name) and the pull request search by head, as
    GitHub's description defines them. Prism answers with the description's examples, which name another
    artifact and another head commit, so each lookup ends in its one-line refusal."""
    from evalgate.github.relay import RelayError, evaluated_run, pull_request_number, run_artifact

    transport = RecordingTransport()
    with client(prism_url, transport) as api:
        run = evaluated_run(api.get(f"/repos/{REPO}/actions/runs/30433642"), REPO)
        assert isinstance(run.run_id, int) and run.head_sha
        with pytest.raises(RelayError, match="was not uploaded"):
            run_artifact(api, run, "evalgate-results")
        fork = type(run)(run_id=run.run_id, repository=REPO, head_sha="0" * 40, head_branch="fix", head_owner="forker")
        with pytest.raises(RelayError, match="cannot list pull requests"):
            pull_request_number(api, fork)
    assert [(x["method"], x["status"], x["violations"]) for x in transport.exchanges[:2]] == [("GET", 200, None)] * 2
    # The pulls list: the request passes; GitHub's own example reply breaks its schema (a requested team
    # without `type`), which --errors turns into a 500 naming only response-side violations.
    pulls = transport.exchanges[2]
    violations = json.loads(pulls["violations"] or "[]")
    assert pulls["status"] == 500 and violations
    assert all(v["location"][0] == "response" for v in violations), violations
    assert "name=evalgate-results" in transport.exchanges[1]["url"]
    assert "head=forker%3Afix" in transport.exchanges[2]["url"] and "state=open" in transport.exchanges[2]["url"]
