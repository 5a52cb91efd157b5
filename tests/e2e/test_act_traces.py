"""The Action's trace receiver and a ``services:`` agent instrumented with the real OpenTelemetry SDK, under
nektos/act (tests/support/act.py): the gate passes on the right tool order and fails, naming the tool, on
the wrong one.

* The agent is ``examples/otel-agent/agent.py`` (opentelemetry-sdk, BatchSpanProcessor,
  OTLPSpanExporter over OTLP/HTTP protobuf) in the image ``evalgate-otel-agent:<recipe hash>``:
  ``python:3.12-slim`` plus the SDK's wheels, downloaded by pip on the host (the same versions as this test environment's,
  from the configured index or mirror) and installed with ``--no-index`` in the build: no network in the
  image build.
* The workflow is ``tests/fixtures/act/otel-traces.yml``: the container action (``uses: ./``) with
  ``EVALGATE_TRACES_HOST=0.0.0.0`` and the example's config (``traces: true``). The service exports to
  ``http://otel-gate:4318`` — the job container's name on the job's network, in whose network namespace
  act runs the container action (the SDK's standard configuration, act only) — or to
  ``http://{peer}:4318``: the agent's exporter is made at the first request carrying a ``traceparent``,
  for that caller's address (the action's container; what works on GitHub too).
* The action's image is built from this tree under a tag of its own (:data:`ACTION_IMAGE`), which the
  repository copy's action.yml runs instead of the shared ``ghcr.io/evalgate/evalgate:<version>``.
* ``BREAK=order`` (the workflow's ``break`` input) makes the agent book before it searches.

Marked ``docker`` and ``slow`` like tests/e2e/test_act_workflows.py; skipped with the reason without
docker-local or act.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from tests.support.act import TIMINGS, act_unavailable, repository_copy, run_act, runner_image
from tests.support.docker import LOCAL_BASE, REPO_ROOT

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(900)]

ACTION_IMAGE = f"evalgate-act-traces:{hashlib.sha256(str(REPO_ROOT).encode()).hexdigest()[:12]}"
"""The action's image built from this tree under a tag of its own, which the repository copy's action.yml
runs: the shared ``ghcr.io/evalgate/evalgate:<version>`` tag may be rebuilt from another checkout on the
same engine while this test runs."""
AGENT_SOURCE = REPO_ROOT / "examples" / "otel-agent" / "agent.py"
WORKFLOW = Path(__file__).resolve().parents[1] / "fixtures" / "act" / "otel-traces.yml"
AGENT_PLACEHOLDER = "evalgate-otel-agent:act"
"""The service's image in the workflow file, replaced by the tag :func:`agent_image` built."""
SDK_PACKAGES = ("opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-http")
AGENT_DOCKERFILE = f"""FROM {LOCAL_BASE}
COPY wheels /tmp/wheels
RUN pip install --no-cache-dir --no-index --find-links /tmp/wheels {{requirements}} && rm -rf /tmp/wheels
COPY agent.py /opt/agent/agent.py
ENV PYTHONUNBUFFERED=1
ENTRYPOINT ["python", "/opt/agent/agent.py", "--host", "0.0.0.0", "--port", "8000"]
"""


@functools.cache
def agent_image() -> str:
    """``evalgate-otel-agent:<hash of the Dockerfile, SDK versions and agent.py>``, built unless it exists."""
    requirements = " ".join(f"{name}=={version(name)}" for name in SDK_PACKAGES)
    dockerfile = AGENT_DOCKERFILE.format(requirements=requirements)
    recipe = hashlib.sha256((dockerfile + AGENT_SOURCE.read_text(encoding="utf-8")).encode()).hexdigest()[:16]
    image = f"evalgate-otel-agent:{recipe}"
    found = subprocess.run(["docker", "image", "inspect", image], capture_output=True, timeout=60, check=False)
    if found.returncode == 0:
        return image
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="otel-agent-image-") as context:
        root = Path(context)
        (root / "Dockerfile").write_text(dockerfile, encoding="utf-8")
        shutil.copy2(AGENT_SOURCE, root / "agent.py")
        # wheels for the image's CPython 3.12 on x86-64/arm64 Linux, whatever this interpreter is
        machine = "aarch64" if subprocess.run(["docker", "info", "--format", "{{.Architecture}}"], capture_output=True,
                                              text=True, timeout=60, check=False).stdout.strip() in (
                                                  "aarch64", "arm64") else "x86_64"
        platforms = [f"--platform={tag}_{machine}" for tag in ("manylinux2014", "manylinux_2_17", "manylinux_2_28")]
        download = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "-d", str(root / "wheels"),
                                   "--only-binary=:all:", "--python-version=3.12", "--implementation=cp",
                                   *platforms, "--platform=any", *requirements.split()],
                                  capture_output=True, text=True, timeout=600, check=False)
        if download.returncode != 0:
            raise RuntimeError("pip download of the agent's SDK failed:\n" + download.stderr[-3000:])
        built = subprocess.run(["docker", "build", "-t", image, str(root)],
                               capture_output=True, text=True, timeout=900, check=False)
    TIMINGS["agent image build"] = time.perf_counter() - started
    if built.returncode != 0:
        raise RuntimeError("agent image build failed:\n" + (built.stdout + built.stderr)[-3000:])
    return image


def build_action_image() -> str:
    """The Dockerfile built as tests.support.docker.build_release_image builds it (layers shared), tagged
    :data:`ACTION_IMAGE`."""
    started = time.perf_counter()
    done = subprocess.run(["docker", "build", "--build-arg", f"PYTHON_IMAGE={LOCAL_BASE}", "-t", ACTION_IMAGE,
                           str(REPO_ROOT)], capture_output=True, text=True, timeout=1500, check=False)
    TIMINGS["action image build"] = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError("docker build failed:\n" + (done.stdout + done.stderr)[-4000:])
    return ACTION_IMAGE


@pytest.fixture(scope="module", autouse=True)
def images() -> Iterator[None]:
    reason = act_unavailable()
    if reason:
        pytest.skip(reason)
    runner_image()
    build_action_image()
    agent_image()
    yield
    print("\nact timings: " + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in TIMINGS.items()))


def tail(text: str, lines: int = 80) -> str:
    return "\n".join(text.splitlines()[-lines:])


BY_NAME = "http://otel-gate:4318"
BY_PEER = "http://{peer}:4318"


def run_gate(tmp_path: Path, breakage: str, endpoint: str, *, loopback: bool = False) -> tuple[Any, dict[str, Any]]:
    """Run the workflow with the agent's ``BREAK`` and endpoint; the act run and the action's results.json.
    ``loopback``: without ``EVALGATE_TRACES_HOST`` (the receiver on its default, 127.0.0.1)."""
    repo = repository_copy(tmp_path / "repo")
    workflow = WORKFLOW.read_text(encoding="utf-8")
    assert f"image: {AGENT_PLACEHOLDER}" in workflow
    workflow = workflow.replace(f"image: {AGENT_PLACEHOLDER}", f"image: {agent_image()}")
    if loopback:
        host = "          EVALGATE_TRACES_HOST: 0.0.0.0"
        assert host in workflow
        workflow = workflow.replace(host, "          EVALGATE_TRACES_GRACE_SECONDS: 1")
    (repo / ".github" / "workflows" / "otel-traces.yml").write_text(workflow, encoding="utf-8")
    action = repo / "action.yml"
    text, swapped = re.subn(r"(?m)^  image: .*$", f"  image: docker://{ACTION_IMAGE}", action.read_text(encoding="utf-8"))
    assert swapped == 1, "action.yml names one image"
    action.write_text(text, encoding="utf-8")
    run = run_act(repo, "workflow_dispatch", "otel-traces.yml", "otel-gate", extra=["--input", f"break={breakage}", "--input", f"endpoint={endpoint}"])
    assert f"docker run image={ACTION_IMAGE}" in run.output, tail(run.output)
    results = repo / "evalgate-results" / "results.json"
    assert results.is_file(), tail(run.output)
    return run, json.loads(results.read_text(encoding="utf-8"))


def case(doc: dict[str, Any], case_id: str) -> dict[str, Any]:
    return next(result for result in doc["results"] if result["id"] == case_id)


def tool_names(result: dict[str, Any]) -> list[str]:
    return [tool["name"] for tool in result["answer"]["trace"]["tools"]]


@pytest.mark.parametrize("endpoint", [BY_NAME, BY_PEER], ids=["by-name", "by-peer"])
def test_services_sdk_agent_passes_the_trajectory_gate_through_the_action(endpoint: str, tmp_path: Path) -> None:
    run, doc = run_gate(tmp_path, "", endpoint)
    assert run.succeeded("otel-gate"), tail(run.output)
    traces = doc["metadata"]["traces"]
    # 2 cases: book-flight = invoke_agent + 3 chat + 2 tools, weather = invoke_agent + chat + tool
    assert traces["spans"] == 9 and traces["ignored_spans"] == 0, traces
    book, weather = case(doc, "book-flight"), case(doc, "weather")
    assert tool_names(book) == ["search_flights", "book_flight"]
    assert tool_names(weather) == ["get_weather"]
    assert book["answer"]["trace"]["source"] == "otlp" and book["answer"]["trace"]["agents"] == ["travel-agent"]
    assert traces["endpoint"].endswith(":4318/v1/traces") and traces["rejected_requests"] == 0, traces
    for result in (book, weather):
        assert result["metrics"]["trajectory"]["status"] == "passed", result["metrics"]
    assert doc["summary"]["total_failed"] == 0 and doc["summary"]["total_errored"] == 0, doc["summary"]


def test_services_sdk_agent_in_the_wrong_order_fails_the_gate_naming_the_tool(tmp_path: Path) -> None:
    run, doc = run_gate(tmp_path, "order", BY_NAME)
    assert not run.succeeded("otel-gate") and run.returncode != 0
    assert "exit with `FAILURE`: 1" in run.output, tail(run.output)  # the action's exit status: the gate, not an error (2)
    reason = ("book_flight not called after search_flights: expected search_flights → book_flight (subsequence), "
              "got book_flight → search_flights")
    assert reason in run.output, tail(run.output)  # the action's log names the tool
    # the job summary (the PR comment's body, markdown-escaped) has it in one line of the failed case
    summary_line = next(line for line in run.output.splitlines() if line.startswith("- ❌ `book-flight`"))
    assert summary_line.endswith(reason.replace("_", "\\_")), summary_line
    book = case(doc, "book-flight")
    assert tool_names(book) == ["book_flight", "search_flights"]
    trajectory = book["metrics"]["trajectory"]
    assert trajectory["status"] == "failed" and trajectory["details"]["actual_tools"] == tool_names(book)
    assert trajectory["details"]["results"][0]["problem"] == "book_flight not called after search_flights"
    assert case(doc, "weather")["metrics"]["trajectory"]["status"] == "passed"


def test_receiver_on_loopback_in_the_action_gets_no_spans_and_the_gate_does_not_pass(tmp_path: Path) -> None:
    """The settings matter: a receiver left on loopback in the action's container is out of the service's
    reach; the trajectories are errored (no evidence), never passed."""
    run, doc = run_gate(tmp_path, "", BY_NAME, loopback=True)
    assert not run.succeeded("otel-gate") and "exit with `FAILURE`: 1" in run.output, tail(run.output)
    assert doc["metadata"]["traces"]["requests"] == 0 and doc["metadata"]["traces"]["spans"] == 0
    assert doc["summary"]["total_errored"] == 2 and doc["summary"]["total_passed"] == 0, doc["summary"]
    assert "no span was exported" in case(doc, "book-flight")["metrics"]["trajectory"]["reason"]
