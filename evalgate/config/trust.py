"""Who controls what (docs/security.md): in a workflow run for a pull request the checkout — datasets,
``evalgate.yaml``, any committed file — is written by the pull request's author, while the workflow, its
inputs, its environment and its secrets belong to the repository.

``untrusted_checkout``: the run is inside GitHub Actions (``GITHUB_ACTIONS=true``) for an event other
than the repository's own (push, schedule, workflow_dispatch, release, repository_dispatch); then
nothing from the checkout may stand in for evidence (``runner.reuse``). ``from_checkout``: a setting's
value came from the configuration file (``evalgate.yaml``, part of the checkout), not from an input,
an environment variable, a flag or a default. ``without_secrets``: why the run gets no repository
secrets (a pull request from a fork or by a bot such as ``dependabot[bot]``), read from the event payload.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

TRUSTED_EVENTS = frozenset({"push", "schedule", "workflow_dispatch", "release", "repository_dispatch"})
"""Events whose checkout is the repository's own code (a branch someone with write access pushed)."""

def untrusted_checkout(env: Mapping[str, str]) -> bool:
    """True in a GitHub Actions run whose checkout a pull request's author controls (module docstring)."""
    if env.get("GITHUB_ACTIONS", "").strip().lower() != "true":
        return False
    return env.get("GITHUB_EVENT_NAME", "").strip() not in TRUSTED_EVENTS


def from_checkout(origin: str, config: str | None) -> bool:
    """True when a setting whose origin is ``origin`` (``Settings.origin``) came from the configuration
    file ``config`` (``Settings.config``), which lies in the checkout."""
    return bool(config) and origin.startswith(str(config))


PULL_REQUEST_EVENTS = frozenset({"pull_request", "pull_request_review", "pull_request_review_comment"})
"""Events whose runs get no repository secrets when the pull request comes from a fork (``pull_request_target``
runs in the base repository, with its secrets)."""


def without_secrets(env: Mapping[str, str]) -> str | None:
    """Why this GitHub Actions run gets no repository secrets, or None: a pull request from a fork (GitHub
    passes a fork's ``pull_request`` runs no secrets) or opened by a bot (``dependabot[bot]``: its runs get
    Dependabot secrets only), read from the event payload (``GITHUB_EVENT_PATH``) and ``GITHUB_ACTOR``."""
    if env.get("GITHUB_ACTIONS", "").strip().lower() != "true":
        return None
    event_name = env.get("GITHUB_EVENT_NAME", "").strip()
    event = _event(env.get("GITHUB_EVENT_PATH", ""))
    pr = _mapping(event.get("pull_request"))
    if event_name in PULL_REQUEST_EVENTS and pr:
        head = _mapping(pr.get("head"))
        if "repo" in head and head["repo"] is None:
            return "a pull request from a deleted fork gets no secrets"
        name = _mapping(head.get("repo")).get("full_name")
        base = _mapping(event.get("repository")).get("full_name")
        if isinstance(name, str) and isinstance(base, str) and name.lower() != base.lower():
            return f"a pull request from the fork {name} gets no secrets"
    user = _mapping(pr.get("user"))
    login = str(user.get("login") or "")
    if event_name in PULL_REQUEST_EVENTS and (user.get("type") == "Bot" or login.endswith("[bot]")):
        return f"a pull request by {login or 'a bot'} gets no repository secrets"
    actor = env.get("GITHUB_ACTOR", "").strip()
    if actor.endswith("[bot]") and actor.startswith("dependabot"):
        return f"a run started by {actor} gets Dependabot secrets only"
    return None


def _mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a mapping (a JSON object of the payload), else an empty one."""
    return value if isinstance(value, Mapping) else {}


def _event(path: str) -> dict[str, Any]:
    """The event payload at ``path``; ``{}`` when unset or unreadable (the Action reports a bad payload)."""
    if not path.strip():
        return {}
    try:
        event = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return event if isinstance(event, dict) else {}
