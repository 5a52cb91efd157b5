"""Per-job cost of the container action: the published image versus building the Dockerfile in every job.

    python -m bench.image_cost [--repeats 3] [--no-build]

Needs a Docker engine (``../shared/tools/docker-local/setup.sh`` here). Measured, per repeat:

* **build** (what ``image: Dockerfile`` costs every job until 0.1.0): ``docker build --no-cache`` of the
  repository on the base image already present, so it is the image's own layers: the dependency download
  and install, the tiktoken cache, the code;
* **pull** (what ``image: docker://ghcr.io/evalgate/evalgate:<version>`` costs): the image's own layers
  (not the base, as for the build), their gzip-compressed size as a registry stores them, and the time
  ``docker load`` takes to decompress and register them after the image is removed. No registry is reachable here, so the download itself is not measured: it is the
  compressed size divided by the runner's bandwidth (reported at 100 MB/s and 25 MB/s);
* **run**: the action step on the 71-case bundled demo suite, ``docker run`` as the runner starts it.

Results: ``bench/results/image-cost.json`` and a table on stdout (medians of the repeats).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BASE = "python:3.12-slim"
BUILD_TAG = "evalgate:bench-build"
BANDWIDTHS_MB_S = (100.0, 25.0)


def timed(command: list[str], **kwargs: Any) -> tuple[float, subprocess.CompletedProcess[bytes]]:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, check=False, **kwargs)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command[:4])} … failed ({done.returncode}):\n"
                         + (done.stdout + done.stderr).decode(errors="replace")[-3000:])
    return seconds, done


def layer_ids(image: str) -> list[str]:
    out = subprocess.run(["docker", "image", "inspect", "--format", "{{json .RootFS.Layers}}", image],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def own_layers_tarball(image: str, directory: Path) -> tuple[Path, int, int]:
    """The image saved (``docker save``), gzip-compressed for ``docker load``; returns (path, bytes of the
    layers the base does not have, the same gzip-compressed: what a pull of the image would download on
    a runner that has the base)."""
    raw = directory / "image.tar"
    subprocess.run(["docker", "save", "-o", str(raw), image], check=True)
    base_count = len(layer_ids(BASE))
    own_raw = own_gzip = 0
    with tarfile.open(raw) as archive:
        manifest = json.loads(archive.extractfile("manifest.json").read())  # type: ignore[union-attr]
        for name in manifest[0]["Layers"][base_count:]:
            member = archive.getmember(name)
            own_raw += member.size
            packer = zlib.compressobj(1, zlib.DEFLATED, 31)  # gzip -1
            source = archive.extractfile(member)
            assert source is not None
            while chunk := source.read(1 << 20):
                own_gzip += len(packer.compress(chunk))
            own_gzip += len(packer.flush())
    compressed = directory / "image.tar.gz"
    subprocess.run(f"gzip -1 -c {raw} > {compressed}", shell=True, check=True)
    return compressed, own_raw, own_gzip


def measure(image: str, repeats: int, build: bool) -> dict[str, Any]:
    rows: dict[str, list[float]] = {"build_s": [], "load_s": [], "run_s": []}
    sizes: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="evalgate-image-cost-") as folder:
        work = Path(folder)
        tarball, own_raw, own_compressed = own_layers_tarball(image, work)
        sizes = {"own_layers_bytes": own_raw, "own_layers_gzip_bytes": own_compressed}
        for repeat in range(repeats):
            print(f"repeat {repeat + 1}/{repeats}", file=sys.stderr)
            if build:
                seconds, _ = timed(["docker", "build", "--no-cache", "-q", "--build-arg", f"PYTHON_IMAGE={BASE}",
                                    "-t", BUILD_TAG, str(ROOT)], timeout=1800)
                rows["build_s"].append(seconds)
                subprocess.run(["docker", "rmi", "-f", BUILD_TAG], capture_output=True, check=False)
            tags = [t for t in json.loads(subprocess.run(
                ["docker", "image", "inspect", "--format", "{{json .RepoTags}}", image],
                capture_output=True, text=True, check=True).stdout)]
            subprocess.run(["docker", "rmi", *tags], capture_output=True, check=True)
            seconds, _ = timed(["bash", "-c", f"gunzip -c {tarball} | docker load -q"], timeout=900)
            rows["load_s"].append(seconds)
            for tag in tags:
                subprocess.run(["docker", "tag", image, tag], check=True)
            workspace = work / f"ws{repeat}"
            workspace.mkdir()
            seconds, done = timed(["docker", "run", "--rm", "-v", f"{workspace}:/github/workspace",
                                   "--workdir", "/github/workspace", image], timeout=600)
            assert b"Cases: 71" in done.stdout, done.stdout[-2000:]
            rows["run_s"].append(seconds)
    medians = {key: round(statistics.median(values), 2) for key, values in rows.items() if values}
    download = {f"download_s_at_{int(bw)}MBps": round(sizes["own_layers_gzip_bytes"] / (bw * 1e6), 2)
                for bw in BANDWIDTHS_MB_S}
    return {"image": image, "repeats": repeats, "medians": medians, "samples": rows, "sizes": sizes,
            "download_estimate": download, "cpus": os.cpu_count(), "when": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                                          time.gmtime())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.image_cost", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-build", action="store_true", help="skip the (slow) from-scratch builds")
    parser.add_argument("--image", default=None, help="default: the published image of this version (built beforehand)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from evalgate import __version__
    from tools.release import IMAGE_REPOSITORY

    image = args.image or f"{IMAGE_REPOSITORY}:{__version__}"
    result = measure(image, args.repeats, build=not args.no_build)
    out = ROOT / "bench" / "results" / "image-cost.json"
    if args.no_build and out.is_file():  # keep the previous run's (slow) build samples
        previous = json.loads(out.read_text(encoding="utf-8"))
        if previous.get("samples", {}).get("build_s"):
            result["samples"]["build_s"] = previous["samples"]["build_s"]
            result["medians"]["build_s"] = previous["medians"]["build_s"]
            result["build_measured_at"] = previous.get("build_measured_at") or previous.get("when")
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    m, d, s = result["medians"], result["download_estimate"], result["sizes"]
    print(f"build every job: {m.get('build_s', float('nan')):.1f} s | published image: load {m['load_s']:.1f} s "
          f"+ download {s['own_layers_gzip_bytes'] / 1e6:.0f} MB ({d['download_s_at_100MBps']:.1f} s at 100 MB/s, "
          f"{d['download_s_at_25MBps']:.1f} s at 25 MB/s) | run of 71 cases {m['run_s']:.1f} s")
    print(f"wrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
