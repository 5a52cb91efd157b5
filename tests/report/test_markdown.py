"""Markdown report (PR comment / job summary) and the escaping helpers, checked by rendering the
Markdown to HTML with markdown-it-py (CommonMark + GFM tables, raw HTML on, as GitHub allows
``<details>``)."""

from __future__ import annotations

import copy
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from evalgate.errors import UserError
from evalgate.report.escape import (
    ZWJ,
    escape_cell,
    escape_html,
    escape_prose,
    fenced,
    inline_code,
    link_target,
    truncate,
    utf16_len,
)
from evalgate.report.markdown import render_comment, render_summary, split_source
from evalgate.safety.redact import register_secret
from tests.support.reports import failing_case, render, results_doc

HOSTILE_ANSWER = (
    "</details><script>alert(1)</script>\n```\n::error::pwned\n```\n| a | b |\n@octo-org/security-team see #12\n"
    "<img src=x onerror=alert(2)> [click](javascript:alert(3)) ![t](http://evil.example/t.png)"
)


def to_html(markdown: str) -> str:
    return MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)


class ElementCounter(HTMLParser):
    """Counts start tags and collects text, as a browser would see the rendered HTML."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: dict[str, int] = {}
        self.rows: list[int] = []
        self.prose = ""
        """Text outside <code>/<pre> (where GitHub links mentions)."""
        self._cells = 0
        self._code_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] = self.tags.get(tag, 0) + 1
        if tag == "tr":
            self._cells = 0
        if tag in ("td", "th"):
            self._cells += 1
        if tag in ("code", "pre"):
            self._code_depth += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr":
            self.rows.append(self._cells)
        if tag in ("code", "pre"):
            self._code_depth -= 1

    def handle_data(self, data: str) -> None:
        if self._code_depth == 0:
            self.prose += data


def elements(markdown: str) -> ElementCounter:
    counter = ElementCounter()
    counter.feed(to_html(markdown))
    return counter


# ---------------------------------------------------------------------------------------------
# content


def test_marker_and_failed_verdict_with_every_reason() -> None:
    body = render(results_doc())
    lines = body.split("\n")
    assert lines[0] == "<!-- evalgate:comment tag=main -->"
    assert lines[1].startswith("## ❌ evalgate · main failed")
    assert "- `mention_f1` average 0.820 misses its threshold ≥ 0.85" in body
    assert "- 🚨 1 critical case failed: `crit-1`" in body
    assert body.count("critical case crit-1 failed") == 0  # each reason once: the case is listed below
    assert "**8/10 cases passed** (80.0%, risk-weighted 75.0%)" in body
    assert body.index("misses its threshold") < body.index("**8/10 cases passed**") < body.index("### Metrics")


def test_passed_verdict_and_partial_run_note() -> None:
    doc = results_doc(passed=True)
    doc["status"] = "cancelled"
    body = render(doc, tag="default")
    assert "## ✅ evalgate passed" in body
    assert "The run was **cancelled**: these are partial results." in body


def test_metric_table_results_and_thresholds() -> None:
    body = render(results_doc())
    assert "| Suite | Metric | Average | Threshold | Result |\n" in body
    assert "| — | `mention_precision` | 0.950 | ≥ 0.9 | ✅ passed |" in body
    assert "|  | `mention_f1` | 0.820 | ≥ 0.85 | ❌ failed |" in body
    assert "|  | `false_is_mine_rate` | 0.000 | ≤ 0.05 | ✅ passed |" in body
    assert "judge_overall" not in body.replace("judge\\_overall", "judge_overall").split("### Metrics")[1].split("<sub>")[0]
    assert "<sub>1 deterministic metric skipped (judge\\_overall): no case needed it.</sub>" in body  # one line
    assert "vs base" not in body


def test_comparison_column_and_regressions_section() -> None:
    body = render(results_doc(comparison=True))
    assert "| Suite | Metric | Average | Threshold | Result | vs base |" in body
    assert "|  | `mention_f1` | 0.820 | ≥ 0.85 | ❌ failed | **▼ −0.090** |" in body
    assert "| — | `mention_precision` | 0.950 | ≥ 0.9 | ✅ passed | ▲ +0.010 |" in body
    assert "|  | `false_is_mine_rate` | 0.000 | ≤ 0.05 | ✅ passed | — |" in body
    assert "### Against the base" in body
    assert "1 significant regression: mention\\_f1 fell 0.090" in body
    assert "baseline: artifact evalgate-results of run 123 on main" in body
    assert "Pass rate 90.0% → 80.0% · McNemar p=0.50, not significant · 1 new · 2 removed case(s)" in body
    assert "Significant metric changes: `mention_f1` ▼ −0.090" in body
    regressed = body.index("| Regressed case |")
    assert body.index("`crit-1` 🚨", regressed) < body.index("`low-3`", regressed), "critical regressions first"
    assert regressed < body.index("### Failed cases") < body.index("### Metrics"), "what changed comes first"
    assert "<details><summary>1 fixed case(s)</summary>" in body and "- `fixed-9` ·" in body
    for row in elements(body).rows:
        assert row in (4, 5, 6, 3), row


def test_critical_failures_first_with_links_to_the_head_sha() -> None:
    body = render(results_doc())
    link = f"https://github.com/octo/hello/blob/{'0123abcd' * 5}/datasets/brand/fixtures.yaml#L13"
    section = body.index("### Failed cases (2)")
    assert (f"- 🚨 `crit-1` · [datasets/brand/fixtures.yaml:13]({link}) · critical — mention\\_f1 0.400 "
            "(needs ≥ 0.85): missed HubSpot") in body[section:]
    assert body.index("`crit-1`", section) < body.index("`err-2`", section)
    assert "- 💥 `err-2` ·" in body and "errored — error: target timed out after 30 s" in body
    details = body.index("Case details: inputs, expected and answers")
    assert body.index("<code>crit-1</code>", details) < body.index("<code>err-2</code>", details)
    assert section < details


def test_sources_without_repository_context_are_plain_code() -> None:
    body = render(results_doc(), source_links=None)
    assert "`datasets/brand/fixtures.yaml:13`" in body
    assert "/blob/" not in body


def test_category_breakdown_table() -> None:
    body = render(results_doc())
    assert "| Category | Cases | Passed | Failed | Errored | Pass rate |" in body
    assert "| crm | 3 | 2 | 1 | 0 | 66.7% |" in body
    assert body.index("| crm |") < body.index("| email |"), "worst category first"


def test_case_details_content() -> None:
    body = render(results_doc())
    start = body.index("<code>crit-1</code>")
    block = body[start: body.index("</details>", start)]
    assert "· failed · 🚨 critical · crm</summary>\n\n" in block
    assert "| `mention_f1` | 0.400 | ≥ 0.85 | failed | missed HubSpot |" in block
    assert "mention_precision" not in block, "only failed metrics are listed"
    assert "Which CRM should I use? (crit-1)" in block
    assert '{"expected_my_mentions": ["HubSpot"], "expected_competitor_mentions": ["Salesforce"]}' in block
    answer_len = len("I recommend Salesforce. " * 60)
    assert f"… (truncated, {answer_len} chars)" in block
    errored = body[body.index("<code>err-2</code>"):]
    assert "target timed out after 30 s" in errored
    assert elements(body).tags["details"] == 2 + 2  # two case blocks, their wrapper, the breakdown


def test_usage_metadata_and_links() -> None:
    body = render(results_doc())
    footer = body[body.rindex("<sub>"):]
    assert "Tokens: 50,000 total, 2,500 per case · Cost" in footer
    assert "Judge: 8 call(s) + 2 cached · 1200 prompt + 300 completion tokens · $0.0023" in body[: body.rindex("<sub>")]
    assert "Cost: $0.0123" in footer
    assert "Run `20261122T101500Z-3f2a1c`" in footer
    assert "`datasets/brand/fixtures.yaml` (10 cases)" in footer
    assert "Judge: openai (gpt-4o-mini)" in footer
    assert "[Workflow run](https://github.com/octo/hello/actions/runs/99)" in body
    assert "[Artifacts](https://github.com/octo/hello/actions/runs/99/artifacts/7)" in body


def test_summary_mode_has_no_marker_and_longer_excerpts() -> None:
    summary = render_summary(results_doc(), run_url=None, artifact_url=None)
    assert "evalgate:comment" not in summary
    assert "truncated" not in summary, "the 1440-char answer fits the summary excerpt"
    assert "[Workflow run]" not in summary


# ---------------------------------------------------------------------------------------------
# hostile content


def test_hostile_case_text_stays_inert() -> None:
    doc = results_doc()
    case = doc["results"][1]
    case["output"] = HOSTILE_ANSWER
    case["input"] = HOSTILE_ANSWER
    case["id"] = "x</summary></details><b>@octocat</b>|"
    case["description"] = "# Heading?\n- list | pipe <i>html</i> @octo-org/team"
    case["reasons"] = ["reason with | pipe and\nnewline @octocat"]
    case["metrics"]["mention_f1"]["reason"] = "pipe | <script>x</script>\nnext"
    case["category"] = "cat|<b>"
    doc["breakdowns"]["category"]["evil|cat<script>"] = {"total": 1, "passed": 0, "failed": 1, "errored": 0,
                                                        "pass_rate": 0.0}
    doc["gate"]["reasons"].append("reason </details> @octocat ::error::x")
    body = render(doc)
    html = to_html(body)
    seen = elements(body)
    assert "<script" not in html
    assert "<img" not in html
    assert "<i>" not in html and "<b>" not in html
    assert 'href="javascript' not in html
    assert seen.tags.get("details") == 2 + 2  # the case block, its wrapper, the breakdown, fixed/more lists
    assert seen.tags.get("summary") == seen.tags.get("details")
    assert seen.tags.get("h1") is None, "no heading injected"
    assert set(seen.rows) <= {4, 5, 6}, f"table shapes broken: {seen.rows}"
    assert "@" + ZWJ + "octocat" in seen.prose
    assert re.search(r"@(octocat|octo-org)", seen.prose) is None, "nobody is pinged"
    code_blocks = re.findall(r"<pre><code[^>]*>(.*?)</code></pre>", html, re.S)
    assert any("::error::pwned" in block for block in code_blocks), "the answer stays inside its code block"


def test_secrets_are_redacted_from_the_report() -> None:
    secret = "sk-report-secret-0099887766"
    register_secret(secret)
    doc = results_doc()
    doc["results"][1]["output"] = f"my key is {secret}"
    body = render(doc)
    assert secret not in body
    assert "my key is ***" in body


# ---------------------------------------------------------------------------------------------
# size limits


def many_failures(n: int, answer: str = "word " * 300) -> dict[str, Any]:
    doc = results_doc()
    cases = [failing_case(f"crit-{i}", risk="critical", index=i) for i in range(3)]
    cases += [failing_case(f"case-{i}", risk="medium", index=i) for i in range(3, n)]
    for case in cases:
        case["output"] = answer
    doc["results"] = cases
    return doc


def test_large_reports_drop_non_critical_details_first() -> None:
    body = render(many_failures(300), max_chars=30_000)
    assert utf16_len(body) <= 30_000
    omitted = re.search(r"(\d+) case details omitted — see the full report in the job summary / artifact", body)
    assert omitted is not None
    kept = len(re.findall(r"<details>\n<summary>", body))
    assert kept + int(omitted.group(1)) == 300
    assert all(f"<code>crit-{i}</code>" in body for i in range(3))
    assert "<summary>By category</summary>" in body
    assert utf16_len(render(many_failures(300), max_chars=30_000 + 3_000)) > utf16_len(body), "room is used"


def test_breakdown_is_dropped_after_all_details() -> None:
    doc = many_failures(50)
    doc["breakdowns"]["category"] = {
        f"category-{i}": {"total": 1, "passed": 0, "failed": 1, "errored": 0, "pass_rate": 0.0} for i in range(200)
    }
    body = render(doc, max_chars=6_000)
    assert utf16_len(body) <= 6_000
    assert "50 case details omitted" in body
    assert "### By category" not in body
    assert "category breakdown was omitted" in body


def test_tiny_budget_still_fits() -> None:
    doc = many_failures(20)
    doc["gate"]["reasons"] = [f"critical case c{i} failed" for i in range(500)]
    body = render(doc, max_chars=2_000)
    assert utf16_len(body) <= 2_000
    assert body.startswith("<!-- evalgate:comment tag=main -->\n")


def test_astral_characters_count_as_two_units() -> None:
    doc = many_failures(120, answer="😀" * 700)
    body = render(doc, max_chars=20_000)
    assert utf16_len(body) <= 20_000
    assert len(body) < utf16_len(body)


# ---------------------------------------------------------------------------------------------
# templates


def test_user_template_overrides_the_bundled_one(tmp_path: Path) -> None:
    template = tmp_path / "my.md.j2"
    template.write_text(
        "Custom {{ 'PASS' if verdict.passed else 'FAIL' }} {{ totals.passed }}/{{ totals.total }}\n"
        "{% for d in details %}* {{ d.id | code }}: {{ d.answer | prose }}\n{% endfor %}",
        encoding="utf-8",
    )
    doc = results_doc()
    doc["results"][1]["output"] = "<script>@octocat"
    body = render(doc, template_path=template)
    assert body.split("\n")[0] == "<!-- evalgate:comment tag=main -->"
    assert body.split("\n")[1] == "Custom FAIL 8/10"
    assert "* `crit-1`: &lt;script&gt;@" + ZWJ + "octocat" in body


def test_template_errors_are_user_errors(tmp_path: Path) -> None:
    broken = tmp_path / "broken.md.j2"
    broken.write_text("line one\n{% if verdict.passed %}\nno endif\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"broken\.md\.j2:\d+: template syntax error"):
        render(results_doc(), template_path=broken)
    with pytest.raises(UserError, match=r"missing\.md\.j2: cannot read report template"):
        render(results_doc(), template_path=tmp_path / "missing.md.j2")
    undefined = tmp_path / "undefined.md.j2"
    undefined.write_text("{{ no_such_value }}", encoding="utf-8")
    with pytest.raises(UserError, match=r"undefined\.md\.j2: template error: 'no_such_value' is undefined"):
        render(results_doc(), template_path=undefined)
    sandboxed = tmp_path / "sandbox.md.j2"
    sandboxed.write_text("{{ ''.__class__.__mro__ }}", encoding="utf-8")
    with pytest.raises(UserError, match="template error"):
        render(results_doc(), template_path=sandboxed)


# ---------------------------------------------------------------------------------------------
# escape helpers


def test_escape_prose_neutralises_html_markdown_and_mentions() -> None:
    text = escape_prose("</details><script> **bold** [x](y) ![i](j) `c` @org/team #12 a_b")
    assert "<" not in text and ">" not in text
    assert "\\*\\*bold\\*\\*" in text
    assert "\\[x\\](y)" in text and "\\!\\[i\\](j)" in text
    assert "\\`c\\`" in text
    assert "@" + ZWJ + "org/team" in text
    assert "#" + ZWJ + "12" in text
    assert escape_prose("#12", issue_links=True) == "#12"
    assert escape_prose("# title\nsecond") == "\\# title second"
    assert escape_prose("1. item") == "1\\. item"
    assert escape_prose("a\nb", single_line=False) == "a\nb"


def test_prose_breaks_workflow_commands_at_line_start() -> None:
    assert escape_prose("::error::x") == ":\u200b:error::x"
    assert escape_prose("  ::warning::y\n::notice::z", single_line=False) == "  :\u200b:warning::y\n:\u200b:notice::z"
    assert escape_prose("a ::error::b") == "a ::error::b"


def test_escape_cell_handles_pipes_and_newlines() -> None:
    cell = escape_cell("a | b\nc\r\nd")
    assert cell == "a \\| b<br>c<br>d"
    table = f"| h |\n|---|\n| {cell} |\n"
    assert elements(table).rows == [1, 1]


def test_inline_code_picks_a_longer_backtick_run() -> None:
    assert inline_code("plain") == "`plain`"
    assert inline_code("has `tick`") == "``has `tick```" or inline_code("has `tick`") == "`` has `tick` ``"
    code = inline_code("``` x | y", in_table=True)
    assert code.startswith("````") and "\\|" in code
    html = to_html(inline_code("a ``` b"))
    assert "<code>a ``` b</code>" in html


def test_fenced_blocks_cannot_be_closed_by_the_text() -> None:
    text = "before\n```\n::error::x\n````\n</details>"
    block = fenced(text, "text")
    assert block.startswith("`````text\n") and block.endswith("\n`````")
    html = to_html(block + "\n\nafter")
    assert html.count("<pre>") == 1
    assert "&lt;/details&gt;" in html
    assert "<p>after</p>" in html
    assert fenced("x", "bad lang!") .startswith("```badlang\n")


def test_escape_html_and_link_targets() -> None:
    assert escape_html('<a href="x">&\'@me') == "&lt;a href=&quot;x&quot;&gt;&amp;&#39;@" + ZWJ + "me"
    assert link_target("javascript:alert(1)") == "#"
    assert link_target("https://x.example/a b(c)") == "https://x.example/a%20b%28c%29"


def test_truncate_adds_a_note() -> None:
    assert truncate("short", 10) == "short"
    assert truncate("x" * 700, 600) == "x" * 600 + "… (truncated, 700 chars)"


def test_split_source() -> None:
    assert split_source("datasets/a.yaml:12") == ("datasets/a.yaml", 12)
    assert split_source("datasets/a.yaml") == ("datasets/a.yaml", None)
    assert split_source("<memory>") == (None, None)
    assert split_source(None) == (None, None)


def test_minimal_documents_render() -> None:
    body = render_comment({}, run_url=None, artifact_url=None, tag="")
    assert body.startswith("<!-- evalgate:comment tag=default -->\n## ❌ evalgate failed\n")
    assert "Run `" not in body
    partial = render_comment(
        {"comparison": {}, "metrics": {"m": {"average": 0.5}}, "results": [{"id": 1, "status": "failed"}]},
        run_url=None,
        artifact_url=None,
        tag="x",
    )
    assert "| — | `m` | 0.500 | — | informational |" in partial
    assert "<code>1</code> · failed</summary>" in partial


def test_render_does_not_mutate_the_results() -> None:
    doc = results_doc(comparison=True)
    before = copy.deepcopy(doc)
    render(doc, max_chars=3_000)
    assert doc == before


# ---------------------------------------------------------------------------------------------
# spend, call retries, baseline notes, repeats (issues #3 and #5)


def spend_line(body: str) -> str:
    lines = (line.removeprefix("<sub>").removesuffix("</sub>") for line in body.split("\n"))
    return next(line for line in lines if line.startswith("Judge:") or line.startswith("API calls:"))


def test_spend_line_counts_judge_calls_retries_and_429s() -> None:
    line = spend_line(render(results_doc()))
    assert line == ("Judge: 8 call(s) + 2 cached · 1200 prompt + 300 completion tokens · $0.0023 · "
                    "API calls: 8 · 4 retries · 3 × HTTP 429 · 1 timed-out attempt(s)")
    doc = results_doc()
    doc["metadata"]["calls"].update(timeouts=0, failed=2)
    doc["metadata"]["cost"].update(max_cost_usd=0.5, budget_exceeded=True)
    line = spend_line(render(doc))
    assert line.endswith("3 × HTTP 429 · 2 failed call(s) · budget $0.5000 (reached)")
    assert "timed-out" not in line


def test_calls_without_a_judge_and_no_line_without_calls() -> None:
    doc = results_doc()
    doc["summary"].pop("judge_calls")
    doc["summary"]["tokens"] = {"total": 50000, "average": 2500}
    doc["metadata"]["calls"] = {"calls": 10, "attempts": 10, "retries": 0, "rate_limited_429": 0, "failed": 0,
                                "timeouts": 0}
    assert spend_line(render(doc)) == "API calls: 10 · 0 retries · 0 × HTTP 429"
    doc["metadata"].pop("calls")
    body = render(doc)
    assert "API calls" not in body and "Judge: " not in body.split("<sub>")[0]


@pytest.mark.parametrize(
    ("baseline", "comparison", "expected"),
    [
        ({"setting": "auto", "found": False, "source": None,
          "warning": "no baseline: no artifact 'evalgate-results' from branch main"},
         False, "<sub>No baseline: no artifact 'evalgate-results' from branch main</sub>"),
        ({"setting": "auto", "found": False, "source": None, "warning": None}, False,
         "<sub>No baseline: none found</sub>"),
        ({"setting": "base.json", "found": True, "source": "base.json",
          "warning": "no comparison: ValueError: schema_version 2"},
         False, "<sub>No comparison: ValueError: schema\\_version 2</sub>"),
        ({"setting": "base.json", "found": True, "source": "base.json", "warning": None}, True, None),
    ],
)
def test_baseline_note(baseline: dict[str, Any], comparison: bool, expected: str | None) -> None:
    doc = results_doc(comparison=comparison)
    doc["baseline"] = baseline
    body = render(doc)
    notes = [line for line in body.split("\n") if line.startswith(("<sub>No baseline", "<sub>No comparison"))]
    assert notes == ([expected] if expected else [])
    assert "No baseline" not in render(results_doc())


def flaky_entry(case_id: str, index: int, risk: str) -> dict[str, Any]:
    return {"id": case_id, "index": index, "source": f"datasets/brand/fixtures.yaml:{3 + 10 * index}",
            "risk_level": risk, "status": "failed", "repeats": 3, "passes": 1, "pass_fraction": 0.333333,
            "outcomes": ["passed", "failed", "failed"], "metrics": {}}


def repeated_doc(flaky: int = 2, flaky_cases: int | None = None) -> dict[str, Any]:
    doc = results_doc()
    doc["summary"]["repeats"] = {"repeat": 3, "rule": "majority", "cases": 10, "incomplete_cases": 0,
                                 "flaky_cases": flaky if flaky_cases is None else flaky_cases, "flaky_listed": flaky}
    doc["summary"]["confidence_intervals"] = {
        "confidence": 0.95, "method": "percentile bootstrap over cases", "resamples": 10000, "seed": 1,
        "pass_rate": {"mean": 0.8, "low": 0.55, "high": 1.0, "cases": 10, "method": "Wilson"},
        "pass_fraction": {"mean": 0.83, "low": 0.6, "high": 1.0, "cases": 10},
        "metrics": {"mention_f1": {"mean": 0.82, "low": 0.71, "high": 0.9, "cases": 10, "within_case_stdev": 0.05,
                                   "method": "BCa bootstrap"}},
    }
    doc["flaky"] = [flaky_entry("crit-1", 1, "critical")] + [flaky_entry(f"f-{i}", 10 + i, "low")
                                                              for i in range(flaky - 1)]
    return doc


def test_repeats_flaky_cases_and_confidence_intervals() -> None:
    body = render(repeated_doc())
    section = body[body.index("### 🎲 Repeats"):]
    assert "3 runs per case (majority rule) · 2 flaky case(s) of 10" in section
    link = f"https://github.com/octo/hello/blob/{'0123abcd' * 5}/datasets/brand/fixtures.yaml#L13"
    assert f"| `crit-1` 🚨 | [datasets/brand/fixtures.yaml:13]({link}) | critical | 1/3 | passed failed failed | failed |" \
        in section
    assert "| `f-0` |" in section
    assert "| Suite average | Mean | 95% CI over cases | Method | Cases | SD within case |" in section
    assert "| pass rate | 80.0% | 55.0% – 100.0% | Wilson | 10 | — |" in section
    assert "| `mention_f1` | 0.820 | 0.710 – 0.900 | BCa bootstrap | 10 | 0.050 |" in section
    assert section.index("### 🎲 Repeats") < section.index("<summary>By category</summary>")
    assert set(elements(body).rows) <= {3, 4, 5, 6}, elements(body).rows


def test_flaky_list_is_capped_and_counts_the_unlisted() -> None:
    body = render(repeated_doc(flaky=80, flaky_cases=250))
    assert len(re.findall(r"^\| `f-\d+` \|", body, re.M)) == 49
    assert "… and 200 more flaky case(s)" in body
    small = render(repeated_doc(flaky=80, flaky_cases=250), max_chars=6_000)
    assert utf16_len(small) <= 6_000
    assert "`crit-1` 🚨" in small, "the riskiest flaky case stays"


def test_flaky_cases_without_repeat_summary_get_their_own_heading() -> None:
    doc = results_doc()
    doc["flaky"] = [flaky_entry("crit-1", 1, "critical")]
    body = render(doc)
    assert "### 🎲 Flaky cases" in body and "### 🎲 Repeats" not in body
    assert "| `crit-1` 🚨 |" in body


def test_judge_stability_table() -> None:
    doc = results_doc()
    doc["summary"]["judge_stability"] = {"relevancy": {"samples": 3, "answers": 4, "mean_stdev": 0.12,
                                                       "max_stdev": 0.2, "straddling_threshold": 2}}
    body = render(doc)
    assert "### Judge stability" in body
    assert "| `relevancy` | 3 | 4 | 0.120 | 0.200 | 2 |" in body
    assert "### Judge stability" not in render(results_doc())


def test_hostile_flaky_entries_stay_inert() -> None:
    doc = repeated_doc()
    doc["flaky"][0].update(id="x|</details><script>@octocat", outcomes=["passed|<b>", "failed"])
    body = render(doc)
    html = to_html(body)
    assert "<script" not in html and "<b>" not in html
    assert set(elements(body).rows) <= {3, 4, 5, 6}


def test_reused_verdicts_and_their_savings_are_reported() -> None:
    doc = results_doc()
    doc["summary"]["judge_calls"]["base_cache"] = {"source": "main @ abc1234", "reused": 842, "verdicts": 1000,
                                                   "base_rows": 1000, "prompt_tokens_saved": 500_000,
                                                   "completion_tokens_saved": 40_000, "saved_usd": 1.91, "error": None}
    assert "♻️ 842 of 1,000 verdicts reused from main @ abc1234, $1.91 saved" in render(doc)
    doc["summary"]["judge_calls"]["base_cache"] |= {"reused": 0}
    assert "0 of 1,000 verdicts reused from main @ abc1234 (none of its 1,000 verdicts matched" in render(doc)
    del doc["summary"]["judge_calls"]["base_cache"]
    assert "verdicts reused" not in render(doc)
