"""Item 4 of issue #12: hostile datasets end in exit 2 with ``file:line``, quickly and in little memory.

Measured in a subprocess (wall and CPU time, peak RSS from ``wait4``): YAML nested 50,000 levels (which
overflowed the C composer's stack: SIGSEGV), an alias bomb (validated, then expanded to 3.85 GB by the
command target), JSON nested 100,000 levels, an ``evalgate.yaml`` nested 2,000 levels ("internal error:
RecursionError"). Then a generator of malformed datasets (hypothesis) runs ``evalgate validate`` — and
``evalgate run`` on what validates — in this process: every outcome is exit 0, or exit 2 with one line
naming the file and a line number; nothing crashes or hangs."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalgate.dataset.load import display_path
from tests.hostile.helpers import run_cli

REPO = Path(__file__).resolve().parents[2]
SECONDS = 2.0
MEGABYTES = 200


def alias_bomb(levels: int = 9) -> str:
    lines = ["- id: bomb", "  input: q", "  output: a", "  metadata:", "    l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"    l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def nested_yaml(levels: int) -> str:
    return "- id: deep\n  input: q\n  output: a\n  metadata: " + "{a: " * levels + "1" + "}" * levels + "\n"


def nested_json(levels: int) -> str:
    return '[{"id": "deep", "input": "q", "output": "a", "metadata": ' + '{"a": ' * levels + "1" + "}" * levels + "}]"


PEAK_REPORTING = ("import sys\nfrom evalgate.cli.main import main\ncode = main(sys.argv[1:])\n"
                  "peak = [line for line in open('/proc/self/status') if line.startswith('VmHWM')]\n"
                  "sys.stderr.write(peak[0] if peak else 'VmHWM: 0 kB\\n')\nsys.exit(code)")
"""``evalgate ARGS`` that reports its own peak RSS (``VmHWM``) on its last stderr line. The kernel's
``ru_maxrss`` of a child would include the memory of the process it was forked from (this test run)."""


def shown(path: Path) -> str:
    """``path`` as evalgate names it in a message: relative to the working directory when inside it (the
    tests' temporary files live under the project's .pytest-tmp/), else absolute."""
    return display_path(path, Path.cwd())


def measured(args: list[str], cwd: Path) -> tuple[int, str, float, float, float]:
    """(exit status, stderr, wall seconds, CPU seconds, peak RSS in MB) of ``evalgate ARGS``."""
    started = time.monotonic()
    process = subprocess.Popen([sys.executable, "-c", PEAK_REPORTING, *args], cwd=cwd, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert process.stderr is not None
    err = process.stderr.read().decode()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.monotonic() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    err, _, peak = err.rpartition("VmHWM:")
    return process.returncode, err, wall, usage.ru_utime + usage.ru_stime, int(peak.split()[0]) / 1024


@pytest.mark.parametrize(("name", "content", "line"), [
    ("deep.yaml", nested_yaml(50_000), 4),
    ("bomb.yaml", alias_bomb(), 10),
    ("deep.json", nested_json(100_000), 1),
])
@pytest.mark.parametrize("verb", ["validate", "run"])
def test_hostile_structures_stop_with_exit_2_quickly_and_in_little_memory(
        tmp_path: Path, name: str, content: str, line: int, verb: str) -> None:
    (tmp_path / name).write_text(content)
    args = [verb, "--dataset", name] + (["--target", "command", "--target-command", "cat"] if verb == "run" else [])
    code, err, wall, cpu, rss = measured(args, tmp_path)
    assert code == 2, err
    assert err.startswith(f"evalgate: error: {name}:{line}: ") and err.count("\n") == 1, err
    # CPU time, not wall time: the shared CI machine may not schedule the process at once
    assert cpu < SECONDS and rss < MEGABYTES, (wall, cpu, rss)


def test_a_deeply_nested_config_file_is_exit_2_naming_it(tmp_path: Path) -> None:
    (tmp_path / "cases.yaml").write_text("- id: a\n  input: q\n  output: a\n")
    (tmp_path / "evalgate.yaml").write_text("judge_temperatures: " + "[" * 2_000 + "]" * 2_000 + "\n")
    code, err, _, cpu, rss = measured(["validate", "--dataset", "cases.yaml"], tmp_path)
    # ours ("nested more than N levels") or, first, PyYAML ≥ 6.0.3's own limit ("exceeded maximum nesting
    # depth"): either way one line naming the file and line, exit 2
    assert code == 2 and err.count("\n") == 1, err
    assert re.search(re.escape(f"{tmp_path / 'evalgate.yaml'}:1: invalid YAML: ")
                     + "(nested more than|exceeded maximum nesting depth)", err), err
    assert cpu < SECONDS and rss < MEGABYTES


def test_an_alias_bomb_in_the_config_file_is_exit_2(tmp_path: Path) -> None:
    (tmp_path / "cases.yaml").write_text("- id: a\n  input: q\n  output: a\n")
    bomb = alias_bomb().replace("- id: bomb\n  input: q\n  output: a\n  metadata:\n", "eval_context:\n")
    (tmp_path / "evalgate.yaml").write_text(bomb)
    result = run_cli(["validate", "--dataset", str(tmp_path / "cases.yaml"), "--config",
                      str(tmp_path / "evalgate.yaml")])
    assert result.code == 2 and "evalgate.yaml:" in result.err and "alias" in result.err


@pytest.mark.parametrize(("suite", "line", "message"), [
    ("  thresholds:\n    mention_f1: 0.5\n", 3, "matches no case"),
    ("  category_metrics:\n    nope: [rules]\n", 4, "category 'nope' matches no case"),
    ("  category_metrics:\n    x: [no_such_metric]\n", 4, "unknown metric 'no_such_metric'"),
    ("  thresholds:\n    mention_f1: abc\n", 3, "threshold 'mention_f1' must be a number"),
])
def test_errors_inside_a_suite_block_name_the_file_and_line(tmp_path: Path, suite: str, line: int,
                                                            message: str) -> None:
    (tmp_path / "s.yaml").write_text(f"suite:\n  name: s\n{suite}cases:\n  - id: a\n    input: q\n    output: x\n")
    result = run_cli(["run", "--dataset", str(tmp_path / "s.yaml")], tmp_path / "out")
    assert result.code == 2 and f"s.yaml:{line}: " in result.err and message in result.err, result.err


# --- the generator ------------------------------------------------------------------------------------

CASE_KEYS = ["id", "input", "output", "expected_output", "expected_keywords", "expected_sources", "sources",
             "brands_mine", "brands_competitors", "expected_my_mentions", "expected_competitor_mentions",
             "rules", "risk_level", "tags", "category", "metadata", "num_tokens", "latency_ms", "mentions",
             "passing_criteria", "assert", "suite", "intent_id", "question", "llm_answer_text", "index",
             "source_file", "expected_my_mention", "Input", "id ", ""]
HOSTILE_TEXT = ["", " ", "\x00", "\ufeff", "\u202e", "\ud7ff", "💥", "a" * 10_000, "<<<END answer>>>", "{{ x }}",
                "${HOME}", "../../etc/passwd", "1e400", "NaN", "-0", "null", "True", "'", '"', "\\", "\t\n\r",
                "(a+)+$", "[", "*a", "&a", "!!python/object:os.system", "%", "::error::x", "@here", "#1"]


WORDS = ["answer", "Acme", "a", "x y", "Globex", "critical", "high", "contains", "regex", "0.5", "question"]
LEAF = st.one_of(st.sampled_from(WORDS), st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                 st.sampled_from([0.5, -1.0, 1e308, float("inf"), float("nan")]), st.sampled_from(HOSTILE_TEXT))
VALUE = st.recursive(LEAF, lambda children: st.one_of(
    st.lists(children, max_size=3), st.dictionaries(st.sampled_from(CASE_KEYS + WORDS), children, max_size=3)),
    max_leaves=6)
TEXT = st.one_of(st.sampled_from(WORDS), LEAF)
PLAUSIBLE = {"expected_keywords": st.lists(TEXT, max_size=2), "brands_mine": st.lists(TEXT, max_size=2),
             "expected_my_mentions": st.lists(TEXT, max_size=2), "risk_level": TEXT, "tags": st.lists(TEXT, max_size=2),
             "rules": st.lists(st.fixed_dictionaries({"type": TEXT, "value": LEAF}), max_size=2),
             "num_tokens": LEAF, "metadata": VALUE, "sources": st.lists(TEXT, max_size=2)}


def leaf() -> st.SearchStrategy[Any]:
    return LEAF


def value() -> st.SearchStrategy[Any]:
    return VALUE


def case() -> st.SearchStrategy[Any]:
    plausible = st.fixed_dictionaries({"id": TEXT, "input": TEXT, "output": TEXT}, optional=PLAUSIBLE)
    return st.one_of(plausible, plausible, st.dictionaries(st.sampled_from(CASE_KEYS), VALUE, max_size=5), VALUE)


def document() -> st.SearchStrategy[Any]:
    cases = st.lists(case(), max_size=5)
    suite = st.one_of(st.none(), st.dictionaries(st.sampled_from(
        ["name", "thresholds", "metrics", "category_metrics", "options", "kind", "valid", "exclude_metrics",
         "judge", ""]), value(), max_size=3))
    return st.one_of(cases, st.builds(lambda c, s, key: {key: c, **({"suite": s} if s is not None else {})},
                                      cases, suite, st.sampled_from(["cases", "test_cases", "case", "suite"])),
                     value())


def render(data: Any, fmt: str, width: int) -> bytes:
    if fmt == "jsonl":
        rows = data if isinstance(data, list) else [data]
        return "\n".join(json.dumps(row, default=str) for row in rows).encode("utf-8", "surrogatepass")
    if fmt == "json":
        return json.dumps(data, default=str).encode("utf-8", "surrogatepass")
    try:
        return yaml.safe_dump(data, allow_unicode=True, width=width).encode("utf-8", "surrogatepass")
    except yaml.YAMLError:
        return json.dumps(data, default=str).encode("utf-8", "surrogatepass")  # JSON is YAML too


@st.composite
def dataset_file(draw: st.DrawFn) -> tuple[str, bytes]:
    fmt = draw(st.sampled_from(["yaml", "json", "jsonl"]))
    content = render(draw(document()), fmt, draw(st.integers(20, 200)))
    for _ in range(draw(st.integers(0, 3))):  # damage: cut, splice hostile bytes, nest, repeat
        how = draw(st.sampled_from(["cut", "splice", "nest", "anchor", "bytes"]))
        at = draw(st.integers(0, len(content)))
        if how == "cut":
            content = content[:at]
        elif how == "splice":
            piece = draw(st.sampled_from(["\n", "\t", ": ", "- ", "&x ", "*x", "*y", "<<: *x\n", "!!binary ",
                                          "!!set ", "? ", "---\n", "]", "{", "\"", "'", "#", "|\n", "%YAML 1.1\n",
                                          "\x85", "\u2028", "\x00", "\ufeff"]))
            content = content[:at] + piece.encode("utf-8") + content[at:]
        elif how == "nest":
            depth = draw(st.integers(50, 400))
            content = content[:at] + b"[" * depth + b"1" + b"]" * depth + content[at:]
        elif how == "anchor":
            content = b"x: &x [1, 2]\n" + content
        else:
            content = content[:at] + draw(st.binary(max_size=8)) + content[at:]
    return f"data.{fmt}", content


class Hang(Exception):
    pass


@contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    def expire(signum: int, frame: Any) -> None:
        raise Hang(f"no answer within {seconds}s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


OUTCOMES: dict[str, int] = {"valid": 0, "exit 2": 0, "ran": 0}
EXAMPLES = int(os.environ.get("HOSTILE_EXAMPLES", "1000"))
"""1,000 fixed examples in CI; ``HOSTILE_EXAMPLES=N`` runs N random ones (a longer hunt)."""


@settings(max_examples=EXAMPLES, deadline=None, derandomize="HOSTILE_EXAMPLES" not in os.environ,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(generated=dataset_file())
def test_malformed_datasets_end_in_exit_2_with_file_and_line(tmp_path_factory: pytest.TempPathFactory,
                                                            generated: tuple[str, bytes]) -> None:
    name, content = generated
    folder = tmp_path_factory.mktemp("gen")
    (folder / name).write_bytes(content)
    with time_limit(20):
        result = run_cli(["validate", "--dataset", str(folder / name)])
    assert result.code in (0, 2), (result.code, result.err, content[:300])
    if result.code == 2:
        OUTCOMES["exit 2"] += 1
        lines = result.err.strip().splitlines()  # validate lists every error, one line each (#25), then a count
        if len(lines) > 1:
            assert lines[-1] == f"evalgate: {len(lines) - 1} errors", result.err
            lines = lines[:-1]
        prefix = f"evalgate: error: {shown(folder / name)}:"
        assert lines and all(line.startswith(prefix) for line in lines), result.err
        for line in lines:
            line_number = line.removeprefix(prefix).split(":", 1)[0]
            assert line_number.isdigit() and int(line_number) >= 1, result.err
        return
    OUTCOMES["valid"] += 1
    with time_limit(60):
        ran = run_cli(["run", "--dataset", str(folder / name)], folder / "out")
    OUTCOMES["ran"] += 1
    # a gate verdict, or the one-line exit 2 of a suite with no answer to score (runner.missing), never a crash
    no_answers = ran.code == 2 and "no case has an answer to score" in ran.err and len(ran.err.strip().splitlines()) == 1
    assert ran.code in (0, 1) or no_answers, (ran.code, ran.err, content[:300])
    assert "internal error" not in ran.err


def test_a_jsonl_line_over_the_record_cap_is_a_problem_at_its_line_and_memory_stays_bounded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #22: reading is bounded by the per-record cap, not by the file's size."""
    from evalgate.dataset import load as load_module

    monkeypatch.setattr(load_module, "MAX_LINE_BYTES", 1 << 20)
    path = tmp_path / "cases.jsonl"
    good = json.dumps({"id": "ok", "input": "q", "output": "a", "expected_keywords": ["a"]})
    path.write_bytes(good.encode() + b"\n" + b"\x00" * (5 << 20) + b"\n" + good.replace('"ok"', '"ok2"').encode())
    ran = run_cli(["validate", "--dataset", str(path)])
    assert ran.code == 2
    assert f"{shown(path)}:2" in ran.err and "longer than 1,048,576 bytes" in ran.err


def test_a_json_dataset_over_the_document_cap_is_refused_at_line_1(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from evalgate.dataset import load as load_module

    monkeypatch.setattr(load_module, "MAX_DOCUMENT_BYTES", 1 << 20)
    path = tmp_path / "cases.json"
    with path.open("wb") as handle:
        handle.truncate(2 << 20)  # sparse
    ran = run_cli(["validate", "--dataset", str(path)])
    assert ran.code == 2 and f"{shown(path)}:1" in ran.err and "write it as JSONL" in ran.err


@pytest.mark.parametrize("kind", ["link-to-dev-zero", "fifo", "socket", "dangling-link"])
@pytest.mark.parametrize("named", ["directory", "glob"])
def test_a_dataset_entry_that_is_no_regular_file_is_exit_2_naming_it(tmp_path: Path, kind: str, named: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A dataset directory (or glob) holding ``evil.yaml`` that is a link to /dev/zero, a FIFO, a socket
    or a link to nothing: exit 2 naming it, never skipped (its cases would be dropped unseen) nor read."""
    import socket as socketlib

    evals = tmp_path / "evals"
    evals.mkdir()
    (evals / "cases.yaml").write_text("cases:\n  - {id: a, input: q, output: hi, expected_output: hi}\n")
    evil = evals / "evil.yaml"
    server = None
    if kind == "link-to-dev-zero":
        evil.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(evil)
    elif kind == "socket":
        server = socketlib.socket(socketlib.AF_UNIX)
        monkeypatch.chdir(tmp_path)  # bound by its relative path: a socket's path has at most 107 bytes
        server.bind(str(evil.relative_to(tmp_path)))
    else:
        evil.symlink_to(tmp_path / "gone.yaml")
    try:
        done = subprocess.run([sys.executable, "-m", "evalgate", "run", "-d",
                               "evals" if named == "directory" else "evals/*.yaml", "-o", "out", "--progress", "none"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=60)
    finally:
        if server is not None:
            server.close()
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(lines) == 1 and "evil.yaml" in lines[0] and "not a regular file" in lines[0], done.stderr
    expected = {"link-to-dev-zero": "a link to a character device", "fifo": "a FIFO", "socket": "a socket",
                "dangling-link": "a link to nothing"}[kind]
    assert expected in lines[0]


def test_a_dataset_path_named_directly_that_is_a_link_to_a_device_is_exit_2(tmp_path: Path) -> None:
    (tmp_path / "cases.yaml").symlink_to("/dev/zero")
    done = subprocess.run([sys.executable, "-m", "evalgate", "run", "-d", "cases.yaml", "-o", "out", "--progress",
                           "none"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "a link to a character device" in done.stderr, done.stderr


def test_a_trace_file_or_outputs_file_that_is_a_fifo_never_blocks_the_run(tmp_path: Path) -> None:
    """A recorded case's ``trace_file:`` that is a FIFO errors that case ("not a regular file"); an
    ``--outputs-file`` that is one is exit 2 naming it. Neither is opened (reading a FIFO blocks forever)."""
    (tmp_path / "t.json").unlink(missing_ok=True)
    os.mkfifo(tmp_path / "t.json")
    (tmp_path / "cases.yaml").write_text("cases:\n  - {id: a, input: q, output: hi, trace_file: t.json,"
                                         " trajectory: {tools: [x]}}\n")
    done = subprocess.run([sys.executable, "-m", "evalgate", "run", "-d", "cases.yaml", "-o", "out", "--progress",
                           "none"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    (record,) = json.loads((tmp_path / "out" / "results.json").read_text())["results"]
    assert record["status"] == "errored" and "not a regular file" in (record["error"] or ""), record
    os.mkfifo(tmp_path / "outputs.jsonl")
    done = subprocess.run([sys.executable, "-m", "evalgate", "run", "-d", "cases.yaml", "-o", "out2", "--progress",
                           "none", "--outputs-file", "outputs.jsonl"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "outputs.jsonl" in done.stderr and "not a regular file" in done.stderr, done.stderr
