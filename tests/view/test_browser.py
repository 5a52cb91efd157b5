"""``evalgate view``: the results browser over three real runs (a judge on loopback, two branches, a
regression with flipped cases, a hostile answer), served by the real command in a subprocess and driven in
headless Chromium (``--dump-dom``), and as a static export opened from disk."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest

from tests.servers.openai_server import Judge, OpenAIServer
from tests.support.cli import run_cli
from tests.support.dom import CHROMIUM_FLAGS, Node, parse

KEY = "sk-view-test-key-4242-do-not-leak"
CRITERIA = "The answer names the topic of the question and gives a next step."
HOSTILE_ID = "hostile-answer"
HOSTILE_OUTPUT = ("</pre><script>document.body.setAttribute('data-pwned','answer')</script>"
                  "<img src=x onerror=\"document.body.setAttribute('data-pwned','img')\"> <b>bold</b>")
REASONING_LOW = "The reply drops the settings page step the question needs"
REASONING_HIGH = "The reply names the key and the settings page step"


def case_rows(changed: frozenset[int] = frozenset(), hostile: bool = False) -> list[dict[str, Any]]:
    rows = []
    for i in range(6):
        answer = f"Answer {i}: open the settings page and follow the check."
        if i in changed:
            answer = f"Answer {i}: a different reply written on the pull request branch."
        rows.append({"id": f"case-{i}", "input": f"Question {i}: how do I rotate the key?", "output": answer,
                     "passing_criteria": CRITERIA, "metrics": ["relevancy"]})
    if hostile:
        rows.append({"id": HOSTILE_ID, "input": "Question <i>x</i>", "output": HOSTILE_OUTPUT,
                     "passing_criteria": CRITERIA, "metrics": ["relevancy"]})
    return rows


HOSTILE_REASONING = "<script>document.body.setAttribute('data-pwned','reasoning')</script><i>judged</i>"


def verdict(prompt: str, score: float) -> dict[str, Any]:
    if "data-pwned" in prompt:  # a judge that repeats the hostile answer's markup in its reasoning
        return {"reasoning": HOSTILE_REASONING, "score": score}
    return {"reasoning": REASONING_LOW if score < 0.5 else REASONING_HIGH, "score": score}


def by_answer(prompt: str) -> float:
    return 0.4 if "different reply" in prompt or "data-pwned" in prompt else 0.9


def evalgate_run(server: OpenAIServer, rows: list[dict[str, Any]], out: Path, branch: str, *extra: str) -> int:
    dataset = out.parent / f"{out.name}.jsonl"
    dataset.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_", "EVALGATE_"))}
    env |= {"LOCAL_JUDGE_API_KEY": KEY, "NO_COLOR": "1", "EVALGATE_JUDGE_SHARED_CACHE": "none",
            "GITHUB_REF_NAME": branch, "GITHUB_SHA": f"{branch[0]}{out.name}".ljust(40, "0")}
    done = subprocess.run(
        [sys.executable, "-m", "evalgate", "run", "-d", str(dataset), "--output-dir", str(out), "--db",
         str(out.parent / "results.db"), "--judge-provider", "local", "--judge-base-url", server.base_url + "/v1",
         "--calibration", "trust", "--progress", "none", "--no-cache", *extra],
        cwd=out.parent, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Three runs in one database: main (passes), topic (two answers changed and a hostile one: fails, with
    the comparison against main), main again."""
    root = tmp_path_factory.mktemp("view")
    with OpenAIServer(api_key=KEY, judge=Judge(score=by_answer, verdict=verdict)) as server:
        codes = [evalgate_run(server, case_rows(), root / "one", "main")]
        time.sleep(1.1)  # run timestamps have whole seconds: three distinct times, in order
        codes.append(evalgate_run(server, case_rows(frozenset({1, 4}), hostile=True), root / "two", "topic",
                                  "--baseline", str(root / "one" / "results.json")))
        time.sleep(1.1)
        codes.append(evalgate_run(server, case_rows(frozenset({4})), root / "three", "main"))
    assert codes == [0, 1, 0]  # the third: one case fails, the average passes
    ids = [json.loads((root / name / "results.json").read_text(encoding="utf-8"))["run_id"]
           for name in ("one", "two", "three")]
    return {"root": root, "db": root / "results.db", "ids": ids}


def chromium() -> str:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("headless Chromium not installed (Debian: apt-get install -y chromium)")
    return browser


def dump_dom(url: str, profile: Path) -> Node:
    """The DOM headless Chromium builds from ``url`` (after any script would have run)."""
    completed = subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom", url],
                               capture_output=True, text=True, timeout=180, check=False)
    assert completed.returncode == 0 and "<body" in completed.stdout, completed.stderr[-2000:]
    return parse(completed.stdout)


@pytest.fixture(scope="module")
def server(runs: dict[str, Any]) -> Iterator[str]:
    """``python -m evalgate view DB --no-open`` in a subprocess on a free port; yields its URL."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen([sys.executable, "-m", "evalgate", "view", str(runs["db"]), "--no-open"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        found = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
        assert found, (line, process.stderr.read() if process.poll() is not None and process.stderr else "")
        yield found.group(1)
    finally:
        process.terminate()
        process.wait(timeout=30)


def links_in(dom: Node, base: str) -> dict[str, str]:
    """Link text → absolute URL."""
    return {a.all_text().strip(): base.rstrip("/") + a.attrs["href"] if a.attrs["href"].startswith("/")
            else a.attrs["href"] for a in dom.find_all("a") if "href" in a.attrs}


# ── the live viewer in Chromium ──────────────────────────────────────────────────────────────────


def test_failing_run_to_its_flipped_case_and_the_judges_reasoning(runs: dict[str, Any], server: str,
                                                                   tmp_path: Path) -> None:
    profile = tmp_path / "profile"
    index = dump_dom(server, profile)
    rows = [tr for tr in index.find_all("tr") if "run" in tr.classes()]
    assert [tr.attrs["data-run"] for tr in rows] == runs["ids"][::-1]  # newest first
    failing = next(tr for tr in rows if tr.attrs["data-run"] == runs["ids"][1])
    assert "failed" in failing.all_text() and "topic" in failing.all_text()
    run_link = server.rstrip("/") + next(a.attrs["href"] for a in failing.find_all("a") if a.all_text() == runs["ids"][1])
    run_page = dump_dom(run_link, profile)
    assert "relevancy" in " ".join(li.all_text() for li in run_page.find_all("li"))  # the gate's reason
    flips = [tr for tr in run_page.find_all("tr") if "flip" in tr.classes()]
    assert sorted(tr.find_all("a")[0].all_text() for tr in flips) == ["case-1", "case-4"]
    case_link = server.rstrip("/") + flips[0].find_all("a")[0].attrs["href"]
    case_page = dump_dom(case_link, profile)
    (flip,) = case_page.find_all("p", id="flip")
    assert "passed → failed" in flip.all_text()
    reasoning = [n.all_text() for n in case_page.walk() if "reasoning" in n.classes()]
    assert reasoning == [REASONING_LOW]
    assert "different reply written on the pull request branch" in case_page.find_all("pre", id="answer-0")[0].all_text()


def test_compare_two_runs_in_the_browser(runs: dict[str, Any], server: str, tmp_path: Path) -> None:
    one, two, _ = runs["ids"]
    page = dump_dom(server + "compare?" + urlencode({"base": one, "head": two}), tmp_path / "profile")
    _code, out, _err = run_cli("compare", runs["root"] / "one" / "results.json", runs["root"] / "two" / "results.json",
                             "--format", "json")
    expected = json.loads(out)
    (decision,) = page.find_all("div", id="decision")
    assert expected["summary"] in decision.all_text()  # the same decision, in the same words
    assert ("no significant regression" in decision.all_text()) == (not expected["regression"])
    flips = [tr.find_all("a")[0].all_text() for tr in page.find_all("tr") if "regression" in tr.classes()]
    assert flips == [f["id"] for f in expected["cases"]["regressions"]]
    diffs = page.find_all("ins")
    assert any("different" in d.all_text() for d in diffs) and page.find_all("del")


def test_trends_chart_drawn_from_three_runs(runs: dict[str, Any], server: str, tmp_path: Path) -> None:
    page = dump_dom(server + "trends", tmp_path / "profile")
    chart = next(n for n in page.walk() if n.attrs.get("id") == "chart-relevancy")
    lines = chart.find_all("polyline")
    assert sorted(line.attrs["data-branch"] for line in lines) == ["main", "topic"]
    points = {line.attrs["data-branch"]: line.attrs["points"].split() for line in lines}
    assert (len(points["main"]), len(points["topic"])) == (2, 1)
    assert len(chart.find_all("circle")) == 3
    (threshold,) = [n for n in chart.walk() if "threshold" in n.classes()]
    y_threshold = float(threshold.attrs["y1"])
    ys = [float(p.split(",")[1]) for p in points["main"]]
    assert ys[0] < y_threshold  # the first main run (all 0.9) is drawn above the 0.7 line (SVG y grows down)
    pass_chart = next(n for n in page.walk() if n.attrs.get("id") == "chart-pass_rate")
    assert len(pass_chart.find_all("circle")) == 3


def test_hostile_answer_is_shown_as_text_and_runs_no_script(runs: dict[str, Any], server: str, tmp_path: Path) -> None:
    url = server + "case?" + urlencode({"run": runs["ids"][1], "id": HOSTILE_ID})
    with urllib.request.urlopen(url, timeout=60) as response:
        csp = response.headers["Content-Security-Policy"]
        raw = response.read().decode()
    assert "default-src 'none'" in csp and "script-src" not in csp
    assert "<script>" not in raw and "&lt;script&gt;" in raw
    page = dump_dom(url, tmp_path / "profile")
    (answer,) = page.find_all("pre", id="answer-0")
    assert answer.all_text() == HOSTILE_OUTPUT  # every character shown, as text
    assert [n.all_text() for n in page.walk() if "reasoning" in n.classes()] == [HOSTILE_REASONING]
    for forbidden in ("script", "img", "b", "i", "iframe"):
        assert not page.find_all(forbidden), forbidden
    (body,) = page.find_all("body")
    assert "data-pwned" not in body.attrs  # no hostile script ran


def test_filters_pages_and_unknown_run(runs: dict[str, Any], server: str) -> None:
    with urllib.request.urlopen(server + "?" + urlencode({"branch": "main"}), timeout=60) as response:
        page = parse(response.read().decode())
    assert [tr.attrs["data-run"] for tr in page.find_all("tr") if "run" in tr.classes()] == [runs["ids"][2], runs["ids"][0]]
    with urllib.request.urlopen(server + "?sort=pass_rate&order=asc", timeout=60) as response:
        page = parse(response.read().decode())
    assert next(tr.attrs["data-run"] for tr in page.find_all("tr") if "run" in tr.classes()) == runs["ids"][1]
    with urllib.request.urlopen(server + "run?" + urlencode({"id": runs["ids"][1], "status": "passed"}),
                                timeout=60) as response:
        listed = parse(response.read().decode())
    (table,) = listed.find_all("table", id="case-list")
    assert len(table.find_all("tr")) == 1 + 4  # header + the four cases that passed
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(server + "run?id=" + quote("no-such-run"), timeout=60)
    assert missing.value.code == 404
    with pytest.raises(urllib.error.HTTPError) as post:
        urllib.request.urlopen(urllib.request.Request(server, data=b"x", method="POST"), timeout=60)
    assert post.value.code == 405


def test_flaky_cases_from_the_history(runs: dict[str, Any], server: str) -> None:
    with urllib.request.urlopen(server + "flaky", timeout=60) as response:
        page = parse(response.read().decode())
    (table,) = page.find_all("table", id="flaky")
    listed = [tr.find_all("a")[0].all_text() for tr in table.find_all("tr")[1:]]
    # case-1 failed in one run of three, case-4 in two: both minority shares 1/3, ties by id; the hostile case
    # ran once (never passed) and the rest always passed
    assert listed == ["case-1", "case-4"]
    shares = [tr.find_all("td")[5].all_text() for tr in table.find_all("tr")[1:]]
    assert shares == ["33.3%", "33.3%"]


# ── read-only, inputs, export ───────────────────────────────────────────────────────────────────


def test_the_database_is_never_written(runs: dict[str, Any], server: str) -> None:
    before = runs["db"].read_bytes()
    for path in ("", "trends", "flaky", "run?" + urlencode({"id": runs["ids"][0], "status": "all"})):
        with urllib.request.urlopen(server + path, timeout=60) as response:
            assert response.status == 200
    assert runs["db"].read_bytes() == before
    assert not Path(str(runs["db"]) + "-journal").exists()


def test_static_export_opens_from_disk_with_no_network(runs: dict[str, Any], tmp_path: Path) -> None:
    site = tmp_path / "site"
    code, _out, err = run_cli("view", runs["db"], "--export", site)
    assert code == 0, err
    html = {p.name: p.read_text(encoding="utf-8") for p in site.glob("*.html")}
    assert {"index.html", "trends.html", "flaky.html"} <= set(html)
    for name, text in html.items():
        assert "<script" not in text and "http://" not in text.replace("http://www.w3.org/2000/svg", ""), name
        assert "https://" not in text, name
        for href in re.findall(r'href="([^"]+)"', text):
            assert href in html, (name, href)  # every link is a page of the export
    index = dump_dom((site / "index.html").as_uri(), tmp_path / "profile")
    compare_link = next(a.attrs["href"] for a in index.find_all("a") if a.all_text() == "vs previous")
    compare = dump_dom((site / compare_link).as_uri(), tmp_path / "profile")
    assert compare.find_all("div", id="decision")
    hostile = next(name for name, text in html.items() if name.startswith("case-") and "data-pwned" in text)
    page = dump_dom((site / hostile).as_uri(), tmp_path / "profile")
    assert page.find_all("pre", id="answer-0")[0].all_text() == HOSTILE_OUTPUT
    assert "data-pwned" not in page.find_all("body")[0].attrs


def test_results_json_artifact_zip_and_folder_inputs(runs: dict[str, Any], tmp_path: Path) -> None:
    artifact = tmp_path / "evalgate-results.zip"
    with zipfile.ZipFile(artifact, "w") as archive:
        archive.write(runs["root"] / "two" / "results.json", "results.json")
    folder = tmp_path / "downloads"
    (folder / "a").mkdir(parents=True)
    shutil.copy(runs["root"] / "one" / "results.json", folder / "a" / "results.json")
    shutil.copy(artifact, folder / "b.zip")
    site = tmp_path / "site"
    code, _out, err = run_cli("view", folder, runs["root"] / "three" / "results.json", "--export", site)
    assert code == 0, err
    index = parse((site / "index.html").read_text(encoding="utf-8"))
    assert sorted(tr.attrs["data-run"] for tr in index.find_all("tr") if "run" in tr.classes()) == sorted(runs["ids"])


def test_user_errors_are_one_line(tmp_path: Path) -> None:
    code, _, err = run_cli("view", tmp_path / "missing.db", "--export", tmp_path / "site")
    assert code == 2 and err.count("\n") == 1 and "missing.db" in err
    hostile = tmp_path / "results.db"
    with contextlib.closing(sqlite3.connect(hostile)) as db:
        db.executescript("CREATE TABLE eg_runs (run_id, timestamp, status, document);"
                         "CREATE TABLE eg_cases (run_id, case_id, repeat, idx, status, passed, risk_level, source, record);"
                         "CREATE TRIGGER t AFTER INSERT ON eg_runs BEGIN DELETE FROM eg_cases; END;")
    code, _, err = run_cli("view", hostile, "--export", tmp_path / "site")
    assert code == 2 and "trigger" in err and err.count("\n") == 1


def test_missing_extra_says_how_to_install_it(runs: dict[str, Any], tmp_path: Path) -> None:
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "starlette.py").write_text("raise ImportError('blocked for the test')\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(blocker), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "evalgate", "view", str(runs["db"]), "--no-open"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "evalgate-action[view]" in done.stderr


def test_the_action_uploads_the_static_site_and_the_summary_points_to_it(runs: dict[str, Any], tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from evalgate.github import publish

    out = tmp_path / "evalgate-results"
    out.mkdir()
    shutil.copy(runs["root"] / "two" / "results.json", out / "results.json")
    shutil.copy(runs["db"], out / "results.db")
    uploaded: list[list[Path]] = []

    def fake_upload(name: str, files: list[Path], **_: Any) -> publish.UploadResult:
        uploaded.append(files)
        return publish.UploadResult(uploaded=True, url="https://github.example/a/1")

    monkeypatch.setattr(publish, "upload_artifact", fake_upload)
    notes: list[str] = []
    publish._upload(out / "results.json", out / "results.db", publish.PublishOptions(), {}, notes.append, notes.append)
    assert [p.name for p in uploaded[0]] == ["results.json", "results.db", "evalgate-site"]
    assert not [n for n in notes if "not exported" in n]
    site = out / "evalgate-site"
    assert (site / "index.html").is_file() and any(site.glob("case-*.html"))
    line = publish.site_summary_line("https://github.example/a/1")
    assert "[the artifact](https://github.example/a/1)" in line and "evalgate-site/index.html" in line
    (out / "results.db").write_bytes(b"not sqlite")  # an unreadable database: a note, the upload goes on
    shutil.rmtree(site)
    publish._upload(out / "results.json", out / "results.db", publish.PublishOptions(), {}, notes.append, notes.append)
    assert [p.name for p in uploaded[1]] == ["results.json", "results.db"]
    assert len([n for n in notes if "results browser was not exported" in n]) == 1


def test_a_case_shows_conversation_turns_and_the_span_tree(tmp_path: Path) -> None:
    """A conversation case with a traced answer (records as results.json writes them), from a results.json."""
    record = {
        "id": "conv-1", "index": 0, "suite": "s", "risk_level": "high", "source": "c.yaml:3", "status": "failed",
        "passed": False, "error": None, "reasons": ["turn 2 failed"], "input": "Who should I start?", "expected": {},
        "output": "Start Reid.", "repeat": 0,
        "answer": {"trace": {"spans": 3, "tool_calls": 1, "llm_call_count": 1, "tokens": {"total": 42},
                             "source": "otlp", "tree": [
                                 {"name": "agent run", "kind": "agent", "ms": 12.5, "depth": 0},
                                 {"name": "get_player_status <script>x()</script>", "kind": "tool", "ms": 3.0,
                                  "depth": 1, "failed": True},
                                 {"name": "chat gpt", "kind": "llm", "ms": 7.0, "depth": 1}]}},
        "metrics": {"rules": {"value": 0.0, "threshold": {"min": 1.0}, "passed": False, "status": "failed",
                              "reason": "misses threshold", "details": {"reason": "contains 'Start Caruso'"}}},
        "conversation": {"failed_turn": 2, "planned_turns": 2, "turns": [
            {"turn": 1, "input": "Who should I start: Caruso or Reid?", "output": "Start Caruso.", "status": "passed",
             "metrics": {}},
            {"turn": 2, "input": "Caruso is now OUT — replan", "output": "Start Caruso anyway.", "status": "failed",
             "metrics": {"rules": {"value": 0.0, "threshold": {"min": 1.0}, "status": "failed",
                                   "details": {"reason": "contains 'Start Caruso'"}}}}]},
    }
    document = {"schema_version": 1, "run_id": "r-conv", "timestamp": "2026-11-28T10:00:00Z", "status": "completed",
                "summary": {"pass_rate": 0.0, "total_test_cases": 1, "total_passed": 0, "total_failed": 1},
                "gate": {"passed": False, "exit_code": 1, "reasons": ["critical"]}, "metrics": {}, "results": [record]}
    source = tmp_path / "results.json"
    source.write_text(json.dumps(document), encoding="utf-8")
    site = tmp_path / "site"
    code, _, err = run_cli("view", source, "--export", site)
    assert code == 0, err
    (case,) = site.glob("case-*.html")
    page = parse(case.read_text(encoding="utf-8"))
    turns = [li.all_text() for li in page.find_all("li") if li.find_all("pre")]
    assert len(turns) == 2 and "Caruso is now OUT" in turns[1] and "Start Caruso anyway." in turns[1]
    (spans,) = [n for n in page.walk() if n.tag == "pre" and "spans" in n.classes()]
    lines = spans.all_text().splitlines()
    assert lines[0].startswith("agent run") and lines[1].startswith("  get_player_status <script>x()</script>")
    assert "✗ failed" in lines[1] and not page.find_all("script")
    assert source.read_text(encoding="utf-8") == json.dumps(document)  # the input is never written


def test_the_browser_is_opened_only_with_a_display(monkeypatch: pytest.MonkeyPatch) -> None:
    import webbrowser

    from evalgate.cli import view

    opened: list[str] = []

    class Browser:
        def open(self, url: str) -> bool:
            opened.append(url)
            return True

    class Timer:
        def __init__(self, delay: float, action: Any) -> None:
            self.action = action

        def start(self) -> None:
            self.action()

    monkeypatch.setattr(webbrowser, "get", lambda: Browser())
    monkeypatch.setattr("threading.Timer", Timer)
    monkeypatch.setattr(view.sys, "platform", "linux")
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    view._open_browser("http://127.0.0.1:1/")
    assert opened == []  # a server: no text browser takes over the terminal
    monkeypatch.setenv("DISPLAY", ":0")
    view._open_browser("http://127.0.0.1:1/")
    assert opened == ["http://127.0.0.1:1/"]


def test_provenance_reads_actions_variables_then_the_checkout(tmp_path: Path) -> None:
    from evalgate.runner.provenance import git_identity

    assert git_identity({"GITHUB_HEAD_REF": "topic", "GITHUB_REF_NAME": "7/merge", "GITHUB_SHA": "a" * 40}) == \
        {"branch": "topic", "commit": "a" * 40}
    assert git_identity({"GITHUB_REF_NAME": "main", "GITHUB_SHA": "b" * 40}) == {"branch": "main", "commit": "b" * 40}
    repo = tmp_path / "repo"
    (repo / ".git" / "refs" / "heads").mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/feature/x\n")
    (repo / ".git" / "packed-refs").write_text(f"# pack-refs\n{'c' * 40} refs/heads/feature/x\n")
    (repo / "sub").mkdir()
    assert git_identity({}, repo / "sub") == {"branch": "feature/x", "commit": "c" * 40}
    (repo / ".git" / "refs" / "heads" / "feature").mkdir()
    (repo / ".git" / "refs" / "heads" / "feature" / "x").write_text("d" * 40 + "\n")  # a loose ref wins
    assert git_identity({}, repo) == {"branch": "feature/x", "commit": "d" * 40}
    (repo / ".git" / "HEAD").write_text("e" * 40 + "\n")  # detached
    assert git_identity({}, repo) == {"commit": "e" * 40}
    common, linked = tmp_path / "main.git", tmp_path / "wt"  # a worktree: .git is a file naming its gitdir
    (common / "worktrees" / "wt").mkdir(parents=True)
    (common / "refs" / "heads").mkdir(parents=True)
    (common / "refs" / "heads" / "wt").write_text("f" * 40 + "\n")
    (common / "worktrees" / "wt" / "HEAD").write_text("ref: refs/heads/wt\n")
    (common / "worktrees" / "wt" / "commondir").write_text("../..\n")
    linked.mkdir()
    (linked / ".git").write_text(f"gitdir: {common / 'worktrees' / 'wt'}\n")
    assert git_identity({}, linked) == {"branch": "wt", "commit": "f" * 40}


def test_an_export_over_its_page_budget_links_the_rest_to_one_page(runs: dict[str, Any], tmp_path: Path) -> None:
    from evalgate.view.export import export_site
    from evalgate.view.sources import open_catalog

    catalog = open_catalog([runs["db"]])
    try:
        assert export_site(catalog, tmp_path / "site", max_pages=6) == 6
    finally:
        catalog.close()
    html = {p.name: p.read_text(encoding="utf-8") for p in (tmp_path / "site").glob("*.html")}
    assert len(html) == 7 and "not-exported.html" in html  # six pages and the one every further link points to
    for name, text in html.items():
        for href in re.findall(r'href="([^"]+)"', text):
            assert href in html, (name, href)
