"""The control: the same calls with nothing else, to show what this machine allows at this moment.

C workers, each with one keep-alive HTTP/1.1 connection to the agent (and one to the judge), take the
next question from a shared iterator: ``POST {"message": q}`` to the agent, then, in the judged
scenario, one chat completion asking the judge for a JSON verdict. The client is a minimal
hand-written one over ``asyncio`` streams (fixed request shape, ``Content-Length`` replies only, which
is what the loopback servers send), so its cost per call is close to the least Python can do. No
scoring, no storage: its efficiency is the ceiling for any Python tool on the machine as loaded.

Usage: python -m bench.floor --questions FILE --agent-url URL [--judge-base-url URL] --concurrency C --out FILE
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

JUDGE_MODEL = "bench-judge-floor"
SYSTEM = 'Grade the answer. Reply with JSON: {"reasoning": str, "score": number}.'


class Connection:
    """One keep-alive HTTP/1.1 connection that POSTs JSON and reads a ``Content-Length`` JSON reply."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port, self.path = parts.hostname or "127.0.0.1", parts.port or 80, parts.path or "/"
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, payload: Any) -> Any:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        body = json.dumps(payload).encode()
        head = (f"POST {self.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nContent-Type: application/json\r\n"
                f"Authorization: Bearer sk-bench-loopback\r\nContent-Length: {len(body)}\r\n\r\n")
        self.writer.write(head.encode() + body)
        status_line, _, headers = (await self.reader.readuntil(b"\r\n\r\n")).partition(b"\r\n")
        if b" 200 " not in status_line:
            raise RuntimeError(status_line.decode(errors="replace"))
        length = next(int(line.split(b":", 1)[1]) for line in headers.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        return json.loads(await self.reader.readexactly(length))

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def worker(questions: Iterator[str], agent_url: str, judge_url: str | None) -> int:
    agent, judge = Connection(agent_url), Connection(judge_url) if judge_url else None
    done = 0
    try:
        for question in questions:
            answer = (await agent.post({"message": question}))["response"]
            if judge is not None:
                reply = await judge.post({"model": JUDGE_MODEL, "messages": [
                    {"role": "system", "content": SYSTEM},
                    {"role": "user", "content": f"Question: {question}\nAnswer: {answer}"}]})
                if "score" not in json.loads(reply["choices"][0]["message"]["content"]):
                    continue
            done += 1
    finally:
        agent.close()
        if judge is not None:
            judge.close()
    return done


async def run(questions: list[str], agent_url: str, judge_base_url: str | None, concurrency: int) -> int:
    judge_url = None if judge_base_url is None else judge_base_url.rstrip("/") + "/chat/completions"
    shared = iter(questions)
    counts = await asyncio.gather(*(worker(shared, agent_url, judge_url) for _ in range(concurrency)))
    return sum(counts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", required=True, type=Path)
    parser.add_argument("--agent-url", required=True)
    parser.add_argument("--judge-base-url")
    parser.add_argument("--concurrency", required=True, type=int)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    questions = [json.loads(line)["question"] for line in args.questions.read_text().splitlines() if line]
    started = time.perf_counter()
    scored = asyncio.run(run(questions, args.agent_url, args.judge_base_url, args.concurrency))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"scored": scored, "seconds": round(time.perf_counter() - started, 3)}))


if __name__ == "__main__":
    main()
