"""Chat completions: the wire (one request in, the reply text and token usage out) and ``ChatService`` on it.

Two interchangeable backends speak the same OpenAI chat-completions protocol to every provider:

* ``direct`` (default): posts the JSON body to ``{base_url}/chat/completions`` with
  ``Authorization: Bearer <key>`` over the run's fast HTTP client (``evalgate.calls.http_pool``) and reads
  ``choices[0].message.content`` and ``usage`` from the JSON reply.
* ``openai-sdk``: the official ``openai.AsyncOpenAI`` client (its retries off; the run's retry layer
  decides). Same requests and replies, several times the CPU per call (``python -m bench --scenarios
  clients``): its request building and response models cost more than the call itself against a fast
  server. Choose it with ``chat_client: openai-sdk``
  (``--chat-client``) to rule evalgate's own client out when a provider misbehaves.

Both raise what ``executor.classify`` understands: HTTP statuses (``StatusError`` / the SDK's
``APIStatusError``, with headers for ``Retry-After``), timeouts and connection errors; a 2xx reply that is
not a chat completion raises ``ReplyError`` (not retried).

``ChatService.complete`` (over either backend) is the only place a chat call is made: it reserves the
call's worst-case cost against the budget (with ``max_cost`` set; ``CostLedger.reserve``), runs the call
through the run's ``Executor`` (retries, adaptive limits, stop), records the tokens and cost the reply's
usage reports, and only then releases the reservation. Judges and the ``openai`` target both use it.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from evalgate import __version__
from evalgate.calls.capped import capped_async_client
from evalgate.calls.costs import (
    Price,
    Usage,
    cached_prompt_tokens,
    count_message_tokens,
    find_price,
    usage_from,
)
from evalgate.calls.executor import Failure, Pace, StatusError, pace_key
from evalgate.calls.http_pool import HttpPool, ReplyTooLarge
from evalgate.calls.ratelimit import PROMPT_MARGIN, PROMPT_SLACK, TokenEstimate
from evalgate.calls.runtime import Runtime

if TYPE_CHECKING:
    from evalgate.calls.providers import ProviderConfig

USER_AGENT = f"evalgate/{__version__}"
ERROR_EXCERPT_CHARS = 300


@dataclass(frozen=True, slots=True)
class Completion:
    """The reply text and, when the provider reported them, its token counts."""

    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    elapsed_ms: float | None = None
    """Milliseconds from sending the request to the reply's last byte (this attempt only)."""
    headers: Mapping[str, str] | None = field(default=None, repr=False)
    """The reply's headers (lower-case names): its ``x-ratelimit-*`` budgets pace the next calls."""
    cached_tokens: int | None = None
    """Prompt tokens the provider served from its prompt cache (``costs.cached_prompt_tokens``)."""


class ReplyError(Exception):
    """A successful HTTP status whose body is not a chat completion (e.g. an HTML page from a proxy)."""


class ChatBackend(Protocol):
    async def create(self, body: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> Completion: ...

    async def aclose(self) -> None: ...


def make_backend(kind: str, provider: ProviderConfig, *, timeout: float, concurrency: int,
                 connect_timeout: float | None = None, read_timeout: float | None = None,
                 timed: bool = False, max_reply: tuple[int, str] | None = None) -> ChatBackend:
    if kind == "openai-sdk":
        return SdkChat(provider, timeout=timeout, connect_timeout=connect_timeout, read_timeout=read_timeout,
                       max_reply=max_reply)
    return DirectChat(provider, timeout=timeout, concurrency=concurrency, connect_timeout=connect_timeout,
                      read_timeout=read_timeout, timed=timed, max_reply=max_reply)


class DirectChat:
    """Chat completions as plain JSON over HTTP."""

    def __init__(self, provider: ProviderConfig, *, timeout: float, concurrency: int,
                 connect_timeout: float | None = None, read_timeout: float | None = None, timed: bool = False,
                 max_reply: tuple[int, str] | None = None) -> None:
        self.url = f"{provider.base_url.rstrip('/')}/chat/completions"
        self.max_reply = max_reply
        """(largest reply body read in bytes, the setting that sets it): a longer reply is cut off there
        (``ReplyTooLarge``, not retried) instead of being buffered whole."""
        headers = {"Authorization": provider.authorization_header, "User-Agent": USER_AGENT,
                   "Accept": "application/json", "Content-Type": "application/json"}
        self.pool = HttpPool(timeout=timeout, concurrency=concurrency, headers=headers,
                             connect_timeout=connect_timeout, read_timeout=read_timeout, timed=timed)

    async def create(self, body: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> Completion:
        limit, setting = self.max_reply or (None, "")
        try:
            response = await self.pool.request("POST", self.url, body=json.dumps(body, ensure_ascii=False).encode(),
                                               headers=dict(headers) if headers else None, max_bytes=limit)
        except ReplyTooLarge as exc:
            raise ReplyTooLarge(f"{exc} ({setting})") from None
        if response.status >= 400:
            raise StatusError(response.status, error_message(response.body, response.reason), response.headers)
        completion = parse_completion(response.body, self.url)
        elapsed = None if response.elapsed_ms is None else round(response.elapsed_ms, 3)
        return Completion(completion.text, completion.prompt_tokens, completion.completion_tokens, elapsed,
                          headers=response.headers, cached_tokens=completion.cached_tokens)

    async def aclose(self) -> None:
        await self.pool.aclose()


def error_message(body: bytes, reason: str) -> str:
    """The provider's ``{"error": {"message": …}}`` (or ``{"error": "…"}``), else the body's start."""
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, dict):
        inner = data.get("error", data)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:ERROR_EXCERPT_CHARS]
        if isinstance(inner, str) and inner:
            return inner[:ERROR_EXCERPT_CHARS]
    text = body[:ERROR_EXCERPT_CHARS].decode("utf-8", "replace").strip()
    return text or reason


def parse_completion(body: bytes, url: str) -> Completion:
    """``choices[0].message.content`` (text parts of a list content joined) and ``usage`` of a reply body."""
    try:
        data = json.loads(body)
    except ValueError:
        excerpt = body[:80].decode("utf-8", "replace").strip()
        raise ReplyError(f"{url} replied with non-JSON ({excerpt!r})") from None
    if not isinstance(data, dict):
        raise ReplyError(f"{url} replied with JSON that is not a chat completion object")
    usage = data.get("usage")
    return Completion(choice_text(data.get("choices")), *token_counts(usage), cached_tokens=cached_prompt_tokens(usage))


def choice_text(choices: Any) -> str:
    """The first choice's message text of a chat-completions reply (text parts joined); '' when absent."""
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return ""
    message = choices[0].get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content) if content else ""


def token_counts(usage: Any) -> tuple[int | None, int | None]:
    """(prompt tokens, completion tokens) of a reply's ``usage``; both None unless both are whole numbers."""
    if not isinstance(usage, dict):
        return None, None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    valid = all(isinstance(n, int) and not isinstance(n, bool) for n in (prompt, completion))
    return (prompt, completion) if valid else (None, None)


def _observed(completion: Completion) -> tuple[Mapping[str, str] | None, int | None, int | None]:
    """(headers, total tokens, prompt tokens) of a completion for the pacer."""
    prompt, generated = completion.prompt_tokens, completion.completion_tokens
    total = prompt + generated if prompt is not None and generated is not None else None
    return completion.headers, total, prompt


class SdkChat:
    """Chat completions through the official openai SDK (imported only when chosen)."""

    def __init__(self, provider: ProviderConfig, *, timeout: float, connect_timeout: float | None = None,
                 read_timeout: float | None = None, max_reply: tuple[int, str] | None = None) -> None:
        import openai  # lazy: the openai SDK (~0.5 s) only with chat_client: openai-sdk

        limits = openai.Timeout(timeout, connect=connect_timeout, read=read_timeout if read_timeout else timeout)
        extra = {"Authorization": provider.authorization} if provider.authorization else None
        client = None
        if max_reply is not None:  # the reply body is read through a counting stream, cut at the cap
            client = capped_async_client(openai.DefaultAsyncHttpxClient(timeout=limits), *max_reply)
        self.client = openai.AsyncOpenAI(api_key=provider.api_key, base_url=provider.base_url, max_retries=0,
                                         timeout=limits, default_headers=extra, http_client=client)

    async def create(self, body: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> Completion:
        import openai  # lazy: the openai SDK (~0.5 s) only with chat_client: openai-sdk

        started = time.perf_counter()
        extra: dict[str, Any] = {"extra_headers": dict(headers)} if headers else {}
        try:
            raw = await self.client.chat.completions.with_raw_response.create(**body, **extra)
        except openai.APIConnectionError as exc:  # the SDK wraps what the capped stream raised
            if isinstance(exc.__cause__, ReplyTooLarge):
                raise exc.__cause__ from None
            raise
        elapsed = round((time.perf_counter() - started) * 1000, 3)
        headers = {k.lower(): v for k, v in raw.headers.items()}
        response = raw.parse()
        if isinstance(response, str | bytes):  # the SDK hands back a non-JSON body as it came
            excerpt = (response.decode("utf-8", "replace") if isinstance(response, bytes) else response)[:80]
            raise ReplyError(f"{self.client.base_url}chat/completions replied with non-JSON ({excerpt.strip()!r})")
        choices = getattr(response, "choices", None) or []
        message = getattr(choices[0], "message", None) if choices else None
        text = str(getattr(message, "content", None) or "")
        usage = getattr(response, "usage", None)
        dump = getattr(usage, "model_dump", None)
        counts = dump() if callable(dump) else {}
        return Completion(text, *token_counts(counts), elapsed, headers=headers, cached_tokens=cached_prompt_tokens(counts))

    async def aclose(self) -> None:
        await self.client.close()


# --- the service every judge and model target calls ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChatReply:
    text: str
    usage: Usage
    cost_usd: float | None
    latency_ms: float | None
    """The successful attempt's time from sending the request to the last byte of the reply."""


class ChatService:
    """Chat completions against one provider with budget, retries and accounting.

    The ``target`` role (a model under test, whose latency is recorded) makes its calls on the run's
    wire thread (``calls.wire``), so the run's other work does not delay their timestamps; judges call
    from the run's loop."""

    def __init__(self, provider: ProviderConfig, runtime: Runtime, *, role: str) -> None:
        self.provider = provider
        self.runtime = runtime
        self.role = role
        self.price: Price | None = find_price(provider.model, runtime.prices, self_hosted=provider.spec.self_hosted)
        policy = runtime.executor.policy
        self.backend: ChatBackend = make_backend(runtime.chat_client, provider, timeout=policy.attempt_seconds,
                                                 concurrency=runtime.executor.concurrency,
                                                 connect_timeout=policy.connect_seconds,
                                                 read_timeout=policy.read_seconds, timed=role == "target",
                                                 max_reply=runtime.reply_bytes.get(role))
        self.wire = runtime.wire if role == "target" else None
        rpm, tpm = runtime.caps.get(role, (None, None))
        self.pace_key = pace_key(provider.base_url, provider.api_key)
        self.pace_name = f"{role} {provider.name}"
        self.caps = (rpm, tpm)

    @property
    def model(self) -> str:
        return self.provider.model

    def worst_case_cost(self, messages: Sequence[Mapping[str, Any]], max_tokens: int,
                        counted: Callable[[], int] | None = None) -> float:
        """USD bound for one call: (prompt tokens · 1.1 + 16) at the input price + max_tokens at the output price
        (tokenizers differ between providers; ``counted`` gives the messages' local count if already known)."""
        if self.price is None:
            return 0.0
        local = counted() if counted is not None else count_message_tokens(messages)
        prompt = int(local * PROMPT_MARGIN) + PROMPT_SLACK
        return self.price.cost(prompt, max_tokens)

    async def complete(self, messages: Sequence[Mapping[str, Any]], params: Mapping[str, Any], *,
                       max_tokens: int, what: str,
                       headers: Mapping[str, str] | Callable[[], Mapping[str, str]] | None = None,
                       final: Callable[[Failure], bool] | None = None) -> ChatReply:
        """One chat completion under the retry policy; ``headers``: extra request headers, or a function
        called once per attempt for them (a model target's ``traceparent``, fresh on every retry); ``final``:
        failures the retry layer must not retry (``Executor.call``)."""
        ledger = self.runtime.ledger
        counted = functools.cache(lambda: count_message_tokens(messages))  # the budget and the pacer (every
        # attempt, every wait for the provider's budget) share one local count of the prompt
        reserved = await ledger.reserve(self.worst_case_cost(messages, max_tokens, counted)) \
            if ledger.max_cost is not None else 0.0
        try:
            body = {"model": self.model, "messages": list(messages), **self._limit(max_tokens), **params}
            completion: Completion = await self.runtime.executor.call(
                self.provider.name, lambda: self._create(body, headers() if callable(headers) else headers),
                what=what, pace=self.pace(messages, max_tokens, counted), final=final)
            text = completion.text
            usage = usage_from(completion.prompt_tokens, completion.completion_tokens, messages, text,
                               completion.cached_tokens)
            cost = ledger.record(self.role, usage, self.price)  # the reply's usage: before the reservation goes
        finally:
            ledger.release(reserved)
        return ChatReply(text, usage, cost, completion.elapsed_ms)

    def _create(self, body: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> Awaitable[Completion]:
        """One attempt, on the wire thread for a model under test; ``headers``: extra request headers (a
        model target's ``traceparent``)."""
        headers = headers or None
        if self.wire is not None:
            return self.wire.call(lambda: self.backend.create(body, headers))
        return self.backend.create(body, headers)

    def pace(self, messages: Sequence[Mapping[str, Any]], max_tokens: int,
             counted: Callable[[], int] | None = None) -> Pace:
        """How this call is paced (``calls.ratelimit``): its provider (base URL + key), its token estimate
        (the messages counted locally (``counted``, if given) + ``max_tokens``, computed only if the provider
        keeps a token budget) and the role's configured caps."""
        count = counted if counted is not None else (lambda: count_message_tokens(messages))
        return Pace(self.pace_key, self.pace_name,
                    estimate=lambda: TokenEstimate(count(), max_tokens),
                    observe=_observed, rpm=self.caps[0], tpm=self.caps[1])

    def _limit(self, max_tokens: int) -> dict[str, int]:
        """OpenAI's newer models take ``max_completion_tokens``; compatible servers take ``max_tokens``."""
        key = "max_completion_tokens" if self.provider.name == "openai" else "max_tokens"
        return {key: max_tokens}

    async def aclose(self) -> None:
        if self.wire is not None and self.wire.running:
            await self.wire.call(self.backend.aclose)
        else:
            await self.backend.aclose()
