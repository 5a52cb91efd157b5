"""What the Action's steps (evaluate, merge: ``cli.action``, ``cli.action_merge``) share: the setup decided
before the evaluation starts and the baseline the run is compared with."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalgate.config.settings import Settings
from evalgate.github.baseline import auto_loader
from evalgate.github.context import ActionContext
from evalgate.github.publish import PublishOptions

Emit = Callable[[str], None]


@dataclass(frozen=True)
class ActionSetup:
    """Everything decided before the evaluation starts."""

    ctx: ActionContext
    options: PublishOptions
    settings: Settings
    suite_config: dict[str, Any]
    workspace: Path


def baseline_loader(setup_: ActionSetup) -> Callable[[], Any] | None:
    """What answers ``baseline: auto``: the base branch's newest artifact of the same name, found
    with the ``github-token`` (needs ``actions: read``). None for ``none`` or a path (read by the run)."""
    if setup_.settings.baseline_kind != "auto":
        return None
    return auto_loader(setup_.ctx, artifact_name=setup_.options.resolved_artifact_name,
                       token=setup_.options.github_token)


def baseline_note(document: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(level, message)``: the run's note about its baseline (not found, unreadable, no comparison), if
    any. ``notice`` when none was to be expected (push, schedule, the first pull request), else ``warning``."""
    info = document.get("baseline")
    if not isinstance(info, Mapping) or not info.get("warning"):
        return None
    return ("notice" if info.get("severity") == "notice" else "warning"), str(info["warning"])
