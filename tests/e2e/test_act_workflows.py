"""The repository's own workflows, run offline by nektos/act (tests/support/act.py): the CI dogfood job,
a service container reached by name, host mode reaching an agent on localhost, and both modes agreeing.

Marked ``docker`` and ``slow``; skipped with the reason when docker-local or act is absent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers.github_fake import GitHubFake
from tests.support.act import TIMINGS, act_unavailable, prepare_images, repository_copy, run_act
from tests.support.action import TOKEN, webhook_example
from tests.support.relay import HEAD_SHA, PR, RUN_ID, fork_pull_request_event, workflow_run_event

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(1800)]
RUNNER_UID = 1001


@pytest.fixture(scope="module", autouse=True)
def images() -> Iterator[None]:
    reason = act_unavailable()
    if reason:
        pytest.skip(reason)
    prepare_images()
    yield
    print("\nact timings: " + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in TIMINGS.items()))


def tail(text: str, lines: int = 80) -> str:
    return "\n".join(text.splitlines()[-lines:])


def test_dogfood_job_passes_and_leaves_files_the_workspace_owner_can_delete(tmp_path: Path) -> None:
    repo = repository_copy(tmp_path / "repo", owner=RUNNER_UID)
    run = run_act(repo, "push", "ci.yml", "dogfood")
    assert run.succeeded("dogfood"), tail(run.output)
    assert "setpriv --reuid=1001" in run.output  # the clean-up step really ran as the owner
    assert not (repo / "evalgate-results").exists()


def test_container_action_reaches_a_service_by_its_name(tmp_path: Path) -> None:
    repo = repository_copy(tmp_path / "repo")
    run = run_act(repo, "workflow_dispatch", "examples.yml", "service-container")
    assert run.succeeded("service-container"), tail(run.output)
    assert "service answered 6 cases" in run.output


def test_host_mode_reaches_an_agent_started_on_localhost(tmp_path: Path) -> None:
    repo = repository_copy(tmp_path / "repo")
    run = run_act(repo, "workflow_dispatch", "examples.yml", "host-agent")
    assert run.succeeded("host-agent"), tail(run.output)
    assert "agent answered 6 cases" in run.output


def pull_request_event(tmp_path: Path) -> tuple[Path, int]:
    """GitHub's own ``pull_request`` ``opened`` example, for this repository: the event file and the PR number."""
    payload = webhook_example("pull_request", "opened")
    payload["repository"]["full_name"] = "evalgate/evalgate"
    event = tmp_path / "event.json"
    event.write_text(json.dumps(payload), encoding="utf-8")
    return event, int(payload["pull_request"]["number"])


def test_container_and_host_mode_give_the_same_outputs_results_and_comment(tmp_path: Path) -> None:
    repo = repository_copy(tmp_path / "repo")
    event, number = pull_request_event(tmp_path)
    with GitHubFake(token=TOKEN) as github:
        run = run_act(repo, "pull_request", "examples.yml", "modes-agree", event_payload=event,
                      env={"GITHUB_API_URL": github.url}, secrets={"GITHUB_TOKEN": TOKEN})
        comments = github.comments_on("evalgate/evalgate", number)
        writes = [r for r in github.requests() if r.method in ("POST", "PATCH")]
    assert run.succeeded("modes-agree"), tail(run.output)
    assert "container and host mode agree" in run.output
    assert len(comments) == 1 and [r.method for r in writes] == ["POST", "PATCH"]
    bodies = [re.sub(r"`\d{8}T\d{6}Z-[0-9a-f]{6}` at \S+Z", "RUN", r.body["body"]) for r in writes]
    bodies = [re.sub(r"<!-- evalgate:run head=[0-9a-f]* at=[^>]* -->", "STAMP", body) for body in bodies]  # + run=N.M
    assert bodies[0] == bodies[1]  # host mode rewrote the comment with the same content (its own run id)
    assert bodies[0].count("RUN") == 1


def test_fork_pattern_evaluates_read_only_then_comments_from_workflow_run(tmp_path: Path) -> None:
    repo = repository_copy(tmp_path / "repo")
    events = {"pull_request": fork_pull_request_event(), "workflow_run": workflow_run_event()}
    for name, payload in events.items():
        payload["repository"]["full_name"] = "evalgate/evalgate"
        (tmp_path / f"{name}.json").write_text(json.dumps(payload), encoding="utf-8")
    with GitHubFake(token=TOKEN) as github:
        github.read_only = True  # a fork's pull_request token
        evaluate = run_act(repo, "pull_request", "evals.yml", "evaluate", event_payload=tmp_path / "pull_request.json",
                           env={"GITHUB_API_URL": github.url}, secrets={"GITHUB_TOKEN": TOKEN})
        assert evaluate.succeeded("evaluate"), tail(evaluate.output)
        assert github.requests("POST") == [] and github.requests("PATCH") == []
        github.read_only = False
        # what actions/upload-artifact keeps of the evaluating run (act's own artifact server is off)
        data = zip_files(repo / "evalgate-results", ("results.json", "results.db"))
        github.add_run_artifact("evalgate/evalgate", {**events["workflow_run"]["workflow_run"]}, "evalgate-results",
                                data)
        github.add_pull("evalgate/evalgate", PR, head_sha=HEAD_SHA, head_label="forker:fix-prompts")
        published = run_act(repo, "workflow_run", "evals-publish.yml", "comment",
                            event_payload=tmp_path / "workflow_run.json", env={"GITHUB_API_URL": github.url},
                            secrets={"GITHUB_TOKEN": TOKEN},
                            extra=["--local-repository", f"evalgate/evalgate@v1={repo}"])
        comments = github.comments_on("evalgate/evalgate", PR)
    assert published.succeeded("comment"), tail(published.output)
    assert len(comments) == 1 and "evalgate" in comments[0]["body"]
    assert f"/actions/runs/{RUN_ID}/artifacts/" in comments[0]["body"]
    assert f"results of run {RUN_ID} published on pull request #{PR}" in published.output


def zip_files(directory: Path, names: tuple[str, ...]) -> bytes:
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in names:
            archive.write(directory / name, name)
    return buffer.getvalue()


def documented_sharding_workflow() -> str:
    """The YAML block of docs/sharding.md's "A complete workflow (the action)", as a user copies it."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "sharding.md").read_text(encoding="utf-8")
    section = text[text.index("## A complete workflow (the action)"):]
    return section[section.index("```yaml\n") + len("```yaml\n"):section.index("\n```", section.index("```yaml"))] + "\n"


def test_documented_shard_matrix_and_merge_publish_one_comment(tmp_path: Path) -> None:
    repo = repository_copy(tmp_path / "repo")
    (repo / ".github" / "workflows" / "sharded.yml").write_text(documented_sharding_workflow(), encoding="utf-8")
    evals = repo / "evals"  # the user's suite: the bundled brand-mentions suite (14 cases, all passing)
    evals.mkdir()
    (evals / "fixtures.yaml").write_bytes((repo / "datasets" / "brand-mentions" / "fixtures.yaml").read_bytes())
    event, number = pull_request_event(tmp_path)
    with GitHubFake(token=TOKEN) as github:
        run = run_act(repo, "pull_request", "sharded.yml", None, event_payload=event,
                      env={"GITHUB_API_URL": github.url}, secrets={"GITHUB_TOKEN": TOKEN},
                      extra=["--local-repository", f"evalgate/evalgate@v1={repo}",
                             "--artifact-server-path", str(tmp_path / "artifacts")], bind=False)
        comments = github.comments_on("evalgate/evalgate", number)
    assert run.returncode == 0, tail(run.output, 150)
    for i in (1, 2):
        assert f"shard {i}/2: results go to artifact 'evalgate-results-shard-{i}-of-2'" in run.output
    assert "merging 2 shard artifact(s): evalgate-results-shard-1-of-2, evalgate-results-shard-2-of-2" in run.output
    assert len(comments) == 1 and "14" in comments[0]["body"], tail(run.output, 150)
    assert "uploaded artifact 'evalgate-results'" in run.output


def test_services_agent_exports_spans_to_the_actions_receiver(tmp_path: Path) -> None:
    repo = repository_copy(tmp_path / "repo")
    run = run_act(repo, "workflow_dispatch", "examples.yml", "otel-service")
    assert run.succeeded("otel-service"), tail(run.output)
    assert "trajectories from 8 spans" in run.output
