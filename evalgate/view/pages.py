"""The pages of ``evalgate view``, as view models rendered by jinja2 templates (``templates/``, autoescape on):
the same functions serve the local web app (``view.app``) and the static export (``view.export``); only the
``Links`` differ (URLs with query strings, or sibling file names).

Every value from a results file — ids, answers, reasoning, span names, reasons — reaches the page through
autoescape; no template uses ``|safe``. Secrets are redacted from the final text (``safety.redact``).
"""

from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2

from evalgate.model import STATUS_TEXT, CaseResult
from evalgate.report import view as report_view
from evalgate.report.escape import truncate
from evalgate.report.html import TEXT_LIMIT, format_value, shown_json, shown_text, trace_view
from evalgate.runner.api import compare_documents
from evalgate.safety.redact import redact
from evalgate.store import browse
from evalgate.store.reader import read_case, recorded
from evalgate.view.charts import PALETTE, line_chart, threshold_line
from evalgate.view.sources import Catalog

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"
PAGE_SIZE = 50
DIFF_LIMIT = 4_000
DIFF_CASES = 20
TREND_RUNS = 100
FLAKY_RUNS = 30
RUNS_SORTS = {"time": "timestamp", "pass_rate": "pass_rate", "cost": "cost_usd", "duration": "duration_s"}


class NotFound(Exception):
    """The page names a run or case that is not in the catalog."""


# ── links ──────────────────────────────────────────────────────────────────────────────────────────


class Links:
    """URLs of the live viewer (``live`` True: filters and forms work)."""

    live = True

    def runs(self, **query: str) -> str:
        return "/" + _query(query)

    def run(self, run_id: str, status: str = "not_passed", page: int = 1, q: str = "") -> str:
        return "/run" + _query({"id": run_id, "status": status if status != "not_passed" else "",
                                "page": str(page) if page > 1 else "", "q": q})

    def case(self, run_id: str, case_id: str) -> str:
        return "/case" + _query({"run": run_id, "id": case_id})

    def compare(self, base: str, head: str) -> str:
        return "/compare" + _query({"base": base, "head": head})

    def trends(self) -> str:
        return "/trends"

    def flaky(self) -> str:
        return "/flaky"


def _query(values: Mapping[str, str]) -> str:
    kept = {k: v for k, v in values.items() if v}
    return "?" + urlencode(kept) if kept else ""


def slug(text: str) -> str:
    """A file-name-safe, collision-free name for ``text``: its safe characters (≤ 40) and 8 hex of its SHA-256."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:40].strip("._") or "x"
    return f"{safe}-{hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


class FileLinks(Links):
    """Sibling file names of the static export; every link made is remembered (``wanted``) so the exporter
    writes exactly the pages that are linked."""

    live = False
    BEYOND = "not-exported.html"
    """Where every link beyond the export's page budget points (one page saying so)."""

    def __init__(self, limit: int = 2_000) -> None:
        self.limit = limit
        self.wanted: dict[str, tuple[str, dict[str, Any]]] = {}
        self.beyond = False

    def _want(self, name: str, kind: str, **params: Any) -> str:
        if name not in self.wanted:
            if len(self.wanted) >= self.limit:
                self.beyond = True
                return self.BEYOND
            self.wanted[name] = (kind, params)
        return name

    def runs(self, **query: str) -> str:
        return self._want("index.html", "runs")

    def run(self, run_id: str, status: str = "not_passed", page: int = 1, q: str = "") -> str:
        suffix = ("" if status == "not_passed" else f"-{status}") + (f"-p{page}" if page > 1 else "")
        return self._want(f"run-{slug(run_id)}{suffix}.html", "run", id=run_id, status=status, page=str(page))

    def case(self, run_id: str, case_id: str) -> str:
        return self._want(f"case-{slug(run_id)}-{slug(case_id)}.html", "case", run=run_id, id=case_id)

    def compare(self, base: str, head: str) -> str:
        return self._want(f"compare-{slug(base)}-{slug(head)}.html", "compare", base=base, head=head)

    def trends(self) -> str:
        return self._want("trends.html", "trends")

    def flaky(self) -> str:
        return self._want("flaky.html", "flaky")


# ── rendering ──────────────────────────────────────────────────────────────────────────────────────


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(num=format_value, signed=report_view.format_signed, pct=report_view.format_percent, usd=report_view.format_usd, pval=report_view.format_p,
                       count=report_view.format_count, duration=format_duration, short=short_commit)
    return env


_ENV: jinja2.Environment | None = None


def render(template: str, **view: Any) -> str:
    global _ENV
    if _ENV is None:
        _ENV = _environment()
    return redact(_ENV.get_template(template).render(**view))


def format_duration(seconds: Any) -> str:
    """``42 s``, ``3 min 05 s``, ``1 h 02 min``; ``—`` when unknown."""
    if not isinstance(seconds, int | float) or isinstance(seconds, bool) or seconds < 0:
        return "—"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


def short_commit(commit: Any) -> str:
    return str(commit)[:10] if commit else "—"


def _one(params: Mapping[str, str], key: str, default: str = "") -> str:
    return str(params.get(key) or default)[:500]


# ── runs ───────────────────────────────────────────────────────────────────────────────────────────


def runs_page(catalog: Catalog, links: Links, params: Mapping[str, str]) -> str:
    """Every run: branch, commit, verdict, pass rate, cost, duration; filter by branch, verdict and text, sort
    by time, pass rate, cost or duration; each run links to the previous run of its branch (compare)."""
    all_runs = [run for _, run in catalog.run_summaries()]
    previous: dict[str, str] = {}
    last_of: dict[str | None, str] = {}
    for run in reversed(all_runs):  # oldest first: the previous finished run of the same branch
        if run.branch in last_of:
            previous[run.run_id] = last_of[run.branch]
        if run.status not in browse.UNFINISHED:
            last_of[run.branch] = run.run_id
    branch, verdict, text = _one(params, "branch"), _one(params, "verdict"), _one(params, "q").lower()
    sort, order = _one(params, "sort", "time"), _one(params, "order", "desc")
    shown = [run for run in all_runs
             if (not branch or (run.branch or "") == branch)
             and (not verdict or (verdict == "passed") == bool(run.passed))
             and (not text or text in run.run_id.lower() or text in (run.commit or "").lower()
                  or text in (run.branch or "").lower())]
    if sort in RUNS_SORTS and sort != "time":
        field = RUNS_SORTS[sort]
        known = [r for r in shown if getattr(r, field) is not None]
        known.sort(key=lambda r: getattr(r, field), reverse=order != "asc")
        shown = known + [r for r in shown if getattr(r, field) is None]
    elif order == "asc":
        shown.reverse()
    rows = [{"run": run, "link": links.run(run.run_id),
             "previous": links.compare(previous[run.run_id], run.run_id) if run.run_id in previous else None}
            for run in shown]
    branches = sorted({run.branch for run in all_runs if run.branch})
    return render("runs.html.j2", links=links, page="runs", title="Runs", rows=rows, total=len(all_runs),
                  branches=branches, filters={"branch": branch, "verdict": verdict, "q": _one(params, "q"),
                                              "sort": sort, "order": order},
                  choices=[run.run_id for run in all_runs[:500]], sources=catalog.labels)


# ── one run ────────────────────────────────────────────────────────────────────────────────────────


def _run(catalog: Catalog, run_id: str) -> tuple[int, dict[str, Any]]:
    index = catalog.runs.get(run_id)
    if index is None:
        raise NotFound(f"no run {run_id!r}")
    with catalog.connect(index) as connection:
        document = browse.run_document(connection, run_id)
    if document is None:
        raise NotFound(f"run {run_id!r} has no readable document")
    return index, document


def run_page(catalog: Catalog, links: Links, params: Mapping[str, str]) -> str:
    """One run: verdict and gate reasons, metrics with thresholds and calibration, judge health, the
    comparison with its baseline (flips first, linked to their cases), breakdowns, and its cases a page at a
    time (failed and errored first)."""
    run_id = _one(params, "id")
    index, document = _run(catalog, run_id)
    status = _one(params, "status", "not_passed")
    status = status if status in browse.CASE_FILTERS else "not_passed"
    search = _one(params, "q") if links.live else ""
    try:
        page = max(1, int(_one(params, "page", "1")))
    except ValueError:
        page = 1
    with catalog.connect(index) as connection:
        counts = browse.case_counts(connection, run_id)
        cases, matching = browse.case_page(connection, run_id, status=status, search=search,
                                           offset=(page - 1) * PAGE_SIZE, limit=PAGE_SIZE)
    for case in cases:
        case["link"] = links.case(run_id, case["id"])
    pages = max(1, -(-matching // PAGE_SIZE))
    comparison = report_view.comparison_view(document.get("comparison"))
    baseline_id = ((document.get("comparison") or {}).get("baseline") or {}).get("run_id")
    if comparison is not None:
        for flip in comparison["regressions"] + comparison["fixes"]:
            flip["link"] = links.case(run_id, flip["id"])
    breakdowns = [{"dimension": str(dim), "rows": [report_view.group_row(name, g) for name, g in sorted(groups.items())
                                                   if isinstance(g, Mapping)]}
                  for dim, groups in (document.get("breakdowns") or {}).items() if isinstance(groups, Mapping) and groups]
    git = (document.get("metadata") or {}).get("git") or {}
    view = {
        "links": links, "page": "run", "title": f"Run {run_id}",
        "run": report_view.run_view(document), "git": git if isinstance(git, Mapping) else {},
        "verdict": report_view.verdict_view(document), "reasons": report_view.reasons_view(document),
        "gate_changes": report_view.gate_changes_view(document),
        "totals": report_view.totals_view(document) | report_view.usage_view(document),
        "metrics": report_view.metric_rows(document), "judge": report_view.judge_view(document), "not_scored": report_view.not_scored_view(document),
        "skipped_metrics": report_view.skipped_metrics(document), "comparison": comparison,
        "baseline_link": links.compare(str(baseline_id), run_id) if baseline_id in catalog.runs else None,
        "breakdowns": breakdowns, "counts": counts, "status": status, "search": search,
        "cases": cases, "matching": matching, "page_number": page, "pages": pages,
        "prev_link": links.run(run_id, status, page - 1, search) if page > 1 else None,
        "next_link": links.run(run_id, status, page + 1, search) if page < pages else None,
        "filter_links": {name: links.run(run_id, name) for name in browse.CASE_FILTERS
                         if name in ("all", "not_passed") or counts.get(name)} if links.live else {},
        "run_id": run_id,
    }
    return render("run.html.j2", **view)


# ── one case ───────────────────────────────────────────────────────────────────────────────────────


def case_page(catalog: Catalog, links: Links, params: Mapping[str, str]) -> str:
    """One case of one run, every repeat: input, expected, the answer, every metric with its value,
    threshold, status, reason and the judge's reasoning, conversation turns, the span tree."""
    run_id, case_id = _one(params, "run"), str(params.get("id") or "")
    index, document = _run(catalog, run_id)
    with catalog.connect(index) as connection:
        records = _read(browse.case_records(connection, run_id, case_id))
    if not records:
        raise NotFound(f"no case {case_id!r} in run {run_id!r}")
    repeats = [_case_view(record) for record in records]
    flip = None
    for kind in ("regressions", "fixes"):
        for entry in ((document.get("comparison") or {}).get("cases") or {}).get(kind) or []:
            if isinstance(entry, Mapping) and str(entry.get("id")) == case_id:
                flip = {"kind": kind, "base_status": entry.get("base_status"), "head_status": entry.get("head_status")}
    return render("case.html.j2", links=links, page="case", title=f"Case {case_id}", run_id=run_id, case_id=case_id,
                  run_link=links.run(run_id), repeats=repeats, flip=flip)


def _read(records: Iterable[Any]) -> list[CaseResult]:
    """``records`` (one case's repeats) read through their type (``store.reader.read_case``)."""
    return [case for case in (read_case(r, position) for position, r in enumerate(records)) if case is not None]


def _case_view(record: CaseResult) -> dict[str, Any]:
    other = {k: v for k, v in record.answer.items() if k != "trace"}
    return {
        "repeat": record.repeat,
        "status": STATUS_TEXT[record.status],
        "risk_level": recorded(record, "risk_level"), "source": recorded(record, "source"),
        "suite": record.suite, "category": record.category,
        "tags": record.tags,
        "description": shown_text(record.description), "error": shown_text(record.error),
        "why": report_view.case_why(record),
        "input": shown_text(record.input),
        "expected": shown_json(record.expected) if record.expected else None,
        "output": shown_text(record.output),
        "answer": shown_json(other) if other else None,
        "metrics": [{**row, "reason": shown_text(row["reason"]), "explanation": shown_text(row["explanation"])}
                    for row in report_view.case_metrics(record)],
        "transcript": report_view.transcript_view(record, TEXT_LIMIT),
        "trace": trace_view(record.answer.get("trace")),
        "num_tokens": record.num_tokens, "latency_ms": record.latency_ms, "cost_usd": record.cost_usd,
    }


# ── compare ────────────────────────────────────────────────────────────────────────────────────────


def _slim(records: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """What the regression decision reads of a record (``verdict.compare``): id, status, risk and source (as
    recorded), repeat and each metric's value (with the judge-unavailable mark); each record is read through
    its type (``store.reader.read_case``), answers and details are dropped at once, so two runs of any size
    compare in memory proportional to their case count."""
    for position, record in enumerate(records):
        case = read_case(record, position)
        if case is None:
            continue
        metrics = {name: {"value": result.value,
                          **({"details": {"judge_unavailable": True}} if "judge_unavailable" in result.details else {})}
                   for name, result in case.metrics.items()}
        yield {"id": case.id, "status": STATUS_TEXT[case.status], "passed": case.passed,
               "risk_level": recorded(case, "risk_level"), "source": recorded(case, "source"),
               "repeat": case.repeat, "metrics": metrics}


def compare_page(catalog: Catalog, links: Links, params: Mapping[str, str]) -> str:
    """Two runs side by side through ``evalgate compare``'s own decision (``runner.api.compare_documents``):
    flipped cases first, the family of tests and metric deltas, then the answers of flipped cases side by
    side with a word diff."""
    base_id, head_id = _one(params, "base"), _one(params, "head")
    base_index, base_doc = _run(catalog, base_id)
    head_index, head_doc = _run(catalog, head_id)
    with catalog.connect(base_index) as base_conn, catalog.connect(head_index) as head_conn:
        result = compare_documents({**base_doc, "results": _slim(browse.iter_records(base_conn, base_id))},
                                   {**head_doc, "results": _slim(browse.iter_records(head_conn, head_id))},
                                   base_label=base_id, head_label=head_id)
        comparison = report_view.comparison_view(result.comparison)
        assert comparison is not None
        for flip in comparison["regressions"] + comparison["fixes"]:
            flip["link"] = links.case(head_id, flip["id"])
            flip["base_link"] = links.case(base_id, flip["id"])
        sides = []
        for flip in (comparison["regressions"] + comparison["fixes"])[:DIFF_CASES]:
            base_records = _read(browse.case_records(base_conn, base_id, flip["id"]))
            head_records = _read(browse.case_records(head_conn, head_id, flip["id"]))
            if base_records and head_records:
                left, right = _answer_text(base_records[0]), _answer_text(head_records[0])
                base_diff, head_diff = word_diff(left, right)
                sides.append({"id": flip["id"], "link": flip["link"], "base_status": flip["base_status"],
                              "head_status": flip["head_status"], "base": base_diff, "head": head_diff})
    return render("compare.html.j2", links=links, page="compare", title=f"Compare {base_id} → {head_id}",
                  base_id=base_id, head_id=head_id, base_link=links.run(base_id), head_link=links.run(head_id),
                  comparison=comparison, reasons=result.reasons, regression=result.regression,
                  loosened=report_view.gate_changes_view({"gate": {"loosened": result.loosened}}), sides=sides,
                  choices=[run.run_id for _, run in catalog.run_summaries()[:500]])


def _answer_text(record: CaseResult) -> str:
    output = record.output
    if output in (None, "") and record.error:
        output = f"error: {record.error}"
    return truncate(str(output or ""), DIFF_LIMIT)


def word_diff(left: str, right: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Both texts as ``(kind, text)`` segments — ``same``, ``del`` (only in ``left``), ``ins`` (only in
    ``right``) — from difflib's longest matching blocks over words and whitespace."""
    a, b = re.split(r"(\s+)", left), re.split(r"(\s+)", right)
    base: list[tuple[str, str]] = []
    head: list[tuple[str, str]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            base.append(("same", "".join(a[i1:i2])))
            head.append(("same", "".join(b[j1:j2])))
        else:
            if i2 > i1:
                base.append(("del", "".join(a[i1:i2])))
            if j2 > j1:
                head.append(("ins", "".join(b[j1:j2])))
    return base, head


# ── trends ─────────────────────────────────────────────────────────────────────────────────────────


def trends_page(catalog: Catalog, links: Links, params: Mapping[str, str]) -> str:
    """Each metric's average and the pass rate over the newest ``TREND_RUNS`` finished runs, one line per
    branch, with the gate's threshold (the newest run's) as a dashed line."""
    history: dict[str, dict[str, Any]] = {}
    for index in range(len(catalog.databases)):
        with catalog.connect(index) as connection:
            for entry in browse.metric_history(connection, TREND_RUNS):
                history.setdefault(entry["run_id"], entry)
    runs = sorted(history.values(), key=lambda e: (e["timestamp"], e["run_id"]))[-TREND_RUNS:]
    branches = list(dict.fromkeys(str(e["branch"] or "(no branch)") for e in runs))
    labels = (runs[0]["timestamp"][:10], runs[-1]["timestamp"][:10]) if runs else ("", "")

    def chart(value_of: Any, threshold: float | None) -> dict[str, Any] | None:
        series = []
        for number, branch in enumerate(branches):
            points = [(position, value, f"{e['run_id']} · {branch} · {e['timestamp']} · {value:.4g}")
                      for position, e in enumerate(runs)
                      if str(e["branch"] or "(no branch)") == branch and (value := value_of(e)) is not None]
            if points:
                series.append({"name": branch, "points": points, "colour": PALETTE[number % len(PALETTE)]})
        return line_chart(series, len(runs), threshold, labels)

    charts = []
    newest_rate = next((e["min_pass_rate"] for e in reversed(runs) if e["min_pass_rate"] is not None), None)
    pass_chart = chart(lambda e: e["pass_rate"], newest_rate)
    if pass_chart:
        charts.append({"name": "pass rate", "threshold": f"≥ {newest_rate:g}" if newest_rate is not None else None,
                       "chart": pass_chart, "slug": "pass_rate"})
    names = sorted({name for e in runs for name in e["metrics"]})
    for name in names:
        info: dict[str, Any] = next((e["metrics"][name] for e in reversed(runs) if name in e["metrics"]), {})
        line = threshold_line(info.get("threshold"))
        drawn = chart(lambda e, n=name: (e["metrics"].get(n) or {}).get("average"), line[1] if line else None)
        if drawn:
            charts.append({"name": name, "threshold": report_view.format_threshold(info.get("threshold")) or None,
                           "chart": drawn, "slug": re.sub(r"[^A-Za-z0-9_-]", "_", name)})
    legend = [{"name": branch, "colour": PALETTE[number % len(PALETTE)]} for number, branch in enumerate(branches)]
    return render("trends.html.j2", links=links, page="trends", title="Trends", charts=charts, runs=len(runs),
                  legend=legend)


# ── flaky ──────────────────────────────────────────────────────────────────────────────────────────


def flaky_page(catalog: Catalog, links: Links, params: Mapping[str, str]) -> str:
    """Cases that both passed and failed over the newest ``FLAKY_RUNS`` finished runs of each database
    (``store.browse.flaky_cases``), each linked to its newest record."""
    rows: list[dict[str, Any]] = []
    counted = 0
    for index in range(len(catalog.databases)):
        with catalog.connect(index) as connection:
            found, runs = browse.flaky_cases(connection, runs=FLAKY_RUNS)
            counted += runs
            newest = [run.run_id for run in browse.list_runs(connection)]
            for row in found:
                holder = browse.latest_run_with_case(connection, row["id"], newest)
                row["link"] = links.case(holder, row["id"]) if holder else None
            rows += found
    rows.sort(key=lambda r: (-r["share"], -r["mixed_runs"], r["id"]))
    return render("flaky.html.j2", links=links, page="flaky", title="Flaky cases", rows=rows, runs=counted,
                  window=FLAKY_RUNS)


PAGES = {"runs": runs_page, "run": run_page, "case": case_page, "compare": compare_page, "trends": trends_page,
         "flaky": flaky_page}
