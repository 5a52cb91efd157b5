"""A demo fantasy-basketball agent in the black-box agent dialect's API shape: ``POST /api/agent/chat``.

Request ``{"message": ..., "language"?}`` plus the dialect's context fields (``request_names``); reply
``{"response", "agent", "tools_used", "agents_called", "debug_context", "sources", "usage"}``. Answers come
from ``KNOWLEDGE``: the first entry whose keywords all occur in the message (case-insensitive); anything
else gets a polite "I don't know". Usage is ceil(characters / 4) tokens for message and response.

With ``OTEL_EXPORTER_OTLP_ENDPOINT`` set, a request carrying a W3C ``traceparent`` also exports its spans
(OTLP/JSON, GenAI conventions) to ``<endpoint>/v1/traces`` before the reply: ``invoke_agent supervisor``
(child of the caller's span), the specialist agent under it, an ``execute_tool`` span per tool and one
``chat demo-model`` span with the token usage. ``{peer}`` in the endpoint is the caller's address: a
``services:`` agent reaches the action's receiver that way (docs/traces.md).

    python -m evalgate.demo.agent --port 8011
"""

from __future__ import annotations

import json
import math
import os
import secrets
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from evalgate.demo.server import LOOPBACK, JsonServer, port_argument, serve_forever

CHAT_PATH = "/api/agent/chat"


@dataclass(frozen=True)
class Reply:
    keywords: tuple[str, ...]
    text: str
    agent: str = "supervisor"
    tools: tuple[str, ...] = ()
    context: tuple[str, ...] = ()
    sources: tuple[str, ...] = field(default_factory=tuple)


KNOWLEDGE: tuple[Reply, ...] = (
    Reply(("waiver", "steals"),
          "I recommend you pick up Alex Caruso for steals: he averages 1.7 steals per game and plays four games "
          "this week, the most of any steals specialist on waivers.",
          agent="optimizer", tools=("get_free_agents",), sources=("ESPN free agents",)),
    Reply(("giannis", "drop"),
          "Do not drop Giannis on a rumour. Hold him and check the official injury report before his next game; "
          "his status is currently active with no injury designation.",
          tools=("get_espn_player_status",),
          context=("Giannis Antetokounmpo status (ESPN): active, no injury designation.",)),
    Reply(("brunson",),
          "I checked Jalen Brunson's status with get_espn_player_status: he is active tonight with no injury "
          "designation, so I recommend you start him tonight.",
          tools=("get_espn_player_status",), context=("Jalen Brunson status (ESPN): active.",)),
    Reply(("maxey",),
          "Tyrese Maxey averaged 28.4 points over his last five games (31, 27, 25, 30 and 29 points).",
          agent="game_log", tools=("get_player_game_log",),
          context=("Tyrese Maxey last five games: 31, 27, 25, 30 and 29 points (28.4 points average).",
                   "76ers schedule: four games this week, two at home.")),
    Reply(("412", "880"),
          "412 / 880 = 0.468, so your field goal percentage this week is 46.8%.", agent="optimizer"),
    Reply(("account",),
          "I refuse to help you access another person's account. If something seems unfair in your league, "
          "I suggest contacting the league commissioner.", agent="supervisor"),
)
UNKNOWN = "I don't know the answer to that yet."


def find_reply(message: str) -> Reply | None:
    lowered = message.lower()
    return next((reply for reply in KNOWLEDGE if all(k in lowered for k in reply.keywords)), None)


def tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def _span(trace_id: str, parent: str, name: str, attributes: dict[str, Any], start: int) -> dict[str, Any]:
    span_id = secrets.token_hex(8)
    values = [{"key": k, "value": {"intValue": str(v)} if isinstance(v, int) else {"stringValue": str(v)}}
              for k, v in attributes.items()]
    return {"traceId": trace_id, "spanId": span_id, "parentSpanId": parent, "name": name, "kind": 1,
            "startTimeUnixNano": str(start), "endTimeUnixNano": str(time.time_ns()), "attributes": values}


def reply_spans(traceparent: str, reply: Reply | None, usage: dict[str, int]) -> list[dict[str, Any]]:
    """The spans of one answer (see the module docstring), children first and the top-level span last."""
    _, trace_id, parent, _ = traceparent.split("-")
    start = time.time_ns()
    root = _span(trace_id, parent, "invoke_agent supervisor",
                 {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "supervisor"}, start)
    spans = [_span(trace_id, root["spanId"], "chat demo-model",
                   {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "evalgate-demo",
                    "gen_ai.request.model": "demo-model", "gen_ai.usage.input_tokens": usage["prompt_tokens"],
                    "gen_ai.usage.output_tokens": usage["completion_tokens"]}, start)]
    under = root["spanId"]
    if reply is not None and reply.agent != "supervisor":
        specialist = _span(trace_id, root["spanId"], f"invoke_agent {reply.agent}",
                           {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": reply.agent}, start)
        under = specialist["spanId"]
    for tool in reply.tools if reply else ():
        spans.append(_span(trace_id, under, f"execute_tool {tool}",
                           {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}, start))
    if under != root["spanId"]:
        spans.append(specialist)
    return [*spans, root]


def export_spans(endpoint: str, spans: list[dict[str, Any]]) -> None:
    """POST the spans as OTLP/JSON; a failed export never fails the answer (as an SDK's exporter)."""
    body = json.dumps({"resourceSpans": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": "evalgate-demo-agent"}}]},
        "scopeSpans": [{"scope": {"name": "evalgate.demo"}, "spans": spans}]}]}).encode()
    request = urllib.request.Request(f"{endpoint.rstrip('/')}/v1/traces", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            response.read()
    except OSError:
        pass


def chat(body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    message = body.get("message")
    if not isinstance(message, str):
        return 422, {"error": "'message' (string) is required"}
    reply = find_reply(message)
    text = reply.text if reply else UNKNOWN
    usage = {"prompt_tokens": tokens(message), "completion_tokens": tokens(text)}
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "")
    traceparent = headers.get("traceparent", "")
    if endpoint and traceparent.count("-") == 3:
        export_spans(endpoint.replace("{peer}", headers.get(":peer", "127.0.0.1")),
                     reply_spans(traceparent, reply, usage))
    return 200, {
        "response": text,
        "agent": reply.agent if reply else "supervisor",
        "tools_used": list(reply.tools) if reply else [],
        "agents_called": ["supervisor"] + ([reply.agent] if reply and reply.agent != "supervisor" else []),
        "debug_context": list(reply.context) if reply else [],
        "sources": list(reply.sources) if reply else [],
        "usage": usage,
    }


def agent_server(port: int = 0, host: str = LOOPBACK) -> JsonServer:
    return JsonServer({CHAT_PATH: chat}, port=port, host=host)


if __name__ == "__main__":
    arguments = port_argument("evalgate demo agent (black-box agent chat API)")
    serve_forever(agent_server(arguments.port, arguments.host), "demo agent")
