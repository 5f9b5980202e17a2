"""Memory bandwidth: a paced copy hog (memhog.c) on the other core."""

from __future__ import annotations

import contextlib
import os

from ..system import FaultError, memory_hog
from ..workloads import RunEnv, Stream, TriadProbe
from .base import Fault


class Memory(Fault):
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
        # The figures for the first guest: ~8 GB/s cost ~14 %.
        return 8000.0 * target / 0.14

    def setting(self, strength):
        return {"hog_rate_mbs": round(strength)}

    @contextlib.contextmanager
    def apply(self, strength):
        info = {}
        with memory_hog(self.tools["memhog"], strength, cpu=1) as hog:
            yield {}, info
        info["hog_achieved_mbs"] = hog.achieved_mbs
