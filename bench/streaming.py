"""``python -m bench.streaming``: peak RSS of every command that reads a results file, at ``--cases`` cases
(default 1,000,000), each in a fresh process (issue #22: memory flat in the dataset size).

A recorded run of that size takes ~10 min on the 2-core machine, so the results files are **generated
directly**: one real ``evalgate run`` of ``--template-cases`` (200) recorded cases with ``--compat
seed000,seed004`` gives a results.json whose records (every fifth failing, seed 004 metrics on each) are
repeated with fresh ids and indices (``s0000000`` …) and whose head (summary, metrics, metadata) is kept
as it is. The same records are also written as ``--shards`` (4) shard files (``metadata.config.shard``
``i/4``, each case in the shard its id hashes to, ``select.shard_of``), as ``evalgate run --shard i/4``
would have written them. Measured:

* **merge**: ``evalgate merge`` of the shard files (→ results.json + results.db);
* **merge_json**: ``evalgate merge --format json`` (results.json printed to stdout);
* **compat**: ``runner.finish.write_compat_documents`` (what ``evalgate run --compat seed000,seed004``
  calls once results.json is written), on the big results.json;
* **langfuse**: ``export.langfuse.export_results`` (what ``--langfuse`` calls) against a loopback
  stand-in of Langfuse's ingestion API (``tests/servers/langfuse_server.py``, counting what it accepts);
* **publish**: publish mode's work on an artifact zip holding the big results.json (``publish()`` below:
  the zip in memory as downloaded, ``relay.extract`` with its schema check, the digest and the comment);
* **compare**: ``evalgate compare`` of the big results.json with a copy of itself;
* **baseline**: a run's comparison with a baseline file of that size (``baseline_run``: the file streamed,
  the run's records streamed into ``runner.finish.attach_comparison``);
* **report_markdown**: ``evalgate report`` (the already-streamed reader, for reference).

    python -m bench.streaming                       # 1,000,000 cases, ~15 min
    python -m bench.streaming --cases 100000        # ~2 min
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from bench.cases import recorded_dataset
from bench.peak import REPO, measured_process

DEFAULT_OUTPUT = REPO / "bench" / "results" / "streaming.json"
PEAK_OF = ("import os, sys, json\ntry:\n{body}\nfinally:\n"
           "    peak = [line for line in open('/proc/self/status') if line.startswith('VmHWM')]\n"
           "    sys.stderr.write(peak[0] if peak else 'VmHWM: 0 kB\\n')\n")
"""A Python snippet reporting its own peak RSS (``VmHWM``) after ``body`` (also when it raises)."""


def template_run(folder: Path, cases: int) -> Path:
    """A real recorded run of ``cases`` cases with the seed 000 and 004 documents: its results.json."""
    folder.mkdir(parents=True, exist_ok=True)
    dataset = folder / "cases.jsonl"
    recorded_dataset(dataset, cases)
    out = folder / "out"
    subprocess.run([sys.executable, "-m", "evalgate", "run", "--dataset", str(dataset), "-o", str(out),
                    "--progress", "none", "--compat", "seed000,seed004"], cwd=folder, check=False,
                   stdout=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(REPO)})
    return out / "results.json"


def synthesize(template: Path, folder: Path, cases: int, shards: int) -> dict[str, Any]:
    """``folder/results.json`` of ``cases`` records cycled from ``template``'s, and ``shards`` shard files
    ``folder/shard-i.json`` holding the same records split by ``shard_of`` (module docstring)."""
    from evalgate.dataset.select import shard_of
    from evalgate.store.results_json import StreamedDocument

    stream = StreamedDocument(template)
    records = [json.dumps(r, ensure_ascii=False) for r in stream.records()]
    head = dict(stream.head)
    # one run's record → any id: the id and index are the first two keys of every record
    bodies = [text.split('"index": ', 1)[1].split(",", 1)[1] for text in records]

    def opened(path: Path, document: dict[str, Any]) -> Any:
        handle = path.open("w", encoding="utf-8")
        text = json.dumps(document, indent=2, ensure_ascii=False)
        handle.write(text[:-1].rstrip() + ',\n  "results": [')
        return handle

    whole = opened(folder / "results.json", head)
    parts = []
    for i in range(1, shards + 1):
        metadata = {**head["metadata"], "config": {**head["metadata"]["config"], "shard": f"{i}/{shards}"}}
        parts.append([opened(folder / f"shard-{i}.json", {**head, "metadata": metadata}), "\n    "])
    lead = "\n    "
    for i in range(cases):
        case_id = f"s{i:07d}"
        text = f'{{"id": "{case_id}", "index": {i},{bodies[i % len(bodies)]}'
        whole.write(lead + text)
        lead = ",\n    "
        part = parts[shard_of(case_id, shards) - 1]
        part[0].write(part[1] + text)
        part[1] = ",\n    "
    for handle in [whole, *(p[0] for p in parts)]:
        handle.write("\n  ]\n}\n")
        handle.close()
    return {"results_json_bytes": (folder / "results.json").stat().st_size,
            "shard_bytes": [(folder / f"shard-{i}.json").stat().st_size for i in range(1, shards + 1)]}


def python_peak(body: str, cwd: Path) -> dict[str, Any]:
    """``body`` run by a fresh interpreter that reports its own peak RSS, as ``peak.measured_process``."""
    started = time.monotonic()
    process = subprocess.Popen([sys.executable, "-c", PEAK_OF.format(body=textwrap.indent(body, "    "))], cwd=cwd,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               env={**os.environ, "PYTHONPATH": str(REPO)})
    assert process.stderr is not None
    err = process.stderr.read().decode()
    _, status, usage = os.wait4(process.pid, 0)
    lines = err.strip().splitlines()
    peak = next((line for line in lines if line.startswith("VmHWM:")), "VmHWM: 0 kB")
    said = [line for line in lines if not line.startswith("VmHWM:")]
    return {"exit": os.waitstatus_to_exitcode(status), "wall_s": round(time.monotonic() - started, 3),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
            "peak_rss_mb": round(int(peak.split()[1]) / 1024, 1), "message": said[-1][:300] if said else ""}


def langfuse(folder: Path, results: Path) -> dict[str, Any]:
    """``export_results`` against a loopback ingestion endpoint that counts the events it accepts."""
    from tests.servers.langfuse_server import LangfuseServer

    class Counted(list):  # type: ignore[type-arg]
        """Accepted events counted, not kept (a million cases send ~3 million events)."""

        count = 0

        def append(self, _event: Any) -> None:
            self.count += 1

    with LangfuseServer("pk-lf-bench", "sk-lf-bench", record_limit=1) as server:
        server.accepted = Counted()
        body = ("from evalgate.config.sections import PublishSettings\nfrom evalgate.config.settings import Settings\n"
                "from evalgate.export.langfuse import export_results\n"
                f"s = PublishSettings.of(Settings(langfuse=True, langfuse_host={server.base_url!r}, "
                "langfuse_public_key='pk-lf-bench', langfuse_secret_key='sk-lf-bench'))\n"
                f"sys.stderr.write(export_results({str(results)!r}, s) + '\\n')")
        figures = python_peak(body, folder)
        figures["events_received"] = server.accepted.count
    return figures


def publish(folder: Path, results: Path) -> dict[str, Any]:
    """Publish mode's work on an artifact holding ``results``: the zip's bytes in memory (as downloaded,
    ``baseline.download_artifact``), ``relay.extract`` (members unzipped, results.json checked against the
    schema), the digest and the PR comment's Markdown (``github.publish``'s renderer). The GitHub API
    calls around it (run, artifact list, comment) are left out: they carry no results."""
    import zipfile

    archive = folder / "artifact.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as out:
        out.write(results, "results.json")
    body = ("from pathlib import Path\nfrom evalgate.github.relay import extract\n"
            "from evalgate.report.digest import load_digest\nfrom evalgate.report.markdown import render_summary\n"
            f"data = Path({str(archive)!r}).read_bytes()\nwarnings = []\n"
            f"found = extract(data, Path({str(folder / 'published')!r}), warnings)\n"
            "text = render_summary(load_digest(found['results.json']), run_url=None, artifact_url=None)\n"
            "sys.stderr.write(f'{len(warnings)} warnings, comment {len(text)} chars\\n')")
    figures = python_peak(body, folder)
    figures["zip_bytes"] = archive.stat().st_size
    return figures


def baseline_run(work: Path, results: Path) -> dict[str, Any]:
    """A run's baseline comparison at this size, as ``evalgate run --baseline results.json`` does it once its
    cases are recorded: ``resolve_baseline`` (the file streamed), the records slimmed as they are read
    (``runner.baseline.load_baseline``), then ``runner.finish.attach_comparison`` with the run's own records streamed as JSON bytes
    (here the same results.json's, as from the run's spool)."""
    body = ("from pathlib import Path\nfrom evalgate.config.settings import Settings\n"
            "from evalgate.runner.finish import compared_record, attach_comparison\n"
            "from evalgate.store.reader import resolve_baseline\n"
            "from evalgate.store.results_json import StreamedDocument\n"
            f"path = {str(results)!r}\nsettings = Settings(baseline=path)\n"
            "baseline = resolve_baseline(path)\n"
            "baseline.document['results'] = baseline.document['results'].map(compared_record)\n"
            "stream = StreamedDocument(Path(path))\ndocument = dict(stream.read_head())\n"
            "records = (json.dumps(r).encode() for r in StreamedDocument(Path(path)).records())\n"
            "reasons = attach_comparison(document, baseline, records, settings)\n"
            "c = document['comparison']\n"
            "sys.stderr.write(f\"n_paired {c['pass_rate']['n_paired']}, verdict {c['verdict']}, "
            "{len(reasons)} reasons, warning {document['baseline']['warning']}\\n\")")
    return python_peak(body, work)


def measure(work: Path, cases: int, template_cases: int, shards: int, skip: set[str]) -> dict[str, Any]:
    figures: dict[str, Any] = {"cases": cases, "template_cases": template_cases, "shards": shards}
    template = template_run(work / "template", template_cases)
    started = time.monotonic()
    figures.update(synthesize(template, work, cases, shards))
    figures["generate_s"] = round(time.monotonic() - started, 1)
    results = work / "results.json"
    shard_files = [str(work / f"shard-{i}.json") for i in range(1, shards + 1)]
    if "merge" not in skip:
        figures["merge"] = measured_process(["merge", *shard_files, "-o", str(work / "merged")], work)
        figures["merge"]["results_json_bytes"] = (work / "merged" / "results.json").stat().st_size
    if "merge_json" not in skip:
        figures["merge_json"] = measured_process(["merge", *shard_files, "-o", str(work / "merged-json"),
                                                  "--format", "json"], work)
    if "compat" not in skip:
        body = ("from pathlib import Path\nfrom evalgate.config.sections import PublishSettings\n"
                "from evalgate.config.settings import Settings\nfrom evalgate.runner.finish import write_compat_documents\n"
                "written = write_compat_documents(PublishSettings.of(Settings(compat=['seed000', 'seed004'])), "
                f"Path({str(results)!r}))\n"
                "sys.stderr.write(json.dumps({k: os.path.getsize(v) for k, v in written.items()}) + '\\n')")
        figures["compat"] = python_peak(body, work)
    if "langfuse" not in skip:
        figures["langfuse"] = langfuse(work, results)
    if "compare" not in skip:
        copy = work / "head.json"
        os.link(results, copy)
        figures["compare"] = measured_process(["compare", str(results), str(copy), "--format", "json"], work)
    if "baseline" not in skip:
        figures["baseline"] = baseline_run(work, results)
    if "publish" not in skip:
        figures["publish"] = publish(work, results)
    if "report" not in skip:
        figures["report_markdown"] = measured_process(["report", str(results), "--format", "markdown", "-o",
                                                       str(work / "report.md")], work)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.streaming", description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1_000_000)
    parser.add_argument("--template-cases", type=int, default=200)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--skip", default="", help="comma-separated: merge,merge_json,compat,langfuse,publish,compare,baseline,report")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    figures: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                               "load_average": os.getloadavg(), "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="evalgate-streaming-") as name:
        figures.update(measure(Path(name), args.cases, args.template_cases, args.shards,
                               {s for s in args.skip.split(",") if s}))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
