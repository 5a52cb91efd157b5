"""Pieces of the real-model check that know nothing of evalgate's internals: the llama.cpp server, the
``evalgate`` command, a loopback proxy that misbehaves on purpose, and verdict counts read from results.json.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from . import install

READY_SECONDS = 120
SERVE = Path(__file__).resolve().parent / "serve.py"
"""Starts ``llama_cpp.server`` with llama.cpp's extra buffer types off (AMX in a VM that does not enable it)."""
JUDGED_METRICS = frozenset({
    "judge_score", "answer_quality", "factual_correctness", "completeness", "response_quality", "relevancy",
    "faithfulness", "groundedness", "context_precision", "context_recall", "localization", "math", "safety",
    "policy", "actionability", "correctness", "tool_calling",
})
"""The metrics an LLM judge scores (docs/judges.md, "Judged metrics")."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get(url: str, timeout: float = 2) -> int:
    """Status of GET ``url`` (raises OSError when nothing answers)."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        connection.request("GET", parts.path)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


class LlamaServer:
    """``python -m llama_cpp.server`` (through ``serve.py``) with the SmolLM2 GGUF on a free loopback port."""

    def __init__(self, python: Path, gguf: str, *, threads: int = 1, n_ctx: int = 8192,
                 chat_format: str | None = None) -> None:
        self.python, self.gguf, self.threads, self.n_ctx = python, gguf, threads, n_ctx
        self.chat_format = chat_format
        """``--chat_format`` (e.g. ``chatml-function-calling`` for tool calls); None: the GGUF's own template."""
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.log = Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> str:
        """Start the server and wait until ``/v1/models`` answers 200; returns the base URL."""
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [str(self.python), str(SERVE), "--model", self.gguf, "--host", "127.0.0.1",
                 "--port", str(self.port), "--n_threads", str(self.threads), "--n_threads_batch", str(self.threads),
                 "--n_ctx", str(self.n_ctx),
                 *(["--chat_format", self.chat_format] if self.chat_format else [])],
                stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama.cpp server exited {self.process.returncode}: {self.tail()}")
            try:
                if get(f"{self.base_url}/models") == 200:
                    return self.base_url
            except OSError:
                pass
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"llama.cpp server not ready in {READY_SECONDS} s: {self.tail()}")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def tail(self, lines: int = 15) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def server_from_env() -> tuple[Path, str] | str:
    """(python, gguf) of a usable real-model venv, or why there is none.

    ``EVALGATE_REALMODEL_PYTHON`` (+ optional ``EVALGATE_REALMODEL_GGUF``) names another venv's python;
    otherwise the venv ``install.py`` makes."""
    python = Path(os.environ.get("EVALGATE_REALMODEL_PYTHON") or install.venv_python(install.venv_dir()))
    info = install.probe(python)
    gguf = os.environ.get("EVALGATE_REALMODEL_GGUF") or info.get("gguf")
    if "llama_cpp" not in info or not gguf:
        return (f"no real-model venv at {python} ({info.get('error') or 'no GGUF'}): "
                f"run python3 tests/realmodel/install.py (or --if-cached)")
    return python, gguf


# --- the evalgate command -----------------------------------------------------------------------------------


def evalgate_command() -> list[str]:
    """How a user runs evalgate from this environment: the ``evalgate`` script next to the interpreter."""
    script = Path(sys.executable).parent / "evalgate"
    if script.exists():
        return [str(script)]
    found = shutil.which("evalgate")
    if found:
        return [found]
    return [sys.executable, "-m", "evalgate"]


@dataclass
class Run:
    """One ``evalgate run``: exit status, output and the results.json it wrote (None when it wrote none)."""

    returncode: int
    stdout: str
    stderr: str
    results: dict[str, Any] | None
    seconds: float

    @property
    def reasons(self) -> list[str]:
        return list(((self.results or {}).get("gate") or {}).get("reasons") or [])

    def judged(self) -> list[dict[str, Any]]:
        """Every judged metric (docs/judges.md's list) that ran on a case, scored or not: one row each with
        ``case``, ``case_status``, ``metric``, ``status``, ``method``, ``repaired``, ``reason``, ``details``."""
        rows = []
        for case in (self.results or {}).get("results") or []:
            for name, metric in (case.get("metrics") or {}).items():
                if name not in JUDGED_METRICS or metric.get("status") == "skipped":
                    continue
                details = metric.get("details") or {}
                rows.append({"case": case.get("id"), "case_status": case.get("status"), "metric": name,
                             "status": metric.get("status"), "method": details.get("method"),
                             "repaired": bool(details.get("repaired")), "reason": metric.get("reason"),
                             "details": details})
        return rows

    def scored(self) -> list[dict[str, Any]]:
        """Judged metrics the judge actually scored (a readable verdict)."""
        return [row for row in self.judged() if row["status"] in ("passed", "failed") and row["method"] == "judge"]

    def unavailable(self) -> list[dict[str, Any]]:
        """Judged metrics the judge could not score: ``unavailable``, or (``response_quality``) valued by the
        heuristic because the judge could not (``details.judge_unavailable``)."""
        return [row for row in self.judged()
                if row["status"] == "unavailable" or "judge_unavailable" in row["details"]]


def run_evalgate(args: list[str], *, workdir: Path, judge_url: str | None, timeout: float = 900,
                 extra_env: dict[str, str] | None = None) -> Run:
    """``evalgate run ARGS`` in ``workdir`` with the local judge at ``judge_url``; results in ``workdir/out``."""
    env = {**os.environ, "LOCAL_JUDGE_API_KEY": "any-string"}
    for name in [n for n in env if n.startswith("EVALGATE_") and not n.startswith("EVALGATE_REALMODEL")]:
        del env[name]  # the caller's settings must not leak in
    env["EVALGATE_JUDGE_SHARED_CACHE"] = "none"  # the user-level shared judge cache stays out of tests
    # these runs test the evidence rules of a judge that gates; the real model's calibration (below the
    # floor, so it may not gate) is tests/realmodel/test_calibration_real.py's
    env["EVALGATE_CALIBRATION"] = "trust"
    env.update(extra_env or {})
    judge = ["--judge-provider", "local", "--judge-base-url", judge_url] if judge_url else []
    command = [*evalgate_command(), "run", *args, *judge, "--output-dir", str(workdir / "out"),
               "--progress", "plain", "--baseline", "none"]
    started = time.monotonic()
    done = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    seconds = time.monotonic() - started
    path = workdir / "out" / "results.json"
    results = json.loads(path.read_text()) if path.exists() else None
    return Run(done.returncode, done.stdout, done.stderr, results, seconds)


# --- a loopback proxy that misbehaves on purpose --------------------------------------------------------------


def _mode_of(body: bytes) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        return "unreadable"
    shape = data.get("response_format") if isinstance(data, dict) else None
    return str(shape.get("type")) if isinstance(shape, dict) and shape.get("type") else "prompt"


class JudgeProxy:
    """Forwards chat completions to a real server on 127.0.0.1, optionally capping ``max_tokens`` (so the real
    model's verdicts are cut short) or going down for good once ``serve_calls`` completions were answered
    with 2xx (an outage; an error reply, such as a refused ``response_format``, does not count)."""

    def __init__(self, upstream: str, *, max_tokens: int | None = None, serve_calls: int | None = None) -> None:
        self.upstream = urlsplit(upstream)
        self.max_tokens = max_tokens
        self.serve_calls = serve_calls
        self.calls = 0
        self.modes: list[str] = []
        """The structured-output mode of every chat request received (``response_format.type`` or ``prompt``)."""
        self.forwarded = 0
        self.served = 0
        """Completions answered with 2xx."""
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._forward(None)

            def do_POST(self) -> None:
                self._forward(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

            def _forward(self, body: bytes | None) -> None:
                if body is not None and self.path.endswith("/chat/completions"):
                    with proxy._lock:
                        proxy.calls += 1
                        proxy.modes.append(_mode_of(body))
                        down = proxy.serve_calls is not None and proxy.served >= proxy.serve_calls
                        if not down:
                            proxy.forwarded += 1
                    if down:
                        proxy._go_down()
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    if proxy.max_tokens is not None:
                        data = json.loads(body)
                        for key in ("max_tokens", "max_completion_tokens"):
                            data.pop(key, None)
                        data["max_tokens"] = proxy.max_tokens
                        body = json.dumps(data).encode()
                upstream = http.client.HTTPConnection(proxy.upstream.hostname, proxy.upstream.port, timeout=600)
                try:
                    upstream.request(self.command, self.path, body, {"Content-Type": "application/json"})
                    reply = upstream.getresponse()
                    payload = reply.read()
                finally:
                    upstream.close()
                if body is not None and self.path.endswith("/chat/completions") and reply.status < 300:
                    with proxy._lock:
                        proxy.served += 1
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.getheader("Content-Type") or "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}{self.upstream.path}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._down = False

    def _go_down(self) -> None:
        """Stop listening: later connections are refused, as with a judge that crashed."""
        if not self._down:
            self._down = True
            threading.Thread(target=self._close, daemon=True).start()

    def _close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> JudgeProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._down:
            self._down = True
            self._close()
