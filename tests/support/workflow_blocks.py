"""Every GitHub workflow a user can copy: the YAML blocks of README.md and docs/ that hold ``jobs:`` (whole
workflows, or the jobs of one), this repository's .github/workflows, and the workflow ``evalgate init``
writes. Shared by the hygiene test (tests/house/test_workflow_hygiene.py) and the act runs of the documented
workflows (tests/e2e/test_act_documented_workflows.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```ya?ml\n(.*?)^```", re.S | re.M)


@dataclass(frozen=True)
class Block:
    """One workflow: where it is (``README.md:60``), its text and its parsed document."""

    where: str
    text: str
    document: dict[Any, Any]

    @property
    def triggers(self) -> dict[str, Any]:
        """``on:`` as a mapping (YAML 1.1 reads the key ``on`` as True); empty for a jobs-only fragment."""
        on = self.document.get(True, self.document.get("on"))
        if isinstance(on, str):
            return {on: None}
        if isinstance(on, list):
            return dict.fromkeys(on)
        return dict(on or {})

    @property
    def complete(self) -> bool:
        """A whole workflow (``on:`` and ``jobs:``), not the jobs or steps of one."""
        return bool(self.triggers) and isinstance(self.document.get("jobs"), dict)

    def steps(self) -> list[tuple[str, dict[str, Any]]]:
        """``(job id, step)`` for every step of every job."""
        found = []
        for job_id, job in (self.document.get("jobs") or {}).items():
            for step in (job or {}).get("steps") or []:
                if isinstance(step, dict):
                    found.append((str(job_id), step))
        return found


def documented_blocks(root: Path = ROOT) -> list[Block]:
    """The YAML blocks of README.md and docs/**/*.md that hold ``jobs:``, in page order."""
    pages = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    found = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for match in BLOCK.finditer(text):
            body = match.group(1)
            if not re.search(r"(?m)^jobs:", body):
                continue
            line = text[:match.start()].count("\n") + 2  # the block's first line
            found.append(Block(f"{page.relative_to(root).as_posix()}:{line}", body, yaml.safe_load(body)))
    return found


def repository_workflows(root: Path = ROOT) -> list[Block]:
    return [Block(path.relative_to(root).as_posix(), path.read_text(encoding="utf-8"),
                  yaml.safe_load(path.read_text(encoding="utf-8")))
            for path in sorted((root / ".github" / "workflows").glob("*.yml"))]


def init_workflow(directory: Path) -> Block:
    """The workflow ``evalgate init`` writes into ``directory``."""
    from evalgate.cli.init import scaffold

    scaffold(directory, force=True)
    path = directory / ".github" / "workflows" / "evalgate.yml"
    text = path.read_text(encoding="utf-8")
    return Block("evalgate init: .github/workflows/evalgate.yml", text, yaml.safe_load(text))
