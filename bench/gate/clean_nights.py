"""False failing nights on real clean nights of the whole suite, through
the product: what a site sees in the weeks after the README's capture.

The nights are those a newcomer walk stored (docs/development.md): five
runs of the README's first command, the printed capture, then clean runs
of ``bash ci/health.sh`` with nothing else running.  Each night after the
capture is judged again by ``hpc-health report`` of the checkout that runs
this bench (its judgement, the walk's site configuration and captured
reference), so a change to the gate is measured on the same nights; the
retest each night stored is judged with it.  A night is clean when no
figure's reason says its node was busy.

    python -m bench.gate.clean_nights --root CLONE --store STORE \\
        --after CAPTURE_RUN --json bench/gate/clean_nights.json

``CLONE`` is the walk's checkout (``site_configs/`` and the captured
``reference/local.yaml``), ``CAPTURE_RUN`` the last run the capture was
taken from.  Prints a Markdown table; ``--table`` prints it again from a
results file.  The nights are minutes apart, not a day: episodes of the
host's noise that last longer than a night span several of them.
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
from xml.etree import ElementTree

from scipy import stats

from hpc_health.stats import gate

SITE = "local"
_BUSY = "node busy"


def judge(root: Path, store: Path, run: str, scratch: Path) -> dict:
    """One stored night judged again: its exit (1: a failing night, 3:
    DRIFTING only), failing figures and whether any figure ran on a busy
    node."""
    env = {**os.environ, "HPC_HEALTH_ROOT": str(root), "HPC_HEALTH_STORE": str(store)}
    junit = scratch / f"{run}.xml"
    res = subprocess.run([sys.executable, "-m", "hpc_health", "report", "--site", SITE,
                          "--junit", str(junit), run],
                         env=env, capture_output=True, text=True, timeout=600)
    if res.returncode not in (0, 1, 3) or not junit.exists():
        raise RuntimeError(f"hpc-health report {run} exited {res.returncode}:\n"
                           f"{res.stdout[-1500:]}\n{res.stderr[-1500:]}")
    failed, said = [], []
    for case in ElementTree.parse(junit).iter("testcase"):
        for tag in ("failure", "skipped", "system-out"):
            for el in case.iter(tag):
                said.append(el.get("message") or el.text or "")
        failure = case.find("failure")
        if failure is not None:
            failed.append(f"{case.get('classname', '').split('.', 1)[-1]} "
                          f"{case.get('name', '').split(' [')[0]}: {failure.get('message')}")
    return {"run": run, "exit": res.returncode, "failed": failed,
            "busy": any(_BUSY in text for text in said)}


def as_captured_after(root: Path, store: Path, after: str, scratch: Path) -> Path:
    """The root to judge with: *root* itself, or, when its references were
    captured after the first night they judge (a baseline captured again, later,
    from the walk's runs), a copy whose references are stamped as captured
    when run *after* finished, as the walk's own capture was.  The gate
    counts a figure's nights from its capture on: stamped later, no night
    would feed its spread or the persistence rule."""
    from hpc_health.store import references
    ref = root / "reference" / f"{SITE}.yaml"
    data = references.load_raw(ref)
    nights = nights_after(store, after)
    runs = store / "runs" / SITE
    meta = json.loads((runs / after / "run.json").read_text())
    when = str(meta.get("finished") or meta.get("started") or "")
    first = str(json.loads((runs / nights[0] / "run.json").read_text()).get("started") or "") \
        if nights else ""
    later = [p for paths in (data.get("$provenance") or {}).values() for p in paths.values()
             if isinstance(p, dict) and str(p.get("captured") or "") > first]
    if not (when and first and later):
        return root
    for prov in later:
        prov["captured"] = when
    copy = scratch / "root"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".git", ".venv"), symlinks=True)
    references.write(copy / "reference" / f"{SITE}.yaml", data)
    print(f"{ref}: {len(later)} figures captured after the nights they judge: judged as "
          f"captured when {after} finished ({when})", file=sys.stderr)
    return copy


def nights_after(store: Path, after: str) -> list[str]:
    runs = store / "runs" / SITE
    return sorted(r for r in os.listdir(runs) if r > after and (runs / r / "run.json").exists())


def table(results: dict) -> str:
    clean = [n for n in results["nights"] if not n["busy"]]
    failed = [n for n in clean if n["exit"] == 1]
    k, n = len(failed), len(clean)
    rows = ["| night | run | exit | failing figures (the reason's start) |", "|---|---|---|---|"]
    for i, night in enumerate(results["nights"], 1):
        said = ("; ".join(f[:150] for f in night["failed"]) or "-" if not night["busy"] else
                f"{len(night['failed'])} (node busy: not counted)")
        rows.append(f"| {i} | {night['run']} | {night['exit']} | {said} |")
    rows.append("")
    if n:
        ci = stats.binomtest(k, n).proportion_ci(0.95, method="exact")
        month = gate.NIGHTS_PER_MONTH
        rows.append(f"Clean nights failing: {k} of {n} ({100 * k / n:.0f} %); at that rate "
                    f"{month * k / n:.1f} failing nights a site-month (95 % interval "
                    f"{month * ci.low:.1f}-{month * ci.high:.1f}; budget "
                    f"{gate.FALSE_ALARM_BUDGET:g}).  Nights minutes apart, judged at "
                    f"{results['code']}.")
    return "\n".join(rows)


def _code() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, cwd=Path(__file__).parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, help="the walk's checkout (its captured reference)")
    ap.add_argument("--store", type=Path, help="the walk's store (read only)")
    ap.add_argument("--after", help="the last baseline run of the capture")
    ap.add_argument("--json", type=Path, help="results file")
    ap.add_argument("--table", type=Path, help="print the table of a results file and stop")
    args = ap.parse_args(argv)
    if args.table:
        print(table(json.loads(args.table.read_text())))
        return 0
    if not (args.root and args.store and args.after):
        ap.error("--root, --store and --after are needed (or --table FILE)")
    for need in (args.root / "reference" / f"{SITE}.yaml", args.store / "runs" / SITE):
        if not need.exists():
            ap.error(f"{need} does not exist")
    runs = nights_after(args.store, args.after)
    if not runs:
        ap.error(f"no stored run after {args.after} in {args.store}")
    results = {"root": str(args.root), "store": str(args.store), "after": args.after,
               "code": _code(), "judged": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "nights": []}
    with tempfile.TemporaryDirectory(prefix="hpc-health-clean-nights-") as tmp:
        root = as_captured_after(args.root.resolve(), args.store.resolve(), args.after,
                                 Path(tmp))
        for i, run in enumerate(runs, 1):
            night = judge(root, args.store.resolve(), run, Path(tmp))
            results["nights"].append(night)
            print(f"night {i}/{len(runs)} {run}: exit {night['exit']}"
                  f"{' (busy)' if night['busy'] else ''}, {len(night['failed'])} failing",
                  file=sys.stderr, flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
