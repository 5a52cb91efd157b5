"""The settings sections each stage reads (``config.sections``): together they expose every ``Settings`` field,
each under its own name with the Settings' own value, and nothing that is not a setting."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from evalgate.config.sections import (
    SECTIONS,
    AnswerSettings,
    GateSettings,
    JudgeSettings,
    PublishSettings,
    RecordSettings,
    SelectionSettings,
)
from evalgate.config.settings import Settings, build_settings

PACKAGE = Path(__file__).resolve().parents[2] / "evalgate"


def odd_settings(tmp_path: Path) -> Settings:
    """Settings whose values differ from the defaults (as a user sets them: CLI flags and an environment)."""
    settings, _, _ = build_settings(cli={
        "dataset": [str(tmp_path / "cases.jsonl")], "output_dir": str(tmp_path / "out"), "db": str(tmp_path / "h.db"),
        "concurrency": 3, "repeat": 4, "repeat_rule": "all", "judge_provider": "openai", "judge_model": "m",
        "baseline": "base.json", "no_gate": "fail", "calibration": "required", "shard": "2/3", "pairwise": True,
        "compat_output": "seed.json", "judge_batch_window": 17, "strict_metrics": True, "significance_level": 0.01,
        "langfuse": True, "progress": "plain", "max_answer_chars": 5000,
    }, env={"EVALGATE_JUDGE_API_KEY": "sk-test-section-0000"})
    return settings


def test_every_settings_field_is_in_some_section() -> None:
    exposed = {name for section in SECTIONS for name in section.names()}
    assert set(Settings.model_fields) - exposed == set(), "add the new setting to the section of the stage reading it"
    assert exposed - set(Settings.model_fields) == set()


@pytest.mark.parametrize("section", SECTIONS, ids=lambda section: section.__name__)
def test_a_section_holds_the_settings_own_values(section: type, tmp_path: Path) -> None:
    settings = odd_settings(tmp_path)
    view = section.of(settings)  # type: ignore[attr-defined]
    for name in section.names():  # type: ignore[attr-defined]
        assert getattr(view, name) == getattr(settings, name), name
        assert view.origin(name) == settings.origin(name), name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(view, section.names()[0], None)  # type: ignore[attr-defined]


def test_derived_paths_and_kinds_agree_with_settings(tmp_path: Path) -> None:
    settings = odd_settings(tmp_path)
    record, gate, selection = RecordSettings.of(settings), GateSettings.of(settings), SelectionSettings.of(settings)
    assert (record.output_path, record.db_path) == (settings.output_path, settings.db_path)
    assert gate.baseline_kind == settings.baseline_kind == "path"
    assert selection.shard_tuple == settings.shard_tuple == (2, 3)
    assert RecordSettings.of(Settings(output_dir="x")).db_path == Path("x") / "results.db"
    assert all(GateSettings.of(Settings(baseline=text)).baseline_kind == Settings(baseline=text).baseline_kind
               for text in ("", "none", " AUTO ", "runs/base.json"))


def test_a_section_never_shows_a_secret(tmp_path: Path) -> None:
    settings = odd_settings(tmp_path)
    assert JudgeSettings.of(settings).judge_api_key == "sk-test-section-0000"
    assert "sk-test-section" not in repr(JudgeSettings.of(settings))
    keyed = Settings(langfuse_public_key="pk-lf-section", langfuse_secret_key="sk-lf-section")
    assert "lf-section" not in repr(PublishSettings.of(keyed))


def section_reads(module: Path, section: type) -> set[str]:
    """The attributes read on parameters annotated with ``section`` in ``module``'s functions."""
    tree = ast.parse(module.read_text(encoding="utf-8"))
    read: set[str] = set()
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        params = {arg.arg for arg in [*function.args.args, *function.args.kwonlyargs]
                  if (isinstance(arg.annotation, ast.Name) and arg.annotation.id == section.__name__)
                  or (isinstance(arg.annotation, ast.Constant) and arg.annotation.value == section.__name__)}
        for node in ast.walk(function):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in params:
                read.add(node.attr)
    return read


@pytest.mark.parametrize(("module", "section"), [
    ("runner/answering.py", AnswerSettings), ("runner/baseline.py", GateSettings), ("runner/tallies.py", GateSettings),
    ("verdict/decide.py", GateSettings), ("store/run_files.py", RecordSettings), ("store/outdir.py", RecordSettings),
    ("runner/setup.py", SelectionSettings), ("dataset/selected.py", SelectionSettings),
    ("runner/finish.py", PublishSettings), ("runner/answering.py", JudgeSettings), ("runner/redundancy.py", JudgeSettings),
    ("runner/redundancy.py", AnswerSettings), ("cli/main.py", PublishSettings), ("export/langfuse.py", PublishSettings)])
def test_stage_functions_read_only_their_section(module: str, section: type) -> None:
    """What a stage function reads of the section it takes is a field (or derived property) of that section."""
    read = section_reads(PACKAGE / module, section)
    assert read, f"no function of {module} takes a {section.__name__}"
    allowed = set(section.names()) | {name for klass in section.__mro__  # type: ignore[attr-defined]
                                      for name, value in vars(klass).items() if isinstance(value, property)} | {"origin"}
    assert read <= allowed, read - allowed
