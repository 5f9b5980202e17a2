#!/usr/bin/env python3
"""Proof by injected faults: does hpc-health say DEGRADED when, and only when,
performance degrades?

For each fault: a baseline of R clean "nights" (k samples each) becomes the
product's reference (``propose_reference``); the fault's strength is
calibrated to ~10 % and ~25 % degradation of the workload's main figure;
then faulty nights of both sizes and clean nights are run interleaved, every
night judged by ``decide_many`` exactly as ``hpc-health`` judges a run.
Detection rate, false-alarm rate and the minimum detectable change come out
per fault and size.  Needs root (namespaces, tc, cgroups, loop devices).

    python3 -m bench.fault_injection.run --quick                 # smoke test (repo root)
    python3 -m bench.fault_injection.run --out results.json      # full run
    python3 -m bench.fault_injection.run --table bench/fault_injection/results.json \
        --results-md bench/fault_injection/RESULTS.md            # the tables, as Markdown
"""

from __future__ import annotations

import argparse
import datetime as _dt
import glob
import json
import math
import os
import platform
import shutil
import sys
import time
from pathlib import Path

from hpc_health import localmpi as mpi_env
from hpc_health import stats

from . import analysis, faults, quiet
from .faults import FaultError, run
from .scenarios import SCENARIOS

HERE = Path(__file__).resolve().parent

DEFAULT_FAULTS = "memory,network,network-link,latency,io,slow-rank"

#: where a Spack lab may have installed the benchmarks (searched after PATH)
LAB_GLOBS = {
    "stream": ["/opt/lab/opt/*/stream-*/bin/stream_c.exe"],
    "osu_latency": ["/opt/lab/opt/*/osu-micro-benchmarks-*/libexec/osu-micro-benchmarks/mpi/pt2pt/"
                    "osu_latency"],
    "osu_bw": ["/opt/lab/opt/*/osu-micro-benchmarks-*/libexec/osu-micro-benchmarks/mpi/pt2pt/osu_bw"],
    "ior": ["/opt/lab/opt/*/ior-*/bin/ior"],
}
PATH_NAMES = {"stream": "stream_c.exe", "osu_latency": "osu_latency", "osu_bw": "osu_bw",
              "ior": "ior"}
ENV_NAMES = {"stream": "FI_STREAM", "osu_latency": "FI_OSU_LATENCY", "osu_bw": "FI_OSU_BW",
             "ior": "FI_IOR"}


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def find_binary(key, given):
    """Option, then environment variable, then PATH, then the lab's install tree."""
    for cand in (given, os.environ.get(ENV_NAMES[key])):
        if cand:
            return cand   # a wrong explicit path is reported, not replaced
    found = shutil.which(PATH_NAMES[key])
    if found:
        return found
    for pattern in LAB_GLOBS[key]:
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[-1]
    return None


def build_tools(scratch, opts):
    """Our C helpers and kernels, built into the scratch directory."""
    tools = {"scratch": scratch}
    bindir = scratch / "bin"
    bindir.mkdir()
    for name, src in (("memhog", "memhog.c"), ("triad", "triad.c")):
        run(["gcc", "-O2", "-Wall", "-Wextra", "-o", bindir / name, HERE / src])
        tools[name] = bindir / name
    run(["mpicc", "-O2", "-Wall", "-Wextra", "-shared", "-fPIC", "-o",
         bindir / "libpmpi_delay.so", HERE / "pmpi_delay.c"])
    tools["pmpi_delay"] = bindir / "libpmpi_delay.so"
    kbin = Path(mpi_env.build_kernels(scratch / "kernels"))
    tools["halo"], tools["barrier"] = kbin / "halo", kbin / "barrier"
    for key in LAB_GLOBS:
        tools[key] = find_binary(key, getattr(opts, key))
    return tools


class Recorder:
    """Results document, rewritten after every night so an interrupted run
    keeps what it measured."""

    def __init__(self, path, meta, append=False):
        self.path = Path(path)
        self.doc = {"meta": meta, "faults": {}}
        if append and self.path.exists():
            # Keep the faults measured before; the ones run now replace theirs.
            old = json.loads(self.path.read_text())
            self.doc["faults"] = old.get("faults", {})
            meta["earlier_runs"] = old["meta"].get("earlier_runs", []) + [
                {k: old["meta"].get(k) for k in ("started", "finished", "argv", "options")}]

    def fault(self, name):
        self.doc["faults"][name] = {"name": name, "status": "running", "nights": []}
        return self.doc["faults"][name]

    def save(self):
        # One line per night keeps the file small and still readable.
        lines = {}
        doc = {"meta": self.doc["meta"], "faults": {}}
        for name, fr in self.doc["faults"].items():
            fr = dict(fr)
            keys = []
            for i, n in enumerate(fr.get("nights", [])):
                key = f"@@night-{name}-{i}@@"
                lines[key] = json.dumps(n, default=_jsonable, separators=(",", ":"))
                keys.append(key)
            fr["nights"] = keys
            doc["faults"][name] = fr
        text = json.dumps(doc, indent=1, default=_jsonable)
        for key, line in lines.items():
            text = text.replace(f'"{key}"', line, 1)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(text + "\n")
        tmp.replace(self.path)


def _jsonable(o):
    if isinstance(o, Path):
        return str(o)
    if hasattr(o, "item"):
        return o.item()
    raise TypeError(type(o))


_waited = [0.0]


def wait_for_quiet(opts):
    """Wait for other processes to leave the CPUs, within the run's total
    waiting budget (--max-wait); False once that is spent."""
    left = opts.max_wait - _waited[0]
    if left <= 0:
        return False
    t = time.monotonic()
    ok = quiet.wait_quiet(opts.foreign_cpu, max_wait=left, log=log)
    _waited[0] += time.monotonic() - t
    return ok


def split_samples(k, rounds):
    """How many of a night's k samples each round takes (as even as can be)."""
    if not 1 <= rounds <= k:
        raise ValueError(f"--rounds must be between 1 and --samples ({k}), got {rounds}")
    return [k // rounds + (1 if r < k % rounds else 0) for r in range(rounds)]


def run_fault(sc, opts, rec):
    fr = rec.fault(sc.name)
    fr["what"] = sc.what
    fr["samples"], fr["baseline_runs"] = opts.samples, opts.baseline_runs
    fr["rounds"] = opts.rounds
    # Results files outlive changes to the statistics: say which one judged.
    fr["estimator"] = stats.ESTIMATOR
    try:
        wl = sc.workload()
    except FaultError as exc:
        fr.update(status="skipped", reason=str(exc))
        log(f"{sc.name}: skipped: {exc}")
        return
    fr.update(workload=wl.describe(), primary=wl.primary,
              metrics=[m.__dict__ for m in wl.metrics])
    k = opts.samples
    t0 = time.time()
    try:
        with sc.session() as renv:
            fr["session"] = sc.session_info
            clean_env = sc.clean_env()

            def chunk(kind, n_samples, strength=None):
                """n_samples of the workload in one go, the fault on or off;
                re-run while other processes used the CPUs (--reruns)."""
                for attempt in range(opts.reruns + 1):
                    t = time.time()
                    meter = quiet.CpuMeter()
                    info = {}
                    if strength is None:
                        values = wl.night(n_samples, renv, clean_env)
                    else:
                        with sc.inject(strength) as (env, info):
                            values = wl.night(n_samples, renv, env)
                    foreign, steal = meter.foreign()
                    if foreign <= opts.foreign_cpu or attempt == opts.reruns:
                        break
                    fr["reruns"] = fr.get("reruns", 0) + 1
                    log(f"{sc.name}: other processes used {foreign:.2f} cores during this "
                        f"{kind} run: discarded, re-run when quiet")
                    wait_for_quiet(opts)
                return {"t": t, "end": time.time(), "values": values, "info": info,
                        "foreign": foreign, "steal": steal}

            def finish(kind, phase, strength, parts):
                """The night record from its chunks (one, or one per round)."""
                values = {}
                for part in parts:
                    for name, vals in part["values"].items():
                        values.setdefault(name, []).extend(vals)
                foreign = max(part["foreign"] for part in parts)
                rec_n = {"phase": phase, "kind": kind, "t": round(parts[0]["t"], 1),
                         "seconds": round(sum(p["end"] - p["t"] for p in parts), 2),
                         "values": values, "foreign_cores": round(foreign, 3),
                         "steal_cores": round(max(part["steal"] for part in parts), 3)}
                if len(parts) > 1:
                    # how long the night's samples were spread over
                    rec_n["span_s"] = round(parts[-1]["end"] - parts[0]["t"], 1)
                if foreign > opts.foreign_cpu:
                    rec_n["loaded"] = True   # kept only because the re-runs ran out
                if strength is not None:
                    rec_n["strength"] = strength
                    rec_n["knob"] = sc.knob(strength)
                    rec_n["injected"] = parts[-1]["info"]
                return rec_n

            def night(kind, phase, strength=None):
                """One night of k samples taken in one go (calibration)."""
                rec_n = finish(kind, phase, strength, [chunk(kind, k, strength)])
                fr["nights"].append(rec_n)
                return rec_n

            def nights(specs, done=None):
                """The nights ``specs`` ((kind, strength, phase) each), their
                k samples taken in --rounds rounds: every round visits every
                night in turn, so each night's samples are spread over the
                whole block as a session's are over its --rounds.  A night
                is recorded when its last round is in; ``done(record)``
                then."""
                counts = split_samples(k, opts.rounds)
                parts = [[] for _ in specs]
                phases = sorted({phase for _, _, phase in specs})
                fr["in_progress"] = {"phase": "+".join(phases), "nights": len(specs),
                                     "rounds": opts.rounds, "round": 0}
                for r, n_r in enumerate(counts):
                    fr["in_progress"]["round"] = r + 1
                    for i, (kind, strength, phase) in enumerate(specs):
                        parts[i].append(chunk(kind, n_r, strength))
                        if r == len(counts) - 1:
                            rec_n = finish(kind, phase, strength, parts[i])
                            fr["nights"].append(rec_n)
                            if done:
                                done(rec_n)
                            rec.save()
                    if opts.rounds > 1:
                        log(f"{sc.name}: {fr['in_progress']['phase']}: round {r + 1}/"
                            f"{opts.rounds} of {len(specs)} nights done")
                        rec.save()
                del fr["in_progress"]

            def reference_from(phase):
                """The product's references from the clean nights of ``phase``."""
                runs = [n for n in fr["nights"] if n["phase"] == phase]
                refs = {m.name: analysis.reference_for(runs, m) for m in wl.metrics}
                fr["reference" if phase == "baseline" else f"{phase}_reference"] = {
                    name: r.to_dict() for name, r in refs.items()}
                for name, r in refs.items():
                    log(f"{sc.name}: {phase} reference {name} = {r.value:.4g} {r.unit}, bound "
                        f"±{100 * r.upper:.1f} %, between-run "
                        f"{100 * (r.between_run_spread or 0):.1f} %, within-run "
                        f"{100 * (r.within_run_spread or 0):.1f} %")
                return refs

            wait_for_quiet(opts)
            log(f"{sc.name}: workload {wl.name}; warm-up")
            wl.night(k, renv, clean_env)   # first-touch, caches, page-ins: not a night
            # Interleaved: a short pilot sets the fault's scale and what to
            # trial; the reference itself comes from baseline nights spread
            # through the trial block, so it sees the same stretch of the
            # machine's life as the nights it judges.
            interleaved = opts.baseline == "interleaved"
            first = "pilot" if interleaved else "baseline"
            nights([(analysis.CLEAN, None, first)]
                   * (opts.pilot_runs if interleaved else opts.baseline_runs))
            refs = reference_from(first)
            sc.set_clean(refs)
            fr["baseline_placement"] = opts.baseline

            direction = next(m.direction for m in wl.metrics if m.name == wl.primary)
            promised = analysis.promised_mdc(refs[wl.primary], direction, k, len(wl.metrics))
            fr["promised_mdc"] = promised
            sizes, skipped = analysis.sizes_to_trial(promised)
            if opts.trial_unclaimed:
                sizes, skipped = dict(analysis.SIZES), {}
            fr["not_trialled"] = skipped
            for size in skipped:
                log(f"{sc.name}: {size} not trialled: the reference promises an MDC of "
                    f"{100 * promised:.1f} % with {k} samples, so it is not claimed "
                    f"(--trial-unclaimed runs it anyway)")
            fr["calibration"] = {}
            for size, target in sizes.items():
                points = []
                s = sc.initial_strength(target)
                for _ in range(opts.calibration_steps):
                    s = min(sc.s_max, max(sc.s_min, s))
                    clean_vals, faulty_vals = [], []
                    for _ in range(opts.calibration_pairs):
                        clean_vals += night(analysis.CLEAN, "calibration")["values"][wl.primary]
                        faulty_vals += night(size, "calibration", s)["values"][wl.primary]
                    # The product's own location: a pooled median jumps between
                    # launch levels (slow rank, 1.5/2.8/1.9 us of delay read as
                    # 13/77/10 %), which misled the knob search.
                    e = analysis.worse_by(stats.location(faulty_vals),
                                          stats.location(clean_vals), direction)
                    points.append((s, e))
                    log(f"{sc.name}: calibrating {size}: {sc.knob(s)} -> {100 * e:+.1f} %")
                    if abs(math.log((1 + max(e, -0.99)) / (1 + target))) \
                            <= opts.calibration_tolerance:
                        break
                    nxt = analysis.next_strength(points, target, sc.s_min, sc.s_max, sc.slope)
                    if nxt is None:
                        break
                    s = nxt
                s, e = analysis.best_point(points, target)
                how = "closest try"
                if abs(math.log((1 + max(e, -0.99)) / (1 + target))) > opts.calibration_tolerance:
                    fitted = analysis.fit_strength(points, target, sc.s_min, sc.s_max)
                    if fitted is not None:
                        s, e, how = fitted, None, "power-law fit through all tries"
                fr["calibration"][size] = {"target": target, "points": points, "strength": s,
                                           "knob": sc.knob(s), "calibrated_change": e,
                                           "chosen_by": how}
                log(f"{sc.name}: {size} -> {sc.knob(s)} ({how})")
                rec.save()

            def judged(n):
                n["verdicts"] = analysis.judge(refs, wl.metrics, n["values"])
                v = n["verdicts"][wl.primary]
                log(f"{sc.name}: {n['kind']:>5}: {wl.primary} {v['value']:.4g} "
                    f"({100 * v['worse_by']:+.1f} %) {v['verdict']}")

            order = analysis.schedule(opts.clean_runs, opts.trials, tuple(sizes))
            specs = [(kind, None if kind == analysis.CLEAN
                      else fr["calibration"][kind]["strength"], "trial") for kind in order]
            if not interleaved:
                nights(specs, judged)
            else:
                nights(analysis.interleave(
                    specs, [(analysis.CLEAN, None, "baseline")] * opts.baseline_runs))
                refs = reference_from("baseline")
                fr["promised_mdc"] = analysis.promised_mdc(refs[wl.primary], direction, k,
                                                           len(wl.metrics))
                fr["not_trialled"] = {size: fr["promised_mdc"] for size in skipped}
                for n in fr["nights"]:
                    if n["phase"] == "trial":
                        judged(n)
        fr["status"] = "ok"
    except FaultError as exc:
        fr.update(status="skipped", reason=str(exc))
        log(f"{sc.name}: skipped: {exc}")
    except KeyboardInterrupt:
        fr["status"] = "interrupted"
        raise
    except Exception as exc:
        fr.update(status="error", reason=f"{type(exc).__name__}: {exc}")
        log(f"{sc.name}: ERROR: {exc}")
    finally:
        fr["seconds"] = round(time.time() - t0, 1)
        rec.save()


def apply_quick(opts):
    """Smoke-test sizes: every code path, no statistics worth reading."""
    opts.trials, opts.baseline_runs, opts.clean_runs, opts.pilot_runs = 2, 4, 3, 2
    opts.samples, opts.calibration_steps, opts.calibration_pairs = 2, 2, 1
    opts.osu_lat_iters, opts.osu_bw_iters = 2000, 4
    opts.halo_lat_iters, opts.halo_bw_iters, opts.halo_quota_iters = 500, 10, 200
    opts.barrier_iters, opts.io_mib, opts.link_probe = 5000, 128, 3


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--faults", default=DEFAULT_FAULTS,
                   help=f"comma-separated, of: {', '.join(SCENARIOS)} (default {DEFAULT_FAULTS})")
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
    p.add_argument("--out", default=str(HERE / "results.json"))
    p.add_argument("--append", action="store_true",
                   help="keep the other faults already in --out (e.g. to re-measure one "
                        "fault with more --samples)")
    p.add_argument("--table", metavar="JSON", help="only render the table of a results file")
    p.add_argument("--results-md", metavar="FILE",
                   help="with --table: write the tables as Markdown to FILE (RESULTS.md, "
                        "which the README links; no README is ever rewritten)")
    p.add_argument("--rejudge", action="store_true",
                   help="with --table: judge the recorded nights again with the current "
                        "statistics (references from their baseline nights) before "
                        "rendering; never with --readme, the README shows what was judged "
                        "when the nights were run")
    p.add_argument("--kernels-only", action="store_true",
                   help="ignore STREAM/OSU/IOR binaries; use our kernels and probes")
    p.add_argument("--scratch-parent", default=None, help="where the scratch directory goes")
    p.add_argument("--keep-scratch", action="store_true")
    p.add_argument("--clean-stale", action="store_true",
                   help="remove what runs killed with SIGKILL left behind (objects named "
                        "after a dead PID) and exit")
    p.add_argument("--io-backing", default=None,
                   help="directory for the loop image (default /dev/shm, else scratch)")
    p.add_argument("--io-mib", type=int, default=1024, help="IOR block size per repetition")
    for key in LAB_GLOBS:
        p.add_argument("--" + key.replace("_", "-"), dest=key, default=None,
                       help=f"path to {PATH_NAMES[key]} (or ${ENV_NAMES[key]})")
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


def results_markdown(doc, labels):
    """RESULTS.md: the summary per fault and the full table, from results.json."""
    return ("# Fault injection: measured results\n\n"
            "Generated from `results.json` by `python -m bench.fault_injection.run --table "
            "bench/fault_injection/results.json --results-md bench/fault_injection/RESULTS.md`; "
            "the method and the commands are in README.md.\n\n"
            "## Summary (the ~25 % size of each fault)\n\n"
            f"{analysis.render_summary(doc, labels)}\n\n"
            f"## Every fault and size\n\n{analysis.render_table(doc)}\n")


def _scratch_parents(opts):
    return [opts.scratch_parent] if opts.scratch_parent else None


def _image_dirs(opts):
    return ["/dev/shm"] + ([opts.io_backing] if opts.io_backing else [])


def clean_stale(opts):
    """Remove what killed runs left behind; exit 1 if something stays."""
    if os.geteuid() != 0:
        raise SystemExit("needs root: network namespaces, cgroups and loop devices")
    stale = faults.find_stale(_scratch_parents(opts), _image_dirs(opts))
    if not stale:
        log("nothing left behind by earlier runs")
        return 0
    left = faults.clean_stale(stale, log=log)
    return 1 if left else 0


def main(argv=None):
    opts = parse_args(argv)
    if opts.table:
        doc = json.loads(Path(opts.table).read_text())
        if opts.rejudge:
            if opts.results_md:
                raise SystemExit("--rejudge and --results-md: RESULTS.md keeps the verdicts "
                                 "the nights were given when they ran")
            doc = analysis.rejudge(doc)
        print(analysis.render_text(doc))
        table = analysis.render_table(doc)
        print()
        print(table)
        if opts.results_md:
            labels = {name: cls.label for name, cls in SCENARIOS.items()}
            Path(opts.results_md).write_text(results_markdown(doc, labels))
        return 0
    if opts.clean_stale:
        return clean_stale(opts)
    names = [n.strip() for n in opts.faults.split(",") if n.strip()]
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise SystemExit(f"unknown fault(s) {unknown}; known: {', '.join(SCENARIOS)}")
    if os.geteuid() != 0:
        raise SystemExit("needs root: network namespaces, tc, cgroups and loop devices")

    stale = faults.find_stale(_scratch_parents(opts), _image_dirs(opts))
    if stale:
        log("objects of an earlier run that was killed are still there (run.py "
            "--clean-stale removes them): " + ", ".join(f"{k} {w}" for k, w in stale))
    faults.install_signal_handlers()
    meta = {"started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "host": platform.node(), "kernel": platform.release(),
            "cpus": os.cpu_count(), "argv": sys.argv[1:],
            "alpha": stats.ALPHA, "power": stats.POWER,
            "episode_floor": stats.EPISODE_FLOOR,
            "options": {k: v for k, v in vars(opts).items() if k not in ("table", "results_md")},
            "loadavg_start": os.getloadavg()}
    rec = Recorder(opts.out, meta, append=opts.append)
    rc = 0
    with faults.scratch_dir(opts.scratch_parent, keep=opts.keep_scratch) as scratch:
        try:
            log(f"building helpers and kernels in {scratch}")
            tools = build_tools(scratch, opts)
            meta["tools"] = {k: str(v) if v else None for k, v in tools.items()}
            for name in names:
                run_fault(SCENARIOS[name](tools, opts), opts, rec)
        except KeyboardInterrupt:
            log("interrupted: faults removed, partial results kept")
            meta["interrupted"] = True
            rc = 130
        finally:
            meta["finished"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
            meta["loadavg_end"] = os.getloadavg()
            meta["waited_for_quiet_s"] = round(_waited[0], 1)
            rec.save()
    print()
    print(analysis.render_text(rec.doc))
    log(f"results in {opts.out}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
