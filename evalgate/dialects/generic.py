"""The generic defaults: when each built-in metric runs on a case of a suite without a ``kind``.

``WHEN`` is the one table (``evalgate explain`` quotes it, docs/reference/metrics.md is generated from it):
a metric runs on a case when the case carries what it checks. A metric marked ``only when named`` runs
only when a ``metrics:`` list (case, suite or evalgate.yaml) or a ``category_metrics:`` map names it —
in the dialect that owns it (``evalgate.dialects``), its seed's rule applies too. Default thresholds are
the registry's (``evalgate.metrics.registry``); a seed's dialect may set others for runs with its cases.
"""

from __future__ import annotations

NAMED = "only when named"

WHEN: dict[str, str] = {
    "rules": "the case has rules:, or its category has category_rules",
    "workflow": "the case has agents_should_* or tools_should_* expectations",
    "workflow_agents": "the case has agents_should_include / agents_should_exclude",
    "workflow_tools": "the case has tools_should_include / tools_should_exclude",
    "hit_rate": "the case has expected_sources",
    "mrr": "the case has expected_sources",
    "precision_at_k": "the case has expected_sources",
    "recall_at_k": "the case has expected_sources",
    "keyword_coverage": "the case has expected_keywords",
    "specialist_match": "the case has expected_specialist",
    "data_source_match": "the case has expected_data_sources",
    "mention_precision": "the case has expected_my_mentions / expected_competitor_mentions",
    "mention_recall": "the case has expected_my_mentions / expected_competitor_mentions",
    "mention_f1": "the case has expected_my_mentions / expected_competitor_mentions",
    "brand_coverage": "the case has expected_my_mentions / expected_competitor_mentions",
    "rank_accuracy": "the case has expected_ranked_list",
    "false_is_mine_rate": "the case has brands_mine / brands_competitors",
    "num_tokens": "the case has num_tokens (a recorded count)",
    "latency_ms": "the case has latency_ms (a recorded latency)",
    "answer_quality": "the case has expected_answer_criteria (judged, informational)",
    "factual_correctness": "the case has expected_answer_criteria (judged, informational)",
    "completeness": "the case has expected_answer_criteria (judged, informational)",
    "judge_score": NAMED,
    "combined_score": NAMED,
    "context_mrr": NAMED,
    "relevancy": NAMED,
    "faithfulness": NAMED,
    "groundedness": NAMED,
    "localization": NAMED,
    "context_precision": NAMED,
    "context_recall": NAMED,
    "math": NAMED,
    "safety": NAMED,
    "policy": NAMED,
    "actionability": NAMED,
    "correctness": NAMED,
    "tool_calling": NAMED,
    "response_quality": NAMED,
    "composite": NAMED,
    "conversation_turns": "the case is a conversation (turns: or simulated_user:)",
    "goal_completion": "the conversation has a goal (judged)",
    "role_adherence": "the conversation has an assistant_role (judged)",
    "knowledge_retention": NAMED,
    "trajectory": "the case has trajectory: (expected tool calls, checked against the agent's trace or answer)",
}
"""Built-in metric → when it runs on a case of a suite without a kind."""

OWNED_WHEN: dict[str, str] = {
    "judge_score": "the case has expected_sources",
    "combined_score": "the case has expected_sources",
    "context_mrr": "the case has expected_output (MRR over the target's debug_context)",
    "relevancy": "the case has passing_criteria",
    "faithfulness": "the case has retrieval_context",
    "groundedness": "the case has retrieval_context",
    "context_precision": "the case has retrieval_context",
    "context_recall": "the case has retrieval_context and expected_output",
    "localization": "the case has language",
    "response_quality": "the case has expected_specialist or verified_answer_summary",
    "composite": "the case has expected_specialist or verified_answer_summary",
}
"""What a dialect-owned metric's own rule checks, in its dialect."""
