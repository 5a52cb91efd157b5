"""GitHub Enterprise Server: no artifacts v4, so no upload and no ``baseline: auto``; the run degrades with
notices and never fails for it.

The artifact service evalgate uploads to and ``baseline: auto`` reads from (artifacts v4, the Twirp results
service) exists on github.com and GitHub Enterprise Cloud with data residency (``*.ghe.com``), not on
Enterprise Server. There the Action turns the upload off and the automatic baseline into "no baseline",
each with one notice saying so; a path baseline (``baseline: results.db``) still works.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from evalgate.github.commands import notice

if TYPE_CHECKING:
    from evalgate.config.settings import Settings
    from evalgate.github.publish import PublishOptions

DOCS = "docs/targets.md#github-enterprise-server"


def is_enterprise_server(server_url: str | None) -> bool:
    """True for a GitHub Enterprise Server URL: anything but github.com and ``*.ghe.com``."""
    host = (urlsplit(server_url or "https://github.com").hostname or "").lower()
    return host not in ("github.com", "") and not host.endswith(".ghe.com")


def degrade(server_url: str | None, settings: Settings, options: PublishOptions,
            emit: Callable[[str], None]) -> tuple[Settings, PublishOptions]:
    """``(settings, options)`` for this server: on Enterprise Server without the artifact upload and with
    ``baseline: auto`` read as none, one notice each; unchanged elsewhere."""
    if not is_enterprise_server(server_url):
        return settings, options
    if options.upload_artifacts and options.mode == "evaluate":
        emit(notice(f"GitHub Enterprise Server ({server_url}) has no artifacts v4: the results are not uploaded "
                    f"(they stay in the workspace; upload them with your own step). See {DOCS}",
                    title="evalgate: Enterprise Server"))
        options = replace(options, upload_artifacts=False)
    if settings.baseline_kind == "auto":
        emit(notice("no baseline: baseline: auto reads the base branch's artifact, which needs artifacts v4 "
                    f"(not on GitHub Enterprise Server); set baseline to a results file instead. See {DOCS}",
                    title="evalgate: Enterprise Server"))
        settings = settings.model_copy(update={"baseline": "none"})
    return settings, options
