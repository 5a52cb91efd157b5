"""``evalgate view [RESULTS ...] [--host H] [--port N] [--no-open] [--export DIR]``: browse recorded runs in a
local web page (read-only), or write the same pages as a static site (docs/viewer.md)."""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
import threading
from pathlib import Path
from typing import Any

from evalgate.errors import UserError

DEFAULT_RESULTS = Path("evalgate-results")
INSTALL_HINT = ("evalgate view needs the extra evalgate-action[view] (starlette, uvicorn): pip install -e '.[view]' in a "
                "checkout, or pip install 'evalgate-action[view] @ git+https://github.com/evalgate/evalgate'")


def add_view(verbs: Any) -> None:
    text = "browse recorded runs in a local web page: runs, a run, compare two runs, a case, trends, flaky cases"
    parser = verbs.add_parser("view", help=text, description=text[0].upper() + text[1:] + ". Read-only.")
    parser.add_argument("results", nargs="*", metavar="RESULTS",
                        help="results.db, results.json, an artifact zip or a folder of them "
                             f"(default {DEFAULT_RESULTS})")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=0, help="port (default 0: a free port, printed)")
    parser.add_argument("--no-open", action="store_true", help="do not open a browser")
    parser.add_argument("--export", metavar="DIR", help="write the pages as a static site into DIR and exit")
    parser.set_defaults(func=cmd_view)


def cmd_view(args: argparse.Namespace) -> int:
    from evalgate.view.sources import open_catalog  # lazy: the results browser (sqlite-utils, jinja2), not for --help

    inputs = args.results or [str(DEFAULT_RESULTS)]
    if not args.export:
        _check_extra()
        if not 0 <= args.port <= 65535:
            raise UserError(f"must be 0 to 65535, got {args.port}", where="--port")
    catalog = open_catalog(inputs)
    try:
        if args.export:
            from evalgate.view.export import export_site  # lazy: the static export, only with --export

            count = export_site(catalog, Path(args.export))
            print(f"evalgate view: {count} pages written to {args.export} (open {Path(args.export) / 'index.html'})")
            return 0
        return _serve(catalog, args)
    finally:
        catalog.close()


def _check_extra() -> None:
    try:
        import starlette  # noqa: F401  # optional: the view extra (evalgate-action[view])
        import uvicorn  # noqa: F401  # optional: the view extra (evalgate-action[view])
    except ImportError:
        raise UserError(INSTALL_HINT, where="evalgate view") from None


def _serve(catalog: Any, args: argparse.Namespace) -> int:
    from evalgate.view.app import bind, serve  # lazy: the web server, only when serving

    try:
        sock = bind(args.host, args.port)
    except OSError as exc:
        raise UserError(f"cannot listen on {args.host}:{args.port} ({exc.strerror})", where="--port") from None
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in str(host) else str(host)
    url = f"http://{shown}:{port}/"
    print(f"evalgate view: {url} ({len(catalog.runs)} run(s); Ctrl-C stops)", flush=True)
    if not _loopback(args.host):
        print(f"evalgate view: warning: listening on {args.host}: anyone who can reach this address reads "
              "these results", file=sys.stderr, flush=True)
    if not args.no_open:
        _open_browser(url)
    try:
        serve(catalog, sock)
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
    return 0


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _open_browser(url: str) -> None:
    """Open ``url`` in a browser when one is there (``webbrowser``). On Linux and the BSDs only with a display
    (``DISPLAY``/``WAYLAND_DISPLAY``): on a server, ``webbrowser`` would start a text browser in this terminal."""
    import webbrowser  # lazy: only to open the page in a browser

    if not sys.platform.startswith(("darwin", "win")) and not (os.environ.get("DISPLAY")
                                                              or os.environ.get("WAYLAND_DISPLAY")):
        return
    try:
        browser = webbrowser.get()
    except webbrowser.Error:
        return
    threading.Timer(0.5, lambda: browser.open(url)).start()
