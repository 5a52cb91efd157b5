"""Property tests: whatever bytes a dataset file holds, loading it either succeeds with sound provenance
or raises a one-line UserError — never any other exception (which would reach users as a traceback)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalgate.config.suite import SUITE_KEYS, parse_suite_config
from evalgate.dataset.load import load_datasets
from evalgate.dataset.select import select_cases
from evalgate.dataset.summary import dataset_summary, render_summary_text
from evalgate.errors import UserError
from evalgate.model import Case

FIXTURES = Path(__file__).parent.parent / "fixtures" / "datasets"
VALID_FILES = sorted(p for p in FIXTURES.rglob("*") if p.suffix in {".yaml", ".json", ".jsonl"} and p.is_file())
SUFFIXES = [".yaml", ".yml", ".json", ".jsonl"]

CASE_KEYS = sorted(
    {name for name in Case.model_fields}
    | {"intent_id", "case_id", "question", "query", "message", "prompt", "llm_answer_text", "answer", "response"}
    | {"activeTeamId", "activeLeagueId", "teamName", "actual_output"}
)
KEYS = [
    *CASE_KEYS,
    *sorted(SUITE_KEYS),
    "cases",
    "test_cases",
    "suite",
    "type",
    "value",
    "brand",
    "is_mine",
    "min",
    "max",
]

YAML_TOKENS = [
    "\n", "\n  ", "\n    ", "  ", "- ", ": ", ", ", "cases:", "test_cases:", "suite:", "id: ", "intent_id: ",
    "question: ", "risk_level: ", "urgent", "critical", "tags: ", "rules: ", "type: regex", "value: '('",
    "brands_mine: [A]", "expected_my_mentions: [B]", "num_tokens: -1", "[", "]", "{", "}", "&a ", "*a", "*b",
    "<<: ", "!!binary ", "!!timestamp ", "!!python/object:os.system ", "!!set ", "!!omap ", "!!int ", "!!float ",
    "!!str ", "!!map ", "!!seq ", "? ", "---\n", "...\n", "'", '"', "\t", "# c", "2024-13-45", "2024-02-30",
    "1e400", "0x1F", "0o17", "~", "null", "yes", "no", '"\\ud800"', '"\\x00"', "|", ">-", "%YAML 1.1\n",
    "%TAG ! tag:x,2024:\n", "\x00", "\ufeff", "\x85", "1" * 5000, "a{4294967296}", "metadata: ", "index: ",
    "suite: {thresholds: {m: .nan}}", "options: {k: 0}", "thresholds: ",
]  # fmt: skip
JSON_TOKENS = ['{"id": "a"}', '{"cases": [', "[", "]", "{", "}", ",", ":", '"id"', '"x"', "1e999", "NaN",
               "-Infinity", "[" * 3000, '"\\ud800"', "\n", " ", "null", "true", '"risk_level": "z"', "1" * 5000]  # fmt: skip


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield tmp_path_factory.mktemp("fuzz")  # under the project's .pytest-tmp/ (tests/conftest.py)


def check_load(base: Path, name: str, content: bytes) -> None:
    """Load one file: success must give sound provenance; failure must be a one-line UserError."""
    (base / name).write_bytes(content)
    try:
        loaded = load_datasets([name], base_dir=base)
    except UserError as exc:
        message = str(exc)
        assert message and "\n" not in message and "\r" not in message
        assert all("\n" not in line for line in getattr(exc, "errors", []))
        return
    assert loaded.cases and len(loaded.files) == 1 and loaded.files[0].cases == len(loaded.cases)
    for position, case in enumerate(loaded.cases):
        assert case.index == position and case.source_file == name and (case.source_line or 0) >= 1
        assert case.id and case.suite
    assert len({case.id for case in loaded.cases}) == len(loaded.cases)
    render_summary_text(dataset_summary(loaded.cases, loaded.files))
    select_cases(loaded.cases, first_n=1)


FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ_STRUCTURED = settings(FUZZ, max_examples=120)


@FUZZ
@given(content=st.binary(max_size=3000), suffix=st.sampled_from(SUFFIXES))
def test_random_bytes(workdir: Path, content: bytes, suffix: str) -> None:
    check_load(workdir, f"bytes{suffix}", content)


@FUZZ
@given(
    parts=st.lists(st.sampled_from(YAML_TOKENS) | st.text(max_size=8), max_size=80),
    suffix=st.sampled_from([".yaml", ".yml"]),
)
def test_random_yaml_ish_text(workdir: Path, parts: list[str], suffix: str) -> None:
    check_load(workdir, f"text{suffix}", "".join(parts).encode("utf-8", "surrogatepass"))


@FUZZ
@given(
    parts=st.lists(st.sampled_from(JSON_TOKENS) | st.text(max_size=6), max_size=60),
    suffix=st.sampled_from([".json", ".jsonl"]),
)
def test_random_json_ish_text(workdir: Path, parts: list[str], suffix: str) -> None:
    check_load(workdir, f"text{suffix}", "".join(parts).encode("utf-8", "surrogatepass"))


SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | st.sampled_from(["critical", "urgent", "regex", "contains", "HubSpot", "(", "a{4294967296}", "GD-001"])
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=4), inner, max_size=5)
    ),
    max_leaves=12,
)
CASES = st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=8) | VALUES


def shape(cases: list[Any], suite: Any, kind: str) -> Any:
    if kind == "list":
        return cases
    document: dict[str, Any] = {kind: cases}
    if suite is not None:
        document["suite"] = suite
    return document


def serialise(document: Any, suffix: str) -> bytes:
    if suffix == ".jsonl":
        items = document if isinstance(document, list) else [document]
        return "\n".join(json.dumps(item) for item in items).encode("utf-8", "surrogatepass")
    if suffix == ".json":
        return json.dumps(document, indent=1).encode("utf-8", "surrogatepass")
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(document, Dumper=dumper, allow_unicode=True).encode("utf-8", "surrogatepass")


@FUZZ_STRUCTURED
@given(
    cases=st.lists(CASES, max_size=6),
    suite=st.none() | st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=4) | VALUES,
    kind=st.sampled_from(["list", "cases", "test_cases"]),
    suffix=st.sampled_from(SUFFIXES),
)
def test_random_documents(workdir: Path, cases: list[Any], suite: Any, kind: str, suffix: str) -> None:
    check_load(workdir, f"doc{suffix}", serialise(shape(cases, suite, kind), suffix))


@FUZZ
@given(
    base=st.fixed_dictionaries({"id": st.text(min_size=1, max_size=8)}),
    field=st.sampled_from(CASE_KEYS),
    value=VALUES,
    suffix=st.sampled_from(SUFFIXES),
)
def test_valid_case_with_one_field_replaced(
    workdir: Path, base: dict[str, Any], field: str, value: Any, suffix: str
) -> None:
    check_load(workdir, f"one{suffix}", serialise([{**base, field: value}], suffix))


@FUZZ
@given(data=st.data(), source=st.sampled_from(VALID_FILES))
def test_mutated_valid_datasets(workdir: Path, data: st.DataObject, source: Path) -> None:
    content = bytearray(source.read_bytes())
    for _ in range(data.draw(st.integers(min_value=1, max_value=6), label="mutations")):
        at = data.draw(st.integers(min_value=0, max_value=len(content)), label="at")
        op = data.draw(st.sampled_from(["delete", "insert", "flip", "duplicate", "truncate"]), label="op")
        end = min(len(content), at + data.draw(st.integers(min_value=1, max_value=40), label="width"))
        if op == "delete":
            del content[at:end]
        elif op == "insert":
            token = data.draw(st.sampled_from(YAML_TOKENS + JSON_TOKENS) | st.text(max_size=4), label="token")
            content[at:at] = token.encode("utf-8", "surrogatepass")
        elif op == "flip" and at < len(content):
            content[at] = data.draw(st.integers(min_value=0, max_value=255), label="byte")
        elif op == "duplicate":
            content[at:at] = content[at:end]
        elif op == "truncate":
            del content[at:]
    check_load(workdir, f"mutated{source.suffix}", bytes(content))


@FUZZ_STRUCTURED
@given(block=st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=6) | VALUES)
def test_random_suite_blocks(block: Any) -> None:
    try:
        config = parse_suite_config(block, "evalgate.yaml")
    except UserError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("evalgate.yaml: suite")
        return
    directions = {name: "higher" for name in config.thresholds}
    assert set(config.resolve_thresholds(directions)) == set(config.thresholds)


def test_valid_fixtures_survive_the_checker(workdir: Path) -> None:
    """The unmutated fixtures load (so the mutation test starts from valid data)."""
    for source in VALID_FILES:
        loaded = load_datasets([str(source)], base_dir=workdir)
        assert loaded.cases
