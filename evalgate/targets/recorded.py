"""The ``recorded`` target: answers already in the dataset, or in a separate outputs file.

An outputs file is JSON (a list of objects, or a mapping id → object) or JSONL, each object carrying
``id`` and any answer field (``output`` or a dialect's spelling of it/``answer``, ``sources``, ``agents_called``,
``tools_used``, ``agent_id``, ``data_sources``, ``mentions``, ``ranked_list``, ``num_tokens``,
``latency_ms``, ``debug_context``). Fields in the outputs file win over those in the dataset.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evalgate.dialect import case_fields
from evalgate.errors import UserError
from evalgate.model import Answer, Case, trusted

ANSWER_FIELDS = tuple(name for name in Answer.model_fields if name not in {"error", "cost_usd"})
OUTPUT_SPELLINGS: tuple[str, ...] = tuple(spelling for spelling, name in case_fields().renames.items() if name == "output")
"""The dialects' names of ``output``."""
OUTPUT_ALIASES = ("output", *OUTPUT_SPELLINGS, "answer", "response", "actual_output")
NO_OUTPUT = "no recorded output for this case (field " + " / ".join(map(repr, ("output", *OUTPUT_SPELLINGS))) + ")"


def answer_from_case(case: Case) -> Answer:
    """The answer recorded in the case itself."""
    if case.__pydantic_extra__:  # extra attributes set after loading may shadow answer fields
        values = {name: getattr(case, name, None) for name in ANSWER_FIELDS if hasattr(case, name)}
    else:  # the usual case: read the answer fields a Case declares straight from its dict
        fields = vars(case)
        values = {name: fields[name] for name in CASE_ANSWER_FIELDS}
        if case.output is not None:  # validated Case fields have exactly the types Answer declares
            return trusted(Answer, {**_NO_ANSWER, **{name: list(value) if type(value) is list else value
                                                     for name, value in values.items()}}, set(values))
    if case.output is None:
        values["error"] = NO_OUTPUT
    return Answer(**values)


CASE_ANSWER_FIELDS = tuple(name for name in ANSWER_FIELDS if name in Case.model_fields)
"""The answer fields a ``Case`` declares (the others are never set on a loaded case)."""
_NO_ANSWER: dict[str, None] = dict.fromkeys(Answer.model_fields)


class RecordedTarget:
    kind = "recorded"
    calls_bounded = True
    """Whether the run's bound on calls in flight covers this target (no calls of its own (a judge's calls go through the Executor))."""

    def __init__(self, outputs_file: str | None = None) -> None:
        self.outputs_file = outputs_file
        self.outputs: dict[str, dict[str, Any]] = load_outputs(Path(outputs_file)) if outputs_file else {}

    async def answer(self, case: Case, call: object = None) -> Answer:
        """The recorded answer (a conversation's turn: the turn's own ``output``); ``call`` is not needed."""
        recorded = self.outputs.get(case.id)
        if recorded is None:
            return answer_from_case(case)
        base = answer_from_case(case).model_dump(exclude={"error"}, exclude_none=True)
        base.update(recorded)
        return Answer(**base)

    async def aclose(self) -> None:
        return None

    def describe(self) -> dict[str, object]:
        return {"kind": self.kind, "outputs_file": self.outputs_file}


def load_outputs(path: Path) -> dict[str, dict[str, Any]]:
    """Read an outputs file into id → answer fields; errors name the file and line."""
    if path.exists() and not path.is_file():  # a FIFO or a device would block or never end
        raise UserError("the outputs file is not a regular file", where=str(path))
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read outputs file ({exc.strerror})", where=str(path)) from None
    rows: list[tuple[int, Any]] = []
    if path.suffix == ".jsonl":
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                rows.append((number, _json(line, f"{path}:{number}")))
    else:
        data = _json(text, str(path))
        if isinstance(data, dict):
            data = [{"id": key, **(value if isinstance(value, dict) else {"output": value})} for key, value in data.items()]
        if not isinstance(data, list):
            raise UserError("outputs file must be a JSON list, a mapping id → answer, or JSONL", where=str(path))
        rows = [(1, row) for row in data]
    outputs: dict[str, dict[str, Any]] = {}
    for number, row in rows:
        where = f"{path}:{number}"
        if not isinstance(row, dict) or "id" not in row:
            raise UserError("every output needs an 'id'", where=where)
        outputs[str(row["id"])] = _answer_fields(row, where)
    return outputs


def _answer_fields(row: dict[str, Any], where: str) -> dict[str, Any]:
    fields = {k: v for k, v in row.items() if k in ANSWER_FIELDS}
    for alias in OUTPUT_ALIASES:
        if alias in row and "output" not in fields:
            fields["output"] = row[alias]
    try:
        Answer(**fields)
    except ValidationError as exc:
        error = exc.errors()[0]
        raise UserError(f"field {'.'.join(map(str, error['loc']))}: {error['msg']}", where=where) from None
    return fields


def _json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", where=where) from None
