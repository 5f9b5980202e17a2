# Copyright hpc-health contributors.
#
# SPDX-License-Identifier: BSD-3-Clause

from spack.package import *
from spack_repo.builtin.packages.darshan_runtime.package import (
    DarshanRuntime as BuiltinDarshanRuntime,
)


class DarshanRuntime(BuiltinDarshanRuntime):
    """Darshan (runtime) is a scalable HPC I/O characterization tool that
    records the I/O behaviour of MPI and POSIX applications.

    hpc-health override of builtin.darshan-runtime: versions, variants and
    dependencies are those of the builtin recipe. The only change is how the
    MPI build is configured. darshan-runtime's configure probes whether CC can
    compile an MPI program and, when it cannot, quietly builds a non-MPI
    library. With Spack's compiler wrapper as CC this happens whenever mpi.h
    is not on the compiler's default search path (e.g. Debian/Ubuntu Open MPI,
    whose headers are only reachable through mpicc): the resulting
    libdarshan.so has no MPI-IO module and writes no log for MPI programs.

    Here, for +mpi, configure is run with CC set to the MPI compiler wrapper
    and with --with-mpi, so configure either enables MPI or stops with an
    error instead of silently dropping it."""

    def configure_args(self):
        args = super().configure_args()
        if self.spec.satisfies("+mpi"):
            args.extend(["--with-mpi", f"CC={self.spec['mpi'].mpicc}"])
        return args

    @run_after("install")
    def _check_mpi_enabled(self):
        """Fail the install if a +mpi build ended up without MPI support."""
        if not self.spec.satisfies("+mpi"):
            return
        # An MPI-enabled libdarshan.so defines the MPI-IO wrappers (MPI_File_*)
        # that intercept the application's calls under LD_PRELOAD.
        nm = which("nm")
        if nm is None:
            return
        libdarshan = join_path(self.prefix.lib, "libdarshan.so")
        symbols = nm("-D", "--defined-only", libdarshan, output=str, error=str)
        if "MPI_File_open" not in symbols:
            raise InstallError(
                "darshan-runtime +mpi was built without MPI support "
                f"({libdarshan} defines no MPI_File_open wrapper)"
            )
