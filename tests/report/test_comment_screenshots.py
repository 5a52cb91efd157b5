"""The PR comment as a reviewer sees it: rendered as GitHub-flavoured Markdown (Debian's ``cmark-gfm``, the
reference GFM implementation GitHub's renderer is built on, with raw HTML such as ``<details>`` kept) in a
GitHub-like page, laid out and photographed by headless Chromium at 1000 px wide, for a passing demo run,
a failing run with regressions against its base, and a 2,000-case failing run.

Checked from the browser's layout (element positions written into the page by a script and read back
with ``--dump-dom``): the verdict and the totals line sit within the first 900 px; no metric-table row is
a skipped metric; regressed cases come before the metric table. The PNGs (first screen and full page)
are kept in ``$EVALGATE_SCREENSHOT_DIR`` (default ``screenshots/`` in the repository; CI uploads it).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalgate.cli.main import main as cli_main
from evalgate.github.publish import render_comment
from evalgate.report.markdown import SourceLinks
from tests.support.dom import CHROMIUM_FLAGS

ROOT = Path(__file__).resolve().parents[2]
SHOTS = Path(os.environ.get("EVALGATE_SCREENSHOT_DIR") or ROOT / "screenshots")
FIRST_SCREEN = 900
WIDTH = 1000
CMARK = shutil.which("cmark-gfm")
BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CMARK is None or BROWSER is None,
    reason="needs cmark-gfm and chromium (Debian: apt-get install -y cmark-gfm chromium; .ci/run installs them)")

PAGE = """<!doctype html><html><head><meta charset="utf-8"><style>
body {{ margin: 0; background: #fff; font: 14px/1.5 -apple-system, "Segoe UI", "Noto Sans", Helvetica, Arial, sans-serif;
       color: #1f2328; }}
.comment {{ box-sizing: border-box; width: {width}px; padding: 16px 24px; }}
h2 {{ font-size: 1.5em; border-bottom: 1px solid #d1d9e0; padding-bottom: .3em; margin: 0 0 16px; }}
h3 {{ font-size: 1.25em; margin: 24px 0 16px; }}
table {{ border-collapse: collapse; display: block; overflow: auto; max-width: 100%; margin: 0 0 16px; }}
th, td {{ border: 1px solid #d1d9e0; padding: 6px 13px; }}
tr:nth-child(2n) {{ background: #f6f8fa; }}
code {{ font: 85% ui-monospace, SFMono-Regular, Menlo, monospace; background: #eff1f3; padding: .2em .4em;
        border-radius: 6px; }}
pre {{ background: #f6f8fa; padding: 16px; overflow: auto; }}
ul {{ padding-left: 2em; margin: 0 0 16px; }} p {{ margin: 0 0 16px; }} a {{ color: #0969da; }}
</style></head><body><div class="comment">{body}</div>
<pre id="layout"></pre>
<script>
const yOf = el => el ? Math.round(el.getBoundingClientRect().top + window.scrollY) : null;
const headings = [...document.querySelectorAll('h3')];
const byText = t => headings.find(h => h.textContent.startsWith(t));
const totals = [...document.querySelectorAll('strong')].find(s => /cases passed$/.test(s.textContent));
const tables = [...document.querySelectorAll('table')];
const regressed = tables.find(t => t.querySelector('th') && t.querySelector('th').textContent === 'Regressed case');
const metricTable = tables.find(t => [...t.querySelectorAll('th')].some(th => th.textContent === 'Metric'));
document.getElementById('layout').textContent = JSON.stringify({{
  verdict: yOf(document.querySelector('h2')), totals: yOf(totals), regressed: yOf(regressed),
  metrics: yOf(metricTable), failed: yOf(byText('Failed cases')), height: document.body.scrollHeight,
  metricRows: metricTable ? [...metricTable.querySelectorAll('tbody tr')].map(r => r.textContent) : [],
}});
</script></body></html>"""


def run_cli(*argv: Any) -> int:
    return cli_main([str(a) for a in argv])


def comment_of(results: Path, workspace: Path) -> str:
    document = json.loads(results.read_text(encoding="utf-8"))
    links = SourceLinks(server_url="https://github.com", repository="evalgate/evalgate", sha="4f0c2a1" + "0" * 33,
                        workspace=str(workspace), base_dir=str(workspace))
    body = render_comment(document, run_url="https://github.com/evalgate/evalgate/actions/runs/4242",
                          artifact_url="https://github.com/evalgate/evalgate/actions/runs/4242/artifacts/77",
                          tag="default", source_links=links)
    return body.split("\n", 1)[1]  # without the hidden marker line


def photograph(name: str, markdown: str, tmp_path: Path) -> dict[str, Any]:
    """Render, lay out and photograph; returns the layout the page measured."""
    html_body = subprocess.run([CMARK, "--unsafe", "-e", "table", "-e", "strikethrough", "-e", "autolink",
                                "-e", "tagfilter"], input=markdown, capture_output=True, text=True, check=True,
                               timeout=60).stdout
    page = tmp_path / f"{name}.html"
    page.write_text(PAGE.format(width=WIDTH, body=html_body), encoding="utf-8")
    flags = [BROWSER, *CHROMIUM_FLAGS, "--hide-scrollbars", f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([*flags, f"--window-size={WIDTH},{FIRST_SCREEN}", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    found = re.search(r'<pre id="layout">(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    layout = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<")
                        .replace("&gt;", ">"))
    SHOTS.mkdir(parents=True, exist_ok=True)
    for suffix, height in (("", FIRST_SCREEN), ("-full", min(int(layout["height"]) + 20, 16000))):
        target = SHOTS / f"comment-{name}{suffix}.png"
        subprocess.run([*flags, f"--window-size={WIDTH},{height}", f"--screenshot={target}", page.as_uri()],
                       capture_output=True, timeout=120, check=True)
        assert target.is_file() and target.stat().st_size > 1000
    (SHOTS / f"comment-{name}.md").write_text(markdown, encoding="utf-8")
    return layout


def check_layout(layout: dict[str, Any], *, regressions: bool) -> None:
    assert layout["verdict"] is not None and layout["verdict"] < FIRST_SCREEN, layout
    assert layout["totals"] is not None and layout["totals"] < FIRST_SCREEN, layout
    assert not [row for row in layout["metricRows"] if "skipped" in row], layout["metricRows"]
    if regressions:
        assert layout["regressed"] is not None and layout["metrics"] is not None, layout
        assert layout["regressed"] < layout["metrics"], layout


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    assert run_cli("run", "--output-dir", out, "--baseline", "none", "--progress", "none") == 0
    return out / "results.json"


def test_passing_demo_run(demo: Path, tmp_path: Path) -> None:
    markdown = comment_of(demo, ROOT)
    layout = photograph("passing-demo", markdown, tmp_path)
    check_layout(layout, regressions=False)
    assert markdown.startswith("## ✅ evalgate passed")
    assert "judged metrics skipped: no judge configured" in markdown


def test_failing_run_with_regressions(demo: Path, tmp_path: Path) -> None:
    document = json.loads(demo.read_text(encoding="utf-8"))
    by_suite: dict[str, list[str]] = {}
    for record in document["results"]:
        by_suite.setdefault(Path(record["source"].rsplit(":", 1)[0]).parent.name, []).append(record["id"])
    broken = {case_id: "I am not sure; please ask someone else." for ids in by_suite.values() for case_id in ids[:3]}
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps(broken), encoding="utf-8")
    head = tmp_path / "head"
    code = run_cli("run", "--output-dir", head, "--outputs-file", answers, "--baseline", demo, "--progress", "none")
    assert code == 1
    head_doc = json.loads((head / "results.json").read_text(encoding="utf-8"))
    assert head_doc["comparison"]["cases"]["regressions"], "the broken answers must flip cases to fail"
    markdown = comment_of(head / "results.json", ROOT)
    layout = photograph("failing-with-regressions", markdown, tmp_path)
    check_layout(layout, regressions=True)


def test_two_thousand_failing_cases(tmp_path: Path) -> None:
    cases = []
    for i in range(2000):
        cases.append({"id": f"brand-{i:04d}", "question": f"Which CRM should team {i} use?",
                      "brands_mine": ["HubSpot"], "brands_competitors": ["Salesforce"],
                      "expected_my_mentions": ["HubSpot"], "expected_competitor_mentions": ["Salesforce"],
                      "output": "Salesforce is fine." if i % 3 else "HubSpot or Salesforce.",
                      "risk_level": "critical" if i % 40 == 0 else "medium", "category": f"team-{i % 12}"})
    dataset = tmp_path / "evals" / "crm.yaml"
    dataset.parent.mkdir()
    dataset.write_text(yaml.safe_dump(cases, sort_keys=False), encoding="utf-8")
    out = tmp_path / "out"
    assert run_cli("run", "--dataset", dataset, "--output-dir", out, "--baseline", "none", "--progress", "none") == 1
    markdown = comment_of(out / "results.json", tmp_path)
    assert len(markdown) < 65_536
    layout = photograph("2000-failing", markdown, tmp_path)
    check_layout(layout, regressions=False)
    critical = json.loads((out / "results.json").read_text(encoding="utf-8"))["summary"]["critical_failures"]
    assert critical > 10 and f"- 🚨 {critical} critical cases failed:" in markdown
    assert markdown.count("critical case brand-") == 0  # each reason once: ids in one line, details below
