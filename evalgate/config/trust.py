"""Who controls what (docs/security.md): in a workflow run for a pull request the checkout — datasets,
``evalgate.yaml``, any committed file — is written by the pull request's author, while the workflow, its
inputs, its environment and its secrets belong to the repository.

``untrusted_checkout``: the run is inside GitHub Actions (``GITHUB_ACTIONS=true``) for an event other
than the repository's own (push, schedule, workflow_dispatch, release, repository_dispatch); then
nothing from the checkout may stand in for evidence (``runner.reuse``). ``from_checkout``: a setting's
value came from the configuration file (``evalgate.yaml``, part of the checkout), not from an input,
an environment variable, a flag or a default.
"""

from __future__ import annotations

from collections.abc import Mapping

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
