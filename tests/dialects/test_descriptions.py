"""The user-visible texts that name a seed come from the dialects (issue 35 item 1): ``--compat``'s help from
the registry, a metric's description from its dialect's ``metric_docs`` and a setting's (in
``docs/reference/settings.md``) from its dialect's ``setting_docs``; the generic code's own text names no seed
(``test_ownership.py``). The expected texts are the ones users saw before the seed names left the generic
code."""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalgate import dialect
from evalgate.cli.main import build_parser
from evalgate.dialect import DIALECTS, Dialect, OutputDocument
from evalgate.metrics.registry import get_metric, load_builtin_metrics

ROOT = Path(__file__).resolve().parents[2]

COMPAT_HELP = ("turn on these in-house frameworks' dialects (seed000 … seed004, comma-separated) for cases without "
               "a kind, and produce their output shapes (seed000, seed001, seed004): files beside results.json and "
               "the seed's console summary")


def _compat_help(parser: argparse.ArgumentParser) -> str:
    """``--compat``'s help as ``run --help-all`` shows it (``full_help`` when short help hides it)."""
    verbs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    action = next(a for a in verbs.choices["run"]._actions if "--compat" in a.option_strings)
    return str(getattr(action, "full_help", None) or action.help)


def test_compat_help_is_the_text_users_saw() -> None:
    assert _compat_help(build_parser()) == COMPAT_HELP
    shown = subprocess.run([sys.executable, "-m", "evalgate", "run", "--help-all"], capture_output=True, text=True,
                           check=True, cwd=ROOT).stdout
    assert "(seed000 … seed004, comma-separated)" in " ".join(shown.split())


@pytest.fixture
def extra_dialect() -> Iterator[None]:
    """A plug-in dialect with an output document, registered after the built-in ones."""
    registry = dialect.DIALECTS
    loaded = dict(registry._all())  # type: ignore[attr-defined]
    plugin = Dialect("acme", "acme (plug-in)", document=OutputDocument("acme.json", lambda *_: ({}, iter(()))))
    registry._loaded = {**loaded, "acme": plugin}  # type: ignore[attr-defined]
    try:
        yield
    finally:
        registry._loaded = loaded  # type: ignore[attr-defined]


def test_compat_help_follows_the_registry(extra_dialect: None) -> None:
    text = _compat_help(build_parser())
    assert "(seed000 … acme, comma-separated)" in text
    assert "(seed000, seed001, seed004, acme)" in text


@pytest.mark.parametrize(("metric", "text"), [
    ("workflow", "1.0 when both the agents and the tools sides pass, else 0.0 (seed 003's binary PASS/FAIL)."),
    ("combined_score", "Combined score (seed 000): hit_rate^alpha · judge_score^gamma / (num_tokens/1000)^beta with "
                       "alpha = 2.0, gamma = 1.5, beta = 0.5 by default (metric option ``combined_score``); "
                       "unbounded, higher is better, seed 000's informational target is > 1.20."),
    ("hit_rate", "Hit rate: 1.0 when at least one expected source is among the returned sources, else 0.0; the suite "
                 "average is (questions with an expected source found) / (questions). Default threshold ≥ 0.80 "
                 "(seed 000's dialect: > 0.80, its minimum \"Hit rate > 0.80\")."),
    ("mrr", "Reciprocal rank: 1/rank of the first expected source among the returned sources (ranks from 1, "
            "duplicates counted once), 0.0 when none is returned; the suite average is the MRR. Informational by "
            "default (seed 000's dialect: > 0.70, its \"MRR > 0.70\")."),
    ("composite", "Seed 004's weighted composite in [0, 1]: 0.30·specialist_match + 0.25·keyword_coverage + "
                  "0.20·data_source_match + 0.25·(response_quality / 5)."),
    ("specialist_match", "1.0 when the answering agent (answer.agent_id) is the agent the case expects, else 0.0. "
                         "The agent the case expects is its expected_specialist."),
    ("false_is_mine_rate", "False is_mine rate: (mentions flagged is_mine whose brand is not one of the case's own "
                           "brands, e.g. a competitor) / (total mentions); 0.0 when there are no mentions. Zero "
                           "tolerance by default. The case's own brands are its brands_mine."),
    ("relevancy", "Seed 002: relevance of the answer to the question, in [0, 1]; threshold 0.70."),
])
def test_metric_descriptions_name_their_seed_from_the_dialect(metric: str, text: str) -> None:
    load_builtin_metrics()
    assert get_metric(metric).description == text


def test_context_mrr_description_names_its_seed() -> None:
    load_builtin_metrics()
    text = get_metric("context_mrr").description
    assert text.startswith("Seed 002's MRR, a deterministic keyword-overlap approximation: 1/rank of the first chunk")
    assert text.endswith("Diagnostic: no threshold by default; the suite average is the MRR.")


def test_a_template_with_a_tail_takes_the_text_without_its_full_stop() -> None:
    probe = dataclasses.replace(DIALECTS["seed003"], metric_docs={"m": "{} (tail)."}, setting_docs={"s": "Lead: {}"})
    registry = dialect.DIALECTS
    loaded = dict(registry._all())  # type: ignore[attr-defined]
    registry._loaded = {"probe": probe}  # type: ignore[attr-defined]
    try:
        assert dialect.describe("m", "Generic text.") == "Generic text (tail)."
        assert dialect.describe("other", "Generic text.") == "Generic text."
        assert dialect.describe_setting("s", "Generic text.") == "Lead: generic text."
        assert dialect.describe_setting("other", "Generic text.") == "Generic text."
    finally:
        registry._loaded = loaded  # type: ignore[attr-defined]


@pytest.mark.parametrize(("setting", "text"), [
    ("compat_output", "Another path for the (single) compat document: seed 004's ``--output results.json``."),
    ("compat_include_responses", "Seed 004's ``output.include_responses``: per_query entries carry the response "
                                 "text (≤ 2,000 chars)."),
    ("judge_api_key", "The judge's API key when given as a setting instead of the provider's own variable; never "
                      "written anywhere (seed 004: ``EVAL_JUDGE_API_KEY`` / ``llm_judge.api_key``)."),
])
def test_settings_reference_names_the_seed_spelling_from_the_dialect(setting: str, text: str) -> None:
    page = (ROOT / "docs" / "reference" / "settings.md").read_text(encoding="utf-8")
    row = next(line for line in page.splitlines() if line.startswith(f"| `{setting}` |"))
    assert row.endswith(f"| {text} |")
