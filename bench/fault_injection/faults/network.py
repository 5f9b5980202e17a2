"""Network bandwidth: mpirun in a private network namespace, Open MPI on TCP
over its ``lo``, ``lo`` shaped by ``tc tbf`` (rate only)."""

from __future__ import annotations

import contextlib
import os

from .. import system
from ..workloads import Halo, OsuBw, RunEnv
from .base import Fault, primary_direction, removed_fraction

TCP_ON_LO = ["--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo",
             "--mca", "oob_tcp_if_include", "lo"]


class Network(Fault):
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
        with system.network_namespace(f"{system.NETNS_PREFIX}{os.getpid()}") as ns:
            system.check_tbf(ns)
            self.ns = ns
            yield RunEnv(prefix=["ip", "netns", "exec", ns], mpi_args=list(TCP_ON_LO))

    def initial_strength(self, target):
        return removed_fraction(target, primary_direction(self.wl))

    def _rate_bps(self, strength):
        return (1.0 - strength) * self.wl.wire_bytes_per_s(self.clean_value()) * 8

    def setting(self, strength):
        return {"tbf_rate_mbit": round(self._rate_bps(strength) / 1e6, 1)}

    @contextlib.contextmanager
    def apply(self, strength):
        with system.tbf_on_lo(self.ns, self._rate_bps(strength)) as info:
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
            with system.tbf_on_lo(self.ns, self.link_bps) as info:
                self.session_info = {"unshaped_launches": free,
                                     "link_fraction": self.opts.link_fraction, "link": info}
                yield renv

    @contextlib.contextmanager
    def apply(self, strength):
        with system.tbf_rate(self.ns, self._rate_bps(strength), self.link_bps) as info:
            yield {}, dict(info)
