"""Screenshots of ``evalgate view`` for the docs: ``python -m tools.view_screenshots RESULTS [OUT_DIR]``.

Photographs with headless Chromium, 1280 px wide, the runs page of the live viewer (``evalgate view RESULTS``: its
filter and compare forms show) and, from the static export (``evalgate view --export``), the newest failing run,
its first flipped case, that run's comparison and the trends page, as
``view-runs.png``, ``view-run.png``, ``view-case.png``, ``view-compare.png``, ``view-trends.png`` in OUT_DIR
(default ``docs/images``). The docs' screenshots come from the three-branch runs ``tests/view/test_browser.py`` records
(five runs, a judge on loopback, one hostile answer).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from evalgate.cli.main import main as cli_main

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
         "--disable-background-networking", "--force-device-scale-factor=1")


def shoot(browser: str, page: Path, target: Path, profile: Path, height: int = 900) -> None:
    subprocess.run([browser, *FLAGS, f"--user-data-dir={profile}", f"--window-size=1280,{height}",
                    f"--screenshot={target}", page.as_uri()], check=True, capture_output=True, timeout=180)


def shoot_live(browser: str, results: Path, target: Path, profile: Path) -> None:
    server = subprocess.Popen([sys.executable, "-m", "evalgate", "view", str(results), "--no-open"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        url = first(r"(http://127\.0\.0\.1:\d+/)", server.stdout.readline())
        subprocess.run([browser, *FLAGS, f"--user-data-dir={profile}", "--window-size=1280,420",
                        f"--screenshot={target}", url], check=True, capture_output=True, timeout=180)
    finally:
        server.terminate()
        server.wait(timeout=30)


def first(pattern: str, text: str) -> str:
    found = re.search(pattern, text)
    if not found:
        raise SystemExit(f"not found: {pattern}")
    return found.group(1)


def main(argv: list[str]) -> int:
    results, out = Path(argv[0]), Path(argv[1] if len(argv) > 1 else "docs/images")
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise SystemExit("needs chromium")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        site, profile = Path(tmp) / "site", Path(tmp) / "profile"
        if cli_main(["view", str(results), "--export", str(site)]) != 0:
            return 1
        index = (site / "index.html").read_text(encoding="utf-8")
        run = first(r'href="(run-[^"]+)"[^<]*</a></td>\s*<td[^>]*>[^<]*</td>\s*<td>[^<]*</td>\s*<td[^>]*>[^<]*</td>\s*'
                    r'<td><span class="badge s-failed">', index)
        run_html = (site / run).read_text(encoding="utf-8")
        case = first(r'<tr class="flip regression"><td><a href="(case-[^"]+)"', run_html)
        compare = first(r'href="(compare-[^"]+)"', run_html)
        shoot_live(browser, results, out / "view-runs.png", profile)
        print(out / "view-runs.png")
        for name, page, height in (("run", run, 1160), ("case", case, 720),
                                   ("compare", compare, 1080), ("trends", "trends.html", 680)):
            shoot(browser, site / page, out / f"view-{name}.png", profile, height)
            print(out / f"view-{name}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
