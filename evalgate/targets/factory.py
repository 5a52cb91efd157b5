"""Build the configured target from settings."""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalgate.errors import UserError
from evalgate.targets.recorded import RecordedTarget

if TYPE_CHECKING:
    from evalgate.settings import Settings
    from evalgate.targets.base import Target


def build_target(settings: Settings) -> Target:
    if settings.target == "recorded":
        return RecordedTarget(settings.outputs_file)
    raise UserError(f"target kind {settings.target!r} is not available in this build", where="target")
