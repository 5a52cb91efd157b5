"""How a judge is asked for the shape of its verdict (structured output), and which shape the server takes.

Output modes, tried in this order for each provider (``OUTPUT_MODES``):

* ``json_schema``: ``response_format: {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}``
  (OpenAI structured outputs). OpenAI, Gemini's OpenAI-compatible endpoint, vLLM and llama.cpp's C++
  ``llama-server`` take it; Ollama's ``/v1`` endpoint turns it into its native ``format`` (the schema);
* ``json_object``: ``response_format: {"type": "json_object", "schema": …}``: the shape llama-cpp-python's
  server (and llama.cpp's ``llama-server``) constrain with a grammar built from the schema;
* ``prompt``: no ``response_format``; the schema is in the prompt only (the rubric templates always show it).

``strict`` is false: the verdict schemas carry ``minimum``/``maximum`` bounds, which OpenAI's strict mode
does not accept on every model; the parser checks them anyway.

Grammar engines (llama.cpp's, which Ollama also uses) cannot bound a number: given ``{"type": "number",
"minimum": 0, "maximum": 1}`` they let a small model write ``2.5``, which the parser then rightly refuses.
For ``local`` and ``ollama`` judges every bounded number in the schema sent is therefore an ``enum`` of 21
evenly spaced values from its minimum to its maximum (``0, 0.05, …, 1`` on 0–1; ``1, 1.2, …, 5`` on 1–5),
which a grammar can enforce (``enumerated_bounds``). OpenAI and Gemini get the schema as it is.

A server that refuses a mode answers the first call sent with it with an error that names the parameter
(HTTP 400 or 422 from most servers; llama-cpp-python's server answers 500). ``OutputNegotiator`` sees that
once per run, moves to the next mode for the rest of the run and records the refusal; every call already
sent with the refused mode is resent in the new one. Until the first call has come back, judge calls wait
for it, so a refused mode costs one call, not one per call in flight. With ``judge_output`` set to a mode
(instead of ``auto``) only that mode is used and a refusal makes the verdicts unavailable.

A refusal whose message says so unmistakably (``clearly_refused``: it names ``response_format`` or
``json_schema`` and says the value is invalid, unsupported or fails validation, as llama-cpp-python's 500
``Input should be 'text' or 'json_object'`` does) is not retried: the first run's probe costs one request,
not four (≈ 2.5 s of backoff). Any other 5xx is retried as before, since it may be transient.

The mode the endpoint took is remembered in the judge cache (``store.judge_cache``, table
``judge_output_mode``, by provider, hashed endpoint and model) once a run had to move down; the next run
with ``judge_output: auto`` starts from it (``OutputNegotiator(start=...)``), so it sends no request in a
mode already refused. If that mode is refused in turn, the chain continues from there.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar

from evalgate.calls.executor import CallFailed
from evalgate.safety.redact import redact
from evalgate.store.judge_cache import RememberedMode

OutputMode = Literal["json_schema", "json_object", "prompt"]
T = TypeVar("T")

OUTPUT_MODES: dict[str, tuple[OutputMode, ...]] = {
    "openai": ("json_schema", "prompt"),
    "gemini": ("json_schema", "prompt"),
    "ollama": ("json_schema", "prompt"),
    "local": ("json_schema", "json_object", "prompt"),
}
"""Modes tried per provider with ``judge_output: auto``, first to last."""
STRUCTURED: frozenset[str] = frozenset({"json_schema", "json_object"})
REFUSAL = re.compile(r"response_format|json_schema|json_object|structured output|guided_json|grammar",
                     re.IGNORECASE)
"""What an error message says when a server refuses the structured-output parameter."""
CLEAR_FIELD = re.compile(r"response_format|json_schema", re.IGNORECASE)
CLEAR_REFUSAL = re.compile(r"validation|literal_error|input should be|not supported|unsupported|invalid|unknown|"
                           r"unrecognized|not allowed|not permitted|extra inputs|must be one of", re.IGNORECASE)
"""Together: an error message that refuses the structured-output field itself (``clearly_refused``)."""
TRANSIENT_STATUS = frozenset({408, 425, 429, 502, 503, 504})
ERROR_KEPT_CHARS = 300
ENUMERATED_BOUNDS: frozenset[str] = frozenset({"local", "ollama"})
"""Providers whose structured output is a grammar that ignores ``minimum``/``maximum`` on numbers."""
SCALE_STEPS = 20
REASONING_MAX_CHARS = 300
"""Grammar-enforced cap on the ``reasoning`` string (local and Ollama judges): 2–3 short sentences, and the verdict
stays inside ``client.JUDGE_MAX_TOKENS`` (a verdict cut at the cap is unreadable)."""


def modes_for(provider: str, setting: str = "auto") -> tuple[OutputMode, ...]:
    """The modes to try: the provider's chain for ``auto``, else only the mode asked for."""
    if setting == "auto":
        return OUTPUT_MODES.get(provider, ("json_schema", "prompt"))
    if setting not in ("json_schema", "json_object", "prompt"):
        raise ValueError(f"unknown judge output mode {setting!r}")
    return (setting,)  # type: ignore[return-value]


def response_format(mode: OutputMode, name: str, schema: dict[str, Any]) -> dict[str, Any] | None:
    """The ``response_format`` request field for ``mode`` (None in prompt mode)."""
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": False}}
    if mode == "json_object":
        return {"type": "json_object", "schema": schema}
    return None


def schema_for(provider: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The verdict schema as sent to ``provider``: without ``title``/``description`` annotations (prompt
    tokens that constrain nothing); where a grammar enforces it, bounded numbers enumerated and the
    reasoning capped at ``REASONING_MAX_CHARS``."""
    schema = lean_schema(schema)
    if provider in ENUMERATED_BOUNDS:
        schema = enumerated_bounds(schema)
        reasoning = schema.get("properties", {}).get("reasoning")
        if isinstance(reasoning, dict) and reasoning.get("type") == "string":
            reasoning["maxLength"] = REASONING_MAX_CHARS
    return schema


ANNOTATIONS = frozenset({"title", "description"})


def lean_schema(node: Any) -> Any:
    """``node`` without the annotation keywords ``title`` and ``description`` (a property *named* title
    stays: the keys of ``properties`` are names, not keywords)."""
    if isinstance(node, list):
        return [lean_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    kept: dict[str, Any] = {}
    for key, value in node.items():
        if key in ANNOTATIONS and isinstance(value, str):
            continue
        if key == "properties" and isinstance(value, dict):
            kept[key] = {name: lean_schema(sub) for name, sub in value.items()}
        else:
            kept[key] = lean_schema(value)
    return kept


def enumerated_bounds(node: Any) -> Any:
    """``node`` with every ``{"type": "number", "minimum": a, "maximum": b}`` replaced by the same number
    restricted to ``SCALE_STEPS + 1`` evenly spaced values a, a + (b − a)/20, …, b (rounded to 6 places)."""
    if isinstance(node, list):
        return [enumerated_bounds(item) for item in node]
    if not isinstance(node, dict):
        return node
    bounds = node.get("minimum"), node.get("maximum")
    if node.get("type") == "number" and isinstance(bounds[0], int | float) and isinstance(bounds[1], int | float) \
            and not isinstance(bounds[0], bool) and not isinstance(bounds[1], bool) and bounds[0] < bounds[1]:
        low, high = float(bounds[0]), float(bounds[1])
        steps = [round(low + (high - low) * k / SCALE_STEPS, 6) for k in range(SCALE_STEPS + 1)]
        kept = {k: v for k, v in node.items() if k not in ("minimum", "maximum")}
        return {**kept, "enum": [int(v) if float(v).is_integer() else v for v in steps]}
    return {key: enumerated_bounds(value) for key, value in node.items()}


def is_refusal(mode: OutputMode, exc: CallFailed) -> bool:
    """True when a call sent in a structured ``mode`` failed because the server refused that parameter: an
    HTTP error (4xx or 5xx) whose message names response_format / json_schema / json_object / a grammar."""
    return mode in STRUCTURED and exc.status is not None and exc.status >= 400 and REFUSAL.search(str(exc)) is not None


def clearly_refused(mode: OutputMode, status: int | None, message: str) -> bool:
    """True when a failed attempt in a structured ``mode`` is certainly the server refusing that parameter, so
    retrying cannot help: an HTTP error other than the transient ones (408, 425, 429, 502–504) whose message
    names ``response_format``/``json_schema`` and says it is invalid, unsupported or fails validation."""
    return (mode in STRUCTURED and status is not None and status >= 400 and status not in TRANSIENT_STATUS
            and CLEAR_FIELD.search(message) is not None and CLEAR_REFUSAL.search(message) is not None)


class OutputNegotiator:
    """The run's current output mode for one judge, moved down the chain once per refused mode."""

    def __init__(self, modes: tuple[OutputMode, ...], *, forced: bool = False,
                 start: RememberedMode | None = None) -> None:
        """``start``: the mode an earlier run learnt this endpoint takes (ignored when forced or not in
        ``modes``): the run begins there."""
        if not modes:
            raise ValueError("at least one output mode is needed")
        self.modes = modes
        self.forced = forced
        self._index = 0
        self.remembered: RememberedMode | None = None
        if start is not None and not forced and start.mode in modes:
            self._index = modes.index(start.mode)
            self.remembered = start
        self.learnt: tuple[OutputMode, tuple[str, ...]] | None = None
        """(mode, refused modes) once this run moved down the chain and a call succeeded: to remember."""
        self._settled = False
        self._lock: asyncio.Lock | None = None
        self.refused: list[dict[str, Any]] = []
        self.used: Counter[str] = Counter()
        """Calls answered per mode."""

    @property
    def mode(self) -> OutputMode:
        return self.modes[self._index]

    async def run(self, send: Callable[[OutputMode], Awaitable[T]]) -> tuple[T, OutputMode]:
        """``await send(mode)`` in the current mode; on a refusal of that mode, once more in the next one.
        Raises what ``send`` raises otherwise (``CallFailed``, ``CallCancelled`` …)."""
        while True:
            if not self._settled:
                if self._lock is None:
                    self._lock = asyncio.Lock()
                async with self._lock:
                    if not self._settled:  # this call is the probe: the others wait for its outcome
                        outcome = await self._try(send)
                        if outcome is not None:
                            return outcome
                        continue
            outcome = await self._try(send)
            if outcome is not None:
                return outcome

    async def _try(self, send: Callable[[OutputMode], Awaitable[T]]) -> tuple[T, OutputMode] | None:
        mode = self.mode
        try:
            result = await send(mode)
        except CallFailed as exc:
            if self._refused(mode, exc):
                return None
            self._settled = True  # a failure that says nothing about the format: stop probing
            raise
        self._settled = True
        self.used[mode] += 1
        if self.refused and self.learnt is None:
            earlier = self.remembered.refused if self.remembered is not None else ()
            self.learnt = (mode, tuple(dict.fromkeys([*earlier, *(r["mode"] for r in self.refused)])))
        return result, mode

    def _refused(self, mode: OutputMode, exc: CallFailed) -> bool:
        """Record a refusal of ``mode`` and move on; False when the call's failure is not one (or there is
        no mode left to move to)."""
        if self.forced or not is_refusal(mode, exc):
            return False
        if mode != self.mode:
            return True  # another call already moved past ``mode``: resend in the current one
        if self._index + 1 >= len(self.modes):
            return False
        self.refused.append({"mode": mode, "status": exc.status,
                             "error": redact(str(exc))[:ERROR_KEPT_CHARS]})
        self._index += 1
        return True

    def metadata(self) -> dict[str, Any]:
        """For ``metadata.judge.output``: the mode in use at the end, the modes tried, refusals, calls per mode."""
        return {"mode": self.mode, "modes": list(self.modes), "forced": self.forced, "refused": list(self.refused),
                "calls": dict(sorted(self.used.items())),
                **({"remembered": self.remembered.as_dict()} if self.remembered is not None else {})}
