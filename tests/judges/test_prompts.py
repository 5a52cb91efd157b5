"""The judge prompts and verdict schemas are part of the judge cache keys (``RenderedPrompt.prompt_hash``, the
``response_format`` a structured output mode sends): a refactor of ``evalgate.judges.prompts`` must leave them
byte-identical, or every cached verdict is silently invalidated. Digests taken from the code before the verdict
models shared their score type."""

from __future__ import annotations

import hashlib
import json

import pytest
from pydantic import BaseModel

from evalgate.judges import prompts
from evalgate.judges.parse import schema_of
from evalgate.judges.prompts import TEMPLATES, format_hint, render
from evalgate.model import Answer, Case

SCHEMAS = {
    "ChunkRelevance": "e27187a6a1e8172c",
    "Claim": "ba2c4a0514d2148d",
    "ClaimsVerdict": "b30d0ce4152c8f47",
    "FivePointVerdict": "2bcc60675893c78d",
    "OverallVerdict": "4828b4efeea3651c",
    "PrecisionVerdict": "dcf29aee2ed5c96e",
    "QualityVerdict": "f32dfe191887cbd2",
    "RecallVerdict": "2103ead7eba7753d",
    "ScoreVerdict": "bb7be7738237102d",
    "Statement": "3ca505a2c2d7440e",
    "StepsVerdict": "ddfe2950e87237e0",
}
"""Verdict model → sha256 (16 hex) of its inlined JSON schema followed by its prompt-mode format hint."""

PROMPTS = {
    "actionability": ("ed26d1211099f210", "54659c140d1bedd4"),
    "context_precision": ("14698377726fbdb3", "fd4eef8a1191ce4f"),
    "context_recall": ("071490fc8afd50d5", "9f6ff78c5609a312"),
    "correctness": ("9125f2b8b06d8e86", "c51955ff5aca4d65"),
    "faithfulness": ("0ab2864d1d95930f", "154c15e13c679bb4"),
    "groundedness": ("41419cca1c4f3f41", "d3c1a4c91947f35f"),
    "judge_score": ("9cc2275f19deb58d", "e0bc8698b908c574"),
    "localization": ("2edfc5916ad5ef9f", "0c769fa0d04903a6"),
    "math": ("e357bdbada69544f", "5bfbb8388cceccf1"),
    "policy": ("4c0607fc54878020", "6a7af71c118d052e"),
    "quality": ("52f39a31eaaff39b", "ac89c260fd793ae2"),
    "relevancy": ("c92519d9cd7ba617", "917d2000b7bfbbd6"),
    "response_quality": ("443009b55caf5fcb", "04b22db624056e52"),
    "safety": ("aa31b73fdb0a6a59", "0bcf9d86bbd12fff"),
    "tool_calling": ("ad85c8e811f0f1d6", "e292a1a58b7e2512"),
}
"""Template → the first 16 hex of its prompt hash for one fixed case: (structured mode, prompt mode)."""


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _verdict_models() -> dict[str, type[BaseModel]]:
    return {name: value for name, value in vars(prompts).items()
            if isinstance(value, type) and issubclass(value, BaseModel) and value.__module__ == prompts.__name__}


def test_every_verdict_model_is_pinned() -> None:
    assert sorted(_verdict_models()) == sorted(SCHEMAS)
    assert sorted(TEMPLATES) == sorted(PROMPTS)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_verdict_schema_and_format_hint_unchanged(name: str) -> None:
    model = _verdict_models()[name]
    assert _digest(json.dumps(schema_of(model)) + format_hint(model)) == SCHEMAS[name]


@pytest.mark.parametrize("name", sorted(PROMPTS))
def test_rendered_prompt_hash_unchanged(name: str) -> None:
    case = Case(id="c1", input="What is 2+2?", expected_output="4", retrieval_context=["two plus two is four"],
                expected_answer_criteria="says 4", expected_sources=["a"], language="en", passing_criteria="ok")
    prompt = render(TEMPLATES[name], case, Answer(output="4", sources=["a"], tools_used=["calc"]))
    assert (prompt.prompt_hash()[:16], prompt.prompt_hash({"output_mode": "prompt"})[:16]) == PROMPTS[name]
