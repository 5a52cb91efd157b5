"""Sharding in the Action, run as the runner runs it: two ``shard: i/2`` steps upload uniquely named artifacts
to the artifacts v4 fake (Twirp + Azurite) and post no comment; a ``mode: merge`` step downloads this run's
shard artifacts, merges them, compares with the baseline (``fail-on-regression`` works) and publishes one
comment, summary, artifact and verdict, the same verdict an unsharded run gives."""

from __future__ import annotations

import json
from pathlib import Path

from evalgate.github.shards import shard_artifact_name, shard_of_name
from tests.servers.artifact_service import ArtifactService
from tests.servers.github_fake import GitHubFake
from tests.support.action import (
    CRITICAL_CASE,
    PASSING,
    make_workspace,
    needs_examples,
    run_entrypoint,
    runner_env,
    webhook_example,
    workflow_commands,
)
from tests.support.artifacts import artifact_env, official_download

REPO = "Codertocat/Hello-World"


def test_shard_artifact_names_are_unique_and_read_back() -> None:
    assert shard_artifact_name("evalgate-results", (2, 4)) == "evalgate-results-shard-2-of-4"
    assert shard_of_name("evalgate-results", "evalgate-results-shard-2-of-4") == (2, 4)
    assert shard_of_name("evalgate-results", "evalgate-results-nightly-shard-2-of-4") is None
    assert shard_of_name("evalgate-results", "evalgate-results") is None


@needs_examples
def test_two_shards_then_merge_publish_once_with_the_unsharded_verdict(
        tmp_path: Path, github: GitHubFake, artifacts: ArtifactService) -> None:
    failing = tuple(f"failing/{p.name}" for p in sorted((Path(__file__).resolve().parents[2] / "datasets"
                                                         / "failing").glob("*.yaml")))
    ws = make_workspace(tmp_path, PASSING + failing)
    payload = webhook_example("pull_request", "opened")
    common = {"dataset": "datasets", "baseline": "none"}
    shard_annotations: list[str] = []
    for i in (1, 2):
        env = runner_env(ws, event_name="pull_request", payload=payload, api_url=github.url,
                         inputs={**common, "shard": f"{i}/2", "output-dir": f"shard-{i}"}, extra=artifact_env(artifacts))
        done = run_entrypoint(ws, env)
        assert done.returncode in (0, 1), done.stdout + done.stderr
        assert f"shard {i}/2: results go to artifact 'evalgate-results-shard-{i}-of-2'" in done.stdout
        shard_annotations += [rest for _, rest in workflow_commands(done.stdout) if "file=" in rest]
        assert ws.outputs()["artifact-name"] == f"evalgate-results-shard-{i}-of-2"
    assert github.requests("POST") == [] and github.requests("PATCH") == []  # shards never comment
    assert sorted(artifacts.artifacts) == ["evalgate-results-shard-1-of-2", "evalgate-results-shard-2-of-2"]

    # the baseline: an unsharded run of the same suites in which every case still passed
    whole = runner_env(ws, event_name="pull_request", payload=payload, api_url=github.url,
                       inputs={**common, "output-dir": "whole", "comment": "never", "upload-artifacts": "false"})
    assert run_entrypoint(ws, whole).returncode == 1
    unsharded = json.loads((ws.workspace / "whole" / "results.json").read_text(encoding="utf-8"))
    baseline = json.loads(json.dumps(unsharded))
    for record in baseline["results"]:
        record.update(status="passed", passed=True)
    (ws.workspace / "baseline.json").write_text(json.dumps(baseline), encoding="utf-8")

    merge = runner_env(ws, event_name="pull_request", payload=payload, api_url=github.url,
                       inputs={"mode": "merge", "baseline": "baseline.json", "fail-on-regression": "true"},
                       extra=artifact_env(artifacts))
    done = run_entrypoint(ws, merge)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "merging 2 shard artifact(s): evalgate-results-shard-1-of-2, evalgate-results-shard-2-of-2" in done.stdout
    merged = json.loads((ws.workspace / "evalgate-results" / "results.json").read_text(encoding="utf-8"))
    assert merged["status"] == "merged"
    for key in ("total_test_cases", "total_passed", "total_failed", "total_errored", "critical_failures"):
        assert merged["summary"][key] == unsharded["summary"][key], key
    regressed = [r for r in merged["gate"]["reasons"] if "against the baseline" in r]  # fail-on-regression
    assert regressed and "pass rate fell against the baseline" in regressed[0], merged["gate"]["reasons"]
    assert [r for r in unsharded["gate"]["reasons"] if r not in merged["gate"]["reasons"]] == []
    comments = github.comments_on(REPO, payload["number"])
    assert len(comments) == 1 and CRITICAL_CASE in comments[0]["body"]
    outputs = ws.outputs()
    assert (outputs["passed"], outputs["exit-code"], outputs["artifact-name"]) == ("false", "1", "evalgate-results")
    downloaded = official_download(artifacts, "evalgate-results", tmp_path / "download")
    assert sorted(p.name for p in Path(downloaded["downloadPath"]).iterdir()) == ["evalgate-site", "judge-cache.db", "results.db", "results.json"]
    errors = [rest for name, rest in workflow_commands(done.stdout) if name == "error"]
    assert errors and not any("configuration" in rest or "crashed" in rest for rest in errors)  # verdict annotations
    # each failed case annotated once, by the merge step (the shard steps annotate none)
    case_annotations = [rest for _, rest in workflow_commands(done.stdout) if "file=" in rest]
    assert shard_annotations == [] and case_annotations
    assert len(case_annotations) == len(set(case_annotations))
    assert any(CRITICAL_CASE in rest for rest in case_annotations)


@needs_examples
def test_merge_without_shard_artifacts_is_one_error_line(tmp_path: Path, github: GitHubFake,
                                                          artifacts: ArtifactService) -> None:
    ws = make_workspace(tmp_path, PASSING)
    env = runner_env(ws, event_name="pull_request", payload=webhook_example("pull_request", "opened"),
                     api_url=github.url, inputs={"mode": "merge"}, extra=artifact_env(artifacts))
    done = run_entrypoint(ws, env)
    assert done.returncode == 2, done.stdout + done.stderr
    errors = [rest for name, rest in workflow_commands(done.stdout) if name == "error"]
    assert len(errors) == 1 and "no artifact named evalgate-results-shard-<i>-of-<n> in this workflow run" in errors[0]


def test_under_act_the_upload_leaves_out_the_field_acts_server_rejects(tmp_path: Path,
                                                                       artifacts: ArtifactService) -> None:
    from evalgate.github.artifacts import upload_artifact

    results = tmp_path / "results.json"
    results.write_text("{}", encoding="utf-8")
    for env, expected in (({}, "application/zip"), ({"ACT": "true"}, None)):
        done = upload_artifact(f"a{len(env)}", [results], env={**artifact_env(artifacts), **env}, mask=lambda _: None)
        assert done.uploaded, done.warning
        assert artifacts.calls("CreateArtifact")[-1]["body"].get("mime_type") == expected


def test_cli_merge_compares_with_a_baseline_and_fails_on_a_regression(tmp_path: Path) -> None:
    from evalgate.cli.main import main as cli_main

    root = Path(__file__).resolve().parents[2]
    data = ["-d", str(root / "datasets" / "brand-mentions"), "-d", str(root / "datasets" / "failing")]
    for i in (1, 2):
        assert cli_main(["run", *data, "--shard", f"{i}/2", "-o", str(tmp_path / f"s{i}"), "--progress", "none"]) in (0, 1)
    assert cli_main(["run", *data, "-o", str(tmp_path / "whole"), "--progress", "none"]) == 1
    baseline = json.loads((tmp_path / "whole" / "results.json").read_text(encoding="utf-8"))
    for record in baseline["results"]:
        record.update(status="passed", passed=True)
    (tmp_path / "base.json").write_text(json.dumps(baseline), encoding="utf-8")
    shards = [str(tmp_path / "s1"), str(tmp_path / "s2")]
    for flag, flipped in (([], False), (["--fail-on-regression"], True)):
        out = tmp_path / f"merged{len(flag)}"
        code = cli_main(["merge", *shards, "-o", str(out), "--baseline", str(tmp_path / "base.json"), *flag])
        merged = json.loads((out / "results.json").read_text(encoding="utf-8"))
        assert code == 1 and CRITICAL_CASE in {c["id"] for c in merged["comparison"]["cases"]["regressions"]}
        assert any("against the baseline" in r for r in merged["gate"]["reasons"]) is flipped
    assert cli_main(["merge", *shards, "-o", str(tmp_path / "m"), "--fail-on-regression"]) == 2


@needs_examples
def test_a_missing_shard_names_what_to_do_in_the_workflow_not_a_cli_flag(
        tmp_path: Path, github: GitHubFake, artifacts: ArtifactService) -> None:
    ws = make_workspace(tmp_path, PASSING)
    payload = webhook_example("pull_request", "opened")
    env = runner_env(ws, event_name="pull_request", payload=payload, api_url=github.url,
                     inputs={"dataset": "datasets", "baseline": "none", "shard": "1/2"},
                     extra=artifact_env(artifacts))
    assert run_entrypoint(ws, env).returncode == 0  # shard 2/2's job never uploaded
    merge = runner_env(ws, event_name="pull_request", payload=payload, api_url=github.url,
                       inputs={"mode": "merge"}, extra=artifact_env(artifacts))
    done = run_entrypoint(ws, merge)
    assert done.returncode == 2, done.stdout + done.stderr
    errors = [rest for name, rest in workflow_commands(done.stdout) if name == "error"]
    assert len(errors) == 1 and "shard(s) 2/2 missing" in errors[0], errors
    assert "--allow-partial" not in errors[0] and "re-run the failed jobs" in errors[0]
    assert "shard: i/N" in errors[0] and "artifact-name" in errors[0]
