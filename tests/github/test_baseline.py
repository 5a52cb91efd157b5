"""``baseline: auto`` against a loopback GitHub artifacts API with a separate blob host, plus the
``none``/path settings. Every failure must come back as a warning, never an exception, and the token
must never reach the blob host or a warning."""

from __future__ import annotations

import json
import socket
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from evalgate.github.baseline import (
    BaselineQuery,
    auto_loader,
    choose_candidates,
    discover_baseline,
    loader_from_env,
    query_from_context,
    read_results_zip,
)
from evalgate.github.context import ActionContext
from evalgate.store.reader import BaselineLookup, resolve_baseline
from tests.servers.github_artifacts_fake import GitHubArtifactsFake, zip_bytes

NAME = "evalgate-results"
BASE_SHA = "b" * 40


def results_document(run_id: str, status: str = "completed", passed: bool = True) -> dict[str, Any]:
    record = {"id": "case_1", "index": 0, "source": "cases.yaml:3", "risk_level": "medium",
              "status": "passed" if passed else "failed", "passed": passed,
              "metrics": {"rules": {"value": 1.0 if passed else 0.0, "status": "passed" if passed else "failed"}}}
    return {"schema_version": 1, "run_id": run_id, "timestamp": "2026-11-20T10:00:00Z", "status": status,
            "metrics": {"rules": {"average": 1.0, "direction": "higher", "threshold": {"min": 1.0}}},
            "results": [record]}


def results_zip(run_id: str, status: str = "completed") -> bytes:
    return zip_bytes({"results.json": json.dumps(results_document(run_id, status)), "results.db": b"not used"})


@pytest.fixture()
def fake() -> Any:
    with GitHubArtifactsFake() as gh:
        yield gh


def query(gh: GitHubArtifactsFake, **overrides: Any) -> BaselineQuery:
    values = {"repository": gh.repository, "base_ref": "main", "artifact_name": NAME, "token": gh.token,
              "api_url": gh.url, "base_sha": BASE_SHA} | overrides
    return BaselineQuery(**values)


def discover(gh: GitHubArtifactsFake, **overrides: Any) -> BaselineLookup:
    options = {key: overrides.pop(key) for key in ("max_zip_bytes", "max_member_bytes") if key in overrides}
    return discover_baseline(query(gh, **overrides), sleep=lambda _: None, **options)


def assert_no_token_leak(gh: GitHubArtifactsFake, lookup: BaselineLookup) -> None:
    assert gh.token not in (lookup.warning or "") and gh.token not in (lookup.source or "")
    blob_requests = [r for r in gh.log if r.path.startswith("/blob/")]
    assert all("authorization" not in r.headers for r in blob_requests), blob_requests


def test_found_prefers_the_base_commit_over_a_newer_artifact(fake: GitHubArtifactsFake) -> None:
    at_base = fake.add_artifact(NAME, results_zip("run-at-base"), head_sha=BASE_SHA, created_at="2026-11-19T09:00:00Z")
    fake.add_artifact(NAME, results_zip("run-newer"), head_sha="c" * 40, created_at="2026-11-21T09:00:00Z")
    lookup = discover(fake)
    assert lookup.found and lookup.warning is None
    assert lookup.document is not None and lookup.document["run_id"] == "run-at-base"
    assert f"(id {at_base})" in (lookup.source or "") and "base commit" in (lookup.source or "")
    api = fake.requests("api")
    assert api[0].query == {"name": [NAME], "per_page": ["100"]}
    assert all(r.headers.get("authorization") == f"Bearer {fake.token}" for r in api)
    blob = fake.requests("blob")
    assert len(blob) == 1 and "authorization" not in blob[0].headers
    assert_no_token_leak(fake, lookup)


def test_newest_on_the_branch_when_the_base_commit_has_none(fake: GitHubArtifactsFake) -> None:
    fake.add_artifact(NAME, results_zip("old"), head_sha="1" * 40, created_at="2026-11-01T00:00:00Z")
    fake.add_artifact(NAME, results_zip("new"), head_sha="2" * 40, created_at="2026-11-10T00:00:00Z")
    lookup = discover(fake)
    assert lookup.document is not None and lookup.document["run_id"] == "new"
    assert "newest on the branch" in (lookup.source or "") and BASE_SHA[:7] in (lookup.source or "")


def test_not_found(fake: GitHubArtifactsFake) -> None:
    fake.add_artifact("some-other-artifact", results_zip("other"))
    lookup = discover(fake)
    assert not lookup.found and lookup.document is None
    assert lookup.warning == (f"no baseline: no artifact named {NAME!r} in {fake.repository} yet "
                              "(the first run, or evalgate has not run on 'main')")


def test_expired_only(fake: GitHubArtifactsFake) -> None:
    fake.add_artifact(NAME, results_zip("gone"), expired=True)
    lookup = discover(fake)
    assert not lookup.found and "has expired" in (lookup.warning or "")
    assert not fake.requests("blob")


def test_wrong_branch_only(fake: GitHubArtifactsFake) -> None:
    fake.add_artifact(NAME, results_zip("feature"), head_branch="feature/x")
    lookup = discover(fake)
    assert not lookup.found
    assert "from branch 'main'" in (lookup.warning or "") and "feature/x" in (lookup.warning or "")


def test_a_fork_branch_with_the_base_name_does_not_count(fake: GitHubArtifactsFake) -> None:
    fake.add_artifact(NAME, results_zip("fork-main"), head_branch="main", head_repository_id=777,
                      created_at="2026-11-22T00:00:00Z")
    fake.add_artifact(NAME, results_zip("real-main"), head_branch="main", created_at="2026-11-01T00:00:00Z")
    lookup = discover(fake)
    assert lookup.document is not None and lookup.document["run_id"] == "real-main"


def test_forbidden_without_actions_read(fake: GitHubArtifactsFake) -> None:
    fake.add_artifact(NAME, results_zip("x"))
    fake.forbidden = True
    lookup = discover(fake)
    assert not lookup.found
    assert "HTTP 403" in (lookup.warning or "") and "actions: read" in (lookup.warning or "")
    assert_no_token_leak(fake, lookup)


def test_bad_token(fake: GitHubArtifactsFake) -> None:
    lookup = discover(fake, token="ghs_wrong_token_value_123")
    assert not lookup.found and "HTTP 401" in (lookup.warning or "")
    assert "ghs_wrong_token_value_123" not in (lookup.warning or "")


def test_redirect_to_the_api_host_still_carries_no_authorization(fake: GitHubArtifactsFake) -> None:
    fake.add_artifact(NAME, results_zip("same-host"), head_sha=BASE_SHA)
    fake.redirect_to_api_host = True
    lookup = discover(fake)
    assert lookup.found
    blob = [r for r in fake.requests("api") if r.path.startswith("/blob/")]
    assert len(blob) == 1 and "authorization" not in blob[0].headers


def test_pagination_reaches_the_second_page(fake: GitHubArtifactsFake) -> None:
    fake.add_artifact(NAME, results_zip("on-page-two"), created_at="2026-01-01T00:00:00Z")
    for n in range(120):
        fake.add_artifact(NAME, b"never downloaded", head_branch=f"topic-{n}", created_at=f"2026-11-{n % 28 + 1:02d}T00:00:00Z")
    lookup = discover(fake)
    assert lookup.document is not None and lookup.document["run_id"] == "on-page-two"
    pages = [r for r in fake.requests("api") if r.path.endswith("/actions/artifacts")]
    assert len(pages) == 2 and pages[1].query.get("page") == ["2"]


def test_corrupt_zip(fake: GitHubArtifactsFake) -> None:
    fake.add_artifact(NAME, b"PK\x03\x04 this is not really a zip")
    lookup = discover(fake)
    assert not lookup.found and "not a valid zip" in (lookup.warning or "")


def test_digest_mismatch_is_a_corrupt_download(fake: GitHubArtifactsFake) -> None:
    artifact_id = fake.add_artifact(NAME, results_zip("tampered"))
    fake.artifacts[artifact_id].content = results_zip("something else")
    lookup = discover(fake)
    assert not lookup.found and "digest" in (lookup.warning or "")


def test_size_caps(fake: GitHubArtifactsFake) -> None:
    fake.add_artifact(NAME, results_zip("big"))
    lookup = discover(fake, max_zip_bytes=100)
    assert not lookup.found and "over the 100-byte limit" in (lookup.warning or "")
    assert not fake.requests("blob")
    bomb = zip_bytes({"results.json": " " * 200_000})
    with pytest.raises(Exception, match="over the 1000-byte limit"):
        read_results_zip(bomb, max_member_bytes=1000)


def test_zip_without_results(fake: GitHubArtifactsFake) -> None:
    fake.add_artifact(NAME, zip_bytes({"report.html": "<html></html>"}))
    lookup = discover(fake)
    assert not lookup.found and "no results.json or SQLite" in (lookup.warning or "")


def test_invalid_results_json(fake: GitHubArtifactsFake) -> None:
    fake.add_artifact(NAME, zip_bytes({"evalgate-results/results.json": json.dumps({"schema_version": 1})}))
    lookup = discover(fake)
    assert not lookup.found and "no 'results' list" in (lookup.warning or "")


def test_sqlite_results_in_the_artifact(fake: GitHubArtifactsFake, tmp_path: Path) -> None:
    db = tmp_path / "results.db"
    document = results_document("from-sqlite")
    records = document.pop("results")
    with sqlite3.connect(db) as connection:
        connection.execute("CREATE TABLE eg_runs (run_id TEXT, timestamp TEXT, status TEXT, document TEXT)")
        connection.execute("CREATE TABLE eg_cases (run_id TEXT, record TEXT)")
        connection.execute("INSERT INTO eg_runs VALUES (?, ?, ?, ?)",
                           ("from-sqlite", document["timestamp"], "completed", json.dumps(document)))
        connection.executemany("INSERT INTO eg_cases VALUES (?, ?)", [("from-sqlite", json.dumps(r)) for r in records])
    connection.close()
    fake.add_artifact(NAME, zip_bytes({"out/results.db": db.read_bytes()}))
    lookup = discover(fake)
    assert lookup.document is not None and lookup.document["run_id"] == "from-sqlite"
    assert lookup.document["results"][0]["id"] == "case_1"


def test_an_unfinished_run_is_skipped_for_the_next_candidate(fake: GitHubArtifactsFake) -> None:
    fake.add_artifact(NAME, results_zip("finished"), created_at="2026-11-01T00:00:00Z")
    fake.add_artifact(NAME, results_zip("cancelled", status="cancelled"), created_at="2026-11-02T00:00:00Z")
    lookup = discover(fake)
    assert lookup.document is not None and lookup.document["run_id"] == "finished"
    assert len(fake.requests("blob")) == 2


def test_network_error_is_a_warning() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    lookup = discover_baseline(BaselineQuery("octo/evals", "main", token="ghs_unreachable_token_1",
                                             api_url=f"http://127.0.0.1:{port}"), sleep=lambda _: None, timeout=2.0)
    assert not lookup.found and "cannot reach the GitHub API" in (lookup.warning or "")
    assert "ghs_unreachable_token_1" not in (lookup.warning or "")


def test_choose_candidates_orders_base_commit_then_newest_then_id() -> None:
    def artifact(artifact_id: int, created: str, sha: str) -> dict[str, Any]:
        return {"id": artifact_id, "name": NAME, "expired": False, "created_at": created,
                "workflow_run": {"head_branch": "main", "head_sha": sha, "repository_id": 1, "head_repository_id": 1}}

    chosen = choose_candidates(
        [artifact(1, "2026-01-02T00:00:00Z", "x"), artifact(2, "2026-01-01T00:00:00Z", BASE_SHA),
         artifact(3, "2026-01-02T00:00:00Z", "y")],
        BaselineQuery("o/r", "main", artifact_name=NAME, base_sha=BASE_SHA),
    )
    assert [a["id"] for a in chosen] == [2, 3, 1]


# ── the setting, the Actions context and the environment ──────────────────────────────────────


def test_resolve_none_path_and_auto(tmp_path: Path) -> None:
    assert resolve_baseline("none") is None and resolve_baseline("") is None
    missing = resolve_baseline("nowhere/results.json", cwd=tmp_path)
    assert missing is not None and not missing.found and "not found" in (missing.warning or "")
    (tmp_path / "base.json").write_text(json.dumps(results_document("from-file")))
    found = resolve_baseline("base.json", cwd=tmp_path)
    assert found is not None and found.document is not None and found.document["run_id"] == "from-file"
    assert found.source == "base.json"
    no_context = resolve_baseline("auto")
    assert no_context is not None and "GitHub Actions context" in (no_context.warning or "")

    def broken() -> BaselineLookup:
        raise RuntimeError("boom")

    crashed = resolve_baseline("AUTO", auto=broken)
    assert crashed is not None and crashed.warning == "no baseline: RuntimeError: boom"


def pr_event(tmp_path: Path) -> Path:
    event = {"pull_request": {"number": 7, "base": {"ref": "main", "sha": BASE_SHA},
                              "head": {"ref": "topic", "sha": "d" * 40, "repo": {"full_name": "octo/evals"}}},
             "repository": {"full_name": "octo/evals"}}
    path = tmp_path / "event.json"
    path.write_text(json.dumps(event))
    return path


def test_query_from_the_actions_context(tmp_path: Path) -> None:
    env = {"GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": str(pr_event(tmp_path)),
           "GITHUB_REPOSITORY": "octo/evals", "GITHUB_API_URL": "http://127.0.0.1:1"}
    built = query_from_context(ActionContext.from_env(env), artifact_name="evalgate-nightly", token="t")
    assert built == BaselineQuery("octo/evals", "main", "evalgate-nightly", "t", "http://127.0.0.1:1", BASE_SHA)
    push = ActionContext.from_env({"GITHUB_EVENT_NAME": "push", "GITHUB_REPOSITORY": "octo/evals"})
    assert query_from_context(push, token="t") == BaselineLookup(
        None, warning="no baseline: not a pull request or merge queue run (no base branch to compare with)",
        severity="notice")
    no_token = query_from_context(ActionContext.from_env(env), token=None)
    assert isinstance(no_token, BaselineLookup) and "no GitHub token" in (no_token.warning or "")
    assert no_token.severity == "warning"
    lookup = auto_loader(push, token="t")()
    assert not lookup.found and "not a pull request" in (lookup.warning or "") and lookup.severity == "notice"


def test_merge_group_compares_with_its_base_sha(tmp_path: Path, fake: GitHubArtifactsFake) -> None:
    from tests.support.action import webhook_example

    payload = webhook_example("merge_group", "checks_requested")
    group = payload["merge_group"]
    path = tmp_path / "merge_group.json"
    path.write_text(json.dumps(payload))
    env = {"GITHUB_EVENT_NAME": "merge_group", "GITHUB_EVENT_PATH": str(path), "GITHUB_REPOSITORY": fake.repository,
           "GITHUB_API_URL": fake.url}
    query = query_from_context(ActionContext.from_env(env), token=fake.token)
    assert isinstance(query, BaselineQuery)
    assert query.base_ref == group["base_ref"].removeprefix("refs/heads/") and query.base_sha == group["base_sha"]
    fake.add_artifact("evalgate-results", results_zip("newer"), head_branch=query.base_ref, head_sha="e" * 40,
                      created_at="2026-11-21T10:00:00Z")
    at_base = fake.add_artifact("evalgate-results", results_zip("at-base"), head_branch=query.base_ref,
                                head_sha=group["base_sha"], created_at="2026-11-20T10:00:00Z")
    lookup = auto_loader(ActionContext.from_env(env), token=fake.token)()
    assert lookup.found and f"(id {at_base})" in (lookup.source or "") and "base commit" in (lookup.source or "")


def test_expected_absences_are_notices_and_real_problems_warnings(fake: GitHubArtifactsFake) -> None:
    first = discover(fake)  # nothing uploaded yet: the first pull request
    assert first.severity == "notice" and "no artifact named 'evalgate-results'" in (first.warning or "")
    fake.add_artifact("evalgate-results", results_zip("x"), head_branch="feature")
    assert discover(fake).severity == "notice"  # only other branches so far
    fake.forbidden = True
    denied = discover(fake)
    assert denied.severity == "warning" and "actions: read" in (denied.warning or "")


def test_loader_from_env_end_to_end(fake: GitHubArtifactsFake, tmp_path: Path) -> None:
    fake.add_artifact("evalgate-results-nightly", results_zip("nightly"), head_sha=BASE_SHA)
    env = {"GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": str(pr_event(tmp_path)),
           "GITHUB_REPOSITORY": fake.repository, "GITHUB_API_URL": fake.url, "GITHUB_TOKEN": fake.token,
           "INPUT_ARTIFACT-NAME": "evalgate-results-nightly"}
    lookup = loader_from_env(env)()
    assert lookup.document is not None and lookup.document["run_id"] == "nightly"
    assert_no_token_leak(fake, lookup)
    broken = loader_from_env({"GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": str(tmp_path / "missing")})()
    assert not broken.found and "event payload" in (broken.warning or "")
