"""Message latency: the PMPI interposer (pmpi_delay.c) ``LD_PRELOAD``ed on
every rank busy-waits before every send and collective."""

from __future__ import annotations

import contextlib

from ..workloads import Barrier, Halo, OsuLatency
from .base import Fault


def delay_env(library, delay_ns, rank=None):
    """The interposer's environment: ``library`` preloaded, ``delay_ns`` per
    call, on ``rank`` only (None: every rank)."""
    env = {"LD_PRELOAD": str(library), "FI_DELAY_NS": str(int(round(delay_ns)))}
    if rank is not None:
        env["FI_DELAY_RANK"] = str(rank)
    return env


class Latency(Fault):
    name = "latency"
    label = "message latency (PMPI delay, all ranks)"
    what = ("LD_PRELOAD PMPI interposer (pmpi_delay.c) busy-waiting before every "
            "send and collective, all ranks")
    s_min, s_max = 5.0, 1e6
    #: the one rank delayed (None: every rank)
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
        return delay_env(self.tools["pmpi_delay"], 0, self.delay_rank)

    def _calls_per_unit(self):
        # osu_latency reports half a round trip (one send); a halo exchange
        # is two sends per rank, the ranks' delays overlapping.
        return 2.0 if isinstance(self.wl, Halo) else 1.0

    def initial_strength(self, target):
        return target * self.clean_value() * 1000.0 / self._calls_per_unit()

    def setting(self, strength):
        k = {"delay_ns": round(strength)}
        if self.delay_rank is not None:
            k["rank"] = self.delay_rank
        return k

    @contextlib.contextmanager
    def apply(self, strength):
        # Nothing to clear: the delay lives in the environment of the
        # launches made inside this context only.
        yield delay_env(self.tools["pmpi_delay"], strength, self.delay_rank), {}


class BarrierLatency(Latency):
    """The barrier kernel under the all-rank delay: a second latency workload."""
    name = "latency-barrier"
    label = "barrier latency (PMPI delay, all ranks)"
    what = "PMPI delay before MPI_Barrier, all ranks, barrier kernel"

    def candidates(self):
        yield Barrier(self.tools["barrier"], iters=self.opts.barrier_iters)

    def _calls_per_unit(self):
        return 1.0
