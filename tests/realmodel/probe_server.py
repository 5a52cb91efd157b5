#!/usr/bin/env python3
"""Raw measurements of llama.cpp's OpenAI-compatible server with SmolLM2-135M (FINDINGS.md sections b and c).

    python3 tests/realmodel/probe_server.py shapes                 # which response_format shapes work
    python3 tests/realmodel/probe_server.py readable --prompts 24  # readable verdicts per mode
    python3 tests/realmodel/probe_server.py latency --threads 2    # per-call latency, concurrency, disconnect

Starts its own server on a free loopback port from the venv ``install.py`` made (``--base-url`` uses a
running one instead) and stops it at the end. Prompts are built from the bundled demo suites' questions
and recorded answers, read through ``evalgate run`` (no judge) so nothing depends on the package's
layout. Prints one JSON object per measurement. Stdlib only.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.realmodel import harness, install

REPO = install.REPO
VERDICT_SCHEMA = {
    "type": "object",
    "properties": {"reasoning": {"type": "string"}, "score": {"type": "number", "minimum": 0, "maximum": 1}},
    "required": ["reasoning", "score"],
}
SYSTEM = ("You are an impartial evaluator. Judge the answer to the question for correctness and helpfulness. "
          'Reply with only a JSON object: {"reasoning": "<one or two sentences>", "score": <number from 0 to 1>}.')


@contextmanager
def server(threads: int, base_url: str | None = None):
    """Yield the base URL of a llama.cpp server (started here with ``threads`` threads unless given)."""
    if base_url:
        yield base_url.rstrip("/")
        return
    found = harness.server_from_env()
    if isinstance(found, str):
        raise SystemExit(found)
    llama = harness.LlamaServer(*found, threads=threads)
    try:
        url = llama.start()
        print(json.dumps({"server": url, "threads": threads, "log": str(llama.log)}), flush=True)
        yield url
    finally:
        llama.stop()


def request(base_url: str, method: str, path: str, body: dict | None, *, timeout: float = 300
            ) -> tuple[int, dict | str, float]:
    """One HTTP call: (status, parsed JSON or text, seconds)."""
    parts = urlsplit(base_url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    started = time.perf_counter()
    try:
        payload = None if body is None else json.dumps(body)
        connection.request(method, parts.path + path, payload, {"Content-Type": "application/json",
                                                                "Authorization": "Bearer any"})
        response = connection.getresponse()
        text = response.read().decode("utf-8", "replace")
    finally:
        connection.close()
    elapsed = time.perf_counter() - started
    try:
        return response.status, json.loads(text), elapsed
    except ValueError:
        return response.status, text, elapsed


def chat(base_url: str, messages: list[dict], *, max_tokens: int = 1024, **extra) -> tuple[int, dict | str, float]:
    body = {"model": "smollm2", "messages": messages, "max_tokens": max_tokens, "temperature": 0, "seed": 20261122}
    return request(base_url, "POST", "/chat/completions", {**body, **extra})


def content(reply: dict | str) -> str | None:
    try:
        return reply["choices"][0]["message"]["content"]  # type: ignore[index]
    except (KeyError, IndexError, TypeError):
        return None


def verdict(text: str | None, *, tolerant: bool) -> dict | None:
    """The verdict in ``text``: the whole reply as JSON, or (tolerant) the last embedded ``{...}`` that parses."""
    if text is None:
        return None
    candidates = [text.strip()]
    if tolerant:
        candidates += [m.group(0) for m in re.finditer(r"\{[^{}]*\}", text)][::-1]
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if (isinstance(value, dict) and isinstance(value.get("reasoning"), str)
                and isinstance(value.get("score"), int | float) and not isinstance(value.get("score"), bool)):
            return value
    return None


def prompts(count: int) -> list[list[dict]]:
    """``count`` judge prompts from the demo suites' questions and recorded answers."""
    pairs = []
    with tempfile.TemporaryDirectory() as out:
        for suite in ("golden-dataset", "wikipedia-agent", "blackbox-agent", "brand-mentions"):
            subprocess.run([*harness.evalgate_command(), "run", "-d", str(REPO / "datasets" / suite),
                            "-o", f"{out}/{suite}", "--progress", "none", "--baseline", "none"],
                           cwd=out, capture_output=True, check=False)
            results = json.loads(Path(out, suite, "results.json").read_text())["results"]
            pairs += [(case["input"], case["output"]) for case in results if case.get("output")]
    step = max(1, len(pairs) // count)
    chosen = pairs[::step][:count]
    return [[{"role": "system", "content": SYSTEM},
             {"role": "user", "content": f"Question:\n{question}\n\nAnswer:\n{answer}\n\nReturn the JSON verdict."}]
            for question, answer in chosen]


# --- b: request shapes --------------------------------------------------------------------------------------

SHAPES: dict[str, dict] = {
    "none (today's local provider)": {},
    "response_format json_schema (OpenAI)": {"response_format": {"type": "json_schema", "json_schema": {
        "name": "verdict", "schema": VERDICT_SCHEMA, "strict": True}}},
    "response_format json_schema strict false": {"response_format": {"type": "json_schema", "json_schema": {
        "name": "verdict", "schema": VERDICT_SCHEMA, "strict": False}}},
    "response_format json_object + schema": {"response_format": {"type": "json_object", "schema": VERDICT_SCHEMA}},
    "response_format json_object (no schema)": {"response_format": {"type": "json_object"}},
    "response_format json_object + json_schema key": {"response_format": {"type": "json_object", "json_schema": {
        "name": "verdict", "schema": VERDICT_SCHEMA}}},
    "response_format text": {"response_format": {"type": "text"}},
    "top-level json_schema (llama.cpp C++ server)": {"json_schema": VERDICT_SCHEMA},
    "top-level format (Ollama)": {"format": VERDICT_SCHEMA},
    "top-level guided_json (vLLM)": {"guided_json": VERDICT_SCHEMA},
    "top-level grammar (GBNF)": {"grammar": 'root ::= "{\\"reasoning\\": \\"ok\\", \\"score\\": " [01] "}"'},
    "unknown top-level field": {"no_such_field": 1},
}


def shapes(base_url: str, args: argparse.Namespace) -> None:
    messages = prompts(1)[0]
    for name, extra in SHAPES.items():
        status, reply, seconds = chat(base_url, messages, **extra)
        text = content(reply)
        print(json.dumps({"shape": name, "status": status, "seconds": round(seconds, 2),
                          "strict_verdict": verdict(text, tolerant=False) is not None,
                          "reply": (text if text is not None else str(reply))[:300]}), flush=True)


# --- b: readable fraction -----------------------------------------------------------------------------------

MODES: dict[str, dict] = {
    "prompt-only": {},
    "json_object": {"response_format": {"type": "json_object"}},
    "json_object+schema": {"response_format": {"type": "json_object", "schema": VERDICT_SCHEMA}},
    "json_object+schema(maxLength 300)": {"response_format": {"type": "json_object", "schema": {
        **VERDICT_SCHEMA, "properties": {**VERDICT_SCHEMA["properties"],
                                         "reasoning": {"type": "string", "maxLength": 300}}}}},
    "json_object+schema(score enum)": {"response_format": {"type": "json_object", "schema": {
        **VERDICT_SCHEMA, "properties": {**VERDICT_SCHEMA["properties"],
                                         "score": {"type": "number", "enum": [i / 10 for i in range(11)]}}}}},
}


def readable(base_url: str, args: argparse.Namespace) -> None:
    batch = prompts(args.prompts)
    for mode in args.modes or MODES:
        extra = MODES[mode]
        rows = []
        for messages in batch:
            status, reply, seconds = chat(base_url, messages, max_tokens=args.max_tokens, **extra)
            text = content(reply)
            strict, loose = verdict(text, tolerant=False), verdict(text, tolerant=True)
            finish = reply["choices"][0].get("finish_reason") if isinstance(reply, dict) and text is not None else None
            rows.append({"status": status, "seconds": seconds, "strict": strict, "tolerant": loose,
                         "finish": finish, "tokens": (reply.get("usage") or {}).get("completion_tokens")
                         if isinstance(reply, dict) else None})
        on_scale = [r for r in rows if r["strict"] and 0 <= r["strict"]["score"] <= 1]
        print(json.dumps({
            "mode": mode, "prompts": len(rows), "max_tokens": args.max_tokens,
            "http_200": sum(r["status"] == 200 for r in rows),
            "strict_readable": sum(r["strict"] is not None for r in rows),
            "strict_readable_on_scale": len(on_scale),
            "tolerant_readable": sum(r["tolerant"] is not None for r in rows),
            "finish_length": sum(r["finish"] == "length" for r in rows),
            "scores": [r["strict"]["score"] if r["strict"] else None for r in rows],
            "completion_tokens_median": statistics.median([r["tokens"] or 0 for r in rows]),
            "seconds_median": round(statistics.median(r["seconds"] for r in rows), 2),
            "seconds_max": round(max(r["seconds"] for r in rows), 2),
        }), flush=True)


# --- c: latency, concurrency, disconnect --------------------------------------------------------------------

LONG = [{"role": "user", "content": "Write the numbers from 1 to 400 separated by commas, nothing else."}]
SHORT = [{"role": "user", "content": "Say hi."}]


def latency(base_url: str, args: argparse.Namespace) -> None:
    batch = prompts(args.prompts)
    schema = MODES["json_object+schema"]
    chat(base_url, SHORT, max_tokens=4)  # warm-up
    sequential = [chat(base_url, m, **schema) for m in batch]
    seconds = [s for _, _, s in sequential]
    tokens = [r["usage"]["completion_tokens"] for _, r, _ in sequential if isinstance(r, dict) and "usage" in r]
    print(json.dumps({"measure": "sequential schema calls", "threads": args.threads, "calls": len(seconds),
                      "seconds_median": round(statistics.median(seconds), 2), "seconds_min": round(min(seconds), 2),
                      "seconds_max": round(max(seconds), 2), "completion_tokens_median": statistics.median(tokens),
                      "tokens_per_second": round(sum(tokens) / sum(seconds), 1), "load": os.getloadavg()}),
          flush=True)

    results: list[tuple[int, float, float]] = []
    started = time.perf_counter()

    def one(index: int) -> None:
        sent = time.perf_counter() - started
        _, _, took = chat(base_url, batch[index % len(batch)], **schema)
        results.append((index, sent, took))

    workers = [threading.Thread(target=one, args=(i,)) for i in range(args.concurrency)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    wall = time.perf_counter() - started
    print(json.dumps({"measure": f"{args.concurrency} concurrent schema calls", "threads": args.threads,
                      "wall_seconds": round(wall, 2),
                      "per_call_seconds": sorted(round(took, 2) for _, _, took in results),
                      "sum_of_sequential_medians": round(args.concurrency * statistics.median(seconds), 2),
                      "load": os.getloadavg()}),
          flush=True)

    idle = [chat(base_url, SHORT, max_tokens=8)[2] for _ in range(3)]
    _, reply, long_seconds = chat(base_url, LONG, max_tokens=args.long_tokens)
    long_tokens = reply["usage"]["completion_tokens"] if isinstance(reply, dict) else None
    for stream in (False, True):
        abandoned_after = 1.0
        abandon(base_url, LONG, args.long_tokens, abandoned_after, stream=stream)
        try:
            following: float | str = round(chat(base_url, SHORT, max_tokens=8)[2], 2)
        except TimeoutError:
            following = "timed out after 300 s"
        print(json.dumps({"measure": "client disconnects mid-generation", "stream": stream, "threads": args.threads,
                          "short_call_idle_seconds": round(statistics.median(idle), 2),
                          "long_call_seconds": round(long_seconds, 2), "long_call_tokens": long_tokens,
                          "abandoned_after_seconds": abandoned_after,
                          "next_short_call_seconds": following, "load": os.getloadavg()}), flush=True)


def abandon(base_url: str, messages: list[dict], max_tokens: int, after: float, *, stream: bool) -> None:
    """Send a chat request and close the connection ``after`` seconds later, as a timed-out client does."""
    parts = urlsplit(base_url)
    body = json.dumps({"model": "smollm2", "messages": messages, "max_tokens": max_tokens, "temperature": 0,
                       "stream": stream}).encode()
    head = (f"POST {parts.path}/chat/completions HTTP/1.1\r\nHost: {parts.netloc}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    with socket.create_connection((parts.hostname, parts.port)) as sock:
        sock.sendall(head + body)
        time.sleep(after)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("shapes", "readable", "latency"))
    parser.add_argument("--base-url", help="use this running server instead of starting one")
    parser.add_argument("--threads", type=int, default=1, help="n_threads and n_threads_batch (default 1)")
    parser.add_argument("--prompts", type=int, default=24)
    parser.add_argument("--max-tokens", type=int, default=1024, help="completion cap (evalgate's judge cap: 1024)")
    parser.add_argument("--modes", nargs="*", choices=list(MODES))
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--long-tokens", type=int, default=600)
    args = parser.parse_args()
    with server(args.threads, args.base_url) as url:
        {"shapes": shapes, "readable": readable, "latency": latency}[args.what](url, args)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("LOCAL_JUDGE_API_KEY", "any")
    sys.exit(main())
