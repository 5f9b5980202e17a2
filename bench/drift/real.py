"""Real nightly series through the product: does ``hpc-health run`` say
``DRIFTING`` after a sustained step, how soon, and does it name the night
the step began?

In a throw-away checkout root and store (the fault bench's sandbox), short
nights of one check (the 1-D halo exchange, SERE, 8 B and 4 KiB; about ten
seconds each) are run with ``hpc-health run --site local``: five clean
nights whose references are captured, then ``--clean`` clean nights, the
history every series starts from.  Each series is a copy of that store
followed by nights with the fault bench's PMPI delay sized to make the halo
time at 4 KiB ``--worse`` slower than its reference (0.10 and 0.05), one
``hpc-health run`` a night, until the night's ``run.json`` names
``time_4KiB`` as ``DRIFTING`` or ``--nights`` faulty nights have passed.
Recorded per series: the night ``DRIFTING`` first appeared, the run it
named as the start and whether that is the first faulty night (+-1).  The
clean nights are judged too: a ``DRIFTING`` among them is a false alarm.

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

from bench.fault_injection.faults import FAULTS
from bench.fault_injection.hpc_health_run import (
    CHECK,
    FIGURE,
    SENDS_PER_EXCHANGE,
    SITE,
    Plan,
    Sandbox,
    captured_value,
)
from bench.fault_injection.tools import build_pmpi_delay


def _drifting(box, run_id):
    meta = json.loads((box.store / "runs" / SITE / run_id / "run.json").read_text())
    return {d["variable"]: d for d in meta.get("drifting") or []}


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
    args = p.parse_args(argv)
    sizes = args.worse or [0.10, 0.05]
    scratch = args.scratch or Path(tempfile.mkdtemp(prefix="drift-real-"))
    scratch.mkdir(parents=True, exist_ok=True)
    plan = Plan(fault="latency", reference_runs=5)
    log = lambda line: print(time.strftime("%H:%M:%S ") + line, flush=True)   # noqa: E731
    bindir = scratch / "bin"
    bindir.mkdir(exist_ok=True)
    fault = FAULTS[plan.fault]({"pmpi_delay": build_pmpi_delay(bindir)}, opts=None)
    box = Sandbox(scratch, plan, log)
    clean_env = fault.clean_env()
    record = {"check": CHECK, "figure": FIGURE, "fault": fault.describe(),
              "clean_nights": args.clean, "max_nights": args.nights, "series": [],
              "clean": []}
    t0 = time.monotonic()
    try:
        ref_runs = [box.check_run(plan, clean_env)[0] for _ in range(plan.reference_runs)]
        for _ in range(3):
            cap = box.hpc_health("reference", "capture", "--site", SITE, "--from",
                                 f"{ref_runs[0]}..{ref_runs[-1]}", "--write")
            if cap.returncode == 0:
                break
            # a baseline too noisy to gate on (capture says why): one more night
            log(f"capture from {len(ref_runs)} nights refused; one more clean night")
            ref_runs.append(box.check_run(plan, clean_env)[0])
        if cap.returncode:
            raise RuntimeError(f"reference capture exited {cap.returncode}: "
                               f"{cap.stdout[-3000:]}{cap.stderr[-2000:]}")
        ref = captured_value(box.root)
        record["reference"] = {"value": ref.value, "unit": ref.unit, "runs": ref_runs}
        log(f"reference {FIGURE} {ref.value:.4g} {ref.unit} from {len(ref_runs)} runs")
        for n in range(args.clean):
            run_id, code, _ = box.check_run(plan, clean_env)
            found = _drifting(box, run_id)
            record["clean"].append({"run": run_id, "exit_code": code,
                                    "drifting": sorted(found)})
            log(f"clean night {n + 1}/{args.clean}: {run_id} exit {code}"
                + (f", DRIFTING {sorted(found)}" if found else ""))
        base = box.store
        for worse in sizes:
            delay_ns = worse * ref.value * 1000.0 / SENDS_PER_EXCHANGE
            for k in range(args.series):
                box.store = scratch / f"series-{worse}-{k}"
                shutil.copytree(base, box.store, symlinks=True)
                entry = {"worse": worse, "delay_ns": delay_ns, "nights": [], "found_on": None}
                for night in range(1, args.nights + 1):
                    with fault.apply(delay_ns) as (env, _info):
                        run_id, code, _ = box.check_run(plan, env)
                    found = _drifting(box, run_id)
                    entry["nights"].append({"run": run_id, "exit_code": code,
                                            "drifting": sorted(found)})
                    if FIGURE in found:
                        first = entry["nights"][0]["run"]
                        since = found[FIGURE]["since"]
                        runs = box.run_ids()
                        entry.update(found_on=night, since=since, first_faulty=first,
                                     located=abs(runs.index(since) - runs.index(first)) <= 1,
                                     change=found[FIGURE]["change"])
                        break
                record["series"].append(entry)
                log(f"+{100 * worse:.0f} % series {k + 1}/{args.series}: "
                    + (f"DRIFTING on faulty night {entry['found_on']}, since "
                       f"{'its first night' if entry['located'] else entry['since']}"
                       if entry["found_on"] else f"not DRIFTING in {args.nights} nights"))
                shutil.rmtree(box.store, ignore_errors=True)
                args.json.write_text(json.dumps(record, indent=1) + "\n")
        box.store = base
    finally:
        record["seconds"] = round(time.monotonic() - t0)
        record["discarded_runs"] = box.discarded
        args.json.write_text(json.dumps(record, indent=1) + "\n")
        if not args.scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    log(f"results: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
