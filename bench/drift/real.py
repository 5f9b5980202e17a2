"""Real nightly series through the product: does ``hpc-health run`` say
``DRIFTING`` after a sustained step, how soon, and does it name the night
the step began?

In a throw-away checkout root and store (the fault bench's sandbox), short
nights of one check are run with ``hpc-health run --site local -- -n
BarrierLatency`` (one rank; its figure ``mpi_init`` is MPI_Init's time, the
launcher's start-up: it moved less than 15 % between runs here, where the
halo and OSU figures of this shared VM move by 50 % and more).  First
``--clean`` clean nights, the history every series starts from (references
captured from the first five when ``capture`` accepts them: the drift test
needs none).  Each series is a copy of that store followed by nights with
the fault bench's PMPI interposer delaying MPI_Init so that it is
``--worse`` slower than the clean nights' median (0.10 and 0.05; the delay
calibrated on three nights in a scratch copy first, as not all of it adds to
MPI_Init's time; preloaded into the ranks only, clean nights preload it with
no delay), one ``hpc-health run`` a night, until the
night's ``run.json`` names ``mpi_init`` as ``DRIFTING`` or ``--nights``
faulty nights have passed.  Recorded per series: the night ``DRIFTING``
first appeared, the run it named as the start and whether that is the first
faulty night (+-1).  The clean nights are judged too: a ``DRIFTING`` among
them is a false alarm.

A night that other processes disturbed (more than a quarter of a core
besides the run's) is re-run when the machine is quiet, as in the fault
bench.

::

    python -m bench.drift.real --series 20 --json bench/drift/real.json
    python -m bench.drift.table          # the README tables from both results
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.fault_injection import quiet
from bench.fault_injection.hpc_health_run import SITE, Plan, Sandbox
from bench.fault_injection.measure import QuietBudget
from bench.fault_injection.tools import build_pmpi_delay

CHECK = "BarrierLatency"
FIGURE = "mpi_init"
#: a night other processes used more cores of is re-run, this many times
RERUNS = 3
FOREIGN_CPU = 0.25


def night(box, lib, delay_ns, log):
    """One ``hpc-health run`` of the check with MPI_Init delayed by
    *delay_ns* (0: clean); (run id, exit code)."""
    env = {"LD_PRELOAD": str(lib), "FI_INIT_DELAY_NS": str(int(delay_ns))}
    for attempt in range(RERUNS + 1):
        meter = quiet.CpuMeter()
        before = set(box.run_ids())
        res = box.hpc_health("run", "--site", SITE, "--", "-n", CHECK, ranks_env=env)
        new = sorted(set(box.run_ids()) - before)
        if res.returncode not in (0, 1, 3) or len(new) != 1:
            raise RuntimeError(f"hpc-health run exited {res.returncode} with runs {new}:\n"
                               f"{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
        foreign, _ = meter.foreign()
        if foreign <= FOREIGN_CPU or attempt == RERUNS:
            return new[0], res.returncode
        box.discarded.append({"run": new[0], "foreign_cores": round(foreign, 2)})
        log(f"other processes used {foreign:.2f} cores during {new[0]}: re-run when quiet")
        # the disturbed night leaves the series: its directory goes
        shutil.rmtree(box.store / "runs" / SITE / new[0])
        box.budget.wait()
    raise AssertionError("unreachable")


def save(path, record, earlier):
    """The results file: every part of the bench (``--append`` adds one)."""
    path.write_text(json.dumps({"parts": [*earlier, record]}, indent=1) + "\n")


def value(box, run_id):
    report = json.loads((box.store / "runs" / SITE / run_id / "report.json").read_text())
    for run in report["runs"]:
        for tc in run["testcases"]:
            for key, vals in (tc.get("perfvalues") or {}).items():
                if key.endswith(":" + FIGURE) and vals and vals[0] is not None:
                    return float(vals[0])
    raise RuntimeError(f"run {run_id} has no {FIGURE}")


def _drifting(box, run_id):
    meta = json.loads((box.store / "runs" / SITE / run_id / "run.json").read_text())
    return {d["variable"]: d for d in meta.get("drifting") or []}


def calibrated_delay(box, lib, base, worse, base_s, scratch, log, nights=3, tries=3):
    """The delay (ns) that makes MPI_Init *worse* slower than *base_s*, by
    measurement: a delay is not all added to MPI_Init's time (12 ms gave
    +3 % of 240 ms here, not +5 %), so it is scaled by the change it made on
    *nights* nights in a scratch copy of the store, up to *tries* times.
    (delay, the change measured with it)."""
    delay = worse * base_s * 1e9
    store, box.store = box.store, scratch / "calibration"
    try:
        for _ in range(tries):
            shutil.rmtree(box.store, ignore_errors=True)
            shutil.copytree(base, box.store, symlinks=True)
            got = sorted(value(box, night(box, lib, delay, log)[0]) for _ in range(nights))
            change = got[len(got) // 2] / base_s - 1
            log(f"delay {delay / 1e6:.1f} ms: MPI_Init {100 * change:+.1f} % (wanted "
                f"{100 * worse:+.0f} %)")
            if abs(change - worse) <= 0.01 or change <= 0:
                break
            delay *= worse / change
        return delay, change
    finally:
        shutil.rmtree(box.store, ignore_errors=True)
        box.store = store


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.drift.real",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--worse", type=float, action="append",
                   help="step size, fraction worse (repeatable; default 0.10 and 0.05)")
    p.add_argument("--series", type=int, default=20, help="series per step size")
    p.add_argument("--clean", type=int, default=12, help="clean nights before the steps")
    p.add_argument("--nights", type=int, default=10, help="faulty nights at most per series")
    p.add_argument("--json", type=Path, default=Path(__file__).with_name("real.json"))
    p.add_argument("--scratch", type=Path, help="keep the stores here (default: removed)")
    p.add_argument("--append", action="store_true",
                   help="add this bench's nights to the results file as another part")
    args = p.parse_args(argv)
    sizes = args.worse or [0.10, 0.05]
    scratch = args.scratch or Path(tempfile.mkdtemp(prefix="drift-real-"))
    scratch.mkdir(parents=True, exist_ok=True)
    log = lambda line: print(time.strftime("%H:%M:%S ") + line, flush=True)   # noqa: E731
    bindir = scratch / "bin"
    bindir.mkdir(exist_ok=True)
    lib = build_pmpi_delay(bindir)
    box = Sandbox(scratch, Plan(), log)
    box.budget = QuietBudget(FOREIGN_CPU, 600.0, log)
    record = {"check": CHECK, "figure": FIGURE, "clean_nights": args.clean,
              "max_nights": args.nights, "series": [], "clean": []}
    earlier = (json.loads(args.json.read_text()).get("parts", [])
               if args.append and args.json.exists() else [])
    t0 = time.monotonic()
    try:
        box.budget.wait()
        for n in range(args.clean):
            run_id, code = night(box, lib, 0, log)
            found = _drifting(box, run_id)
            record["clean"].append({"run": run_id, "exit_code": code, "value": value(box, run_id),
                                    "drifting": sorted(found)})
            log(f"clean night {n + 1}/{args.clean}: {run_id} exit {code}, {FIGURE} "
                f"{record['clean'][-1]['value']:.4g} s" + (f", DRIFTING {sorted(found)}"
                                                          if found else ""))
            if n == 4:
                ids = [c["run"] for c in record["clean"]]
                cap = box.hpc_health("reference", "capture", "--site", SITE, "--from",
                                     f"{ids[0]}..{ids[-1]}", "--write")
                record["reference_captured"] = cap.returncode == 0
                log("references captured from the first five nights" if cap.returncode == 0
                    else "capture refused the first five nights: no references (not needed)")
        values = sorted(c["value"] for c in record["clean"])
        base_s = values[len(values) // 2]
        record["clean_median_s"] = base_s
        base = box.store
        record["delays"] = {}
        for worse in sizes:
            delay_ns, change = calibrated_delay(box, lib, base, worse, base_s, scratch, log)
            record["delays"][str(worse)] = {"delay_ns": delay_ns, "change_measured": change}
            for k in range(args.series):
                box.store = scratch / f"series-{worse}-{k}"
                shutil.copytree(base, box.store, symlinks=True)
                entry = {"worse": worse, "delay_ns": delay_ns, "nights": [], "found_on": None}
                for n in range(1, args.nights + 1):
                    run_id, code = night(box, lib, delay_ns, log)
                    found = _drifting(box, run_id)
                    entry["nights"].append({"run": run_id, "exit_code": code,
                                            "value": value(box, run_id),
                                            "drifting": sorted(found)})
                    if FIGURE in found:
                        first = entry["nights"][0]["run"]
                        since = found[FIGURE]["since"]
                        runs = box.run_ids()
                        entry.update(found_on=n, since=since, first_faulty=first,
                                     located=abs(runs.index(since) - runs.index(first)) <= 1,
                                     change=found[FIGURE]["change"])
                        break
                record["series"].append(entry)
                log(f"+{100 * worse:.0f} % series {k + 1}/{args.series}: "
                    + (f"DRIFTING on faulty night {entry['found_on']}, since "
                       f"{'its first night' if entry['located'] else entry['since']}"
                       if entry["found_on"] else f"not DRIFTING in {args.nights} nights"))
                shutil.rmtree(box.store, ignore_errors=True)
                save(args.json, record, earlier)
        box.store = base
    finally:
        record["seconds"] = round(time.monotonic() - t0)
        record["discarded_runs"] = box.discarded
        save(args.json, record, earlier)
        if not args.scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    log(f"results: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
