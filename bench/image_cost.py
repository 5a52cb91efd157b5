"""Per-job cost of the container action: the published image versus building the Dockerfile in every job.

    python -m bench.image_cost [--repeats 3] [--no-build]

Needs a Docker engine (``../shared/tools/docker-local/setup.sh`` here). Measured, per repeat:

* **build** (what ``image: Dockerfile`` costs every job until 0.1.0): ``docker build --no-cache`` of the
  repository on the base image already present, so it is the image's own layers: the dependency download
  and install, the tiktoken cache, the code;
* **pull** (what ``image: docker://ghcr.io/evalgate/evalgate:<version>`` costs): the image's own layers
  (not the base, as for the build) exported with ``docker save`` and compressed with gzip as a registry
  stores them; their size, and the time ``docker load`` takes to decompress and register them after the
  image is removed. No registry is reachable here, so the download itself is not measured: it is the
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
    """The image saved with only the layers its base does not have, gzip-compressed; returns (path, bytes
    uncompressed, bytes compressed)."""
    raw = directory / "image.tar"
    subprocess.run(["docker", "save", "-o", str(raw), image], check=True)
    base_layers = set(layer_ids(BASE))
    own = [layer for layer in layer_ids(image) if layer not in base_layers]
    size = raw.stat().st_size
    compressed = directory / "image.tar.gz"
    subprocess.run(f"gzip -1 -c {raw} > {compressed}", shell=True, check=True)
    # the layers the base already has are in the tarball too; count what a pull would fetch: own layers
    with tarfile.open(raw) as archive:
        blobs = {m.name: m.size for m in archive.getmembers() if m.isfile()}
    own_bytes = sum(size for name, size in blobs.items() if any(layer.split(":")[1] in name for layer in own))
    ratio = compressed.stat().st_size / size
    return compressed, own_bytes, int(own_bytes * ratio)


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
    parser.add_argument("--image", default=None, help="default: the image action.yml names (built beforehand)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from tools.release import action_image

    image = args.image or ":".join(action_image())
    result = measure(image, args.repeats, build=not args.no_build)
    out = ROOT / "bench" / "results" / "image-cost.json"
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    m, d, s = result["medians"], result["download_estimate"], result["sizes"]
    print(f"build every job: {m.get('build_s', float('nan')):.1f} s | published image: load {m['load_s']:.1f} s "
          f"+ download {s['own_layers_gzip_bytes'] / 1e6:.0f} MB ({d['download_s_at_100MBps']:.1f} s at 100 MB/s, "
          f"{d['download_s_at_25MBps']:.1f} s at 25 MB/s) | run of 71 cases {m['run_s']:.1f} s")
    print(f"wrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
