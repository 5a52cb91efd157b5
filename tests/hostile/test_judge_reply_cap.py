"""Issue #22, item 3: a judge that streams its reply without end cannot exhaust memory.

The reply is read up to ``judge_max_reply_bytes`` (default 1 MiB), then the connection is closed: the
verdict is unavailable with a reason naming the setting, the run finishes, and the process's peak
memory stays flat (measured with ``VmHWM``, as bench/hostile.py does)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bench.peak import PEAK_REPORTING
from tests.hostile.helpers import write_cases
from tests.hostile.servers import Loopback, Out, Seen

REPO = Path(__file__).resolve().parents[2]
PEAK_LIMIT_MB = 400


def endless_judge(seen: Seen) -> Out:
    return Out(b'{"id": "x", "choices": [{"message": {"content": "', content_type="application/json", endless=True)


def run_with(tmp_path: Path, *extra: str) -> tuple[int, float, dict]:
    cases = [{"id": f"c{i}", "input": f"question {i}", "output": f"answer {i}", "passing_criteria": "answers",
             "metrics": ["relevancy"]}
             for i in range(3)]
    dataset = write_cases(tmp_path / "cases.json", cases)
    out = tmp_path / "out"
    with Loopback(endless_judge) as judge:
        done = subprocess.run([sys.executable, "-c", PEAK_REPORTING, "run", "--dataset", str(dataset), "-o", str(out),
                               "--judge-provider", "local", "--judge-base-url", judge.url + "/v1", "--progress",
                               "none", "--api-timeout-seconds", "20", "--api-retries", "0", *extra],
                              env={**os.environ, "PYTHONPATH": str(REPO), "LOCAL_JUDGE_API_KEY": "sk-endless-123",
                                   "EVALGATE_CALIBRATION": "trust"},  # the judge gates: its missing verdicts fail
                              capture_output=True, text=True, timeout=120)
    peak_mb = int(done.stderr.rpartition("VmHWM:")[2].split()[0]) / 1024
    return done.returncode, peak_mb, json.loads((out / "results.json").read_text())


def test_an_endless_judge_reply_is_cut_at_the_cap(tmp_path: Path) -> None:
    code, peak_mb, document = run_with(tmp_path)
    assert code == 1  # a gated judged metric without its verdict errors the case: never a pass
    assert peak_mb < PEAK_LIMIT_MB, peak_mb
    reasons = json.dumps([r["metrics"] for r in document["results"]])
    assert "more than the 1,048,576 bytes allowed (judge_max_reply_bytes)" in reasons


def test_the_cap_is_configurable(tmp_path: Path) -> None:
    _, _, document = run_with(tmp_path, "--judge-max-reply-bytes", "65536")
    assert "more than the 65,536 bytes allowed (judge_max_reply_bytes)" in json.dumps(document["results"])


def test_the_cap_holds_with_the_openai_sdk_client(tmp_path: Path) -> None:
    code, peak_mb, document = run_with(tmp_path, "--chat-client", "openai-sdk")
    assert code == 1 and peak_mb < PEAK_LIMIT_MB, peak_mb
    reasons = json.dumps([r["metrics"] for r in document["results"]])
    assert "more than the 1,048,576 bytes allowed (judge_max_reply_bytes)" in reasons
