"""Loopback agent with a memory, for conversation tests (evalgate's ``turns:`` cases).

It remembers what the user told it: ``my <thing> is <value>`` stores a fact, ``what is my <thing>?``
answers ``Your <thing> is <value>.`` (or ``I don't know your <thing>.``), anything else gets ``Noted.``.
It also reports ``tools_used``: ``["remember"]`` when it stored a fact, ``["recall"]`` when it answered one.

* ``POST /chat/history`` ``{"message", "messages": [{"role", "content"}, …]}``: stateless, it reads the
  facts from every user message of ``messages`` (the history ends with this turn's message).
* ``POST /chat/session`` ``{"message", "conversation_id"?}`` or header ``X-Conversation-Id``: it keeps
  the facts per conversation id; without an id it starts a conversation and returns its id in the reply
  (``{"reply", "conversation_id", "tools_used"}``).

``forget=True`` makes it forget everything said before the current message (the history and the
sessions are ignored): the failure a conversation test must catch.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Iterable
from typing import Any

from tests.servers._http import LoopbackServer, Outcome, Request, json_response

HISTORY_PATH = "/chat/history"
SESSION_PATH = "/chat/session"
ID_HEADER = "x-conversation-id"
FACT = re.compile(r"\bmy ([a-z][a-z ]{0,30}?) is ([^.!?]+)", re.I)
QUESTION = re.compile(r"\bwhat is my ([a-z][a-z ]{0,30}?)\s*\?", re.I)


def learn(facts: dict[str, str], text: str) -> bool:
    """Store every ``my X is Y`` of ``text`` in ``facts``; True when one was found."""
    found = False
    for key, value in FACT.findall(text):
        facts[key.strip().lower()] = value.strip()
        found = True
    return found


def reply_to(text: str, facts: dict[str, str]) -> tuple[str, list[str]]:
    """The answer to ``text`` given what is known (``facts`` already include ``text``'s own)."""
    asked = QUESTION.search(text)
    if asked:
        key = asked.group(1).strip().lower()
        if key in facts:
            return f"Your {key} is {facts[key]}.", ["recall"]
        return f"I don't know your {key}.", ["recall"]
    if FACT.search(text):
        return "Noted, I will remember that.", ["remember"]
    return "Noted.", []


def facts_of(messages: Iterable[Any]) -> dict[str, str]:
    facts: dict[str, str] = {}
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "user" and isinstance(message.get("content"), str):
            learn(facts, message["content"])
    return facts


class MemoryAgent(LoopbackServer):
    name = "memory-agent"

    def __init__(self, *, forget: bool = False, **options: Any) -> None:
        super().__init__(**options)
        self.forget = forget
        self.sessions: dict[str, dict[str, str]] = {}
        self._ids = itertools.count(1)
        self.add_route("history", [HISTORY_PATH], {"POST"}, self._history)
        self.add_route("session", [SESSION_PATH], {"POST"}, self._session)

    def on_reset(self) -> None:
        super().on_reset()
        self.sessions.clear()

    async def _history(self, request: Request) -> Outcome:
        payload = request.json()
        text = payload.get("message") if isinstance(payload, dict) else None
        if not isinstance(text, str):
            return json_response({"error": "'message' (string) is required"}, 422)
        messages = payload.get("messages") or []
        facts = facts_of(messages[-1:] if self.forget else messages)
        learn(facts, text)
        answer, tools = reply_to(text, facts)
        return json_response({"reply": answer, "tools_used": tools})

    async def _session(self, request: Request) -> Outcome:
        payload = request.json()
        text = payload.get("message") if isinstance(payload, dict) else None
        if not isinstance(text, str):
            return json_response({"error": "'message' (string) is required"}, 422)
        conversation = payload.get("conversation_id") or request.headers.get(ID_HEADER)
        if conversation is None:
            conversation = f"c{next(self._ids)}-{int(time.time())}"
        facts = {} if self.forget else self.sessions.setdefault(conversation, {})
        learn(facts, text)
        answer, tools = reply_to(text, facts)
        return json_response({"reply": answer, "conversation_id": conversation, "tools_used": tools})
