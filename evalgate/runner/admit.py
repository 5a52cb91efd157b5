"""What happens to an answer between the target and the metrics: its size is bounded and its text
redacted, once, where it enters the run.

* **Size.** An answer's size is the characters of its text (``output``, ``agent_id``) plus those of its
  list items (``sources``, ``agents_called``, ``tools_used``, ``data_sources``, ``ranked_list``,
  ``debug_context``, the brands of ``mentions``). Above ``max_answer_chars`` (default 1,000,000) the
  answer is cut to that budget — the output first, then list items in order — ``Answer.truncated``
  records each cut field's size before the cut, and the case is **errored** with a reason that says so:
  a metric run on part of an answer could pass what the rest would fail (a ``not_contains`` rule, a
  keyword missing from the kept part), so no metric or judge sees it. What was kept is stored and
  reported like any answer.
* **Redaction.** The answer of a live target (http, openai, command, custom) is redacted with
  ``redact`` (every known secret and every 8+ character fragment of one: an agent echoing a session
  token or a Basic credential); a recorded answer (the repository's own text) with ``redact_exact``.
  Everything stored or reported later derives from the redacted answer.
"""

from __future__ import annotations

from typing import Any

from evalgate.model import Answer, Mention
from evalgate.safety.redact import redact, redact_exact

TEXT_LISTS = ("sources", "agents_called", "tools_used", "data_sources", "ranked_list", "debug_context")


def answer_size(answer: Answer) -> int:
    """Characters of the answer's text and list items (see the module docstring)."""
    fields = vars(answer)
    size = len(fields["output"] or "") + len(fields["agent_id"] or "")
    for name in TEXT_LISTS:
        items = fields[name]
        if items:
            size += sum(len(item) for item in items if type(item) is str)
    mentions = fields["mentions"]
    if mentions:
        size += sum(len(mention.brand) for mention in mentions)
    return size


def bound(answer: Answer, limit: int, size: int | None = None) -> Answer:
    """``answer`` itself when its size is within ``limit``; else a copy cut to ``limit`` characters (output
    first, then list items in field order), with ``truncated`` set and the case's error."""
    size = answer_size(answer) if size is None else size
    if size <= limit:
        return answer
    budget = limit
    truncated: dict[str, int] = {}
    update: dict[str, Any] = {}
    for name in ("output", "agent_id"):
        text = getattr(answer, name)
        if text is None:
            continue
        if len(text) > budget:
            truncated[name] = len(text)
            update[name] = text[:budget]
        budget -= len(update.get(name, text))
    for name in (*TEXT_LISTS, "mentions"):
        items = getattr(answer, name)
        if not items:
            continue
        kept: list[Any] = []
        for item in items:
            length = len(item.brand if isinstance(item, Mention) else item)
            if length > budget:
                break
            kept.append(item)
            budget -= length
        if len(kept) < len(items):
            truncated[name] = len(items)
            update[name] = kept
    update["truncated"] = truncated
    update["error"] = (f"answer too large: {size:,} characters of text and list items, more than "
                       f"max_answer_chars ({limit:,}); the first {limit:,} are kept and no metric was run")
    return answer.model_copy(update=update)


def redact_answer(answer: Answer, *, live: bool) -> Answer:
    """``answer`` with its text redacted: ``redact`` for a live target's answer, ``redact_exact`` (whole
    secrets only) for a recorded one's output. Returns ``answer`` itself when nothing changed."""
    clean = redact if live else redact_exact
    update: dict[str, Any] = {}
    output = answer.output
    if output:
        cleaned = clean(output)
        if cleaned is not output and cleaned != output:
            update["output"] = cleaned
    if live:
        if answer.agent_id:
            update["agent_id"] = redact(answer.agent_id)
        for name in TEXT_LISTS:
            items = getattr(answer, name)
            if items:
                update[name] = [redact(item) if type(item) is str else item for item in items]
        if answer.mentions:
            update["mentions"] = [m.model_copy(update={"brand": redact(m.brand)}) for m in answer.mentions]
    if not update:
        return answer
    return answer.model_copy(update=update)


def admit(answer: Answer, *, limit: int, live: bool, size: int | None = None) -> Answer:
    """``bound`` then ``redact_answer``: what the run stores, reports and scores. A cut answer is redacted
    with ``redact`` even when recorded: a secret the cut went through is then masked by its fragment."""
    bounded = bound(answer, limit, size)
    return redact_answer(bounded, live=live or bounded is not answer)
