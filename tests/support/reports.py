"""results.json documents written by hand: for the report renderers (the PR comment, the job summary,
annotations, outputs) failing and passing cases, the gate, optionally a comparison with a base run; for
``evalgate compare`` runs of one score per case (``document``)."""

from __future__ import annotations

from typing import Any

from evalgate.report.markdown import SourceLinks, render_comment


def failing_case(case_id: str, *, risk: str = "medium", index: int = 0, status: str = "failed") -> dict[str, Any]:
    return {
        "id": case_id,
        "index": index,
        "suite": "brand-mentions",
        "category": "crm",
        "risk_level": risk,
        "difficulty": None,
        "evolution_type": None,
        "tags": [],
        "description": f"checks {case_id}",
        "source": f"datasets/brand/fixtures.yaml:{3 + 10 * index}",
        "status": status,
        "passed": False,
        "error": "target timed out after 30 s" if status == "errored" else None,
        "reasons": [f"mention_f1: 0.40 below 0.85 for {case_id}"],
        "input": f"Which CRM should I use? ({case_id})",
        "expected": {"expected_my_mentions": ["HubSpot"], "expected_competitor_mentions": ["Salesforce"]},
        "output": "I recommend Salesforce. " * 60,
        "answer": {},
        "metrics": {
            "mention_f1": {"value": 0.4, "threshold": {"min": 0.85}, "passed": False, "status": "failed",
                           "reason": "missed HubSpot", "details": {}},
            "mention_precision": {"value": 1.0, "threshold": {"min": 0.9}, "passed": True, "status": "passed",
                                  "reason": None, "details": {}},
        },
        "num_tokens": 120,
        "latency_ms": None,
        "cost_usd": None,
        "repeat": 0,
    }


def passing_case(case_id: str, index: int) -> dict[str, Any]:
    case = failing_case(case_id, index=index)
    case.update(status="passed", passed=True, reasons=[], metrics={})
    return case


def results_doc(*, passed: bool = False, comparison: bool = False) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema_version": 1,
        "run_id": "20261122T101500Z-3f2a1c",
        "timestamp": "2026-11-22T10:15:00Z",
        "status": "completed",
        "summary": {
            "pass_rate": 0.8, "weighted_pass_rate": 0.75, "total_test_cases": 10, "total_passed": 8,
            "total_failed": 1, "total_errored": 1, "total_skipped": 0, "critical_failures": 1,
            "average_scores": {"mention_precision": 0.95},
            "tokens": {"total": 50000, "average": 2500, "judge_prompt": 1200, "judge_completion": 300},
            "cost_usd": 0.0123, "judged_unavailable": 0,
            "judge_calls": {"made": 8, "cached": 2, "cost_usd": 0.0023},
        },
        "metrics": {
            "mention_precision": {"average": 0.95, "count": 10, "skipped": 0, "unavailable": 0, "errored": 0,
                                  "threshold": {"min": 0.9}, "direction": "higher", "passed": True},
            "mention_f1": {"average": 0.82, "count": 10, "skipped": 0, "unavailable": 0, "errored": 0,
                           "threshold": {"min": 0.85}, "direction": "higher", "passed": False},
            "false_is_mine_rate": {"average": 0.0, "count": 10, "skipped": 0, "unavailable": 0, "errored": 0,
                                   "threshold": {"max": 0.05}, "direction": "lower", "passed": True},
            "judge_overall": {"average": None, "count": 0, "skipped": 10, "unavailable": 0, "errored": 0,
                              "threshold": None, "direction": "higher", "passed": None},
        },
        "thresholds": {"mention_f1": {"min": 0.85}},
        "thresholds_passed": passed,
        "gate": {
            "passed": passed,
            "exit_code": 0 if passed else 1,
            "reasons": [] if passed else [
                "mention_f1 average 0.82 misses threshold ≥ 0.85",
                "critical case crit-1 failed (datasets/brand/fixtures.yaml:13): mention_f1: 0.40 below 0.85",
            ],
        },
        "breakdowns": {
            "category": {
                "crm": {"total": 3, "passed": 2, "failed": 1, "errored": 0, "pass_rate": 0.667, "average_scores": {}},
                "email": {"total": 7, "passed": 6, "failed": 0, "errored": 1, "pass_rate": 0.857, "average_scores": {}},
            },
            "difficulty": {}, "risk_level": {}, "evolution_type": {}, "tag": {}, "suite": {},
        },
        "metadata": {
            "datasets": [{"path": "datasets/brand/fixtures.yaml", "sha256": "ab", "cases": 10}],
            "config": {}, "versions": {"evalgate": "0.1.0", "python": "3.11.7"},
            "judge": {"provider": "openai", "model": "gpt-4o-mini"}, "target": {"kind": "recorded"},
            "calls": {"calls": 8, "attempts": 12, "retries": 4, "rate_limited_429": 3, "failed": 0, "timeouts": 1},
            "cost": {"max_cost_usd": None, "spent_usd": 0.0023, "budget_exceeded": False},
        },
        "results": [
            passing_case("ok-0", 0),
            failing_case("crit-1", risk="critical", index=1),
            failing_case("err-2", risk="low", index=2, status="errored"),
        ],
    }
    if comparison:
        doc["comparison"] = {
            "baseline": {"source": "artifact evalgate-results of run 123 on main", "run_id": "r0", "timestamp": "t"},
            "significance_level": 0.05,
            "bootstrap": {"resamples": 10000, "seed": 20261122},
            "metrics": {
                "mention_f1": {"base": 0.91, "head": 0.82, "delta": -0.09, "ci_low": -0.12, "ci_high": -0.04,
                               "n_paired": 14, "direction": "higher", "significant": True, "regression": True,
                               "improvement": False, "gated": True},
                "mention_precision": {"base": 0.94, "head": 0.95, "delta": 0.01, "ci_low": -0.02, "ci_high": 0.04,
                                      "n_paired": 14, "direction": "higher", "significant": False,
                                      "regression": False, "improvement": False, "gated": True},
            },
            "pass_rate": {"base": 0.9, "head": 0.8, "delta": -0.1, "regressions": 2, "fixes": 1, "n_paired": 14,
                          "p_value": 0.5, "significant": False},
            "cases": {
                "regressions": [
                    {"id": "low-3", "source": "datasets/brand/fixtures.yaml:33", "risk_level": "low", "critical": False,
                     "base_status": "passed", "head_status": "failed"},
                    {"id": "crit-1", "source": "datasets/brand/fixtures.yaml:13", "risk_level": "critical",
                     "critical": True, "base_status": "passed", "head_status": "failed"},
                ],
                "fixes": [{"id": "fixed-9", "source": "datasets/brand/fixtures.yaml:93", "risk_level": "high",
                           "critical": False, "base_status": "failed", "head_status": "passed"}],
                "new": ["n1"],
                "removed": ["r1", "r2"],
            },
            "regression": True,
            "summary": "1 significant regression: mention_f1 fell 0.090 (95% CI -0.120 to -0.040).",
        }
    return doc


LINKS = SourceLinks("https://github.com", "octo/hello", "0123abcd" * 5, workspace="/ws", base_dir="/ws")


def render(doc: dict[str, Any], **kwargs: Any) -> str:
    options: dict[str, Any] = {
        "run_url": "https://github.com/octo/hello/actions/runs/99",
        "artifact_url": "https://github.com/octo/hello/actions/runs/99/artifacts/7",
        "tag": "main",
        "source_links": LINKS,
    }
    options.update(kwargs)
    return render_comment(doc, **options)


def record(case_id: str, index: int, value: float, *, risk: str = "medium", passed: bool | None = None) -> dict[str, Any]:
    ok = value >= 0.5 if passed is None else passed
    return {"id": case_id, "index": index, "source": f"datasets/x.yaml:{3 + 4 * index}", "risk_level": risk,
            "status": "passed" if ok else "failed", "passed": ok, "repeat": 0,
            "metrics": {"score": {"value": value, "status": "passed" if ok else "failed"}}}


def document(run_id: str, values: list[float], *, risks: dict[int, str] | None = None,
             failed: set[int] = frozenset()) -> dict[str, Any]:  # type: ignore[assignment]
    risks = risks or {}
    results = [record(f"case_{i:02d}", i, v, risk=risks.get(i, "medium"), passed=i not in failed)
               for i, v in enumerate(values)]
    return {"schema_version": 1, "run_id": run_id, "timestamp": "2026-11-20T10:00:00Z", "status": "completed",
            "metrics": {"score": {"average": sum(values) / len(values), "direction": "higher", "threshold": {"min": 0.5}}},
            "thresholds": {"score": {"min": 0.5}}, "metadata": {"config": {}}, "results": results}


BASE_VALUES = [0.80 + 0.01 * (i % 7) for i in range(30)]
