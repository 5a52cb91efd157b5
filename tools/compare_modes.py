"""Check that the container action and host mode gave the same answer on one suite.

    python -m tools.compare_modes CONTAINER_OUTPUTS.json HOST_OUTPUTS.json

Each file is a step's outputs (``${{ toJSON(steps.ID.outputs) }}``). Equal means: the same output
names and values (the results paths differ only by their ``output-dir``; the Markdown report names its
run's id and time), and results.json documents equal once what must differ is set aside: ``run_id``,
``timestamp``, ``metadata.finished``, the ``output_dir`` setting, the workspace path prefix (``/github/workspace`` in the
container) and the patch level of Python. Exit 0
when equal, else 1 with one line per difference.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

CONTAINER_WORKSPACE = "/github/workspace"
PATH_OUTPUTS = ("results-json", "results-db")


def normalise(value: Any, workspace: str) -> Any:
    """``value`` with workspace prefixes replaced by ``<workspace>``."""
    if isinstance(value, dict):
        return {key: normalise(item, workspace) for key, item in value.items()}
    if isinstance(value, list):
        return [normalise(item, workspace) for item in value]
    if isinstance(value, str):
        return value.replace(workspace.rstrip("/") + "/", "<workspace>/")
    return value


def comparable(document: dict[str, Any], workspace: str) -> dict[str, Any]:
    """A results.json document without the fields two honest runs may differ in."""
    clean = normalise(document, workspace)
    for key in ("run_id", "timestamp"):
        clean.pop(key, None)
    metadata = clean.get("metadata") or {}
    metadata.pop("finished", None)  # when the run ended: the two modes run one after the other
    (metadata.get("config") or {}).pop("output_dir", None)
    versions = metadata.get("versions") or {}
    if isinstance(versions.get("python"), str):
        versions["python"] = re.sub(r"^(\d+\.\d+)\.\d+.*$", r"\1", versions["python"])
    return clean


def differences(a: Any, b: Any, where: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        found = []
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                found.append(f"{where}.{key}: only in {'host' if key in b else 'container'}")
            else:
                found += differences(a[key], b[key], f"{where}.{key}")
        return found
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [line for i, (x, y) in enumerate(zip(a, b, strict=True)) for line in differences(x, y, f"{where}[{i}]")]
    return [] if a == b else [f"{where}: container {json.dumps(a)[:120]} ≠ host {json.dumps(b)[:120]}"]


def without_run_identity(text: str, document: dict[str, Any] | None) -> str:
    """Markdown with this run's id and timestamp replaced by placeholders (they name the run, not the result)."""
    for key in ("run_id", "timestamp"):
        if document and isinstance(document.get(key), str):
            text = text.replace(document[key], f"<{key}>")
    return text


def first_difference(a: str, b: str) -> str:
    for number, (x, y) in enumerate(zip(a.splitlines(), b.splitlines(), strict=False), 1):
        if x != y:
            return f"line {number}: container {x[:100]!r} ≠ host {y[:100]!r}"
    return f"lengths {len(a)} ≠ {len(b)}"


def compare(container_file: Path, host_file: Path, workspace: Path) -> list[str]:
    container = json.loads(container_file.read_text(encoding="utf-8"))
    host = json.loads(host_file.read_text(encoding="utf-8"))
    documents: list[dict[str, Any] | None] = [None, None]
    found = []
    for name in PATH_OUTPUTS:
        if bool(container.get(name)) != bool(host.get(name)):
            found.append(f"outputs.{name}: set in one mode only")
    if container.get("results-json") and host.get("results-json"):
        documents = [json.loads((workspace / outputs["results-json"]).read_text(encoding="utf-8"))
                     for outputs in (container, host)]
        found += differences(comparable(documents[0] or {}, CONTAINER_WORKSPACE),
                             comparable(documents[1] or {}, str(workspace)), "results.json")
    summaries = [without_run_identity(outputs.get("summary-markdown", ""), document)
                 for outputs, document in zip((container, host), documents, strict=True)]
    if summaries[0] != summaries[1]:
        found.append("outputs.summary-markdown: " + first_difference(*summaries))
    skip = (*PATH_OUTPUTS, "summary-markdown")
    declared = declared_outputs()  # act also shows a composite's inner steps' outputs; a workflow sees these
    found += differences({k: v for k, v in container.items() if k not in skip and k in declared},
                         {k: v for k, v in host.items() if k not in skip and k in declared}, "outputs")
    return found


def declared_outputs() -> set[str]:
    """The outputs action.yml declares (host/action.yml declares the same); read without a YAML library,
    which the job's plain Python may not have: the two-space keys of the top-level ``outputs:`` block."""
    text = (Path(__file__).resolve().parent.parent / "action.yml").read_text(encoding="utf-8")
    block = re.search(r"^outputs:\n((?:(?:  .*)?\n)*)", text, re.M)
    return set(re.findall(r"^  ([a-z0-9-]+):", block.group(1), re.M)) if block else set()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    workspace = Path(os.environ.get("GITHUB_WORKSPACE") or os.getcwd())
    found = compare(Path(args[0]), Path(args[1]), workspace)
    for line in found:
        print(f"modes differ: {line}")
    if not found:
        print("container and host mode agree: outputs, summary and results.json")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
