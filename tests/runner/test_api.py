"""The Python API: ``evalgate.run`` / ``validate`` / ``compare`` / ``metric`` / ``Score``, its exact surface,
and that ``import evalgate`` stays light."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import evalgate
from evalgate.model import CaseResult

DOCUMENTED = ["Answer", "AnswerView", "CaseView", "ComparisonResult", "RunResult", "Score", "UserError",
              "ValidationResult", "__version__", "compare", "metric", "run", "validate"]


def test_the_public_surface_is_exactly_the_documented_one() -> None:
    assert evalgate.__all__ == DOCUMENTED
    for name in DOCUMENTED:
        assert getattr(evalgate, name) is not None
    with pytest.raises(AttributeError):
        _ = evalgate.execute  # type: ignore[attr-defined]
    page = (Path(__file__).resolve().parents[2] / "docs" / "python-api.md").read_text()
    for name in DOCUMENTED:
        assert f"evalgate.{name}" in page or f"`{name}`" in page, name


def test_import_evalgate_loads_nothing_heavy() -> None:
    probe = ("import sys, evalgate; heavy = [m for m in ('pydantic', 'evalgate.runner', 'evalgate.model', 'yaml', "
             "'jinja2', 'aiohttp') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    version = subprocess.run([sys.executable, "-m", "evalgate", "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.strip() == f"evalgate {evalgate.__version__}"


def dataset(tmp_path: Path) -> Path:
    path = tmp_path / "cases.yaml"
    path.write_text(textwrap.dedent("""\
        cases:
          - {id: hello, input: Say hello, output: "Hello! How can I help?", expected_keywords: [hello, help]}
          - {id: bye, input: Say goodbye, output: "Bye.", expected_keywords: [goodbye], risk_level: high}
        """))
    return path


def test_run_with_a_decorated_check_returns_typed_results(tmp_path: Path) -> None:
    @evalgate.metric(name="exclaims", threshold=1.0)
    def exclaims(case: evalgate.CaseView, answer: evalgate.AnswerView) -> evalgate.Score:
        return evalgate.Score(1.0 if "!" in answer.text else 0.0, reason="no exclamation mark")

    result = evalgate.run(dataset=dataset(tmp_path), output_dir=tmp_path / "out", metrics=[exclaims],
                          thresholds={"keyword_coverage": 0.5}, env={})
    assert isinstance(result, evalgate.RunResult)
    assert result.passed is False and result.exit_code == 1 and result.status == "completed"
    assert result.pass_rate == 0.5 and result.results_path == tmp_path / "out" / "results.json"
    assert result.metrics["exclaims"]["average"] == 0.5
    assert result.metrics["keyword_coverage"]["threshold"] == {"min": 0.5}
    cases = result.cases()
    assert [c.id for c in cases] == ["hello", "bye"] and all(isinstance(c, CaseResult) for c in cases)
    assert cases[1].metrics["exclaims"].details["reason"] == "no exclamation mark"
    with pytest.raises(AssertionError, match="exclaims"):
        result.assert_passed()
    # the same, named by reference in a suite-level metrics= list, from inside a running event loop
    async def inside_a_loop() -> evalgate.RunResult:
        return evalgate.run(dataset=str(dataset(tmp_path)), output_dir=str(tmp_path / "out2"),
                            metrics=["exclaims"], metric_thresholds={"exclaims": None}, env={})

    informational = asyncio.run(inside_a_loop())
    assert informational.metrics["exclaims"]["threshold"] is None


def test_validate_and_compare(tmp_path: Path) -> None:
    checked = evalgate.validate(dataset=dataset(tmp_path), env={},
                                metrics=[{"name": "greets", "criteria": "The answer greets the user."}])
    assert isinstance(checked, evalgate.ValidationResult)
    assert checked.cases == 2 and checked.summary["total_cases"] == 2
    assert checked.custom_metrics == [{"name": "greets", "type": "judged", "origin": "evalgate.yaml",
                                       "summary": "The answer greets the user.", "threshold": {"min": 0.5},
                                       "steps": "not cached (no judge configured: judge_provider none)"}]
    base = evalgate.run(dataset=dataset(tmp_path), output_dir=tmp_path / "base", env={})
    head = evalgate.run(dataset=dataset(tmp_path), output_dir=tmp_path / "head", env={})
    compared = evalgate.compare(base.results_path, head.results_path, fail_on_regression=True)
    assert isinstance(compared, evalgate.ComparisonResult)
    assert compared.regression is False and compared.reasons == []
    assert compared.metrics["keyword_coverage"]["delta"] == 0.0


def test_mistakes_raise_clearly(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'judge_provder' \(did you mean 'judge_provider'"):
        evalgate.run(dataset=str(dataset(tmp_path)), judge_provder="openai")
    with pytest.raises(evalgate.UserError, match="does not exist"):
        evalgate.validate(dataset=str(tmp_path / "missing.yaml"), env={})
    with pytest.raises(evalgate.UserError, match="needs an API key"):
        evalgate.run(dataset=str(dataset(tmp_path)), judge_provider="openai", env={}, output_dir=str(tmp_path / "o"))
    with pytest.raises(ValueError, match="built-in metric"):
        evalgate.metric(name="mention_f1")(lambda case, answer: 1.0)


def test_results_json_of_an_api_run_is_the_cli_one(tmp_path: Path) -> None:
    result = evalgate.run(dataset=dataset(tmp_path), output_dir=tmp_path / "out", env={})
    document = json.loads(result.results_path.read_text())
    assert document["gate"] == {"passed": result.passed, "exit_code": result.exit_code, "reasons": result.reasons}
    assert "results" not in result.document or result.document.get("results") is None
