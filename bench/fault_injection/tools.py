"""What the faults run: our C helpers and kernels, built into the scratch
directory, and the benchmark binaries found on this machine."""

from __future__ import annotations

import glob
import os
import shutil
from pathlib import Path

from bench import local_mpi

from .system import run

HERE = Path(__file__).resolve().parent

#: where a Spack lab may have installed the benchmarks (searched after PATH)
LAB_GLOBS = {
    "stream": ["/opt/lab/opt/*/stream-*/bin/stream_c.exe"],
    "osu_latency": ["/opt/lab/opt/*/osu-micro-benchmarks-*/libexec/osu-micro-benchmarks/mpi/"
                    "pt2pt/osu_latency"],
    "osu_bw": ["/opt/lab/opt/*/osu-micro-benchmarks-*/libexec/osu-micro-benchmarks/mpi/"
               "pt2pt/osu_bw"],
    "ior": ["/opt/lab/opt/*/ior-*/bin/ior"],
}
PATH_NAMES = {"stream": "stream_c.exe", "osu_latency": "osu_latency", "osu_bw": "osu_bw",
              "ior": "ior"}
ENV_NAMES = {"stream": "FI_STREAM", "osu_latency": "FI_OSU_LATENCY", "osu_bw": "FI_OSU_BW",
             "ior": "FI_IOR"}


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


def build_pmpi_delay(bindir):
    """The PMPI delay interposer (pmpi_delay.c) as ``bindir/libpmpi_delay.so``."""
    lib = Path(bindir) / "libpmpi_delay.so"
    run(["mpicc", "-O2", "-Wall", "-Wextra", "-shared", "-fPIC", "-o", lib,
         HERE / "pmpi_delay.c"])
    return lib


def build_memhog(bindir):
    """The paced memory-copy hog (memhog.c) as ``bindir/memhog``."""
    exe = Path(bindir) / "memhog"
    run(["gcc", "-O2", "-Wall", "-Wextra", "-o", exe, HERE / "memhog.c"])
    return exe


def build_tools(scratch, opts):
    """{name: path} of our helpers and kernels built under ``scratch``, and
    of the benchmark binaries (None where not found)."""
    tools = {"scratch": scratch}
    bindir = scratch / "bin"
    bindir.mkdir()
    tools["memhog"] = build_memhog(bindir)
    run(["gcc", "-O2", "-Wall", "-Wextra", "-o", bindir / "triad", HERE / "triad.c"])
    tools["triad"] = bindir / "triad"
    tools["pmpi_delay"] = build_pmpi_delay(bindir)
    kbin = Path(local_mpi.build_kernels(scratch / "kernels"))
    tools["halo"], tools["barrier"] = kbin / "halo", kbin / "barrier"
    for key in LAB_GLOBS:
        tools[key] = find_binary(key, getattr(opts, key))
    return tools
