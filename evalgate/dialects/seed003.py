"""Seed 003 (workflow validation and quality scores logged to Langfuse) as a dialect.

Its workflow checks run on the ``agents_should_*`` / ``tools_should_*`` fields and its three quality
scores (informational) on ``expected_answer_criteria`` in any suite: those fields ask for them. Its Langfuse
variables live in ``config/legacy.py``; its score names are below: it logged its three quality scores as
``quality_<name>`` (``quality_answer_quality``, …), and the Langfuse export keeps those names.
"""

from __future__ import annotations

from evalgate.dialect import Dialect

QUALITY_SCORES = ("answer_quality", "factual_correctness", "completeness")
"""Its three judged quality scores (logged to Langfuse as ``quality_<name>``)."""

DIALECT = Dialect(
    name="seed003",
    label="seed 003 (workflow validation)",
    elsewhere="LANGFUSE_* variables in config/legacy.py, its Langfuse score names (quality_<name>)",
    export_names={name: f"quality_{name}" for name in QUALITY_SCORES},
    metric_docs={name: "Seed 003: {}" for name in QUALITY_SCORES},
)
