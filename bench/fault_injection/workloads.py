"""The benchmarks the faults are judged by, each producing one "night":
``k`` samples of every metric it reports, parsed with the product's parsers
where the product has one.

A workload never decides whether it is faulty: the fault hands it a
:class:`RunEnv` (launch prefix, MPI options, environment) and the workload
runs the same command line on clean and faulty nights.
"""

from __future__ import annotations

import math
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from bench import local_mpi
from hpc_health import stats
from hpc_health.parsers.ior import parse_ior
from hpc_health.parsers.kernels import parse_barrier, parse_halo
from hpc_health.parsers.osu import parse_osu, value_at
from hpc_health.parsers.stream import parse_stream

from .system import run


@dataclass
class Metric:
    name: str
    unit: str
    direction: str


@dataclass
class RunEnv:
    """How to launch on this fault's nights (identical clean or faulty)."""
    prefix: list = field(default_factory=list)       # e.g. ip netns exec NS
    mpi_args: list = field(default_factory=list)     # e.g. --mca btl tcp,self
    env: dict = field(default_factory=dict)
    wrapper: list = field(default_factory=list)      # put before the binary (per rank)


def mpi_base_env():
    """The mpirun environment the tests use too (root allowed,
    oversubscription, no binding: a hog or another user may be pinned to
    the same cores)."""
    return local_mpi.mpi_env()


class Workload:
    name = "?"
    metrics: list[Metric] = []
    primary = ""
    #: what one sample is, for the README
    sample = ""

    def missing(self):
        """None if runnable, else why not."""
        return None

    def night(self, k, renv: RunEnv, extra_env=None):
        """{metric: [k samples]}"""
        raise NotImplementedError

    def describe(self):
        return {"name": self.name, "metrics": [m.__dict__ for m in self.metrics],
                "primary": self.primary, "sample": self.sample}

    @staticmethod
    def _env(renv, extra_env):
        env = mpi_base_env()
        env.update(renv.env)
        env.update(extra_env or {})
        return env

    def _mpirun(self, np_, argv, renv, extra_env, timeout=300):
        cmd = list(renv.prefix) + ["mpirun", "-np", str(np_)] + list(renv.mpi_args)
        env = self._env(renv, extra_env)
        for key in sorted(set(renv.env) | set(extra_env or {})):
            if key.startswith(("FI_", "LD_PRELOAD")):
                # For the ranks only (mpirun forwards what it is told to): the
                # interposer has no business in mpirun itself.
                cmd += ["-x", f"{key}={env.pop(key)}"]
        cmd += list(renv.wrapper) + [str(a) for a in argv]
        out, _ = run(cmd, env=env, timeout=timeout)
        return out


def _missing_binary(path, what):
    if not path:
        return f"no {what} binary given"
    if not (Path(path).is_file() and os.access(path, os.X_OK)):
        return f"{what} binary {path} not found or not executable"
    return None


# --- memory ------------------------------------------------------------------

class Stream(Workload):
    """STREAM triad, one thread pinned to one core; one execution per sample."""
    sample = "one STREAM execution (best of its 10 repetitions), 1 thread pinned"

    def __init__(self, binary, cpu=0):
        self.binary, self.cpu = binary, cpu
        self.name = "stream_c.exe"
        self.metrics = [Metric("stream_triad_1t", "MB/s", stats.HIGHER)]
        self.primary = "stream_triad_1t"

    def missing(self):
        return _missing_binary(self.binary, "STREAM") or (
            None if shutil.which("taskset") else "taskset not found")

    def night(self, k, renv, extra_env=None):
        env = self._env(renv, extra_env)
        env.update({"OMP_NUM_THREADS": "1", "OMP_PROC_BIND": "true"})
        vals = []
        for _ in range(k):
            out, _ = run(["taskset", "-c", str(self.cpu), self.binary], env=env, timeout=120)
            parsed = parse_stream(out)
            if not parsed["validated"]:
                raise RuntimeError(f"STREAM did not validate: {parsed['validation_message']}")
            vals.append(float(parsed["kernels"]["triad"]["best_rate_mbs"]))
        return {"stream_triad_1t": vals}


class TriadProbe(Stream):
    """Our own triad probe (triad.c) when there is no STREAM binary."""
    sample = "one triad-probe execution (best of 10 passes), pinned"

    def __init__(self, binary, cpu=0):
        super().__init__(binary, cpu)
        self.name = "triad (bench/fault_injection/triad.c)"
        self.metrics = [Metric("triad_probe_1t", "MB/s", stats.HIGHER)]
        self.primary = "triad_probe_1t"

    def night(self, k, renv, extra_env=None):
        vals = []
        for _ in range(k):
            out, _ = run(["taskset", "-c", str(self.cpu), self.binary],
                         env=self._env(renv, extra_env), timeout=120)
            m = re.search(r'"triad_mbs":\s*([0-9.]+)', out)
            if not m:
                raise RuntimeError(f"triad probe printed no result: {out!r}")
            vals.append(float(m.group(1)))
        return {"triad_probe_1t": vals}


# --- OSU -------------------------------------------------------------------------

class OsuLatency(Workload):
    sample = "one osu_latency execution (mpirun, 2 ranks)"

    def __init__(self, binary, size=4096, iters=20000, warmup=2000):
        self.binary, self.size, self.iters, self.warmup = binary, size, iters, warmup
        self.name = "osu_latency"
        self.metrics = [Metric(f"osu_latency_{_size_name(size)}", "us", stats.LOWER)]
        self.primary = self.metrics[0].name

    def missing(self):
        return _missing_binary(self.binary, "osu_latency")

    def night(self, k, renv, extra_env=None):
        vals = []
        for _ in range(k):
            out = self._mpirun(2, [self.binary, "-m", f"{self.size}:{self.size}",
                                   "-i", self.iters, "-x", self.warmup], renv, extra_env)
            vals.append(float(value_at(parse_osu(out), self.size, "avg_latency_us")))
        return {self.primary: vals}


class OsuBw(Workload):
    sample = "one osu_bw execution (mpirun, 2 ranks)"

    def __init__(self, binary, size=1 << 20, iters=10, warmup=2, window=16):
        self.binary, self.size = binary, size
        self.iters, self.warmup, self.window = iters, warmup, window
        self.name = "osu_bw"
        self.metrics = [Metric(f"osu_bw_{_size_name(size)}", "MB/s", stats.HIGHER)]
        self.primary = self.metrics[0].name

    def missing(self):
        return _missing_binary(self.binary, "osu_bw")

    def night(self, k, renv, extra_env=None):
        vals = []
        for _ in range(k):
            out = self._mpirun(2, [self.binary, "-m", f"{self.size}:{self.size}",
                                   "-i", self.iters, "-x", self.warmup, "-W", self.window],
                               renv, extra_env)
            vals.append(float(value_at(parse_osu(out), self.size, "bandwidth_mbs")))
        return {self.primary: vals}

    def wire_bytes_per_s(self, value):
        """Bytes/s through lo at bandwidth ``value`` (MB/s): one direction."""
        return value * 1e6


# --- our kernels -------------------------------------------------------------------

class Halo(Workload):
    # Not k repetitions inside one mpirun: on this machine the level of a
    # halo time is set per launch (where the ranks land; baseline medians
    # sat at either ~9 or ~13 us for 4 KiB, with samples of one launch within
    # 3 % of each other), so samples taken inside one launch all share its
    # luck and do not average it away.  The halo check launches the same way.
    sample = "one mpirun of halo (time per exchange, max over ranks)"

    def __init__(self, binary, sizes=(8, 4096), strategy="SERE", iters=2000, warmup=200,
                 ranks=2):
        self.binary, self.sizes, self.strategy = binary, tuple(sizes), strategy
        self.iters, self.warmup, self.ranks = iters, warmup, ranks
        self.name = f"halo {strategy}"
        self.metrics = [Metric(f"halo_{strategy}_{_size_name(s)}", "us", stats.LOWER)
                        for s in self.sizes]
        self.primary = self.metrics[-1].name

    def missing(self):
        return _missing_binary(self.binary, "halo")

    def night(self, k, renv, extra_env=None):
        values = {m.name: [] for m in self.metrics}
        for _ in range(k):
            out = self._mpirun(self.ranks, [
                self.binary, "--strategy", self.strategy,
                "--sizes", ",".join(str(s) for s in self.sizes), "--iters", self.iters,
                "--warmup", self.warmup, "--json"], renv, extra_env)
            parsed = parse_halo(out)
            if parsed["verification"] != "passed":
                raise RuntimeError("halo verification failed")
            res = parsed["results"][self.strategy]
            for m, s in zip(self.metrics, self.sizes):
                values[m.name].append(float(res[s]["max"]))
        return values

    def wire_bytes_per_s(self, value_us):
        """Bytes/s through lo for the largest size at ``value_us`` per
        exchange: every rank sends 2 messages per dimension."""
        return self.ranks * 2 * self.sizes[-1] / (value_us * 1e-6)

    def sends_per_exchange(self):
        return 2   # per rank, 1-D grid: one message per side


class Barrier(Workload):
    sample = "one mpirun of barrier (median barrier time, 2 ranks)"

    def __init__(self, binary, iters=20000, warmup=1000):
        self.binary, self.iters, self.warmup = binary, iters, warmup
        self.name = "barrier"
        self.metrics = [Metric("barrier_2", "us", stats.LOWER)]
        self.primary = "barrier_2"

    def missing(self):
        return _missing_binary(self.binary, "barrier")

    def night(self, k, renv, extra_env=None):
        # One launch per sample, as the barrier check takes them.
        vals = []
        for _ in range(k):
            out = self._mpirun(2, [self.binary, "--iters", self.iters, "--warmup", self.warmup,
                                   "--json"], renv, extra_env)
            vals.append(float(parse_barrier(out)["results"][2]["median"]))
        return {"barrier_2": vals}


# --- I/O ---------------------------------------------------------------------

_IOR_ROW = re.compile(r"^(write|read)\s+([0-9.]+)\s", re.MULTILINE)


class Ior(Workload):
    """IOR, POSIX with O_DIRECT, one process; ``-i k`` repetitions per night,
    each repetition's write and read bandwidth one sample."""
    sample = "one IOR repetition (-i), O_DIRECT, 1 process"

    def __init__(self, binary, directory, block_mib=512, transfer="1m"):
        self.binary, self.directory = binary, Path(directory)
        self.block_mib, self.transfer = block_mib, transfer
        self.name = "ior"
        self.metrics = [Metric("ior_write", "MiB/s", stats.HIGHER),
                        Metric("ior_read", "MiB/s", stats.HIGHER)]
        self.primary = "ior_write"

    def missing(self):
        return _missing_binary(self.binary, "IOR")

    def night(self, k, renv, extra_env=None):
        cmd = list(renv.prefix) + list(renv.wrapper) + [
            self.binary, "-a", "POSIX", "--posix.odirect", "-w", "-r",
            "-t", self.transfer, "-b", f"{self.block_mib}m", "-i", str(k),
            "-o", str(self.directory / "ior.dat")]
        out, _ = run(cmd, env=self._env(renv, extra_env), timeout=600)
        parse_ior(out)   # refuses errors and truncated output
        rows = _IOR_ROW.findall(out.split("Results:", 1)[-1].split("Summary of all tests", 1)[0])
        vals = {"ior_write": [], "ior_read": []}
        for op, bw in rows:
            vals[f"ior_{op}"].append(float(bw))
        if any(len(v) != k for v in vals.values()):
            raise RuntimeError(f"IOR printed {rows} for {k} repetitions")
        return vals


class DdProbe(Workload):
    """dd with O_DIRECT when there is no IOR: one write and one read pass."""
    sample = "one dd pass each way, O_DIRECT"

    def __init__(self, directory, block_mib=512):
        self.directory, self.block_mib = Path(directory), block_mib
        self.name = "dd oflag=direct"
        self.metrics = [Metric("dd_write", "MB/s", stats.HIGHER),
                        Metric("dd_read", "MB/s", stats.HIGHER)]
        self.primary = "dd_write"

    def missing(self):
        return None if shutil.which("dd") else "dd not found"

    def night(self, k, renv, extra_env=None):
        f = self.directory / "dd.dat"
        env = self._env(renv, extra_env)
        vals = {"dd_write": [], "dd_read": []}
        for _ in range(k):
            for name, args in (("dd_write", ["if=/dev/zero", f"of={f}", "oflag=direct",
                                             "conv=fsync"]),
                               ("dd_read", [f"if={f}", "of=/dev/null", "iflag=direct"])):
                cmd = list(renv.prefix) + list(renv.wrapper) + [
                    "dd", "bs=1M", f"count={self.block_mib}"] + args
                _, err = run(cmd, env=env, timeout=600)
                vals[name].append(_dd_rate(err))
        return vals


def _dd_rate(err):
    # "536870912 bytes (537 MB, 512 MiB) copied, 0.25 s, 2.1 GB/s": recompute
    # from bytes and seconds, the printed rate has two digits.
    m = re.search(r"^(\d+) bytes .* copied, ([0-9.e+-]+) s", err, re.MULTILINE)
    if not m:
        raise RuntimeError(f"dd printed no rate: {err!r}")
    return int(m.group(1)) / float(m.group(2)) / 1e6


def _size_name(size):
    if size >= 1 << 20 and size % (1 << 20) == 0:
        return f"{size >> 20}MiB"
    if size >= 1 << 10 and size % (1 << 10) == 0:
        return f"{size >> 10}KiB"
    return f"{size}B"


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    if n == 0:
        return math.nan
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])
