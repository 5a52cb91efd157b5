"""First-hour fixes: the exit status never depends on stdout being read."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def closed_stdout_status(args: list[str], cwd: Path) -> tuple[int, str]:
    """Run ``evalgate ARGS`` with a stdout pipe whose reader has gone (as ``| head -1`` leaves it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVALGATE_", "INPUT_", "GITHUB_"))}
    env["EVALGATE_JUDGE_SHARED_CACHE"] = "none"  # the user-level shared judge cache stays out of tests
    child = subprocess.Popen([sys.executable, "-m", "evalgate", *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()  # nobody reads: every write to stdout is EPIPE
    err = child.stderr.read()
    return child.wait(timeout=120), err


@pytest.mark.parametrize("verb", [["run", "--progress", "none"], ["run", "--progress", "none", "--format", "json"],
                                  ["validate"]])
def test_a_pass_exits_0_when_nobody_reads_stdout(tmp_path: Path, verb: list[str]) -> None:
    dataset = tmp_path / "cases.yaml"
    dataset.write_text("- {id: a, input: q, output: ok, rules: [{type: contains, value: ok}]}\n")
    code, err = closed_stdout_status([*verb, "-d", str(dataset), *(["-o", str(tmp_path / "out")]
                                                                     if verb[0] == "run" else [])], tmp_path)
    assert code == 0, err
    assert "Traceback" not in err


def test_a_failure_still_exits_1_when_nobody_reads_stdout(tmp_path: Path) -> None:
    code, err = closed_stdout_status(["run", "--progress", "none", "-d", str(ROOT / "datasets" / "failing"),
                                      "-o", str(tmp_path / "out")], tmp_path)
    assert code == 1, err


BAD = """\
cases:
  - id: a
    input: q
    expected_keyword: [x]
  - id: b
    input: q
    risk_level: urgent
"""


def test_validate_lists_every_dataset_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    from evalgate.cli.main import main as cli_main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.yaml").write_text(BAD)
    assert cli_main(["validate", "-d", "bad.yaml"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("evalgate: error: bad.yaml:4: case 'a': unknown key 'expected_keyword' (did you mean")
    assert err[1].startswith("evalgate: error: bad.yaml:7: case 'b': field 'risk_level'")  # the field's line
    assert err[2] == "evalgate: 2 errors"


@pytest.mark.parametrize(("text", "expected"), [
    ("judge_provider: opneai\n", "evalgate.yaml:1: judge_provider: Input should be 'none', 'openai', 'gemini', "
                                 "'ollama' or 'local' (did you mean 'openai'?)"),
    ("dataset: bad.yaml\njudge_provder: openai\n", "evalgate.yaml:2: unknown key 'judge_provder' "
                                                   "(did you mean 'judge_provider'?)"),
])
def test_config_typos_name_the_line_and_the_closest_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str], text: str,
                                                        expected: str) -> None:
    from evalgate.cli.main import main as cli_main

    for name in list(os.environ):
        if name.startswith("EVALGATE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("EVALGATE_JUDGE_SHARED_CACHE", "none")  # the user-level shared judge cache stays out
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.yaml").write_text("- {id: a, input: q, output: ok}\n")
    (tmp_path / "evalgate.yaml").write_text(text)
    assert cli_main(["validate", "-d", "bad.yaml"]) == 2
    assert expected in capsys.readouterr().err


def test_an_html_report_to_a_terminal_is_written_to_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from evalgate.cli.main import main as cli_main

    (tmp_path / "cases.yaml").write_text("- {id: a, input: q, output: ok, rules: [{type: contains, value: ok}]}\n")
    assert cli_main(["run", "-d", str(tmp_path / "cases.yaml"), "-o", str(tmp_path / "out"), "--progress",
                     "none"]) == 0
    capsys.readouterr()
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert cli_main(["report", str(tmp_path / "out" / "results.json"), "--format", "html"]) == 0
    captured = capsys.readouterr()
    assert "<html" not in captured.out.lower()
    written = tmp_path / "out" / "report.html"
    assert written.is_file() and "<html" in written.read_text(encoding="utf-8").lower()
    assert f"Report: {written}" in captured.err
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False)  # piped: the HTML goes to stdout as asked
    assert cli_main(["report", str(tmp_path / "out" / "results.json"), "--format", "html"]) == 0
    assert "<html" in capsys.readouterr().out.lower()


def test_html_counts_have_thousands_separators_and_ungated_metrics_read_informational(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import re

    from evalgate.cli.main import main as cli_main

    (tmp_path / "cases.yaml").write_text("- {id: a, input: q, output: ok, num_tokens: 12345, "
                                         "rules: [{type: contains, value: ok}]}\n")
    assert cli_main(["run", "-d", str(tmp_path / "cases.yaml"), "-o", str(tmp_path / "out"), "--progress",
                     "none"]) == 0
    assert cli_main(["report", str(tmp_path / "out" / "results.json"), "-o", str(tmp_path / "r.html")]) == 0
    capsys.readouterr()
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "<dt>Tokens</dt><dd>12,345</dd>" in html and "Tokens: 12,345 total" in html
    row = re.search(r"<tr><td><code>num_tokens</code></td>.*?</tr>", html, re.S)
    assert row and "informational" in row.group(0) and ">passed<" not in row.group(0)
    rules = re.search(r"<tr><td><code>rules</code></td>.*?</tr>", html, re.S)
    assert rules and ">passed<" in rules.group(0)


def test_a_threshold_for_a_metric_no_case_computes_says_how_to_turn_it_on(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from evalgate.cli.main import main as cli_main

    (tmp_path / "ok.yaml").write_text("- {id: a, input: q, output: ok}\n")
    assert cli_main(["validate", "-d", str(tmp_path / "ok.yaml"), "--metric-thresholds", '{"latency_ms": 1500}']) == 2
    assert ("no case computes latency_ms (it runs when the case has latency_ms (a recorded latency); to compute it "
            "on every case, add it to metrics: in evalgate.yaml or the suite)") in capsys.readouterr().err
    (tmp_path / "ok.yaml").write_text("suite: {metrics: [latency_ms], thresholds: {latency_ms: 1500}}\n"
                                      "cases: [{id: a, input: q, output: ok}]\n")
    assert cli_main(["validate", "-d", str(tmp_path / "ok.yaml")]) == 0  # as the message says


def test_validate_lists_every_setting_that_matches_no_case(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from evalgate.cli.main import main as cli_main

    (tmp_path / "ok.yaml").write_text("- {id: a, input: q, output: ok}\n")
    assert cli_main(["validate", "-d", str(tmp_path / "ok.yaml"), "--metric-thresholds",
                     '{"latency_ms": 1500, "safety": 0.5}']) == 2
    err = capsys.readouterr().err.splitlines()
    assert [line.split("threshold for ")[1].split(" ")[0] for line in err[:2]] == ["'latency_ms'", "'safety'"]
    assert err[2] == "evalgate: 2 errors"


def test_run_help_is_short_and_grouped_and_help_all_lists_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    """`run --help` shows the options a new user needs, in their groups, and no in-house framework's spelling;
    `--help-all` shows every option; a hidden option still works."""
    from evalgate.cli.main import build_parser
    from evalgate.cli.main import main as cli_main

    with pytest.raises(SystemExit) as done:
        cli_main(["run", "--help"])
    assert done.value.code == 0
    short = capsys.readouterr().out
    assert len(short.splitlines()) <= 90
    for group in ("dataset and selection:", "gate:", "output:", "target and judge:", "execution:"):
        assert group in short
    assert "seed" not in short.lower() and "--fixtures" not in short and "--ids" not in short
    assert "--judge-missing" in short and "evalgate run --help-all" in short
    with pytest.raises(SystemExit):
        cli_main(["run", "--help-all"])
    full = capsys.readouterr().out
    run = next(a for a in build_parser()._subparsers._group_actions[0].choices.items() if a[0] == "run")[1]  # type: ignore[union-attr]
    every = {option for action in run._actions for option in action.option_strings if option.startswith("--")}
    assert every <= set(re.findall(r"--[\w-]+", full)), every - set(re.findall(r"--[\w-]+", full))
    assert "seed 001's" in full and "--api-url" in full
    args = build_parser().parse_args(["run", "--ids", "a", "b", "--judge-rpm", "30"])  # hidden, still read
    assert args.ids == ["a", "b"] and args.judge_rpm == 30
    with pytest.raises(SystemExit):
        cli_main(["--help"])
    commands = capsys.readouterr().out
    assert "    run " in commands and "seed" not in commands and "    eval " not in commands
    assert build_parser().parse_args(["eval", "--fixtures", "f.yaml"]).fixtures == ["f.yaml"]  # still works
