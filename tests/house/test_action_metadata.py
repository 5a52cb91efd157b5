"""action.yml against SchemaStore's action-metadata schema, and its inputs against settings and docs.

The schema is SchemaStore's ``github-action.json`` as vendored by the ``check-jsonschema`` PyPI package
(``check_jsonschema/builtin_schemas/vendor/github-actions.json``).
"""

from __future__ import annotations

import copy
import importlib.resources
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalgate.config.settings import FIELD_NAMES
from evalgate.github.publish import OUTPUT_NAMES, PUBLISH_INPUTS

REPO_ROOT = Path(__file__).resolve().parents[2]
ACTION_YML = REPO_ROOT / "action.yml"
INPUTS_DOC = REPO_ROOT / "docs" / "action-inputs.md"
REQUIRED_BY_ISSUE = (
    "dataset", "config", "judge-provider", "judge-model", "judge-base-url", "target", "target-url",
    "metric-thresholds", "case-ids", "first-n", "category", "strict-metrics", "fail-on-critical", "min-pass-rate",
    "concurrency", "api-retries", "max-cost", "output-dir", "github-token", "comment", "comment-tag",
    "upload-artifacts", "artifact-name", "baseline",
)


def metadata() -> dict[str, Any]:
    return yaml.safe_load(ACTION_YML.read_text(encoding="utf-8"))


def schemastore_schema() -> dict[str, Any]:
    try:
        vendor = importlib.resources.files("check_jsonschema.builtin_schemas.vendor")
    except ModuleNotFoundError:
        pytest.skip("needs the check-jsonschema package (SchemaStore's github-action schema): pip install check-jsonschema")
    return json.loads((vendor / "github-actions.json").read_text(encoding="utf-8"))


def schema_errors(document: dict[str, Any]) -> list[str]:
    import jsonschema

    schema = schemastore_schema()
    validator = jsonschema.Draft7Validator(schema)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]


def is_setting(name: str) -> bool:
    return name.replace("-", "_") in FIELD_NAMES


def split_description(text: str) -> tuple[str, str]:
    """``"Does x (default: y)."`` → ``("Does x.", "y")``; a description without a default note fails."""
    sentence = text.strip()
    match = re.search(r"\(default: ([^()]*(?:\([^()]*\)[^()]*)*)\)", sentence)
    assert match, f"description must state its default as '(default: …)': {text!r}"
    before, after = sentence[: match.start()].rstrip(), sentence[match.end():].strip()
    rest = before + (after if after.startswith(".") else (" " + after if after else ""))
    return rest.rstrip(".").rstrip() + ".", match[1]


def maps_to(name: str) -> str:
    if is_setting(name):
        field = name.replace("-", "_")
        return f"`EVALGATE_{field.upper()}` · `{field}:` in evalgate.yaml · `--{name}`"
    return "publishing"


def cell(text: str) -> str:
    return text.replace("|", "\\|")


def inputs_table(meta: dict[str, Any]) -> str:
    """The Markdown inputs table (the README's and docs/action-inputs.md's), rendered from action.yml."""
    rows = ["| Input | Default | Maps to | Description |", "|---|---|---|---|"]
    for name, spec in meta["inputs"].items():
        description, default = split_description(spec["description"])
        rows.append(f"| `{name}` | {cell(default)} | {maps_to(name)} | {cell(description)} |")
    return "\n".join(rows) + "\n"


def outputs_table(meta: dict[str, Any]) -> str:
    rows = ["| Output | Description |", "|---|---|"]
    rows += [f"| `{name}` | {cell(spec['description'])} |" for name, spec in meta["outputs"].items()]
    return "\n".join(rows) + "\n"


# ---- schema ---------------------------------------------------------------------------------------------


def test_action_yml_is_valid_action_metadata() -> None:
    assert schema_errors(metadata()) == []


@pytest.mark.parametrize(("mutate", "expected"), [
    (lambda m: m["runs"].__setitem__("using", "dockerfile"), "runs"),
    (lambda m: m["inputs"]["dataset"].pop("description"), "description"),
    (lambda m: m.pop("name"), "name"),
    (lambda m: m["branding"].__setitem__("color", "magenta"), "color"),
    (lambda m: m["inputs"]["dataset"].__setitem__("colour", "x"), "colour"),
])
def test_the_schema_rejects_broken_metadata(mutate: Any, expected: str) -> None:
    broken = copy.deepcopy(metadata())
    mutate(broken)
    errors = schema_errors(broken)
    assert errors and any(expected in error for error in errors), errors


def test_builds_this_commit_until_the_release_pins_the_image_by_digest() -> None:
    runs = metadata()["runs"]
    assert runs == {"using": "docker", "image": "Dockerfile"}  # tools/release.py pin: the release commit's digest
    assert (REPO_ROOT / "Dockerfile").is_file()  # what the release builds, and forks build from


def test_the_listing_name_is_not_the_unrelated_evalgate_action() -> None:
    name = metadata()["name"]
    assert name == "evalgate-action LLM quality gate" and name.lower() != "evalgate"


# ---- inputs and outputs ----------------------------------------------------------------------------------


def test_every_input_the_issue_names_is_declared() -> None:
    assert set(REQUIRED_BY_ISSUE) <= set(metadata()["inputs"])


def test_every_input_maps_to_a_setting_or_a_publishing_option() -> None:
    for name in metadata()["inputs"]:
        assert is_setting(name) != (name in PUBLISH_INPUTS), f"input {name!r} must be exactly one of the two"
    assert set(PUBLISH_INPUTS) <= set(metadata()["inputs"])


def test_setting_inputs_default_to_empty_so_config_files_still_apply() -> None:
    for name, spec in metadata()["inputs"].items():
        if is_setting(name):
            assert spec.get("default", "") == "", f"{name}: a non-empty default would override evalgate.yaml"
        assert spec.get("required") is False, f"{name} must be optional"


def test_publishing_defaults() -> None:
    inputs = metadata()["inputs"]
    assert inputs["github-token"]["default"] == "${{ github.token }}"
    assert inputs["comment"]["default"] == "always"
    assert inputs["upload-artifacts"]["default"] == "true"
    assert inputs["comment-tag"]["default"] == "default"


def test_every_input_documents_its_default() -> None:
    for spec in metadata()["inputs"].values():
        split_description(spec["description"])


def test_outputs_are_the_ones_the_entrypoint_writes() -> None:
    assert tuple(metadata()["outputs"]) == OUTPUT_NAMES


# ---- documentation ---------------------------------------------------------------------------------------


def test_docs_table_matches_action_yml() -> None:
    text = INPUTS_DOC.read_text(encoding="utf-8")
    meta = metadata()
    assert inputs_table(meta) in text, "regenerate docs/action-inputs.md: python tests/house/test_action_metadata.py"
    assert outputs_table(meta) in text


if __name__ == "__main__":  # print the tables for docs/action-inputs.md
    print(inputs_table(metadata()))
    print(outputs_table(metadata()))
