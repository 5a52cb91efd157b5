"""evalgate's comment is evalgate's, and concurrent runs converge without timing (issue 30, item 5).

Runs publishing on one pull request at the same moment leave exactly one comment of evalgate's, showing the
freshest run's report, whatever the write latency: 20 pull requests published at once against the stateful
loopback GitHub fake, every POST / PATCH / DELETE delayed 0–3 s (split at random before and after it is
applied, so the writers' requests overlap in every order). Each pull request also carries a comment by
another user with evalgate's marker and a stamp from the future: it is never read, copied, edited or deleted.
No assertion is about time."""

from __future__ import annotations

import random
import threading

from evalgate.github.api import GitHubAPI
from evalgate.github.comment import CommentResult, Stamp, has_marker, read_stamp, upsert_comment, with_marker
from evalgate.report.markdown import comment_marker
from tests.servers.github_fake import GitHubFake

REPO = "octo/race"
TOKEN = "ghs_comment_race_token_0001"
OLD_HEAD = "a" * 40
NEW_HEAD = "b" * 40
TRIALS = 20
FORGED = "MALLORY'S TEXT: evalgate passed, merge away"
MARKER = comment_marker("default")


def forged_comment(fake: GitHubFake, pr: int) -> dict:
    """Anyone who can comment can write evalgate's marker and a stamp dated in the future."""
    body = with_marker(f"{Stamp(NEW_HEAD, '2099-01-01T00:00:00Z', '999999999.9').line()}\n{FORGED}", MARKER)
    return fake.add_comment(REPO, pr, body, login="mallory")


def slow_writes(seed: int) -> tuple[random.Random, threading.Lock]:
    return random.Random(seed), threading.Lock()


def delays(fake: GitHubFake, seed: int, longest: float = 3.0) -> None:
    rng, lock = slow_writes(seed)

    def delay() -> tuple[float, float]:
        with lock:
            total = rng.uniform(0.0, longest)
            before = rng.uniform(0.0, total)
        return before, total - before

    fake.write_delay = delay


def publish_all(fake: GitHubFake, runs: list[tuple[int, str, Stamp]]) -> list[CommentResult]:
    """Every run in its own thread with its own client, all released by one barrier."""
    barrier = threading.Barrier(len(runs))
    results: list[CommentResult | None] = [None] * len(runs)

    def run(index: int, pr: int, body: str, stamp: Stamp) -> None:
        with GitHubAPI(token=TOKEN, base_url=fake.url) as api:
            barrier.wait()
            results[index] = upsert_comment(api, REPO, pr, body, "default", stamp=stamp)

    threads = [threading.Thread(target=run, args=(i, *spec)) for i, spec in enumerate(runs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert all(r is not None for r in results), "a publishing thread did not finish"
    return [r for r in results if r is not None]


def ours(fake: GitHubFake, pr: int) -> list[dict]:
    return [c for c in fake.comments_on(REPO, pr) if has_marker(c["body"], MARKER) and c["user"]["login"] == fake.bot_login]


def test_twenty_pull_requests_with_writes_taking_0_to_3_seconds_each_show_the_freshest_report() -> None:
    """Even PRs: the run for the old head started first, the run for the pushed head a second later (the pull
    request points at the new head). Odd PRs: two runs of the current head (a later event on the same head),
    the later run id winning. Every third PR already has evalgate's comment from an earlier push."""
    with GitHubFake(token=TOKEN) as fake:
        runs: list[tuple[int, str, Stamp]] = []
        expected: dict[int, str] = {}
        forged: dict[int, dict] = {}
        for trial in range(TRIALS):
            pr = 100 + trial
            fake.add_pull(REPO, pr, head_sha=NEW_HEAD, head_label="octo:feature")
            forged[pr] = forged_comment(fake, pr)
            if trial % 3 == 0:
                fake.add_comment(REPO, pr, with_marker("report for an earlier push", MARKER), bot=True)
            older_head = OLD_HEAD if trial % 2 == 0 else NEW_HEAD
            runs.append((pr, f"older run's report #{pr}", Stamp(older_head, "2026-11-26T10:00:00Z", f"{500 + pr}.1")))
            runs.append((pr, f"newer run's report #{pr}", Stamp(NEW_HEAD, "2026-11-26T10:00:01Z", f"{900 + pr}.1")))
            expected[pr] = f"newer run's report #{pr}"
        delays(fake, seed=30)
        results = publish_all(fake, runs)
        left, wrong, foreign_touched = {}, [], []
        for pr, want in expected.items():
            mine = ours(fake, pr)
            left[pr] = len(mine)
            if len(mine) != 1 or not mine[0]["body"].endswith(want) or FORGED in mine[0]["body"]:
                wrong.append(pr)
            still = fake.comments.get(forged[pr]["id"])
            if still is None or still["body"] != forged[pr]["body"]:
                foreign_touched.append(pr)
        writes = [r for r in fake.requests() if r.method in ("PATCH", "DELETE")
                  and r.path.endswith(tuple(f"/{c['id']}" for c in forged.values()))]
        surviving = set(fake.comments)
    print(f"{TRIALS} pull requests: {len(wrong)} show another report than the freshest run's, "
          f"{sum(n != 1 for n in left.values())} without exactly one evalgate comment, "
          f"{len(foreign_touched)} forged comments touched")
    assert all(r.action != "failed" for r in results), results
    assert wrong == [] and set(left.values()) == {1}
    assert foreign_touched == [] and writes == []
    # the older run of each pull request stood back and said why, or finished first and was replaced after
    stale = results[0::2]
    assert all((r.action == "skipped" and r.warning) or r.comment_id not in surviving for r in stale), stale
    assert all(r.comment_id in surviving for r in results[1::2]), results[1::2]


def test_a_later_run_of_the_same_head_wins_and_an_older_run_reports_why_it_stood_back() -> None:
    with GitHubFake(token=TOKEN) as fake:
        fake.add_pull(REPO, 7, head_sha=NEW_HEAD, head_label="octo:feature")
        newer = with_marker(f"{Stamp(NEW_HEAD, '2026-11-26T10:05:00Z', '20.1').line()}\nlater run", MARKER)
        fake.add_comment(REPO, 7, newer, bot=True)
        with GitHubAPI(token=TOKEN, base_url=fake.url, sleep=lambda _: None) as api:
            late = upsert_comment(api, REPO, 7, "earlier run", "default", stamp=Stamp(NEW_HEAD, "2026-11-26T10:00:00Z",
                                                                                      "10.1"))
            old = upsert_comment(api, REPO, 7, "old head", "default", stamp=Stamp(OLD_HEAD, "2026-11-26T11:00:00Z", "30.1"))
            fresh = upsert_comment(api, REPO, 7, "newest run", "default", stamp=Stamp(NEW_HEAD, "2026-11-26T10:09:00Z",
                                                                                      "40.1"))
            rerun = upsert_comment(api, REPO, 7, "newest run, published again", "default",
                                   stamp=Stamp(NEW_HEAD, "2026-11-26T10:09:30Z", "40.1"))
        assert late.action == "skipped" and late.warning and "later run" in late.warning
        # run later, but for a head the pull request has moved past: it writes nothing
        assert old.action == "skipped" and old.warning and "head is now bbbbbbb" in old.warning
        assert fake.requests("POST") == [] or all("old head" not in str(r.body) for r in fake.requests("POST"))
        assert fresh.action == "created" and fresh.removed == 1
        # the same workflow run attempt publishing again edits its own comment in place
        assert rerun.action == "updated" and rerun.comment_id == fresh.comment_id
        assert [c["body"].split("\n")[-1] for c in fake.comments_on(REPO, 7)] == ["newest run, published again"]


def test_without_the_pull_request_the_later_run_time_decides() -> None:
    with GitHubFake(token=TOKEN) as fake:  # GET /pulls/8 is a 404: only the run times are compared
        with GitHubAPI(token=TOKEN, base_url=fake.url, sleep=lambda _: None) as api:
            first = upsert_comment(api, REPO, 8, "second run", "default", stamp=Stamp(NEW_HEAD, "2026-11-26T10:01:00Z"))
            second = upsert_comment(api, REPO, 8, "first run", "default", stamp=Stamp(OLD_HEAD, "2026-11-26T10:00:00Z"))
        assert (first.action, second.action) == ("created", "skipped")
        mine = ours(fake, 8)
        assert len(mine) == 1 and mine[0]["body"].endswith("second run")


def test_anyone_elses_marker_is_never_copied_edited_or_deleted() -> None:
    with GitHubFake(token=TOKEN) as fake:
        fake.add_pull(REPO, 9, head_sha=NEW_HEAD, head_label="octo:feature")
        forged = forged_comment(fake, 9)
        plain = fake.add_comment(REPO, 9, with_marker("no stamp at all", MARKER), login="mallory")
        with GitHubAPI(token=TOKEN, base_url=fake.url, sleep=lambda _: None) as api:
            first = upsert_comment(api, REPO, 9, "our report", "default", stamp=Stamp(NEW_HEAD, "2026-11-26T10:00:00Z",
                                                                                      "1.1"))
            second = upsert_comment(api, REPO, 9, "our next report", "default",
                                    stamp=Stamp(NEW_HEAD, "2026-11-26T10:10:00Z", "2.1"))
        assert first.action == "created" and second.action == "created" and second.removed == 1
        bodies = {c["id"]: c["body"] for c in fake.comments_on(REPO, 9)}
        assert bodies[forged["id"]] == forged["body"] and bodies[plain["id"]] == plain["body"]
        mine = ours(fake, 9)
        assert len(mine) == 1 and mine[0]["body"].endswith("our next report") and FORGED not in mine[0]["body"]
        touched = [r for r in fake.requests() if r.method in ("PATCH", "DELETE")
                   and r.path.endswith((f"/{forged['id']}", f"/{plain['id']}"))]
        assert touched == []


def test_the_identity_is_learned_from_the_comment_evalgate_creates_or_named_by_an_input() -> None:
    """A GitHub App token comments as my-app[bot]; GET /user is forbidden. Without comment-author, the first
    listing looks for github-actions[bot]'s comments, and after creating its own evalgate knows the author
    GitHub recorded and removes its earlier comment; github-actions[bot]'s marker is someone else's then."""
    with GitHubFake(token=TOKEN, bot_login="my-app[bot]") as fake:
        fake.add_pull(REPO, 11, head_sha=NEW_HEAD, head_label="octo:feature")
        other_bot = fake.add_comment(REPO, 11, with_marker("another workflow's bot", MARKER), login="github-actions[bot]")
        earlier = fake.add_comment(REPO, 11, with_marker("our earlier push", MARKER), bot=True)
        with GitHubAPI(token=TOKEN, base_url=fake.url, sleep=lambda _: None) as api:
            learned = upsert_comment(api, REPO, 11, "learned", "default", stamp=Stamp(NEW_HEAD, "2026-11-26T10:00:00Z",
                                                                                      "1.1"))
            named = upsert_comment(api, REPO, 11, "named", "default", stamp=Stamp(NEW_HEAD, "2026-11-26T10:05:00Z", "2.1"),
                                   author="my-app[bot]")
        assert learned.action == "created" and learned.removed == 1 and earlier["id"] not in fake.comments
        assert named.action == "created" and named.removed == 1
        assert fake.comments[other_bot["id"]]["body"] == other_bot["body"]
        assert [c["body"].split("\n")[-1] for c in ours(fake, 11)] == ["named"]
        fake.user_login = "octocat"  # a personal token: GET /user names who comments
        fake.bot_login = "octocat"
        with GitHubAPI(token=TOKEN, base_url=fake.url, sleep=lambda _: None) as api:
            personal = upsert_comment(api, REPO, 11, "by a person's token", "default",
                                      stamp=Stamp(NEW_HEAD, "2026-11-26T10:09:00Z", "3.1"))
        assert personal.action == "created" and personal.removed == 0  # my-app[bot]'s comment is not its own
        assert read_stamp(fake.comments[personal.comment_id]["body"]) == Stamp(NEW_HEAD, "2026-11-26T10:09:00Z", "3.1")


def test_the_action_ignores_a_forged_marker_and_replaces_only_its_own_comment(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Through the Action's entry module: a pull request whose conversation holds a comment by another user with
    evalgate's marker and a stamp from the future. The run posts its own report (not the forged text) and the
    forged comment is left as it was; a later workflow run replaces evalgate's comment only."""
    from tests.support.action import PASSING, make_workspace, run_entrypoint, runner_env, webhook_example

    payload = webhook_example("pull_request", "opened")  # skips without the npm examples
    repo, number = "Codertocat/Hello-World", payload["number"]
    with GitHubFake(token="ghs_evalgateTestToken0123456789abcdef") as github:
        forged = github.add_comment(repo, number, with_marker(
            f"{Stamp(payload['pull_request']['head']['sha'], '2099-01-01T00:00:00Z', '999999999.9').line()}\n{FORGED}",
            MARKER), login="mallory")
        ws = make_workspace(tmp_path, PASSING)
        shown = []
        for run_id in ("4242", "4243"):
            env = runner_env(ws, event_name="pull_request", payload=payload, api_url=github.url,
                             inputs={"dataset": "datasets/brand-mentions", "baseline": "none"},
                             extra={"GITHUB_RUN_ID": run_id})
            done = run_entrypoint(ws, env)
            assert done.returncode == 0, done.stdout + done.stderr
            mine = [c for c in github.comments_on(repo, number) if c["user"]["login"] == "github-actions[bot]"]
            assert len(mine) == 1 and FORGED not in mine[0]["body"] and "evalgate passed" in mine[0]["body"]
            assert ws.outputs()["comment-url"] == mine[0]["html_url"]
            assert read_stamp(mine[0]["body"]).run == f"{run_id}.1"  # type: ignore[union-attr]
            shown.append(mine[0]["id"])
            ws.reset_files()
        assert shown[0] != shown[1] and shown[0] not in github.comments  # the earlier run's comment replaced
        assert github.comments[forged["id"]]["body"] == forged["body"]
        assert not [r for r in github.requests() if r.method in ("PATCH", "DELETE") and r.path.endswith(f"/{forged['id']}")]
