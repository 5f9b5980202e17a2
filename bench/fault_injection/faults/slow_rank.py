"""One slow rank: the PMPI delay on rank 1 only, or a CPU quota on rank 1
(``rank_cgroup.sh`` moves that rank into a cgroup-v1 ``cpu`` cgroup)."""

from __future__ import annotations

import contextlib
import os

from .. import system
from ..workloads import Halo, RunEnv
from .base import Fault
from .latency import Latency


class SlowRank(Latency):
    name = "slow-rank"
    label = "one slow rank (PMPI delay on rank 1)"
    what = "PMPI delay (pmpi_delay.c) on rank 1 only, halo kernel"
    delay_rank = 1

    def candidates(self):
        yield Halo(self.tools["halo"], sizes=(4096,), strategy="ISIR",
                   iters=self.opts.halo_lat_iters, warmup=200)


class SlowRankQuota(Fault):
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
        with system.cgroup_v1("cpu", f"{system.CGROUP_PREFIX}{os.getpid()}") as cg:
            self.cg = cg
            yield RunEnv(wrapper=[str(system.rank_wrapper_path())],
                         env={"FI_CGROUP_PROCS": str(cg / "cgroup.procs"),
                              "FI_CGROUP_RANK": "1"})

    def initial_strength(self, target):
        return target

    def setting(self, strength):
        return {"cpu_quota": round(1.0 / (1.0 + strength), 3), "period_us": self.period_us}

    @contextlib.contextmanager
    def apply(self, strength):
        with system.cpu_quota(self.cg, 1.0 / (1.0 + strength), self.period_us):
            yield {}, {}
