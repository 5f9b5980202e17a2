"""I/O bandwidth: cgroup-v1 ``blkio.throttle`` on a loop device (ext4), the
benchmark started inside the cgroup with O_DIRECT."""

from __future__ import annotations

import contextlib
import os

from .. import system
from ..system import FaultError
from ..workloads import DdProbe, Ior, RunEnv
from .base import Fault


class Io(Fault):
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
        if not system.cgroup_v1_available("blkio"):
            raise FaultError("no cgroup-v1 blkio hierarchy at /sys/fs/cgroup/blkio")
        scratch = self.tools["scratch"]
        backing = self.opts.io_backing or system.backing_dir_default(scratch)
        size = self.opts.io_mib + 512
        with system.loop_filesystem(backing, size, scratch / "io-mnt") as (_, majmin), \
                system.cgroup_v1("blkio", f"{system.CGROUP_PREFIX}{os.getpid()}") as cg:
            self.majmin, self.cg = majmin, cg
            yield RunEnv(wrapper=[str(system.rank_wrapper_path())],
                         env={"FI_CGROUP_PROCS": str(cg / "cgroup.procs")})

    def initial_strength(self, target):
        return target

    def _bps(self, strength):
        w, r = (m.name for m in self.wl.metrics)
        unit = 1 << 20 if self.wl.metrics[0].unit == "MiB/s" else 1e6
        return ((1 - strength) * self.clean_value(w) * unit,
                (1 - strength) * self.clean_value(r) * unit)

    def setting(self, strength):
        w, r = self._bps(strength)
        return {"write_MBps": round(w / 1e6, 1), "read_MBps": round(r / 1e6, 1)}

    @contextlib.contextmanager
    def apply(self, strength):
        w, r = self._bps(strength)
        with system.blkio_throttle(self.cg, self.majmin, read_bps=r, write_bps=w):
            yield {}, {}
