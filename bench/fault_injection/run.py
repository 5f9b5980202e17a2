"""Proof by injected faults: does hpc-health say DEGRADED when, and only
when, performance degrades?

For each fault: a baseline of R clean "nights" (k samples each) becomes the
product's reference (``propose_reference``); the fault's strength is
calibrated to ~10 % and ~25 % degradation of the workload's main figure;
then faulty nights of both sizes and clean nights are run interleaved, every
night judged by ``decide_many`` exactly as ``hpc-health`` judges a run.
Detection rate, false-alarm rate and the minimum detectable change come out
per fault and size.  Needs root (namespaces, tc, cgroups, loop devices).
Run from the repository root:

    python -m bench.fault_injection.run --quick --out /tmp/fi.json     # smoke test
    python -m bench.fault_injection.run                                # full run -> results.json
    python -m bench.fault_injection.run --table bench/fault_injection/results.json
    python -m bench.fault_injection.run --hpc-health-run latency       # judged by hpc-health run
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import sys
from pathlib import Path

from hpc_health import stats

from . import analysis, hpc_health_run, results_file, system, tools
from .faults import FAULTS
from .measure import FaultMeasurement, QuietBudget, log

HERE = Path(__file__).resolve().parent
DEFAULT_FAULTS = "memory,network,network-link,latency,io,slow-rank"
DEFAULT_RESULTS = HERE / "results.json"


def apply_quick(opts):
    """Smoke-test sizes: every code path, no statistics worth reading."""
    opts.trials, opts.baseline_runs, opts.clean_runs, opts.pilot_runs = 2, 4, 3, 2
    opts.samples, opts.calibration_steps, opts.calibration_pairs = 2, 2, 1
    opts.osu_lat_iters, opts.osu_bw_iters = 2000, 4
    opts.halo_lat_iters, opts.halo_bw_iters, opts.halo_quota_iters = 500, 10, 200
    opts.barrier_iters, opts.io_mib, opts.link_probe = 5000, 128, 3


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.fault_injection.run",
                                description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--faults", default=DEFAULT_FAULTS,
                   help=f"comma-separated, of: {', '.join(FAULTS)} (default {DEFAULT_FAULTS})")
    p.add_argument("--trials", type=int, default=20, help="faulty nights per fault and size")
    p.add_argument("--baseline-runs", type=int, default=stats.RECOMMENDED_RUNS,
                   help="clean nights making the reference (default: the product's %(default)s)")
    p.add_argument("--baseline", choices=("interleaved", "before"), default="interleaved",
                   help="where the reference's clean nights are run: spread through the "
                        "trial block (default), or as a block before calibration and trials "
                        "(the design of the runs recorded before 2026-11-24)")
    p.add_argument("--pilot-runs", type=int, default=5,
                   help="with --baseline interleaved: clean nights run first, to set the "
                        "fault's scale and decide which sizes to trial (default %(default)s)")
    p.add_argument("--samples", type=int, default=stats.RECOMMENDED_SAMPLES,
                   help="samples per night (default: the product's %(default)s)")
    p.add_argument("--rounds", type=int, default=1,
                   help="take each night's samples in this many rounds, every round "
                        "visiting every night of the baseline (or of the trials) in turn, "
                        "as `hpc-health run --rounds` spreads a check's samples over the "
                        "session (default %(default)s: a night's samples in one go)")
    p.add_argument("--trial-unclaimed", action="store_true",
                   help="also run the ~10 %% trials where the baseline's MDC is above 10 %% "
                        "(their row says 'not claimed' either way)")
    p.add_argument("--clean-runs", type=int, default=30,
                   help="clean nights interleaved with the faulty ones, per fault")
    p.add_argument("--calibration-steps", type=int, default=4)
    p.add_argument("--calibration-pairs", type=int, default=2,
                   help="clean and faulty nights per calibration try: the change is "
                        "their pooled samples' locations (hpc_health.stats.location; "
                        "default %(default)s)")
    p.add_argument("--calibration-tolerance", type=float, default=0.02,
                   help="accept a strength whose change is within this log distance "
                        "of the target (default %(default)s)")
    p.add_argument("--foreign-cpu", type=float, default=0.25,
                   help="a run during which other processes used more than this many "
                        "cores is discarded and re-run (default %(default)s)")
    p.add_argument("--reruns", type=int, default=3, help="re-runs of one run at most")
    p.add_argument("--max-wait", type=float, default=1800,
                   help="total seconds to wait for other processes to go (default %(default)s)")
    p.add_argument("--quick", action="store_true", help="tiny smoke run")
    p.add_argument("--out", default=None,
                   help="results document, rewritten after every night (default: "
                        "results.json here; with --hpc-health-run: none)")
    p.add_argument("--append", action="store_true",
                   help="keep the other faults already in --out (e.g. to re-measure one "
                        "fault with more --samples)")
    p.add_argument("--table", metavar="JSON",
                   help="print the Markdown table of a results file and exit (RESULTS.md is "
                        "this output)")
    p.add_argument("--summary", action="store_true",
                   help="with --table: the short table instead (every fault's ~25 %% size, "
                        "primary metric, and the false alarms)")
    p.add_argument("--text", action="store_true",
                   help="with --table: a plain listing for the terminal instead")
    p.add_argument("--rejudge", action="store_true",
                   help="with --table: judge the recorded nights again with the current "
                        "statistics (references from their baseline nights) before "
                        "rendering; in-sample, for weighing a change to hpc_health/stats/")
    p.add_argument("--kernels-only", action="store_true",
                   help="ignore STREAM/OSU/IOR binaries; use our kernels and probes")
    p.add_argument("--scratch-parent", default=None, help="where the scratch directory goes")
    p.add_argument("--keep-scratch", action="store_true")
    p.add_argument("--hpc-health-run", choices=("latency", "slow-rank"),
                   help="judge this fault by real `hpc-health run`s of the halo check "
                        "instead (see hpc_health_run.py); --out then gets its record")
    p.add_argument("--worse", type=float, action="append",
                   help="with --hpc-health-run: the change wanted, fraction worse of the "
                        "halo time (repeatable; default 2 = +200 %%)")
    p.add_argument("--reference-runs", type=int, default=hpc_health_run.Plan.reference_runs,
                   help="with --hpc-health-run: clean runs the reference is captured from "
                        "(default %(default)s; with 3 the test has 2 degrees of freedom)")
    p.add_argument("--judged-pairs", type=int, default=1,
                   help="with --hpc-health-run: clean + faulty runs judged per --worse")
    p.add_argument("--clean-stale", action="store_true",
                   help="remove what runs killed with SIGKILL left behind (objects named "
                        "after a dead PID) and exit")
    p.add_argument("--io-backing", default=None,
                   help="directory for the loop image (default /dev/shm, else scratch)")
    p.add_argument("--io-mib", type=int, default=1024, help="IOR block size per repetition")
    for key in tools.LAB_GLOBS:
        p.add_argument("--" + key.replace("_", "-"), dest=key, default=None,
                       help=f"path to {tools.PATH_NAMES[key]} (or ${tools.ENV_NAMES[key]})")
    p.add_argument("--link-fraction", type=float, default=0.5,
                   help="network-link: the link rate, as a fraction of lo's unshaped rate")
    p.add_argument("--link-probe", type=int, default=9,
                   help="network-link: unshaped launches that measure lo's rate")
    p.add_argument("--osu-lat-iters", type=int, default=20000)
    p.add_argument("--osu-bw-iters", type=int, default=10)
    p.add_argument("--halo-lat-iters", type=int, default=5000)
    p.add_argument("--halo-bw-iters", type=int, default=20)
    p.add_argument("--halo-quota-iters", type=int, default=2000)
    p.add_argument("--barrier-iters", type=int, default=50000)
    opts = p.parse_args(argv)
    if opts.quick:
        apply_quick(opts)
    if not 1 <= opts.rounds <= opts.samples:
        p.error(f"--rounds must be between 1 and --samples ({opts.samples}), got {opts.rounds}")
    return opts


def _scratch_parents(opts):
    return [opts.scratch_parent] if opts.scratch_parent else None


def _image_dirs(opts):
    return ["/dev/shm"] + ([opts.io_backing] if opts.io_backing else [])


def _need_root(what):
    if os.geteuid() != 0:
        raise SystemExit(f"needs root: {what}")


def print_table(opts):
    """The tables of a results file, on stdout; nothing is written."""
    doc = results_file.load(opts.table)
    if opts.rejudge:
        doc = analysis.rejudge(doc)
    if opts.text:
        print(analysis.render_text(doc))
    elif opts.summary:
        print(analysis.render_summary(doc, {name: cls.label for name, cls in FAULTS.items()}))
    else:
        print(analysis.render_table(doc))
    return 0


def clean_stale(opts):
    """Remove what killed runs left behind; exit 1 if something stays."""
    _need_root("network namespaces, cgroups and loop devices")
    stale = system.find_stale(_scratch_parents(opts), _image_dirs(opts))
    if not stale:
        log("nothing left behind by earlier runs")
        return 0
    left = system.clean_stale(stale, log=log)
    return 1 if left else 0


def through_hpc_health(opts):
    """--hpc-health-run: exit 0 when every faulty run was DEGRADED and no
    clean one was."""
    plan = hpc_health_run.Plan(fault=opts.hpc_health_run, worse=tuple(opts.worse or (2.0,)),
                               reference_runs=opts.reference_runs,
                               judged_pairs=opts.judged_pairs, rounds=opts.rounds,
                               foreign_cpu=opts.foreign_cpu, reruns=opts.reruns,
                               max_wait=opts.max_wait)
    with system.scratch_dir(opts.scratch_parent, keep=opts.keep_scratch) as scratch:
        record = hpc_health_run.run(plan, scratch, log=log)
    if opts.out:
        Path(opts.out).write_text(json.dumps(record, indent=1) + "\n")
        log(f"record in {opts.out}")
    print()
    print(hpc_health_run.render(record))
    return 0 if record["all_as_expected"] else 1


def measure(opts):
    """The full measurement of the faults named by --faults."""
    names = [n.strip() for n in opts.faults.split(",") if n.strip()]
    unknown = [n for n in names if n not in FAULTS]
    if unknown:
        raise SystemExit(f"unknown fault(s) {unknown}; known: {', '.join(FAULTS)}")
    _need_root("network namespaces, tc, cgroups and loop devices")
    out = opts.out or DEFAULT_RESULTS
    stale = system.find_stale(_scratch_parents(opts), _image_dirs(opts))
    if stale:
        log("objects of an earlier run that was killed are still there (--clean-stale "
            "removes them): " + ", ".join(f"{k} {w}" for k, w in stale))
    system.install_signal_handlers()
    meta = {"started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "host": platform.node(), "kernel": platform.release(),
            "cpus": os.cpu_count(), "argv": sys.argv[1:],
            "alpha": stats.ALPHA, "power": stats.POWER,
            "episode_floor": stats.EPISODE_FLOOR,
            "options": {k: v for k, v in vars(opts).items() if k != "table"},
            "loadavg_start": os.getloadavg()}
    rec = results_file.Recorder(out, meta, append=opts.append)
    budget = QuietBudget(opts.foreign_cpu, opts.max_wait)
    rc = 0
    with system.scratch_dir(opts.scratch_parent, keep=opts.keep_scratch) as scratch:
        try:
            log(f"building helpers and kernels in {scratch}")
            built = tools.build_tools(scratch, opts)
            meta["tools"] = {k: str(v) if v else None for k, v in built.items()}
            for name in names:
                FaultMeasurement(FAULTS[name](built, opts), opts, rec, budget).run()
        except KeyboardInterrupt:
            log("interrupted: faults removed, partial results kept")
            meta["interrupted"] = True
            rc = 130
        finally:
            meta["finished"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
            meta["loadavg_end"] = os.getloadavg()
            meta["waited_for_quiet_s"] = round(budget.waited, 1)
            rec.save()
    print()
    print(analysis.render_text(rec.doc))
    log(f"results in {out}")
    return rc


def main(argv=None):
    opts = parse_args(argv)
    if opts.table:
        return print_table(opts)
    if opts.clean_stale:
        return clean_stale(opts)
    if opts.hpc_health_run:
        return through_hpc_health(opts)
    return measure(opts)


if __name__ == "__main__":
    sys.exit(main())
