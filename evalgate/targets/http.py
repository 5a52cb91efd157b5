"""The ``http`` target: one request per case to ``target_url`` (``EVALGATE_TARGET_URL``).

Request body: without ``target_body_template``, ``{"message": input, **context}``, unless a dialect gives
the case a body of its own (``evalgate.dialect.request_body``: e.g. an extractor's case, which has no input,
sends the text to analyse), where context is ``eval_context`` (``EVALGATE_EVAL_*`` variables) overlaid with
the case's own context fields (those the dialects name, then ``language``), each sent under the name its
dialect spells it (``evalgate.dialect.request_name``). With a template, the jinja2 template renders the
JSON body from ``input``, ``id``, ``category``, ``context`` (the merged context) and ``case`` (every case
field); use ``| tojson`` for values, e.g. ``{"query": {{ input | tojson }}}``. GET and HEAD
send the top-level payload fields as query parameters instead of a body.

Headers come from ``target_headers``; ``${NAME}`` in a value is replaced by environment variable NAME
(missing → ``UserError`` at startup) and the value is registered as a secret. The reply is read with
``targets.mapping.ResponseMap`` as ``target_response_format`` says: ``auto`` (default) reads JSON when
the body parses and takes any other body as the answer text, except that a body whose Content-Type says
JSON (``application/json``, ``*/*+json``, ``text/json``) must parse: an HTML page, an invalid or a cut JSON
body is a failed attempt, retried like a 5xx (``MalformedReply``), never an answer; ``json`` requires JSON
whatever the Content-Type; ``text`` never parses (the body is the answer). A reply needs answer text
unless it carries an extraction (``mentions`` / ``ranked_list``, an extractor's reply). The body read is at
most ``REPLY_BYTES_PER_ANSWER_CHAR × max_answer_chars`` bytes (``ReplyTooLarge``, not retried). Latency is
the time of the attempt that succeeded, in milliseconds: from writing the request on a ready connection (connection
set-up, call-slot waits, retries and backoff excluded) to the last byte of the reply, timed on the run's
wire thread (``calls.wire``) so that scoring and judging in the same process do not inflate it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pydantic import ValidationError

from evalgate.calls.executor import CallFailed, MalformedReply, Pace, StatusError, pace_key
from evalgate.calls.http_pool import HttpPool, Reply
from evalgate.calls.runtime import Runtime
from evalgate.config.settings import DEFAULT_MAX_ANSWER_CHARS
from evalgate.dialect import field_value, request_body, request_context_fields, request_name
from evalgate.errors import UserError
from evalgate.model import Answer
from evalgate.safety.redact import is_secret_header, redact, register_secret, split_credentials
from evalgate.targets.mapping import ResponseMap
from evalgate.traces.context import attempt_headers

if TYPE_CHECKING:
    import jinja2

    from evalgate.config.settings import Settings
    from evalgate.model import Case
    from evalgate.targets.base import TargetCall

ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
CASE_CONTEXT_FIELDS = ("language",)
"""Case fields every request's context carries when set (after the dialects' ``request_context`` fields)."""
QUERY_METHODS = frozenset({"GET", "HEAD"})
ERROR_BODY_CHARS = 300
PROVIDER = "target"
JSON_BODY = {"Content-Type": "application/json"}
REPLY_BYTES_PER_ANSWER_CHAR = 16
"""Reply bytes read per character of ``max_answer_chars`` (JSON escapes and wrapping take room)."""
TEXT: Any = object()
"""``_send``'s marker for a reply read as text (not JSON)."""


def declares_json(content_type: str | None) -> bool:
    """True for ``application/json``, ``application/<x>+json`` and ``text/json`` (parameters ignored)."""
    kind = (content_type or "").split(";", 1)[0].strip().lower()
    return kind in ("application/json", "text/json") or (kind.startswith("application/") and kind.endswith("+json"))


def substitute_env(value: str, env: Mapping[str, str], where: str) -> str:
    """Replace every ``${NAME}`` with ``env[NAME]``; the substituted values are registered as secrets."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in env:
            raise UserError(f"environment variable {name} is not set", where=where)
        register_secret(env[name])
        return env[name]

    return ENV_REFERENCE.sub(replace, value)


def resolve_headers(headers: Mapping[str, str], env: Mapping[str, str]) -> dict[str, str]:
    """Headers with ``${NAME}`` substituted; values of credential-like headers (Authorization, X-API-Key,
    cookies, tokens) are registered as secrets even when written literally, so they are masked in output."""
    resolved = {name: substitute_env(str(value), env, f"target_headers.{name}") for name, value in headers.items()}
    for name, value in resolved.items():
        if is_secret_header(name):
            register_secret(value)
            register_secret(value.partition(" ")[2].strip())  # the credential after "Bearer " / "Basic "
    return resolved


def case_context(case: Case, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """``eval_context`` defaults overlaid with the case's own context fields, each key under the name its
    dialect spells it (``evalgate.dialect.request_name``)."""
    merged = dict(defaults)
    for name in (*request_context_fields(), *CASE_CONTEXT_FIELDS):
        value = field_value(case, name)
        if value is not None:
            merged[name] = value
    return {request_name(key): value for key, value in merged.items()}


BODY_VARIABLES = frozenset({"input", "id", "category", "context", "case", "messages", "turn", "conversation_id"})


def compile_template(source: str, variables: frozenset[str], where: str) -> jinja2.Template:
    """A jinja2 template that may only use ``variables``; syntax errors, unknown names and any attribute or key
    starting with ``_`` are ``UserError`` at startup rather than an error on every case. The template renders in
    jinja2's sandbox: it comes from a file the pull request may write, and an ordinary environment lets
    ``input.__class__.__mro__…`` reach ``os.environ`` (every secret) and run code. (jinja2 is imported here: a
    target without a template never loads it.)"""
    import jinja2  # lazy: jinja2 (~25 ms) only for a target with a template
    import jinja2.meta  # lazy: jinja2 (~25 ms) only for a target with a template
    import jinja2.nodes  # lazy: jinja2 (~25 ms) only for a target with a template
    from jinja2.sandbox import SandboxedEnvironment  # lazy: jinja2 (~25 ms) only for a target with a template

    env = SandboxedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False)
    env.filters["tojson"] = _tojson
    try:
        parsed = env.parse(source)
        unknown = jinja2.meta.find_undeclared_variables(parsed) - variables
        template = env.from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        raise UserError(f"invalid jinja2 template: {exc.message} (line {exc.lineno})", where=where) from None
    if unknown:
        raise UserError(f"unknown template variable(s) {', '.join(sorted(unknown))}; available: "
                        f"{', '.join(sorted(variables))}", where=where)
    private = [node.attr for node in parsed.find_all(jinja2.nodes.Getattr) if node.attr.startswith("_")]
    private += [str(node.arg.value) for node in parsed.find_all(jinja2.nodes.Getitem)
                if isinstance(node.arg, jinja2.nodes.Const) and str(node.arg.value).startswith("_")]
    if private:
        raise UserError(f"the template reads {private[0]!r}: names starting with _ are not available (a template "
                        "renders the case's data; it runs no code)", where=where)
    return template


def _tojson(value: Any) -> str:
    """JSON text of ``value``; an undefined value fails with jinja2's message naming it."""
    import jinja2  # lazy: jinja2 (~25 ms) only for a target with a template

    if isinstance(value, jinja2.Undefined):
        value._fail_with_undefined_error()
    return json.dumps(value, ensure_ascii=False)


class HttpTarget:
    kind = "http"
    calls_bounded = True
    """Whether the run's bound on calls in flight covers this target (every request goes through the run's Executor)."""

    def __init__(self, *, url: str, runtime: Runtime, method: str = "POST", headers: Mapping[str, str] | None = None,
                 body_template: str | None = None, response_map: Mapping[str, str] | None = None,
                 eval_context: Mapping[str, Any] | None = None, env: Mapping[str, str],
                 response_format: str = "auto", max_answer_chars: int = DEFAULT_MAX_ANSWER_CHARS,
                 conversation: Conversation | None = None) -> None:
        url, authorization = split_credentials(url)
        if not url.startswith(("http://", "https://")):
            raise UserError(f"target_url must be an http:// or https:// URL, got {redact(url)!r}", where="target_url")
        self.url = url
        self.method = method.upper()
        self.runtime = runtime
        self.headers = resolve_headers(headers or {}, env)
        if authorization is not None:  # user:password@ in the URL: sent as the Authorization header
            if any(name.lower() == "authorization" for name in self.headers):
                raise UserError("target_url carries credentials (user:password@) and target_headers sets "
                                "Authorization too: give only one of them", where="target_url")
            self.headers["Authorization"] = authorization
        self.template = (compile_template(body_template, BODY_VARIABLES, "target_body_template")
                         if body_template else None)
        self.response_map = ResponseMap.build(response_map)
        self.eval_context = dict(eval_context or {})
        self.response_format = response_format
        self.conversation = conversation or Conversation()
        self.max_reply_bytes = REPLY_BYTES_PER_ANSWER_CHAR * max_answer_chars
        policy = runtime.executor.policy
        self.pool = HttpPool(timeout=policy.attempt_seconds, connect_timeout=policy.connect_seconds,
                             read_timeout=policy.read_seconds, concurrency=runtime.executor.concurrency,
                             headers=self.headers, follow_redirects=True, wire=runtime.wire, timed=True)
        rpm, tpm = runtime.caps.get("target", (None, None))
        origin = urlsplit(url)
        credentials = json.dumps(sorted(self.headers.items()))  # requests with other keys are another budget
        self.pace = Pace(pace_key(f"{origin.scheme}://{origin.netloc}", credentials), "target", observe=_observed,
                         rpm=rpm, tpm=tpm)

    @classmethod
    def from_settings(cls, settings: Settings, runtime: Runtime, env: Mapping[str, str]) -> HttpTarget:
        if not settings.target_url:
            raise UserError("target 'http' needs target_url (EVALGATE_TARGET_URL)", where="target_url")
        return cls(url=settings.credentialed_url("target_url") or settings.target_url, runtime=runtime,
                   method=settings.target_method,
                   headers=settings.target_headers, body_template=settings.target_body_template,
                   response_map=settings.target_response_map, eval_context=settings.eval_context, env=env,
                   response_format=settings.target_response_format, max_answer_chars=settings.max_answer_chars,
                   conversation=Conversation(mode=settings.target_conversation,
                                             history_field=settings.target_history_field,
                                             id_field=settings.target_conversation_id_field,
                                             id_header=settings.target_conversation_id_header,
                                             id_from=settings.target_conversation_id_from))

    def payload(self, case: Case, call: TargetCall | None = None) -> Any:
        """The request payload for ``case`` (a JSON value); a conversation's turn adds its history or
        conversation id as ``target_conversation`` says."""
        context = case_context(case, self.eval_context)
        turn = call is not None and call.messages is not None
        if self.template is None and turn:
            assert call is not None and call.messages is not None
            body: dict[str, Any] = {"message": case.input or "", **context}
            conversation = self.conversation
            if conversation.mode == "history":
                body[conversation.history_field] = call.messages
            elif call.conversation_id is not None and conversation.id_field:
                body[conversation.id_field] = call.conversation_id
            return body
        if self.template is None:
            return request_body(case, context) or {"message": case.input or "", **context}
        import jinja2  # lazy: jinja2 (~25 ms) only for a target with a template (loaded already: the template was compiled with it)

        try:
            text = self.template.render(input=case.input or "", id=case.id, category=case.category,
                                        context=context, case=case.model_dump(mode="json", exclude_none=True),
                                        messages=call.messages if call is not None else None,
                                        turn=call.turn if call is not None else None,
                                        conversation_id=call.conversation_id if call is not None else None)
        except jinja2.TemplateError as exc:
            raise ValueError(str(exc)) from None
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"target_body_template rendered invalid JSON ({exc.msg} at column {exc.colno}); "
                             "use | tojson for values") from None

    async def answer(self, case: Case, call: TargetCall | None = None) -> Answer:
        try:
            payload = self.payload(case, call)
        except (ValueError, TypeError) as exc:  # template problems arrive as ValueError
            return Answer(error=f"request body: {exc}")
        # the call's own headers, and a fresh W3C traceparent per attempt (each retry, each turn) when the run
        # receives traces: a failed attempt's spans are then never the answer's (traces.context.attempt_headers)
        own = self.call_headers(call) or {}
        traced = attempt_headers()

        def attempt() -> Awaitable[tuple[Reply, float, Any]]:
            return self._send(payload, {**own, **traced()} or None)

        try:
            response, latency, data = await self.runtime.executor.call(
                PROVIDER, attempt, what=f"{self.method} {self.url}", pace=self.pace)
        except CallFailed as exc:
            return Answer(error=redact(str(exc)))
        if call is not None and data is not TEXT:
            call.reply = data
        return self._read(response, latency, data)

    def call_headers(self, call: TargetCall | None) -> dict[str, str] | None:
        """Headers of this call besides the target's own: the call's (a trace context) and the conversation
        id when ``target_conversation_id_header`` names one."""
        if call is None:
            return None
        headers = dict(call.headers)
        if call.conversation_id is not None and self.conversation.mode == "id" and self.conversation.id_header:
            headers[self.conversation.id_header] = call.conversation_id
        return headers or None

    async def _send(self, payload: Any, extra: Mapping[str, str] | None = None) -> tuple[Reply, float, Any]:
        """One attempt: the reply, its latency (ms) and its JSON value (``TEXT`` when read as text)."""
        if self.method in QUERY_METHODS:
            params = payload if isinstance(payload, dict) else {}
            response = await self.pool.request(self.method, self.url, params=params, max_bytes=self.max_reply_bytes,
                                               headers=extra)
        else:
            body = json.dumps(payload, ensure_ascii=False).encode()
            response = await self.pool.request(self.method, self.url, body=body,
                                               headers={**JSON_BODY, **extra} if extra else JSON_BODY,
                                               max_bytes=self.max_reply_bytes)
        latency = response.elapsed_ms if response.elapsed_ms is not None else 0.0
        if response.status >= 400:
            excerpt = _excerpt(response.text_start(ERROR_BODY_CHARS * 4).strip(), ERROR_BODY_CHARS)
            raise StatusError(response.status, excerpt or response.reason, response.headers)
        return response, latency, self._parse(response)

    def _parse(self, response: Reply) -> Any:
        """The reply's JSON value per ``response_format``; ``MalformedReply`` when it must be JSON and is not."""
        if self.response_format == "text":
            return TEXT
        content_type = response.headers.get("content-type")
        required = self.response_format == "json" or declares_json(content_type)
        try:
            return response.json()
        except (ValueError, RecursionError) as exc:
            if not required:
                return TEXT
            why = f"{exc.msg} at line {exc.lineno} column {exc.colno}" if isinstance(exc, json.JSONDecodeError) \
                else type(exc).__name__
            said = f"Content-Type {content_type}" if declares_json(content_type) else "target_response_format json"
            raise MalformedReply(response.status, f"{said} but the body is not JSON ({why}; "
                                 f"{len(response.body):,} bytes starting {_excerpt(response.text_start(200))!r}); "
                                 "set target_response_format: text if the agent answers in plain text") from None

    def _read(self, response: Reply, latency_ms: float, data: Any) -> Answer:
        if data is TEXT:
            return Answer(output=response.text, latency_ms=round(latency_ms, 3))
        try:
            fields = self.response_map.apply(data)
            answer = Answer(**fields, latency_ms=round(latency_ms, 3))
        except (ValueError, ValidationError) as exc:
            return Answer(error=redact(f"unexpected reply from {self.url}: {_first_line(exc)}"))
        if answer.output is None and answer.mentions is None and answer.ranked_list is None:
            paths = self.response_map.describe().get("output", "")
            return Answer(error=f"the reply from {self.url} has no answer text at {paths or '(no path)'}")
        return answer

    async def aclose(self) -> None:
        await self.pool.aclose()

    def describe(self) -> dict[str, object]:
        return {"kind": self.kind, "url": self.url, "method": self.method, "headers": sorted(self.headers),
                "body_template": self.template is not None, "response_map": self.response_map.describe(),
                "conversation": self.conversation.mode}


@dataclass(frozen=True, slots=True)
class Conversation:
    """How the http target carries a conversation's turns (settings ``target_conversation`` …)."""

    mode: str = "history"
    """``history``: the messages so far in ``history_field``; ``id``: the conversation id only."""
    history_field: str = "messages"
    id_field: str | None = "conversation_id"
    id_header: str | None = None
    id_from: str | None = None
    """Dotted path of the conversation id in the agent's first JSON reply (then none is sent on turn 1)."""


def _excerpt(text: str, limit: int = 80) -> str:
    """The start of a reply for a message: redacted first (a secret cut in half is still found), then
    cut to ``limit`` characters."""
    text = redact(text)
    return text if len(text) <= limit else text[:limit] + "…"


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _observed(sent: tuple[Reply, float, Any]) -> tuple[Mapping[str, str], None, None]:
    """The reply's headers for the pacer (an agent reports no token usage)."""
    return sent[0].headers, None, None
