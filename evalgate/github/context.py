"""The GitHub Actions run context: environment variables, the event payload, and action inputs.

Inside a Docker action the runner passes ``GITHUB_*`` variables (container paths) and one
``INPUT_<NAME>`` variable per declared input: the name with spaces → ``_``, upper-cased, hyphens
kept (``INPUT_METRIC-THRESHOLDS``); unset optional inputs arrive as ``""``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalgate.errors import UserError

DEFAULT_SERVER_URL = "https://github.com"
DEFAULT_API_URL = "https://api.github.com"
PR_EVENTS = ("pull_request", "pull_request_target")


@dataclass(frozen=True)
class PullRequestInfo:
    """What the event says about the pull request (all None/False when there is none)."""

    number: int | None = None
    reason: str | None = None
    base_ref: str | None = None
    head_ref: str | None = None
    head_sha: str | None = None
    is_fork: bool = False


@dataclass(frozen=True)
class ActionContext:
    """Everything evalgate's publishing layer needs to know about the current workflow run."""

    event_name: str | None = None
    event: Mapping[str, Any] = field(default_factory=dict)
    repository: str | None = None
    server_url: str = DEFAULT_SERVER_URL
    api_url: str = DEFAULT_API_URL
    run_id: str | None = None
    run_attempt: str | None = None
    sha: str | None = None
    ref: str | None = None
    base_ref: str | None = None
    head_ref: str | None = None
    head_sha: str | None = None
    workspace: str | None = None
    output_path: str | None = None
    summary_path: str | None = None
    is_actions: bool = False
    pr_number: int | None = None
    pr_reason: str | None = None
    """Why there is no PR number (None when there is one)."""
    is_fork: bool = False
    evaluated_sha: str | None = None
    """The commit checked out in the workspace (``github.checkout``), when the Action evaluated it."""

    @classmethod
    def from_env(cls, env: Mapping[str, str], *, pr_number: int | str | None = None) -> ActionContext:
        """Read the ``GITHUB_*`` variables and the event payload; ``pr_number`` overrides the event's."""
        event_name = _get(env, "GITHUB_EVENT_NAME")
        event = load_event(_get(env, "GITHUB_EVENT_PATH"))
        pr = pull_request_info(event_name, event, has_payload=bool(_get(env, "GITHUB_EVENT_PATH")))
        override = parse_pr_number(pr_number)
        sha = _get(env, "GITHUB_SHA")
        return cls(
            event_name=event_name,
            event=event,
            repository=_get(env, "GITHUB_REPOSITORY") or _event_repository(event),
            server_url=(_get(env, "GITHUB_SERVER_URL") or DEFAULT_SERVER_URL).rstrip("/"),
            api_url=(_get(env, "GITHUB_API_URL") or DEFAULT_API_URL).rstrip("/"),
            run_id=_get(env, "GITHUB_RUN_ID"),
            run_attempt=_get(env, "GITHUB_RUN_ATTEMPT"),
            sha=sha,
            ref=_get(env, "GITHUB_REF"),
            base_ref=pr.base_ref or _get(env, "GITHUB_BASE_REF"),
            head_ref=pr.head_ref or _get(env, "GITHUB_HEAD_REF"),
            head_sha=pr.head_sha or (sha if event_name != "issue_comment" else None),
            workspace=_get(env, "GITHUB_WORKSPACE"),
            output_path=_get(env, "GITHUB_OUTPUT"),
            summary_path=_get(env, "GITHUB_STEP_SUMMARY"),
            is_actions=_get(env, "GITHUB_ACTIONS") == "true",
            pr_number=override if override is not None else pr.number,
            pr_reason=None if override is not None or pr.number is not None else pr.reason,
            is_fork=pr.is_fork,
        )

    @property
    def run_url(self) -> str | None:
        """``{server}/{owner}/{repo}/actions/runs/{run_id}`` when repository and run id are known."""
        if not (self.repository and self.run_id):
            return None
        return f"{self.server_url}/{self.repository}/actions/runs/{self.run_id}"

    @property
    def blob_sha(self) -> str | None:
        """The commit to link dataset files at: the one evaluated (checked out in the workspace), else the
        base commit under ``pull_request_target`` (its default checkout), else the PR head, else ``GITHUB_SHA``."""
        if self.evaluated_sha:
            return self.evaluated_sha
        if self.event_name == "pull_request_target":
            return self.sha
        return self.head_sha or self.sha

    @property
    def owner_repo(self) -> tuple[str, str] | None:
        """``("owner", "repo")`` from ``GITHUB_REPOSITORY``."""
        if not self.repository or self.repository.count("/") != 1:
            return None
        owner, repo = self.repository.split("/")
        return (owner, repo) if owner and repo else None


def load_event(path: str | None) -> dict[str, Any]:
    """The JSON event payload at ``path`` (``{}`` when unset); unreadable or invalid → ``UserError``."""
    if not path:
        return {}
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read the event payload: {exc.strerror}", where=f"GITHUB_EVENT_PATH={path}") from None
    try:
        event = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(
            f"event payload is not valid JSON (line {exc.lineno}: {exc.msg})", where=f"GITHUB_EVENT_PATH={path}"
        ) from None
    if not isinstance(event, dict):
        raise UserError("event payload is not a JSON object", where=f"GITHUB_EVENT_PATH={path}")
    return event


def pull_request_info(event_name: str | None, event: Mapping[str, Any], *, has_payload: bool = True) -> PullRequestInfo:
    """PR number, base/head and fork status from the event, or the reason there is no PR.

    ``pull_request``/``pull_request_target``: ``pull_request.number``; fork when
    ``pull_request.head.repo.full_name != repository.full_name`` (``head.repo: null``, a deleted fork,
    counts as a fork). ``issue_comment``: ``issue.number`` only when ``issue.pull_request`` exists.
    """
    if not event_name:
        return PullRequestInfo(reason="not running in GitHub Actions (GITHUB_EVENT_NAME unset): no pull request")
    if not has_payload:
        return PullRequestInfo(reason=f"{event_name} event without a payload (GITHUB_EVENT_PATH unset)")
    if event_name in PR_EVENTS:
        return _from_pull_request(event_name, event)
    if event_name == "issue_comment":
        issue = event.get("issue") or {}
        if not issue.get("pull_request"):
            return PullRequestInfo(reason="issue_comment event on an issue, not a pull request")
        return PullRequestInfo(number=_int_or_none(issue.get("number")))
    return PullRequestInfo(reason=f"{event_name} event: no pull request")


def pull_request_labels(event: Mapping[str, Any]) -> list[str]:
    """The names of ``pull_request.labels`` in the event payload (empty when there are none or no PR). The
    payload is the one GitHub wrote when the run started: a label added later needs a new run (the
    ``labeled`` activity type)."""
    pr = event.get("pull_request")
    labels = pr.get("labels") if isinstance(pr, Mapping) else None
    if not isinstance(labels, list):
        return []
    return [str(label["name"]) for label in labels if isinstance(label, Mapping) and isinstance(label.get("name"), str)]


def _from_pull_request(event_name: str, event: Mapping[str, Any]) -> PullRequestInfo:
    pr = event.get("pull_request") or {}
    number = _int_or_none(pr.get("number", event.get("number")))
    if number is None:
        return PullRequestInfo(reason=f"{event_name} event payload has no pull_request.number")
    base = pr.get("base") or {}
    head = pr.get("head") or {}
    head_repo = (head.get("repo") or {}).get("full_name")
    base_repo = (event.get("repository") or {}).get("full_name") or (base.get("repo") or {}).get("full_name")
    return PullRequestInfo(
        number=number,
        base_ref=base.get("ref"),
        head_ref=head.get("ref"),
        head_sha=head.get("sha"),
        is_fork=_is_fork(head, head_repo, base_repo),
    )


def _is_fork(head: Mapping[str, Any], head_repo: str | None, base_repo: str | None) -> bool:
    """Fork when the head repository differs from the base one, or was deleted (``head.repo: null``)."""
    if "repo" in head and head["repo"] is None:
        return True
    return bool(head_repo and base_repo and head_repo.lower() != base_repo.lower())


def parse_pr_number(value: int | str | None, setting: str = "pr-number") -> int | None:
    """An explicit PR number override: a positive integer, or None when unset/empty."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        number = int(str(value).strip().lstrip("#"))
    except ValueError:
        number = 0
    if number <= 0:
        raise UserError(f"must be a positive pull request number, got {value!r}", where=setting)
    return number


def read_inputs(env: Mapping[str, str]) -> dict[str, str]:
    """Action inputs from ``INPUT_*`` variables: ``INPUT_METRIC-THRESHOLDS`` → ``"metric-thresholds"``.

    Names are lower-cased (hyphens kept; spaces were already turned into ``_`` by the runner);
    empty values count as unset and are left out.
    """
    return {
        key[len("INPUT_"):].lower(): value
        for key, value in env.items()
        if key.upper().startswith("INPUT_") and len(key) > len("INPUT_") and value != ""
    }


def _event_repository(event: Mapping[str, Any]) -> str | None:
    return (event.get("repository") or {}).get("full_name")


def _get(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name)
    return value if value else None


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None
