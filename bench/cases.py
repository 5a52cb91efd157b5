"""Deterministic benchmark content: the same N cases, answers and rubrics for every tool.

Nothing here is random at run time: every value is a pure function of the case number ``i`` (choices
use ``pick(items, i, salt) = items[(i · 2654435761 + salt · 40503) mod len(items)]``), so two runs of the
generator write byte-identical files.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

TOPICS = ("pricing", "onboarding", "refunds", "latency", "security", "billing", "exports", "webhooks",
          "quotas", "retention", "sso", "backups")
VERBS = ("configure", "audit", "reset", "migrate", "monitor", "rotate", "limit", "enable")
OBJECTS = ("the API key", "the staging workspace", "the nightly export", "the audit log", "the rate limit",
           "the billing alert", "the SSO connector", "the backup policy")
ARTICLES = ("Consumer behaviour", "Buyer decision process", "Behavioral economics", "Marketing mix",
            "Brand equity", "Customer lifetime value", "Price elasticity", "Market segmentation",
            "Net promoter score", "Diffusion of innovations")
BRANDS = ("HubSpot", "Salesforce", "Pipedrive", "Zoho", "Freshsales", "Monday.com", "Close", "Copper")
AGENTS = ("research", "clarification", "summariser", "planner")
TOOLS = ("pdf_retrieval", "web_search", "citation_lookup", "calculator")
SPECIALISTS = ("procedure_expert", "safety_officer", "maintenance_planner", "quality_lead")
KEYWORDS = ("lockout", "tagout", "isolate", "verify", "torque", "calibrate", "inspect", "sanitise",
            "record", "escalate")
DATA_SOURCES = ("rag", "sql", "api")
FAMILIES = ("retrieval", "mentions", "workflow", "golden", "rules")

RUBRIC = ("The answer responds to the question it was asked, names the topic of the question and gives "
          "a concrete next step.")
JUDGED_CRITERIA = RUBRIC


def pick(items: Sequence[T], i: int, salt: int = 0) -> T:
    """A deterministic, well-spread choice: ``items[(i·2654435761 + salt·40503) mod len(items)]``."""
    return items[(i * 2654435761 + salt * 40503) % len(items)]


def pick_many(items: Sequence[T], i: int, count: int, salt: int = 0) -> list[T]:
    """``count`` distinct items starting at ``pick(items, i, salt)`` and walking the sequence."""
    start = (i * 2654435761 + salt * 40503) % len(items)
    return [items[(start + k) % len(items)] for k in range(min(count, len(items)))]


def case_id(i: int) -> str:
    return f"bench-{i:06d}"


def question(i: int) -> str:
    """The question text of case ``i`` (unique per i)."""
    return f"Case {i}: how do I {pick(VERBS, i, 1)} {pick(OBJECTS, i, 2)} for {pick(TOPICS, i, 3)}?"


def agent_answer(i: int) -> str:
    """What the loopback agent answers to ``question(i)``; starts with the marker ``Answer {i}:``."""
    return (f"Answer {i}: to {pick(VERBS, i, 1)} {pick(OBJECTS, i, 2)} for {pick(TOPICS, i, 3)}, open the "
            f"settings page, choose {pick(TOPICS, i, 3)} and follow the two-step check.")


def answer_marker(i: int) -> str:
    return f"Answer {i}:"


# --- the HTTP scenarios ------------------------------------------------------------------------------------


def judged_case(i: int) -> dict[str, Any]:
    """An evalgate case whose only applicable metric is the judged ``relevancy`` (one judge call)."""
    return {"id": case_id(i), "input": question(i), "passing_criteria": JUDGED_CRITERIA, "metrics": ["relevancy"]}


def http_rules_case(i: int) -> dict[str, Any]:
    """An evalgate case whose only applicable metric is the deterministic ``rules`` (a contains check)."""
    return {"id": case_id(i), "input": question(i),
            "rules": [{"type": "contains", "value": answer_marker(i), "name": "answer-marker"}]}


def agent_script(n: int) -> dict[str, Any]:
    """Loopback agent script (``tests.servers.agent_server --script``): question(i) → agent_answer(i)."""
    return {"answers": {question(i): agent_answer(i) for i in range(n)}, "default": "no scripted answer"}


# --- the deterministic scale scenario ----------------------------------------------------------------------


def _retrieval(i: int) -> dict[str, Any]:
    expected = pick_many(ARTICLES, i, 2, 4)
    retrieved = pick_many(ARTICLES, i + (i % 3), 3, 4)
    return {"input": question(i), "category": "retrieval", "expected_sources": expected, "sources": retrieved,
            "output": f"{agent_answer(i)} See {retrieved[0]}.", "num_tokens": 900 + (i % 1700)}


def _mentions(i: int) -> dict[str, Any]:
    brands = pick_many(BRANDS, i, 4, 5)
    mine, competitors = brands[:1], brands[1:]
    listed = brands[: 2 + i % 3]
    text = "The best CRM tools are:\n" + "\n".join(f"{k + 1}. {b} - option {k + 1}" for k, b in enumerate(listed))
    return {"input": question(i), "category": "crm", "llm_answer_text": text, "brands_mine": mine,
            "brands_competitors": competitors, "expected_my_mentions": [b for b in mine if b in listed],
            "expected_competitor_mentions": [b for b in competitors if b in listed],
            "expected_ranked_list": listed}


def _workflow(i: int) -> dict[str, Any]:
    agents = pick_many(AGENTS, i, 2, 6)
    tools = pick_many(TOOLS, i, 2, 7)
    called = ["orchestrator", agents[0]] + ([agents[1]] if i % 4 == 0 else [])
    return {"input": question(i), "category": "workflow", "agents_should_include": [agents[0]],
            "agents_should_exclude": [agents[1]], "tools_should_include": [tools[0]],
            "tools_should_exclude": [tools[1]], "agents_called": called, "tools_used": [tools[0]],
            "output": agent_answer(i)}


def _golden(i: int) -> dict[str, Any]:
    keywords = pick_many(KEYWORDS, i, 4, 8)
    specialist = pick(SPECIALISTS, i, 9)
    said = keywords[: 3 + i % 2]
    return {"input": question(i), "category": "procedure", "expected_specialist": specialist,
            "expected_keywords": keywords, "expected_data_sources": [pick(DATA_SOURCES, i, 10)],
            "agent_id": specialist, "data_sources": [pick(DATA_SOURCES, i, 10)],
            "output": f"{agent_answer(i)} Steps: " + ", then ".join(said) + "."}


def _rules(i: int) -> dict[str, Any]:
    return {"input": question(i), "category": "rules", "risk_level": "critical" if i % 50 == 0 else "medium",
            "rules": [{"type": "contains", "value": answer_marker(i)},
                      {"type": "regex", "value": r"\b(settings|page)\b"},
                      {"type": "max_length", "value": 400}],
            "output": agent_answer(i)}


_FAMILY_BUILDERS = (_retrieval, _mentions, _workflow, _golden, _rules)


def deterministic_case(i: int) -> dict[str, Any]:
    """Case ``i`` of the scale suite: the five seed families in rotation, answers recorded inline."""
    return {"id": case_id(i), **_FAMILY_BUILDERS[i % len(_FAMILY_BUILDERS)](i)}


# --- writers -------------------------------------------------------------------------------------------------


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> int:
    """Write one compact JSON object per line; returns the number of rows."""
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, separators=(",", ":")) + "\n")
            count += 1
    return count


def cases(builder: Any, n: int) -> Iterator[dict[str, Any]]:
    return (builder(i) for i in range(n))


def recorded_dataset(path: Path, cases: int) -> Path:
    """``cases`` recorded cases in JSONL (every fifth fails its keyword check)."""
    with path.open("w") as handle:
        for i in range(cases):
            handle.write(json.dumps({"id": f"s{i:06d}", "input": f"question {i}", "output": f"answer {i}",
                                     "expected_keywords": ["answer"] if i % 5 else ["missing"]}) + "\n")
    return path
