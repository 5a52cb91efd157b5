"""A scripted OpenAI-compatible chat-completions server that asks for tool calls deterministically.

``POST /v1/chat/completions``: while the request holds fewer ``tool`` messages than ``plan`` has tools,
the reply is an assistant message with one tool call — the next tool of ``plan`` with its arguments —
(``finish_reason: tool_calls``); then a final text answer naming the tool results. Usage is fixed:
prompt 20, completion 8 tokens per reply. Runs in a thread on 127.0.0.1 with an ephemeral port::

    with ToolModelServer([("search_flights", {"origin": "LON"}), ("book_flight", {"flight": "BA117"})]) as srv:
        openai.OpenAI(base_url=srv.base_url + "/v1", api_key="k")
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class ToolModelServer:
    def __init__(self, plan: Sequence[tuple[str, dict[str, Any]]]) -> None:
        self.plan = list(plan)
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                server.requests.append(body)
                data = json.dumps(server.reply(body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_port}"

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        done = [m for m in body.get("messages", []) if m.get("role") == "tool"]
        if len(done) < len(self.plan):
            name, arguments = self.plan[len(done)]
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"call_{len(done)}", "type": "function",
                 "function": {"name": name, "arguments": json.dumps(arguments)}}]}
            finish = "tool_calls"
        else:
            message = {"role": "assistant", "content": "; ".join(str(m.get("content")) for m in done)}
            finish = "stop"
        return {"id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": 0,
                "model": body.get("model", "m"), "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 20, "completion_tokens": 8, "total_tokens": 28}}

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()
