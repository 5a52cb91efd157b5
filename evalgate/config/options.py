"""Tunable parts of the built-in metrics, set per suite (dataset ``suite:`` block) or in evalgate.yaml."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from evalgate.model import RuleCheck

DEFAULT_SOURCE_INDICATORS: dict[str, list[str]] = {
    "rag": ["according to the", "document", "sop", "manual", "procedure", "section", "per the", "source:"],
    "sap": ["sap", "production order", "cost center", "material number", "inventory", "purchase order"],
    "mes": ["mes", "spc", "control chart", "cycle time", "machine data", "oee", "real-time"],
}
"""The golden-dataset dialect's per-source indicator vocabularies: a source counts as used when the answer text, its
citations or its reported data sources contain any of that source's indicators (case-insensitive)."""


class CombinedScoreOptions(BaseModel):
    """The combined score's exponents: ``hit_rate^alpha · judge_score^gamma / (num_tokens/1000)^beta``."""

    model_config = ConfigDict(extra="forbid")
    alpha: float = 2.0
    beta: float = 0.5
    gamma: float = 1.5


class CompositeWeights(BaseModel):
    """Weights of the golden-dataset composite; they must sum to 1."""

    model_config = ConfigDict(extra="forbid")
    specialist_match: float = Field(default=0.30, ge=0.0)
    keyword_coverage: float = Field(default=0.25, ge=0.0)
    data_source_match: float = Field(default=0.20, ge=0.0)
    response_quality: float = Field(default=0.25, ge=0.0)

    @model_validator(mode="after")
    def _sum_to_one(self) -> CompositeWeights:
        total = self.specialist_match + self.keyword_coverage + self.data_source_match + self.response_quality
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"composite weights must sum to 1.0, got {total:g}")
        return self


class MetricOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    combined_score: CombinedScoreOptions = Field(default_factory=CombinedScoreOptions)
    composite_weights: CompositeWeights = Field(default_factory=CompositeWeights)
    data_source_indicators: dict[str, list[str]] = Field(
        default_factory=lambda: {k: list(v) for k, v in DEFAULT_SOURCE_INDICATORS.items()}
    )
    k: int = Field(default=5, ge=1, description="cut-off for precision@k / recall@k")
    context_mrr_min_overlap: float = Field(
        default=0.25, gt=0.0, le=1.0,
        description="context_mrr: share of expected_output's words a debug_context chunk must hold to be relevant")
    always_expected_agents: list[str] = Field(default_factory=lambda: ["orchestrator"])
    """Workflow checks: agents that may run in every scenario without being listed (default: the orchestrator)."""
    judge_combine: bool = False
    """Score the judged metrics of a case that read the same inputs (``metrics.judged.SHARED_INPUTS``) in one
    judge call returning a score per metric, instead of one call each (docs/judges.md, "One call for
    several metrics")."""
    response_quality_rubric: str | None = None
    """The rubric the judge scores response_quality (1–5) with, instead of the built-in one (a dialect's
    config may spell it, e.g. ``llm_judge.rubric``)."""
    category_rules: dict[str, list[RuleCheck]] = Field(default_factory=dict)
