"""A memory-copy hog against STREAM, night after night, through
``hpc-health run``: how often the gate names a STREAM figure DEGRADED by
the second hog night (issue 43 asks it of STREAM Triad in 80 % of trials
for a hog that takes a third of its bandwidth).

Each trial starts from a copy of a store the README's path made (five
full-suite runs, the printed capture, clean nights after it), so that every
trial's first hog night follows the same clean night and the trials do not
see each other.  Two paced memory-copy hogs (``memhog.c``, one per core,
as the newcomer walk in docs/development.md runs them) copy while
``hpc-health run -T stream`` runs ``--nights`` times; each night's STREAM
verdicts, with the loss the hog caused against the reference, are kept.
The copies live in a scratch directory this bench makes and removes; the
source store is only read.

    python -m bench.gate.hog_nights --root CLONE --store STORE --trials 20 \\
        --json bench/gate/hog_nights.json

``CLONE`` is the checkout the store was made with (its ``.venv``,
``site_configs/`` and the captured ``reference/local.yaml``).  Prints a
Markdown table; ``--table`` prints it again from a results file.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.fault_injection.system import memory_hog
from bench.fault_injection.tools import build_memhog

SITE = "local"
#: The STREAM figures the table follows: all-core Triad, and Triad on one
#: and on two threads.
TRIADS = ("StreamBandwidth/Triad", "StreamTriadScaling/triad_1t",
          "StreamTriadScaling/triad_2t")
_CHANGE = re.compile(r"^([+-]\d+(?:\.\d+)?) %")
#: The share of a figure the issue's hog takes ("a third or more").
TAKEN = 1 / 3


def copy_store(src: Path, dst: Path) -> None:
    """*src* as *dst*: run directories hard-linked (a night writes only its
    own), the index and ReFrame's database copied (a night writes to both)."""
    def link_or_copy(a, b):
        if a.endswith((".sqlite", ".db")) or os.path.basename(a).startswith("."):
            return shutil.copy2(a, b)
        return os.link(a, b)
    shutil.copytree(src, dst, copy_function=link_or_copy, symlinks=True)


def night(root: Path, store: Path) -> dict:
    """One STREAM night in *store*: its exit code and each STREAM figure's
    verdict, change against its reference and reason."""
    runs = store / "runs" / SITE
    before = set(os.listdir(runs))
    env = {**os.environ, "HPC_HEALTH_ROOT": str(root), "HPC_HEALTH_STORE": str(store)}
    res = subprocess.run([str(root / ".venv" / "bin" / "hpc-health"), "run", "--site", SITE,
                          "-T", "stream"], env=env, capture_output=True, text=True,
                         timeout=1800)
    new = sorted(set(os.listdir(runs)) - before)
    if res.returncode not in (0, 1, 3) or len(new) != 1:
        raise RuntimeError(f"hpc-health run exited {res.returncode} with runs {new}:\n"
                           f"{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    figures = {}
    for v in json.loads((runs / new[0] / "verdicts.json").read_text()):
        if not str(v.get("check", "")).startswith("Stream"):
            continue
        change = _CHANGE.match(v.get("reason") or "")
        figures[f"{v['check']}/{v['variable']}"] = {
            "verdict": v["verdict"], "change": float(change.group(1)) if change else None,
            "reason": (v.get("reason") or "")[:240]}
    return {"run": new[0], "exit": res.returncode, "figures": figures}


def trial(root: Path, source: Path, scratch: Path, hog: Path, args, say) -> dict:
    store = scratch / "store"
    copy_store(source, store)
    try:
        nights = []
        with contextlib.ExitStack() as hogs:
            stats = [hogs.enter_context(memory_hog(hog, args.rate, None, buffer_mib=args.buffer))
                     for _ in range(args.hogs)]
            for n in range(1, args.nights + 1):
                started = time.monotonic()
                nights.append(night(root, store))
                f = nights[-1]["figures"]
                say(f"  night {n}: exit {nights[-1]['exit']} "
                    f"({time.monotonic() - started:.0f} s): " + ", ".join(
                        f"{k.split('/')[1]} {f[k]['change']:+.1f} % {f[k]['verdict']}"
                        for k in TRIADS if k in f and f[k]["change"] is not None))
        return {"nights": nights, "hog_mbs": [s.achieved_mbs for s in stats]}
    finally:
        shutil.rmtree(store, ignore_errors=True)


def caught_by(record: dict, key: str, night: int) -> bool:
    return any(n["figures"].get(key, {}).get("verdict") == "DEGRADED"
               for n in record["nights"][:night])


def took(record: dict, key: str, share: float = TAKEN) -> bool:
    """Whether the hogs took *share* or more of the figure on every night."""
    changes = [n["figures"].get(key, {}).get("change") for n in record["nights"]]
    return bool(changes) and all(c is not None and c <= -100 * share for c in changes)


def table(results: dict) -> str:
    trials = [t for t in results["trials"] if "nights" in t]
    nights = results["settings"]["nights"]
    keys = sorted({k for t in trials for n in t["nights"] for k in n["figures"]})
    rows = ["| STREAM figure | " + " | ".join(f"night {n}: median change (range)" for n in
                                              range(1, nights + 1))
            + f" | DEGRADED by night {nights} | the hogs took a third every night: trials"
            f" | of those, DEGRADED by night {nights} | nights the hogs took a third: "
            "DEGRADED that night |",
            "|" + "---|" * (5 + nights)]
    for key in keys:
        med = []
        for n in range(nights):
            ch = [t["nights"][n]["figures"].get(key, {}).get("change") for t in trials
                  if len(t["nights"]) > n]
            ch = [c for c in ch if c is not None]
            med.append(f"{statistics.median(ch):+.1f} % ({min(ch):+.0f} to {max(ch):+.0f})"
                       if ch else "-")
        third = [t for t in trials if took(t, key)]
        taken = [n["figures"][key]["verdict"] for t in trials for n in t["nights"]
                 if key in n["figures"] and took({"nights": [n]}, key)]
        rows.append(f"| {key} | " + " | ".join(med) + " | "
                    f"{sum(caught_by(t, key, nights) for t in trials)} of {len(trials)} | "
                    f"{len(third)} | {sum(caught_by(t, key, nights) for t in third)} | "
                    f"{taken.count('DEGRADED')} of {len(taken)} |")
    any_triad = sum(any(caught_by(t, k, nights) for k in TRIADS) for t in trials)
    third = [t for t in trials if any(took(t, k) for k in TRIADS)]
    rows.append("")
    rows.append(f"A STREAM Triad ({', '.join(TRIADS)}) DEGRADED by night {nights}: "
                f"{any_triad} of {len(trials)} trials; of the {len(third)} in which the hogs "
                f"took a third or more of one of them on every night, "
                f"{sum(any(caught_by(t, k, nights) for k in TRIADS) for t in third)}.")
    return "\n".join(rows)


def _save(path: Path | None, results: dict) -> None:
    if path is None:
        return
    part = path.with_name(path.name + ".part")
    part.write_text(json.dumps(results, indent=1) + "\n")
    part.replace(path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, help="the checkout the store was made with")
    ap.add_argument("--store", type=Path, help="the store to start each trial from (read only)")
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--nights", type=int, default=2)
    ap.add_argument("--hogs", type=int, default=2, help="memhog processes (one per core)")
    ap.add_argument("--rate", type=float, default=8000.0, help="MB/s each hog copies")
    ap.add_argument("--buffer", type=int, default=512, help="MiB each hog copies through")
    ap.add_argument("--json", type=Path, help="results file (written after every trial)")
    ap.add_argument("--table", type=Path, help="print the table of a results file and stop")
    args = ap.parse_args(argv)
    if args.table:
        print(table(json.loads(args.table.read_text())))
        return 0
    if not (args.root and args.store):
        ap.error("--root and --store are needed (or --table FILE)")
    root, source = args.root.resolve(), args.store.resolve()
    for need in (root / ".venv" / "bin" / "hpc-health", root / "reference" / f"{SITE}.yaml",
                 source / "runs" / SITE, source / "index.sqlite"):
        if not need.exists():
            ap.error(f"{need} does not exist")

    def say(text):
        print(text, file=sys.stderr, flush=True)

    results = {"settings": {k: (str(v) if isinstance(v, Path) else v)
                            for k, v in vars(args).items() if k not in ("json", "table")},
               "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "trials": []}
    with tempfile.TemporaryDirectory(prefix="hpc-health-hog-nights-") as tmp:
        scratch = Path(tmp)
        hog = build_memhog(scratch)
        for i in range(1, args.trials + 1):
            say(f"trial {i}/{args.trials}")
            try:
                results["trials"].append(trial(root, source, scratch, hog, args, say))
            except (RuntimeError, subprocess.TimeoutExpired) as err:
                results["trials"].append({"error": str(err)[-2000:]})
                say(f"  failed: {str(err)[:300]}")
            _save(args.json, results)
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
