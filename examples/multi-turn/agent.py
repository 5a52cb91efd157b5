"""A tiny fantasy-basketball assistant with a memory, for the multi-turn example (standard library only).

POST /chat {"message": "...", "session_id"?: "..."} → {"reply": "...", "session_id": "...", "tools_used": [...]}

The first reply of a conversation carries a new ``session_id``; the client sends it back with every later
message and the agent answers from what that session said before:

* "Who should I start tonight: Caruso or Reid?" → remembers the two candidates, picks the first healthy one;
* "Caruso is now OUT — replan" → marks the player out and picks again among the remembered candidates;
* "My team is the Lisbon Owls." / "What is my team called?" → remembers and recalls the team's name.

With BREAK=forget in its environment the agent forgets every earlier message of the session.

    python agent.py --port 0    # prints the port it listens on
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FORGET = os.environ.get("BREAK") == "forget"
CHOICE = re.compile(r"start tonight[:,]?\s*(?P<a>[A-Z][\w'-]+) or (?P<b>[A-Z][\w'-]+)", re.I)
OUT = re.compile(r"(?P<player>[A-Z][\w'-]+) is (?:now )?out", re.I)
TEAM = re.compile(r"my team is (?:the )?(?P<team>[^.!?]+)", re.I)
ASK_TEAM = re.compile(r"what is my team called|what's my team called", re.I)
sessions: dict[str, dict] = {}
ids = itertools.count(1)


def answer(memory: dict, text: str) -> tuple[str, list[str]]:
    if (choice := CHOICE.search(text)) is not None:
        memory["candidates"] = [choice["a"], choice["b"]]
    if (out := OUT.search(text)) is not None:
        memory.setdefault("out", set()).add(out["player"].lower())
    if (team := TEAM.search(text)) is not None:
        memory["team"] = team["team"].strip()
        return f"Got it: your team is the {memory['team']}.", ["save_team"]
    if ASK_TEAM.search(text):
        if "team" in memory:
            return f"Your team is the {memory['team']}.", ["recall_team"]
        return "I don't know your team's name yet.", ["recall_team"]
    if choice or out:
        healthy = [p for p in memory.get("candidates", []) if p.lower() not in memory.get("out", set())]
        if not memory.get("candidates"):
            return "Noted. Which players are you choosing between?", ["get_player_status"]
        if not healthy:
            return "Every player you named is out; check the waiver wire.", ["get_player_status", "get_free_agents"]
        return f"Start {healthy[0]}.", ["get_player_status"]
    return "How can I help with your lineup?", []


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        session = body.get("session_id") or f"s{next(ids)}"
        memory = {} if FORGET else sessions.setdefault(session, {})
        reply, tools = answer(memory, str(body.get("message", "")))
        data = json.dumps({"reply": reply, "session_id": session, "tools_used": tools}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:  # quiet
        return


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8000)
    server = ThreadingHTTPServer(("127.0.0.1", parser.parse_args().port), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()
