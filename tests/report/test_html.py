"""The standalone HTML report: rendered from a real run of the bundled failing suite (plus one case full
of hostile markup), checked as text and as the DOM headless Chromium builds from the file."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from evalgate.report.html import render_html
from evalgate.safety.redact import register_environment
from tests.support.cli import run_cli
from tests.support.dom import CHROMIUM_FLAGS, Node, parse

ROOT = Path(__file__).resolve().parents[2]
FAILING = ROOT / "datasets" / "failing"
HOSTILE_ID = "hostile_<img src=x onerror=\"document.body.setAttribute('data-pwned','id')\">"
HOSTILE_YAML = """\
test_cases:
  - description: "<script>document.body.setAttribute('data-pwned','desc')</script> & <b>bold</b>"
    intent_id: "hostile_<img src=x onerror=\\"document.body.setAttribute('data-pwned','id')\\">"
    category: "<svg onload=alert(1)>"
    llm_answer_text: |
      </pre></details><script>document.body.setAttribute('data-pwned','answer')</script>
      HubSpot is <iframe src="https://evil.example/"></iframe> great.
    brands_mine: ["HubSpot"]
    brands_competitors: ["Salesforce"]
    expected_my_mentions: ["HubSpot"]
    expected_competitor_mentions: ["Salesforce"]
    expected_ranked_list: ["HubSpot", "Salesforce"]
"""
@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``evalgate run`` on the failing suite plus the hostile case, then ``evalgate report --format html``."""
    root = tmp_path_factory.mktemp("html")
    (root / "hostile").mkdir()
    (root / "hostile" / "hostile.yaml").write_text(HOSTILE_YAML, encoding="utf-8")
    code, _, err = run_cli("run", "-d", FAILING, "-d", root / "hostile", "-o", root / "out", "--progress", "none")
    assert code == 1, err
    results = root / "out" / "results.json"
    report = root / "report.html"
    code, _, err = run_cli("report", results, "--format", "html", "-o", report)
    assert code == 0, err
    return {"root": root, "document": json.loads(results.read_text(encoding="utf-8")), "results": results,
            "report": report, "html": report.read_text(encoding="utf-8")}


# ---------------------------------------------------------------------------------------------
# the report's DOM (tests/support/dom.py)


def assert_report_dom(dom: Node, document: dict[str, Any]) -> None:
    """Verdict, one row per metric, one <details> per case, and hostile text kept as inert text."""
    (verdict,) = dom.find_all("header", id="verdict")
    assert verdict.attrs["data-passed"] == "false" and "failed" in verdict.classes()
    assert "evalgate failed" in verdict.all_text()
    assert any("critical case fail_004_competitor_flagged_mine failed" in li.all_text() for li in verdict.find_all("li"))
    rows = [n for n in dom.walk() if n.tag == "tr" and "metric-row" in n.classes()]
    ran = [name for name, m in document["metrics"].items() if m.get("average") is not None]
    assert [r.attrs["data-metric"] for r in rows] == ran  # the metrics that ran; the rest in one line each reason
    skipped = [n.all_text() for n in dom.walk() if n.tag == "p" and "skipped-metrics" in n.classes()]
    assert skipped and all(re.search(r" skipped( \([^)]*\))?: ", line) for line in skipped), skipped
    sections = [n.attrs.get("id") for n in dom.walk() if n.tag == "section"]
    assert sections.index("failed") < sections.index("metrics"), sections  # the comment's order
    failed_row = next(r for r in rows if r.attrs["data-metric"] == "false_is_mine_rate")
    assert "result-failed" in failed_row.classes() and "≤ 0" in failed_row.all_text()
    cases = [n for n in dom.walk() if n.tag == "details" and "case" in n.classes()]
    assert sorted(c.attrs["data-case-id"] for c in cases) == sorted(r["id"] for r in document["results"])
    assert all(c.find_all("summary") for c in cases)
    (hostile,) = [c for c in cases if c.attrs["data-case-id"] == HOSTILE_ID]
    text = hostile.all_text()
    assert "<script>document.body.setAttribute('data-pwned','desc')</script> & <b>bold</b>" in text
    assert "</pre></details><script>document.body.setAttribute('data-pwned','answer')</script>" in text
    assert '<iframe src="https://evil.example/"></iframe>' in text
    for forbidden in ("script", "iframe", "img", "svg", "b", "link", "object", "embed"):
        assert not dom.find_all(forbidden), forbidden
    for node in dom.walk():
        assert not [a for a in node.attrs if a.startswith("on")], node.tag
        assert "data-pwned" not in node.attrs
    assert dom.find_all("section", id="breakdowns") and dom.find_all("section", id="failed")


# ---------------------------------------------------------------------------------------------
# tests


def test_report_is_one_self_contained_file(run: dict[str, Any]) -> None:
    html = run["html"]
    assert html.startswith("<!DOCTYPE html>")
    assert "default-src 'none'" in html and "<style>" in html
    lowered = html.lower()
    assert "<script" not in lowered and "<link" not in lowered
    dom = parse(html)
    for node in dom.walk():
        assert not {"src", "href", "srcset", "action", "data"} & set(node.attrs), node.tag
    (style,) = dom.find_all("style")
    assert "url(" not in style.all_text() and "@import" not in style.all_text()
    assert "&lt;script&gt;document.body.setAttribute(&#39;data-pwned&#39;,&#39;desc&#39;)&lt;/script&gt;" in html


def test_report_structure_from_the_file(run: dict[str, Any]) -> None:
    assert_report_dom(parse(run["html"]), run["document"])


def test_report_in_headless_chromium(run: dict[str, Any], tmp_path: Path) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("headless Chromium not installed (Debian: apt-get install -y chromium)")
    completed = subprocess.run(
        [browser, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", run["report"].as_uri()],
        capture_output=True, text=True, timeout=180, check=False,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    dumped = completed.stdout
    assert "<body" in dumped, completed.stderr[-2000:]
    dom = parse(dumped)
    assert_report_dom(dom, run["document"])
    (body,) = dom.find_all("body")
    assert "data-pwned" not in body.attrs  # no hostile script ran


def test_critical_and_failed_cases_come_first(run: dict[str, Any]) -> None:
    cases = [n for n in parse(run["html"]).walk() if n.tag == "details" and "case" in n.classes()]
    statuses = [c.attrs["data-status"] for c in cases]
    assert statuses == sorted(statuses, key=lambda s: s not in ("failed", "errored"))
    critical = {r["id"] for r in run["document"]["results"] if r["risk_level"] == "critical"}
    assert {c.attrs["data-case-id"] for c in cases[: len(critical)]} == critical


def with_comparison_and_repeats(document: dict[str, Any]) -> dict[str, Any]:
    """A copy with a comparison block and a case run three times with disagreeing outcomes."""
    doc = copy.deepcopy(document)
    flaky = next(r for r in doc["results"] if r["id"] == "fail_001_common_word_brand")
    for repeat, passed in ((1, True), (2, False)):
        doc["results"].append({**copy.deepcopy(flaky), "repeat": repeat, "passed": passed,
                               "status": "passed" if passed else "failed"})
    doc["comparison"] = {
        "baseline": {"source": "base/results.json"},
        "summary": "1 significant regression: mention_f1 fell.",
        "significance_level": 0.05,
        "regression": True,
        "pass_rate": {"base": 0.5, "head": 0.25, "regressions": 3, "fixes": 0, "p_value": 0.25, "significant": False},
        "metrics": {"mention_f1": {"base": 0.9, "head": 0.667, "delta": -0.233, "ci_low": -0.4, "ci_high": -0.05,
                                   "significant": True, "regression": True},
                    "mrr": {"base": 0.1, "head": 0.0625, "delta": -0.0375, "ci_low": -0.2, "ci_high": 0.1,
                            "significant": False}},
        "cases": {"regressions": [{"id": "fail_004_competitor_flagged_mine", "risk_level": "critical",
                                   "source": "x.yaml:50", "base_status": "passed", "head_status": "failed"}],
                  "fixes": [{"id": "<fixed>", "source": "y.yaml:1", "base_status": "failed", "head_status": "passed"}],
                  "new": ["n1", "n2"], "removed": []},
    }
    return doc


def test_comparison_and_flaky_sections(run: dict[str, Any]) -> None:
    dom = parse(render_html(with_comparison_and_repeats(run["document"])))
    (comparison,) = dom.find_all("section", id="comparison")
    text = comparison.all_text()
    assert "1 significant regression: mention_f1 fell." in text
    assert "Pass rate 50.0% → 25.0%" in text and "p = 0.25" in text and "not significant" in text
    assert "2 new and 0 removed" in text
    rows = {r.attrs["data-metric"]: r.all_text() for r in comparison.find_all("tr") if "data-metric" in r.attrs}
    assert "−0.233" in rows["mention_f1"] and "significant regression" in rows["mention_f1"]
    assert "not significant" in rows["mrr"]
    assert next(r.all_text() for r in comparison.find_all("tr") if "fix-row" in r.classes()).startswith("<fixed>")
    vs_base = next(r for r in dom.walk() if r.tag == "tr" and r.attrs.get("data-metric") == "mention_f1"
                   and "metric-row" in r.classes())
    assert "▼ −0.233" in vs_base.all_text()
    (flaky,) = dom.find_all("section", id="flaky")
    (row,) = [r for r in flaky.find_all("tr") if "flaky-row" in r.classes()]
    assert "fail_001_common_word_brand" in row.all_text() and "1/3" in row.all_text() and "fail pass fail" in row.all_text()


def test_no_comparison_or_flaky_sections_without_data(run: dict[str, Any]) -> None:
    dom = parse(run["html"])
    assert not dom.find_all("section", id="comparison") and not dom.find_all("section", id="flaky")
    assert not [th for th in dom.find_all("th") if th.all_text() == "vs base"]


def test_case_cap_says_how_many_are_omitted(run: dict[str, Any]) -> None:
    dom = parse(render_html(run["document"], max_cases=3))
    cases = [n for n in dom.walk() if n.tag == "details" and "case" in n.classes()]
    assert len(cases) == 3
    (note,) = dom.find_all("p", id="cases-omitted")
    assert note.all_text().startswith(f"{len(run['document']['results']) - 3} more case record(s)")


def test_secrets_are_redacted(run: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-test-html-secret-0123456789"
    monkeypatch.setenv("EVALGATE_TEST_API_KEY", secret)
    register_environment(os.environ)  # what the edges (CLI, Action, build_settings) do with the environment
    doc = copy.deepcopy(run["document"])
    doc["results"][0]["output"] = f"the key is {secret}"
    html = render_html(doc)
    assert secret not in html and "the key is ***" in html


def test_markdown_format_and_inference(run: dict[str, Any], tmp_path: Path) -> None:
    code, out, _ = run_cli("report", run["results"])
    assert code == 0 and out.startswith("## ❌ evalgate failed")
    code, _, _ = run_cli("report", run["results"], "-o", tmp_path / "r.html")
    assert code == 0 and (tmp_path / "r.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    code, _, _ = run_cli("report", run["results"], "--format", "markdown", "-o", tmp_path / "r.md")
    assert code == 0 and (tmp_path / "r.md").read_text(encoding="utf-8").startswith("## ❌ evalgate failed")


def test_report_from_sqlite_equals_report_from_json(run: dict[str, Any]) -> None:
    code, from_db, err = run_cli("report", run["root"] / "out" / "results.db", "--format", "html")
    assert code == 0, err
    assert from_db == run["html"]


def test_report_of_a_missing_file_is_a_user_error(tmp_path: Path) -> None:
    code, _, err = run_cli("report", tmp_path / "nope.json")
    assert code == 2 and f"{tmp_path / 'nope.json'}" in err and "not found" in err
