"""ActionContext from the environment and from real webhook payloads (@octokit/webhooks-examples)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from evalgate.errors import UserError
from evalgate.github.context import ActionContext, parse_pr_number, pull_request_info, read_inputs

EXAMPLES = (
    Path(__file__).resolve().parents[1]
    / "node"
    / "node_modules"
    / "@octokit"
    / "webhooks-examples"
    / "api.github.com"
    / "index.json"
)
needs_examples = pytest.mark.skipif(
    not EXAMPLES.is_file(),
    reason="tests/node/node_modules/@octokit/webhooks-examples is not installed (run npm ci in tests/node)",
)


def examples(event: str, action: str | None = None) -> list[dict[str, Any]]:
    index = json.loads(EXAMPLES.read_text(encoding="utf-8"))
    found = [e for e in index if e["name"] == event]
    assert found, f"no {event} examples in {EXAMPLES}"
    payloads = found[0]["examples"]
    return [p for p in payloads if action is None or p.get("action") == action]


def context_for(tmp_path: Path, event_name: str, payload: dict[str, Any], **env: str) -> ActionContext:
    event_file = tmp_path / "event.json"
    event_file.write_text(json.dumps(payload), encoding="utf-8")
    base = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": event_name,
        "GITHUB_EVENT_PATH": str(event_file),
        "GITHUB_REPOSITORY": payload.get("repository", {}).get("full_name", "octo/hello"),
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_RUN_ID": "987654",
        "GITHUB_SHA": "f" * 40,
    }
    return ActionContext.from_env({**base, **env})


@needs_examples
@pytest.mark.parametrize("action", ["opened", "synchronize"])
@pytest.mark.parametrize("event_name", ["pull_request", "pull_request_target"])
def test_real_pull_request_payloads(tmp_path: Path, event_name: str, action: str) -> None:
    payloads = examples("pull_request", action)
    assert payloads
    for payload in payloads:
        ctx = context_for(tmp_path, event_name, payload)
        pr = payload["pull_request"]
        assert ctx.pr_number == pr["number"] == payload["number"]
        assert ctx.pr_reason is None
        assert ctx.base_ref == pr["base"]["ref"]
        assert ctx.head_sha == pr["head"]["sha"]
        # links: the PR head, except under pull_request_target, whose default checkout is the base commit
        assert ctx.blob_sha == (pr["head"]["sha"] if event_name == "pull_request" else ctx.sha)
        assert ctx.head_ref == pr["head"]["ref"]
        assert ctx.is_fork is False
        assert ctx.repository == payload["repository"]["full_name"]


@needs_examples
def test_fork_detection_on_a_real_payload(tmp_path: Path) -> None:
    payload = copy.deepcopy(examples("pull_request", "opened")[0])
    payload["pull_request"]["head"]["repo"]["full_name"] = "someone-else/Hello-World"
    assert context_for(tmp_path, "pull_request", payload).is_fork is True
    payload["pull_request"]["head"]["repo"] = None  # the fork was deleted
    assert context_for(tmp_path, "pull_request_target", payload).is_fork is True


@needs_examples
def test_real_push_payloads_have_no_pull_request(tmp_path: Path) -> None:
    for payload in examples("push"):
        ctx = context_for(tmp_path, "push", payload, GITHUB_REF=payload["ref"])
        assert ctx.pr_number is None
        assert ctx.pr_reason == "push event: no pull request"
        assert ctx.is_fork is False
        assert ctx.head_sha == "f" * 40
        assert ctx.ref == payload["ref"]


@needs_examples
def test_real_workflow_dispatch_payloads_have_no_pull_request(tmp_path: Path) -> None:
    for payload in examples("workflow_dispatch"):
        ctx = context_for(tmp_path, "workflow_dispatch", payload)
        assert ctx.pr_number is None
        assert ctx.pr_reason == "workflow_dispatch event: no pull request"


@needs_examples
def test_real_issue_comment_payloads(tmp_path: Path) -> None:
    payload = copy.deepcopy(examples("issue_comment", "created")[0])
    on_issue = context_for(tmp_path, "issue_comment", payload)
    assert on_issue.pr_number is None
    assert on_issue.pr_reason == "issue_comment event on an issue, not a pull request"
    payload["issue"]["pull_request"] = {"url": "https://api.github.com/repos/Codertocat/Hello-World/pulls/1"}
    on_pr = context_for(tmp_path, "issue_comment", payload)
    assert on_pr.pr_number == payload["issue"]["number"]
    assert on_pr.head_sha is None
    assert on_pr.blob_sha == "f" * 40


def test_environment_fields_and_run_url(tmp_path: Path) -> None:
    payload = {
        "number": 5,
        "pull_request": {
            "number": 5,
            "base": {"ref": "main", "repo": {"full_name": "octo/hello"}},
            "head": {"ref": "feature", "sha": "a" * 40, "repo": {"full_name": "octo/hello"}},
        },
        "repository": {"full_name": "octo/hello"},
    }
    ctx = context_for(
        tmp_path,
        "pull_request",
        payload,
        GITHUB_SERVER_URL="https://ghe.example.com/",
        GITHUB_API_URL="https://ghe.example.com/api/v3",
        GITHUB_RUN_ATTEMPT="2",
        GITHUB_REF="refs/pull/5/merge",
        GITHUB_BASE_REF="main",
        GITHUB_HEAD_REF="feature",
        GITHUB_WORKSPACE="/github/workspace",
        GITHUB_OUTPUT="/github/file_commands/set_output_1",
        GITHUB_STEP_SUMMARY="/github/file_commands/step_summary_1",
    )
    assert ctx.run_url == "https://ghe.example.com/octo/hello/actions/runs/987654"
    assert ctx.api_url == "https://ghe.example.com/api/v3"
    assert ctx.run_attempt == "2"
    assert ctx.ref == "refs/pull/5/merge"
    assert ctx.workspace == "/github/workspace"
    assert ctx.output_path.endswith("set_output_1")
    assert ctx.summary_path.endswith("step_summary_1")
    assert ctx.is_actions is True
    assert ctx.owner_repo == ("octo", "hello")
    assert ctx.event["number"] == 5


def test_outside_actions_defaults() -> None:
    ctx = ActionContext.from_env({})
    assert ctx.pr_number is None
    assert ctx.pr_reason is not None and "GITHUB_EVENT_NAME unset" in ctx.pr_reason
    assert ctx.api_url == "https://api.github.com"
    assert ctx.server_url == "https://github.com"
    assert ctx.run_url is None
    assert ctx.is_actions is False
    assert ctx.owner_repo is None


def test_pr_number_override(tmp_path: Path) -> None:
    ctx = context_for(tmp_path, "push", {"ref": "refs/heads/main", "repository": {"full_name": "o/r"}}, GITHUB_REF="x")
    assert ctx.pr_number is None
    overridden = ActionContext.from_env(
        {"GITHUB_EVENT_NAME": "push", "GITHUB_EVENT_PATH": str(tmp_path / "event.json")}, pr_number="17"
    )
    assert overridden.pr_number == 17
    assert overridden.pr_reason is None
    assert parse_pr_number("") is None
    assert parse_pr_number("#12") == 12
    for bad in ("abc", "0", "-3", "1.5"):
        with pytest.raises(UserError, match="pr-number"):
            parse_pr_number(bad)


def test_base_ref_falls_back_to_github_base_ref() -> None:
    info = pull_request_info("pull_request", {"pull_request": {"number": 3}})
    assert info.number == 3 and info.base_ref is None and info.is_fork is False
    missing = pull_request_info("pull_request", {})
    assert missing.number is None
    assert missing.reason == "pull_request event payload has no pull_request.number"


def test_event_file_problems_are_user_errors(tmp_path: Path) -> None:
    bad = tmp_path / "event.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(UserError, match=r"GITHUB_EVENT_PATH=.*event\.json: event payload is not valid JSON"):
        ActionContext.from_env({"GITHUB_EVENT_NAME": "push", "GITHUB_EVENT_PATH": str(bad)})
    with pytest.raises(UserError, match="cannot read the event payload"):
        ActionContext.from_env({"GITHUB_EVENT_NAME": "push", "GITHUB_EVENT_PATH": str(tmp_path / "missing.json")})
    bad.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(UserError, match="not a JSON object"):
        ActionContext.from_env({"GITHUB_EVENT_NAME": "push", "GITHUB_EVENT_PATH": str(bad)})


def test_read_inputs_maps_runner_names() -> None:
    env = {
        "INPUT_METRIC-THRESHOLDS": "mention_f1=0.9",
        "INPUT_GITHUB-TOKEN": "ghs_x",
        "INPUT_FAIL_ON_CRITICAL": "true",
        "INPUT_COMMENT-TAG": "",
        "INPUT_": "ignored",
        "GITHUB_SHA": "abc",
        "INPUT_ARGS": "--x",
    }
    assert read_inputs(env) == {
        "metric-thresholds": "mention_f1=0.9",
        "github-token": "ghs_x",
        "fail_on_critical": "true",
        "args": "--x",
    }
