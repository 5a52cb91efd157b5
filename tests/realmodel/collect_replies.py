"""Collect real SmolLM2-135M replies to the judge prompts evalgate sends, as test fixtures (issue #31, item 4).

Starts the llama.cpp server (``harness.LlamaServer``) on a free loopback port, renders evalgate's own prompts
for ``policy``, ``correctness`` and ``relevancy`` on the shipped demo labels (``datasets/live/*.labels.yaml``:
hand-written questions with good and bad answers) and ``pairwise`` on the correctness pairs, sends each the
way a ``local`` judge does after the server refused ``json_schema`` (``response_format: {"type":
"json_object", "schema": …}`` with the enumerated scale, temperature 0, the template's ``max_tokens``) and
writes ``tests/fixtures/smollm2_replies/<kind>.json``: one entry per prompt with the messages as sent and the
raw reply text. ``tests/judges/test_health.py`` reads them.

    EVALGATE_REALMODEL_VENV=/path/.realmodel-venv python -m tests.realmodel.collect_replies [--limit N]
"""

from __future__ import annotations

import argparse
import http.client
import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from evalgate.judges.client import max_tokens_for
from evalgate.judges.output import response_format, schema_for
from evalgate.judges.pairwise import render_pair
from evalgate.judges.parse import schema_of
from evalgate.judges.prompts import RenderedPrompt, template_for_metric
from evalgate.metrics.registry import get_metric, load_builtin_metrics
from evalgate.model import Answer, Case

from .harness import LlamaServer, server_from_env

ROOT = Path(__file__).resolve().parents[2]
LABELS = ROOT / "datasets" / "live"
OUT = ROOT / "tests" / "fixtures" / "smollm2_replies"
MODE = "json_object"


def examples(name: str) -> list[dict[str, Any]]:
    return list(yaml.safe_load((LABELS / name).read_text(encoding="utf-8"))["cases"])


def case_of(example: dict[str, Any]) -> Case:
    return Case(id=str(example["id"]), input=example.get("input"), expected_output=example.get("expected_output"),
                passing_criteria=example.get("passing_criteria"), category=example.get("category"))


def prompts(limit: int | None) -> dict[str, list[tuple[str, RenderedPrompt]]]:
    load_builtin_metrics()
    found: dict[str, list[tuple[str, RenderedPrompt]]] = {"policy": [], "correctness": [], "relevancy": [],
                                                          "pairwise": []}
    for example in examples("policy.labels.yaml"):
        found["policy"].append((example["id"], template_for_metric("policy").render(
            case_of(example), Answer(output=example["output"]))))
    for example in examples("correctness.labels.yaml"):
        for metric in ("correctness", "relevancy"):
            found[metric].append((example["id"], template_for_metric(metric).render(
                case_of(example), Answer(output=example["output"]))))
    metric = get_metric("correctness")
    for example in examples("correctness-pairwise.labels.yaml"):
        found["pairwise"].append((example["id"], render_pair(metric, case_of(example), example["answer_a"],
                                                             example["answer_b"])))
    return {kind: items[:limit] if limit else items for kind, items in found.items()}


def ask(base_url: str, prompt: RenderedPrompt) -> tuple[str, float]:
    template = prompt.template
    body = {"model": "smollm2", "messages": list(prompt.messages_for(MODE)), "temperature": 0.0,
            "max_tokens": max_tokens_for(template),
            "response_format": response_format(MODE, f"{template.name}_verdict",
                                               schema_for("local", schema_of(template.verdict)))}
    parts = urlsplit(base_url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=600)
    started = time.monotonic()
    try:
        connection.request("POST", f"{parts.path}/chat/completions", json.dumps(body),
                           {"Content-Type": "application/json", "Authorization": "Bearer any-string"})
        reply = json.loads(connection.getresponse().read())
    finally:
        connection.close()
    return str(reply["choices"][0]["message"]["content"]), time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="prompts per kind (default: all)")
    args = parser.parse_args()
    found = server_from_env()
    if isinstance(found, str):
        raise SystemExit(found)
    python, gguf = found
    server = LlamaServer(python, gguf)
    base_url = server.start()
    OUT.mkdir(parents=True, exist_ok=True)
    try:
        for kind, items in prompts(args.limit).items():
            entries = []
            for case_id, prompt in items:
                text, seconds = ask(base_url, prompt)
                print(f"{kind} {case_id} {seconds:.1f}s {text[:100]!r}", flush=True)
                entries.append({"kind": kind, "template": prompt.template.name, "version": prompt.version,
                                "case": case_id, "output_mode": MODE, "model": Path(gguf).name,
                                "messages": [dict(m) for m in prompt.messages_for(MODE)], "reply": text})
            (OUT / f"{kind}.json").write_text(json.dumps(entries, indent=1, ensure_ascii=False) + "\n",
                                             encoding="utf-8")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
