"""Real nightly series through the product: does ``hpc-health run`` say
``DRIFTING`` after a sustained step, how soon, and does it name the night
the step began?

In a throw-away checkout root and store (the fault bench's sandbox), short
nights of one check are run with ``hpc-health run --site local -- -n
CHECK``, the fault made by one of the fault bench's mechanisms
(``--fault``):

``pmpi``
    ``BarrierLatency`` (one rank), figure ``mpi_init``: MPI_Init's time, the
    launcher's start-up (it moved less than 15 % between runs here, where
    the halo and OSU figures of this shared VM move by 50 % and more),
    delayed by the PMPI interposer preloaded into the ranks only (clean
    nights preload it with no delay).
``memory``
    ``StreamTriadScaling`` with one thread (bound to core 0), figure
    ``triad_1t``, against the paced memory-copy hog (memhog.c) pinned to
    the other core: the memory bandwidth it takes is the fault.

First ``--clean`` clean nights, the history every series starts from
(references captured from the first five when ``capture`` accepts them: the
drift test needs none).  Each series is a copy of that store followed by
faulty nights whose strength makes the figure ``--worse`` worse than the
clean nights' median (0.10 and 0.05; the strength calibrated on three
nights in a scratch copy first, as a delay is not all added to MPI_Init's
time and a hog's rate does not map linearly onto bandwidth), one
``hpc-health run`` a night, until the night's ``run.json`` names the figure
``DRIFTING`` or ``--nights`` faulty nights have passed.  Recorded per
series: the night ``DRIFTING`` first appeared, the run it named as the
start and whether that is the first faulty night (+-1).  The clean nights
are judged too: a ``DRIFTING`` among them is a false alarm.

A night that other processes disturbed (more than a quarter of a core
besides the run's and the hog's) is re-run when the machine is quiet, as in
the fault bench.

::

    python -m bench.drift.real --fault pmpi --series 20
    python -m bench.drift.real --fault memory --series 20 --append
    python -m bench.drift.table          # the README tables from both results
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.fault_injection import quiet
from bench.fault_injection.hpc_health_run import EXIT_DEGRADED, EXIT_DRIFTING, SITE, Plan, Sandbox
from bench.fault_injection.measure import QuietBudget
from bench.fault_injection.system import install_signal_handlers, memory_hog
from bench.fault_injection.tools import build_memhog, build_pmpi_delay

#: a night other processes used more cores of is re-run, this many times
RERUNS = 3
FOREIGN_CPU = 0.25


class PmpiDelay:
    """MPI_Init delayed in the ranks of ``BarrierLatency``."""

    name, check, figure, unit, higher = "pmpi", "BarrierLatency", "mpi_init", "s", False
    options = ()
    what = "MPI_Init delayed"

    def __init__(self, bindir):
        self.lib = build_pmpi_delay(bindir)

    def initial(self, worse, base):
        return worse * base * 1e9           # ns: the whole step as a delay

    def setting(self, strength):
        return f"{strength / 1e6:.1f} ms"

    @contextlib.contextmanager
    def apply(self, strength):
        """The ranks' environment while the fault (*strength* 0: clean) is on."""
        yield {"LD_PRELOAD": str(self.lib), "FI_INIT_DELAY_NS": str(int(strength))}


class MemoryHog:
    """A paced memory-copy hog on core 1 against one STREAM thread on core 0."""

    name, check, figure, unit, higher = "memory", "StreamTriadScaling", "triad_1t", "MB/s", True
    options = ("-S", "StreamTriadScaling.thread_counts=1")
    what = "a paced memory-copy hog on the other core"

    def __init__(self, bindir):
        self.exe = build_memhog(bindir)

    def initial(self, worse, base):
        return 8000.0 * worse / 0.14        # MB/s: ~8 GB/s cost ~14 % on the first guest

    def setting(self, strength):
        return f"{strength:.0f} MB/s"

    @contextlib.contextmanager
    def apply(self, strength):
        if strength <= 0:
            yield None
            return
        with memory_hog(self.exe, strength, cpu=1):
            yield None


MECHANISMS = {m.name: m for m in (PmpiDelay, MemoryHog)}


def worse_by(mech, value, base):
    """How much worse *value* is than *base*, as a fraction (>0: worse)."""
    return 1 - value / base if mech.higher else value / base - 1


def night(box, mech, strength, log):
    """One ``hpc-health run`` of the check with the fault at *strength*
    (0: clean); (run id, exit code)."""
    for attempt in range(RERUNS + 1):
        meter = quiet.CpuMeter()
        before = set(box.run_ids())
        with mech.apply(strength) as env:
            res = box.hpc_health("run", "--site", SITE, "--", "-n", mech.check, *mech.options,
                                 ranks_env=env)
        new = sorted(set(box.run_ids()) - before)
        if res.returncode not in (0, EXIT_DEGRADED, EXIT_DRIFTING) or len(new) != 1:
            raise RuntimeError(f"hpc-health run exited {res.returncode} with runs {new}:\n"
                               f"{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
        # The hog was waited for: its CPU time counts as the bench's own.
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
    """The results file: every part of the bench (``--append`` adds one).
    Saved after every night of a long clean part: a stop mid-write must not
    take the earlier parts with it."""
    part = path.with_name(path.name + ".part")
    part.write_text(json.dumps({"parts": [*earlier, record]}, indent=1) + "\n")
    part.replace(path)


def measured(box, run_id):
    """{figure: value} of the night's report."""
    report = json.loads((box.store / "runs" / SITE / run_id / "report.json").read_text())
    return {key.split(":")[-1]: float(vals[0])
            for run in report["runs"] for tc in run["testcases"]
            for key, vals in (tc.get("perfvalues") or {}).items() if vals and vals[0] is not None}


def value(box, run_id, figure, found=None):
    """The night's *figure*; *found*: its :func:`measured`, when read already."""
    found = measured(box, run_id) if found is None else found
    if figure not in found:
        raise RuntimeError(f"run {run_id} has no {figure}")
    return found[figure]


def _drifting(box, run_id):
    meta = json.loads((box.store / "runs" / SITE / run_id / "run.json").read_text())
    return {d["variable"]: d for d in meta.get("drifting") or []}


def calibrated(box, mech, base, worse, base_value, scratch, log, nights=3, tries=3):
    """The strength that makes the figure *worse* worse than *base_value*,
    by measurement, scaled by the change it made on *nights* nights in a
    scratch copy of the store, up to *tries* times.  (strength, the change
    measured with it)."""
    strength = mech.initial(worse, base_value)
    store, box.store = box.store, scratch / "calibration"
    try:
        for _ in range(tries):
            shutil.rmtree(box.store, ignore_errors=True)
            shutil.copytree(base, box.store, symlinks=True)
            got = sorted(value(box, night(box, mech, strength, log)[0], mech.figure)
                         for _ in range(nights))
            change = worse_by(mech, got[len(got) // 2], base_value)
            log(f"{mech.setting(strength)}: {mech.figure} {100 * change:.1f} % worse (wanted "
                f"{100 * worse:.0f} %)")
            if abs(change - worse) <= 0.01 or change <= 0:
                break
            strength *= worse / change
        return strength, change
    finally:
        shutil.rmtree(box.store, ignore_errors=True)
        box.store = store


def clean_nights(box, mech, record, count, log, saved=lambda: None):
    """*count* clean nights into the box's store, references captured from
    the first five; *saved* called after each."""
    for n in range(count):
        run_id, code = night(box, mech, 0, log)
        found = _drifting(box, run_id)
        # Every figure of the check, for the false-alarm count per figure-night.
        got = measured(box, run_id)
        record["clean"].append({"run": run_id, "exit_code": code,
                                "value": value(box, run_id, mech.figure, got),
                                "figures": sorted(got), "drifting": sorted(found)})
        log(f"clean night {n + 1}/{count}: {run_id} exit {code}, {mech.figure} "
            f"{record['clean'][-1]['value']:.4g} {mech.unit}"
            + (f", DRIFTING {sorted(found)}" if found else ""))
        if n == 4:
            ids = [c["run"] for c in record["clean"]]
            cap = box.hpc_health("reference", "capture", "--site", SITE, "--from",
                                 f"{ids[0]}..{ids[-1]}", "--write")
            record["reference_captured"] = cap.returncode == 0
            log("references captured from the first five nights" if cap.returncode == 0
                else "capture refused the first five nights: no references (not needed)")
        saved()


def series(box, mech, strength, worse, nights, log):
    """Faulty nights until the figure is DRIFTING or *nights* have passed."""
    entry = {"worse": worse, "strength": strength, "nights": [], "found_on": None}
    for n in range(1, nights + 1):
        run_id, code = night(box, mech, strength, log)
        found = _drifting(box, run_id)
        entry["nights"].append({"run": run_id, "exit_code": code,
                                "value": value(box, run_id, mech.figure),
                                "drifting": sorted(found)})
        if mech.figure in found:
            first = entry["nights"][0]["run"]
            since = found[mech.figure]["since"]
            runs = box.run_ids()
            entry.update(found_on=n, since=since, first_faulty=first,
                         located=abs(runs.index(since) - runs.index(first)) <= 1,
                         change=found[mech.figure]["change"])
            break
    return entry


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.drift.real",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--fault", choices=sorted(MECHANISMS), default="pmpi",
                   help="the mechanism and the check it is measured on (default pmpi)")
    p.add_argument("--worse", type=float, action="append",
                   help="step size, fraction worse (repeatable; default 0.10 and 0.05)")
    p.add_argument("--series", type=int, default=20,
                   help="series per step size (0: clean nights only, for the false-alarm count)")
    p.add_argument("--clean", type=int, default=12, help="clean nights before the steps")
    p.add_argument("--nights", type=int, default=10, help="faulty nights at most per series")
    p.add_argument("--json", type=Path, default=Path(__file__).with_name("real.json"))
    p.add_argument("--scratch", type=Path, help="keep the stores here (default: removed)")
    p.add_argument("--append", action="store_true",
                   help="add this bench's nights to the results file as another part")
    args = p.parse_args(argv)
    # SIGTERM and SIGHUP unwind as an interrupt does: the hog is stopped and
    # the nights so far are saved.
    install_signal_handlers()
    sizes = args.worse or [0.10, 0.05]
    scratch = args.scratch or Path(tempfile.mkdtemp(prefix="drift-real-"))
    scratch.mkdir(parents=True, exist_ok=True)
    log = lambda line: print(time.strftime("%H:%M:%S ") + line, flush=True)   # noqa: E731
    bindir = scratch / "bin"
    bindir.mkdir(exist_ok=True)
    mech = MECHANISMS[args.fault](bindir)
    box = Sandbox(scratch, Plan(), log)
    box.budget = QuietBudget(FOREIGN_CPU, 600.0, log)
    record = {"fault": mech.name, "what": mech.what, "check": mech.check,
              "options": list(mech.options), "figure": mech.figure, "unit": mech.unit,
              "higher_is_better": mech.higher, "clean_nights": args.clean,
              "max_nights": args.nights, "series": [], "clean": [], "strengths": {}}
    earlier = (json.loads(args.json.read_text()).get("parts", [])
               if args.append and args.json.exists() else [])
    t0 = time.monotonic()
    try:
        box.budget.wait()
        clean_nights(box, mech, record, args.clean, log,
                     saved=lambda: save(args.json, record, earlier))
        values = sorted(c["value"] for c in record["clean"])
        record["clean_median"] = base_value = values[len(values) // 2]
        base = box.store
        for worse in sizes if args.series else []:
            strength, change = calibrated(box, mech, base, worse, base_value, scratch, log)
            record["strengths"][str(worse)] = {"strength": strength,
                                               "setting": mech.setting(strength),
                                               "change_measured": change}
            for k in range(args.series):
                box.store = scratch / f"series-{worse}-{k}"
                shutil.copytree(base, box.store, symlinks=True)
                entry = series(box, mech, strength, worse, args.nights, log)
                record["series"].append(entry)
                log(f"{100 * worse:.0f} % worse, series {k + 1}/{args.series}: "
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
