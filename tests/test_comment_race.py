"""Two evalgate runs publishing on one pull request at the same moment leave exactly one comment, and it
shows the fresher report: 20 trials against the stateful loopback GitHub fake, each with two threads
released together (a create race when the PR has no comment yet, an edit race when it has one)."""

from __future__ import annotations

import random
import threading
import time

from evalgate.github.api import GitHubAPI
from evalgate.github.comment import CommentResult, Stamp, has_marker, read_stamp, upsert_comment, with_marker
from evalgate.report.markdown import comment_marker
from tests.servers.github_fake import GitHubFake

REPO = "octo/race"
TOKEN = "ghs_comment_race_token_0001"
OLD_HEAD = "a" * 40
NEW_HEAD = "b" * 40
TRIALS = 20
SETTLE = 0.15


def publish_concurrently(fake: GitHubFake, pr: int, runs: list[tuple[str, Stamp]]) -> list[CommentResult]:
    """Each run in its own thread with its own client, all released by one barrier (plus 0–20 ms jitter)."""
    barrier = threading.Barrier(len(runs))
    results: list[CommentResult | None] = [None] * len(runs)

    def run(index: int, body: str, stamp: Stamp) -> None:
        with GitHubAPI(token=TOKEN, base_url=fake.url) as api:
            barrier.wait()
            time.sleep(random.uniform(0, 0.02))
            results[index] = upsert_comment(api, REPO, pr, body, "default", stamp=stamp, settle=SETTLE,
                                            sleep=time.sleep)

    threads = [threading.Thread(target=run, args=(i, body, stamp)) for i, (body, stamp) in enumerate(runs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert all(r is not None for r in results)
    return [r for r in results if r is not None]


def test_twenty_races_leave_one_comment_with_the_newer_heads_report() -> None:
    random.seed(24)
    marker = comment_marker("default")
    duplicates = stale = created_twice = 0
    with GitHubFake(token=TOKEN) as fake:
        for trial in range(TRIALS):
            pr = 100 + trial
            fake.add_pull(REPO, pr, head_sha=NEW_HEAD, head_label="octo:feature")
            if trial % 2:  # an edit race: a comment from an earlier push is there
                fake.add_comment(REPO, pr, with_marker("report for an earlier push", marker), bot=True)
            posts_before = len(fake.requests("POST"))
            # the run for the older head started first, the newer head's run a second later
            results = publish_concurrently(fake, pr, [
                ("report for the OLD head", Stamp(OLD_HEAD, "2026-11-26T10:00:00Z")),
                ("report for the NEW head", Stamp(NEW_HEAD, "2026-11-26T10:00:01Z")),
            ])
            created_twice += len(fake.requests("POST")) - posts_before == 2
            ours = [c for c in fake.comments_on(REPO, pr) if has_marker(c["body"], marker)]
            duplicates += len(ours) != 1
            shown = read_stamp(ours[0]["body"]) if ours else None
            stale += not (shown and shown.head == NEW_HEAD and ours[0]["body"].endswith("NEW head"))
            assert all(r.action != "failed" for r in results), results
    print(f"{TRIALS} trials: {created_twice} create races with two POSTs, {duplicates} duplicates left, "
          f"{stale} stale reports shown")
    assert (duplicates, stale) == (0, 0)
    assert created_twice >= 1, "no trial raced: the test did not exercise the race"


def test_a_later_run_of_the_same_head_wins_and_an_older_run_reports_why_it_stood_back() -> None:
    marker = comment_marker("default")
    with GitHubFake(token=TOKEN) as fake:
        fake.add_pull(REPO, 7, head_sha=NEW_HEAD, head_label="octo:feature")
        newer = with_marker("later run", marker).replace("\n", "\n" + Stamp(NEW_HEAD, "2026-11-26T10:05:00Z").line()
                                                          + "\n", 1)
        fake.add_comment(REPO, 7, newer, bot=True)
        with GitHubAPI(token=TOKEN, base_url=fake.url, sleep=lambda _: None) as api:
            late = upsert_comment(api, REPO, 7, "earlier run", "default", stamp=Stamp(NEW_HEAD, "2026-11-26T10:00:00Z"))
            old = upsert_comment(api, REPO, 7, "old head", "default", stamp=Stamp(OLD_HEAD, "2026-11-26T11:00:00Z"))
            fresh = upsert_comment(api, REPO, 7, "newest run", "default", stamp=Stamp(NEW_HEAD, "2026-11-26T10:09:00Z"))
        assert late.action == "skipped" and late.warning and "later run" in late.warning
        # run later, but for a head the pull request has moved past: never shown over the current head's
        assert old.action == "skipped" and old.warning and "newer head" in old.warning
        assert fresh.action == "updated"
        assert [c["body"].split("\n")[-1] for c in fake.comments_on(REPO, 7)] == ["newest run"]
        assert fake.requests("DELETE") == []


def test_without_the_pull_request_the_later_run_time_decides() -> None:
    marker = comment_marker("default")
    with GitHubFake(token=TOKEN) as fake:  # GET /pulls/8 is a 404: only the run times are compared
        with GitHubAPI(token=TOKEN, base_url=fake.url, sleep=lambda _: None) as api:
            first = upsert_comment(api, REPO, 8, "second run", "default", stamp=Stamp(NEW_HEAD, "2026-11-26T10:01:00Z"))
            second = upsert_comment(api, REPO, 8, "first run", "default", stamp=Stamp(OLD_HEAD, "2026-11-26T10:00:00Z"))
        assert (first.action, second.action) == ("created", "skipped")
        ours = [c for c in fake.comments_on(REPO, 8) if has_marker(c["body"], marker)]
        assert len(ours) == 1 and ours[0]["body"].endswith("second run")
