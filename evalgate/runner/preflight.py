"""Pre-flight: before any case runs, check that the target and the judge can be reached at all.

"Reached" means a TCP connection (to the host, or to the proxy that ``HTTP(S)_PROXY`` / ``NO_PROXY``
choose for it) opens within ``connect_timeout_seconds``. A DNS failure, a refused connection or no
connection within that time is a configuration error: exit 2 with one line naming the setting, before
results are written, instead of a run in which every case errors. Anything that answers, even with an
HTTP error status, was reached: its errors are the gate's business (errored cases, exit 1). No request
is sent: the connection is closed as soon as it opens. The endpoints are checked concurrently; on
loopback this costs well under a millisecond.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalgate.errors import UserError


@dataclass(frozen=True)
class Endpoint:
    """A URL the run will call: ``what`` it is (for the message) and the ``setting`` that names it."""

    what: str
    url: str
    setting: str


def endpoints_of(target: Any, judge: Any) -> list[Endpoint]:
    """The HTTP endpoints of ``target`` (an http or model target) and ``judge`` (a judge client)."""
    found: list[Endpoint] = []
    kind = getattr(target, "kind", None)
    if kind == "http":
        found.append(Endpoint("the target", str(target.url), "target_url"))
    elif kind == "openai":
        provider = target.service.provider
        found.append(Endpoint(f"the model target ({provider.name})", provider.base_url, "target_url"))
    service = getattr(judge, "service", None)
    provider = getattr(service, "provider", None)
    if provider is not None and getattr(provider, "base_url", None):
        found.append(Endpoint(f"the judge ({provider.name})", provider.base_url, "judge_base_url"))
    return found


async def check_reachable(endpoints: Sequence[Endpoint], timeout: float,
                          env: Mapping[str, str]) -> None:
    """Raise ``UserError`` for the first endpoint (in order) that cannot be reached."""
    unique = list({(e.url, e.setting): e for e in endpoints}.values())
    problems = await asyncio.gather(*(_problem(e, timeout, env) for e in unique))
    for endpoint, problem in zip(unique, problems, strict=True):
        if problem is not None:
            raise UserError(f"cannot reach {endpoint.what} at {endpoint.url}: {problem}; no case was run",
                            where=endpoint.setting)


async def _problem(endpoint: Endpoint, timeout: float, env: Mapping[str, str]) -> str | None:
    """Why ``endpoint`` cannot be reached, or None when a connection opened."""
    parts = urllib.parse.urlsplit(endpoint.url)
    host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    if not host:
        return "the URL has no host"
    proxy = proxy_for(parts.scheme, host, env)
    via = ""
    if proxy is not None:
        proxied = urllib.parse.urlsplit(proxy)
        if proxied.hostname:
            host, port = proxied.hostname, proxied.port or (443 if proxied.scheme == "https" else 80)
            via = f" (through the proxy {proxied.hostname}:{port})"
    try:
        async with asyncio.timeout(timeout):
            _, writer = await asyncio.open_connection(host, port)
    except TimeoutError:
        return f"no connection within {timeout:g}s (connect_timeout_seconds){via}"
    except socket.gaierror as exc:
        return f"host name {host!r} not found ({exc.strerror or exc}){via}"
    except ConnectionRefusedError:
        return f"connection refused by {host}:{port}{via}"
    except OSError as exc:
        return f"{exc.strerror or type(exc).__name__} ({host}:{port}){via}"
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return None


def proxy_for(scheme: str, host: str, env: Mapping[str, str]) -> str | None:
    """The proxy URL ``HTTP_PROXY``/``HTTPS_PROXY`` give for ``scheme``, unless ``NO_PROXY`` excludes
    ``host`` (the same variables the HTTP clients honour)."""
    variables = {k.lower(): v for k, v in env.items()
                 if k.lower() in ("http_proxy", "https_proxy", "no_proxy") and v}
    proxy = variables.get(f"{scheme}_proxy")
    if not proxy:
        return None
    no_proxy = variables.get("no_proxy", "")
    if no_proxy and _bypassed(host, no_proxy):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


def _bypassed(host: str, no_proxy: str) -> bool:
    entries = [entry.strip().lower().lstrip(".") for entry in no_proxy.split(",") if entry.strip()]
    host = host.lower()
    return any(entry == "*" or host == entry.split(":")[0] or host.endswith("." + entry.split(":")[0])
               for entry in entries)
