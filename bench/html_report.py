#!/usr/bin/env python3
"""The HTML report of a year of nightly runs: its size, the time to write
it, and its first paint in headless Chromium.

Synthesises a year of runs from one real run directory (as
``bench.store_scale`` does: every figure varied per night, a step on a
tenth of them near the end, two partitions), writes
``hpc-health report --html`` over all of them, then opens the file in
headless Chromium with the network off:

- first paint: from navigation until the page has drawn the plots of its
  first screenful (the loader's ``data-first-paint-ms``, in the page's own
  clock; and the wall time the browser took to get there);
- everything: the same page with ``#all`` (every plot drawn, one after
  another), the number drawn, and any console error.

::

    python -m bench.html_report --from-run RUN_DIR [--nights 365] [--store DIR --keep]
    python -m bench.html_report --store DIR --reuse --screenshot docs/report-year.png

Prints a Markdown table; ``--json FILE`` writes the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import browser, store_scale

REPO = Path(__file__).resolve().parent.parent
#: What issue 26 sets for a year-long report.
BUDGET_MB, BUDGET_PAINT_S = 15.0, 5.0


def write_report(store: Path, out: Path) -> tuple[float, subprocess.CompletedProcess]:
    env = store_scale._env(REPO, store)
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "hpc_health", "report", "--site",
                           store_scale.SITE, "--html", str(out)], cwd=REPO, env=env,
                          capture_output=True, text=True)
    return time.monotonic() - t0, proc


def measure(page: Path, screenshot: Path | None = None) -> dict:
    with browser.Browser() as b:
        wall = b.open(page, until="firstPaintMs", timeout=120)
        first = b.evaluate("Number(document.body.dataset.firstPaintMs)")
        drawn_first = b.evaluate("Number(document.body.dataset.drawn)")
        if screenshot:
            b.screenshot(screenshot)
        errors_first = list(b.errors)
    with browser.Browser() as b:
        # A link to a figure (the verdict table's): the page opens at the
        # first trend, whose screenful of plots must be drawn.
        wall_t0 = b.open(page, fragment="t0", until="firstPaintMs", timeout=120)
        trend_ms = b.evaluate("Number(document.body.dataset.firstPaintMs)")
        trend_plots = b.evaluate("Number(document.body.dataset.drawn)")
        errors_first += b.errors
    with browser.Browser() as b:
        t0 = time.monotonic()
        b.open(page, fragment="all", until="done", timeout=600)
        all_s = time.monotonic() - t0
        plots = b.evaluate("document.querySelectorAll('div.hh-plot').length")
        drawn = b.evaluate("document.querySelectorAll('div.hh-plot svg.main-svg').length "
                           "&& Array.from(document.querySelectorAll('div.hh-plot'))"
                           ".filter(d => d.querySelector('svg.main-svg')).length")
        errors = errors_first + b.errors
    return {"first_paint_ms": first, "first_paint_wall_s": round(wall, 2),
            "plots_in_first_paint": drawn_first, "trend_paint_ms": trend_ms,
            "trend_paint_wall_s": round(wall_t0, 2), "plots_in_trend_paint": trend_plots,
            "all_drawn_s": round(all_s, 1),
            "plots": plots, "plots_drawn": drawn, "console_errors": errors}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--from-run", type=Path, help="a real run directory (default: the "
                   "latest stored run)")
    p.add_argument("--store", type=Path, help="the synthetic store (default: a temporary one)")
    p.add_argument("--reuse", action="store_true", help="use --store as it is")
    p.add_argument("--keep", action="store_true", help="keep the synthetic store")
    p.add_argument("--nights", type=int, default=365)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, help="the report (default: in the store)")
    p.add_argument("--screenshot", type=Path, help="save the first screenful here")
    p.add_argument("--json", type=Path)
    a = p.parse_args(argv)
    store = a.store or Path(tempfile.mkdtemp(prefix="hh-year-"))
    if browser.executable() is None:
        sys.exit("no Chromium: apt-get install chromium")
    try:
        if not a.reuse:
            src = a.from_run or store_scale.latest_run()
            if store.exists() and any(store.iterdir()):
                sys.exit(f"{store} is not empty: give --reuse, or another --store")
            print(f"synthesising {a.nights} nights from {src} into {store}", file=sys.stderr)
            store_scale.synthesise(src, store, a.nights, a.seed, 0.10)
        out = a.out or store / "report.html"
        write_s, proc = write_report(store, out)
        if not out.exists():
            sys.exit(f"report --html failed (exit {proc.returncode}):\n{proc.stderr}")
        result = {"nights": a.nights, "load": os.getloadavg()[0], "write_s": round(write_s, 1),
                  "exit_code": proc.returncode, "size_mb": round(out.stat().st_size / 1e6, 2),
                  "said": proc.stderr.strip().splitlines()[-1]}
        result.update(measure(out, a.screenshot))
        result["load_after"] = os.getloadavg()[0]
    finally:
        if not (a.keep or a.store):
            shutil.rmtree(store, ignore_errors=True)
    print("| figure | measured | budget |\n|---|---|---|")
    print(f"| size | {result['size_mb']} MB | {BUDGET_MB} MB |")
    print(f"| first paint (page clock) | {result['first_paint_ms'] / 1000:.2f} s "
          f"({result['plots_in_first_paint']} plots) | {BUDGET_PAINT_S} s |")
    print(f"| first paint (wall, browser already started) | {result['first_paint_wall_s']} s | |")
    print(f"| opened at the first trend (`#t0`, page clock) | "
          f"{result['trend_paint_ms'] / 1000:.2f} s ({result['plots_in_trend_paint']} plots) "
          f"| {BUDGET_PAINT_S} s |")
    print(f"| every plot drawn (#all) | {result['all_drawn_s']} s, "
          f"{result['plots_drawn']}/{result['plots']} | |")
    print(f"| writing the report | {result['write_s']} s | |")
    print(f"| console errors | {len(result['console_errors'])} | 0 |")
    print(f"\nload average {result['load']:.1f} before, {result['load_after']:.1f} after; "
          f"{result['said']}")
    if a.json:
        a.json.write_text(json.dumps(result, indent=1))
    ok = (result["size_mb"] <= BUDGET_MB
          and max(result["first_paint_ms"], result["trend_paint_ms"]) <= 1000 * BUDGET_PAINT_S
          and not result["console_errors"] and result["plots_drawn"] == result["plots"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
