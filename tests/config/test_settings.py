"""Settings precedence and error messages that name their origin."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalgate.config.settings import build_settings
from evalgate.errors import UserError


def test_precedence_defaults_file_env_inputs_cli(tmp_path: Path) -> None:
    (tmp_path / "evalgate.yaml").write_text("first_n: 1\nconcurrency: 2\nstrict-metrics: true\nthresholds: {mrr: 0.5}\n")
    settings, suite, path = build_settings(env={}, cwd=tmp_path)
    assert (settings.first_n, settings.concurrency, settings.strict_metrics) == (1, 2, True)
    assert suite == {"thresholds": {"mrr": 0.5}} and path == tmp_path / "evalgate.yaml"
    settings, _, _ = build_settings(env={"EVALGATE_FIRST_N": "3", "EVALGATE_STRICT_METRICS": "false"}, cwd=tmp_path)
    assert settings.first_n == 3 and settings.strict_metrics is False
    settings, _, _ = build_settings(env={"EVALGATE_FIRST_N": "3"}, inputs={"first-n": "4"}, cwd=tmp_path)
    assert settings.first_n == 4
    settings, _, _ = build_settings(cli={"first_n": 5}, env={"EVALGATE_FIRST_N": "3"}, inputs={"first-n": "4"},
                                    cwd=tmp_path)
    assert settings.first_n == 5 and settings.concurrency == 2


def test_lists_and_json_values(tmp_path: Path) -> None:
    settings, _, _ = build_settings(
        env={"EVALGATE_CASE_IDS": "a, b,c", "EVALGATE_METRIC_THRESHOLDS": '{"mrr": {"min": 0.6}}',
             "EVALGATE_EVAL_TEAM_NAME": "Hawks"},
        cwd=tmp_path,
    )
    assert settings.case_ids == ["a", "b", "c"]
    assert settings.metric_thresholds == {"mrr": {"min": 0.6}}
    assert settings.eval_context == {"team_name": "Hawks"}


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"EVALGATE_METRIC_THRESHOLDS": "{bad"}, "EVALGATE_METRIC_THRESHOLDS: invalid JSON"),
        ({"EVALGATE_METRIC_THRESHOLDS": "[1]"}, "EVALGATE_METRIC_THRESHOLDS: must be a JSON object"),
        ({"EVALGATE_FIRST_N": "ten"}, "EVALGATE_FIRST_N:"),
        ({"EVALGATE_FIRST_N": "0"}, "EVALGATE_FIRST_N:"),
        ({"EVALGATE_JUDGE_PROVIDER": "claude"}, "EVALGATE_JUDGE_PROVIDER:"),
        ({"EVALGATE_SHARD": "5/4"}, "EVALGATE_SHARD: shard '5/4'"),
        ({"EVALGATE_CONFIG": "missing.yaml"}, "EVALGATE_CONFIG: config file not found"),
    ],
)
def test_errors_name_their_origin(tmp_path: Path, env: dict[str, str], message: str) -> None:
    with pytest.raises(UserError) as info:
        build_settings(env=env, cwd=tmp_path)
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


def test_bad_config_file_names_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "evalgate.yaml").write_text("first_n: 1\nconcurrency: [\n")
    with pytest.raises(UserError, match=r"evalgate.yaml:\d+: invalid YAML"):
        build_settings(env={}, cwd=tmp_path)
    (tmp_path / "evalgate.yaml").write_text("concurrency: lots\n")
    with pytest.raises(UserError, match=r"evalgate\.yaml:1: concurrency"):  # the file, its line and the key
        build_settings(env={}, cwd=tmp_path)
