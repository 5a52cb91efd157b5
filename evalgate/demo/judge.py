"""A deterministic scripted judge for the demo: OpenAI-compatible ``POST /v1/chat/completions``.

It is not a language model. It reads evalgate's judge prompt, finds the fenced blocks and the reply
format the request's ``response_format`` schema (else the prompt's format line) asks for, and answers with word-overlap verdicts:

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

The reasoning names what was compared (the terms found and missing, the claims checked), so two cases never
share it word for word (``judges.health`` flags identical reasoning across cases).

Modes (``--mode``, ``judge_server(mode=...)``): ``scripted`` (the default, above); ``random`` — a deliberately
unreliable judge for calibration tests and the example: every score is drawn uniformly on the scale (seeded by
the prompt, so a prompt keeps its score), lists are judged by coin flips; ``first`` — pairwise prompts always
prefer the answer shown first (a judge with pure position bias), other prompts as ``scripted``.

Pairwise prompts (``judges.pairwise``: "Reply with this JSON object" naming ``"preferred"``) get ``A`` or ``B``
by the same coverage (ties → ``tie``).

Requests need ``Authorization: Bearer <key>`` when the server was started with a key.

    python -m evalgate.demo.judge --port 8012 [--mode scripted|random|first]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import re
from typing import Any

from evalgate.demo.server import LOOPBACK, JsonServer, port_argument, serve_forever

CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
FENCE = re.compile(r"<<<UNTRUSTED (?P<label>.+?) id=(?P<id>[0-9a-f]{10,64})>>>\n(?P<body>.*?)\n"
                   r"<<<END id=(?P=id) UNTRUSTED>>>", re.S)
CRITERIA = re.compile(r"Case criteria \(trusted\):\n(?P<text>.*?)(?:\n\n|\Z)", re.S)
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


def reply_shape(prompt: str, schema: Any = None) -> str:
    """What the verdict must look like: the request's JSON schema when it sends one (structured output),
    else the format line the prompt ends with (prompt mode)."""
    if isinstance(schema, dict):
        return json.dumps(schema)
    return prompt[prompt.rfind("Reply with"):]


def five_point(spec: str) -> bool:
    """True when the score runs from 1 to 5 (a schema's maximum or last enumerated value, or ``<1–5>``)."""
    return bool(re.search(r'"maximum": 5(\.0)?\b|, 5(\.0)?\]|<1–5>', spec))


def score_fields(spec: str) -> list[str]:
    """The numeric fields the reply shape asks for: a JSON schema's number properties, or the prompt's
    ``"name": <low–high>`` fields."""
    try:
        schema = json.loads(spec)
    except ValueError:
        return re.findall(r'"(\w+)": <[\d.]+–[\d.]+>', spec)
    properties = schema.get("properties", {}) if isinstance(schema, dict) else {}
    return [name for name, sub in properties.items()
            if isinstance(sub, dict) and (sub.get("type") == "number" or "enum" in sub)]


MODES = ("scripted", "random", "first")


def _found(reference: str, candidate: str) -> str:
    wanted = sorted(terms(reference))
    have = terms(candidate)
    found = [t for t in wanted if t in have][:6]
    missing = [t for t in wanted if t not in have][:6]
    return f"found {', '.join(found) or 'none'}; missing {', '.join(missing) or 'none'}"


def random_verdict(prompt: str, spec: str | None = None) -> dict[str, Any]:
    """A verdict drawn at random (seeded by the prompt): the unreliable judge of ``--mode random``; ``spec``:
    the reply's shape (``reply_shape``)."""
    digest = hashlib.sha256(prompt.encode()).hexdigest()
    rng = random.Random(digest)
    spec = reply_shape(prompt) if spec is None else spec
    reasoning = f"a random draw ({digest[:12]}), not a reading of the answer"
    if '"preferred"' in spec:
        return {"reasoning": reasoning, "preferred": rng.choice(["A", "B", "tie"])}
    fenced = blocks(prompt)
    if '"claims"' in spec:
        return {"reasoning": reasoning, "claims": [{"claim": s, "verdict": rng.choice(["supported", "unsupported"])}
                                                   for s in sentences(fenced.get("answer", ""))]}
    if '"chunks"' in spec:
        count = sum(1 for label in fenced if label.startswith("context"))
        return {"reasoning": reasoning, "chunks": [{"chunk": i, "relevant": rng.random() < 0.5}
                                                   for i in range(1, count + 1)]}
    if '"statements"' in spec:
        return {"reasoning": reasoning, "statements": [{"statement": s, "attributable": rng.random() < 0.5}
                                                       for s in sentences(reference_text(prompt, fenced))]}
    value = round(rng.random(), 4)
    if '"overall_score"' in spec:
        return {"reasoning": reasoning, "accuracy": value, "completeness": value, "relevance": value,
                "overall_score": value}
    if '"answer_quality"' in spec:
        return {"reasoning": reasoning, "answer_quality": value, "factual_correctness": value, "completeness": value}
    if (scored := score_fields(spec)) and scored != ["score"]:
        return {"reasoning": reasoning, **dict.fromkeys(scored, value)}
    if five_point(spec):
        return {"reasoning": reasoning, "score": round(1 + 4 * value, 4)}
    return {"reasoning": reasoning, "score": value}


def pairwise_verdict(prompt: str, mode: str = "scripted") -> dict[str, Any]:
    """Which of the fenced ``answer A`` / ``answer B`` covers more of the reference (``first``: always A)."""
    fenced = blocks(prompt)
    if mode == "first":
        return {"reasoning": f"answer A is shown first ({hashlib.sha256(prompt.encode()).hexdigest()[:8]})",
                "preferred": "A"}
    reference = reference_text(prompt, fenced)
    a = coverage(reference, fenced.get("answer A", ""))
    b = coverage(reference, fenced.get("answer B", ""))
    preferred = "A" if a > b else "B" if b > a else "tie"
    return {"reasoning": f"answer A covers {a:.0%} of the reference terms ({_found(reference, fenced.get('answer A', ''))}), "
                         f"answer B {b:.0%} ({_found(reference, fenced.get('answer B', ''))})", "preferred": preferred}


def verdict(prompt: str, schema: Any = None, mode: str = "scripted") -> dict[str, Any]:
    """The JSON verdict for one evalgate judge prompt (see the module docstring); ``schema``: the request's
    ``response_format`` schema, if any."""
    if '"steps"' in reply_shape(prompt, schema):  # a criteria-only metric's evaluation steps
        return evaluation_steps(prompt)
    if mode == "random":
        return random_verdict(prompt, reply_shape(prompt, schema))
    if '"preferred"' in reply_shape(prompt, schema):
        return pairwise_verdict(prompt, mode)
    fenced = blocks(prompt)
    answer = fenced.get("answer", "")
    context = context_text(fenced)
    reference = reference_text(prompt, fenced)
    spec = reply_shape(prompt, schema)
    if '"claims"' in spec:
        claims = [{"claim": s, "verdict": "supported" if coverage(s, context) >= 0.5 else "unsupported"}
                  for s in sentences(answer)]
        shown = "; ".join(c["claim"][:40] for c in claims[:3])
        return {"reasoning": f"{len(claims)} claim(s) checked against the context by word overlap: {shown}",
                "claims": claims}
    if '"chunks"' in spec:
        needed = terms(fenced.get("question", "") + " " + reference)
        chunks = [{"chunk": i, "relevant": len(terms(fenced[f"context {i}"]) & needed) >= 2}
                  for i in range(1, 1 + sum(1 for label in fenced if label.startswith("context")))]
        return {"reasoning": f"chunks judged by shared terms with the question ({', '.join(sorted(needed)[:8])})",
                "chunks": chunks}
    if '"statements"' in spec:
        statements = [{"statement": s, "attributable": coverage(s, context) >= 0.5} for s in sentences(reference)]
        shown = "; ".join(s[:40] for s in sentences(reference)[:3])
        return {"reasoning": f"expected statements matched against the context: {shown}", "statements": statements}
    candidate = candidate_text(fenced)
    if "conversation" in fenced and RETENTION_MARKER in prompt:
        value, reasoning = retention(fenced["conversation"])
    else:
        value = round(coverage(reference, candidate), 4)
        quoted = " ".join(candidate.split())[:40]
        reasoning = (f"{value:.0%} of the reference terms occur in the answer {quoted!r} "
                     f"({_found(reference, candidate)})")
        if (any(fenced.get(label) for label in REFERENCE_LABELS) and negations(candidate) != negations(reference)
                and len(candidate.split()) <= 1.5 * len(reference.split())):
            # a near copy of the reference that flips its polarity: "do not X" is not "X" (a word count cannot see
            # it, a parity check can; longer answers phrase things their own way and are left to the word count)
            value = round(value / 2, 4)
            reasoning += "; the answer negates what the reference says (or the reverse), so half of that"
    if '"overall_score"' in spec:
        return {"reasoning": reasoning, "accuracy": value, "completeness": value, "relevance": value,
                "overall_score": value}
    if '"answer_quality"' in spec:
        return {"reasoning": reasoning, "answer_quality": value, "factual_correctness": value, "completeness": value}
    if (scored := score_fields(spec)) and scored != ["score"]:  # one call for several metrics
        return {"reasoning": reasoning, **dict.fromkeys(scored, value)}
    if five_point(spec):
        return {"reasoning": reasoning, "score": round(1 + 4 * value, 4)}
    return {"reasoning": reasoning, "score": value}


RETENTION_MARKER = "remembered what the user said"
"""In the built-in ``knowledge_retention`` criteria (metrics/conversation.py)."""
NEGATION = re.compile(r"\b(?:not|never|no|cannot|can't|don't|doesn't|isn't|aren't|won't|didn't|nothing)\b", re.I)
FORGOTTEN = re.compile(r"\b(?:don't|do not|doesn't) (?:know|remember|recall)\b|\b(?:never told|tell me again|remind "
                       r"me|what was it|could you repeat)\b", re.I)


def negations(text: str) -> bool:
    """Whether the text negates what it says: an odd number of negation words."""
    return len(NEGATION.findall(text)) % 2 == 1


def retention(transcript: str) -> tuple[float, str]:
    """A conversation judged without a reference (``knowledge_retention``): 0 when an assistant message after the
    first says it does not know or remember what it was told, or asks for it again; else the share of the user's
    earlier terms the later assistant messages use, floored at 0.75 (a reply need not repeat everything)."""
    paragraphs = [p for p in transcript.split("\n\n") if p.startswith(("user:", "assistant:"))]
    replies = [p for p in paragraphs if p.startswith("assistant:")]
    forgot = next((reply for reply in replies[1:] if FORGOTTEN.search(reply)), None)
    if forgot is not None:
        return 0.0, f"the assistant lost what the user said: {' '.join(forgot.split())[:60]!r}"
    users = [p for p in paragraphs if p.startswith("user:")]
    said = " ".join(users[:-1]) if len(users) > 1 else ""
    later = " ".join(replies[1:])
    value = round(max(0.75, coverage(said, later)) if said and later else 1.0, 4)
    return value, f"no forgotten fact in {len(replies)} assistant message(s) ({_found(said, later)})"


def completion(body: dict[str, Any], content: str) -> dict[str, Any]:
    prompt_text = "\n".join(str(m.get("content") or "") for m in body.get("messages", []) if isinstance(m, dict))
    usage = {"prompt_tokens": math.ceil(len(prompt_text) / 4), "completion_tokens": math.ceil(len(content) / 4)}
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    return {"id": "chatcmpl-demo", "object": "chat.completion", "created": 0, "model": body.get("model", "demo-judge"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": usage}


def request_schema(body: dict[str, Any]) -> Any:
    """The JSON schema of ``response_format`` (``json_schema`` or llama.cpp's ``json_object`` + schema), if any."""
    shape = body.get("response_format")
    if not isinstance(shape, dict):
        return None
    if shape.get("type") == "json_schema":
        return (shape.get("json_schema") or {}).get("schema")
    return shape.get("schema")


def make_chat(api_key: str | None, mode: str = "scripted") -> Any:
    def chat(body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
        if api_key is not None and headers.get("authorization") != f"Bearer {api_key}":
            return 401, {"error": {"message": "Incorrect API key provided.", "type": "invalid_request_error"}}
        messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
        if not messages:
            return 400, {"error": {"message": "'messages' must be a non-empty array.", "type": "invalid_request_error"}}
        user = next((str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "user"), "")
        if SIMULATOR_MARKER in user:
            return 200, completion(body, user_message(user))
        return 200, completion(body, json.dumps(verdict(user, request_schema(body), mode), ensure_ascii=False))

    return chat


def judge_server(api_key: str | None = None, port: int = 0, host: str = LOOPBACK, mode: str = "scripted") -> JsonServer:
    if mode not in MODES:
        raise ValueError(f"unknown demo judge mode {mode!r} (choose {', '.join(MODES)})")
    chat = make_chat(api_key, mode)
    return JsonServer({path: chat for path in CHAT_PATHS}, port=port, host=host)


if __name__ == "__main__":
    import sys

    mode_parser = argparse.ArgumentParser(add_help=False)
    mode_parser.add_argument("--mode", choices=MODES, default="scripted")
    chosen, sys.argv[1:] = mode_parser.parse_known_args(sys.argv[1:])
    arguments = port_argument("evalgate demo judge (OpenAI-compatible); --mode scripted|random|first")
    serve_forever(judge_server(port=arguments.port, host=arguments.host, mode=chosen.mode), "demo judge")
