"""Every command that reads a results.json reads it streamed (issue #22: memory flat in the number of cases):
``evalgate merge`` (its inputs and ``--format json``), the ``--compat`` documents, the Langfuse export and
publish mode's check of the artifact.

How the streaming is proved: each is run under ``tracemalloc`` on a results file of N case records and on one
of 4·N (the same records cycled, ``bench.streaming.synthesize``), with the reader's and the spool's chunk
sizes made small (16 KiB). A whole-file reader's peak grows with the file (text plus parsed records: ≥ 4×);
a streamed one stays where it was. The outputs equal the in-memory functions' (``compat_document``,
``build_events``, ``validate.prune``) byte for byte. bench/streaming.py measures the same commands at 1,000,000 cases.
"""

from __future__ import annotations

import io
import itertools
import json
import shutil
import tracemalloc
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench.streaming import synthesize
from evalgate.config.sections import PublishSettings
from evalgate.config.settings import Settings
from evalgate.export import langfuse
from evalgate.github.relay import checked_results, extract
from evalgate.github.validate import prune
from evalgate.report.documents import build_document as compat_document
from evalgate.report.documents import dump_with_list
from evalgate.report.documents import write_document as write_compat_document
from evalgate.runner.finish import write_compat_documents
from evalgate.runner.merge import merge_runs
from evalgate.store import results_json, sqlite
from evalgate.store.results_json import StreamedDocument
from tests.servers.langfuse_server import LangfuseServer
from tests.support.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
DATASETS = ("golden-dataset", "failing", "wikipedia-agent")
SMALL = 100
"""Case records in the small file (at least the template run's: every distinct record is in both)."""
CHUNK = 16 * 1024


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A real run with repeats (``run``) and, from the records of one without, results files of SMALL and
    4·SMALL cases, each also as 3 shard files. (With repeats the confidence intervals' bootstrap grows with the
    number of cases up to its fixed work limit: flat at scale, not at 600 cases.)"""
    root = tmp_path_factory.mktemp("streaming")
    datasets = [arg for name in DATASETS for arg in ("-d", str(ROOT / "datasets" / name))]
    for name, extra in (("run", ("--repeat", "2")), ("template", ())):
        code, _, err = run_cli("run", *datasets, "-o", root / name, "--progress", "none", *extra)
        assert code in (0, 1), err
    template = root / "template" / "results.json"
    assert sum(1 for _ in StreamedDocument(template).records()) <= SMALL
    for name, cases in (("tiny", 10), ("small", SMALL), ("big", 4 * SMALL)):
        (root / name).mkdir()
        synthesize(template, root / name, cases, 3)
    return {"run": root / "run" / "results.json", "tiny": root / "tiny", "small": root / "small", "big": root / "big"}


def peak(action: Callable[[Path], Any], folder: Path) -> int:
    """Peak bytes traced while ``action(folder)`` runs."""
    tracemalloc.start()
    try:
        action(folder)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def assert_flat(action: Callable[[Path], Any], files: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(results_json, "READ_CHUNK", CHUNK)
    monkeypatch.setattr(results_json, "COPY_CHUNK", CHUNK)
    small, big = files["small"], files["big"]
    assert (big / "results.json").stat().st_size > 3.5 * (small / "results.json").stat().st_size
    action(files["tiny"])  # imports, caches and compiled templates are not the file's
    low, high = peak(action, small), peak(action, big)
    assert high < 1.3 * low + 256 * 1024, f"peak grew from {low:,} to {high:,} bytes with 4× the cases"


def test_merge_reads_its_inputs_streamed(files: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite, "COMMIT_EVERY_CASES", 20)  # the SQLite writer's batch (500 cases) made small too
    fresh = itertools.count()

    def merge(folder: Path) -> None:
        merge_runs([folder / f"shard-{i}.json" for i in (1, 2, 3)], output_dir=folder / f"merged{next(fresh)}")

    assert_flat(merge, files, monkeypatch)
    merged = json.loads((files["big"] / "merged2" / "results.json").read_text())
    assert merged["summary"]["total_test_cases"] == 4 * SMALL  # ids are distinct: each synthetic case is one case


def test_merge_format_json_prints_the_file_streamed(files: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    printed: list[str] = []

    def merge_json(folder: Path) -> None:
        code, out, err = run_cli("merge", *(folder / f"shard-{i}.json" for i in (1, 2, 3)), "-o", folder / "mj",
                                 "--format", "json")
        assert code in (0, 1), err
        printed.append(out)

    monkeypatch.setattr(results_json, "READ_CHUNK", CHUNK)
    merge_json(files["small"])
    assert printed[-1] == (files["small"] / "mj" / "results.json").read_text()


def test_a_results_list_before_the_other_fields_is_read_whole_first(files: dict[str, Path], tmp_path: Path) -> None:
    """``read_head`` gives every field before the first record is used, wherever ``results`` stands."""
    shards = []
    for i in (1, 2, 3):
        document = json.loads((files["small"] / f"shard-{i}.json").read_text())
        reordered = {"results": document.pop("results"), **document}
        shards.append(tmp_path / f"shard-{i}.json")
        shards[-1].write_text(json.dumps(reordered))
    outcome = merge_runs(shards, output_dir=tmp_path / "out")
    expected = merge_runs([files["small"] / f"shard-{i}.json" for i in (1, 2, 3)], output_dir=tmp_path / "plain")
    assert outcome.document["summary"] == expected.document["summary"]
    assert outcome.document["gate"] == expected.document["gate"]


def test_compat_documents_are_written_streamed(files: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    def compat(folder: Path) -> None:
        write_compat_documents(PublishSettings.of(Settings(compat=["seed000", "seed001", "seed004"])),
                               folder / "results.json")

    assert_flat(compat, files, monkeypatch)
    questions = [json.loads((files[size] / "evaluation.json").read_text())["num_questions"] for size in ("small", "big")]
    assert questions[1] == 4 * questions[0] > 0


@pytest.mark.parametrize("seed", ["seed000", "seed001", "seed004"])
@pytest.mark.parametrize("responses", [True, False])
def test_compat_documents_streamed_equal_the_in_memory_ones(files: dict[str, Path], seed: str,
                                                            responses: bool) -> None:
    """The run has repeats (each case's first kept) and failing and errored cases."""
    path = files["run"]
    document = json.loads(path.read_text())
    assert any(r["repeat"] for r in document["results"]) and any(r["status"] != "passed" for r in document["results"])
    out = io.StringIO()
    write_compat_document(seed, path, out, responses)
    expected = json.dumps(compat_document(seed, document, responses), indent=2, ensure_ascii=False) + "\n"
    assert out.getvalue() == expected


@pytest.mark.parametrize("entries", [[], [{"a": [1, {"b": "é"}]}, {}], [[]]])
def test_a_document_with_its_list_written_entry_by_entry_is_json_dumps(entries: list[Any]) -> None:
    out, cleaned = io.StringIO(), []

    def clean(text: str) -> str:
        cleaned.append(text)
        return text

    dump_with_list({"x": {"y": [1, 2]}, "n": None}, "items", iter(entries), out, clean)
    expected = json.dumps({"x": {"y": [1, 2]}, "n": None, "items": entries}, indent=2, ensure_ascii=False) + "\n"
    assert out.getvalue() == expected
    assert len(cleaned) == max(1, len(entries)) and "".join(cleaned).strip("\n ]}") == expected.strip("\n ]}")


class Counted(list):  # type: ignore[type-arg]
    """The stand-in server's accepted events: counted, not kept."""

    count = 0

    def append(self, _event: Any) -> None:
        self.count += 1


def test_langfuse_export_reads_and_sends_streamed(files: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(langfuse, "BATCH_BYTES", 64 * 1024)
    with LangfuseServer("pk-lf-test", "sk-lf-test", record_limit=1) as server:
        server.accepted = Counted()
        settings = PublishSettings.of(Settings(langfuse=True, langfuse_host=server.base_url,
                                               langfuse_public_key="pk-lf-test", langfuse_secret_key="sk-lf-test"))
        assert_flat(lambda folder: langfuse.export_results(folder / "results.json", settings), files, monkeypatch)
        assert server.accepted.count > 4 * SMALL * 2  # a trace and at least one score per case


def test_langfuse_events_sent_equal_the_in_memory_ones(files: dict[str, Path]) -> None:
    with LangfuseServer("pk-lf-test", "sk-lf-test") as server:
        settings = PublishSettings.of(Settings(langfuse=True, langfuse_host=server.base_url,
                                               langfuse_public_key="pk-lf-test", langfuse_secret_key="sk-lf-test"))
        line = langfuse.export_results(files["run"], settings)
        expected = langfuse.build_events(json.loads(files["run"].read_text()))
        assert server.events() == expected
    traces = sum(e["type"] == "trace-create" for e in expected)
    assert line.startswith(f"exported {traces} traces and {len(expected) - traces} scores ({len(expected)} events)")


def tampered(text: str) -> str:
    """The run's status (in the fields before the records) and one record's status made wrong types."""
    head, _, records = text.partition('"results": [')
    return head.replace('"status": "', '"status": 17, "was": "', 1) + '"results": [' + records.replace(
        '"status": "', '"status": ["x"], "was": "', 1)


def test_publish_mode_checks_the_artifact_streamed(files: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """``relay.checked_results`` (what publish mode runs on the artifact's results.json): both of its passes
    and the rewrite without the wrong values, streamed."""
    for size in ("tiny", "small", "big"):
        (files[size] / "tampered.json").write_text(tampered((files[size] / "results.json").read_text()))

    def check(folder: Path) -> None:
        path = folder / "published.json"
        shutil.copyfile(folder / "tampered.json", path)
        warned = checked_results(path)
        assert [w.split(":")[0] for w in warned] == ["status", "results[0].status"]

    assert_flat(check, files, monkeypatch)


def test_publish_mode_leaves_out_the_same_values_as_the_whole_document_check(files: dict[str, Path],
                                                                           tmp_path: Path) -> None:
    document = json.loads(files["run"].read_text())
    document["summary"]["pass_rate"] = "1.0\n"
    document["results"][1]["metrics"] = "all good"
    document["results"][2] = "not a record"
    document["results"][3]["status"] = 17
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("results.json", json.dumps(document))
    warnings: list[str] = []
    found = extract(buffer.getvalue(), tmp_path, warnings)
    expected = json.loads(json.dumps(document))
    assert warnings == prune(expected) and len(warnings) == 4
    assert found["results.json"].read_text() == json.dumps(expected, ensure_ascii=False)
