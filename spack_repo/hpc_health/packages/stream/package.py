# Copyright hpc-health contributors.
#
# SPDX-License-Identifier: BSD-3-Clause

from spack.package import *
from spack_repo.builtin.packages.stream.package import Stream as BuiltinStream


class Stream(BuiltinStream):
    """The STREAM benchmark is a simple synthetic benchmark program that
    measures sustainable memory bandwidth (in MB/s) and the corresponding
    computation rate for simple vector kernels.

    hpc-health override of builtin.stream: versions and variants are those of
    the builtin recipe. STREAM's array size and repetition count are
    compile-time constants (the stream_array_size and ntimes variants), but
    its Makefile rebuilds stream_c.exe only when stream.c changes. The
    recipe has only a git URL, so offline sites build it from a develop
    tree, where a binary of another size would survive and be installed
    under the new spec's hash. Here every build starts from a clean tree."""

    def edit(self, spec, prefix):
        super().edit(spec, prefix)
        # What the Makefile's `clean` target removes.
        for stale in ("stream_c.exe", "stream_f.exe", "stream.o", "mysecond.o"):
            force_remove(stale)
