"""Issue #22, item 5: publish mode checks the artifact's results.json against the results schema.

The fork's run produced the artifact, so the fork controls it: numbers given as strings with newlines,
a list where the gate's reasons object belongs. ``mode: publish`` (the Action's entry module, in a fresh
process, against the GitHub fake) posts the comment, warns once per value left out and writes every
step output — never a traceback."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

from evalgate.github.validate import prune
from tests.servers.github_fake import GitHubFake
from tests.support.action import run_entrypoint, workflow_commands
from tests.support.relay import HEAD_SHA, PR, REPO, evaluate_fork_run, publish_env, workflow_run_event


def tampered(data: bytes) -> bytes:
    """The artifact with wrong-typed values planted in its results.json."""
    source = zipfile.ZipFile(io.BytesIO(data))
    document = json.loads(source.read("results.json"))
    document["summary"]["pass_rate"] = "0.99\n::set-output name=passed::true"
    document["summary"]["critical_failures"] = "0\nx"
    document["summary"]["total_passed"] = ["many"]
    document["gate"]["exit_code"] = "0\n"
    document["gate"]["reasons"] = {"not": "a list"}
    first = next(iter(document["metrics"]))
    document["metrics"][first]["average"] = "1.0\n2.0"
    document["results"][0]["metrics"] = "all good"
    document["results"][1]["status"] = 17
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("results.json", json.dumps(document))
        archive.writestr("results.db", source.read("results.db"))
    return buffer.getvalue()


def test_prune_leaves_out_each_wrong_value_and_keeps_the_rest() -> None:
    document = {"schema_version": 1, "summary": {"pass_rate": "1\n", "total_passed": 3},
                "gate": {"passed": False, "exit_code": 1, "reasons": ["x", 5]}, "results": [{"id": 3}]}
    warnings = prune(document)
    assert document["summary"] == {"total_passed": 3}
    assert document["gate"]["reasons"] == ["x"]
    assert any(w.startswith("summary.pass_rate: a string where the schema wants number") for w in warnings)
    assert any(w.startswith("gate.reasons[1]:") for w in warnings) and any("results[0]" in w for w in warnings)


def test_publish_mode_with_wrong_typed_values_warns_and_writes_every_output(tmp_path: Path,
                                                                           github: GitHubFake) -> None:
    data, _ = evaluate_fork_run(tmp_path, github)
    run = workflow_run_event()["workflow_run"]
    github.add_run_artifact(REPO, run, "evalgate-results", tampered(data))
    github.add_pull(REPO, PR, head_sha=HEAD_SHA, head_label="forker:fix-prompts")
    ws, env = publish_env(tmp_path, github, workflow_run_event())
    done = run_entrypoint(ws, env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    commands = workflow_commands(done.stdout)
    warned = [rest for name, rest in commands if name == "warning" and "results.json in the artifact" in rest]
    assert any("summary.pass_rate" in w for w in warned) and any("gate.exit_code" in w for w in warned)
    assert not any(name == "error" for name, _ in commands)
    assert len(github.comments_on(REPO, PR)) == 1
    outputs = ws.outputs()
    assert set(outputs) >= {"passed", "exit-code", "pass-rate", "critical-failures", "comment-url"}
    assert outputs["passed"] == "false" and outputs["pass-rate"] == "" and outputs["comment-url"]
    assert "set-output" not in outputs["pass-rate"]


def test_an_artifact_whose_summary_is_not_an_object_is_one_error(tmp_path: Path) -> None:
    import pytest

    from evalgate.github.relay import RelayError, extract

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("results.json", json.dumps({"schema_version": 1, "run_id": "r", "summary": "all passed",
                                                     "gate": {"passed": True}, "metrics": {}, "results": []}))
    with pytest.raises(RelayError, match=r"not an evalgate results document \(summary: a string"):
        extract(buffer.getvalue(), tmp_path)
