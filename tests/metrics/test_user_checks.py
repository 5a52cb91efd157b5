"""Code checks (``package.module:function``, ``file://``, ``@evalgate.metric``, installed plug-ins), their
planning per case, declaration errors, and custom targets."""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import evalgate
from evalgate.cli.main import main as cli_main
from evalgate.config.suite import SuiteConfig
from evalgate.dataset.views import AnswerView, CaseView
from evalgate.metrics.checks import USER_METRICS, check_metric, spec_of, to_score
from evalgate.metrics.registry import MetricContext, all_metrics
from evalgate.model import Answer, Case, MetricErrored, Score
from evalgate.runner.catalog import build_catalog
from evalgate.runner.setup import case_shape, make_planner


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def run_cli(*args: str) -> tuple[int, dict[str, Any] | None, Path]:
    out = Path(args[args.index("--output-dir") + 1]) if "--output-dir" in args else None
    code = cli_main(["run", "--progress", "none", *args])
    document = json.loads((out / "results.json").read_text()) if out and (out / "results.json").exists() else None
    return code, document, out or Path()


# --- planning -------------------------------------------------------------------------------------------------


def test_a_value_dependent_applies_is_honoured_despite_the_plan_cache() -> None:
    @evalgate.metric(name="vip_greeting", applies=lambda case: case.metadata.get("tier") == "vip")
    def vip_greeting(case: CaseView, answer: AnswerView) -> bool:
        return answer.text.startswith("Dear")

    vip = Case(id="a", input="hi", suite="s", metadata={"tier": "vip"})
    basic = Case(id="b", input="hi", suite="s", metadata={"tier": "basic"})
    assert case_shape(vip) == case_shape(basic)  # the shape cache alone could not tell them apart
    suite = SuiteConfig(name="s", metrics=["vip_greeting"])
    catalog = build_catalog(all_metrics(), SuiteConfig(), "evalgate.yaml", {"s": suite}, {"s": "d.yaml:1"}, [],
                            Path.cwd())
    plan_for = make_planner(catalog.metrics, SuiteConfig(), {"s": suite}, catalog)
    for _ in range(3):  # in any order, repeatedly: the answer never comes from the other case's plan
        assert "vip_greeting" in {m.name for m in plan_for(vip).metrics}
        assert "vip_greeting" not in {m.name for m in plan_for(basic).metrics}
    # a case that names the check runs it whatever applies says
    named = Case(id="c", input="hi", suite="s", metrics=["vip_greeting"], metadata={"tier": "basic"})
    assert "vip_greeting" in {m.name for m in plan_for(named).metrics}
    USER_METRICS.pop("vip_greeting")


def test_return_values_and_exceptions_of_a_check() -> None:
    assert to_score("m", True) == Score(1.0) and to_score("m", 0) == Score(0.0)
    scored = to_score("m", Score(0.25, {"k": 1}, "too short"))
    assert scored.value == 0.25 and scored.details == {"k": 1, "reason": "too short"}
    for bad, message in ((None, "returned NoneType"), ("0.5", "returned str"), (float("nan"), "not a finite")):
        with pytest.raises(MetricErrored, match=message):
            to_score("m", bad if not isinstance(bad, float) else Score(bad))

    def explodes(case: CaseView, answer: AnswerView) -> float:
        raise ValueError("missing\nkey")

    metric = check_metric(spec_of(explodes, name=None, where="test"), origin="test")
    with pytest.raises(MetricErrored) as caught:
        metric.fn(Case(id="x", input="q"), Answer(output="a"), MetricContext(options=None))
    assert str(caught.value) == "explodes raised ValueError: missing key"


def test_checks_in_a_run_errored_never_a_crash(tmp_path: Path) -> None:
    write(tmp_path / "checks.py", """\
        import asyncio
        import evalgate

        async def slow_len(case, answer):
            await asyncio.sleep(0)
            return evalgate.Score(min(1.0, len(answer.text) / 10), {"chars": len(answer.text)})

        def crashes(case, answer):
            return 1 / 0

        def forgot_return(case, answer):
            answer.text.upper()

        def uses_views(case, answer):
            assert case.get("brands_mine") == ["Acme"] and case.critical is False
            return case.metadata["lang"] == "en" and answer.sources == ("a",)
        """)
    dataset = write(tmp_path / "d.yaml", """\
        suite:
          metrics: [file://checks.py:slow_len, file://checks.py:crashes, file://checks.py:uses_views]
        cases:
          - {id: one, input: q, output: "hello world", sources: [a], metadata: {lang: en}, brands_mine: [Acme]}
          - id: two
            input: q
            output: hi
            metadata: {lang: fr}
            brands_mine: [Acme]
            assert: [{check: "file://checks.py:forgot_return"}]
        """)
    code, document, _ = run_cli("--dataset", str(dataset), "--output-dir", str(tmp_path / "out"))
    assert document is not None
    one, two = ({**r["metrics"], "_status": r["status"]} for r in document["results"])
    assert one["slow_len"]["value"] == 1.0 and one["slow_len"]["details"]["chars"] == 11
    assert one["uses_views"]["value"] == 1.0 and two["uses_views"]["value"] == 0.0
    assert one["crashes"]["status"] == "errored"
    assert one["crashes"]["reason"] == "crashes raised ZeroDivisionError: division by zero"
    assert two["forgot_return"]["status"] == "errored" and "returned NoneType" in two["forgot_return"]["reason"]
    assert one["_status"] == "errored" and code == 1


# --- configuration errors: exit 2, file:line, did you mean ----------------------------------------------------


@pytest.mark.parametrize(("suite", "message"), [
    ("    - name: tone\n      critera: polite\n", ":5: suite: metrics[0]: unknown key 'critera' (did you mean 'criteria'?)"),
    ("    - name: tone\n      criteria: polite\n      feilds: [input]\n",
     ":6: suite: metrics[0]: unknown key 'feilds' (did you mean 'fields'?)"),
    ("    - name: tone\n      criteria: polite\n      fields: [outptu]\n", "unknown field 'outptu' (did you mean 'output'?)"),
    ("    - name: mention_f1\n      criteria: polite\n", "'mention_f1' is a built-in metric"),
    ("    - mention_f11\n", "unknown metric 'mention_f11' (did you mean 'mention_f1'?)"),
    ("    - file://nowhere.py:check\n", "no such file"),
    ("    - name: tone\n", "needs 'criteria' (a judged metric) or 'check'"),
    ("    - name: tone\n      criteria: polite\n      rubric: {1: good}\n", "at least two score bands"),
])
def test_declaration_errors_name_the_file_line_and_key(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        suite: str, message: str) -> None:
    dataset = tmp_path / "d.yaml"
    dataset.write_text("suite:\n  name: s\n  metrics:\n" + suite + "cases:\n  - {id: a, input: q, output: a}\n")
    assert cli_main(["validate", "--dataset", str(dataset)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("evalgate: error: ") and error.count("\n") == 1 and "Traceback" not in error
    assert message in error


def test_errors_in_evalgate_yaml_and_in_case_asserts(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "evalgate.yaml", """\
        dataset: d.yaml
        metrics:
          - name: tone
            criteria: polite
            treshold: 0.8
        """)
    write(tmp_path / "d.yaml", "- {id: a, input: q, output: a}\n")
    assert cli_main(["validate"]) == 2
    assert "evalgate.yaml:5: metrics[0]: unknown key 'treshold' (did you mean 'threshold'?)" in capsys.readouterr().err
    write(tmp_path / "evalgate.yaml", "dataset: d.yaml\n")
    write(tmp_path / "d.yaml", """\
        - id: a
          input: q
          assert:
            - {critera: polite}
        """)
    assert cli_main(["validate"]) == 2
    assert "d.yaml:4: case 'a': assert[0]: unknown key 'critera' (did you mean 'criteria'?)" in capsys.readouterr().err
    write(tmp_path / "checks.py", "raise RuntimeError('broken on import')\n")
    write(tmp_path / "d.yaml", "- {id: a, input: q, assert: [{check: 'file://checks.py:fn'}]}\n")
    assert cli_main(["validate"]) == 2
    assert "importing checks.py failed: RuntimeError: broken on import" in capsys.readouterr().err


# --- installed plug-ins ------------------------------------------------------------------------------------------


PLUGIN_PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "evalgate-polite-plugin"
version = "0.1.0"

[project.entry-points."evalgate.metrics"]
polite_reply = "evalgate_polite:polite_reply"
"""

PLUGIN_MODULE = """\
import evalgate


@evalgate.metric(threshold=1.0)
def polite_reply(case, answer):
    \"\"\"The reply says please or thank you.\"\"\"
    text = answer.text.lower()
    return "please" in text or "thank" in text
"""


def test_an_entry_point_plugin_installed_in_a_venv_is_found_by_name(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    plugin = tmp_path / "plugin"
    write(plugin / "pyproject.toml", PLUGIN_PYPROJECT)
    write(plugin / "evalgate_polite.py", PLUGIN_MODULE)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    venv_site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                    check=True, capture_output=True, text=True).stdout.strip())
    # the venv sees this environment's packages (evalgate, pip, setuptools) but installs into its own
    (venv_site / "_parent_env.pth").write_text(
        "".join(f"import site; site.addsitedir({path!r})\n" for path in site.getsitepackages()))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_"))}
    installed = subprocess.run([str(python), "-m", "pip", "install", "--no-index", "--no-build-isolation",
                                "--no-deps", "--disable-pip-version-check", "-q", str(plugin)],
                               capture_output=True, text=True, env=env, timeout=240)
    assert installed.returncode == 0, installed.stderr
    assert list(venv_site.glob("evalgate_polite_plugin-*.dist-info"))
    dataset = write(tmp_path / "d.yaml", """\
        suite:
          metrics: [polite_reply]
        cases:
          - {id: thanks, input: q, output: "Thank you for asking!"}
          - {id: rude, input: q, output: "Figure it out."}
        """)
    done = subprocess.run([str(python), "-m", "evalgate", "run", "--dataset", str(dataset), "--output-dir",
                           str(tmp_path / "out"), "--progress", "none", "--format", "json"],
                          capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert done.returncode == 1, done.stderr  # the rude reply fails the plug-in's check
    document = json.loads(done.stdout)
    values = {r["id"]: r["metrics"]["polite_reply"]["value"] for r in document["results"]}
    assert values == {"thanks": 1.0, "rude": 0.0}
    assert document["metrics"]["polite_reply"]["threshold"] == {"min": 1.0}
    assert document["metadata"]["custom_metrics"]["polite_reply"]["origin"] == "plug-in polite_reply"
    # the gate policy records what the plug-in is: its file's digest and the distribution's name and version
    code = document["metadata"]["custom_metrics"]["polite_reply"]["code"]
    assert code.startswith("file ") and code.endswith("; evalgate-polite-plugin==0.1.0"), code
    assert set(document["gate_policy"]["metric_definitions"]) == {"polite_reply"}
    # this environment does not have the plug-in: the same suite is an unknown metric here
    assert cli_main(["validate", "--dataset", str(dataset)]) == 2
    assert "unknown metric 'polite_reply'" in capsys.readouterr().err


# --- custom targets ----------------------------------------------------------------------------------------------


def test_a_custom_target_from_a_factory(tmp_path: Path) -> None:
    write(tmp_path / "agent.py", """\
        import asyncio
        import evalgate

        class Agent:
            def __init__(self, greeting, fail_on=None):
                self.greeting = greeting
                self.fail_on = fail_on
                self.closed = False

            async def answer(self, case):
                await asyncio.sleep(0)
                if case.id == self.fail_on:
                    raise ConnectionError("backend down")
                if case.id == "dict":
                    return {"output": self.greeting + " dict", "tools_used": ["lookup"]}
                if case.id == "text":
                    return self.greeting + " " + case.input
                return evalgate.Answer(output=self.greeting, sources=["kb"])

            def describe(self):
                return {"name": "test agent"}

        def make(**options):
            return Agent(**options)
        """)
    dataset = write(tmp_path / "d.yaml", """\
        - {id: text, input: world, rules: [{type: contains, value: hello world}]}
        - {id: dict, input: q, tools_should_include: [lookup]}
        - {id: model, input: q, expected_sources: [kb]}
        - {id: down, input: q}
        """)
    options = json.dumps({"greeting": "hello", "fail_on": "down"})
    code, document, _ = run_cli("--dataset", str(dataset), "--output-dir", str(tmp_path / "out"), "--target",
                                f"file://{tmp_path / 'agent.py'}:make", "--target-options", options)
    assert document is not None
    by_id = {r["id"]: r for r in document["results"]}
    assert by_id["text"]["output"] == "hello world" and by_id["text"]["metrics"]["rules"]["value"] == 1.0
    assert by_id["dict"]["answer"]["tools_used"] == ["lookup"]
    assert by_id["model"]["metrics"]["hit_rate"]["value"] == 1.0
    assert by_id["down"]["status"] == "errored" and "ConnectionError: backend down" in by_id["down"]["error"]
    assert document["metadata"]["target"]["name"] == "test agent"
    assert code == 1


def test_a_bad_target_reference_is_a_configuration_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dataset = write(tmp_path / "d.yaml", "- {id: a, input: q}\n")
    assert cli_main(["run", "--dataset", str(dataset), "--output-dir", str(tmp_path / "out"), "--target",
                     "json:nothing_here"]) == 2
    assert "'json:nothing_here': json has no 'nothing_here'" in capsys.readouterr().err
    assert cli_main(["run", "--dataset", str(dataset), "--target", "htpp"]) == 2
    assert "did you mean 'http'?" in capsys.readouterr().err
