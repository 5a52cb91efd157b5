"""A conversation suite through the Action entrypoint (the container's step, run as the runner runs it):
the PR comment and the job summary name the failed turn and fold the transcript; the agent is the
loopback memory agent, forgetful."""

from __future__ import annotations

from pathlib import Path

from tests.servers.github_fake import GitHubFake
from tests.servers.memory_agent import HISTORY_PATH, MemoryAgent
from tests.support.action import TOKEN, make_workspace, needs_examples, run_entrypoint, runner_env, webhook_example
from tests.support.conversations import NAME_CONVERSATION


@needs_examples
def test_the_pr_comment_and_summary_name_the_failed_turn_with_the_transcript(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path, ())
    (ws.workspace / "conversations.yaml").write_text(NAME_CONVERSATION)
    (ws.workspace / "evalgate.yaml").write_text("target_response_map: {output: reply}\n")
    payload = webhook_example("pull_request", "opened")
    with GitHubFake(TOKEN) as github, MemoryAgent(forget=True) as agent:
        env = runner_env(ws, event_name="pull_request", payload=payload, api_url=github.url,
                         inputs={"dataset": "conversations.yaml", "config": "evalgate.yaml", "target": "http",
                                 "target-url": agent.base_url + HISTORY_PATH, "baseline": "none"})
        done = run_entrypoint(ws, env)
        comments = github.comments_on("Codertocat/Hello-World", payload["number"])
    assert done.returncode == 1, done.stdout + done.stderr
    assert ws.outputs()["exit-code"] == "1"
    assert comments, done.stdout + done.stderr
    body = comments[0]["body"]
    for text in (body, ws.summary()):
        assert "turn 3 “What is my name?” failed: keyword\\_coverage 0.000 (needs ≥ 0.6): missing keywords: Ana" in text
        assert "<details><summary>Transcript: 3 turn(s), turn 3 failed</summary>" in text
        assert "[turn 3 · failed] user: What is my name?" in text
    assert "conversation_turns: turn 3 failed" in done.stdout  # the case's annotation
