"""Seed 003 (workflow validation and quality scores logged to Langfuse) as a dialect.

Its workflow checks run on the ``agents_should_*`` / ``tools_should_*`` fields and its three quality
scores (informational) on ``expected_answer_criteria`` in any suite: those fields ask for them. Its Langfuse
variables and score names live in ``config/legacy.py`` and ``export/langfuse.py``.
"""

from __future__ import annotations

from evalgate.dialect import Dialect

DIALECT = Dialect(
    name="seed003",
    label="seed 003 (workflow validation)",
    elsewhere="LANGFUSE_* variables in config/legacy.py, score names in export/langfuse.py",
)
