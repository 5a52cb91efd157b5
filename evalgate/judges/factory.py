"""Build the configured judge client (None for provider ``none``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evalgate.errors import UserError

if TYPE_CHECKING:
    from evalgate.settings import Settings


def build_judge(settings: Settings) -> Any:
    if settings.judge_provider == "none":
        return None
    raise UserError(f"judge provider {settings.judge_provider!r} is not available in this build", where="judge_provider")
