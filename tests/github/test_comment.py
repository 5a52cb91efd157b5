"""upsert_comment against the stateful loopback GitHub fake."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from evalgate.github.api import GitHubAPI, GitHubAPIError
from evalgate.github.comment import MAX_COMMENT_CHARS, enforce_limit, has_marker, upsert_comment, with_marker
from evalgate.report.escape import utf16_len
from evalgate.report.markdown import comment_marker
from tests.servers.github_fake import GitHubFake

REPO = "octo/hello"
PR = 42
TOKEN = "ghs_comment_test_token_1234"


@pytest.fixture
def fake() -> Iterator[GitHubFake]:
    with GitHubFake(token=TOKEN) as server:
        yield server


@pytest.fixture
def api(fake: GitHubFake) -> Iterator[GitHubAPI]:
    sleeps: list[float] = []
    with GitHubAPI(token=TOKEN, base_url=fake.url, sleep=sleeps.append) as client:
        yield client


def test_first_run_creates_with_marker_on_first_line(fake: GitHubFake, api: GitHubAPI) -> None:
    result = upsert_comment(api, REPO, PR, "## report v1", tag="main")
    assert result.action == "created"
    comments = fake.comments_on(REPO, PR)
    assert len(comments) == 1
    assert comments[0]["body"].split("\n")[0] == "<!-- evalgate:comment tag=main -->"
    assert result.url == comments[0]["html_url"]
    assert result.comment_id == comments[0]["id"]


def test_second_run_edits_and_never_duplicates(fake: GitHubFake, api: GitHubAPI) -> None:
    first = upsert_comment(api, REPO, PR, "## report v1", tag="main")
    second = upsert_comment(api, REPO, PR, "## report v2", tag="main")
    third = upsert_comment(api, REPO, PR, "## report v3", tag="main")
    assert (first.action, second.action, third.action) == ("created", "updated", "updated")
    comments = fake.comments_on(REPO, PR)
    assert len(comments) == 1
    assert comments[0]["body"].endswith("## report v3")
    assert second.comment_id == first.comment_id == third.comment_id
    assert [r.method for r in fake.requests() if r.method != "GET"] == ["POST", "PATCH", "PATCH"]
    patch = fake.requests("PATCH")[0]
    assert patch.path == f"/repos/{REPO}/issues/comments/{first.comment_id}"


def test_unchanged_body_is_not_patched(fake: GitHubFake, api: GitHubAPI) -> None:
    upsert_comment(api, REPO, PR, "same", tag="main")
    again = upsert_comment(api, REPO, PR, "same", tag="main")
    assert again.action == "skipped"
    assert again.warning is None
    assert fake.requests("PATCH") == []


def test_finds_the_marker_across_250_comments(fake: GitHubFake, api: GitHubAPI) -> None:
    for i in range(180):
        fake.add_comment(REPO, PR, f"human comment {i}")
    ours = fake.add_comment(REPO, PR, with_marker("old report", comment_marker("main")), bot=True)
    for i in range(69):
        fake.add_comment(REPO, PR, f"later comment {i}")
    assert len(fake.comments_on(REPO, PR)) == 250
    result = upsert_comment(api, REPO, PR, "new report", tag="main")
    assert result.action == "updated"
    assert result.comment_id == ours["id"]
    gets = [g for g in fake.requests("GET") if g.path.endswith(f"/issues/{PR}/comments")]
    # the search, then the check after the write that no concurrent run left a second comment
    assert [g.query.get("page", ["1"])[0] for g in gets] == ["1", "2", "3"] * 2
    assert all(g.query["per_page"] == ["100"] for g in gets)
    assert len(fake.comments_on(REPO, PR)) == 250


def test_duplicates_left_by_a_race_are_deleted_and_the_newest_kept(fake: GitHubFake, api: GitHubAPI) -> None:
    marker = comment_marker("main")
    older = fake.add_comment(REPO, PR, with_marker("race 1", marker), bot=True)
    fake.add_comment(REPO, PR, "a human's comment")
    newer = fake.add_comment(REPO, PR, with_marker("race 2", marker), bot=True)
    result = upsert_comment(api, REPO, PR, "fresh", tag="main")
    assert (result.action, result.comment_id, result.removed) == ("updated", newer["id"], 1)
    assert older["id"] not in fake.comments
    assert [c["body"].split("\n")[-1] for c in fake.comments_on(REPO, PR)] == ["a human's comment", "fresh"]


def test_two_tags_keep_two_comments(fake: GitHubFake, api: GitHubAPI) -> None:
    upsert_comment(api, REPO, PR, "suite A v1", tag="suite-a")
    upsert_comment(api, REPO, PR, "suite B v1", tag="suite-b")
    upsert_comment(api, REPO, PR, "suite A v2", tag="suite-a")
    bodies = sorted(c["body"].split("\n", 1)[1] for c in fake.comments_on(REPO, PR))
    assert bodies == ["suite A v2", "suite B v1"]


def test_tag_prefix_does_not_match_a_longer_tag(fake: GitHubFake, api: GitHubAPI) -> None:
    upsert_comment(api, REPO, PR, "long", tag="suite-ab")
    result = upsert_comment(api, REPO, PR, "short", tag="suite-a")
    assert result.action == "created"
    assert len(fake.comments_on(REPO, PR)) == 2


def test_fork_token_403_fails_with_a_warning_and_no_exception(fake: GitHubFake, api: GitHubAPI) -> None:
    fake.read_only = True
    result = upsert_comment(api, REPO, PR, "report", tag="main")
    assert result.action == "failed"
    assert result.warning is not None
    assert "Resource not accessible by integration" in result.warning
    assert "fork" in result.warning
    assert "\n" not in result.warning
    assert TOKEN not in result.warning
    assert fake.comments_on(REPO, PR) == []
    assert len(fake.requests("POST")) == 1  # a plain 403 is not retried


def test_404_and_network_failures_never_raise(fake: GitHubFake, api: GitHubAPI) -> None:
    fake.fail_next(404, message="Not Found", method="GET", count=2)  # GET /user, then the listing
    result = upsert_comment(api, REPO, PR, "report", tag="main")
    assert result.action == "failed"
    assert "not found" in (result.warning or "")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with GitHubAPI(token=TOKEN, base_url=f"http://127.0.0.1:{port}", sleep=lambda s: None) as dead:
        offline = upsert_comment(dead, REPO, PR, "report", tag="main")
    assert offline.action == "failed"
    assert "network error" in (offline.warning or "")


def test_5xx_on_create_is_retried_then_succeeds(fake: GitHubFake, api: GitHubAPI) -> None:
    fake.fail_next(502, count=2, method="POST", message="Bad Gateway")
    result = upsert_comment(api, REPO, PR, "report", tag="main")
    assert result.action == "created"
    assert len(fake.requests("POST")) == 3
    assert len(fake.comments_on(REPO, PR)) == 1


def test_5xx_on_listing_is_retried_then_updates(fake: GitHubFake, api: GitHubAPI) -> None:
    upsert_comment(api, REPO, PR, "v1", tag="main")
    fake.fail_next(503, method="GET")
    result = upsert_comment(api, REPO, PR, "v2", tag="main")
    assert result.action == "updated"
    assert len(fake.comments_on(REPO, PR)) == 1


def test_body_is_cut_to_65536_characters(fake: GitHubFake, api: GitHubAPI) -> None:
    huge = "x" * 70_000 + "😀" * 100
    result = upsert_comment(api, REPO, PR, huge, tag="main")
    assert result.action == "created"
    body = fake.comments_on(REPO, PR)[0]["body"]
    assert utf16_len(body) <= MAX_COMMENT_CHARS
    assert "comment truncated by evalgate" in body
    assert has_marker(body, comment_marker("main"))


def test_the_fake_rejects_bodies_over_the_limit(fake: GitHubFake, api: GitHubAPI) -> None:
    with pytest.raises(GitHubAPIError) as info:
        api.post(f"/repos/{REPO}/issues/{PR}/comments", {"body": "y" * (MAX_COMMENT_CHARS + 1)})
    assert info.value.status == 422
    assert "Body is too long (maximum is 65536 characters)" in info.value.message
    api.post(f"/repos/{REPO}/issues/{PR}/comments", {"body": "y" * MAX_COMMENT_CHARS})


def test_no_pull_request_is_skipped_without_requests(fake: GitHubFake, api: GitHubAPI) -> None:
    result = upsert_comment(api, REPO, None, "report", tag="main")
    assert result.action == "skipped"
    assert fake.log == []


def test_hostile_tag_cannot_close_the_marker() -> None:
    marker = comment_marker("x --> <script>")
    assert marker.count("-->") == 1
    assert marker.endswith(" -->")
    assert "<script>" not in marker


def test_enforce_limit_keeps_short_bodies_and_cuts_long_ones() -> None:
    assert enforce_limit("short") == "short"
    cut = enforce_limit("a" * 300, limit=200)
    assert len(cut) == 200
    assert cut.startswith("a" * 100)
    assert cut.endswith("see the job summary.\n")
    assert len(enforce_limit("b" * 100, limit=40)) <= 40
