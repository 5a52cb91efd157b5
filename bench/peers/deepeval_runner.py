"""DeepEval side of the judged scenario; runs inside bench/scratch/deepeval-venv (stdlib + aiohttp +
deepeval only, never imports evalgate).

DeepEval has no HTTP target, so, as the issue prescribes, the answers are fetched first (aiohttp, at
most C requests in flight, one ``POST {"message": question}`` per case to the loopback agent) and then
scored by ``deepeval.evaluate`` with one GEval metric whose judge is DeepEval's own ``LocalModel``
pointed at the loopback OpenAI-compatible server, ``AsyncConfig(max_concurrent=C)`` and no cache.
Evaluation steps are given, so GEval makes exactly one judge call per case.

An agent that answers 429 (scenario ``limits``) gets the request again after its ``Retry-After`` (at most
``FETCH_ATTEMPTS`` times): the fetch stands in for the HTTP target DeepEval lacks, and a user's would retry.
With ``--answers FILE`` (JSON lines ``{"question", "answer"}``, scenario ``incremental``) nothing is
fetched; ``--use-cache`` turns DeepEval's own cache on (``.deepeval/.deepeval-cache.json`` in the
working directory, read and written).

Usage: python deepeval_runner.py (--cases FILE --agent-url URL | --answers FILE) --judge-base-url URL
       --model NAME --concurrency C --out FILE [--use-cache]
Writes {"fetched", "fetch_seconds", "evaluate_seconds", "scored", "errors", "first_error", "fetch_retries",
"verdicts"} to --out (``verdicts``: per case, whether GEval passed it; None when it errored).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

EVALUATION_STEPS = [
    "Check whether the actual output responds to the question in the input.",
    "Check whether it names the topic of the question.",
    "Check whether it gives a concrete next step.",
]


FETCH_ATTEMPTS = 10
RETRIES = [0]


async def fetch_answers(questions: list[str], url: str, concurrency: int) -> list[str]:
    import aiohttp

    limit = asyncio.Semaphore(concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(question: str) -> str:
            for _ in range(FETCH_ATTEMPTS - 1):
                async with limit, session.post(url, json={"message": question}) as response:
                    if response.status != 429:
                        response.raise_for_status()
                        return str((await response.json())["response"])
                    wait = float(response.headers.get("Retry-After", "1"))
                RETRIES[0] += 1
                await asyncio.sleep(wait)
            async with limit, session.post(url, json={"message": question}) as response:
                response.raise_for_status()
                return str((await response.json())["response"])

        return list(await asyncio.gather(*(one(q) for q in questions)))


def evaluate(questions: list[str], answers: list[str], args: argparse.Namespace) -> dict[str, Any]:
    from deepeval import evaluate as deepeval_evaluate
    from deepeval.evaluate.configs import AsyncConfig, CacheConfig, DisplayConfig, ErrorConfig
    from deepeval.metrics import GEval
    from deepeval.models import LocalModel
    from deepeval.test_case import LLMTestCase, LLMTestCaseParams

    judge = LocalModel(model=args.model, base_url=args.judge_base_url, api_key="sk-bench-loopback", temperature=0)
    metric = GEval(name="relevancy", evaluation_steps=EVALUATION_STEPS, model=judge, async_mode=True,
                   evaluation_params=[LLMTestCaseParams.INPUT, LLMTestCaseParams.ACTUAL_OUTPUT])
    cases = [LLMTestCase(input=q, actual_output=a) for q, a in zip(questions, answers, strict=True)]
    result = deepeval_evaluate(
        cases, [metric],
        async_config=AsyncConfig(run_async=True, max_concurrent=args.concurrency),
        cache_config=CacheConfig(write_cache=args.use_cache, use_cache=args.use_cache),
        display_config=DisplayConfig(show_indicator=False, print_results=False, inspect_after_run=False),
        error_config=ErrorConfig(ignore_errors=True),
    )
    scored, errors, first_error = 0, 0, None
    verdicts: dict[str, bool | None] = {}
    for test in result.test_results:
        for data in test.metrics_data or []:
            if data.error is None and data.score is not None:
                scored += 1
                verdicts[str(test.input)] = bool(data.success)
            else:
                errors += 1
                verdicts[str(test.input)] = None
                first_error = first_error or str(data.error)[:300]
    return {"scored": scored, "errors": errors, "first_error": first_error,
            "verdicts": [verdicts.get(q) for q in questions]}


def main() -> None:
    parser = argparse.ArgumentParser()
    for flag in ("--judge-base-url", "--model", "--out"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--cases")
    parser.add_argument("--agent-url")
    parser.add_argument("--answers")
    parser.add_argument("--use-cache", action="store_true")
    parser.add_argument("--concurrency", type=int, required=True)
    args = parser.parse_args()
    started = time.perf_counter()
    if args.answers:
        rows = [json.loads(line) for line in Path(args.answers).read_text().splitlines() if line]
        questions, answers = [r["question"] for r in rows], [r["answer"] for r in rows]
    else:
        questions = [json.loads(line)["question"] for line in Path(args.cases).read_text().splitlines() if line]
        answers = asyncio.run(fetch_answers(questions, args.agent_url, args.concurrency))
    fetched = time.perf_counter()
    summary = evaluate(questions, answers, args)
    done = time.perf_counter()
    summary |= {"fetched": len(answers), "fetch_seconds": round(fetched - started, 3), "fetch_retries": RETRIES[0],
                "evaluate_seconds": round(done - fetched, 3)}
    Path(args.out).write_text(json.dumps(summary))


if __name__ == "__main__":
    main()
