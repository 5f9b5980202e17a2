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
``tbf``
    ``OsuPointToPoint`` ``osu_bw`` at 4 MiB, figure ``bw_4MiB``, the run
    inside a private network namespace with the copied site's Open MPI on
    TCP over its ``lo``; ``lo`` held at a link rate by ``tc tbf`` on every
    night, the fault a lower rate.
``blkio``
    ``IorBandwidth`` file per process with ``O_DIRECT``, figure
    ``write_bw``, the copied site's scratch on ext4 on a loop device, the run in
    a cgroup-v1 blkio cgroup whose rate on that device is held on every
    night, the fault a lower rate.

For ``tbf`` and ``blkio`` the session first runs ``--probe`` nights
unheld, then holds the rate at ``--held-fraction`` of the figure they
measured: unheld, this VM's loopback and tmpfs-backed loop device run as
fast as its two vCPUs copy, a figure of the CPUs and not of a link or a
disk.

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
    python -m bench.drift.real --fault tbf --series 20 --append
    python -m bench.drift.real --fault blkio --series 20 --append
    python -m bench.drift.table          # the README tables from both results
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.fault_injection import analysis, quiet, system
from bench.fault_injection.hpc_health_run import EXIT_DEGRADED, EXIT_DRIFTING, SITE, Plan, Sandbox
from bench.fault_injection.measure import QuietBudget
from bench.fault_injection.system import install_signal_handlers, memory_hog
from bench.fault_injection.tools import build_memhog, build_pmpi_delay

#: a night other processes used more cores of is re-run, this many times
RERUNS = 3
FOREIGN_CPU = 0.25


class Mechanism:
    """What a fault needs around the bench: by default nothing set up, and
    ``hpc-health run`` started as it is."""

    options: tuple = ()
    #: the command ``hpc-health run`` is started under, and its added environment
    prefix: tuple = ()
    env: dict = {}
    #: what the session set up, for the results file
    session_info: dict = {}
    #: the strengths calibration may try
    bounds: tuple = (0.0, float("inf"))

    @contextlib.contextmanager
    def session(self, box, scratch, log):
        yield


class PmpiDelay(Mechanism):
    """MPI_Init delayed in the ranks of ``BarrierLatency``."""

    name, check, figure, unit, higher = "pmpi", "BarrierLatency", "mpi_init", "s", False
    what = "MPI_Init delayed"

    def __init__(self, bindir, args):
        self.lib = build_pmpi_delay(bindir)

    def initial(self, worse, base):
        return worse * base * 1e9           # ns: the whole step as a delay

    def setting(self, strength):
        return f"{strength / 1e6:.1f} ms"

    @contextlib.contextmanager
    def apply(self, strength):
        """The ranks' environment while the fault (*strength* 0: clean) is on."""
        yield {"LD_PRELOAD": str(self.lib), "FI_INIT_DELAY_NS": str(int(strength))}


class MemoryHog(Mechanism):
    """A paced memory-copy hog on core 1 against one STREAM thread on core 0."""

    name, check, figure, unit, higher = "memory", "StreamTriadScaling", "triad_1t", "MB/s", True
    options = ("-S", "StreamTriadScaling.thread_counts=1")
    what = "a paced memory-copy hog on the other core"

    def __init__(self, bindir, args):
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


class HeldRate(Mechanism):
    """A rate the figure is held at on every night, clean ones too, that the
    fault lowers: a fabric's links and a disk set such a rate, while this
    VM's loopback and tmpfs-backed devices run as fast as two shared vCPUs
    copy (IOR's unheld write bandwidth: 2 248 to 4 435 MiB/s over three
    nights here).  The session first measures the
    figure unheld (``--probe`` nights in a scratch store), then holds the
    rate at ``--held-fraction`` of it; the fault's strength is the fraction
    of that rate it takes away."""

    #: the held rate, as a fraction of the figure measured unheld
    fraction = 0.5
    #: a step takes at most 90 % of the held rate away
    bounds = (0.0, 0.9)

    def __init__(self, bindir, args):
        self.fraction, self.probes = args.held_fraction or self.fraction, args.probe

    def initial(self, worse, base):
        return worse

    def setting(self, strength):
        return f"{(1 - strength) * self.held / 1e6:.1f} {self.rate_unit}"

    def prepared(self, box, scratch):
        """Context: what the held rate lives in (sets ``prefix`` and ``env``)."""
        raise NotImplementedError

    def hold(self, rate):
        """Context: the rate held for the session."""
        raise NotImplementedError

    def lower(self, rate):
        """Context: the held rate lowered to *rate*, set back afterwards."""
        raise NotImplementedError

    @contextlib.contextmanager
    def session(self, box, scratch, log):
        with self.prepared(box, scratch):
            store, box.store = box.store, scratch / "probe"
            try:
                free = sorted(value(box, night(box, self, 0, log)[0], self.figure)
                              for _ in range(self.probes))
            finally:
                shutil.rmtree(box.store, ignore_errors=True)
                box.store = store
            self.held = self.fraction * self.rate_of(free[len(free) // 2])
            log(f"{self.figure} unheld: {', '.join(f'{v:.4g}' for v in free)} {self.unit}; "
                f"held at {self.held / 1e6:.1f} {self.rate_unit} ({self.fraction:g} of the median)")
            with self.hold(self.held):
                self.session_info = {"unheld": free, "held_fraction": self.fraction,
                                     "held": f"{self.held / 1e6:.1f} {self.rate_unit}"}
                yield

    @contextlib.contextmanager
    def apply(self, strength):
        if strength <= 0:
            yield None
            return
        with self.lower((1 - strength) * self.held):
            yield None


def _edited(path, old, new):
    """Replace *old* by *new* in the throw-away root's copy of a site file."""
    text = path.read_text()
    if old not in text:
        raise RuntimeError(f"{path}: {old!r} not found; the bench's edit no longer applies")
    path.write_text(text.replace(old, new))


class LinkRate(HeldRate):
    """``osu_bw`` at 4 MiB between two ranks over TCP on the loopback of a
    private network namespace, ``lo`` held at a link rate by ``tc tbf``."""

    name, unit, higher = "tbf", "MB/s", True
    check = "OsuPointToPoint%benchmark=osu_bw%placement=intra_node"
    figure = "bw_4MiB"
    options = ("-S", "OsuPointToPoint.sizes=4194304")
    what = "a tbf rate on lo (Open MPI over TCP in a network namespace) lowered"
    rate_unit = "Mbit/s"

    def rate_of(self, value):
        return value * 1e6 * 8                  # MB/s of payload -> bit/s on the wire

    @contextlib.contextmanager
    def prepared(self, box, scratch):
        # The partition's own Open MPI settings are shared memory only: the
        # bench's copy of the site goes over TCP on lo instead.
        _edited(box.root / "site_configs" / SITE / "reframe_config.py",
                "['OMPI_MCA_btl', 'self,vader'],",
                "['OMPI_MCA_btl', 'self,tcp'], ['OMPI_MCA_btl_tcp_if_include', 'lo'], "
                "['OMPI_MCA_oob_tcp_if_include', 'lo'],")
        with system.network_namespace(f"{system.NETNS_PREFIX}{os.getpid()}") as ns:
            system.check_tbf(ns)
            self.ns, self.prefix = ns, ("ip", "netns", "exec", ns)
            yield

    def hold(self, rate):
        return system.tbf_on_lo(self.ns, rate)

    def lower(self, rate):
        return system.tbf_rate(self.ns, rate, self.held)


class IoThrottle(HeldRate):
    """IOR's write bandwidth (file per process, ``O_DIRECT``) on ext4 on a
    loop device, ``hpc-health run`` started in a cgroup-v1 blkio cgroup
    whose write and read rates on that device are held.  Without
    ``O_DIRECT`` most of IOR's data reached the device through kernel
    threads, which no cgroup throttles (455 of 1 611 MB a night went
    through the cgroup here), and the read-back came from the page cache."""

    name, unit, higher = "blkio", "MiB/s", True
    check = "IorBandwidth%mode=posix_fpp"
    figure = "write_bw"
    # 512 MiB a repetition, and a tenth of the unheld rate: a write takes
    # over a second, and the clean nights' figure stayed within 0.5 % (at
    # 0.3 of it, a lowered rate's effect wandered from 4 to 24 % between
    # nights).
    options = ("-S", "IorBandwidth.block_size=64m", "-S", "IorBandwidth.direct_io=true")
    fraction = 0.1
    what = "a blkio.throttle rate on a loop device lowered (IOR O_DIRECT)"
    rate_unit = "MB/s"
    #: the loop file system: IOR's files (2 ranks x 64 MiB x 4 segments) and room
    size_mib = 1024

    def rate_of(self, value):
        return value * (1 << 20)                # MiB/s -> B/s

    @contextlib.contextmanager
    def prepared(self, box, scratch):
        mnt = scratch / "io-mnt"
        with system.loop_filesystem(system.backing_dir_default(scratch), self.size_mib, mnt) \
                as (_, majmin), \
                system.cgroup_v1("blkio", f"{system.CGROUP_PREFIX}{os.getpid()}") as cg:
            _edited(box.root / "site_configs" / SITE / "site.yaml",
                    "scratch: /tmp/hpc-health-scratch", f"scratch: {mnt}")
            self.majmin, self.cg = majmin, cg
            # The whole run joins the cgroup; the rule holds only this device.
            self.prefix = (str(system.rank_wrapper_path()),)
            self.env = {"FI_CGROUP_PROCS": str(cg / "cgroup.procs")}
            yield

    def hold(self, rate):
        return system.blkio_throttle(self.cg, self.majmin, read_bps=rate, write_bps=rate)

    def lower(self, rate):
        return system.blkio_rate(self.cg, self.majmin, rate, self.held)


MECHANISMS = {m.name: m for m in (PmpiDelay, MemoryHog, LinkRate, IoThrottle)}


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
                                 ranks_env=env, prefix=mech.prefix, env=mech.env)
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


def calibrated(box, mech, base, worse, base_value, scratch, log, nights=3, tries=4):
    """The strength that makes the figure *worse* worse than *base_value*,
    by measurement: each try's change is the median of *nights* nights in a
    scratch copy of the store, and the next strength is the fault bench's
    step from all tries so far (a power law through the two nearest, the
    strength doubled after a change inside the noise), up to *tries* times.
    (strength, the change measured with it)."""
    strength = mech.initial(worse, base_value)
    store, box.store = box.store, scratch / "calibration"
    tried = []
    try:
        for attempt in range(tries):
            shutil.rmtree(box.store, ignore_errors=True)
            shutil.copytree(base, box.store, symlinks=True)
            got = sorted(value(box, night(box, mech, strength, log)[0], mech.figure)
                         for _ in range(nights))
            change = worse_by(mech, got[len(got) // 2], base_value)
            log(f"{mech.setting(strength)}: {mech.figure} {100 * change:.1f} % worse (wanted "
                f"{100 * worse:.0f} %)")
            tried.append((strength, change))
            # The last strength tried is the one returned, with its change.
            nxt = (None if abs(change - worse) <= 0.01 or attempt == tries - 1
                   else analysis.next_strength(tried, worse, *mech.bounds))
            if nxt is None:
                break
            strength = nxt
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


def nights(box, mech, args, record, saved, scratch, log):
    """The clean nights, then per step size the calibration and the series."""
    clean_nights(box, mech, record, args.clean, log, saved=saved)
    values = sorted(c["value"] for c in record["clean"])
    record["clean_median"] = base_value = values[len(values) // 2]
    base = box.store
    for worse in (args.worse or [0.10, 0.05]) if args.series else []:
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
            saved()
    box.store = base


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
    p.add_argument("--held-fraction", type=float,
                   help="tbf, blkio: the rate held on every night, as a fraction of the "
                        "figure measured unheld (default tbf 0.5, blkio 0.1)")
    p.add_argument("--probe", type=int, default=3,
                   help="tbf, blkio: unheld nights that measure that figure (default 3)")
    p.add_argument("--append", action="store_true",
                   help="add this bench's nights to the results file as another part")
    args = p.parse_args(argv)
    # SIGTERM and SIGHUP unwind as an interrupt does: the hog is stopped and
    # the nights so far are saved.
    install_signal_handlers()
    scratch = args.scratch or Path(tempfile.mkdtemp(prefix="drift-real-"))
    scratch.mkdir(parents=True, exist_ok=True)
    log = lambda line: print(time.strftime("%H:%M:%S ") + line, flush=True)   # noqa: E731
    bindir = scratch / "bin"
    bindir.mkdir(exist_ok=True)
    mech = MECHANISMS[args.fault](bindir, args)
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
        with mech.session(box, scratch, log):
            record["session"] = mech.session_info
            nights(box, mech, args, record, lambda: save(args.json, record, earlier), scratch, log)
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
