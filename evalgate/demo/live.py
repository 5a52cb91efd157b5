"""The "live" example: start the demo agent and the scripted judge on 127.0.0.1, then run
``datasets/live`` against them with the http target and the ``local`` judge provider.

    python -m evalgate.demo.live [extra evalgate run options, e.g. --verbose --no-cache]

Equivalent command pair (two terminals, or background the servers):

    python -m evalgate.demo.agent --port 8011 &  python -m evalgate.demo.judge --port 8012 &
    LOCAL_JUDGE_API_KEY=unused evalgate run --dataset datasets/live --target http \\
        --target-url http://127.0.0.1:8011/api/agent/chat --judge-provider local \\
        --judge-base-url http://127.0.0.1:8012/v1 --judge-model demo-judge

The exit status is evalgate's (0 passed, 1 gate failed, 2 configuration error). A second run is served
from the judge cache (``judge-cache.db`` in the output directory): the cache keys replies by the judge's
base URL, so the scripted judge listens on ``JUDGE_PORT`` (``EVALGATE_DEMO_JUDGE_PORT`` when set) when that
port is free (any free port otherwise, and then a rerun calls the judge again).
"""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from evalgate.cli.main import main as cli_main
from evalgate.dataset.selected import demo_dir
from evalgate.demo.agent import CHAT_PATH, agent_server
from evalgate.demo.judge import judge_server
from evalgate.demo.server import JsonServer

DEFAULT_OUTPUT = "evalgate-results/live"
JUDGE_PORT = 8012
"""The scripted judge's preferred port on 127.0.0.1 (a stable base URL lets reruns use the judge cache)."""


@contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def start_judge(api_key: str, port: int = JUDGE_PORT) -> JsonServer:
    """The scripted judge on ``port``, or on any free port when that one is taken."""
    try:
        return judge_server(api_key=api_key, port=port)
    except OSError:
        return judge_server(api_key=api_key)


def run_arguments(agent_url: str, judge_url: str, extra: Sequence[str]) -> list[str]:
    arguments = ["run", "--dataset", str(demo_dir() / "live"), "--target", "http", "--target-url",
                 agent_url + CHAT_PATH, "--judge-provider", "local", "--judge-base-url", judge_url + "/v1",
                 "--judge-model", "demo-judge"]
    if "--output-dir" not in extra and "-o" not in extra:
        arguments += ["--output-dir", DEFAULT_OUTPUT]
    return arguments + list(extra)


def main(argv: Sequence[str] | None = None) -> int:
    extra = list(sys.argv[1:] if argv is None else argv)
    if not (demo_dir() / "live").is_dir():
        print("evalgate: error: datasets/live not found; run the demo from a checkout or the container image",
              file=sys.stderr)
        return 2
    key = "demo-" + secrets.token_hex(8)
    port = os.environ.get("EVALGATE_DEMO_JUDGE_PORT", "").strip()
    with agent_server() as agent, start_judge(key, int(port) if port.isdigit() else JUDGE_PORT) as judge, environment({"LOCAL_JUDGE_API_KEY": key}):
        print(f"demo agent on {agent.base_url}, scripted judge on {judge.base_url}", file=sys.stderr)
        return cli_main(run_arguments(agent.base_url, judge.base_url, extra))


if __name__ == "__main__":
    sys.exit(main())
