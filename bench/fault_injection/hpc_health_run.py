"""A fault judged end to end by a real ``hpc-health run``.

The rest of the bench judges its own launches with the product's statistics;
this mode leaves everything to the product: in a throw-away checkout root
and results store, ``hpc-health run --site local`` runs the halo check
(ReFrame, the CMake-built kernel, ``mpirun``) a few times clean,
``hpc-health reference capture --write`` turns those runs into the
reference, then clean and faulty runs alternate and each is judged by
``hpc-health run`` itself: its exit code (1 = a figure DEGRADED) is the
verdict, its stored report gives the figures.

The fault is the PMPI delay of the ``latency`` (every rank) or
``slow-rank`` (rank 1) fault, preloaded into the check's ranks only: Open
MPI's ``mca_base_env_list`` parameter sets the environment of the
processes ``mpirun`` starts, so neither ReFrame, CMake nor ``mpirun`` itself
runs with the interposer.  Clean runs preload it with no delay, so the
fault is the delay alone.  Its strength is given as the change wanted
(``--worse 2`` = +200 %) and turned into a delay from the captured
reference.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from hpc_health import paths
from hpc_health.judge import verdicts
from hpc_health.model import results
from hpc_health.store import references

from . import quiet
from .faults import FAULTS
from .measure import QuietBudget
from .tools import build_pmpi_delay

SITE = "local"
#: the check (a ReFrame -n pattern) and the figure the delay is sized on
CHECK = "HaloExchange%dims=1%strategy=SERE"
FIGURE = "time_4KiB"
#: messages each rank sends per exchange in a 1-D halo: one per side
SENDS_PER_EXCHANGE = 2
#: what of the checkout a run reads (linked) and what it may write (copied)
_LINKED = ("reframe_checks", "kernels", "spack_repo")
EXIT_DEGRADED = 1
#: a night whose figures stayed worse over the stored runs (no figure DEGRADED)
EXIT_DRIFTING = 3


@dataclass
class Plan:
    fault: str = "latency"            # latency | slow-rank
    worse: tuple = (2.0,)             # changes wanted, fraction worse of FIGURE
    reference_runs: int = 5           # clean runs the reference is captured from
    judged_pairs: int = 1             # clean + faulty runs judged, per strength
    rounds: int = 1                   # hpc-health run --rounds: session passes per run
    foreign_cpu: float = 0.25         # a run other processes used more cores of is re-run
    reruns: int = 3                   # ... at most this many times
    max_wait: float = 600.0           # seconds of waiting for quiet, in all
    sizes: str = "8,4096"             # halo message sizes, bytes
    timeout: float = 600.0            # seconds per hpc-health command


def throwaway_root(parent):
    """A checkout root under ``parent`` for runs that must not touch the
    real one: checks, kernels and the Spack repo linked, the local site's
    configuration copied, no reference file."""
    src = paths.repo_root()
    root = Path(parent) / "root"
    (root / "site_configs").mkdir(parents=True)
    (root / "reference").mkdir()
    for name in _LINKED:
        (root / name).symlink_to(src / name)
    shutil.copytree(src / "site_configs" / SITE, root / "site_configs" / SITE)
    return root


class Sandbox:
    """``hpc-health`` commands against one throw-away root and store."""

    def __init__(self, parent, plan, log=print):
        self.root = throwaway_root(parent)
        self.store = Path(parent) / "store"
        self.timeout, self.log = plan.timeout, log
        self.budget = QuietBudget(plan.foreign_cpu, plan.max_wait, log)
        #: runs thrown away because other processes used the CPUs meanwhile
        self.discarded = []

    def hpc_health(self, *args, ranks_env=None, prefix=(), env=None):
        """Run one ``hpc-health`` command; ``ranks_env`` is the environment
        of the MPI ranks only (Open MPI's ``mca_base_env_list``), ``env``
        added to the command's own, ``prefix`` the command it runs under
        (e.g. ``ip netns exec NS``)."""
        env = dict(os.environ, **(env or {}), HPC_HEALTH_ROOT=str(self.root),
                   HPC_HEALTH_STORE=str(self.store))
        if ranks_env:
            env["OMPI_MCA_mca_base_env_list"] = ";".join(f"{k}={v}"
                                                         for k, v in ranks_env.items())
        return subprocess.run([*prefix, sys.executable, "-m", "hpc_health", *args], env=env,
                              capture_output=True, text=True, timeout=self.timeout)

    def run_ids(self):
        runs = self.store / "runs" / SITE
        return sorted(p.name for p in runs.iterdir()) if runs.is_dir() else []

    def check_run(self, plan, ranks_env, tags=()):
        """One ``hpc-health run`` of the check, labelled with run *tags*:
        (run id, exit code, output)."""
        for attempt in range(plan.reruns + 1):
            meter = quiet.CpuMeter()
            run_id, code, out = self._check_run_once(plan, ranks_env, tags)
            foreign, _ = meter.foreign()
            if foreign <= plan.foreign_cpu:
                return run_id, code, out
            # Other processes on these cores move the halo time as much as
            # a fault does (x1.7 at 4 KiB here): such a run proves nothing.
            self.discarded.append({"run": run_id, "exit_code": code,
                                   "foreign_cores": round(foreign, 2)})
            self.log(f"other processes used {foreign:.2f} cores during run {run_id}: "
                     + ("kept, the re-runs are spent" if attempt == plan.reruns
                        else "discarded, re-run when quiet"))
            if attempt < plan.reruns:
                self.budget.wait()
        return run_id, code, out

    def _check_run_once(self, plan, ranks_env, tags=()):
        before = set(self.run_ids())
        res = self.hpc_health("run", "--site", SITE, "--rounds", str(plan.rounds),
                              *(f"--tag={t}" for t in tags),
                              "--", "-n", CHECK, "-S", f"HaloExchange.sizes={plan.sizes}",
                              ranks_env=ranks_env)
        new = sorted(set(self.run_ids()) - before)
        if res.returncode not in (0, EXIT_DEGRADED, EXIT_DRIFTING) or len(new) != 1:
            raise RuntimeError(f"hpc-health run exited {res.returncode} with runs {new}:\n"
                               f"{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
        return new[0], res.returncode, res.stdout

    def figures(self, run_id):
        """{variable: {value, unit, verdict, worse_by, mdc}} of a stored run,
        judged as ``hpc-health report`` judges it."""
        run_dir = self.store / "runs" / SITE / run_id
        report = json.loads((run_dir / "report.json").read_text())
        meta = json.loads((run_dir / "run.json").read_text())
        ref_file = self.root / "reference" / f"{SITE}.yaml"
        refs = references.load(ref_file) if ref_file.exists() else None
        out = {}
        for v in verdicts.judge_all(results.measurements(report), refs, meta.get("hardware")):
            m = v.measurement
            if m.variable:
                out[m.variable] = {"value": m.value, "unit": m.unit, "verdict": v.verdict,
                                   "deviation": v.deviation, "mdc": v.mdc,
                                   "samples": m.samples}
        return out


def captured_value(root, figure=FIGURE):
    """The captured reference's value of ``figure`` (us)."""
    refs = references.load(root / "reference" / f"{SITE}.yaml")
    ref = refs.lookup("HaloExchange", f"{SITE}:default", "gnu-mpi",
                      {"dims": 1, "strategy": "SERE"}, figure)
    if ref is None:
        raise RuntimeError(f"the capture wrote no reference for {figure}")
    return ref


def run(plan, scratch, log=print):
    """The whole mode in ``scratch``; the record of every run, and whether
    hpc-health judged each as it should (faulty DEGRADED, clean not)."""
    bindir = Path(scratch) / "bin"
    bindir.mkdir()
    fault = FAULTS[plan.fault]({"pmpi_delay": build_pmpi_delay(bindir)}, opts=None)
    box = Sandbox(scratch, plan, log)
    box.budget.wait()
    record = {"fault": fault.describe(), "check": CHECK, "figure": FIGURE,
              "plan": plan.__dict__, "reference_runs": [], "runs": []}

    clean_env = fault.clean_env()
    for i in range(plan.reference_runs):
        run_id, code, _ = box.check_run(plan, clean_env)
        figs = box.figures(run_id)
        record["reference_runs"].append({"run": run_id, "exit_code": code, "figures": figs})
        log(f"reference run {i + 1}/{plan.reference_runs}: {run_id} exit {code}, {FIGURE} "
            f"{figs.get(FIGURE, {}).get('samples')}")
    ids = ",".join(r["run"] for r in record["reference_runs"])
    cap = box.hpc_health("reference", "capture", "--site", SITE, "--from", ids, "--write")
    if cap.returncode != 0:
        raise RuntimeError(f"reference capture exited {cap.returncode}: {cap.stderr[-2000:]}")
    ref = captured_value(box.root)
    record["reference"] = {"value": ref.value, "lower": ref.lower, "upper": ref.upper,
                           "unit": ref.unit}
    log(f"reference {FIGURE} = {ref.value:.4g} {ref.unit}, bounds "
        f"{100 * ref.lower:+.1f} / {100 * ref.upper:+.1f} %")

    for worse in plan.worse:
        # Every delayed send adds the delay; a rank sends SENDS_PER_EXCHANGE
        # messages per exchange, the ranks' delays overlapping.
        delay_ns = worse * ref.value * 1000.0 / SENDS_PER_EXCHANGE
        for _ in range(plan.judged_pairs):
            for kind in ("clean", "faulty"):
                if kind == "clean":
                    run_id, code, _ = box.check_run(plan, clean_env)
                else:
                    with fault.apply(delay_ns) as (env, _info):
                        run_id, code, _ = box.check_run(plan, env)
                figs = box.figures(run_id)
                entry = {"kind": kind, "worse_wanted": worse, "run": run_id,
                         "exit_code": code, "figures": figs}
                if kind == "faulty":
                    entry["setting"] = fault.setting(delay_ns)
                entry["as_expected"] = (code == EXIT_DEGRADED) == (kind == "faulty")
                record["runs"].append(entry)
                f = figs.get(FIGURE, {})
                log(f"{kind:>6} run {run_id}: exit {code}, {FIGURE} {f.get('value', 0):.4g} us "
                    f"({100 * (f.get('deviation') or 0):+.1f} %) {f.get('verdict')}")
    record["discarded_runs"] = box.discarded
    record["waited_for_quiet_s"] = round(box.budget.waited, 1)
    record["all_as_expected"] = all(r["as_expected"] for r in record["runs"])
    return record


def render(record):
    """Markdown: one row per judged run."""
    ref = record["reference"]
    lines = [f"`hpc-health run --site {SITE} -- -n {record['check']}`, fault "
             f"`{record['fault']['name']}` ({record['fault']['label']}); reference "
             f"{record['figure']} = {ref['value']:.4g} {ref['unit']} from "
             f"{len(record['reference_runs'])} clean runs, bound ±{100 * ref['upper']:.1f} %.",
             "",
             "| run | kind | wanted | fault setting | exit | figure | value | change | verdict "
             "| MDC | as expected |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in record["runs"]:
        setting = ", ".join(f"{k}={v}" for k, v in (r.get("setting") or {}).items()) or "–"
        for var, f in r["figures"].items():
            dev = "–" if f["deviation"] is None else f"{100 * f['deviation']:+.1f} %"
            mdc = "–" if f["mdc"] is None else f"{100 * f['mdc']:.1f} %"
            lines.append(f"| {r['run']} | {r['kind']} | +{100 * r['worse_wanted']:.0f} % | "
                         f"{setting} | {r['exit_code']} | {var} | {f['value']:.4g} {f['unit']} "
                         f"| {dev} | {f['verdict']} | {mdc} | "
                         f"{'yes' if r['as_expected'] else 'NO'} |")
    return "\n".join(lines)
