"""One scenario per fault: which workload judges it, what has to exist for the
whole session (namespace, loop device, cgroup), and how a fault *strength*
maps to a concrete setting.

Strengths are chosen so that the induced change grows roughly in proportion
to them (fraction of bandwidth removed, delay in ns, hog rate), which is what
the calibration's power-law search assumes.
"""

from __future__ import annotations

import contextlib
import os

from hpc_health import stats

from . import faults
from .faults import FaultError
from .workloads import Barrier, DdProbe, Halo, Ior, OsuBw, OsuLatency, RunEnv, Stream, TriadProbe

TCP_ON_LO = ["--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo",
             "--mca", "oob_tcp_if_include", "lo"]


class Scenario:
    name = "?"
    #: the fault in a few words, for the project README's summary
    label = ""
    what = ""
    #: what the session set up, for the results file
    session_info = {}
    #: exponent the calibration assumes before it has two points
    slope = 1.0
    s_min, s_max = 0.0, 1.0

    def __init__(self, tools, opts):
        self.tools, self.opts = tools, opts
        self.refs = {}
        self.wl = None

    def workload(self):
        """First runnable candidate; FaultError saying why none is."""
        why = []
        for wl in self.candidates():
            reason = wl.missing()
            if reason is None:
                self.wl = wl
                return wl
            why.append(f"{wl.name}: {reason}")
        raise FaultError("no workload: " + "; ".join(why))

    def candidates(self):
        raise NotImplementedError

    @contextlib.contextmanager
    def session(self):
        yield RunEnv()

    def clean_env(self):
        return {}

    def set_clean(self, refs):
        self.refs = refs

    def clean_value(self, metric=None):
        return self.refs[metric or self.wl.primary].value

    def initial_strength(self, target):
        raise NotImplementedError

    def knob(self, strength):
        raise NotImplementedError

    @contextlib.contextmanager
    def inject(self, strength):
        """Yields (extra environment, info dict filled in on exit)."""
        raise NotImplementedError


def _primary_direction(wl):
    return next(m.direction for m in wl.metrics if m.name == wl.primary)


def _removed_fraction(target, direction):
    # Removing a fraction s of a rate makes a bandwidth s worse and a time
    # s/(1-s) worse.
    return target if direction == stats.HIGHER else target / (1.0 + target)


# --- (a) memory -------------------------------------------------------------

class Memory(Scenario):
    name = "memory"
    label = "memory-bandwidth hog"
    what = ("paced memory-copy hog (memhog.c) pinned to the other core; the hog's "
            "copy rate sets the slowdown")
    s_min, s_max = 200.0, 100000.0

    def candidates(self):
        t = self.tools
        if t.get("stream") and not self.opts.kernels_only:
            yield Stream(t["stream"], cpu=0)
        yield TriadProbe(t["triad"], cpu=0)

    @contextlib.contextmanager
    def session(self):
        if (os.cpu_count() or 1) < 2:
            raise FaultError("needs 2 CPUs: benchmark on one, hog on the other")
        yield RunEnv()

    def initial_strength(self, target):
        # The figures for this machine: ~8 GB/s cost ~14 %, ~14 GB/s ~25 %.
        return 8000.0 * target / 0.14

    def knob(self, strength):
        return {"hog_rate_mbs": round(strength)}

    @contextlib.contextmanager
    def inject(self, strength):
        info = {}
        with faults.memory_hog(self.tools["memhog"], strength, cpu=1) as hog:
            yield {}, info
        info["hog_achieved_mbs"] = hog.achieved_mbs


# --- (b) network bandwidth ------------------------------------------------------

class Network(Scenario):
    name = "network"
    label = "network rate, CPU-bound loopback (unshaped `lo`, then `tc tbf`)"
    what = ("mpirun inside a private network namespace, Open MPI on TCP over its lo, "
            "lo shaped by tc tbf (rate only)")
    s_min, s_max = 0.01, 0.95

    def candidates(self):
        t = self.tools
        if t.get("osu_bw") and not self.opts.kernels_only:
            yield OsuBw(t["osu_bw"], iters=self.opts.osu_bw_iters)
        yield Halo(t["halo"], sizes=(1 << 20,), strategy="ISIR",
                   iters=self.opts.halo_bw_iters, warmup=5)

    @contextlib.contextmanager
    def session(self):
        with faults.network_namespace(f"hhfi-{os.getpid()}") as ns:
            faults.check_tbf(ns)
            self.ns = ns
            yield RunEnv(prefix=["ip", "netns", "exec", ns], mpi_args=list(TCP_ON_LO))

    def initial_strength(self, target):
        return _removed_fraction(target, _primary_direction(self.wl))

    def _rate_bps(self, strength):
        return (1.0 - strength) * self.wl.wire_bytes_per_s(self.clean_value()) * 8

    def knob(self, strength):
        return {"tbf_rate_mbit": round(self._rate_bps(strength) / 1e6, 1)}

    @contextlib.contextmanager
    def inject(self, strength):
        with faults.tbf_on_lo(self.ns, self._rate_bps(strength)) as info:
            yield {}, dict(info)


class NetworkLink(Network):
    """The same namespace, with its ``lo`` held at a link rate on every night.

    Unshaped, TCP over ``lo`` runs as fast as the two shared vCPUs copy
    (±20 % from one launch to the next here): that is a memory-and-scheduler
    figure, not a network one.  A fabric's bandwidth is set by its links, so
    this model first measures the unshaped rate, then holds ``lo`` at a
    fraction of it (``--link-fraction``) for the baseline and clean nights;
    the fault takes its share off that link rate.
    """
    name = "network-link"
    label = "network rate, link-limited (`lo` held at a link rate by `tc tbf`)"
    what = ("as network, with lo held by tbf at a link rate (a fraction of its "
            "unshaped rate) on clean nights too; the fault lowers that rate")

    @contextlib.contextmanager
    def session(self):
        with super().session() as renv:
            free = self.wl.night(self.opts.link_probe, renv)[self.wl.primary]
            free_median = sorted(free)[len(free) // 2]
            self.link_bps = self.opts.link_fraction * self.wl.wire_bytes_per_s(free_median) * 8
            with faults.tbf_on_lo(self.ns, self.link_bps) as info:
                self.session_info = {"unshaped_launches": free,
                                     "link_fraction": self.opts.link_fraction, "link": info}
                yield renv

    @contextlib.contextmanager
    def inject(self, strength):
        with faults.tbf_rate(self.ns, self._rate_bps(strength), self.link_bps) as info:
            yield {}, dict(info)


# --- (c) latency: PMPI delay on all ranks -----------------------------------------------

class Latency(Scenario):
    name = "latency"
    label = "message latency (PMPI delay, all ranks)"
    what = ("LD_PRELOAD PMPI interposer (pmpi_delay.c) busy-waiting before every "
            "send and collective, all ranks")
    s_min, s_max = 5.0, 1e6
    delay_rank = None

    def candidates(self):
        t = self.tools
        if t.get("osu_latency") and not self.opts.kernels_only:
            yield OsuLatency(t["osu_latency"], size=4096, iters=self.opts.osu_lat_iters,
                             warmup=self.opts.osu_lat_iters // 10)
        yield Halo(t["halo"], sizes=(8, 4096), strategy="SERE",
                   iters=self.opts.halo_lat_iters, warmup=200)

    def clean_env(self):
        # The interposer is loaded on clean nights too, with no delay: the
        # fault is then the delay alone, not the preload.
        env = {"LD_PRELOAD": str(self.tools["pmpi_delay"]), "FI_DELAY_NS": "0"}
        if self.delay_rank is not None:
            env["FI_DELAY_RANK"] = str(self.delay_rank)
        return env

    def _calls_per_unit(self):
        # osu_latency reports half a round trip (one send); a halo exchange
        # is two sends per rank, the ranks' delays overlapping.
        return 2.0 if isinstance(self.wl, Halo) else 1.0

    def initial_strength(self, target):
        return target * self.clean_value() * 1000.0 / self._calls_per_unit()

    def knob(self, strength):
        k = {"delay_ns": round(strength)}
        if self.delay_rank is not None:
            k["rank"] = self.delay_rank
        return k

    @contextlib.contextmanager
    def inject(self, strength):
        env = self.clean_env()
        env["FI_DELAY_NS"] = str(int(round(strength)))
        yield env, {}


# --- (d) I/O: blkio throttle on a loop device -----------------------------------

class Io(Scenario):
    name = "io"
    label = "I/O throttle (blkio on a loop device)"
    what = ("cgroup-v1 blkio.throttle read/write bps on a loop device (ext4), IOR with "
            "O_DIRECT inside the cgroup")
    s_min, s_max = 0.01, 0.95

    def candidates(self):
        t = self.tools
        mnt = t["scratch"] / "io-mnt"
        if t.get("ior") and not self.opts.kernels_only:
            yield Ior(t["ior"], mnt, block_mib=self.opts.io_mib)
        yield DdProbe(mnt, block_mib=self.opts.io_mib)

    @contextlib.contextmanager
    def session(self):
        if not faults.cgroup_v1_available("blkio"):
            raise FaultError("no cgroup-v1 blkio hierarchy at /sys/fs/cgroup/blkio")
        backing = self.opts.io_backing or faults.backing_dir_default(self.tools["scratch"])
        size = self.opts.io_mib + 512
        with faults.loop_filesystem(backing, size, self.tools["scratch"] / "io-mnt") as (dev, mm), \
                faults.cgroup_v1("blkio", f"hpc-health-fi-{os.getpid()}") as cg:
            self.majmin, self.cg = mm, cg
            yield RunEnv(wrapper=[str(faults.rank_wrapper_path())],
                         env={"FI_CGROUP_PROCS": str(cg / "cgroup.procs")})

    def initial_strength(self, target):
        return target

    def _bps(self, strength):
        w, r = (m.name for m in self.wl.metrics)
        unit = 1 << 20 if self.wl.metrics[0].unit == "MiB/s" else 1e6
        return ((1 - strength) * self.clean_value(w) * unit,
                (1 - strength) * self.clean_value(r) * unit)

    def knob(self, strength):
        w, r = self._bps(strength)
        return {"write_MBps": round(w / 1e6, 1), "read_MBps": round(r / 1e6, 1)}

    @contextlib.contextmanager
    def inject(self, strength):
        w, r = self._bps(strength)
        with faults.blkio_throttle(self.cg, self.majmin, read_bps=r, write_bps=w):
            yield {}, {}


# --- (e) one slow rank ---------------------------------------------------------------

class SlowRank(Latency):
    name = "slow-rank"
    label = "one slow rank (PMPI delay on rank 1)"
    what = "PMPI delay (pmpi_delay.c) on rank 1 only, halo kernel"
    delay_rank = 1

    def candidates(self):
        yield Halo(self.tools["halo"], sizes=(4096,), strategy="ISIR",
                   iters=self.opts.halo_lat_iters, warmup=200)


class SlowRankQuota(Scenario):
    name = "slow-rank-quota"
    label = "one slow rank (CPU quota on rank 1)"
    what = "cgroup-v1 CPU quota (cfs_quota_us) on rank 1 only, halo kernel"
    # quota q = 1/(1+s): s = 1 is the 50 % below which quotas act erratically here
    s_min, s_max = 0.01, 1.0
    period_us = 10000

    def candidates(self):
        yield Halo(self.tools["halo"], sizes=(65536,), strategy="ISIR",
                   iters=self.opts.halo_quota_iters, warmup=50)

    @contextlib.contextmanager
    def session(self):
        with faults.cgroup_v1("cpu", f"hpc-health-fi-{os.getpid()}") as cg:
            self.cg = cg
            yield RunEnv(wrapper=[str(faults.rank_wrapper_path())],
                         env={"FI_CGROUP_PROCS": str(cg / "cgroup.procs"),
                              "FI_CGROUP_RANK": "1"})

    def initial_strength(self, target):
        return target

    def knob(self, strength):
        return {"cpu_quota": round(1.0 / (1.0 + strength), 3), "period_us": self.period_us}

    @contextlib.contextmanager
    def inject(self, strength):
        with faults.cpu_quota(self.cg, 1.0 / (1.0 + strength), self.period_us):
            yield {}, {}


class BarrierLatency(Latency):
    """The barrier kernel under the all-rank delay: a second latency workload."""
    name = "latency-barrier"
    label = "barrier latency (PMPI delay, all ranks)"
    what = "PMPI delay before MPI_Barrier, all ranks, barrier kernel"

    def candidates(self):
        yield Barrier(self.tools["barrier"], iters=self.opts.barrier_iters)

    def _calls_per_unit(self):
        return 1.0


SCENARIOS = {c.name: c for c in (Memory, Network, NetworkLink, Latency, Io, SlowRank, SlowRankQuota,
                                 BarrierLatency)}
