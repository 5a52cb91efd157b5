"""Seed 003 (workflow validation and quality scores logged to Langfuse) as a dialect.

Its workflow checks run on the ``agents_should_*`` / ``tools_should_*`` fields and its three quality
scores (informational) on ``expected_answer_criteria`` in any suite: those fields ask for them. Langfuse's
own variables (``LANGFUSE_PUBLIC_KEY``, ``LANGFUSE_SECRET_KEY``, ``LANGFUSE_HOST`` / ``LANGFUSE_BASE_URL``)
feed the ``langfuse_*`` settings (``LANGFUSE_VARIABLES`` below). Its "the orchestrator is always expected"
is the default of the suite option ``always_expected_agents``; its binary PASS/FAIL is the ``workflow``
metric, in its ``{"pass", "included", "excluded", "missing", "unexpected"}`` shape per side. Its score names are below too: it logged
its three quality scores as ``quality_<name>`` (``quality_answer_quality``, …), and the Langfuse export
(``export/langfuse.py``, through ``evalgate.dialect.export_name``) keeps those names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evalgate.dialect import CaseFormat, Dialect

LANGFUSE_VARIABLES: dict[str, str] = {
    "LANGFUSE_PUBLIC_KEY": "langfuse_public_key",
    "LANGFUSE_SECRET_KEY": "langfuse_secret_key",
    "LANGFUSE_HOST": "langfuse_host",
    "LANGFUSE_BASE_URL": "langfuse_host",
}


def _environment(env: Mapping[str, str], notices: list[str]) -> dict[str, tuple[Any, str]]:
    """Settings from Langfuse's own variables (``LANGFUSE_HOST`` wins over ``LANGFUSE_BASE_URL``)."""
    layer: dict[str, tuple[Any, str]] = {}
    for variable in ("LANGFUSE_BASE_URL", "LANGFUSE_HOST", "LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY"):
        value = env.get(variable, "").strip()
        if value:
            layer[LANGFUSE_VARIABLES[variable]] = (value, variable)
    return layer


QUALITY_SCORES = ("answer_quality", "factual_correctness", "completeness")
"""Its three judged quality scores (logged to Langfuse as ``quality_<name>``)."""

DIALECT = Dialect(
    name="seed003",
    label="seed 003 (workflow validation)",
    kind_aliases=("003", "workflow-validation"),
    compat_aliases=("003", "3"),
    case_format=CaseFormat("seed 003 scenarios", (("input", "input"),),
                           any_of=(("agents_should_include", "agents_should_include"),
                                   ("agents_should_exclude", "agents_should_exclude"),
                                   ("tools_should_include", "tools_should_include"),
                                   ("tools_should_exclude", "tools_should_exclude"))),
    env_settings=_environment,
    elsewhere="LANGFUSE_* variables, its Langfuse score names (quality_<name>)",
    export_names={name: f"quality_{name}" for name in QUALITY_SCORES},
    metric_docs={**{name: "Seed 003: {}" for name in QUALITY_SCORES},
                 "workflow": "{} (seed 003's binary PASS/FAIL)."},
)
