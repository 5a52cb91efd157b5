"""Judge tokens per verdict on the bundled demo suites, counted with the real tokenizer, and every verdict.

``python -m bench.judge_tokens [--output FILE] [--provider openai|local] [--label NAME]``

Runs ``evalgate run`` (a subprocess, as a user runs it, ``--no-cache``) on the demo suites with recorded
answers against the deterministic demo judge (``evalgate.demo.judge``: word-overlap verdicts read from the
fenced blocks) behind a recording wrapper, then counts every judge request with tiktoken's ``cl100k_base``
(``evalgate.text.tokens``):

* prompt tokens = Σ over messages (tokens(content) + 3) + 3 (OpenAI's chat framing), per request;
* schema tokens = tokens of the ``response_format`` JSON (OpenAI bills a structured-output schema as prompt
  tokens too; reported apart because its exact framing is not published);
* completion tokens = tokens of the reply text.

Per template: requests, mean prompt / schema / completion tokens, and the fixed part of the prompt (the
tokens that are the same in every request of that template: the longest common prefix and suffix of its
requests' texts). ``verdicts`` maps ``case/metric`` → value from results.json, so two runs (before/after a
prompt change) can be compared verdict by verdict (``--compare OLD.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEMO_SUITES = ("blackbox-agent", "brand-mentions", "golden-dataset", "wikipedia-agent", "workflow-validation")
FRAMING = 3
"""Tokens OpenAI adds per message and once per reply (role, separators)."""


def count(text: str) -> int:
    from evalgate.text.tokens import count_tokens

    return count_tokens(text)[0]


def template_of(body: dict[str, Any]) -> str:
    fmt = body.get("response_format") or {}
    name = (fmt.get("json_schema") or {}).get("name") if isinstance(fmt, dict) else None
    return str(name or "prompt-mode").removesuffix("_verdict")


def record_judge() -> tuple[Any, list[tuple[dict[str, Any], str]]]:
    """The demo judge on a free loopback port, recording every (request body, reply text)."""
    from evalgate.demo.judge import CHAT_PATHS, make_chat
    from evalgate.demo.server import JsonServer

    chat = make_chat(None)
    seen: list[tuple[dict[str, Any], str]] = []
    lock = threading.Lock()

    def recorded(body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any]:
        status, reply = chat(body, headers)
        text = reply["choices"][0]["message"]["content"] if status == 200 else ""
        with lock:
            seen.append((body, text))
        return status, reply

    return JsonServer({path: recorded for path in CHAT_PATHS}).start(), seen


def measure(provider: str, combine: bool = False) -> dict[str, Any]:
    server, seen = record_judge()
    try:
        with tempfile.TemporaryDirectory() as scratch:
            out = Path(scratch) / "out"
            config = Path(scratch) / "evalgate.yaml"
            config.write_text(f"options:\n  judge_combine: {'true' if combine else 'false'}\n", encoding="utf-8")
            datasets = [arg for name in DEMO_SUITES for arg in ("-d", str(REPO / "datasets" / name))]
            env = {k: v for k, v in os.environ.items() if not k.startswith("EVALGATE_")}
            env.update({"OPENAI_API_KEY": "sk-bench", "LOCAL_JUDGE_API_KEY": "bench",
                        "EVALGATE_JUDGE_SHARED_CACHE": "none"})
            model = "gpt-4o-mini" if provider == "openai" else "demo-judge"
            command = [sys.executable, "-m", "evalgate", "run", *datasets, "--judge-provider", provider,
                       "--judge-base-url", server.base_url + "/v1", "--judge-model", model, "--no-cache",
                       "--output-dir", str(out), "--baseline", "none", "--progress", "none", "--concurrency", "4",
                       "--config", str(config)]
            done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
                                  check=False)
            results = json.loads((out / "results.json").read_text()) if (out / "results.json").exists() else None
    finally:
        server.stop()
    if results is None:
        raise SystemExit(f"evalgate run failed ({done.returncode}): {done.stderr[-2000:]}")
    return {**summarise(seen, results, provider), "judge_combine": combine}


def summarise(seen: list[tuple[dict[str, Any], str]], results: dict[str, Any], provider: str) -> dict[str, Any]:
    per: dict[str, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for body, reply in seen:
        name = template_of(body)
        texts = [str(m.get("content") or "") for m in body.get("messages", [])]
        per[name]["prompt"].append(sum(count(t) + FRAMING for t in texts) + FRAMING)
        per[name]["schema"].append(count(json.dumps(body["response_format"])) if body.get("response_format") else 0)
        per[name]["completion"].append(count(reply))
        per[name]["text"].append("\n".join(texts))
    templates = {}
    for name, data in sorted(per.items()):
        texts = data["text"]
        templates[name] = {
            "requests": len(texts),
            "prompt_tokens_mean": round(statistics.fmean(data["prompt"]), 1),
            "schema_tokens_mean": round(statistics.fmean(data["schema"]), 1),
            "completion_tokens_mean": round(statistics.fmean(data["completion"]), 1),
            "fixed_prompt_tokens": fixed_tokens(texts) if len(texts) > 1 else None,
        }
    prompts = [p for d in per.values() for p in d["prompt"]]
    schemas = [s for d in per.values() for s in d["schema"]]
    completions = [c for d in per.values() for c in d["completion"]]
    verdicts = {}
    judge_tokens = (results.get("summary") or {}).get("tokens") or {}
    for case in results.get("results", []):
        for metric, entry in (case.get("metrics") or {}).items():
            if (entry.get("details") or {}).get("method") == "judge":
                verdicts[f"{case['id']}/{metric}"] = [entry.get("value"), entry.get("status")]
    return {"provider": provider, "tokenizer": "cl100k_base", "requests": len(prompts),
            "per_verdict": {"prompt": round(statistics.fmean(prompts), 1),
                            "schema": round(statistics.fmean(schemas), 1),
                            "completion": round(statistics.fmean(completions), 1)},
            "judge_cost_usd": (results.get("summary") or {}).get("cost_usd"),
            "tokens_per_run": {"prompt": sum(prompts), "schema": sum(schemas), "completion": sum(completions),
                               "as_the_judge_reported": {"prompt": judge_tokens.get("judge_prompt"),
                                                         "completion": judge_tokens.get("judge_completion")}},
            "templates": templates, "verdicts": verdicts}


def fixed_tokens(texts: list[str]) -> int:
    """Tokens of the longest prefix plus the longest suffix that every text shares."""
    prefix = common_prefix(texts)
    suffix = common_prefix([t[len(prefix):][::-1] for t in texts])[::-1]
    return count(prefix) + (count(suffix) if suffix else 0)


def common_prefix(texts: list[str]) -> str:
    """The longest string every text starts with (character by character: these are texts, not paths)."""
    shortest = min(texts, key=len)
    for index, char in enumerate(shortest):
        if any(text[index] != char for text in texts):
            return shortest[:index]
    return shortest


def compare(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Verdicts equal in both runs, and which differ."""
    keys = set(old["verdicts"]) | set(new["verdicts"])
    differ = sorted(k for k in keys if old["verdicts"].get(k) != new["verdicts"].get(k))
    return {"verdicts": len(keys), "identical": len(keys) - len(differ), "differ": differ[:20]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--provider", default="openai", choices=("openai", "local"))
    parser.add_argument("--output", type=Path)
    parser.add_argument("--combine", action="store_true", help="the suite option judge_combine on")
    parser.add_argument("--compare", type=Path, help="an earlier output: verdicts compared one by one")
    args = parser.parse_args(argv)
    figures = measure(args.provider, args.combine)
    if args.compare is not None:
        figures["compared_with"] = {"file": str(args.compare),
                                    **compare(json.loads(args.compare.read_text()), figures)}
    text = json.dumps(figures, indent=1)
    if args.output:
        args.output.write_text(text + "\n", encoding="utf-8")
    shown = {k: v for k, v in figures.items() if k != "verdicts"}
    print(json.dumps(shown, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
