"""A minimal JSON-over-HTTP server on 127.0.0.1 in a background thread (standard library only)."""

from __future__ import annotations

import argparse
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Route = Callable[[dict[str, Any], dict[str, str]], tuple[int, Any]]
"""``route(json_body, headers) -> (status, json_reply)``; ``headers`` has lower-case names, plus ``:peer``
(the client's address; no request header can have that name)."""
LOOPBACK = "127.0.0.1"


class JsonServer:
    """Serves ``routes`` (path → handler) for POST with JSON bodies; ``GET /health`` answers ``{"ok": true}``."""

    def __init__(self, routes: dict[str, Route], *, port: int = 0, host: str = LOOPBACK) -> None:
        self.routes = routes
        handler = self._handler_class()
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host = str(self.httpd.server_address[0])
        return f"http://{LOOPBACK if host in ('0.0.0.0', '') else host}:{self.httpd.server_address[1]}"

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        routes = self.routes

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                if self.path == "/health":
                    self._send(200, {"ok": True})
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self) -> None:
                route = routes.get(self.path.split("?", 1)[0].rstrip("/"))
                if route is None:
                    self._send(404, {"error": f"no route {self.path}"})
                    return
                length = int(self.headers.get("content-length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    self._send(400, {"error": "the body must be JSON"})
                    return
                headers = {k.lower(): v for k, v in self.headers.items()} | {":peer": str(self.client_address[0])}
                status, reply = route(body if isinstance(body, dict) else {}, headers)
                self._send(status, reply)

            def _send(self, status: int, reply: Any) -> None:
                data = json.dumps(reply, ensure_ascii=False).encode("utf-8")
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return  # quiet: the demo prints evalgate's report, not access logs

        return Handler

    def start(self) -> JsonServer:
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="evalgate-demo-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> JsonServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_forever(server: JsonServer, description: str) -> None:
    """Command-line entry: print the base URL, serve until Ctrl-C."""
    print(f"{description} listening on {server.base_url}", flush=True)
    try:
        server.httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()


def port_argument(description: str) -> argparse.Namespace:
    """``--port`` and ``--host``: loopback by default; ``--host 0.0.0.0`` inside a service container, where
    other containers on the job's network reach it by the service's name."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--port", type=int, default=0, help="port (default: any free port)")
    parser.add_argument("--host", default=LOOPBACK,
                        help="address to listen on (default: 127.0.0.1; 0.0.0.0 in a service container)")
    return parser.parse_args()
