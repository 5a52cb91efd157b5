"""Judge prompts: one jinja2 template per judged metric (``templates/*.j2``), its verdict schema and how
the verdict becomes the metric's value.

Untrusted text (case input, the answer, retrieved context, tool/agent lists, reference text) is placed
between fence lines::

    <<<UNTRUSTED answer id=3f2a1c9b0d4e5f60>>>
    …text…
    <<<END id=3f2a1c9b0d4e5f60 UNTRUSTED>>>

The id is the first 12 hex digits (48 bits) of sha256(label + text), which text cannot contain about itself
(and which stays the same for the same text, so judge replies can be cached). The closing line carries the id
only: the id already names the label (it is derived from it), so repeating the label would add tokens, not a
lock. Text cannot forge a fence
line either, not even one that only *looks* like one to a lenient reader (``neutralise``): every run of
angle brackets that reads as ``<<<`` or ``>>>`` — ASCII, full-width (``＜``) or small (``﹤``) forms, angle
quotation marks and other look-alikes, with or without whitespace or invisible characters between them —
is shown as ``(3×<)`` / ``(3×>)``.

The rubric steps are written in the templates, fixed per suite and never regenerated per case; each
template's version is ``name@`` + 12 hex digits of sha256 over its source and every template it extends
or includes, and is stored with every judged result and in the run's metadata.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import jinja2
import jinja2.meta
from pydantic import BaseModel, Field

from evalgate.dialect import prompt_text
from evalgate.judges.parse import VerdictError, schema_of
from evalgate.metrics.judged import context_of

if TYPE_CHECKING:
    from evalgate.model import Answer, Case

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"
SYSTEM_TEMPLATE = "_system.j2"
REPAIR_TEMPLATE = "repair.j2"
FENCE_OPEN = "<<<UNTRUSTED {label} id={tag}>>>"
FENCE_CLOSE = "<<<END id={tag} UNTRUSTED>>>"
EMPTY_TEXT = "(empty)"
FENCE_ID_HEX = 12
"""Hex digits of the fence id: 48 bits no text can match about itself by chance; ``neutralise`` already keeps
any text from writing a fence line, so the id is the second lock, not the only one."""


# --- verdict schemas (reasoning first, scores last) ------------------------------------------------


UnitScore = Annotated[float, Field(ge=0.0, le=1.0)]
"""A score in [0, 1] (its JSON schema: ``minimum`` 0, ``maximum`` 1)."""


class ScoreVerdict(BaseModel):
    reasoning: str
    score: UnitScore


class FivePointVerdict(BaseModel):
    reasoning: str
    score: float = Field(ge=1.0, le=5.0)


class OverallVerdict(BaseModel):
    """The ``judge_score`` template's output: an overall score with its parts."""

    reasoning: str
    accuracy: UnitScore
    completeness: UnitScore
    relevance: UnitScore
    overall_score: UnitScore


class QualityVerdict(BaseModel):
    """The quality template's three scores (answer_quality, factual_correctness, completeness)."""

    reasoning: str
    answer_quality: UnitScore
    factual_correctness: UnitScore
    completeness: UnitScore


class Claim(BaseModel):
    claim: str
    verdict: Literal["supported", "unsupported", "contradicted"]


class ClaimsVerdict(BaseModel):
    reasoning: str
    claims: list[Claim]


class ChunkRelevance(BaseModel):
    chunk: int = Field(ge=1)
    relevant: bool


class PrecisionVerdict(BaseModel):
    reasoning: str
    chunks: list[ChunkRelevance]


class Statement(BaseModel):
    statement: str
    attributable: bool


class RecallVerdict(BaseModel):
    reasoning: str
    statements: list[Statement]


class StepsVerdict(BaseModel):
    """Evaluation steps written by the judge from a custom metric's criteria (once per criteria text)."""

    reasoning: str
    steps: list[str] = Field(min_length=1, max_length=20)


# --- what a template sees ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PromptInputs:
    """Everything a judge template may show, taken from the case and the answer."""

    input: str
    answer: str
    reference: str
    summary: str
    criteria: str
    answer_criteria: str
    context: tuple[str, ...]
    sources: tuple[str, ...]
    tools_used: tuple[str, ...]
    agents_called: tuple[str, ...]
    expected_tools: tuple[str, ...]
    expected_sources: tuple[str, ...]
    keywords: tuple[str, ...]
    language: str
    category: str
    rubric: str = ""
    """A rubric the suite configured for this metric (a dialect's ``llm_judge.rubric``), shown in place of the
    template's fixed one; configuration, not untrusted text."""

    @classmethod
    def of(cls, case: Case, answer: Answer, rubric: str | None = None) -> PromptInputs:
        return cls(
            input=case.input or "",
            answer=answer.output or "",
            reference=case.expected_output or "",
            summary=prompt_text(case, "summary"),
            criteria=case.criteria or "",
            answer_criteria=case.expected_answer_criteria or "",
            context=tuple(context_of(case, answer)),
            sources=tuple(answer.sources or ()),
            tools_used=tuple(answer.tools_used or ()),
            agents_called=tuple(answer.agents_called or ()),
            expected_tools=tuple(case.tools_should_include or ()),
            expected_sources=tuple(case.expected_sources or ()),
            keywords=tuple(case.expected_keywords or ()),
            language=case.language or "",
            category=case.category or "",
            rubric=(rubric or "").strip(),
        )

    def variables(self) -> dict[str, Any]:
        values = {name: getattr(self, name) for name in self.__slots__}
        return {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}


# --- fencing ----------------------------------------------------------------------------------------


_LT = "<\uff1c\ufe64\u2039\u2329\u27e8\u3008\u276c\u276e\u2770\u02c2\u02f1\u1438\u227a\u22d6\u29fc\u2991\ufe3f"
"""``<`` and what reads like it: full-width and small forms (NFKC ``<``), single angle quotation mark,
angle brackets (technical, mathematical, CJK, ornamental, dotted, vertical), modifier and syllabic
arrowheads, precedes."""
_GT = ">\uff1e\ufe65\u203a\u232a\u27e9\u3009\u276d\u276f\u2771\u02c3\u02f2\u1433\u227b\u22d7\u29fd\u2992\ufe40\u2e16"
_SHOWN = {**dict.fromkeys("\u00ab\u300a\u226a\u22d8\u2aa1\u00bb\u300b\u226b\u22d9\u2aa2\u27ea\u27eb\ufe3d\ufe3e", 2),
          **dict.fromkeys("\u2af7\u2af8", 3)}
"""Single characters that read as two or three brackets: « 《 ≪ ⋘ ⪡ ⟪ …, ⫷ ⫸."""
_LT_MANY = "\u00ab\u300a\u226a\u22d8\u2aa1\u27ea\ufe3d\u2af7"
_GT_MANY = "\u00bb\u300b\u226b\u22d9\u2aa2\u27eb\ufe3e\u2af8"
_GAP = ("[\\s\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064"
        "\u2066-\u206f\u3164\ufeff\uffa0\U000e0000-\U000e007f\u0300-\u036f]")
"""Whitespace, invisible characters (format controls, tag characters) and combining marks: what a
reader skips between brackets."""
_RUNS = {
    "<": re.compile(f"[{_LT}{_LT_MANY}](?:{_GAP}*[{_LT}{_LT_MANY}])+"),
    ">": re.compile(f"[{_GT}{_GT_MANY}](?:{_GAP}*[{_GT}{_GT_MANY}])+"),
}
_TRIPLES = {"<": re.compile("\u2af7"), ">": re.compile("\u2af8")}
_TAGS = {point: (chr(point - 0xE0000) if 0xE0020 <= point <= 0xE007E else None) for point in range(0xE0000, 0xE0080)}
_TAG_CHAR = re.compile("[\U000e0000-\U000e007f]")
"""Unicode tag characters (U+E0000–U+E007F) are invisible, yet a model reads them: text hidden in them
("ASCII smuggling") is shown as the ASCII it spells, other tags are dropped."""
"""⫷ and ⫸ on their own (a run of one character is replaced only when it shows three)."""


def neutralise(text: str) -> str:
    """Replace every run of angle brackets that could read as a fence's ``<<<`` or ``>>>`` with
    ``(N×<)`` / ``(N×>)``, N being the brackets it shows (« and 《 count two, ⫷ three).

    A run is brackets of one direction, each ``<``/``>`` or a look-alike, separated by nothing but
    whitespace, invisible characters or combining marks. It is replaced when it shows three or more
    brackets, or two written with two characters other than the plain ASCII ``<<`` / ``>>`` (shift
    operators and heredocs keep their spelling, and so does a lone guillemet « of French or German text):
    so ``<<<``, ``< < <``, ``＜＜＜``, ``<\u200b<<``, ``«<`` and ``⫷`` all become ``(3×<)``. What is left
    shows at most two brackets in a row, so no text can close its fence or open another, however leniently
    read. Text hidden in Unicode tag characters is first shown as the ASCII it spells."""
    if _TAG_CHAR.search(text):
        text = text.translate(_TAGS)
    for sign, pattern in _RUNS.items():

        def replace(match: re.Match[str], sign: str = sign) -> str:
            run = match.group(0)
            shown = sum(_SHOWN.get(ch, 1) for ch in run if not _is_gap(ch))
            if shown == 2 and run in ("<<", ">>"):
                return run
            return f"({shown}×{sign})"

        text = pattern.sub(replace, text)
        text = _TRIPLES[sign].sub(f"(3×{sign})", text)
    return text


_GAP_CHAR = re.compile(_GAP)


def _is_gap(char: str) -> bool:
    return _GAP_CHAR.fullmatch(char) is not None


def fence(label: str, text: str | None) -> str:
    """``text`` between fence lines whose id is derived from the label and the text."""
    body = neutralise(text if text else EMPTY_TEXT)
    tag = hashlib.sha256(f"{label}\x00{body}".encode()).hexdigest()[:FENCE_ID_HEX]
    return "\n".join((FENCE_OPEN.format(label=label, tag=tag), body, FENCE_CLOSE.format(tag=tag)))


# --- values from verdicts -----------------------------------------------------------------------------

Values = dict[str, float]


def _score(name: str) -> Callable[[Any, PromptInputs], Values]:
    def values(verdict: Any, inputs: PromptInputs) -> Values:
        return {name: float(verdict.score)}

    return values


def _overall(verdict: OverallVerdict, inputs: PromptInputs) -> Values:
    return {"judge_score": verdict.overall_score, "accuracy": verdict.accuracy,
            "completeness": verdict.completeness, "relevance": verdict.relevance}


def _quality(verdict: QualityVerdict, inputs: PromptInputs) -> Values:
    return {"answer_quality": verdict.answer_quality, "factual_correctness": verdict.factual_correctness,
            "completeness": verdict.completeness}


def faithfulness_value(verdict: ClaimsVerdict, inputs: PromptInputs | None = None) -> Values:
    """(claims not contradicted by the context) / claims; 1.0 when the answer makes no claim."""
    claims = verdict.claims
    if not claims:
        return {"faithfulness": 1.0}
    faithful = sum(1 for claim in claims if claim.verdict != "contradicted")
    return {"faithfulness": faithful / len(claims)}


def context_precision_value(verdict: PrecisionVerdict, inputs: PromptInputs) -> Values:
    """Rank-weighted precision: (1/R) · Σ_k rel_k · (relevant in top k)/k over the chunks in retrieval
    order, R = number of relevant chunks; 0.0 when no chunk is relevant. Needs one verdict per chunk."""
    expected = len(inputs.context)
    numbers = sorted(item.chunk for item in verdict.chunks)
    if numbers != list(range(1, expected + 1)):
        raise VerdictError(f"expected one verdict for each of the {expected} chunks, numbered 1..{expected}",
                           json.dumps(verdict.model_dump()))
    relevant = [item.relevant for item in sorted(verdict.chunks, key=lambda item: item.chunk)]
    total, hits = 0.0, 0
    for rank, is_relevant in enumerate(relevant, start=1):
        if is_relevant:
            hits += 1
            total += hits / rank
    return {"context_precision": total / hits if hits else 0.0}


def context_recall_value(verdict: RecallVerdict, inputs: PromptInputs | None = None) -> Values:
    """attributable statements / statements of the expected output; 1.0 when it states nothing."""
    statements = verdict.statements
    if not statements:
        return {"context_recall": 1.0}
    return {"context_recall": sum(1 for s in statements if s.attributable) / len(statements)}


def _details_of(verdict: BaseModel) -> dict[str, Any]:
    data = verdict.model_dump()
    data.pop("reasoning", None)
    return {k: v for k, v in data.items() if isinstance(v, list)}


# --- the templates ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JudgeTemplate:
    """One judge prompt: template file, verdict schema, value function and value range."""

    name: str
    verdict: type[BaseModel]
    values: Callable[[Any, PromptInputs], Values]
    value_range: tuple[float, float] = (0.0, 1.0)

    @property
    def file(self) -> str:
        return f"{self.name}.j2"

    def render(self, case: Case, answer: Answer) -> RenderedPrompt:
        """The messages of one judge call on ``case`` and ``answer``."""
        return render_inputs(self, PromptInputs.of(case, answer))


GEVAL_METRICS = ("math", "safety", "relevancy", "groundedness", "policy", "localization", "actionability",
                 "correctness", "tool_calling")

TEMPLATES: dict[str, JudgeTemplate] = {
    "judge_score": JudgeTemplate("judge_score", OverallVerdict, _overall),
    "quality": JudgeTemplate("quality", QualityVerdict, _quality),
    "response_quality": JudgeTemplate("response_quality", FivePointVerdict, _score("response_quality"), (1.0, 5.0)),
    "faithfulness": JudgeTemplate("faithfulness", ClaimsVerdict, faithfulness_value),
    "context_precision": JudgeTemplate("context_precision", PrecisionVerdict, context_precision_value),
    "context_recall": JudgeTemplate("context_recall", RecallVerdict, context_recall_value),
    **{name: JudgeTemplate(name, ScoreVerdict, _score(name)) for name in GEVAL_METRICS},
}

METRIC_TEMPLATES: dict[str, str] = {
    "judge_score": "judge_score",
    "answer_quality": "quality",
    "factual_correctness": "quality",
    "completeness": "quality",
    "response_quality": "response_quality",
    "faithfulness": "faithfulness",
    "context_precision": "context_precision",
    "context_recall": "context_recall",
    **{name: name for name in GEVAL_METRICS},
}
"""Judged metric name → the template whose verdict carries its value (a dialect's three quality scores share one call)."""


def template_for_metric(metric: str) -> JudgeTemplate:
    try:
        return TEMPLATES[METRIC_TEMPLATES[metric]]
    except KeyError:
        raise KeyError(f"no judge template for metric {metric!r}") from None


def verdict_details(verdict: BaseModel) -> dict[str, Any]:
    """List-valued verdict parts (claims, chunk verdicts, statements) for a metric's details."""
    return _details_of(verdict)


# --- rendering ------------------------------------------------------------------------------------------


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
        keep_trailing_newline=False,
        auto_reload=False,  # packaged templates never change during a run: no stat() per judge call
    )
    env.globals["fence"] = fence
    return env


@cache
def system_prompt() -> str:
    """The shared system message (constant: rendered once)."""
    return environment().get_template(SYSTEM_TEMPLATE).render().strip()


@cache
def template_version(file: str) -> str:
    """``name@`` + sha256 over the template source and everything it extends or includes (12 hex)."""
    digest = hashlib.sha256()
    for name in sorted(_closure(file) | {SYSTEM_TEMPLATE}):
        digest.update(name.encode() + b"\x00" + _source(name).encode() + b"\x00")
    return f"{file.removesuffix('.j2')}@{digest.hexdigest()[:12]}"


def _source(name: str) -> str:
    return (TEMPLATE_DIR / name).read_text(encoding="utf-8")


def _closure(name: str) -> set[str]:
    seen: set[str] = set()
    pending = [name]
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        parsed = environment().parse(_source(current))
        pending.extend(ref for ref in jinja2.meta.find_referenced_templates(parsed) if ref)
    return seen


@dataclass(frozen=True, slots=True)
class RenderedPrompt:
    """Messages for one judge call plus what identifies them (template version, prompt hash).

    ``messages`` are what a structured output mode sends: the verdict's shape travels as the request's
    ``response_format``, so the prose never restates it. ``messages_for("prompt")`` appends the one-line
    format (``format_hint``) to the last message, the only place prompt mode learns the shape from."""

    template: JudgeTemplate
    version: str
    messages: tuple[Mapping[str, str], ...]
    inputs: PromptInputs

    def messages_for(self, mode: str | None) -> tuple[Mapping[str, str], ...]:
        """The messages sent in output ``mode`` (None: the structured form)."""
        if mode != "prompt":
            return self.messages
        *head, last = self.messages
        hint = format_hint(self.template.verdict)
        return (*head, {**last, "content": f"{last['content']}\n\n{hint}"})

    def prompt_hash(self, extra: Mapping[str, Any] | None = None) -> str:
        """sha256 of the messages sent in ``extra["output_mode"]`` and the request parameters that change
        the reply."""
        params = dict(extra or {})
        messages = self.messages_for(params.get("output_mode"))
        payload = json.dumps({"messages": list(messages), "params": params}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()


FORMAT_LEAD = "Reply with only this JSON:"


@cache
def format_hint(verdict: type[BaseModel]) -> str:
    """``Reply with only this JSON: {"reasoning": "…", "score": <0–1>}``: the verdict's shape in one line,
    written from its JSON schema (for prompt mode, where no ``response_format`` carries it)."""
    return f"{FORMAT_LEAD} {_shape(schema_of(verdict))}"


def _shape(node: Mapping[str, Any]) -> str:
    if node.get("enum"):
        return " | ".join(json.dumps(value) for value in node["enum"])
    kind = node.get("type")
    if kind == "object" or "properties" in node:
        fields = ", ".join(f"{json.dumps(name)}: {_shape(sub)}" for name, sub in node.get("properties", {}).items())
        return "{" + fields + "}"
    if kind == "array":
        return f"[{_shape(node.get('items') or {})}, …]"
    if kind in ("number", "integer"):
        low, high = node.get("minimum"), node.get("maximum")
        if low is not None and high is not None:
            return f"<{low:g}–{high:g}>"
        return f"<{kind}>"
    if kind == "boolean":
        return "true | false"
    return '"…"'


def render(template: JudgeTemplate, case: Case, answer: Answer, rubric: str | None = None) -> RenderedPrompt:
    inputs = PromptInputs.of(case, answer, rubric)
    return render_inputs(template, inputs)


def render_inputs(template: JudgeTemplate, inputs: PromptInputs) -> RenderedPrompt:
    system = system_prompt()
    user = environment().get_template(template.file).render(**inputs.variables()).strip()
    messages = ({"role": "system", "content": system}, {"role": "user", "content": user})
    return RenderedPrompt(template, template_version(template.file), messages, inputs)


def repair_message(problem: str) -> str:
    return environment().get_template(REPAIR_TEMPLATE).render(problem=problem).strip()

