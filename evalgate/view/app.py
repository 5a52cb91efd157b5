"""The local web app of ``evalgate view``: starlette routes over ``view.pages``, served by uvicorn on a socket
bound before the server starts (``--port 0``: a free port, printed).

Read-only and script-free: every response carries ``Content-Security-Policy: default-src 'none'`` (styles
inline, forms to this origin only; no script runs, nonce'd or not — the pages have none), ``nosniff``,
``no-referrer`` and ``frame-ancestors 'none'``; only GET and HEAD are routed.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping
from typing import Any

from evalgate.view import pages
from evalgate.view.sources import Catalog

CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; base-uri 'none'; "
       "frame-ancestors 'none'")
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
           "Cache-Control": "no-store"}
ROUTES = {"/": "runs", "/run": "run", "/case": "case", "/compare": "compare", "/trends": "trends", "/flaky": "flaky"}


def build_app(catalog: Catalog) -> Any:
    """The ASGI application (starlette) serving ``catalog``."""
    from starlette.applications import Starlette  # optional: the view extra (starlette)
    from starlette.requests import Request  # optional: the view extra (starlette)
    from starlette.responses import HTMLResponse  # optional: the view extra (starlette)
    from starlette.routing import Route  # optional: the view extra (starlette)

    links = pages.Links()

    def endpoint(name: str) -> Callable[[Request], HTMLResponse]:
        render = pages.PAGES[name]

        def handle(request: Request) -> HTMLResponse:  # sync: starlette runs it in its thread pool
            params: Mapping[str, str] = dict(request.query_params)
            try:
                return HTMLResponse(render(catalog, links, params), headers=HEADERS)
            except pages.NotFound as exc:
                return HTMLResponse(pages.render("error.html.j2", links=links, page="", title="Not found",
                                                 message=str(exc)), status_code=404, headers=HEADERS)

        return handle

    routes = [Route(path, endpoint(name), methods=["GET", "HEAD"]) for path, name in ROUTES.items()]
    return Starlette(routes=routes)


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (0: a free port chosen by the system)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def serve(catalog: Catalog, sock: socket.socket) -> None:
    """Serve until interrupted (Ctrl-C)."""
    import uvicorn  # optional: the view extra (uvicorn)

    config = uvicorn.Config(build_app(catalog), log_level="warning", access_log=False, lifespan="off",
                            server_header=False)
    uvicorn.Server(config).run(sockets=[sock])
