"""Scenario ``batch``: the base branch's run (1,000 judged cases with recorded answers, as in ``incremental``)
paid directly and through the batch interface (``judge_mode: batch``).

``python -m bench.batch [--cases N] [--output FILE]``

The judge is the loopback server with OpenAI's Files and Batch endpoints
(``tests.servers.openai_batch_server``, scoring each prompt by its sha256 like ``incremental``, so a
verdict taken from the wrong request would show); each run is ``evalgate run --no-cache`` in its own
process. Per run: wall time, judge requests the server answered directly and through batches, tokens
it counted, the cost at gpt-4o-mini's list price (direct) and at half of it for batched requests (OpenAI's
batch price), evalgate's own reported cost, and whether every case's verdict equals the direct run's.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import cases as content
from bench.tools import EVALGATE_JUDGE_MODEL, LOOPBACK_KEY, base_env, evalgate_command
from tests.servers.openai_batch_server import BatchOpenAIServer
from tests.servers.openai_server import Judge

PRICE_INPUT, PRICE_OUTPUT = 0.15, 0.60
BATCH_FACTOR = 0.5


def run_batch_scenario(cases: int, workdir: Path) -> dict[str, Any]:
    import subprocess

    dataset = workdir / "base.jsonl"
    content.write_jsonl(dataset, ({"id": content.case_id(i), "input": content.question(i),
                                   "output": content.agent_answer(i), "passing_criteria": content.JUDGED_CRITERIA,
                                   "metrics": ["relevancy"]}
                                  for i in range(cases)))
    results: dict[str, Any] = {}
    with BatchOpenAIServer(api_key=LOOPBACK_KEY, judge=Judge(spread=(0.3, 1.0)), steps=3) as judge:
        for mode in ("direct", "batch"):
            judge.reset()
            out = workdir / mode
            env = base_env(OPENAI_API_KEY=LOOPBACK_KEY, EVALGATE_PRICES=json.dumps(
                {EVALGATE_JUDGE_MODEL: {"input": PRICE_INPUT, "output": PRICE_OUTPUT}}),
                EVALGATE_JUDGE_BATCH_POLL_SECONDS="0.5", EVALGATE_JUDGE_BATCH_QUIET_SECONDS="1")
            argv = [*evalgate_command(), "run", "-d", str(dataset), "--output-dir", str(out), "--progress", "none",
                    "--judge-provider", "openai", "--judge-model", EVALGATE_JUDGE_MODEL, "--judge-base-url",
                    judge.base_url + "/v1", "--concurrency", "16", "--no-cache", "--judge-mode", mode]
            started = time.monotonic()
            done = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True, timeout=900, check=False)
            wall = time.monotonic() - started
            document = json.loads((out / "results.json").read_text(encoding="utf-8"))
            usage = judge.extra_stats().get("usage", {})
            batched = len(judge.batch_requests())
            direct = len(judge.chat_requests())
            factor = BATCH_FACTOR if mode == "batch" and batched and not direct else 1.0
            results[mode] = {
                "returncode": done.returncode, "wall_s": round(wall, 2),
                "judge_requests_direct": direct, "judge_requests_batched": batched,
                "batches_created": judge.batch_calls["batches.create"],
                "prompt_tokens": usage.get("prompt_tokens", 0), "completion_tokens": usage.get("completion_tokens", 0),
                "cost_usd": round(factor * (usage.get("prompt_tokens", 0) * PRICE_INPUT
                                            + usage.get("completion_tokens", 0) * PRICE_OUTPUT) / 1e6, 6),
                "evalgate_reported_usd": document["summary"].get("cost_usd"),
                "verdicts": {r["id"]: r["metrics"]["relevancy"]["value"] for r in document["results"]},
            }
    same = results["direct"]["verdicts"] == results["batch"]["verdicts"]
    for entry in results.values():
        entry["verdicts"] = len(entry.pop("verdicts"))
    direct_cost = results["direct"]["cost_usd"]
    return {"cases": cases, "runs": results, "verdicts_identical": same,
            "batch_cost_share": round(results["batch"]["cost_usd"] / direct_cost, 4) if direct_cost else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        figures = run_batch_scenario(args.cases, Path(scratch))
    text = json.dumps(figures, indent=1)
    if args.output:
        args.output.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
