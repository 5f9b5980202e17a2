# Copyright hpc-health contributors.
#
# SPDX-License-Identifier: BSD-3-Clause

import pathlib

from spack.package import *
from spack_repo.builtin.build_systems.cmake import CMakePackage

#: kernels/ of the hpc-health checkout that holds this recipe:
#: <checkout>/spack_repo/hpc_health/packages/hpc_health_kernels/package.py
_CHECKOUT_KERNELS = pathlib.Path(__file__).resolve().parents[4] / "kernels"


class HpcHealthKernels(CMakePackage):
    """MPI micro-kernels of the hpc-health regression suite: `halo`, a
    nearest-neighbour halo exchange, and `barrier`, an MPI_Barrier latency
    loop. Both are installed into bin/.

    The source is the kernels/ folder of the hpc-health checkout that holds
    this recipe, so there is nothing to download. Preferably build it as a
    develop spec, so that Spack rebuilds it whenever kernels/ changes: in a
    Spack environment run `spack develop --no-clone --path <checkout>/kernels
    hpc-health-kernels@=1.0` and `spack add hpc-health-kernels@=1.0` (or
    write the equivalent `develop:` entry in spack.yaml), then `spack
    install`. A plain `spack install hpc-health-kernels` also works and builds
    <checkout>/kernels, but it is not rebuilt when those sources change
    (reinstall with `spack install --overwrite`)."""

    # hpc-health has no public homepage or GitHub maintainers yet; add
    # `homepage = ...` and `maintainers("<github-handle>", ...)` once it has.

    license("BSD-3-Clause")

    # The sources travel with the recipe instead of being fetched: Spack
    # fetches and stages nothing (as for a bundle package) and CMake is
    # pointed at the source tree directly, see root_cmakelists_dir.
    has_code = False

    version("1.1")  # barrier: the first MPI_Barrier after MPI_Init
    version("1.0")

    depends_on("c", type="build")
    depends_on("cmake@3.15:", type="build")
    depends_on("mpi")

    @property
    def root_cmakelists_dir(self):
        # A develop spec builds its develop path; any other build the kernels/
        # folder next to this recipe.
        if self.spec.satisfies("dev_path=*"):
            return self.stage.source_path
        if not (_CHECKOUT_KERNELS / "CMakeLists.txt").is_file():
            raise InstallError(
                f"hpc-health-kernels: no CMakeLists.txt in {_CHECKOUT_KERNELS}; "
                "build it as a develop spec (`spack develop --path <checkout>/kernels`)"
            )
        return str(_CHECKOUT_KERNELS)

    def cmake_args(self):
        # Point CMake's FindMPI at the MPI Spack chose, so the kernels link the
        # same MPI that mpirun comes from (FindMPI asks the wrapper).
        return [self.define("MPI_C_COMPILER", self.spec["mpi"].mpicc)]
