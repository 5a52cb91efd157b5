"""GitHubAPI against the loopback GitHub fake: headers, pagination, retries, time cap, origin guard."""

from __future__ import annotations

import email.utils
import socket
from collections.abc import Iterator

import pytest

from evalgate.github.api import GitHubAPI, GitHubAPIError, parse_retry_after, retry_delay
from tests.servers.github_fake import GitHubFake

REPO = "octo/hello"
TOKEN = "ghs_fake_token_for_tests"


class FakeClock:
    """Monotonic and wall clock that advance only when the client sleeps."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def fake() -> Iterator[GitHubFake]:
    with GitHubFake(token=TOKEN) as server:
        yield server


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def make_api(fake: GitHubFake, clock: FakeClock, **kwargs: object) -> GitHubAPI:
    return GitHubAPI(token=TOKEN, base_url=fake.url, sleep=clock.sleep, clock=clock, wall_clock=clock, **kwargs)


def test_sends_github_headers_and_bearer_token(fake: GitHubFake, clock: FakeClock) -> None:
    with make_api(fake, clock) as api:
        assert api.get(f"/repos/{REPO}/issues/1/comments") == []
    headers = fake.log[0].headers
    assert headers["authorization"] == f"Bearer {TOKEN}"
    assert headers["accept"] == "application/vnd.github+json"
    assert headers["x-github-api-version"] == "2022-11-28"
    assert headers["user-agent"].startswith("evalgate/")


def test_base_url_comes_from_github_api_url(fake: GitHubFake) -> None:
    with GitHubAPI.from_env({"GITHUB_API_URL": fake.url + "/"}, TOKEN) as api:
        api.post(f"/repos/{REPO}/issues/3/comments", {"body": "hi"})
    assert fake.log[-1].path == f"/repos/{REPO}/issues/3/comments"
    assert GitHubAPI.from_env({}, None).base_url == "https://api.github.com"


def test_paginate_follows_link_next_until_absent(fake: GitHubFake, clock: FakeClock) -> None:
    for i in range(250):
        fake.add_comment(REPO, 7, f"comment {i}")
    with make_api(fake, clock) as api:
        bodies = [c["body"] for c in api.paginate(f"/repos/{REPO}/issues/7/comments", {"per_page": 100})]
    assert bodies == [f"comment {i}" for i in range(250)]
    pages = [(r.query["per_page"], r.query.get("page", ["1"])) for r in fake.log]
    assert pages == [(["100"], ["1"]), (["100"], ["2"]), (["100"], ["3"])]


def test_5xx_is_retried_with_exponential_backoff(fake: GitHubFake, clock: FakeClock) -> None:
    fake.fail_next(502, count=2)
    with make_api(fake, clock, backoff=0.5) as api:
        assert api.get(f"/repos/{REPO}/issues/1/comments") == []
    assert len(fake.log) == 3
    assert clock.sleeps == [0.5, 1.0]


def test_at_most_four_attempts_then_the_error_is_raised(fake: GitHubFake, clock: FakeClock) -> None:
    fake.fail_next(503, count=10, message="Service Unavailable")
    with make_api(fake, clock) as api, pytest.raises(GitHubAPIError) as info:
        api.get(f"/repos/{REPO}/issues/1/comments")
    assert len(fake.log) == 4
    assert info.value.status == 503
    assert "Service Unavailable" in str(info.value)


def test_secondary_rate_limit_with_retry_after_is_retried(fake: GitHubFake, clock: FakeClock) -> None:
    fake.fail_next(403, headers={"Retry-After": "7"}, message="You have exceeded a secondary rate limit")
    with make_api(fake, clock) as api:
        api.post(f"/repos/{REPO}/issues/1/comments", {"body": "x"})
    assert clock.sleeps == [7.0]
    assert [r.method for r in fake.log] == ["POST", "POST"]
    assert len(fake.comments_on(REPO, 1)) == 1


def test_429_and_exhausted_quota_wait_until_reset(fake: GitHubFake, clock: FakeClock) -> None:
    reset = int(clock.now) + 12
    fake.fail_next(429, headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)})
    with make_api(fake, clock) as api:
        assert api.get(f"/repos/{REPO}/issues/1/comments") == []
    assert clock.sleeps == [pytest.approx(12.0)]


def test_plain_403_and_404_are_not_retried(fake: GitHubFake, clock: FakeClock) -> None:
    fake.read_only = True
    with make_api(fake, clock) as api:
        with pytest.raises(GitHubAPIError) as info:
            api.post(f"/repos/{REPO}/issues/1/comments", {"body": "x"})
        assert info.value.status == 403
        assert info.value.message == "Resource not accessible by integration"
        with pytest.raises(GitHubAPIError) as forbidden:
            api.patch(f"/repos/{REPO}/issues/comments/999999", {"body": "x"})
        assert forbidden.value.status == 403
        fake.read_only = False
        with pytest.raises(GitHubAPIError) as missing:
            api.patch(f"/repos/{REPO}/issues/comments/999999", {"body": "x"})
        assert missing.value.status == 404
    assert len(fake.log) == 3
    assert clock.sleeps == []


def test_total_time_cap_stops_retrying(fake: GitHubFake, clock: FakeClock) -> None:
    fake.fail_next(500, count=10)
    with make_api(fake, clock, backoff=1.0, max_total=2.5) as api:
        response = api.request("GET", f"/repos/{REPO}/issues/1/comments")
    assert response.status_code == 500
    assert clock.sleeps == [1.0]  # the next wait (2 s) would end at 3 s > 2.5 s
    assert len(fake.log) == 2


def test_retry_after_longer_than_max_wait_is_not_waited_for(fake: GitHubFake, clock: FakeClock) -> None:
    fake.fail_next(403, headers={"Retry-After": "3600"}, message="rate limit")
    with make_api(fake, clock, max_wait=60) as api, pytest.raises(GitHubAPIError) as info:
        api.get(f"/repos/{REPO}/issues/1/comments")
    assert info.value.status == 403
    assert clock.sleeps == []


def test_next_link_to_another_origin_is_refused(fake: GitHubFake, clock: FakeClock) -> None:
    fake.respond_next(200, [{"id": 1, "body": "x"}], headers={"Link": '<http://10.255.255.1:9/steal?page=2>; rel="next"'})
    with make_api(fake, clock) as api, pytest.raises(GitHubAPIError, match="another origin"):
        list(api.paginate(f"/repos/{REPO}/issues/1/comments"))
    assert len(fake.log) == 1


def test_wrong_token_error_never_contains_the_token(fake: GitHubFake, clock: FakeClock) -> None:
    secret = "ghp_wrongTokenValue1234567890"
    api = GitHubAPI(token=secret, base_url=fake.url, sleep=clock.sleep, clock=clock)
    with api, pytest.raises(GitHubAPIError) as info:
        api.get(f"/repos/{REPO}/issues/1/comments")
    assert info.value.status == 401
    assert "Bad credentials" in str(info.value)
    assert secret not in str(info.value)


def test_network_errors_are_retried_then_reported(clock: FakeClock) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    api = GitHubAPI(token=TOKEN, base_url=f"http://127.0.0.1:{port}", sleep=clock.sleep, clock=clock)
    with api, pytest.raises(GitHubAPIError) as info:
        api.get("/repos/o/r/issues/1/comments")
    assert info.value.status is None
    assert clock.sleeps == [1.0, 2.0, 4.0]
    assert TOKEN not in str(info.value)


def test_retry_after_parsing() -> None:
    now = 1_800_000_000.0
    assert parse_retry_after("30", now) == 30.0
    assert parse_retry_after(email.utils.formatdate(now + 20, usegmt=True), now) == pytest.approx(20.0)
    assert parse_retry_after(email.utils.formatdate(now - 20, usegmt=True), now) == 0.0
    assert parse_retry_after("soon", now) is None
    assert parse_retry_after(None, now) is None


def test_retry_delay_policy() -> None:
    import httpx

    def response(status: int, **headers: str) -> httpx.Response:
        return httpx.Response(status, headers=headers)

    assert retry_delay(response(502), 3, 1.0, 0.0) == 4.0
    assert retry_delay(response(503, **{"retry-after": "9"}), 1, 1.0, 0.0) == 9.0
    assert retry_delay(response(403), 1, 1.0, 0.0) is None
    assert retry_delay(response(404), 1, 1.0, 0.0) is None
    assert retry_delay(response(422), 1, 1.0, 0.0) is None
    assert retry_delay(response(429, **{"x-ratelimit-remaining": "0"}), 2, 1.0, 0.0) == 2.0
    assert retry_delay(response(403, **{"x-ratelimit-remaining": "12"}), 1, 1.0, 0.0) is None
