#!/usr/bin/env python3
"""How long `hpc-health run` takes to stop, phase by phase.

A nightly run is a Slurm batch job or a systemd service: Slurm sends
SIGKILL 30 s after SIGTERM (KillWait), so the run must be closed, its
completed checks judged and stored and nothing of it left running, well
inside that.  The target is 10 s whatever is running.  Each phase here is
reached in a throw-away root and store, then SIGTERM (or --signal) is sent
to the wrapper and the time until it has exited is measured:

- ``reframe-start``: ReFrame loading the checks (1.5 s after the start);
- ``benchmark``: the barrier kernel's ranks under mpirun;
- ``ignoring-ranks``: the same ranks ignoring SIGTERM (the fault bench's
  interposer, ``FI_IGNORE_SIGTERM=1``): only SIGKILL stops them;
- ``spack-build``: ``spack install`` of the kernels into a new install tree
  (when a Spack is found or bootstrapped; else skipped, saying why);
- ``ior-write``: IOR writing (when the site's Spack has IOR built or can
  build it: the run builds it first, which can take minutes cold);
- ``slurm-cancel``: the run as a Slurm batch job on the ``local-slurm``
  cluster (``site_configs/local-slurm/cluster up`` first; else skipped),
  stopped by ``scancel`` as an operator stops it: Slurm sends SIGCONT and
  SIGTERM to the batch shell and SIGKILL KillWait seconds later (5 s on
  that cluster, 30 s by default).  The run must be closed before the
  SIGKILL.  The batch script ``exec``s the run, as ``ci/nightly.sh`` does;
- ``slurm-cancel-child``: the same with the run a child of the batch
  shell.  Slurm's cancel signals only the batch shell of a batch step (not
  its children: ``scancel --full`` would), so the run gets no SIGTERM and
  is lost at the SIGKILL: what this phase shows;
- ``slurm-timelimit``: the batch job (``exec``) reaching its time limit
  (``--time=1``): Slurm signals every process of the job, the run, ReFrame
  and the ranks at once, SIGKILL KillWait seconds later.  The stop is timed
  from the run's ``SIGTERM received`` line;
- ``slurm-signal``: the batch job asking for SIGTERM before its limit
  (``--time=3 --signal=B:TERM@120``, as a site's nightly job should): only
  the batch shell, that is the run, is signalled, and it closes before
  the limit.

After each stop: the exit code (128 + the signal), ``run.json`` finished and
naming the signal, and the processes of the run still alive 1 s later (the
target: none).

    python -m bench.stop_phases [--repeat 3] [--phase benchmark ...] [--json F]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from bench.fault_injection.hpc_health_run import throwaway_root
from bench.fault_injection.tools import build_pmpi_delay
from hpc_health import processes
from hpc_health.spack import kit as spack_kit

PHASES = ("reframe-start", "benchmark", "ignoring-ranks", "spack-build", "ior-write",
          "slurm-cancel", "slurm-cancel-child", "slurm-timelimit", "slurm-signal")
#: sbatch options of the Slurm phases that Slurm itself stops (minutes are
#: the time limit's unit; Slurm checks limits and signals about every 30 s).
_SBATCH = {"slurm-timelimit": ["--time=1"], "slurm-signal": ["--time=3", "--signal=B:TERM@120"]}
CLUSTER = Path(__file__).resolve().parent.parent / "site_configs" / "local-slurm" / "cluster"
#: How long a phase may take to be reached (a cold IOR build included).
REACH_TIMEOUT = 1800


def _cmdlines(pids):
    out = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fp:
                out[pid] = fp.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            pass
    return out


def _reached(proc, phase, started):
    """Whether *phase* is running under *proc* now."""
    if phase == "reframe-start":
        return time.monotonic() - started >= 1.5
    lines = _cmdlines(processes.descendants(proc.pid)).values()
    if phase in ("benchmark", "ignoring-ranks"):
        return any("/barrier --iters" in c and not c.startswith("mpirun") for c in lines)
    if phase == "spack-build":
        return any("spack" in c and " install" in c for c in lines)
    return any("/bin/ior " in c and not c.startswith("mpirun") for c in lines)


def _root(work, phase, lib):
    """A root whose run reaches *phase* and stays in it for a while."""
    root = throwaway_root(work)
    path = root / "site_configs" / "local" / "site.yaml"
    doc = yaml.safe_load(path.read_text())
    part = doc["partitions"]["default"]
    part["kernels"] = {"samples": 40, "barrier_iters": 200000}
    part["scratch"] = str(work / "scratch")
    part["ior"] = {"block_size": "256m", "segments": 4, "repetitions": 10}
    if phase == "spack-build":
        doc["spack"]["install_tree"] = str(work / "spack-opt")
        doc["spack"]["env_dir"] = str(work / "spack-envs")
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    env = dict(os.environ, HPC_HEALTH_ROOT=str(root), HPC_HEALTH_STORE=str(work / "store"))
    if phase not in ("spack-build", "ior-write"):
        # The kernels by CMake: the phase is the benchmark, not a Spack build.
        env["HPC_HEALTH_CACHE"] = str(work / "cache-without-spack")
        env.pop("SPACK_ROOT", None)
        env.pop("HPC_HEALTH_SPACK_KIT", None)
        env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep)
                                      if not os.path.exists(os.path.join(p, "spack")))
    if phase == "ignoring-ranks":
        env["OMPI_MCA_mca_base_env_list"] = f"LD_PRELOAD={lib};FI_IGNORE_SIGTERM=1"
    check = {"spack-build": "BarrierLatency", "ior-write": "IorBandwidth%mode=posix_shared"}
    args = ["-n", check.get(phase, "BarrierLatency")]
    return env, args


def stop_once(work, phase, sig, lib):
    env, args = _root(work, phase, lib)
    proc = subprocess.Popen([sys.executable, "-m", "hpc_health", "run", "--site", "local",
                             "--", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    started = time.monotonic()
    try:
        while not _reached(proc, phase, started):
            if proc.poll() is not None:
                out = proc.stdout.read()
                return {"phase": phase, "reached": False, "why": out[-1500:]}
            if time.monotonic() - started > REACH_TIMEOUT:
                return {"phase": phase, "reached": False, "why": "not reached in time"}
            time.sleep(0.2)
        reached_after = time.monotonic() - started
        group = processes.descendants(proc.pid)
        t0 = time.monotonic()
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=120)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    time.sleep(1)
    left = [p for p in group if processes.alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    runs = sorted((work / "store" / "runs" / "local").glob("*/run.json"))
    meta = json.loads(runs[-1].read_text()) if runs else {}
    return {"phase": phase, "reached": True, "reached_after_s": round(reached_after, 1),
            "stop_s": round(took, 2), "exit_code": proc.returncode,
            "expected_exit": 128 + sig, "finished": bool(meta.get("finished")),
            "stopped_by": meta.get("stopped_by"), "left": len(left),
            "last_line": out.strip().splitlines()[-1] if out.strip() else "",
            "output_tail": out.strip().splitlines()[-25:]}


def _cluster_env():
    """The environment of the local-slurm cluster's clients, or None when it
    is not running."""
    if subprocess.run([str(CLUSTER), "status"], capture_output=True).returncode != 0:
        return None
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SLURM_") or k == "SLURM_CONF"}
    out = subprocess.run([str(CLUSTER), "env"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        key, _, value = line.removeprefix("export ").partition("=")
        env[key] = value
    return env


def _ours(work):
    out = subprocess.run(["pgrep", "-f", str(work)], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def _signal_seen(output, since, limit):
    """When the run printed that a signal reached it (Slurm's own stop)."""
    while time.monotonic() - since < limit:
        if output.is_file() and " received: stopping" in output.read_text(errors="replace"):
            return time.monotonic()
        time.sleep(0.05)
    return None


def slurm_stop_once(work, lib, cluster_env, phase="slurm-cancel"):
    env, args = _root(work, "benchmark", lib)
    env = {k: v for k, v in env.items() if not k.startswith("SLURM_")}
    env.update({k: v for k, v in cluster_env.items() if k.startswith(("SLURM_", "OMPI_"))})
    slurm_stops = phase in _SBATCH     # a time limit, not scancel
    if slurm_stops:
        # Launches enough to outlast the time limit.
        args += ["-S", "samples=2000"]
    script = work / "night.sh"
    how = "" if phase == "slurm-cancel-child" else "exec "
    script.write_text("#!/bin/bash\n" + how + " ".join(
        [sys.executable, "-m", "hpc_health", "run", "--site", "local", "--", *args]) + "\n")
    sub = subprocess.run(["sbatch", "--parsable", "-p", "debug", "-N", "1", *_SBATCH.get(phase, []),
                          "-o", str(work / "job-%j.out"), str(script)],
                         capture_output=True, text=True, env=env)
    if sub.returncode != 0:
        return {"phase": phase, "reached": False, "why": sub.stderr}
    job = sub.stdout.strip().split(";")[0]
    output = work / f"job-{job}.out"
    started = time.monotonic()
    pattern = f"{work}.*barrier --iters"
    while subprocess.run(["pgrep", "-f", pattern], capture_output=True).returncode != 0:
        if time.monotonic() - started > 300:
            subprocess.run(["scancel", job], env=env)
            return {"phase": phase, "reached": False, "why": "no benchmark in 300 s"}
        time.sleep(0.2)
    if slurm_stops:
        t0 = _signal_seen(output, started, 400)
        if t0 is None:
            subprocess.run(["scancel", job], env=env)
            return {"phase": phase, "reached": False, "why": "Slurm sent no signal in 400 s"}
    else:
        t0 = time.monotonic()
        subprocess.run(["scancel", job], env=env, check=True)
    reached_after = t0 - started
    run_json = None
    while time.monotonic() - t0 < 60:
        found = sorted((work / "store" / "runs" / "local").glob("*/run.json"))
        if found:
            meta = json.loads(found[-1].read_text() or "{}")
            if meta.get("finished") and not _ours(work):
                run_json = meta
                break
        time.sleep(0.1)
    took = time.monotonic() - t0
    time.sleep(1)
    left = _ours(work)
    for p in left:
        os.kill(p, signal.SIGKILL)
    state = subprocess.run(["sacct", "-n", "-X", "-P", "-o", "State,ExitCode", "-j", job],
                           capture_output=True, text=True, env=env).stdout.strip()
    meta = run_json or {}
    return {"phase": phase, "reached": True, "reached_after_s": round(reached_after, 1),
            "stop_s": round(took, 2), "exit_code": meta.get("exit_code"),
            "expected_exit": 128 + signal.SIGTERM, "finished": bool(meta.get("finished")),
            "stopped_by": meta.get("stopped_by"), "left": len(left), "job_state": state,
            "last_line": output.read_text().strip().splitlines()[-1:]}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--phase", action="append", choices=PHASES)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--signal", default="SIGTERM", choices=("SIGTERM", "SIGINT", "SIGHUP"))
    p.add_argument("--json", type=Path)
    opts = p.parse_args(argv)
    sig = signal.Signals[opts.signal]
    phases = opts.phase or PHASES
    have_spack = spack_kit.find_spack(None) or spack_kit.record()
    results = []
    with tempfile.TemporaryDirectory(prefix="hpc-health-stop-") as tmp:
        lib = build_pmpi_delay(Path(tmp))
        for phase in phases:
            if phase in ("spack-build", "ior-write") and not have_spack:
                print(f"{phase}: skipped: no Spack (bootstrap one: hpc-health spack setup "
                      "--kit DIR)", flush=True)
                results.append({"phase": phase, "reached": False, "why": "no Spack"})
                continue
            slurm = phase.startswith("slurm-")
            cluster_env = _cluster_env() if slurm else None
            if slurm and cluster_env is None:
                print(f"{phase}: skipped: the local-slurm cluster is not running "
                      f"({CLUSTER} up starts it)", flush=True)
                results.append({"phase": phase, "reached": False, "why": "no cluster"})
                continue
            for i in range(opts.repeat):
                work = Path(tmp) / f"{phase}-{i}"
                work.mkdir()
                r = (slurm_stop_once(work, lib, cluster_env, phase) if slurm else
                     stop_once(work, phase, sig, lib))
                results.append(r)
                print(f"{phase} {i + 1}/{opts.repeat}: " + (
                    f"stopped in {r['stop_s']} s (reached after {r['reached_after_s']} s), "
                    f"exit {r['exit_code']}, run finished {r['finished']}, "
                    f"{r['left']} process(es) left" if r["reached"] else
                    f"not reached: {r['why'][-300:]}"), flush=True)
                shutil.rmtree(work, ignore_errors=True)
    if opts.json:
        opts.json.write_text(json.dumps({"signal": opts.signal, "results": results}, indent=1))
    # The child variant shows what a batch script without exec loses.
    bad = [r for r in results if r.get("reached") and r["phase"] != "slurm-cancel-child" and (
        r["stop_s"] >= 10 or r["left"] or r["exit_code"] != r["expected_exit"]
        or not r["finished"])]
    print(f"{len(bad)} stop(s) over 10 s, with processes left, or not closed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
