"""``pairwise: true`` with a baseline: after the cases ran, ask the judge which answer is better — the base
branch's or this run's — for every case whose answer text changed, on each judged metric the case scored
(``judges.pairwise``: both orders, a preference only when they agree), at most ``concurrency`` calls at once.

results.json ``pairwise``: ``{compared_cases, metrics: {name: {wins, losses, ties, unavailable, p_worse,
p_two_sided}}, cases: [{id, metric, preferred, base_first, head_first, reasoning, unusable?}] (the first 50),
health: {metrics: {name: {replies, unusable, <cause>: n, examples}}, total: {replies, unusable}}}``. A pair
whose reply in either order is no evidence (``judges.pairwise``: unreadable, failed or failing a health check)
is ``unavailable``: neither a win, a loss nor a tie, so the sign test never counts a reply it cannot read. With
``fail_on_regression`` a gated metric whose answers lost significantly fails the gate
(``verdict.pairwise.pairwise_reasons``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from evalgate.judges.health import MetricHealth
from evalgate.judges.pairwise import prefer
from evalgate.model import Case
from evalgate.verdict.pairwise import summarize

if TYPE_CHECKING:
    from evalgate.judges.client import JudgeClient
    from evalgate.runner.setup import Prepared

SHOWN_CASES = 50


def base_outputs(results: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Case id → the base run's answer text (first repeat)."""
    return {str(r["id"]): str(r["output"]) for r in results
            if not r.get("repeat") and r.get("id") is not None and isinstance(r.get("output"), str)}


def _case(record: Mapping[str, Any]) -> Case | None:
    try:
        return Case.model_validate({"id": record.get("id"), "input": record.get("input"),
                                    "category": record.get("category"), **(record.get("expected") or {})})
    except (ValidationError, TypeError):
        return None


async def judge_pairs(judge: JudgeClient, prepared: Prepared, records: Iterable[bytes], base: Mapping[str, str],
                      concurrency: int) -> dict[str, Any]:
    jobs: list[tuple[str, str, Case, str, str]] = []
    compared = 0
    for raw in records:
        record = json.loads(raw)
        if record.get("repeat"):
            continue
        head, before = record.get("output"), base.get(str(record.get("id")))
        if not isinstance(head, str) or before is None or head == before:
            continue
        case = _case(record)
        if case is None:
            continue
        judged = [name for name in record.get("metrics") or {}
                  if name in prepared.metrics and prepared.metrics[name].uses_judge]
        if judged:
            compared += 1
        jobs.extend((str(record["id"]), name, case, before, head) for name in judged)
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(job: tuple[str, str, Case, str, str]) -> dict[str, Any]:
        case_id, name, case, before, head = job
        async with gate:
            found = await prefer(judge, prepared.metrics[name], case, before, head)
        return {"id": case_id, "metric": name, **found}

    rows = await asyncio.gather(*(one(job) for job in jobs))
    for row in rows:
        if row.get("unusable"):
            row["preferred"] = "unavailable"
    return {"compared_cases": compared, "metrics": summarize((row["metric"], row["preferred"]) for row in rows),
            "cases": rows[:SHOWN_CASES], "health": pairwise_health(rows)}


def pairwise_health(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Pairwise replies per metric (two a pair), the unusable ones by cause, and examples of them."""
    tallies: dict[str, MetricHealth] = {}
    for row in rows:
        tally = tallies.setdefault(str(row["metric"]), MetricHealth())
        tally.verdicts += 2
        for bad in row.get("unusable") or ():
            tally.causes[bad["cause"]] = tally.causes.get(bad["cause"], 0) + 1
            tally.example(bad["cause"], str(row["id"]), str(bad.get("text") or ""))
    metrics: dict[str, Any] = {}
    for name, tally in sorted(tallies.items()):
        metrics[name] = {"replies": tally.verdicts, "usable": tally.verdicts - tally.unusable,
                         "unusable": tally.unusable, **dict(sorted(tally.causes.items())),
                         **({"examples": tally.examples} if tally.examples else {})}
    return {"metrics": metrics, "total": {"replies": sum(m["replies"] for m in metrics.values()),
                                          "unusable": sum(m["unusable"] for m in metrics.values())}}


def merged_health(blocks: Iterable[Any]) -> dict[str, Any]:
    """Shards' ``pairwise.health`` blocks as one: counts add up (shards judge disjoint cases), the first
    examples are kept (up to three per metric)."""
    metrics: dict[str, dict[str, Any]] = {}
    for block in blocks:
        if not isinstance(block, Mapping):
            continue
        for name, row in (block.get("metrics") or {}).items():
            if not isinstance(row, Mapping):
                continue
            total = metrics.setdefault(str(name), {})
            for key, value in row.items():
                if key == "examples" and isinstance(value, list):
                    total["examples"] = [*total.get("examples", []), *value][:3]
                elif isinstance(value, int) and not isinstance(value, bool):
                    total[key] = int(total.get(key, 0)) + value
    return {"metrics": dict(sorted(metrics.items())),
            "total": {"replies": sum(int(m.get("replies", 0)) for m in metrics.values()),
                      "unusable": sum(int(m.get("unusable", 0)) for m in metrics.values())}}
