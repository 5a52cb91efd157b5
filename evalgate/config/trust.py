"""Who controls what (docs/security.md): in a workflow run for a pull request the checkout — datasets,
``evalgate.yaml``, any committed file — is written by the pull request's author, while the workflow, its
inputs, its environment and its secrets belong to the repository.

``untrusted_checkout``: the run is inside GitHub Actions (``GITHUB_ACTIONS=true``) for an event other
than the repository's own (push, schedule, workflow_dispatch, release, repository_dispatch), or the workflow
marks it so (``EVALGATE_UNTRUSTED_CHECKOUT``, the input ``untrusted-checkout``); then nothing from the
checkout may stand in for evidence (``runner.reuse``, ``runner.calibrate``) and ``gate_changes: fail`` fails. ``from_checkout``: a setting's
value came from the configuration file (``evalgate.yaml``, part of the checkout), not from an input,
an environment variable, a flag or a default. ``without_secrets``: why the run gets no repository
secrets (a pull request from a fork or by a bot such as ``dependabot[bot]``), read from the event payload.

``checkout_redirects``: where a checkout's settings would choose where a secret goes. In a run whose
checkout the workflow must not trust with its secrets (``pull_request_target`` or ``workflow_run`` with
other code than the base commit checked out, or marked so by the workflow: ``github.checkout``), every
destination of a secret comes from the workflow (an input, an ``EVALGATE_*`` variable on the step, a
flag): the judge's and the target's URLs, the target's headers that read the environment (``${NAME}``),
the Langfuse host, the interface the trace receiver listens on, and — when the workflow set the URL —
the provider (which key is sent there) and an ``openai`` target (which sends a provider key to
``target_url``). A checkout that sets one is refused (``refuse_checkout_redirects``: exit 2 naming it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalgate.config.suite import yaml_line
from evalgate.errors import UserError

TRUSTED_EVENTS = frozenset({"push", "schedule", "workflow_dispatch", "release", "repository_dispatch"})
"""Events whose checkout is the repository's own code (a branch someone with write access pushed)."""

MARK = "EVALGATE_UNTRUSTED_CHECKOUT"
"""The workflow's mark of an untrusted checkout (the Action's input ``untrusted-checkout: true`` sets it)."""


def marked_untrusted(env: Mapping[str, str]) -> bool:
    """True when the workflow marks the checkout untrusted (``EVALGATE_UNTRUSTED_CHECKOUT``: true/yes/on/1)."""
    return env.get(MARK, "").strip().lower() in ("true", "yes", "on", "1")


def untrusted_checkout(env: Mapping[str, str]) -> bool:
    """True in a GitHub Actions run whose checkout a pull request's author controls (module docstring), and in
    any run the workflow marks so (``marked_untrusted``: a ``workflow_dispatch`` or ``repository_dispatch`` run
    evaluating a pull request's branch is as untrusted as a ``pull_request`` run)."""
    if marked_untrusted(env):
        return True
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
        head_repo = head.get("repo")
        base = _mapping(event.get("repository")).get("full_name")
        if "repo" in head and head_repo is None:
            return "a pull request from a deleted fork gets no secrets"
        name = _mapping(head_repo).get("full_name")
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
    """``value`` when it is a mapping, else an empty one (payload fields of unexpected types)."""
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


SECRET_DESTINATIONS: dict[str, str] = {
    "judge_base_url": "chooses where the judge's API key is sent",
    "target_url": "chooses where the target's headers and API key are sent",
    "target_headers": "reads environment variables (${NAME}) into the target's request headers",
    "langfuse_host": "chooses where the Langfuse keys are sent",
    "traces_host": "chooses which network interface accepts spans (evidence) for the run",
    "target": "makes an openai target send a provider's API key to the workflow's target_url",
    "judge_provider": "chooses which API key is sent to the workflow's judge_base_url",
    "target_provider": "chooses which API key is sent to the workflow's target_url",
}
"""Settings that choose where a secret goes, with what each decides (module docstring)."""


def checkout_redirects(settings: Any) -> list[tuple[str, str]]:
    """``(setting, what it decides)`` for every setting the checkout's configuration file sets that would choose
    where a secret is sent (``SECRET_DESTINATIONS``), in that order."""
    found = []
    for name, what in SECRET_DESTINATIONS.items():
        if not from_checkout(settings.origin(name), settings.config):
            continue
        if name == "target_headers" and not any("${" in str(v) for v in (settings.target_headers or {}).values()):
            continue  # literal headers are the checkout's own text: no secret of the workflow's is read
        if name == "judge_provider" and not settings.judge_base_url:
            continue  # the provider's own public URL receives its own key
        if name == "target_provider" and not settings.target_url:
            continue
        if name == "target" and not (settings.target == "openai" and settings.target_url):
            continue
        found.append((name, what))
    return found


def refuse_checkout_redirects(settings: Any, reason: str | None, cwd: Path | None = None) -> None:
    """In a run whose checkout may not choose where secrets go (``reason`` says why; None: it may), raise
    ``UserError`` naming the first setting from the checkout's file that would (``checkout_redirects``)."""
    if not reason:
        return
    found = checkout_redirects(settings)
    if not found:
        return
    name, what = found[0]
    more = f" (also: {', '.join(n for n, _ in found[1:])})" if len(found) > 1 else ""
    raise UserError(f"{name} from the checkout refused: it {what}, and {reason}; set it in the workflow instead "
                    f"(an input or EVALGATE_{name.upper()}){more} (docs/fork-pull-requests.md)",
                    where=_where(settings.origin(name), cwd))


def _where(origin: str, cwd: Path | None) -> str:
    """``evalgate.yaml:3: judge_base_url`` for ``/work/evalgate.yaml: judge_base_url`` (relative to ``cwd``)."""
    path, sep, key = origin.rpartition(": ")
    if not sep or not path.endswith((".yaml", ".yml")):
        return origin
    shown = path
    if cwd is not None:
        try:
            shown = Path(path).resolve().relative_to(cwd.resolve()).as_posix()
        except (ValueError, OSError):
            shown = path
    try:
        line = yaml_line(Path(path), [key]) if Path(path).is_file() else None
    except Exception:  # the line is a courtesy: the file and key name it already
        line = None
    return f"{shown}:{line}: {key}" if line else f"{shown}: {key}"
