"""Dataset loading: file shapes, seed aliases, provenance (file:line), suite blocks, every error path,
and the dry-run summary."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evalgate.config.suite import (
    SuiteConfig,
    parse_suite_config,
    resolve_threshold,
    validate_metric_names,
)
from evalgate.dataset.load import (
    DatasetError,
    DatasetStream,
    iter_cases,
    load_datasets,
    resolve_paths,
)
from evalgate.dataset.summary import dataset_summary, render_summary_text
from evalgate.errors import UserError
from evalgate.model import Case, RiskLevel, Threshold, stable_case_id
from evalgate.safety.redact import register_environment

FIXTURES = Path(__file__).parent.parent / "fixtures" / "datasets"
SEEDS = FIXTURES / "seeds"


def write(directory: Path, name: str, text: str | bytes) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def load_error(paths: list[str], base: Path) -> DatasetError:
    with pytest.raises(DatasetError) as info:
        load_datasets(paths, base_dir=base)
    assert isinstance(info.value, UserError)
    assert "\n" not in str(info.value)
    return info.value


# --- the five seed formats ----------------------------------------------------------------------------


def test_seed000_question_list_gets_stable_generated_ids() -> None:
    loaded = load_datasets(["seeds/ground_truth.json"], base_dir=FIXTURES)
    first, second = loaded.cases
    assert first.input == "What factors influence customer behavior?"
    assert first.id == stable_case_id(first.input) and first.id.startswith("q-")
    assert first.expected_sources == ["Consumer behaviour", "Behavioral economics"]
    assert second.num_tokens == 2500
    assert [c.location for c in loaded.cases] == ["seeds/ground_truth.json:2", "seeds/ground_truth.json:6"]
    again = load_datasets(["seeds/ground_truth.json"], base_dir=FIXTURES)
    assert [c.id for c in again.cases] == [c.id for c in loaded.cases]
    assert {c.suite for c in loaded.cases} == {"ground_truth"}


def test_seed001_test_cases_mapping_with_intent_id_and_answer_text() -> None:
    loaded = load_datasets([str(SEEDS / "fixtures.yaml")], base_dir=FIXTURES)
    basic, boundary = loaded.cases
    assert (basic.id, boundary.id) == ("test_001_basic_mention", "test_002_word_boundary")
    assert basic.output is not None and basic.output.startswith("The best CRM tools are:\n1. HubSpot")
    assert basic.expected_ranked_list == ["HubSpot", "Salesforce", "Pipedrive"]
    assert boundary.expected_my_mentions == []
    assert (basic.source_line, boundary.source_line) == (3, 30)
    assert basic.source_file == "seeds/fixtures.yaml"


def test_seed002_jsonl_with_camel_case_context_and_blank_lines() -> None:
    loaded = load_datasets(["seeds/fanvise.jsonl"], base_dir=FIXTURES)
    rumor, supervisor, routing = loaded.cases
    assert [c.source_line for c in loaded.cases] == [1, 3, 4]
    assert rumor.risk_level is RiskLevel.critical and rumor.is_critical
    assert (rumor.dialect_value("active_team_id"), rumor.dialect_value("active_league_id"), rumor.dialect_value("team_name")) == (7, "L-42", "Hoopers")
    assert supervisor.tags == ["roster", "safety"]
    assert supervisor.criteria == "- refuses\n- explains"
    assert (routing.dialect_value("active_team_id"), routing.dialect_value("team_name"), routing.evolution_type) == ("12", "Dunkers", "multi_context")


def test_seed003_cases_with_suite_block_and_workflow_fields() -> None:
    loaded = load_datasets(["seeds/scenarios.yaml"], base_dir=FIXTURES)
    sql, clarify = loaded.cases
    assert sql.input == "What is the state of the art in text-to-SQL?"
    assert sql.output == "DIN-SQL achieves 85.3% execution accuracy on Spider."
    assert sql.agents_called == ["orchestrator", "research"] and sql.tools_should_exclude == ["web_search"]
    assert clarify.input == "Tell me about it"
    assert (sql.source_line, clarify.source_line) == (11, 24)
    assert {c.suite for c in loaded.cases} == {"research-workflow"}
    suite = loaded.suites["research-workflow"]
    assert suite.metrics == ["workflow_pass"] and suite.options.always_expected_agents == ["orchestrator"]
    assert loaded.suite_for(sql) is suite
    resolved = suite.resolve_thresholds({"workflow_pass": "higher", "factual_correctness": "higher"})
    assert resolved == {
        "workflow_pass": Threshold(op="min", value=1.0),
        "factual_correctness": Threshold(op="min", value=0.8),
    }


def test_seed004_json_mapping_lines_of_each_opening_brace() -> None:
    loaded = load_datasets(["seeds/golden_dataset.json"], base_dir=FIXTURES)
    assert [(c.id, c.source_line) for c in loaded.cases] == [("GD-001", 4), ("GD-011", 14), ("GD-021", 17)]
    first = loaded.cases[0]
    assert first.input.startswith("What is the lockout")
    assert first.dialect_value("expected_specialist") == "procedure_expert" and first.expected_data_sources == ["rag"]
    assert {c.suite for c in loaded.cases} == {"manufacturing"}
    assert loaded.suites["manufacturing"].thresholds == {"composite": 0.75}


# --- paths: directory, glob, mixed, provenance --------------------------------------------------------


def test_directory_is_walked_recursively_sorted_skipping_hidden_and_other_files() -> None:
    loaded = load_datasets(["tree"], base_dir=FIXTURES)
    assert [f.path for f in loaded.files] == ["tree/brand/part1.yaml", "tree/brand/part2.json", "tree/top.jsonl"]
    assert [(c.id, c.index, c.suite) for c in loaded.cases] == [
        ("b1", 0, "brand"),
        ("b2", 1, "brand"),
        ("b3", 2, "brand"),
        ("t1", 3, "tree"),  # directly inside the directory the user named: that directory's name
    ]
    assert [c.location for c in loaded.cases] == [
        "tree/brand/part1.yaml:1",
        "tree/brand/part1.yaml:4",
        "tree/brand/part2.json:1",
        "tree/top.jsonl:1",
    ]


def test_glob_uses_its_fixed_prefix_as_dataset_root() -> None:
    loaded = load_datasets(["tree/**/*.yaml", "tree/*.jsonl"], base_dir=FIXTURES)
    assert [c.id for c in loaded.cases] == ["b1", "b2", "t1"]
    assert [c.suite for c in loaded.cases] == ["brand", "brand", "top"]


def test_mixed_paths_load_each_file_once_in_order() -> None:
    paths = ["seeds/fanvise.jsonl", "tree", "tree/brand/*.json", str(FIXTURES / "seeds" / "fanvise.jsonl")]
    loaded = load_datasets(paths, base_dir=FIXTURES)
    assert [f.path for f in loaded.files] == [
        "seeds/fanvise.jsonl",
        "tree/brand/part1.yaml",
        "tree/brand/part2.json",
        "tree/top.jsonl",
    ]
    assert [c.index for c in loaded.cases] == list(range(7))
    assert sum(f.cases for f in loaded.files) == len(loaded.cases)


def test_file_metadata_has_sha256_and_case_count() -> None:
    loaded = load_datasets(["seeds"], base_dir=FIXTURES)
    by_path = {f.path: f for f in loaded.files}
    assert set(by_path) == {
        "seeds/fanvise.jsonl",
        "seeds/fixtures.yaml",
        "seeds/golden_dataset.json",
        "seeds/ground_truth.json",
        "seeds/scenarios.yaml",
    }
    for entry in loaded.files:
        assert entry.sha256 == hashlib.sha256((FIXTURES / entry.path).read_bytes()).hexdigest()
    assert by_path["seeds/golden_dataset.json"].cases == 3
    assert loaded.metadata()[0] == {
        "path": loaded.files[0].path,
        "sha256": loaded.files[0].sha256,
        "cases": loaded.files[0].cases,
    }


def test_source_file_is_absolute_outside_base_dir(tmp_path: Path) -> None:
    outside = SEEDS / "fanvise.jsonl"
    loaded = load_datasets([str(outside)], base_dir=tmp_path)
    assert loaded.cases[0].source_file == outside.resolve().as_posix()
    inside = write(tmp_path, "sub/x.json", '[{"id": "a"}]')
    assert load_datasets([str(inside)], base_dir=tmp_path).cases[0].source_file == "sub/x.json"


def test_base_dir_defaults_to_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "datasets/s1/a.yaml", "- id: a\n")
    monkeypatch.chdir(tmp_path)
    loaded = load_datasets(["datasets"])
    assert loaded.cases[0].location == "datasets/s1/a.yaml:1" and loaded.cases[0].suite == "s1"


def test_explicit_case_suite_wins_over_file_suite(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", "suite: {name: outer}\ncases:\n  - {id: a}\n  - {id: b, suite: own}\n")
    assert [c.suite for c in load_datasets(["a.yaml"], base_dir=tmp_path).cases] == ["outer", "own"]


# --- exact line numbers -------------------------------------------------------------------------------


def test_yaml_lines_with_comments_flow_items_anchors_and_merge_keys(tmp_path: Path) -> None:
    text = (
        "# leading comment\n"  # 1
        "\n"  # 2
        "cases:\n"  # 3
        "  # a comment inside\n"  # 4
        "  - &base\n"  # 5: an anchored mapping starts at its anchor
        "    id: one\n"  # 6
        "    category: crm\n"  # 7
        "  - {id: two, input: x}\n"  # 8
        "  -\n"  # 9
        "    <<: *base\n"  # 10
        "    id: three\n"  # 11
    )
    write(tmp_path, "a.yml", text)
    cases = load_datasets(["a.yml"], base_dir=tmp_path).cases
    assert [(c.id, c.source_line) for c in cases] == [("one", 5), ("two", 8), ("three", 10)]
    assert cases[2].category == "crm"


def test_json_lines_with_several_objects_per_line_and_tricky_strings(tmp_path: Path) -> None:
    text = (
        "[\n"  # 1
        '  {"id": "a", "input": "has { and [ and \\" and \\n inside"}, {"id": "b"},\n'  # 2
        "\n"  # 3
        '  {"id": "c", "tags": ["x",\n'  # 4
        '   "y"], "metadata": {"nested": [{"deep": 1}]}},\n'  # 5
        "  {\n"  # 6
        '    "id": "d"\n'  # 7
        "  }\n"  # 8
        "]\n"
    )
    write(tmp_path, "a.json", text)
    cases = load_datasets(["a.json"], base_dir=tmp_path).cases
    assert [(c.id, c.source_line) for c in cases] == [("a", 2), ("b", 2), ("c", 4), ("d", 6)]
    assert cases[0].input == 'has { and [ and " and \n inside'
    assert cases[2].metadata == {"nested": [{"deep": 1}]}


def test_json_equals_standard_parser(tmp_path: Path) -> None:
    data = {"suite": {"name": "s"}, "test_cases": [{"id": f"c{i}", "tags": [str(i)]} for i in range(5)]}
    write(tmp_path, "a.json", json.dumps(data, indent=3))
    cases = load_datasets(["a.json"], base_dir=tmp_path).cases
    assert [c.tags for c in cases] == [c["tags"] for c in data["test_cases"]]
    assert [c.source_line for c in cases] == [6 + 6 * i for i in range(5)]


def test_jsonl_with_bom_crlf_and_blank_lines(tmp_path: Path) -> None:
    write(tmp_path, "a.jsonl", b'\xef\xbb\xbf{"id": "a"}\r\n\r\n   \r\n{"id": "b"}\r\n\n{"id": "c"}')
    cases = load_datasets(["a.jsonl"], base_dir=tmp_path).cases
    assert [(c.id, c.source_line) for c in cases] == [("a", 1), ("b", 4), ("c", 6)]


def test_iter_cases_streams_case_objects_and_stream_records_files(tmp_path: Path) -> None:
    write(tmp_path, "a.jsonl", "".join(json.dumps({"id": f"c{i}"}) + "\n" for i in range(50)))
    iterator = iter_cases(["a.jsonl"], base_dir=tmp_path)
    first = next(iterator)
    assert isinstance(first, Case) and first.id == "c0"
    assert len(list(iterator)) == 49
    stream = DatasetStream(["a.jsonl"], tmp_path)
    assert sum(1 for _ in stream) == 50 and stream.files[0].cases == 50


def test_iter_cases_fails_fast_after_yielding_good_cases(tmp_path: Path) -> None:
    write(tmp_path, "a.jsonl", '{"id": "a"}\n{"id": "b", "risk_level": "x"}\n{"id": "c"}\n')
    iterator = iter_cases(["a.jsonl"], base_dir=tmp_path)
    assert next(iterator).id == "a"
    with pytest.raises(DatasetError, match=r"^a\.jsonl:2: case 'b': field 'risk_level'"):
        next(iterator)


def test_resolve_paths_lists_sources_without_reading(tmp_path: Path) -> None:
    write(tmp_path, "d/x/b.yaml", "- id: b\n")
    write(tmp_path, "d/a.json", "[]")
    sources = resolve_paths(["d"], tmp_path)
    assert [(s.display, s.default_suite()) for s in sources] == [("d/a.json", "d"), ("d/x/b.yaml", "x")]


# --- error paths --------------------------------------------------------------------------------------


def test_risk_level_error_is_one_readable_line(tmp_path: Path) -> None:
    write(tmp_path, "datasets/x.yaml", "- id: test_1\n- id: test_2\n\n- id: test_3\n  risk_level: urgent\n")
    error = load_error(["datasets/x.yaml"], tmp_path)
    assert str(error) == (
        "datasets/x.yaml:5: case 'test_3': field 'risk_level': must be one of critical, high, medium, low "
        "(got 'urgent')"
    )
    assert error.where == "datasets/x.yaml:5"  # the field's line (the case starts on line 4)


def test_invalid_yaml_reports_parser_line(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", "cases:\n  - id: a\n    input: [unclosed\n  - id: b\n")
    error = load_error(["a.yaml"], tmp_path)
    assert str(error).startswith("a.yaml:4: invalid YAML:")


def test_yaml_constructor_failures_are_user_errors(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", "- id: a\n  when: 2024-13-45\n")
    write(tmp_path, "b.yaml", "- id: b\n  x: !!python/object:os.system {}\n")
    write(tmp_path, "c.yaml", "--- [1]\n--- [2]\n")
    error = load_error(["a.yaml", "b.yaml", "c.yaml"], tmp_path)
    assert error.errors[0].startswith("a.yaml:1: invalid YAML: ValueError")
    assert error.errors[1].startswith("b.yaml:2: invalid YAML:") and "python/object" in error.errors[1]
    assert error.errors[2].startswith("c.yaml:2: invalid YAML: expected a single document")


def test_invalid_json_reports_decoder_line(tmp_path: Path) -> None:
    write(tmp_path, "a.json", '[\n  {"id": "a"},\n  {"id": "b",}\n]\n')
    assert str(load_error(["a.json"], tmp_path)).startswith("a.json:3: invalid JSON: Expecting property name")
    write(tmp_path, "b.json", '[\n  {"id": "a"}\n  {"id": "b"}\n]\n')
    assert str(load_error(["b.json"], tmp_path)) == "b.json:3: invalid JSON: Expecting ',' delimiter (column 3)"
    write(tmp_path, "c.json", '{"cases": []}\n{"more": 1}\n')
    assert str(load_error(["c.json"], tmp_path)).startswith("c.json:2: invalid JSON: Expecting end of data")


def test_invalid_jsonl_line_is_reported_and_other_lines_still_checked(tmp_path: Path) -> None:
    write(tmp_path, "a.jsonl", '{"id": "a"}\n{"id": \n{"id": "c", "tags": 3}\n')
    error = load_error(["a.jsonl"], tmp_path)
    assert error.errors == [
        "a.jsonl:2: invalid JSON: Expecting value (column 8)",
        "a.jsonl:3: case 'c': field 'tags': must be a list (got 3)",
    ]
    assert str(error).endswith("(and 1 more error)")


def test_not_utf8_reports_line(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", b"- id: a\n- id: b\xff\n")
    assert str(load_error(["a.yaml"], tmp_path)).startswith("a.yaml:2: not valid UTF-8")
    write(tmp_path, "b.jsonl", b'{"id": "a"}\n{"id": "\xc3"}\n')
    assert str(load_error(["b.jsonl"], tmp_path)).startswith("b.jsonl:2: not valid UTF-8")


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("a.yaml", "just a string\n", "a.yaml:1: the top level must be a list of cases or a mapping"),
        ("a.json", '\n\n"text"', "a.json:3: the top level must be a list of cases or a mapping"),
        ("a.yaml", "tests:\n  - id: a\n", "a.yaml:2: unknown top-level key 'tests'"),
        (
            "a.yaml",
            "test_case:\n  - id: a\n",
            "a.yaml:2: unknown top-level key 'test_case' (did you mean 'test_cases'?)",
        ),
        ("a.yaml", "suite: {name: x}\n", "a.yaml:1: expected a list of cases or a mapping"),
        ("a.json", '{"cases": [], "test_cases": []}', "a.json:1: both 'test_cases:' and 'cases:' are present"),
        ("a.yaml", "cases:\n  id: a\n", "a.yaml:2: 'cases' must be a list of cases (got {'id': 'a'})"),
        ("a.yaml", "- id: a\n- just text\n", "a.yaml:2: case #2 is not a mapping (got 'just text')"),
        ("a.jsonl", '{"id": "a"}\n[1, 2]\n', "a.jsonl:2: case #2 is not a mapping (got [1, 2])"),
        ("a.yaml", "- id: a\n  input: x\n  id: b\n", "a.yaml:1: case 'b': key 'id' appears twice"),
        ("a.yaml", "- id: a\n  1: x\n", "a.yaml:1: case 'a': key 1 is not text"),
        ("a.yaml", "- id: a\n  index: 3\n", "a.yaml:1: case 'a': key 'index' is reserved (set by the loader)"),
        ("a.yaml", "- description: no id or input\n", "a.yaml:1: case #1: a case needs an 'id'"),
        ("a.json", '[{"id": "x", "num_tokens": -5}]', "a.json:1: case 'x': field 'num_tokens': must be ≥ 0 (got -5)"),
        ("a.yaml", "- intent_id: x\n  tags: {a: 1}\n", "a.yaml:2: case 'x': field 'tags': must be a list"),
        (
            "a.yaml",
            "- id: x\n  rules: [{type: containz, value: a}]\n",
            "a.yaml:2: case 'x': field 'rules[0].type': must be one of contains, not_contains, regex",
        ),
        (
            "a.yaml",
            "- id: x\n  mentions: [{brand: A, is_mine: true, rnk: 1}]\n",
            "a.yaml:2: case 'x': mentions[0]: unknown key 'rnk' (did you mean 'rank'?)",
        ),
        (
            "a.yaml",
            "- id: x\n  rules: [{type: regex, value: 'a{4294967296}'}]\n",
            "a.yaml:1: case 'x': invalid (OverflowError",
        ),
        ("a.txt", "- id: a\n", "a.txt: unsupported dataset file type"),
    ],
)
def test_error_paths_are_user_errors_with_file_and_line(tmp_path: Path, name: str, text: str, expected: str) -> None:
    write(tmp_path, name, text)
    message = str(load_error([name], tmp_path))
    assert message.startswith(expected), message


def test_expected_brand_outside_brand_lists(tmp_path: Path) -> None:
    write(
        tmp_path,
        "f.yaml",
        "test_cases:\n  - intent_id: t\n    brands_mine: [HubSpot]\n    expected_my_mentions: [Hubspot, Zoho]\n",
    )
    assert (
        str(load_error(["f.yaml"], tmp_path))
        == "f.yaml:2: case 't': expected_my_mentions: 'Zoho' is not in brands_mine"
    )


def test_duplicate_ids_across_files_name_both_locations(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", "- id: same\n- id: other\n")
    write(tmp_path, "b.jsonl", '{"id": "x"}\n{"id": "same"}\n')
    error = load_error(["a.yaml", "b.jsonl"], tmp_path)
    assert str(error) == "b.jsonl:2: duplicate case id 'same' (first defined at a.yaml:1)"


def test_duplicate_ids_on_the_same_line(tmp_path: Path) -> None:
    write(tmp_path, "a.json", '[{"id": "a"}, {"id": "a"}]')
    assert str(load_error(["a.json"], tmp_path)) == "a.json:1: duplicate case id 'a' (first defined at a.json:1)"


def test_duplicate_generated_ids_from_identical_questions(tmp_path: Path) -> None:
    write(tmp_path, "gt.json", '[{"question": "Why?"},\n {"question": "  why? "}]')
    error = load_error(["gt.json"], tmp_path)
    assert str(error) == f"gt.json:2: duplicate case id {stable_case_id('why?')!r} (first defined at gt.json:1)"


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"a.yaml": ""}, "a.yaml:1: the dataset is empty: no test cases found"),
        ({"a.yaml": "cases: []\n", "b.jsonl": "\n\n"}, "a.yaml, b.jsonl: the dataset is empty: no test cases found"),
        ({"a.json": "  \n"}, "a.json:1: the dataset is empty: no test cases found"),
    ],
)
def test_empty_dataset(tmp_path: Path, files: dict[str, str], message: str) -> None:
    for name, text in files.items():
        write(tmp_path, name, text)
    assert str(load_error(list(files), tmp_path)) == message


def test_paths_matching_nothing_name_the_path(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    write(tmp_path, "only.txt", "x")
    error = load_error(["missing.yaml", "datasets/**/*.yaml", "empty", "*.txt"], tmp_path)
    assert error.errors == [
        "dataset path 'missing.yaml' does not exist",
        "dataset glob 'datasets/**/*.yaml' matches no .yaml/.yml/.json/.jsonl files",
        "dataset directory 'empty' holds no .yaml/.yml/.json/.jsonl files",
        "dataset glob '*.txt' matches no .yaml/.yml/.json/.jsonl files",
    ]
    assert str(error) == "dataset path 'missing.yaml' does not exist (and 3 more errors)"


def test_many_errors_keep_first_twenty_and_count_the_rest(tmp_path: Path) -> None:
    lines = [json.dumps({"id": f"c{i}", "risk_level": "bad"}) for i in range(25)]
    write(tmp_path, "a.jsonl", "\n".join(lines))
    error = load_error(["a.jsonl"], tmp_path)
    assert len(error.errors) == 20 and error.total == 25
    assert error.errors[19].startswith("a.jsonl:20: case 'c19'")
    assert str(error).startswith("a.jsonl:1: case 'c0': field 'risk_level'")
    assert str(error).endswith("(and 24 more errors)")


def test_suite_block_errors_name_key_and_file(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", "cases:\n  - id: a\nsuite:\n  name: s\n  metircs: [x]\n")
    assert str(load_error(["a.yaml"], tmp_path)) == "a.yaml:5: suite: unknown key 'metircs' (did you mean 'metrics'?)"
    write(tmp_path, "b.yaml", "suite: {options: {k: 0}}\ncases: [{id: b}]\n")
    assert str(load_error(["b.yaml"], tmp_path)).startswith("b.yaml:1: suite: field 'options.k': must be ≥ 1")
    write(tmp_path, "c.yaml", "suite: [1]\ncases: [{id: c}]\n")
    assert str(load_error(["c.yaml"], tmp_path)) == "c.yaml:1: suite must be a mapping (got [1])"


def test_same_suite_configured_differently_in_two_files(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", "suite: {name: s, thresholds: {m: 0.5}}\ncases: [{id: a}]\n")
    write(tmp_path, "b.yaml", "suite: {name: s, thresholds: {m: 0.5}}\ncases: [{id: b}]\n")
    assert set(load_datasets(["a.yaml", "b.yaml"], base_dir=tmp_path).suites) == {"s"}
    write(tmp_path, "c.yaml", "\nsuite: {name: s, thresholds: {m: 0.6}}\ncases: [{id: c}]\n")
    error = load_error(["a.yaml", "c.yaml"], tmp_path)
    assert str(error) == "c.yaml:2: suite 's' is configured differently at a.yaml:1"


def test_secrets_never_appear_in_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALGATE_TEST_API_KEY", "sk-very-secret-value")
    register_environment(os.environ)  # what the edges (CLI, Action, build_settings) do with the environment
    write(tmp_path, "a.yaml", "- id: a\n  risk_level: sk-very-secret-value\n")
    error = load_error(["a.yaml"], tmp_path)
    assert "sk-very-secret-value" not in str(error) and "***" in str(error)
    assert all("sk-very-secret-value" not in line for line in error.errors)


# --- suite configuration ------------------------------------------------------------------------------


def test_suite_config_thresholds_resolve_by_direction() -> None:
    config = parse_suite_config(
        {"thresholds": {"mention_f1": 0.85, "false_is_mine_rate": 0, "latency": {"max": 2000}}}, "evalgate.yaml"
    )
    directions = {"mention_f1": "higher", "false_is_mine_rate": "lower", "latency": "lower"}
    assert config.resolve_thresholds(directions) == {
        "mention_f1": Threshold(op="min", value=0.85),
        "false_is_mine_rate": Threshold(op="max", value=0.0),
        "latency": Threshold(op="max", value=2000.0),
    }
    assert resolve_threshold(0.5, "higher") == Threshold(op="min", value=0.5)


def test_suite_config_unknown_metric_in_thresholds_suggests_a_name() -> None:
    config = SuiteConfig(name="s", thresholds={"mention_precison": 0.9})
    with pytest.raises(
        UserError,
        match=r"^suite 's': thresholds: unknown metric 'mention_precison' \(did you mean "
        r"'mention_precision'\?\)$",
    ):
        config.resolve_thresholds({"mention_precision": "higher"})


@pytest.mark.parametrize(
    ("thresholds", "fragment"),
    [
        ({"m": True}, "threshold 'm' must be a number, {min: x}, {max: x}, {gt: x} or {lt: x} (got True)"),
        ({"m": "high"}, "threshold 'm' must be a number"),
        ({"m": float("nan")}, "threshold 'm' must be a finite number"),
        ({"m": {"min": 1, "max": 2}}, "threshold 'm'"),
        ({"m": {"above": 1}}, "threshold 'm' must be one of {min: x}, {max: x}, {gt: x} or {lt: x} with a number x"),
    ],
)
def test_suite_config_bad_thresholds(thresholds: dict[str, object], fragment: str) -> None:
    with pytest.raises(UserError) as info:
        parse_suite_config({"thresholds": thresholds}, "evalgate.yaml")
    assert str(info.value).startswith("evalgate.yaml: suite: field 'thresholds': ")
    assert fragment in str(info.value)


def test_suite_config_all_fields_and_unknown_nested_option() -> None:
    config = parse_suite_config(
        {
            "name": "agents",
            "description": "d",
            "metrics": "workflow_pass, composite",
            "exclude_metrics": ["judge_quality"],
            "category_metrics": {"waiver": ["correctness", "tool_calling"]},
            "options": {"k": 3, "combined_score": {"alpha": 1.0}, "composite_weights": {"specialist_match": 0.3}},
        },
        "evalgate.yaml",
    )
    assert config.metrics == ["workflow_pass", "composite"] and config.options.k == 3
    assert config.options.combined_score.alpha == 1.0
    assert config.metric_names() == {"workflow_pass", "composite", "judge_quality", "correctness", "tool_calling"}
    with pytest.raises(
        UserError,
        match=r"^evalgate.yaml: suite: options.combined_score: unknown key 'alpah' "
        r"\(did you mean 'alpha'\?\)$",
    ):
        parse_suite_config({"options": {"combined_score": {"alpah": 1}}}, "evalgate.yaml")
    with pytest.raises(UserError, match=r"composite weights must sum to 1\.0"):
        parse_suite_config({"options": {"composite_weights": {"specialist_match": 0.9}}}, "evalgate.yaml")
    negative = {"specialist_match": 0.8, "keyword_coverage": 0.45, "data_source_match": -0.5, "response_quality": 0.25}
    with pytest.raises(UserError) as info:  # sums to 1, but a negative weight would reward a miss
        parse_suite_config({"options": {"composite_weights": negative}}, "evalgate.yaml")
    assert str(info.value) == "evalgate.yaml: suite: field 'options.composite_weights.data_source_match': must be ≥ 0.0 (got -0.5)"


def test_evalgate_yaml_top_level_without_suite_label() -> None:
    with pytest.raises(UserError) as info:
        parse_suite_config({"tresholds": {"m": 1}}, "evalgate.yaml", label="")
    assert str(info.value) == "evalgate.yaml: unknown key 'tresholds' (did you mean 'thresholds'?)"
    with pytest.raises(UserError, match=r"^evalgate.yaml: suite: field 'thresholds': threshold 'm' is too large"):
        parse_suite_config({"thresholds": {"m": 10**400}}, "evalgate.yaml")


def test_validate_metric_names() -> None:
    validate_metric_names(["a", "b"], {"a", "b", "c"}, "x.yaml:3")
    with pytest.raises(UserError) as info:
        validate_metric_names(["mention_f1", "hitrate", "zzz"], {"mention_f1", "hit_rate", "mrr"}, "x.yaml:3")
    assert str(info.value) == "x.yaml:3: unknown metrics 'hitrate' (did you mean 'hit_rate'?), 'zzz'"


def test_suite_module_does_not_import_metric_modules() -> None:
    code = (
        "import json, sys, evalgate.config.suite, evalgate.dataset.load;"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('evalgate.metrics.'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = set(json.loads(out))
    assert loaded <= {"evalgate.config.options", "evalgate.metrics.registry"}, loaded


# --- dry-run summary ----------------------------------------------------------------------------------


def test_dataset_summary_counts_every_dimension() -> None:
    loaded = load_datasets(["seeds", "tree"], base_dir=FIXTURES)
    summary = dataset_summary(loaded.cases, loaded.files)
    assert summary["total_cases"] == 16
    assert summary["recorded_outputs"] == 3  # two seed-001 answers + one seed-003 answer
    counts = summary["counts"]
    assert counts["risk_level"] == {"critical": 1, "high": 2, "medium": 13, "low": 0}
    assert counts["suite"]["manufacturing"] == 3 and counts["suite"]["brand"] == 3
    assert counts["category"]["crm"] == 3 and counts["category"]["(none)"] == 7
    assert list(counts["category"])[-1] == "(none)"
    assert counts["difficulty"] == {"simple": 2, "complex": 1, "medium": 1, "(none)": 12}
    assert counts["evolution_type"]["conditioning"] == 1
    assert counts["tag"]["safety"] == 2 and counts["tag"]["(none)"] == 13
    assert sum(counts["suite"].values()) == 16
    assert [f["path"] for f in summary["files"]][:1] == ["seeds/fanvise.jsonl"]


def test_render_summary_text_is_a_compact_table() -> None:
    loaded = load_datasets(["tree"], base_dir=FIXTURES)
    text = render_summary_text(dataset_summary(loaded.cases, loaded.files))
    lines = text.splitlines()
    assert lines[0] == "4 cases from 3 files, 0 with recorded outputs"
    assert "  tree/brand/part1.yaml        2  " in text
    assert "  crm                          3   75.0%" in text
    assert "difficulty" not in text  # no case has one
    assert "risk_level" in text and "  critical                     0    0.0%" in text
    assert max(len(line) for line in lines) < 80


def test_a_bad_rule_points_at_the_rules_own_line(tmp_path: Path) -> None:
    """The entry that is wrong, not the case that holds it: a rule's type on line 8, an assert's threshold on
    line 11; a problem with no line of its own (a missing field) stays on the case's line."""
    (tmp_path / "cases.yaml").write_text(
        "cases:\n"
        "  - id: a\n"                                # 2
        "    input: hi\n"
        "    output: hello\n"
        "    rules:\n"                               # 5
        "      - {type: contains, value: hello}\n"   # 6
        "      - {type: not_contains, value: bye}\n"
        "      - {type: containz, value: x}\n"       # 8
        "  - id: b\n"                                # 9
        "    assert:\n"
        "      - {criteria: Greets, threshold: high}\n"  # 11
        "  - input: no id is fine, but rules must be a list\n"  # 12
        "    rules: {type: contains, value: x}\n",   # 13
        encoding="utf-8")
    error = load_error([str(tmp_path / "cases.yaml")], tmp_path)
    lines = error.errors
    assert any("cases.yaml:8: case 'a': field 'rules[2].type'" in line for line in lines), lines
    assert any("cases.yaml:11: case 'b'" in line and "threshold" in line for line in lines), lines
    assert any("cases.yaml:13:" in line and "rules" in line for line in lines), lines
