"""Simulated users: an LLM writes a conversation case's next user message (docs/conversations.md).

The prompt (``templates/simulated_user.j2``) gives the case's ``simulated_user.persona`` and ``goal``
(trusted: the test author's) and the conversation so far, fenced as untrusted text (the agent's answers
must not steer the user). The model is the judge's (``judge_provider``, ``judge_model``) unless
``simulator_model`` names another model of the same provider; calls go through the run's executor
(retries, budget, pacing) at the judge's temperature and seed, at most ``MAX_MESSAGE_TOKENS`` tokens. The
reply's text, stripped of surrounding quotes and a ``user:`` label, is the message; an empty reply is a
failed call (the case errors, naming the turn).
"""

from __future__ import annotations

import re
from functools import cache
from typing import TYPE_CHECKING, Any

import jinja2

from evalgate.calls.executor import CallFailed
from evalgate.judges.prompts import TEMPLATE_DIR, fence
from evalgate.metrics.criteria import transcript_text

if TYPE_CHECKING:
    from evalgate.calls.chat import ChatService
    from evalgate.model import Case

TEMPLATE = "simulated_user.j2"
MAX_MESSAGE_TOKENS = 400
MAX_MESSAGE_CHARS = 4_000
_LABEL = re.compile(r"^\s*(?:user|you)\s*:\s*", re.I)


@cache
def _template() -> jinja2.Template:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATE_DIR), undefined=jinja2.StrictUndefined,
                             autoescape=False, keep_trailing_newline=False)
    return env.get_template(TEMPLATE)


def simulator_prompt(case: Case, messages: list[dict[str, str]]) -> str:
    """The user message asking for the next simulated message of ``case`` after ``messages``."""
    assert case.simulated_user is not None
    turn = sum(1 for m in messages if m.get("role") == "user") + 1
    transcript = fence("conversation", transcript_text(messages)) if messages else "(no messages yet)"
    return _template().render(persona=case.simulated_user.persona.strip(), goal=(case.goal or "").strip(),
                              transcript=transcript, turn=turn, max_turns=case.simulated_user.max_turns)


def clean_message(text: str) -> str:
    """The model's reply as a user message: whitespace, wrapping quotes and a ``user:`` label removed."""
    text = _LABEL.sub("", text.strip())
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'“”":
        text = text[1:-1].strip()
    if text.startswith("“") and text.endswith("”"):
        text = text[1:-1].strip()
    return text[:MAX_MESSAGE_CHARS]


class UserSimulator:
    """Writes simulated users' messages with one chat model (see the module docstring)."""

    def __init__(self, service: ChatService, *, temperature: float = 0.0, seed: int | None = None,
                 owns_service: bool = False) -> None:
        self.service = service
        self.temperature = temperature
        self.seed = seed
        self.owns_service = owns_service
        self.calls = 0

    async def next_message(self, case: Case, messages: list[dict[str, str]]) -> str:
        params: dict[str, Any] = {"temperature": self.temperature}
        if self.seed is not None and self.service.provider.spec.supports_seed:
            params["seed"] = self.seed
        prompt = [{"role": "user", "content": simulator_prompt(case, messages)}]
        reply = await self.service.complete(prompt, params, max_tokens=MAX_MESSAGE_TOKENS,
                                            what=f"simulated user {self.service.provider.name}/{self.service.model}")
        self.calls += 1
        text = clean_message(reply.text or "")
        if not text:
            raise CallFailed("the simulator model replied with an empty message")
        return text

    def describe(self) -> dict[str, Any]:
        return {"provider": self.service.provider.name, "model": self.service.model, "messages_written": self.calls}

    async def aclose(self) -> None:
        if self.owns_service:
            await self.service.aclose()
