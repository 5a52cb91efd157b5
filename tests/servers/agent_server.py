"""Loopback agent server in the shapes of seed 002 (``POST /api/agent/chat``) and seed 004 (``POST /api/query``,
and ``POST /chat`` as seed 004's runner calls it: ``{"message"}`` → ``{"response", "agent_id", "citations"}``).

Seed 002 request ``{"message", "activeTeamId"?, "activeLeagueId"?, "teamName"?, "language"?, ...}`` →
``{"response", "agent", "tools_used", "agents_called", "debug_context", "sources", "usage"}``.
Seed 004 request ``{"query", ...}`` → ``{"answer", "agent_id", "data_sources", "citations"}``.

Answers come from a mapping keyed by the incoming text: an exact match (after stripping) wins, otherwise the
first key, in mapping order, that occurs in the text (case-insensitive), otherwise ``default``. Values are
text, an :class:`AgentReply`, or ``callable(request_json) -> str | AgentReply``. :class:`Fault` entries
script failures per path. Also ``GET /_stats`` and ``POST /_reset``.

Command line: ``python -m tests.servers.agent_server --port 0 --latency-ms 50 --jitter-ms 5 --print-port``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from tests.servers._http import (
    LoopbackServer,
    Outcome,
    Request,
    Script,
    ScriptBook,
    bearer_token,
    estimate_tokens,
    json_response,
    reject_unknown,
    script_main,
    scripted_outcome,
)

CHAT_PATH = "/api/agent/chat"
QUERY_PATH = "/api/query"
RUNNER_PATH = "/chat"
"""Seed 004's runner posts ``{"message": query}`` to ``{api-url}/chat``."""
TEXT_FIELDS: Mapping[str, str] = {CHAT_PATH: "message", QUERY_PATH: "query", RUNNER_PATH: "message"}
DEFAULT_TEXT = "I don't have an answer for that."


@dataclass(frozen=True, kw_only=True)
class AgentReply:
    """One scripted agent answer; each endpoint reports the fields of its own shape."""

    text: str
    agent: str = "supervisor"
    tools_used: Sequence[str] = ()
    agents_called: Sequence[str] = ()
    debug_context: Sequence[Any] = ()
    sources: Sequence[Any] = ()
    data_sources: Sequence[str] = ()
    citations: Sequence[Any] = ()
    usage: Mapping[str, int] | None = None

    @classmethod
    def from_json(cls, data: str | Mapping[str, Any]) -> AgentReply:
        if isinstance(data, str):
            return cls(text=data)
        reject_unknown(data, {f.name for f in fields(cls)}, "agent reply")
        return cls(**data)


Answer = str | AgentReply | Callable[[dict[str, Any]], "str | AgentReply"]


@dataclass(frozen=True, kw_only=True)
class Fault(Script):
    """A :class:`Script` entry limited to one ``path`` (None: both endpoints); ``contains`` searches the
    message/query text. ``times`` counts matches on that path."""

    path: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Fault:
        return cls(**cls.options_from_json(data, "fault"))


def agent_error(status: int) -> dict[str, Any]:
    messages = {429: "Too many requests", 500: "Internal server error", 502: "Bad gateway",
                503: "Service unavailable"}
    return {"error": messages.get(status, f"HTTP {status}")}


def find_answer(answers: Mapping[str, Answer], text: str, default: Answer) -> Answer:
    """Exact key (stripped) first, then the first key contained in ``text`` (case-insensitive), else default."""
    stripped = text.strip()
    if stripped in answers:
        return answers[stripped]
    lowered = text.lower()
    return next((value for key, value in answers.items() if key.lower() in lowered), default)


def resolve(answer: Answer, payload: dict[str, Any]) -> AgentReply:
    value = answer(payload) if callable(answer) else answer
    return value if isinstance(value, AgentReply) else AgentReply(text=str(value))


def usage_for(text_in: str, reply: AgentReply) -> dict[str, int]:
    """The reply's usage, or estimates: ceil(len/4) tokens for the message and for the response."""
    if reply.usage is not None:
        return dict(reply.usage)
    prompt, completion = estimate_tokens(text_in), estimate_tokens(reply.text)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def chat_body(text_in: str, reply: AgentReply) -> dict[str, Any]:
    """Seed 002 response shape."""
    return {"response": reply.text, "agent": reply.agent, "tools_used": list(reply.tools_used),
            "agents_called": list(reply.agents_called), "debug_context": list(reply.debug_context),
            "sources": list(reply.sources), "usage": usage_for(text_in, reply)}


def runner_body(reply: AgentReply) -> dict[str, Any]:
    """The reply seed 004's runner reads from ``/chat``: response, agent_id, citations."""
    return {"response": reply.text, "agent_id": reply.agent, "citations": list(reply.citations),
            "model_used": "loopback"}


def query_body(reply: AgentReply) -> dict[str, Any]:
    """Seed 004 response shape."""
    return {"answer": reply.text, "agent_id": reply.agent, "data_sources": list(reply.data_sources),
            "citations": list(reply.citations)}


class AgentServer(LoopbackServer):
    """Agent endpoints of seeds 002 and 004. ``api_key``: when set, requests need ``Authorization: Bearer``
    or ``X-API-Key`` with that value (else 401)."""

    name = "agent"

    def __init__(self, answers: Mapping[str, Answer] | None = None, *, default: Answer = DEFAULT_TEXT,
                 faults: Sequence[Fault] = (), api_key: str | None = None, **options: Any) -> None:
        super().__init__(**options)
        self.answers = dict(answers or {})
        self.default = default
        self.faults = ScriptBook(faults)
        self.api_key = api_key
        self.add_route("agent.chat", [CHAT_PATH], {"POST"}, self._handle)
        self.add_route("query", [QUERY_PATH], {"POST"}, self._handle)
        self.add_route("runner.chat", [RUNNER_PATH], {"POST"}, self._handle)

    def on_reset(self) -> None:
        super().on_reset()
        self.faults.reset()

    def bodies(self, path: str) -> list[dict[str, Any]]:
        """Parsed JSON bodies of the recorded requests to ``path``."""
        return self.json_bodies([path])

    def error_body(self, status: int) -> Any:
        return agent_error(status)

    def _authorised(self, request: Request) -> bool:
        if self.api_key is None:
            return True
        return self.api_key in (bearer_token(request.headers), request.headers.get("x-api-key"))

    async def _handle(self, request: Request) -> Outcome:
        if not self._authorised(request):
            return json_response({"error": "Unauthorized"}, 401)
        field_name = TEXT_FIELDS[request.path]
        try:
            payload = request.json()
        except ValueError:
            return json_response({"error": "Request body must be JSON"}, 400)
        if not isinstance(payload, dict) or not isinstance(payload.get(field_name), str):
            return json_response({"error": f"'{field_name}' (string) is required"}, 422)
        text_in = payload[field_name]
        fault: Fault | None = self.faults.pick(text_in, request.number, payload,
                                               accept=lambda f: f.path in (None, request.path))
        if (scripted := await scripted_outcome(fault, agent_error)) is not None:
            return scripted
        reply = resolve(find_answer(self.answers, text_in, self.default), payload)
        if request.path == RUNNER_PATH:
            return json_response(runner_body(reply))
        return json_response(chat_body(text_in, reply) if request.path == CHAT_PATH else query_body(reply))


def server_from_script(data: Mapping[str, Any], options: dict[str, Any]) -> AgentServer:
    """Build a server from a JSON script: ``{"answers": {key: text | reply}, "default": text | reply,
    "faults": [...]}`` (reply and fault objects take the dataclass field names)."""
    reject_unknown(data, {"answers", "default", "faults"}, "script")
    answers = {key: AgentReply.from_json(value) for key, value in data.get("answers", {}).items()}
    default = AgentReply.from_json(data.get("default", DEFAULT_TEXT))
    faults = [Fault.from_json(f) for f in data.get("faults", [])]
    return AgentServer(answers, default=default, faults=faults, **options)


def main(argv: Sequence[str] | None = None) -> None:
    script_main("Loopback agent server (seed 002 /api/agent/chat, seed 004 /api/query).", server_from_script, argv)


if __name__ == "__main__":
    main(sys.argv[1:])
