"""Build the configured target from settings (every configuration problem is a ``UserError`` here,
before any case runs)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from evalgate.calls.runtime import Runtime
from evalgate.config.references import is_reference
from evalgate.errors import UserError
from evalgate.targets.command import CommandTarget
from evalgate.targets.custom import CustomTarget
from evalgate.targets.http import HttpTarget
from evalgate.targets.openai_chat import OpenAIChatTarget
from evalgate.targets.recorded import RecordedTarget

if TYPE_CHECKING:
    from evalgate.config.settings import Settings
    from evalgate.targets.base import Target


def build_target(settings: Settings, runtime: Runtime | None, env: Mapping[str, str]) -> Target:
    """The target for ``settings``; ``env`` (given by the caller) supplies provider keys and header variables."""
    if settings.target == "recorded":
        return RecordedTarget(settings.outputs_file)
    runtime = runtime or Runtime.from_settings(settings)
    if settings.target == "http":
        return HttpTarget.from_settings(settings, runtime, env)
    if settings.target == "openai":
        return OpenAIChatTarget.from_settings(settings, runtime, env)
    if settings.target == "command":
        return CommandTarget.from_settings(settings, runtime)

    if is_reference(settings.target):
        base = Path(settings.config).parent if settings.config else None
        return CustomTarget.from_reference(settings.target, settings.target_options, base)
    raise UserError(f"unknown target kind {settings.target!r}", where="target")
