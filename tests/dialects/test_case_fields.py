"""The dialects' own case fields: off the core ``Case`` model, kept in ``Case.dialect_data`` and serialised
where they always were; an outside dialect (an ``evalgate.dialects`` entry point) gets the same hooks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from evalgate.dialect import case_fields
from evalgate.model import Case, Turn

ROOT = Path(__file__).resolve().parents[2]
SEED_ONLY = ("team_name", "active_team_id", "active_league_id", "brands_mine", "brands_competitors",
             "expected_specialist", "verified_answer_summary")


def test_the_seed_only_fields_are_not_case_fields_but_dialect_data() -> None:
    assert not set(SEED_ONLY) & set(Case.model_fields)
    assert "expected_specialist" not in Turn.model_fields
    assert {f.name for f in case_fields().fields} == set(SEED_ONLY)
    case = Case.model_validate({"intent_id": "t", "llm_answer_text": "hi", "brands_mine": ["Acme"], "teamName": "Hoopers",
                                "activeTeamId": 7, "expected_specialist": "data_analyst"})
    assert (case.id, case.output) == ("t", "hi")
    assert case.dialect_data == {"brands_mine": ["Acme"], "active_team_id": 7, "team_name": "Hoopers",
                                 "expected_specialist": "data_analyst"}
    assert case.dialect_value("brands_competitors") is None and case.dialect_value("team_name") == "Hoopers"
    assert case.metadata == {}


def test_documents_keep_their_keys_in_their_old_places() -> None:
    """The expectation digest hashes this JSON: a base run recorded before the move must compare equal."""
    case = Case.model_validate({"intent_id": "t", "llm_answer_text": "hi", "brands_mine": ["A"], "teamName": "x",
                                "expected_specialist": "data_analyst", "verified_answer_summary": "v",
                                "expected_keywords": ["k"], "turns": None})
    assert case.model_dump_json(exclude_defaults=True) == (
        '{"id":"t","expected_keywords":["k"],"expected_specialist":"data_analyst","verified_answer_summary":"v",'
        '"brands_mine":["A"],"team_name":"x","output":"hi"}')
    keys = list(case.model_dump())
    assert keys[keys.index("expected_keywords"):keys.index("expected_keywords") + 4] == [
        "expected_keywords", "expected_specialist", "expected_data_sources", "verified_answer_summary"]
    assert keys[keys.index("assertions") + 1:keys.index("output")] == ["active_team_id", "active_league_id", "team_name"]
    turn = Case.model_validate({"id": "c", "turns": [{"input": "a", "expected_specialist": "x", "expected_sources": ["s"]}]})
    assert turn.model_dump_json(exclude_defaults=True) == (
        '{"id":"c","turns":[{"input":"a","expected_sources":["s"],"expected_specialist":"x"}]}')
    assert case.criteria == "v"


def test_a_dialect_field_of_the_wrong_type_names_the_key_the_file_used() -> None:
    with pytest.raises(ValueError) as raised:
        Case.model_validate({"id": "a", "teamName": {"x": 1}})
    assert [error["loc"] for error in raised.value.errors()] == [("teamName",)]  # type: ignore[attr-defined]


PLUGIN = '''
from evalgate.dialect import CaseFormat, CliFlag, Dialect
from evalgate.model import DialectField


def read_cli(args, values, origins, notices):
    if getattr(args, "acme_only", None):
        values["case_ids"] = [args.acme_only]
        origins["case_ids"] = "--acme-only"
        notices.append(f"--acme-only {args.acme_only} is read as --case-ids {args.acme_only}")

DIALECT = Dialect(
    name="acme", label="Acme's evaluator",
    kind_aliases=("acme-evals",), compat_aliases=("a",),
    case_format=CaseFormat("Acme cases", (("input", "prompt"), ("acme_priority", "acme_priority"))),
    env_prefix="ACME_EVAL_", env_aliases={"ACME_EVAL_FIRST_N": "EVALGATE_FIRST_N"},
    case_fields=(DialectField("acme_priority", int | None, after="category", aliases=("acmePriority",)),),
    field_spellings={"acme_id": "id"},
    cli_flags=(CliFlag(("--acme-only",), after="--case-ids", options={"metavar": "ID", "help": "Acme's case filter"}),),
    cli_read=read_cli,
    verb=("acme-eval", "alias of run (Acme's evaluator)"),
)
'''


@pytest.fixture
def plugin(tmp_path: Path) -> dict[str, str]:
    """An installed outside dialect: a module and a dist-info whose entry point is in ``evalgate.dialects``."""
    site = tmp_path / "site"
    (site / "acme_dialect-1.0.dist-info").mkdir(parents=True)
    (site / "acme_dialect.py").write_text(PLUGIN, encoding="utf-8")
    (site / "acme_dialect-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-dialect\n"
                                                                   "Version: 1.0\n", encoding="utf-8")
    (site / "acme_dialect-1.0.dist-info" / "entry_points.txt").write_text(
        "[evalgate.dialects]\nacme = acme_dialect:DIALECT\n", encoding="utf-8")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(site)])}


def evalgate(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evalgate", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def test_an_outside_dialect_adds_its_fields_spellings_kind_and_variables(plugin: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "cases.yaml").write_text(textwrap.dedent("""\
        suite: {name: s, kind: acme-evals}
        cases:
          - acme_id: c1
            input: hello
            output: hi
            acmePriority: 2
        """), encoding="utf-8")
    done = evalgate({**plugin, "ACME_EVAL_FIRST_N": "1"}, tmp_path, "validate", "-d", "cases.yaml", "--compat", "a",
                    "--format", "json")
    assert done.returncode == 0, done.stderr
    assert "ACME_EVAL_FIRST_N is read as EVALGATE_FIRST_N" in done.stderr
    assert json.loads(done.stdout)["total_cases"] == 1
    probe = ("import json; from evalgate.dataset.load import iter_cases; case = next(iter_cases('cases.yaml')); "
             "print(json.dumps([case.id, case.dialect, case.dialect_data, case.model_dump(mode='json', exclude_none=True,"
             " exclude={'metadata', 'tags', 'rules', 'risk_level', 'expect_empty'})]))")
    loaded = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=plugin, capture_output=True, text=True,
                            timeout=300)
    case_id, dialect, data, dumped = json.loads(loaded.stdout)
    assert (case_id, dialect, data) == ("c1", "acme", {"acme_priority": 2})
    assert list(dumped.items()) == [("id", "c1"), ("input", "hello"), ("acme_priority", 2), ("suite", "s"),
                                    ("output", "hi")]  # in its place: after category

    (tmp_path / "bad.yaml").write_text("cases:\n  - id: c1\n    input: hello\n    acme_priorty: 2\n", encoding="utf-8")
    bad = evalgate(plugin, tmp_path, "validate", "-d", "bad.yaml")
    assert bad.returncode == 2 and "unknown key 'acme_priorty' (did you mean 'acme_priority'?)" in bad.stderr, bad.stderr

    (tmp_path / "missing.yaml").write_text("suite: {kind: acme}\ncases:\n  - id: c1\n    input: hello\n",
                                          encoding="utf-8")
    missing = evalgate(plugin, tmp_path, "validate", "-d", "missing.yaml")
    assert missing.returncode == 2 and "missing required field 'acme_priority' (Acme cases require prompt, " \
        "acme_priority" in missing.stderr, missing.stderr

    (tmp_path / "two.yaml").write_text("cases:\n  - {id: c1, input: a, output: x}\n  - {id: c2, input: b, output: y}\n",
                                      encoding="utf-8")
    ran = evalgate(plugin, tmp_path, "acme-eval", "-d", "two.yaml", "--acme-only", "c2", "-o", "out")
    assert ran.returncode == 0, ran.stderr
    assert "--acme-only c2 is read as --case-ids c2" in ran.stderr
    results = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))
    assert [record["id"] for record in results["results"]] == ["c2"]
    assert results["metadata"]["config"]["compat"] == ["acme"]  # its verb turns its dialect on
    assert "acme-eval" not in evalgate(plugin, tmp_path, "--help").stdout  # unlisted, like the seeds' verb

    without = evalgate(os.environ | {"PYTHONPATH": str(ROOT)}, tmp_path, "validate", "-d", "cases.yaml")
    assert without.returncode == 2 and "unknown kind 'acme-evals'" in without.stderr, without.stderr
