"""A deterministic scripted judge for the demo: OpenAI-compatible ``POST /v1/chat/completions``.

It is not a language model. It reads evalgate's judge prompt, finds the fenced blocks and the reply
format the prompt asks for, and answers with word-overlap verdicts:

* coverage = |reference terms found in the candidate text| / |reference terms|, where terms are
  lower-cased words of ≥ 3 letters or numbers, stopwords removed, compared by their first 5 characters;
  the reference is the fenced expected output, else the case's criteria, else the question; the
  candidate text is every other fenced block (answer, tools, context);
* a simulated-user prompt gets the user's next message: sentence k of the goal (k = user messages so
  far), then "Thank you, that is all I needed."; a conversation block counts only the assistant's lines
  as the candidate text, and a case's goal is the reference when shown;
* score-style prompts get ``coverage`` (0–1) or ``1 + 4 · coverage`` on the 1–5 scale;
* evaluation-steps prompts (criteria without declared steps): one step per sentence or line of the
  criteria ("Check that the answer …"), then steps for the empty answer and the score, 3 to 8 in all;
* claim lists: each answer sentence is "supported" when ≥ half its terms occur in the context, else
  "unsupported"; chunk lists: a chunk is relevant when it shares ≥ 2 terms with the question and the
  expected output; statement lists: an expected-output sentence is attributable when ≥ half its terms
  occur in the context.

Requests need ``Authorization: Bearer <key>`` when the server was started with a key.

    python -m evalgate.demo.judge --port 8012
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from evalgate.demo.server import LOOPBACK, JsonServer, port_argument, serve_forever

CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
FENCE = re.compile(r"<<<UNTRUSTED (?P<label>.+?) id=(?P<id>[0-9a-f]{10,64})>>>\n(?P<body>.*?)\n"
                   r"<<<END (?P=label) id=(?P=id) UNTRUSTED>>>", re.S)
CRITERIA = re.compile(r"criteria \(written by the test author; trusted\):\n(?P<text>.*?)(?:\n\n|\Z)", re.S)
WORD = re.compile(r"\w+")
STOPWORDS = frozenset({
    "the", "and", "for", "with", "this", "that", "are", "was", "were", "you", "your", "his", "her", "him", "its",
    "from", "have", "has", "had", "not", "but", "into", "over", "than", "then", "they", "them", "their", "there",
    "what", "when", "which", "who", "whom", "will", "would", "should", "could", "does", "did", "about", "also",
    # words of the criteria themselves, not of what they ask for
    "answer", "answers", "says", "say", "states", "mentions", "response", "reply", "user", "question",
})
REFERENCE_LABELS = ("expected output", "reference", "verified answer summary", "reference answer", "user's goal")
SIMULATOR_MARKER = "You are role-playing the user in a conversation"
"""In evalgate's simulated-user prompt (judges/templates/simulated_user.j2)."""
GOAL = re.compile(r"Goal \(written by the test author; trusted\):\n(?P<text>.*?)\n\n", re.S)
DONE_MESSAGE = "Thank you, that is all I needed."
"""What the scripted user says once every sentence of its goal was said."""
STEPS_CRITERIA = re.compile(r"criteria[^\n]*:\n(?P<text>.*?)(?:\n\s*\n|\Z)", re.S | re.I)
MAX_STEPS = 8


def terms(text: str) -> set[str]:
    """Comparable terms: words of ≥ 3 letters (or numbers), minus stopwords, cut to 5 characters."""
    words = (w.lower() for w in WORD.findall(text))
    return {w[:5] for w in words if (len(w) >= 3 or w.isdigit()) and w not in STOPWORDS}


def coverage(reference: str, candidate: str) -> float:
    wanted = terms(reference)
    if not wanted:
        return 1.0 if candidate.strip() else 0.0
    return len(wanted & terms(candidate)) / len(wanted)


def sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if terms(s)]


def blocks(prompt: str) -> dict[str, str]:
    return {m.group("label"): m.group("body") for m in FENCE.finditer(prompt)}


def context_text(fenced: dict[str, str]) -> str:
    return "\n".join(body for label, body in fenced.items() if label.startswith("context"))


def reference_text(prompt: str, fenced: dict[str, str]) -> str:
    for label in REFERENCE_LABELS:
        if fenced.get(label):
            return fenced[label]
    found = CRITERIA.search(prompt)
    return found.group("text") if found else fenced.get("question", fenced.get("query", ""))


def candidate_text(fenced: dict[str, str]) -> str:
    skip = {"question", "query", *REFERENCE_LABELS}
    return "\n".join(assistant_lines(body) if label == "conversation" else body
                     for label, body in fenced.items() if label not in skip and body != "(empty)")


def assistant_lines(transcript: str) -> str:
    """The assistant's paragraphs of a judged transcript (``role: text`` paragraphs): what the system said."""
    return "\n\n".join(p for p in transcript.split("\n\n") if p.startswith("assistant:"))


def user_message(prompt: str) -> str:
    """The scripted simulated user: its message k (counted from 0) is sentence k of its goal; once every
    sentence was said, ``DONE_MESSAGE``."""
    goal = GOAL.search(prompt)
    sentences_ = [s.strip() for s in re.split(r"(?<=[.!?])\s+", goal.group("text").strip())] if goal else []
    transcript = blocks(prompt).get("conversation", "")
    said = sum(1 for p in transcript.split("\n\n") if p.startswith("user:"))
    return sentences_[said] if said < len(sentences_) else DONE_MESSAGE


def evaluation_steps(prompt: str) -> dict[str, Any]:
    """Steps for a criteria-only metric: one check per criteria sentence, then how to score (3–8 steps)."""
    found = STEPS_CRITERIA.search(prompt)
    criteria = found.group("text").strip() if found else ""
    parts = [part.strip(" -*\t") for line in criteria.splitlines() for part in re.split(r"(?<=[.!?;])\s+", line)]
    checks = [f"Check that the answer meets this: {part.rstrip('.')}." for part in parts if terms(part)]
    steps = [*checks[:MAX_STEPS - 2], "An empty or evasive answer meets none of the criteria.",
             "Score by the share of the checks above the answer meets."]
    while len(steps) < 3:
        steps.insert(0, "Read the question and the answer in full.")
    return {"reasoning": f"{len(checks)} check(s) read from the criteria", "steps": steps}


def verdict(prompt: str) -> dict[str, Any]:
    """The JSON verdict for one evalgate judge prompt (see the module docstring)."""
    if '"steps"' in prompt[-600:]:
        return evaluation_steps(prompt)
    fenced = blocks(prompt)
    answer = fenced.get("answer", "")
    context = context_text(fenced)
    reference = reference_text(prompt, fenced)
    spec = prompt[prompt.rfind("Reply with this JSON object"):]
    if '"claims"' in spec:
        claims = [{"claim": s, "verdict": "supported" if coverage(s, context) >= 0.5 else "unsupported"}
                  for s in sentences(answer)]
        return {"reasoning": f"{len(claims)} claim(s) checked against the context by word overlap", "claims": claims}
    if '"chunks"' in spec:
        needed = terms(fenced.get("question", "") + " " + reference)
        chunks = [{"chunk": i, "relevant": len(terms(fenced[f"context {i}"]) & needed) >= 2}
                  for i in range(1, 1 + sum(1 for label in fenced if label.startswith("context")))]
        return {"reasoning": "chunks judged by shared terms with the question", "chunks": chunks}
    if '"statements"' in spec:
        statements = [{"statement": s, "attributable": coverage(s, context) >= 0.5} for s in sentences(reference)]
        return {"reasoning": "expected statements matched against the context", "statements": statements}
    value = round(coverage(reference, candidate_text(fenced)), 4)
    reasoning = f"{value:.0%} of the reference terms occur in the answer"
    if '"overall_score"' in spec:
        return {"reasoning": reasoning, "accuracy": value, "completeness": value, "relevance": value,
                "overall_score": value}
    if '"answer_quality"' in spec:
        return {"reasoning": reasoning, "answer_quality": value, "factual_correctness": value, "completeness": value}
    if "from 1 to 5" in spec:
        return {"reasoning": reasoning, "score": round(1 + 4 * value, 4)}
    return {"reasoning": reasoning, "score": value}


def completion(body: dict[str, Any], content: str) -> dict[str, Any]:
    prompt_text = "\n".join(str(m.get("content") or "") for m in body.get("messages", []) if isinstance(m, dict))
    usage = {"prompt_tokens": math.ceil(len(prompt_text) / 4), "completion_tokens": math.ceil(len(content) / 4)}
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    return {"id": "chatcmpl-demo", "object": "chat.completion", "created": 0, "model": body.get("model", "demo-judge"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": usage}


def make_chat(api_key: str | None) -> Any:
    def chat(body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
        if api_key is not None and headers.get("authorization") != f"Bearer {api_key}":
            return 401, {"error": {"message": "Incorrect API key provided.", "type": "invalid_request_error"}}
        messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
        if not messages:
            return 400, {"error": {"message": "'messages' must be a non-empty array.", "type": "invalid_request_error"}}
        user = next((str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "user"), "")
        if SIMULATOR_MARKER in user:
            return 200, completion(body, user_message(user))
        return 200, completion(body, json.dumps(verdict(user), ensure_ascii=False))

    return chat


def judge_server(api_key: str | None = None, port: int = 0, host: str = LOOPBACK) -> JsonServer:
    chat = make_chat(api_key)
    return JsonServer({path: chat for path in CHAT_PATHS}, port=port, host=host)


if __name__ == "__main__":
    arguments = port_argument("evalgate demo judge (OpenAI-compatible)")
    serve_forever(judge_server(port=arguments.port, host=arguments.host), "demo judge")
